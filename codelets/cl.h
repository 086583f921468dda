/* StarPU codelets of every layer/op: one `struct starpu_codelet` each (name, perf model,
 * CPU function), defined beside its kernel in codelets/<op>.c, and the argument block each
 * CPU function unpacks. Codelets know only their buffers and these arguments; which handle
 * goes in which slot with which access mode is tasks/'s business.
 * All codelets take a variable number of buffers: the task gives the modes. */
#ifndef NP_CODELETS_CL_H
#define NP_CODELETS_CL_H

#include <stddef.h>
#include <stdint.h>
#include <starpu.h>

/* ---- dense layers, on one chunk of rows [row0, row0 + n) of the batch */

/* linear_fwd buffers: x R (rows from x_off), params R, y W (n, out) */
/* linear_bwd buffers: x R, params R, dy R (n, out), gdense RW, [dx W (n, in)] */
typedef struct np_cl_linear_args {
    long n; /* rows in the chunk */
    int in, out;
    size_t x_off;        /* floats to skip in x (the chunk's first row in a whole-batch input) */
    size_t w_off, b_off; /* W and b (and their grads) in params / gdense */
} np_cl_linear_args;
extern struct starpu_codelet np_cl_linear_fwd, np_cl_linear_bwd;

/* relu_fwd buffers: y RW; relu_bwd buffers: y R, dy RW */
typedef struct np_cl_relu_args {
    size_t n; /* elements */
} np_cl_relu_args;
extern struct starpu_codelet np_cl_relu_fwd, np_cl_relu_bwd;

/* Pooling and interaction of one chunk. Batch-wide buffers: offsets (T, nb+1) and pos
 * (nnz, index of each key in its table's gathered rows); ucnt (T+1) = first gathered row
 * of each table, [T] = total. */
typedef struct np_cl_emb_args {
    long nb;   /* samples in the whole batch */
    long row0; /* first sample of the chunk */
    long n;    /* samples in the chunk */
    int T, d;
} np_cl_emb_args;
/* pool_fwd buffers: rows R (U, d), offsets R, pos R, ucnt R, P W (n, T, d) */
/* pool_bwd buffers: dP R (n, T, d), offsets R, pos R, ucnt R, grows W (U, d) (zeroed) */
extern struct starpu_codelet np_cl_pool_fwd, np_cl_pool_bwd;
/* interact_fwd buffers: bot R (n, d), P R (n, T, d), F W (n, T+1, d), Z W (n, top_in) */
/* interact_bwd buffers: F R, dZ R, dF W (n, T+1, d), dbot W (n, d), dP W (n, T, d) */
extern struct starpu_codelet np_cl_interact_fwd, np_cl_interact_bwd;

/* bce_fwd buffers: logits R (n), labels R (whole batch), loss W (one double) */
/* bce_bwd buffers: logits R (n), labels R (whole batch), dlogits W (n) */
typedef struct np_cl_bce_args {
    long row0, n;
    float scale; /* 1 / global batch */
} np_cl_bce_args;
extern struct starpu_codelet np_cl_bce_fwd, np_cl_bce_bwd;

/* ---- batch-wide ops */

/* sum buffers: in_0 .. in_{k-1} R, [ucnt R when width > 0], out W.
 * Sums the k inputs in index order (fixed, so results never depend on the schedule).
 * count = floats when width == 0, else ucnt[T] * width. */
typedef struct np_cl_sum_args {
    int k;
    size_t count;
    int width;
    int T;
} np_cl_sum_args;
extern struct starpu_codelet np_cl_sum;

/* copy buffers: src R, ucnt R, dst W; copies ucnt[T] * width floats (local exchange) */
typedef struct np_cl_copy_args {
    int width, T;
} np_cl_copy_args;
extern struct starpu_codelet np_cl_copy;

/* route buffers: offsets R, keys R, uniq W, pos W, ucnt W. Dedups each table's keys. */
typedef struct np_cl_route_args {
    long nb;
    int T;
    const int64_t *rows; /* (T) table sizes, immutable, for the range check */
    int *fail;           /* set to 1 on a key out of range or no memory */
} np_cl_route_args;
extern struct starpu_codelet np_cl_route;

/* gather buffers: tables R, uniq R, ucnt R, E W, [state R, Es W]
 * scatter buffers: E R, uniq R, ucnt R, tables RW, [Es R, state RW] */
typedef struct np_cl_rows_args {
    int T, d;
    int with_state;
    const int64_t *row_base; /* (T+1) first row of table t in the table block, immutable */
} np_cl_rows_args;
extern struct starpu_codelet np_cl_gather, np_cl_scatter;

/* sparse_update buffers: E RW, gE R, ucnt R, [Es RW] */
typedef struct np_cl_sparse_args {
    int T, d;
    int adagrad;
    float lr, eps;
} np_cl_sparse_args;
extern struct starpu_codelet np_cl_sparse_update;

/* dense_update buffers: params RW, gdense R */
typedef struct np_cl_dense_args {
    size_t n;
    float lr;
} np_cl_dense_args;
extern struct starpu_codelet np_cl_dense_update;

/* prefetch buffers: dense W, label W, offsets W, keys W: copies *src into the slot */
typedef struct np_cl_prefetch_args {
    const void *src; /* const np_batch *, valid until the task ran */
} np_cl_prefetch_args;
/* h2d buffers: the slot's handles, RW; nothing to move on CPU-only builds */
extern struct starpu_codelet np_cl_prefetch, np_cl_h2d;

/* Defines codelet `var` running CPU function `fn`, with a history-based perf model whose
 * symbol (and the codelet's name, shown in traces) is `sym`. */
#define NP_CODELET(var, fn, sym)                                                                   \
    static struct starpu_perfmodel var##_model = {.type = STARPU_HISTORY_BASED, .symbol = sym};    \
    struct starpu_codelet var = {.cpu_funcs = {fn},                                                \
                                 .cpu_funcs_name = {#fn},                                          \
                                 .nbuffers = STARPU_VARIABLE_NBUFFERS,                             \
                                 .model = &var##_model,                                            \
                                 .name = sym}

/* The data pointer of buffer i of a task (every nestpipe handle is a vector). */
#define NP_BUF(buffers, i) ((void *)STARPU_VECTOR_GET_PTR((buffers)[i]))

#endif
