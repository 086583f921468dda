// The slice kind's CUDA slots: one copy kernel each way, a thread per output element
// (forward) or per input-gradient element (backward, which also writes the zeros outside
// [from, to) so din is overwritten whole, as the CPU kernel does). Plain copies: the same
// bits as codelets/layers/slice.c.
#include <string.h>

#include "codelets/cuda/launch.cuh"
#include "codelets/layers/layers.h"

// Thread e in [0, n*out) copies column from + e % out of sample e / out.
__global__ void k_slice_fwd(const float *in, float *out, size_t w, size_t ow, size_t from,
                            size_t total) {
    NP_CUDA_FOR(e, total) {
        size_t s = e / ow, c = e % ow;
        out[e] = in[s * w + from + c];
    }
}
// Thread e in [0, n*w) writes din[e]: dout's column when e % w lies in [from, from + ow),
// else 0.
__global__ void k_slice_bwd(const float *dout, float *din, size_t w, size_t ow, size_t from,
                            size_t total) {
    NP_CUDA_FOR(e, total) {
        size_t s = e / w, c = e % w;
        din[e] = c >= from && c < from + ow ? dout[s * ow + (c - from)] : 0.0f;
    }
}

extern "C" void np_cuda_slice_fwd(const np_layer_io *io, void *stream) {
    size_t w = (size_t)io->shape->in[0], ow = (size_t)io->shape->out;
    size_t total = (size_t)(io->n > 0 ? io->n : 0) * ow;
    if (!total) return;
    k_slice_fwd<<<np_cuda_grid(total), NP_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(
        io->in[0], io->out, w, ow, (size_t)io->hp->i[0], total);
    NP_CUDA_LAUNCHED();
}
extern "C" void np_cuda_slice_bwd(const np_layer_io *io, void *stream) {
    if (!io->din[0]) return;
    size_t w = (size_t)io->shape->in[0], ow = (size_t)io->shape->out;
    size_t total = (size_t)(io->n > 0 ? io->n : 0) * w;
    if (!total) return;
    k_slice_bwd<<<np_cuda_grid(total), NP_CUDA_BLOCK, 0, (cudaStream_t)stream>>>(
        io->dout, io->din[0], w, ow, (size_t)io->hp->i[0], total);
    NP_CUDA_LAUNCHED();
}
