/* The exchange backends behind the collectives of the graph (docs/gpu.md "NCCL"): the
 * operations the exchange codelets need, on host memory through MPI (today's path, the
 * same calls and bytes as comm.h) or on device memory through NCCL (the CUDA flavour, one
 * GPU per rank). Not here: what is exchanged or in which order (codelets/kernels/xchg_plan.h),
 * nor the key and control collectives, which stay on MPI. Plain C, no MPI or CUDA types,
 * so tests plug in a transport of their own. */
#ifndef NP_COMM_BACKEND_H
#define NP_COMM_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "nestpipe/nestpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

struct np_comm;
typedef struct np_backend np_backend;

/* Every operation is collective over the backend's ranks and returns 0 or -1. Counts are
 * in elements of `elem` bytes, one per rank (size of the backend); a rank's blocks lie
 * packed rank after rank (displacement of rank q = sum of the counts before q), as in
 * np_comm_alltoallv. `stream` is a cudaStream_t for a device backend (the operation is
 * enqueued on it and has not completed on return), ignored (NULL) on the host. */
typedef struct np_backend_ops {
    const char *name; /* "mpi", "nccl", or a test's */
    int on_device;    /* 1: buffers are device memory and calls are stream-ordered */
    /* per_rank elements to and from every rank */
    int (*alltoall)(np_backend *b, const void *send, void *recv, size_t per_rank, size_t elem,
                    void *stream);
    int (*alltoallv)(np_backend *b, const void *send, const int64_t *scounts, void *recv,
                     const int64_t *rcounts, size_t elem, void *stream);
    /* recv gets every rank's n elements, rank after rank */
    int (*allgather)(np_backend *b, const void *send, void *recv, size_t n, size_t elem,
                     void *stream);
    /* rank r's counts[r] elements, at its displacement of buf, go to every rank's buf */
    int (*allgatherv_inplace)(np_backend *b, void *buf, const int64_t *counts, size_t elem,
                              void *stream);
    void (*free)(np_backend *b); /* NULL: nothing to free */
} np_backend_ops;

struct np_backend {
    const np_backend_ops *ops;
    int rank, size;
    void *impl; /* the backend's own state */
};

/* The MPI backend on comm c's data channel: the graph's collectives exactly as the
 * codelets issued them through comm.h (the same MPI calls, datatypes and bytes). Fills a
 * caller-owned struct; nothing to free. c must be an MPI comm (np_comm_is_mpi). */
void np_backend_mpi(np_backend *b, struct np_comm *c);

/* The backend the engine chose for --comm: which ranks may use NCCL. Checked once by the
 * engine after it knows how many GPUs this rank sees (`devices`, e.g. np_cuda_describe's
 * count, or the number --gpus leaves): a one-line error naming the key when NCCL cannot
 * serve: a CPU-only build, a rank with no GPU, more ranks on this host than GPUs (NCCL
 * drives one GPU per rank and refuses two ranks on one GPU). NP_OK for comm mpi. */
NP_NODISCARD np_status np_comm_backend_check(const np_config *cfg, int devices, np_error *err);

/* ---- NCCL (the CUDA flavour only; elsewhere np_backend_nccl_create fails with the
 * CPU-only message and np_backend_free is the only other call that makes sense). */

/* Creates this rank's NCCL communicator on GPU `device` (the engine passes the local rank
 * on the host, or the GPU --gpus picked): rank 0 draws the unique id, broadcasts it on
 * comm's control channel (collective over every rank of comm: every rank calls it at the
 * same point, after starpu_init), each rank then calls ncclCommInitRank. With comm NULL
 * or without MPI, a one-rank communicator. *out: free with np_backend_free. */
NP_NODISCARD np_status np_backend_nccl_create(struct np_comm *comm, int device, np_backend **out,
                                              np_error *err);
/* Frees a backend made by a create function (destroys the NCCL communicator); NULL-safe.
 * Not for np_backend_mpi's caller-owned struct. */
void np_backend_free(np_backend *b);

#ifdef __cplusplus
}
#endif
#endif
