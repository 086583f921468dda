/* Exchanges of embedding rows (owner -> requester) and of their gradients (back), and the
 * all-reduce of dense gradients: collectives (NP_KIND_EXCHANGE kinds), so they take the comm
 * token RW, which makes every rank issue them in the same order, and run on the
 * communication worker, or with --comm nccl (a device backend in the args) as the _nccl
 * codelets on the rank's CUDA worker, which is the only kind of worker those codelets have. */
#include "runtime/comm/backend.h"
#include "tasks/tasks.h"

/* The codelet of a collective: the CPU one, which np_task_submit sends to the
 * communication worker, unless the args carry a device backend (NCCL), whose codelet (nccl,
 * NULL in the CPU-only flavour, which has no device backend) runs on the CUDA worker: it has
 * only CUDA functions, and c->arch says so, which keeps it off the communication worker. */
static struct starpu_codelet *pick(const np_cl_xchg_args *a, struct starpu_codelet *cpu,
                                   struct starpu_codelet *nccl, np_task_ctx *c) {
    if (nccl && a->be && a->be->ops->on_device) {
        c->arch = STARPU_CUDA;
        return nccl;
    }
    return cpu;
}
#ifdef NP_HAVE_CUDA
#define NCCL_CL(name) (&name##_nccl)
#else
#define NCCL_CL(name) NULL
#endif

np_status np_submit_exchange_rows(const np_task_ctx *c, const np_cl_xchg_args *a,
                                  const np_task_bufs *b, np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_WUQ(a->T, a->w)); /* the window's rows */
    struct starpu_codelet *cl = pick(a, &np_cl_exchange_rows, NCCL_CL(np_cl_exchange_rows), &cc);
    return np_task_submit_xchg(&cc, cl, NP_NODE_EXCHANGE_EMB, b->n, b->h, b->m, a, err);
}

np_status np_submit_rows_fresh(const np_task_ctx *c, const np_cl_xchg_args *a,
                               const np_task_bufs *b, np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_WUQ(a->T, a->w));
    return np_task_submit_xchg(&cc, &np_cl_rows_fresh, NP_NODE_EXCHANGE_EMB, b->n, b->h, b->m, a,
                               err);
}

np_status np_submit_rows_shared(const np_task_ctx *c, const np_cl_xchg_args *a,
                                const np_task_bufs *b, np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_WUQ(a->T, a->w));
    return np_task_submit_xchg(&cc, &np_cl_rows_shared, NP_NODE_EXCHANGE_EMB, b->n, b->h, b->m, a,
                               err);
}

np_status np_submit_exchange_grads(const np_task_ctx *c, const np_cl_xchg_args *a,
                                   const np_task_bufs *b, np_error *err) {
    np_task_ctx cc = np_task_cost(c, (uint32_t)(a->w == 0), 2, NP_META_WUQ(a->T, a->w));
    struct starpu_codelet *cl = pick(a, &np_cl_exchange_grads, NCCL_CL(np_cl_exchange_grads), &cc);
    return np_task_submit_xchg(&cc, cl, NP_NODE_EXCHANGE_GRAD, b->n, b->h, b->m, a, err);
}

np_status np_submit_allreduce(const np_task_ctx *c, const np_cl_xchg_args *a,
                              const np_task_bufs *b, np_error *err) {
    np_task_ctx cc = *c;
    struct starpu_codelet *cl = pick(a, &np_cl_allreduce, NCCL_CL(np_cl_allreduce), &cc);
    return np_task_submit_xchg(&cc, cl, NP_NODE_ALLREDUCE, b->n, b->h, b->m, a, err);
}
