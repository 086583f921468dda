// The dot kind's CUDA slots: one kernel each way over codelets/cuda/elem.h's element functions,
// reading the node's inputs in place as the parts of one row per sample. Deterministic: a
// thread forms one output (or input-gradient) element with its terms in order.
#include <string.h>

#include "codelets/cuda/elem.h"
#include "codelets/cuda/launch.cuh"
#include "codelets/layers/layers.h"

__global__ void k_dot_fwd(np_parts P, int T1, int d, float *out, size_t total) {
    NP_CUDA_FOR(e, total) np_elem_dot_fwd(&P, T1, d, out, e);
}
__global__ void k_dot_bwd(np_parts P, const float *dout, int T1, int d, size_t total) {
    NP_CUDA_FOR(e, total) np_elem_dot_bwd(&P, dout, T1, d, e);
}
// One thread per output element (sample, column): a copy or one pair's dot over d.
extern "C" void np_cuda_dot_fwd(const np_layer_io *io, void *stream) {
    np_parts P = np_cuda_parts_of(io, 0);
    int d = io->shape->in[0], T1 = (int)(P.c0[P.n] / d);
    size_t total = (size_t)(io->n > 0 ? io->n : 0) * (size_t)io->shape->out;
    if (!total) return;
    k_dot_fwd<<<np_cuda_grid(total), NP_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(P, T1, d, io->out,
                                                                               total);
    NP_CUDA_LAUNCHED();
}
// One thread per input-gradient element (sample, vector, column): its T1 terms in order.
extern "C" void np_cuda_dot_bwd(const np_layer_io *io, void *stream) {
    np_parts P = np_cuda_parts_of(io, 1);
    int d = io->shape->in[0], T1 = (int)(P.c0[P.n] / d);
    size_t total = (size_t)(io->n > 0 ? io->n : 0) * (size_t)P.c0[P.n];
    if (!total) return;
    k_dot_bwd<<<np_cuda_grid(total), NP_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(P, io->dout, T1, d,
                                                                               total);
    NP_CUDA_LAUNCHED();
}
