/* The NCCL backend of backend.h (the CUDA flavour only, docs/gpu.md "NCCL"): one
 * communicator per rank on the rank's GPU, All2Alls as grouped ncclSend/ncclRecv and
 * all-gathers, each enqueued on the caller's stream (the CUDA worker's). Not here: what
 * is exchanged, the sums (codelets/exchange.cu), or the key and control collectives (MPI). */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>

#include "runtime/comm/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/core/util.h"

typedef struct nccl_impl {
    ncclComm_t comm;
    int device;
} nccl_impl;

static ncclComm_t comm_of(np_backend *b) {
    return ((nccl_impl *)b->impl)->comm;
}

/* Zero counts send nothing: both sides see the same count (the sender's send count is the
 * receiver's receive count), so both skip the pair. Bytes travel as ncclChar. */
static int nccl_alltoallv(np_backend *b, const void *send, const int64_t *scounts, void *recv,
                          const int64_t *rcounts, size_t elem, void *stream) {
    ncclComm_t c = comm_of(b);
    cudaStream_t s = stream;
    size_t so = 0, ro = 0;
    int rc = ncclGroupStart() == ncclSuccess ? 0 : -1;
    for (int q = 0; q < b->size && !rc; q++) {
        if (scounts[q] < 0 || rcounts[q] < 0) {
            rc = -1;
            break;
        }
        size_t sn = (size_t)scounts[q] * elem, rn = (size_t)rcounts[q] * elem;
        if (sn && ncclSend((const char *)send + so, sn, ncclChar, q, c, s) != ncclSuccess) rc = -1;
        if (rn && ncclRecv((char *)recv + ro, rn, ncclChar, q, c, s) != ncclSuccess) rc = -1;
        so += sn;
        ro += rn;
    }
    if (ncclGroupEnd() != ncclSuccess) rc = -1;
    return rc;
}

static int nccl_alltoall(np_backend *b, const void *send, void *recv, size_t per_rank, size_t elem,
                         void *stream) {
    int64_t *c = malloc((size_t)b->size * sizeof *c);
    if (!c) return -1;
    for (int q = 0; q < b->size; q++)
        c[q] = (int64_t)per_rank;
    int rc = nccl_alltoallv(b, send, c, recv, c, elem, stream);
    free(c);
    return rc;
}

static int nccl_allgather(np_backend *b, const void *send, void *recv, size_t n, size_t elem,
                          void *stream) {
    return ncclAllGather(send, recv, n * elem, ncclChar, comm_of(b), (cudaStream_t)stream) ==
                   ncclSuccess
               ? 0
               : -1;
}

/* Each rank's block to every other rank, grouped; the block itself stays in place. */
static int nccl_allgatherv_inplace(np_backend *b, void *buf, const int64_t *counts, size_t elem,
                                   void *stream) {
    ncclComm_t c = comm_of(b);
    cudaStream_t s = stream;
    size_t mine = 0, at = 0;
    for (int q = 0; q < b->rank; q++)
        mine += (size_t)counts[q] * elem;
    int rc = ncclGroupStart() == ncclSuccess ? 0 : -1;
    for (int q = 0; q < b->size && !rc; q++) {
        size_t n = (size_t)counts[q] * elem, me = (size_t)counts[b->rank] * elem;
        if (q != b->rank) {
            if (me && ncclSend((const char *)buf + mine, me, ncclChar, q, c, s) != ncclSuccess)
                rc = -1;
            if (n && ncclRecv((char *)buf + at, n, ncclChar, q, c, s) != ncclSuccess) rc = -1;
        }
        at += n;
    }
    if (ncclGroupEnd() != ncclSuccess) rc = -1;
    return rc;
}

static void nccl_free(np_backend *b) {
    nccl_impl *n = b->impl;
    if (n) {
        int prev = -1;
        cudaGetDevice(&prev);
        cudaSetDevice(n->device);
        ncclCommDestroy(n->comm);
        if (prev >= 0) cudaSetDevice(prev);
        free(n);
    }
    free(b);
}

static const np_backend_ops nccl_ops = {.name = "nccl",
                                        .on_device = 1,
                                        .alltoall = nccl_alltoall,
                                        .alltoallv = nccl_alltoallv,
                                        .allgather = nccl_allgather,
                                        .allgatherv_inplace = nccl_allgatherv_inplace,
                                        .free = nccl_free};

/* Every rank learns whether any failed (1) before the next collective step, so that no
 * rank waits in ncclCommInitRank for a peer that gave up. */
static int any_failed(np_comm *comm, int failed) {
    int64_t f = failed;
    if (np_comm_allreduce_i64(comm, NP_CHAN_CTL, &f, 1)) return 1;
    return f != 0;
}

np_status np_backend_nccl_create(np_comm *comm, int device, np_backend **out, np_error *err) {
    *out = NULL;
    int rank = np_comm_rank(comm), size = np_comm_size(comm), prev = -1;
    np_backend *b = calloc(1, sizeof *b);
    nccl_impl *n = calloc(1, sizeof *n);
    cudaGetDevice(&prev);
    cudaError_t ce = cudaSetDevice(device);
    int failed = !b || !n || ce != cudaSuccess;
    if (any_failed(comm, failed)) {
        free(b);
        free(n);
        if (prev >= 0) cudaSetDevice(prev);
        if (ce != cudaSuccess)
            return np_err(err, NP_STATUS_UNSUPPORTED, "comm: nccl: rank %d cannot use GPU %d: %s",
                          rank, device, cudaGetErrorString(ce));
        return np_err(err, NP_STATUS_INTERNAL,
                      failed ? "comm: nccl: rank %d is out of memory"
                             : "comm: nccl: rank %d stops: another rank could not set up its GPU",
                      rank);
    }
    /* rank 0 draws the id; the others get it on the control channel with rank 0's status */
    struct {
        int32_t ok;
        ncclUniqueId id;
    } msg = {0};
    ncclResult_t r = ncclSuccess;
    if (rank == 0) {
        r = ncclGetUniqueId(&msg.id);
        msg.ok = r == ncclSuccess;
    }
    if (np_comm_bcast(comm, NP_CHAN_CTL, &msg, sizeof msg, 0) || !msg.ok) {
        free(b);
        free(n);
        if (prev >= 0) cudaSetDevice(prev);
        return np_err(err, NP_STATUS_INTERNAL,
                      "comm: nccl: rank %d: no NCCL unique id from rank 0%s%s", rank,
                      rank == 0 ? ": " : "", rank == 0 ? ncclGetErrorString(r) : "");
    }
    r = ncclCommInitRank(&n->comm, size, msg.id, rank);
    if (any_failed(comm, r != ncclSuccess)) {
        if (r == ncclSuccess) ncclCommDestroy(n->comm);
        free(b);
        free(n);
        if (prev >= 0) cudaSetDevice(prev);
        return np_err(err, NP_STATUS_INTERNAL,
                      "comm: nccl: rank %d: ncclCommInitRank of %d ranks on "
                      "GPU %d: %s",
                      rank, size, device,
                      r == ncclSuccess ? "another rank failed" : ncclGetErrorString(r));
    }
    if (prev >= 0) cudaSetDevice(prev);
    n->device = device;
    *b = (np_backend){.ops = &nccl_ops, .rank = rank, .size = size, .impl = n};
    *out = b;
    return NP_OK;
}
