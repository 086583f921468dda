/* The CUDA functions of the NCCL codelets exchange_rows_nccl, exchange_grads_nccl and
 * allreduce_nccl (codelets/exchange.c, the CUDA flavour only): the same buffers and
 * arguments as the CPU functions exchange_rows, exchange_grads and allreduce, device
 * pointers, the args' NCCL backend (np_cl_xchg_args.be) on the worker's stream. */
#ifndef NP_CODELETS_EXCHANGE_NCCL_H
#define NP_CODELETS_EXCHANGE_NCCL_H

#ifdef __cplusplus
extern "C" {
#endif

void np_cuda_exchange_rows(void *buffers[], void *cl_arg);
void np_cuda_exchange_grads(void *buffers[], void *cl_arg);
void np_cuda_allreduce(void *buffers[], void *cl_arg);

#ifdef __cplusplus
}
#endif
#endif
