/* The CUDA flavour's C side (built only with NP_HAVE_CUDA, docs/gpu.md): what the CUDA
 * runtime sees, the CUDA functions of the codelets (StarPU cuda_funcs: same buffers and
 * arguments as the CPU function of the same codelet, device pointers, launched on the
 * worker's stream starpu_cuda_get_local_stream() and returning without a sync, i.e.
 * STARPU_CUDA_ASYNC, unless a comment says otherwise), and the CUDA slots of the built-in
 * layer kinds. Kernels are deterministic: no atomics, sums in a fixed order. */
#ifndef NP_CUDA_CUDA_H
#define NP_CUDA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "nestpipe/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The devices CUDA sees (0 without a driver, a GPU, or the CUDA flavour), asked once, and
 * what np_cuda_info (nestpipe.h) says about them (codelets/cuda/info.c; every build). */
int np_cuda_devices(void);

/* "CUDA runtime 13.0, driver present, 1 device: NVIDIA H200 (sm_90, 140 GiB)"; returns
 * the number of devices (0 without a driver or a GPU). The CUDA flavour only
 * (codelets/cuda/devices.cu). */
int np_cuda_describe(char *buf, size_t n);
/* Makes `device` the calling thread's current device (cudaSetDevice); errors are left to
 * the first real call on it. */
void np_cuda_use_device(int device);

/* The batch-wide ops' launchers (codelets/cuda/ops.cu), which the codelets' CUDA functions wrap
 * (codelets/ops.cu): an explicit stream (a cudaStream_t) and device
 * pointers, so tests call them without StarPU workers. All launch on the stream and return
 * without a sync unless said otherwise; n == 0 launches nothing. */
/* P (n, S, d) = the chunk's bags (samples row0 .. row0+n-1 of off (T, nb+1)) summed over
 * rows (U, d) in key order, table 0's keys one slot each when it is a sequence of L > 0
 * (S = T - 1 + max(L, 1) slots): one thread per (sample, slot, column). */
void np_cuda_pool_fwd_on(void *stream, const float *rows, const uint32_t *off,
                         const int64_t *pos, float *P, long nb, long row0, long n, int T, int L,
                         int d);
/* g (U, d) += the chunk's dP (n, S, d), one thread per (table, column), samples then keys
 * in order. uq: NULL, or a DEVICE pointer to the window's row count (meta +
 * NP_META_WUQ(T, w)), read by the kernel, whose first uq*d floats of g are zeroed first
 * (at most g_cap, the floats g holds). */
void np_cuda_pool_bwd_on(void *stream, const float *dP, const uint32_t *off,
                         const int64_t *pos, const int64_t *uq, float *g, size_t g_cap,
                         long nb, long row0, long n, int T, int L, int d);
/* *loss (one double, device) = the BCE summed over the n samples in order (one thread);
 * with output != 0 (loss = output) the sum of z itself, as np_loss_fwd. */
void np_cuda_bce_fwd_on(void *stream, const float *z, const float *y, double *loss, long n,
                        int output);
/* dz (n) = (sigmoid(z) - y) * scale, in double, rounded once; scale with output != 0. */
void np_cuda_bce_bwd_on(void *stream, const float *z, const float *y, float scale, float *dz,
                        long n, int output);
/* out = in[0] + ... + in[k-1] elementwise (1 <= k <= 64; in is a HOST array of device
 * pointers). rows NULL: count floats; else rows is a DEVICE pointer to a row count read by
 * the kernel, count = *rows * width floats, at most out_cap. */
void np_cuda_sum_on(void *stream, const float *const *in, int k, size_t count,
                    const int64_t *rows, int width, float *out, size_t out_cap);
/* w (n) -= lr * g (n); returns 1 when the updated w holds a NaN or an inf. SYNCHRONOUS:
 * waits for the stream to get that answer to the host (a flag per host thread). */
int np_cuda_dense_update_on(void *stream, float *w, const float *g, size_t n, float lr);

#ifdef __cplusplus
}
#endif
#endif
