/* A whole training job in one call (public): what `nestpipe train` runs, for a program that
 * brings its own model. np_train_run reads the data, trains with the configured engine
 * and pipeline on every rank of the job (the look-ahead the pipelines need included),
 * agrees on every set-up step across ranks so that one failing rank cannot leave the
 * others waiting, evaluates (at the end and every "eval-interval" steps), writes and
 * resumes checkpoints, the metrics JSON, the --log-json lines and the dump, runs the
 * watchdog ("rank-timeout"), stops cleanly on SIGINT/SIGTERM and prints progress as the
 * command does ("quiet", "log-every"). Every config key is honoured. The step-level API
 * (np_trainer_step and friends, nestpipe.h) stays for programs that drive steps
 * themselves.
 *
 * Usage (every rank runs the same program; a model with a user layer kind):
 *
 *     np_dist_t *dist;
 *     if (np_dist_init(&argc, &argv, &dist, &err)) ...;
 *     np_layer_register(&gate_layer, &err);            // or "plugin" in the config
 *     np_config cfg;
 *     np_config_defaults(&cfg);
 *     np_config_set(&cfg, "model-file", "gate.ini", "main", &err);  // or build a graph
 *     np_config_set(&cfg, "pipeline", "nestpipe", "main", &err);
 *     np_train_result res;
 *     np_model_t *model = NULL;                        // NULL: not kept
 *     np_status st = np_train_run(dist, &cfg, NULL, &model, &res, &err);
 *     if (st) {
 *         if (!res.err_quiet) fprintf(stderr, "%s\n", err.msg);
 *         if (res.must_abort) np_dist_abort(dist, 1);  // a rank failed mid-step
 *     } else {
 *         printf("auc %.4f\n", res.eval.auc);          // rank 0's evaluation
 *         float w[64];                                 // read a tensor back (collective)
 *         np_dist_model_read(dist, model, "gate.bias", w, 64, NULL, &err);
 *     }
 *     np_model_free(model);
 *     np_dist_free(dist);
 */
#ifndef NESTPIPE_TRAIN_H
#define NESTPIPE_TRAIN_H

#include <stdint.h>

#include "nestpipe/dist.h"
#include "nestpipe/layer.h"
#include "nestpipe/nestpipe.h"
#include "nestpipe/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a run did (rank 0's figures where a rank's differ, summed over ranks where said). */
typedef struct np_train_result {
    long steps;        /* optimizer steps done, those of a resumed run's checkpoint included */
    long resumed_step; /* "resume": the checkpoint's step; 0 when not resumed */
    long global_batch;
    np_pipeline pipeline; /* the pipeline that ran ("auto" resolved) */
    double seconds;       /* wall time of the steps (checkpoints and evaluations left out) */
    double samples_per_s; /* samples this run trained over seconds */
    double data_seconds;  /* of seconds, the driver reading or generating batches */
    double samples_per_s_compute; /* samples/s with data_seconds left out */
    double train_loss_first;      /* mean BCE of the first step's batch */
    double train_loss;            /* mean BCE over the last max(1, steps/10) steps */
    np_eval_result eval;          /* the evaluation of the trained model (rank 0) */
    long evals;                   /* evaluations during training ("eval-interval") */
    double eval_seconds;          /* their wall time */
    long skipped_lines;           /* "skip-bad-lines": malformed records dropped */
    int data_ended;               /* 1: the data ran out before "steps" */
    uint64_t bytes[4];            /* sent by all ranks: keys, rows, grads, all-reduce */
    int64_t table_bytes_rank0, table_bytes_max; /* embedding tables (+ state) per rank */
    uint64_t rows_synced;                       /* dual-buffer sync, summed over ranks */
    double dense_flop_fwd, dense_flop_bwd;      /* per sample, from the layers' flop counts */
    double resume_seconds, resume_bytes;        /* rank 0's checkpoint load */
    long ckpt_count;                            /* checkpoints written */
    double ckpt_seconds, ckpt_bytes;            /* their wall time and bytes, all files */
    char placement[512]; /* where rank 0's workers and driver ran (np_placement_explain) */
    int traced;          /* 1: trace holds the overlap report of the "trace" file (rank 0) */
    np_trace_summary trace;
    int stopped; /* the signal number (SIGINT, SIGTERM) that stopped the run after a step
                    (checkpointed when "checkpoint-dir" is set; nestpipe train then exits
                    128 + it); 0: it ran to its end */
    /* on failure */
    int err_quiet;  /* 1: another rank reports this failure; this rank need not print it */
    int must_abort; /* 1: a rank failed mid-step and the others may be waiting in a
                       collective: end the job (np_dist_abort); the run's memory is not
                       freed */
    /* added in 0.6 */
    uint64_t xchg_segments, xchg_pooled; /* remote exchange segments, and those sent pooled
                                            (np_trainer_exchange_segments), summed over ranks */
    /* added in 0.8: the engine's batch buffers (np_trainer_buffer_bytes) and the process's
     * peak resident memory (getrusage's ru_maxrss), rank 0's and the largest of any rank */
    int64_t buffer_bytes_rank0, buffer_bytes_max, peak_rss_rank0, peak_rss_max;
} np_train_result;

/* Runs the training job cfg describes on this rank (collective: every rank of dist calls
 * it with the same config). graph: the model, or NULL for the config's own (its
 * "model-file" or built-in "model", np_graph_from_config). model: when not NULL, gets the
 * trained model (this rank's shard of the tables; free it with np_model_free), to read
 * back with np_dist_model_read or evaluate; NULL: freed. res is required (it says what to do
 * after a failure). dist NULL: one process without MPI. cfg's rank fields are set from dist.
 * Every rank returns the same outcome (a failure of rank 0's outputs after training
 * included), so what a program does next is collective-safe. One run at a time per process
 * (StarPU and the signal handlers are the process's); the calling thread stays bound to the
 * rank's cores afterwards (placement, docs/engine.md).
 * Returns NP_OK when the run ended, also when a signal stopped it (res->stopped); else the
 * failure, with err one line naming what and where (prefixed "rank R: " with several
 * ranks) and res->err_quiet / res->must_abort telling the caller what to do with it. */
NP_NODISCARD NP_API np_status np_train_run(np_dist_t *dist, const np_config *cfg,
                                           const np_graph_t *graph, np_model_t **model,
                                           np_train_result *res, np_error *err);

/* Writes res and cfg as the --metrics-json object (docs/cli.md "Output") to path, through a
 * temporary and a rename. np_train_run does it for "metrics-json". */
NP_NODISCARD NP_API np_status np_train_write_metrics(const char *path, const np_config *cfg,
                                                     const np_train_result *res,
                                                     np_error *err);

#ifdef __cplusplus
}
#endif
#endif
