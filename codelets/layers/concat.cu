// The concat kind's CUDA slots: one copy kernel each way over codelets/cuda/elem.h, reading the
// node's inputs in place as the parts of one row per sample.
#include <string.h>

#include "codelets/cuda/elem.h"
#include "codelets/cuda/launch.cuh"
#include "codelets/layers/layers.h"

__global__ void k_concat_fwd(np_parts P, float *out, size_t total) {
    NP_CUDA_FOR(e, total) np_elem_concat_fwd(&P, out, e);
}
__global__ void k_concat_bwd(np_parts P, const float *dout, size_t total) {
    NP_CUDA_FOR(e, total) np_elem_concat_bwd(&P, dout, e);
}

extern "C" void np_cuda_concat_fwd(const np_layer_io *io, void *stream) {
    np_parts P = np_cuda_parts_of(io, 0);
    size_t total = (size_t)(io->n > 0 ? io->n : 0) * (size_t)P.c0[P.n];
    if (!total) return;
    k_concat_fwd<<<np_cuda_grid(total), NP_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(P, io->out,
                                                                                  total);
    NP_CUDA_LAUNCHED();
}
extern "C" void np_cuda_concat_bwd(const np_layer_io *io, void *stream) {
    np_parts P = np_cuda_parts_of(io, 1);
    size_t total = (size_t)(io->n > 0 ? io->n : 0) * (size_t)P.c0[P.n];
    if (!total) return;
    k_concat_bwd<<<np_cuda_grid(total), NP_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(P, io->dout,
                                                                                  total);
    NP_CUDA_LAUNCHED();
}
