/* Exchange backend across ranks: MPI today (NCCL takes the same place on GPUs later).
 * One np_comm per process, created once before any engine. When the process was not
 * started by mpirun there is no MPI at all: one rank, and every exchange is a local copy
 * done by the caller. Collective wrappers poll non-blocking MPI with a yield so a waiting
 * rank does not steal its core from the compute workers (docs/engine.md). */
#ifndef NP_COMM_COMM_H
#define NP_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "nestpipe/nestpipe.h"

typedef struct np_comm np_comm;

/* Starts MPI (MPI_THREAD_MULTIPLE) when launched by mpirun, else a one-rank comm with no
 * MPI. *out is NULL-safe to free. */
NP_NODISCARD np_status np_comm_init(int *argc, char ***argv, np_comm **out, np_error *err);
/* Finalizes MPI (if started) and frees. NULL-safe. */
void np_comm_free(np_comm *c);
/* Ends every rank of the job with `code` after a rank failed: never returns. Without MPI
 * it simply exits. Only apps/ call it. */
void np_comm_abort(np_comm *c, int code);

/* Watchdog (--rank-timeout): a thread per rank trading heartbeats with rank 0; a rank
 * silent, or busy without progress while the others wait, for timeout_s seconds is named on
 * stderr and the job aborted. *out is NULL (and every call a no-op) without MPI, on one
 * rank or with timeout_s <= 0. Start and stop are collective: every rank calls them at
 * the same point; stop waits for the other ranks to stop theirs. */
typedef struct np_watchdog np_watchdog;
NP_NODISCARD np_status np_comm_watchdog_start(np_comm *c, double timeout_s, np_watchdog **out,
                                              np_error *err);
/* The driver's step (< 0: unchanged) and whether it is waiting for the other ranks now. */
void np_comm_watchdog_progress(np_watchdog *w, long step, int waiting);
void np_comm_watchdog_stop(np_watchdog *w);

/* The comm np_comm_init created (NULL before it or after np_comm_free): MPI is one per
 * process, and the engine finds it here. */
np_comm *np_comm_world(void);

int np_comm_rank(const np_comm *c);
int np_comm_size(const np_comm *c);
/* This rank's index among the ranks on its host, their number, and the job's hosts
 * (0, 1, 1 without MPI or for NULL). */
void np_comm_host(const np_comm *c, int *local_rank, int *local_size, int *nodes);
/* The hosts the data channel's All2Alls see, and how they go (docs/scale.md "A two-level
 * All2All"): per_host > 0 declares pseudo-hosts of per_host consecutive ranks (it must
 * divide the ranks; the emulated link then paces only bytes between them), 0 takes the
 * real hosts; a2a (np_a2a_mode) flat, hier (a one-line error when hosts hold different
 * numbers of ranks) or auto (hier when the ranks span hosts of equal size, 4 ranks or
 * more each: NP_A2A_AUTO_HOST_RANKS). Collective
 * over every rank (the engine calls it with the config, the same on all); again with the
 * same arguments it does nothing. A no-op without MPI or with one rank. */
NP_NODISCARD np_status np_comm_set_topology(np_comm *c, int a2a, int per_host, np_error *err);
/* 2 when the data channel's All2Alls go in two levels (*per_host: the ranks a host), else 1
 * (*per_host 1). per_host may be NULL. */
int np_comm_a2a_levels(const np_comm *c, int *per_host);
/* 1 when MPI is in use (even with one rank under mpirun). */
int np_comm_is_mpi(const np_comm *c);

/* Two channels with their own duplicated communicators, so the graph's collectives (run
 * by comm tasks on a worker) and the driver's control collectives (main thread) never
 * interleave on one communicator. */
typedef enum np_channel { NP_CHAN_DATA = 0, NP_CHAN_CTL = 1 } np_channel;

/* Collectives; each returns 0 or -1 (an MPI error; the job is then aborted by the caller).
 * Counts and displacements are in elements of the given byte size. With one rank they
 * copy send to receive. */
int np_comm_alltoall_i64(np_comm *c, np_channel ch, const int64_t *send, int64_t *recv,
                         int per_rank);
int np_comm_alltoallv(np_comm *c, np_channel ch, const void *send, const int64_t *scounts,
                      void *recv, const int64_t *rcounts, size_t elem);
/* recv gets every rank's n-element send, rank after rank. */
int np_comm_allgather(np_comm *c, np_channel ch, const void *send, void *recv, size_t n,
                      size_t elem);
/* In place: rank r's counts[r] elements at displs[r] of buf go to every rank's buf at the
 * same place. */
int np_comm_allgatherv_inplace(np_comm *c, np_channel ch, void *buf, const int64_t *counts,
                               size_t elem);
/* Sum over ranks of one int64 / max of one int64. */
int np_comm_allreduce_i64(np_comm *c, np_channel ch, int64_t *inout, int op_max);
/* inout (n) = the elementwise max over ranks, in place: MPI's O(log size) rounds. */
int np_comm_allreduce_u64_max(np_comm *c, np_channel ch, uint64_t *inout, int n);
/* recv (per_rank) = the sum over ranks of their send[per_rank * me .. per_rank * (me + 1)):
 * a reduce-scatter of send (size x per_rank) in MPI's O(log size) rounds; one rank
 * copies. */
int np_comm_reduce_scatter_i64(np_comm *c, np_channel ch, const int64_t *send, int64_t *recv,
                               int per_rank);
int np_comm_allreduce_f64_sum(np_comm *c, np_channel ch, double *inout, int n);
/* Rank 0 receives n_r elements from each rank r (recv NULL elsewhere). */
int np_comm_gatherv(np_comm *c, np_channel ch, const void *send, int64_t n, void *recv,
                    const int64_t *counts, size_t elem);
int np_comm_barrier(np_comm *c, np_channel ch);
/* The time the calling thread's alltoall, alltoallv, allgather and allgatherv_inplace spent
 * posting (the MPI_I* call) and pacing (the emulated link, NP_LINK_GBIT) since the last
 * call, in microseconds; both reset. Zeros without MPI. */
void np_comm_take_phases(double *post_us, double *pace_us);
/* root's `bytes` bytes of buf to every rank (the NCCL unique id). */
int np_comm_bcast(np_comm *c, np_channel ch, void *buf, size_t bytes, int root);

#endif
