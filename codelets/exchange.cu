// The NCCL codelets' CUDA functions (codelets/exchange_nccl.h, docs/gpu.md "NCCL"): pack window
// w's rows, add the received gradients, sum the dense gradient, on the device and in the
// CPU codelets' orders, with the counts and displacements of codelets/kernels/xchg_plan.c and the
// transfers of the args' NCCL backend, all on the worker's stream. Deterministic: no
// atomics, every sum in a fixed order.
#include <cuda_runtime_api.h>
#include <starpu.h>
#include <stdlib.h>

#include "codelets/cl.h"
#include "codelets/kernels/xchg_plan.h"
#include "runtime/comm/backend.h"
#include "codelets/exchange_nccl.h"

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) {
    size_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096); // grid-stride loops do the rest
}

// dst (n, d) = rows idx[i] of src (., d): one requester's segment of the rows' send buffer
__global__ void gather_rows(const float *src, const int64_t *idx, int64_t n, size_t d, float *dst) {
    size_t total = (size_t)n * d;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t i = k / d, j = k % d;
        dst[k] = src[(size_t)idx[i] * d + j];
    }
}

// gE row idx[i] += src row i, a thread per (row, dim). One requester's rows name distinct
// E rows (np_xchg_segments_distinct), so no two threads touch one element; requesters are
// launched one after another on the stream, so every element's sum runs in rank order.
__global__ void add_rows(float *gE, const int64_t *idx, const float *src, int64_t n, size_t d) {
    size_t total = (size_t)n * d;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t i = k / d, j = k % d;
        gE[(size_t)idx[i] * d + j] += src[k];
    }
}

// out[j] = ((parts[0][j] + parts[1][j]) + ...) in rank order, parts r at r * stride: the
// additions of np_sum_ordered, so the bits of the CPU codelet (adds only: nothing to fuse)
__global__ void sum_ordered(const float *parts, int R, size_t stride, size_t n, float *out) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x) {
        float acc = parts[j];
        for (int r = 1; r < R; r++)
            acc += parts[(size_t)r * stride + j];
        out[j] = acc;
    }
}

using plan_fn = int (*)(const int64_t *, int, int, int, int, np_xchg_plan *);

// What both exchanges start with: the backend, and window a->w's plan (np_xchg_plan_rows
// or _grads) from the counts the host needs. Those come from the device's meta by an
// asynchronous copy on the worker's stream and a synchronisation of that stream (the tasks
// queued before this one on it included); meta is NP_META_SIZE int64s: a few hundred
// bytes a rank and window. keep: where the host's copy goes when the caller reads more of it
// (and frees it), or NULL. 0 (the caller frees p with np_xchg_plan_free), or -1 with
// a->out.fail set and nothing to free.
int plan_window(const int64_t *dmeta, np_cl_xchg_args *a, plan_fn plan, cudaStream_t s,
                np_xchg_plan *p, int64_t **keep) {
    size_t n = NP_META_SIZE((size_t)a->T, (size_t)a->W, (size_t)a->R);
    int64_t *h = a->be ? (int64_t *)malloc(n * sizeof *h) : NULL; // no backend: a failure
    if (!h || cudaMemcpyAsync(h, dmeta, n * sizeof *h, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
        cudaStreamSynchronize(s) != cudaSuccess) {
        free(h);
        a->out.fail = 1;
        return -1;
    }
    if (plan(h, a->T, a->W, a->R, a->w, p)) {
        free(h);
        a->out.fail = 1;
        return -1;
    }
    // pooled segments are the MPI codelets' (config_check, engine.c); the buffers hold
    // what make_room sized (a bug if not)
    int rows = plan == np_xchg_plan_rows; // else gradients: the ways reversed
    size_t owner = (size_t)(rows ? p->nsend : p->nrecv), req = (size_t)(rows ? p->nrecv : p->nsend);
    if (p->pooled || owner > a->cap_stage || req > a->cap_win) {
        np_xchg_plan_free(p);
        free(h);
        a->out.fail = 1;
        return -1;
    }
    if (keep)
        *keep = h;
    else
        free(h);
    return 0;
}

} // namespace

