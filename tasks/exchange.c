/* Exchanges of embedding rows (owner -> requester) and of their gradients (back), and the
 * all-reduce of dense gradients: collectives (NP_KIND_EXCHANGE kinds), so they take the comm
 * token RW, which makes every rank issue them in the same order, and run on the
 * communication worker, or with --comm nccl (a device backend in the args) as the _nccl
 * codelets on the rank's CUDA worker, which is the only kind of worker those codelets have. */
#include "comm/backend.h"
#include "tasks/tasks.h"

#define R STARPU_R
#define W STARPU_W
#define RW STARPU_RW

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

np_status np_submit_exchange_rows(const np_task_ctx *c, const np_cl_xchg_args *a, np_h E, np_h map,
                                  np_h keys, np_h meta, np_h Rin, np_h sbuf, np_h token,
                                  np_error *err) {
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_WUQ(a->T, a->w)); /* the window's rows */
    struct starpu_codelet *cl = pick(a, &np_cl_exchange_rows, NCCL_CL(np_cl_exchange_rows), &cc);
    np_h h[7] = {E, map, meta, Rin, sbuf, token, keys};
    enum starpu_data_access_mode m[7] = {R, R, R, W, W, RW, R};
    return np_task_submit_xchg(&cc, cl, NP_NODE_EXCHANGE_EMB, cl == &np_cl_exchange_rows ? 7 : 6,
                               h, m, a, err);
}

np_status np_submit_rows_fresh(const np_task_ctx *c, const np_cl_xchg_args *a, np_h E, np_h map,
                               np_h keys, np_h meta, np_h Rin, np_h sbuf, np_h token, np_h obits,
                               np_h rbits, np_h uniq_prev, np_h meta_prev, np_h uniq,
                               np_error *err) {
    np_h h[12] = {E, map, meta, Rin, sbuf, token, obits, rbits, uniq_prev, meta_prev, uniq, keys};
    enum starpu_data_access_mode m[12] = {R, R, R, W, W, RW, W, W, R, R, R, R};
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_WUQ(a->T, a->w));
    return np_task_submit_xchg(&cc, &np_cl_rows_fresh, NP_NODE_EXCHANGE_EMB, 12, h, m, a, err);
}

np_status np_submit_rows_shared(const np_task_ctx *c, const np_cl_xchg_args *a, np_h E, np_h map,
                                np_h keys, np_h meta, np_h Rin, np_h sbuf, np_h token, np_h obits,
                                np_h rbits, np_h rbuf, np_error *err) {
    /* Rin RW: the fresh rows stay */
    np_h h[10] = {E, map, meta, Rin, sbuf, token, obits, rbits, rbuf, keys};
    enum starpu_data_access_mode m[10] = {R, R, R, RW, W, RW, R, R, W, R};
    np_task_ctx cc = np_task_cost(c, 0, 2, NP_META_WUQ(a->T, a->w));
    return np_task_submit_xchg(&cc, &np_cl_rows_shared, NP_NODE_EXCHANGE_EMB, 10, h, m, a, err);
}

np_status np_submit_exchange_grads(const np_task_ctx *c, const np_cl_xchg_args *a, np_h grows,
                                   np_h map, np_h keys, np_h meta, np_h gE, np_h rbuf, np_h token,
                                   np_error *err) {
    np_task_ctx cc = np_task_cost(c, (uint32_t)(a->w == 0), 2, NP_META_WUQ(a->T, a->w));
    struct starpu_codelet *cl = pick(a, &np_cl_exchange_grads, NCCL_CL(np_cl_exchange_grads), &cc);
    np_h h[7] = {grows, map, meta, gE, rbuf, token, keys};
    /* window 0 starts the sum, the others add to it */
    enum starpu_data_access_mode m[7] = {R, R, R, a->w ? RW : W, W, RW, R};
    return np_task_submit_xchg(&cc, cl, NP_NODE_EXCHANGE_GRAD, cl == &np_cl_exchange_grads ? 7 : 6, h,
                          m, a, err);
}

np_status np_submit_allreduce(const np_task_ctx *c, const np_cl_xchg_args *a, np_h glocal,
                              np_h gdense, np_h all, np_h token, np_error *err) {
    np_task_ctx cc = *c;
    struct starpu_codelet *cl = pick(a, &np_cl_allreduce, NCCL_CL(np_cl_allreduce), &cc);
    np_h h[4] = {glocal, gdense, all, token};
    enum starpu_data_access_mode m[4] = {R, W, W, RW};
    return np_task_submit_xchg(&cc, cl, NP_NODE_ALLREDUCE, 4, h, m, a, err);
}
