/* The built-in layer kinds, one file each with its CPU kernels (and in the CUDA flavour its
 * CUDA slots in <kind>.cu beside it): linear, dot, concat, cross, slice, hstu, nextitem. Each definition is
 * registered by the model's registry (runtime/model/layer.c) at start-up; the kernels are also
 * called directly by tests and benches. Layers know their buffers and the public layer API
 * (nestpipe/layer.h), never the model, the graph or the engine. */
#ifndef NP_LAYERS_LAYERS_H
#define NP_LAYERS_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "nestpipe/layer.h"

/* Built-in kinds (codelets/layers/<kind>.c). */
extern const np_layer_def np_layer_linear; /* i[0] out width, i[1] ReLU after (1) */
extern const np_layer_def np_layer_dot;    /* DLRM dot interaction over d-wide vectors */
extern const np_layer_def np_layer_concat; /* [in0 || in1 || ...] */
extern const np_layer_def np_layer_cross;  /* DCN-v2 cross; i[0] rank (0: full W) */
extern const np_layer_def np_layer_slice;  /* columns [i[0], i[1]) (i[1] = 0: to the end) */
extern const np_layer_def np_layer_hstu;   /* HSTU block; i[0] len, i[1] heads, i[2] buckets */
extern const np_layer_def np_layer_nextitem; /* next-item sampled softmax loss; i[0] len */

/* ---- hstu: the relative-position bucket of distance delta >= 0 among nb buckets */
int np_hstu_bucket(int delta, int nb);

/* ---- linear: y = x W^T + b, then max(y, 0) with NP_GEMM_RELU in flags; NP_GEMM_BF16 in
 * flags takes the products on bf16 inputs (oneDNN, codelets/kernels/gemm.h) */
void np_linear_fwd(const float *x, /* (B, in) */
                   const float *W, /* (out, in) */
                   const float *b, /* (out) */
                   float *y,       /* (B, out) */
                   long B, int in, int out, unsigned flags);

/* dx = dy W (skipped when dx is NULL), dW = dy^T x, db = column sums of dy (left alone
 * with NP_LINEAR_DB_DONE in flags: the caller formed them, np_relu_bwd_colsum). */
#define NP_LINEAR_DB_DONE 0x100u
void np_linear_bwd(const float *x,  /* (B, in) */
                   const float *W,  /* (out, in) */
                   const float *dy, /* (B, out) */
                   float *dx,       /* (B, in) or NULL */
                   float *dW,       /* (out, in) */
                   float *db,       /* (out) */
                   long B, int in, int out, unsigned flags);

/* ---- dot interaction (T1 >= 1)
 * F holds the T1 = T+1 vectors of each sample: F[s, 0, :] is the bottom MLP output,
 * F[s, 1+t, :] the pooled table t. out[s] = [F[s,0,:], dot(F[s,i],F[s,j]) for i=1..T1-1,
 * j=0..i-1 (strict lower triangle, row by row)], width d + T1(T1-1)/2. */
void np_interact_fwd(const float *F,                     /* (B, T1, d) */
                     long B, int T1, int d, float *out); /* (B, d + T1*(T1-1)/2) */
/* The same with caller scratch ws of T1 (d + 1) floats (NULL: its own, on the stack or
 * the heap for large T1 d): the same bits either way. */
void np_interact_fwd_ws(const float *F, long B, int T1, int d, float *out, float *ws);
/* Blocked forms (16 samples a vector register, the CPU's widest unit chosen at run time),
 * with the same bits: ws holds np_interact_ws_floats(T1, d) floats. */
size_t np_interact_ws_floats(int T1, int d);
void np_interact_fwd_blk(const float *F, long B, int T1, int d, float *out, float *ws);
void np_interact_bwd_blk(const float *F, const float *dout, long B, int T1, int d, float *dF,
                         float *ws);
void np_interact_bwd(const float *F,                     /* (B, T1, d) */
                     const float *dout,                  /* (B, d + T1*(T1-1)/2) */
                     long B, int T1, int d, float *dF);  /* (B, T1, d) */

#ifdef NP_HAVE_CUDA
/* The CUDA slots (np_layer_def.cuda_fwd / cuda_bwd), codelets/layers/<kind>.cu: stream is a
 * cudaStream_t, io holds device pointers. fp32 only: io->precision (bf16) is ignored. The
 * GEMMs run on cuBLAS (the StarPU CUDA worker's handle, or one per host thread outside a
 * worker) in its default math mode, so without TF32. */
#ifdef __cplusplus
extern "C" {
#endif
void np_cuda_linear_fwd(const np_layer_io *io, void *stream);
void np_cuda_linear_bwd(const np_layer_io *io, void *stream);
void np_cuda_dot_fwd(const np_layer_io *io, void *stream);
void np_cuda_dot_bwd(const np_layer_io *io, void *stream);
void np_cuda_concat_fwd(const np_layer_io *io, void *stream);
void np_cuda_concat_bwd(const np_layer_io *io, void *stream);
void np_cuda_cross_fwd(const np_layer_io *io, void *stream);
void np_cuda_cross_bwd(const np_layer_io *io, void *stream);
void np_cuda_slice_fwd(const np_layer_io *io, void *stream);
void np_cuda_slice_bwd(const np_layer_io *io, void *stream);
#ifdef __cplusplus
}
#endif
#endif

#endif
