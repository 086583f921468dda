/* Run summary of `nestpipe train` and its --metrics-json writer (jansson). */
#ifndef NP_APPS_METRICS_H
#define NP_APPS_METRICS_H

#include <stdint.h>

#include "nestpipe/nestpipe.h"
#include "nestpipe/trace.h"

typedef struct np_run_metrics {
    char placement[512]; /* rank 0's np_placement_explain line; "" for the reference */
    long steps; /* optimizer steps done */
    long global_batch;
    double seconds; /* wall time of the training loop (no eval) */
    double samples_per_s;
    double data_seconds;          /* of seconds, time spent reading/generating batches */
    double samples_per_s_compute; /* samples/s with data_seconds left out */
    double train_loss_first;      /* mean BCE of the first step's batch */
    double train_loss;            /* mean BCE over the last max(1, steps/10) steps */
    np_eval_result eval;
    long skipped_lines; /* --skip-bad-lines: records dropped */
    int data_ended;     /* 1 when the data ran out before --steps */
    uint64_t bytes[4];  /* sent by all ranks: keys, rows, grads, all-reduce */
    int64_t table_bytes_rank0, table_bytes_max; /* embedding tables (+ state) per rank */
    uint64_t rows_synced;                       /* dual-buffer sync, summed over ranks (dbp) */
    double dense_flop_fwd, dense_flop_bwd;      /* per sample, from the layers' flop counts */
    int traced; /* 1: trace_overall holds the overlap report of --trace */
    long resumed_step;                 /* --resume: the checkpoint's step (0: not resumed) */
    double resume_seconds, resume_bytes; /* rank 0's checkpoint load */
    long ckpt_count;                   /* checkpoints written */
    double eval_seconds; /* evaluations during training (--eval-interval; not in seconds) */
    long evals;          /* how many */
    double ckpt_seconds, ckpt_bytes;   /* their wall time (not in seconds) and bytes, all files */
    np_trace_summary trace_overall;
} np_run_metrics;

/* Writes the metrics (plus engine, pipeline, ranks and the model shape from cfg) as one
 * JSON object to path; 0 on success, -1 with a message in err. */
int np_metrics_write(const char *path, const np_config *cfg, const np_run_metrics *r,
                     np_error *err);

#endif
