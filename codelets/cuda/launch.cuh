// Launch helpers shared by the CUDA files (C++ only): the grid of a grid-stride kernel,
// error checks that stop the process with file:line (a kernel has no way to report), and
// the cuBLAS handle for a stream.
#ifndef NP_CUDA_LAUNCH_CUH
#define NP_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelets/cuda/elem.h"
#include "codelets/cuda/plan.h"

#define NP_CUDA_BLOCK 256

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, never more than
// there are elements; 0 when n == 0 (the caller launches nothing).
static inline unsigned np_cuda_grid(size_t n) {
    size_t b = (n + NP_CUDA_BLOCK - 1) / NP_CUDA_BLOCK;
    return b > 65535u ? 65535u : (unsigned)b;
}

// The index of this thread and the stride of a grid-stride loop.
#define NP_CUDA_FOR(e, n)                                                                          \
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < (n);                        \
         e += (size_t)gridDim.x * blockDim.x)

static inline void np_cuda_die(const char *what, const char *why, const char *file, int line) {
    // Only a broken driver, a bad launch or an exhausted device gets here, inside a kernel
    // call with no way to report: say what failed rather than compute something else.
    fprintf(stderr, "nestpipe: error: %s:%d: %s failed: %s\n", file, line, what, why);
    abort();
}
#define NP_CUDA_CHECK(call)                                                                        \
    do {                                                                                           \
        cudaError_t np_e_ = (call);                                                                \
        if (np_e_ != cudaSuccess)                                                                  \
            np_cuda_die(#call, cudaGetErrorString(np_e_), __FILE__, __LINE__);                     \
    } while (0)
#define NP_CUBLAS_CHECK(call)                                                                      \
    do {                                                                                           \
        cublasStatus_t np_s_ = (call);                                                             \
        if (np_s_ != CUBLAS_STATUS_SUCCESS)                                                        \
            np_cuda_die(#call, cublasGetStatusString(np_s_), __FILE__, __LINE__);                  \
    } while (0)
// After a launch: a bad configuration shows up here, without a sync.
#define NP_CUDA_LAUNCHED() NP_CUDA_CHECK(cudaGetLastError())

// A cuBLAS handle bound to stream s (codelets/cuda/steps.cu).
cublasHandle_t np_cuda_blas(cudaStream_t s);

// The step table of codelets/cuda/plan.h on a stream (codelets/cuda/steps.cu): c keeps the stream
// and the cuBLAS handle, taken at the first product. For the layer kinds' CUDA slots.
typedef struct np_cuda_steps {
    cudaStream_t s;
    cublasHandle_t h;
} np_cuda_steps;
np_gpu_ops np_cuda_step_ops(np_cuda_steps *c, void *stream);

// A node's inputs (and with bwd their gradients) as the parts of one row per sample, for
// the kinds that read them in place (dot, concat).
static inline np_parts np_cuda_parts_of(const np_layer_io *io, int bwd) {
    np_parts P;
    memset(&P, 0, sizeof P);
    P.n = io->shape->n_in;
    for (int k = 0; k < P.n; k++) {
        P.base[k] = io->in[k];
        P.dbase[k] = bwd ? io->din[k] : NULL;
        P.w[k] = io->shape->in[k];
        P.c0[k + 1] = P.c0[k] + P.w[k];
    }
    return P;
}

#endif
