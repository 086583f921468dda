// The linear kind's CUDA slots: the step sequence of codelets/cuda/plan.h (one cuBLAS product, the
// bias and ReLU fused in one elementwise kernel; backward the mask, the column sums and two
// products) on the CUDA worker's stream. fp32 only: io->precision is ignored.
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/plan.h"
#include "codelets/layers/layers.h"

extern "C" void np_cuda_linear_fwd(const np_layer_io *io, void *stream) {
    np_cuda_steps c;
    np_gpu_ops o = np_cuda_step_ops(&c, stream);
    np_seq_linear_layer_fwd(&o, io);
}
extern "C" void np_cuda_linear_bwd(const np_layer_io *io, void *stream) {
    np_cuda_steps c;
    np_gpu_ops o = np_cuda_step_ops(&c, stream);
    np_seq_linear_layer_bwd(&o, io);
}
