/* The MPI backend of backend.h (today's collectives, unchanged: comm.h's calls on the
 * data channel) and the checks of --comm that need the device count. Not here: NCCL
 * itself (runtime/comm/nccl.c, the CUDA flavour only). */
#include "runtime/comm/backend.h"

#include "runtime/comm/comm.h"
#include "runtime/core/util.h"

static np_comm *mpi_of(np_backend *b) {
    return b->impl;
}

static int mpi_alltoall(np_backend *b, const void *send, void *recv, size_t per_rank, size_t elem,
                        void *stream) {
    (void)stream;
    /* the only all-to-all of fixed size is the key counts' (int64), as before */
    if (elem != sizeof(int64_t) || per_rank > INT32_MAX) return -1;
    return np_comm_alltoall_i64(mpi_of(b), NP_CHAN_DATA, send, recv, (int)per_rank);
}

static int mpi_alltoallv(np_backend *b, const void *send, const int64_t *scounts, void *recv,
                         const int64_t *rcounts, size_t elem, void *stream) {
    (void)stream;
    return np_comm_alltoallv(mpi_of(b), NP_CHAN_DATA, send, scounts, recv, rcounts, elem);
}

static int mpi_allgather(np_backend *b, const void *send, void *recv, size_t n, size_t elem,
                         void *stream) {
    (void)stream;
    return np_comm_allgather(mpi_of(b), NP_CHAN_DATA, send, recv, n, elem);
}

static int mpi_allgatherv_inplace(np_backend *b, void *buf, const int64_t *counts, size_t elem,
                                  void *stream) {
    (void)stream;
    return np_comm_allgatherv_inplace(mpi_of(b), NP_CHAN_DATA, buf, counts, elem);
}

static const np_backend_ops mpi_ops = {.name = "mpi",
                                       .on_device = 0,
                                       .alltoall = mpi_alltoall,
                                       .alltoallv = mpi_alltoallv,
                                       .allgather = mpi_allgather,
                                       .allgatherv_inplace = mpi_allgatherv_inplace,
                                       .free = NULL};

void np_backend_mpi(np_backend *b, np_comm *c) {
    *b = (np_backend){.ops = &mpi_ops, .rank = np_comm_rank(c), .size = np_comm_size(c), .impl = c};
}

np_status np_comm_backend_check(const np_config *cfg, int devices, np_error *err) {
    if (cfg->comm != NP_COMM_NCCL) return NP_OK;
#ifndef NP_HAVE_CUDA
    (void)devices;
    return np_err(err, NP_STATUS_UNSUPPORTED, "comm: nccl needs the CUDA flavour (docs/gpu.md)");
#else
    if (devices <= 0)
        return np_err(err, NP_STATUS_UNSUPPORTED,
                      "comm: nccl needs a GPU on every rank, but rank %d sees none; use --comm "
                      "mpi or run where each rank has a GPU (docs/gpu.md)",
                      cfg->rank);
    if (cfg->local_ranks > devices)
        return np_err(err, NP_STATUS_UNSUPPORTED,
                      "comm: nccl drives one GPU per rank, but rank %d's host runs %d ranks on "
                      "%d GPU%s; start at most %d rank%s per host or use --comm mpi",
                      cfg->rank, cfg->local_ranks, devices, devices == 1 ? "" : "s", devices,
                      devices == 1 ? "" : "s");
    return NP_OK;
#endif
}

void np_backend_free(np_backend *b) {
    if (b && b->ops && b->ops->free) b->ops->free(b);
}

#ifndef NP_HAVE_CUDA
np_status np_backend_nccl_create(np_comm *comm, int device, np_backend **out, np_error *err) {
    (void)comm;
    (void)device;
    *out = NULL;
    return np_err(err, NP_STATUS_UNSUPPORTED, "comm: nccl needs the CUDA flavour (docs/gpu.md)");
}
#endif
