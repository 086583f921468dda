/* nestpipe over several processes (public): the job's ranks when started by mpirun, the few
 * collectives a training driver needs between steps, and the whole model gathered on rank
 * 0. Not here: the exchanges inside a step (the StarPU engine does them itself). Without
 * mpirun there is no MPI: one rank, and every call below is local.
 *
 * Usage (every rank runs the same program; np_train_run in nestpipe/train.h is a complete
 * driver):
 *
 *     np_dist_t *dist;
 *     if (np_dist_init(&argc, &argv, &dist, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
 *     cfg.rank = np_dist_rank(dist);          // before np_config_check / np_trainer_create
 *     cfg.ranks = np_dist_size(dist);
 *     // ... each rank reads its slice (np_source_next_slice) and calls np_trainer_step ...
 *     double loss_sum = loss;                 // this rank's part of the global mean
 *     np_dist_sum_f64(dist, &loss_sum, 1, &err);
 *     np_model_t *full;                       // the whole model on rank 0, NULL elsewhere
 *     np_dist_gather_model(dist, model, &full, &err);
 *     if (full) np_model_dump(full, "model.bin", &err);
 *     np_model_free(full);
 *     np_dist_free(dist);                     // after the trainer and models are freed
 */
#ifndef NESTPIPE_DIST_H
#define NESTPIPE_DIST_H

#include <stdint.h>

#include "nestpipe/nestpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The process's place in the job: one per process, created before any trainer. */
typedef struct np_comm np_dist_t;

/* Starts MPI (thread level MULTIPLE, which nestpipe needs) when the process was launched by
 * mpirun, else makes a one-rank handle without MPI. argc/argv are passed to MPI_Init_thread.
 * Fails with NP_STATUS_UNSUPPORTED when MPI lacks MPI_THREAD_MULTIPLE. *out is NULL on
 * failure. Call once per process. */
NP_NODISCARD NP_API np_status np_dist_init(int *argc, char ***argv, np_dist_t **out, np_error *err);
/* Finalizes MPI (when np_dist_init started it) and frees d; NULL-safe. Call it after every
 * trainer is freed. */
NP_API void np_dist_free(np_dist_t *d);
/* Ends every rank of the job with exit status `code`, after stdout and stderr are
 * flushed: for a rank that failed while the others wait in a collective. Never returns;
 * without MPI it is exit(code). */
NP_API void np_dist_abort(np_dist_t *d, int code);

/* This process's rank (0 .. size-1) and the number of ranks; 0 and 1 without MPI or for
 * d == NULL. */
NP_API int np_dist_rank(const np_dist_t *d);
NP_API int np_dist_size(const np_dist_t *d);
/* This rank's index among the ranks on its host (they share its cores), their number, and
 * the hosts of the job; 0, 1 and 1 without MPI or for d == NULL. */
NP_API void np_dist_host(const np_dist_t *d, int *local_rank, int *local_ranks, int *nodes);

/* Collectives for the driver's thread: every rank must call them in the same order. They
 * run on a communicator of their own, so they never mix with the engine's exchanges.
 * *inout (inout[0..n-1] for doubles) becomes the sum or maximum over ranks. Integer results
 * are the same on every rank; doubles are added in an order MPI chooses, which MPI advises
 * but does not promise to be the same everywhere. NP_STATUS_INTERNAL when MPI fails (err
 * says which collective; err may be NULL): the job can then only be aborted. */
NP_NODISCARD NP_API np_status np_dist_sum_i64(np_dist_t *d, int64_t *inout, np_error *err);
NP_NODISCARD NP_API np_status np_dist_max_i64(np_dist_t *d, int64_t *inout, np_error *err);
NP_NODISCARD NP_API np_status np_dist_sum_f64(np_dist_t *d, double *inout, int n, np_error *err);

/* Watchdog (the train command's --rank-timeout): a thread on every rank trades heartbeats
 * with rank 0. A rank that sends nothing, or stays busy at one step while this rank waits
 * for it, for timeout_s seconds is named on stderr ("nestpipe: rank 0: rank 1 has made no
 * progress ...") and the whole job is aborted (exit 1): a stalled rank no longer leaves
 * the others polling forever. Start and stop are collective (every rank, at the same
 * point of the run); stop waits until every rank has stopped its watchdog. *out is NULL,
 * and the other calls no-ops, without MPI, on one rank or when timeout_s <= 0; stop is
 * NULL-safe. np_dist_watchdog_progress says where the driver is: its step (< 0: unchanged),
 * and whether it is waiting for the other ranks (in a collective, or for a step's tasks). */
typedef struct np_watchdog np_dist_watchdog_t;
NP_NODISCARD NP_API np_status np_dist_watchdog_start(np_dist_t *d, double timeout_s,
                                                     np_dist_watchdog_t **out, np_error *err);
NP_API void np_dist_watchdog_progress(np_dist_watchdog_t *w, long step, int waiting);
NP_API void np_dist_watchdog_stop(np_dist_watchdog_t *w);

/* Collective: rank 0 gets in *full a one-rank model holding every table row where a
 * single-process run has it and the dense parameters (of rank 0's replica): what
 * np_model_dump and np_evaluate want. Other ranks get NULL; with one rank *full is a copy.
 * m is a model trained on every rank (each holding its shard); free *full with
 * np_model_free. */
NP_NODISCARD NP_API np_status np_dist_gather_model(np_dist_t *d, const np_model_t *m, np_model_t **full,
                                            np_error *err);

/* Collective (every rank, with the same name): the values of m's tensor `name` (a dump's
 * names: "top.0.weight", "emb.3"; np_model_tensor_info lists them), row-major, into
 * out[0 .. *count) on every rank; cap is out's room in floats. A table, sharded across
 * ranks, is gathered in the single-process layout (row k at row k); a dense tensor is the
 * rank's own replica (the same on every rank). Read the model after np_train_run (its
 * `model` argument) or after np_trainer_finish; between steps, inside np_trainer_hold /
 * np_trainer_release. NP_STATUS_BAD_INPUT for an unknown name or too little room; count
 * may be NULL. d NULL: one process. */
NP_NODISCARD NP_API np_status np_dist_model_read(np_dist_t *d, const np_model_t *m,
                                                 const char *name, float *out, size_t cap,
                                                 size_t *count, np_error *err);

#ifdef __cplusplus
}
#endif
#endif
