// The cross kind's CUDA slots: the step sequence of codelets/cuda/plan.h (full or low-rank W as
// cuBLAS products, the elementwise x0 * u + x_l) on the CUDA worker's stream. fp32 only.
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/plan.h"
#include "codelets/layers/layers.h"

extern "C" void np_cuda_cross_fwd(const np_layer_io *io, void *stream) {
    np_cuda_steps c;
    np_gpu_ops o = np_cuda_step_ops(&c, stream);
    np_seq_cross_fwd(&o, io);
}
extern "C" void np_cuda_cross_bwd(const np_layer_io *io, void *stream) {
    np_cuda_steps c;
    np_gpu_ops o = np_cuda_step_ops(&c, stream);
    np_seq_cross_bwd(&o, io);
}
