/* The CUDA flavour's C side (built only with NP_HAVE_CUDA, docs/gpu.md): what the CUDA
 * runtime sees, the CUDA functions of the codelets (StarPU cuda_funcs: same buffers and
 * arguments as the CPU function of the same codelet, device pointers, launched on the
 * worker's stream starpu_cuda_get_local_stream() and returning without a sync, i.e.
 * STARPU_CUDA_ASYNC, unless a comment says otherwise), and the CUDA slots of the built-in
 * layer kinds. Kernels are deterministic: no atomics, sums in a fixed order. */
#ifndef NP_CUDA_CUDA_H
#define NP_CUDA_CUDA_H

#include <stddef.h>

#include "nestpipe/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "CUDA runtime 13.0, driver present, 1 device: NVIDIA H200 (sm_90, 140 GiB)"; returns
 * the number of devices (0 without a driver or a GPU). */
int np_cuda_describe(char *buf, size_t n);

/* Codelet twins (codelets/embbag.c, bce.c, reduce.c, optim.c) */
void np_cuda_pool_fwd(void *buffers[], void *cl_arg);
void np_cuda_pool_bwd(void *buffers[], void *cl_arg);
void np_cuda_bce_fwd(void *buffers[], void *cl_arg);
void np_cuda_bce_bwd(void *buffers[], void *cl_arg);
void np_cuda_sum(void *buffers[], void *cl_arg);
void np_cuda_dense_update(void *buffers[], void *cl_arg);

/* Layer kinds' CUDA slots (np_layer_def.cuda_fwd / cuda_bwd); stream is a cudaStream_t. */
void np_cuda_linear_fwd(const np_layer_io *io, void *stream);
void np_cuda_linear_bwd(const np_layer_io *io, void *stream);
void np_cuda_dot_fwd(const np_layer_io *io, void *stream);
void np_cuda_dot_bwd(const np_layer_io *io, void *stream);
void np_cuda_concat_fwd(const np_layer_io *io, void *stream);
void np_cuda_concat_bwd(const np_layer_io *io, void *stream);
void np_cuda_cross_fwd(const np_layer_io *io, void *stream);
void np_cuda_cross_bwd(const np_layer_io *io, void *stream);

#ifdef __cplusplus
}
#endif
#endif