extern "C" void np_cuda_exchange_rows(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = (np_cl_xchg_args *)cl_arg;
    const float *E = (const float *)NP_BUF(buffers, 0);
    const int64_t *map = (const int64_t *)NP_BUF(buffers, 1);
    const int64_t *meta = (const int64_t *)NP_BUF(buffers, 2);
    float *Rin = (float *)NP_BUF(buffers, 3), *sbuf = (float *)NP_BUF(buffers, 4);
    cudaStream_t s = starpu_cuda_get_local_stream();
    size_t d = (size_t)a->d;
    np_backend *be = a->be;
    np_xchg_plan p;
    if (plan_window(meta, a, np_xchg_plan_rows, s, &p, NULL)) return;
    // requester after requester, key after key: np_xchg_pack_rows's order
    for (int q = 0; q < p.R; q++)
        if (p.send[q] > 0)
            gather_rows<<<blocks_for((size_t)p.send[q] * d), kThreads, 0, s>>>(
                E, map + p.seg[q], p.send[q], d, sbuf + (size_t)p.sdispl[q] * d);
    if (cudaGetLastError() != cudaSuccess ||
        be->ops->alltoallv(be, sbuf, p.send, Rin, p.recv, d * sizeof(float), s))
        a->out.fail = 1;
    else
        a->out.bytes = (uint64_t)(p.nsend - p.send[be->rank]) * d * sizeof(float); // off-rank
    np_xchg_plan_free(&p);
}

extern "C" void np_cuda_exchange_grads(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = (np_cl_xchg_args *)cl_arg;
    const float *grows = (const float *)NP_BUF(buffers, 0);
    const int64_t *map = (const int64_t *)NP_BUF(buffers, 1);
    const int64_t *meta = (const int64_t *)NP_BUF(buffers, 2);
    float *gE = (float *)NP_BUF(buffers, 3), *rbuf = (float *)NP_BUF(buffers, 4);
    cudaStream_t s = starpu_cuda_get_local_stream();
    size_t d = (size_t)a->d;
    int w = a->w;
    int64_t *hmeta = NULL;
    np_backend *be = a->be;
    np_xchg_plan p;
    if (plan_window(meta, a, np_xchg_plan_grads, s, &p, &hmeta)) return;
    int64_t uo = hmeta[NP_META_UO];
    free(hmeta);
    if (be->ops->alltoallv(be, grows, p.send, rbuf, p.recv, d * sizeof(float), s)) {
        np_xchg_plan_free(&p);
        a->out.fail = 1;
        return;
    }
    a->out.bytes = (uint64_t)(p.nsend - p.send[be->rank]) * d * sizeof(float); // off-rank
    if (w == 0 && cudaMemsetAsync(gE, 0, (size_t)uo * d * sizeof(float), s) != cudaSuccess) {
        np_xchg_plan_free(&p);
        a->out.fail = 1;
        return;
    }
    // np_xchg_sum_grads's order: rank after rank (one launch each), a row's keys at once
    for (int q = 0; q < p.R; q++)
        if (p.recv[q] > 0)
            add_rows<<<blocks_for((size_t)p.recv[q] * d), kThreads, 0, s>>>(
                gE, map + p.seg[q], rbuf + (size_t)p.rdispl[q] * d, p.recv[q], d);
    if (cudaGetLastError() != cudaSuccess) a->out.fail = 1;
    np_xchg_plan_free(&p);
}

extern "C" void np_cuda_allreduce(void *buffers[], void *cl_arg) {
    np_cl_xchg_args *a = (np_cl_xchg_args *)cl_arg;
    const float *mine = (const float *)NP_BUF(buffers, 0);
    float *out = (float *)NP_BUF(buffers, 1), *all = (float *)NP_BUF(buffers, 2); // (n), (R, n)
    cudaStream_t s = starpu_cuda_get_local_stream();
    np_backend *be = a->be;
    int R = a->R;
    np_xchg_allreduce_plan p;
    if (!be || np_xchg_plan_allreduce(a->n, R, be->rank, &p)) {
        a->out.fail = 1;
        return;
    }
    int me = be->rank;
    if (!p.rs) {
        if (be->ops->allgather(be, mine, all, a->n, sizeof(float), s)) {
            a->out.fail = 1;
        } else {
            sum_ordered<<<blocks_for(a->n), kThreads, 0, s>>>(all, R, a->n, a->n, out);
            if (cudaGetLastError() != cudaSuccess) a->out.fail = 1;
            a->out.bytes = p.nsend * sizeof(float);
        }
        np_xchg_allreduce_plan_free(&p);
        return;
    }
    // slice q of mine to rank q; all gets slice `me` of every rank, rank after rank
    if (be->ops->alltoallv(be, mine, p.len, all, p.got, sizeof(float), s)) {
        np_xchg_allreduce_plan_free(&p);
        a->out.fail = 1;
        return;
    }
    size_t n_me = (size_t)p.len[me];
    if (n_me)
        sum_ordered<<<blocks_for(n_me), kThreads, 0, s>>>(all, R, n_me, n_me, out + p.lo[me]);
    if (cudaGetLastError() != cudaSuccess ||
        be->ops->allgatherv_inplace(be, out, p.len, sizeof(float), s))
        a->out.fail = 1;
    else
        a->out.bytes = p.nsend * sizeof(float);
    np_xchg_allreduce_plan_free(&p);
}
