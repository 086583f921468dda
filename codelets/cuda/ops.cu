// The batch-wide ops on the GPU (codelets/cuda/cuda.h): pooling, BCE, the fixed-order sum and the
// dense SGD step, as kernels and their launchers on an explicit stream. Deterministic: no
// atomics; every sum in the CPU kernels' order (codelets/cuda/elem.h). Not here: the StarPU
// codelets' CUDA functions that call them (codelets/ops.cu), the layer kinds' slots
// (codelets/layers/<kind>.cu).
#include <string.h>

#include "codelets/cuda/cuda.h"
#include "codelets/cuda/elem.h"
#include "codelets/cuda/launch.cuh"

// ---- pooling

__global__ void k_pool_fwd(const float *rows, const uint32_t *off, const int64_t *pos, long nb,
                           long row0, int T, int L, int d, float *P, size_t total) {
    NP_CUDA_FOR(e, total) np_elem_pool_fwd(rows, off, pos, nb, row0, T, L, d, P, e);
}

__global__ void k_pool_bwd(const float *dP, const uint32_t *off, const int64_t *pos, long nb,
                           long row0, long n, int T, int L, int d, float *g, size_t total) {
    NP_CUDA_FOR(e, total) np_elem_pool_bwd(dP, off, pos, nb, row0, n, T, L, d, g, e);
}

// g[0 .. min(*rows * d, cap)) = 0: the count lives on the device, cap sizes the grid.
__global__ void k_zero_counted(float *g, const int64_t *rows, int d, size_t cap) {
    int64_t r = *rows;
    size_t m = r > 0 ? (size_t)r * (size_t)d : 0;
    if (m > cap) m = cap;
    NP_CUDA_FOR(e, m) g[e] = 0.0f;
}

extern "C" void np_cuda_pool_fwd_on(void *stream, const float *rows, const uint32_t *off,
                                    const int64_t *pos, float *P, long nb, long row0, long n, int T,
                                    int L, int d) {
    size_t S = (size_t)T - 1 + (size_t)np_elem_seq_slots(L);
    size_t total = (size_t)(n > 0 ? n : 0) * S * (size_t)d;
    if (!total) return;
    k_pool_fwd<<<np_cuda_grid(total), NP_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(
        rows, off, pos, nb, row0, T, L, d, P, total);
    NP_CUDA_LAUNCHED();
}

extern "C" void np_cuda_pool_bwd_on(void *stream, const float *dP, const uint32_t *off,
                                    const int64_t *pos, const int64_t *uq, float *g, size_t g_cap,
                                    long nb, long row0, long n, int T, int L, int d) {
    cudaStream_t s = (cudaStream_t)stream;
    if (uq && g_cap) {
        k_zero_counted<<<np_cuda_grid(g_cap), NP_CUDA_BLOCK, 0, s>>>(g, uq, d, g_cap);
        NP_CUDA_LAUNCHED();
    }
    size_t total = (size_t)T * (size_t)d;
    if (n <= 0 || !total) return;
    k_pool_bwd<<<np_cuda_grid(total), NP_CUDA_BLOCK, 0, s>>>(dP, off, pos, nb, row0, n, T, L, d,
                                                             g, total);
    NP_CUDA_LAUNCHED();
}

// ---- BCE

// One thread: the chunk's loss summed in sample order, as the CPU does (deterministic;
// chunks are a few thousand samples at most).
__global__ void k_bce_fwd(const float *z, const float *y, double *loss, long n, int output) {
    if (blockIdx.x || threadIdx.x) return;
    double sum = 0.0;
    for (long s = 0; s < n; s++)
        sum = np_dadd(sum, output ? (double)z[s] : np_elem_bce(z[s], y[s]));
    *loss = sum;
}

__global__ void k_bce_bwd(const float *z, const float *y, float scale, float *dz, size_t n,
                          int output) {
    NP_CUDA_FOR(e, n) dz[e] = output ? scale : np_elem_bce_grad(z[e], y[e], scale);
}

extern "C" void np_cuda_bce_fwd_on(void *stream, const float *z, const float *y, double *loss,
                                   long n, int output) {
    k_bce_fwd<<<1, 1, 0, (cudaStream_t)stream>>>(z, y, loss, n, output); // n == 0 writes 0
    NP_CUDA_LAUNCHED();
}

extern "C" void np_cuda_bce_bwd_on(void *stream, const float *z, const float *y, float scale,
                                   float *dz, long n, int output) {
    if (n <= 0) return;
    k_bce_bwd<<<np_cuda_grid((size_t)n), NP_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(z, y, scale, dz,
                                                                                   (size_t)n, output);
    NP_CUDA_LAUNCHED();
}

// ---- fixed-order sum

// count floats, or *rows * width (device count) bounded by cap when rows is given.
__global__ void k_sum(np_sum_in in, int k, size_t count, const int64_t *rows, int width,
                      float *out) {
    size_t m = count;
    if (rows) {
        int64_t r = *rows;
        size_t c = r > 0 ? (size_t)r * (size_t)width : 0;
        m = c < count ? c : count;
    }
    NP_CUDA_FOR(e, m) out[e] = np_elem_sum(&in, k, e);
}

extern "C" void np_cuda_sum_on(void *stream, const float *const *in, int k, size_t count,
                               const int64_t *rows, int width, float *out, size_t out_cap) {
    if (k < 1 || k > NP_SUM_MAX_IN)
        np_cuda_die("np_cuda_sum_on", "k out of [1, 64]", __FILE__, __LINE__);
    np_sum_in p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < k; i++)
        p.p[i] = in[i];
    size_t m = rows ? out_cap : count; // launch bound; the kernel reads the real count
    if (!m) return;
    k_sum<<<np_cuda_grid(m), NP_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(p, k, m, rows, width, out);
    NP_CUDA_LAUNCHED();
}

// ---- dense SGD with the finiteness check

// flag is zeroed before the launch; a thread that wrote a non-finite value stores 1 (every
// such store writes the same value, so the outcome does not depend on the order).
__global__ void k_sgd(float *w, const float *g, size_t n, float lr, int *flag) {
    int bad = 0;
    NP_CUDA_FOR(e, n) bad |= np_elem_sgd(w, g, lr, e);
    if (bad) *flag = 1;
}

// Per host thread (a StarPU CUDA worker keeps its device): the device flag and its pinned
// host copy, allocated at first use and kept for the thread's life.
static thread_local int *flag_dev, *flag_host;

extern "C" int np_cuda_dense_update_on(void *stream, float *w, const float *g, size_t n, float lr) {
    cudaStream_t s = (cudaStream_t)stream;
    if (!n) return 0;
    if (!flag_dev) {
        NP_CUDA_CHECK(cudaMalloc((void **)&flag_dev, sizeof *flag_dev));
        NP_CUDA_CHECK(cudaMallocHost((void **)&flag_host, sizeof *flag_host));
    }
    NP_CUDA_CHECK(cudaMemsetAsync(flag_dev, 0, sizeof *flag_dev, s));
    k_sgd<<<np_cuda_grid(n), NP_CUDA_BLOCK, 0, s>>>(w, g, n, lr, flag_dev);
    NP_CUDA_LAUNCHED();
    NP_CUDA_CHECK(
        cudaMemcpyAsync(flag_host, flag_dev, sizeof *flag_dev, cudaMemcpyDeviceToHost, s));
    // The one synchronous twin: the task's callback reads out.nonfinite on the host.
    NP_CUDA_CHECK(cudaStreamSynchronize(s));
    return *flag_host;
}

