/* np_train_run's state, shared by its files: runtime/train/run.c (the step loop),
 * runtime/train/setup.c (everything before the first step), runtime/train/reader.c (the look-ahead
 * ring) and runtime/train/report.c (what a run prints and logs). Private to the library. */
#ifndef NP_TRAIN_RUN_IMPL_H
#define NP_TRAIN_RUN_IMPL_H

#include <signal.h>
#include <stdio.h>

#include "nestpipe/checkpoint.h"
#include "nestpipe/dist.h"
#include "nestpipe/train.h"

/* batches held at once: the training one and up to 4 ahead (dbp), plus one being read */
#define NP_RING 6

/* How a run failed, which decides who reports it and whether the job must be aborted. */
typedef enum np_run_fail {
    NP_RUN_OK,
    NP_RUN_SETUP, /* the same failure on every rank (agreed): rank 0 reports, all return */
    NP_RUN_STEP,  /* one rank failed mid-run: it says why, and the job must be aborted */
    NP_RUN_LOCAL, /* rank 0's own output failed after the last collective */
} np_run_fail;

/* Reads global batches into the ring, every rank alike, agreeing on each one's outcome. */
typedef struct np_reader {
    const np_config *cfg;
    np_dist_t *dist;
    np_source_t *src;
    np_batch *local;  /* (NP_RING) this rank's slices of the global batches */
    long lo, local_n; /* this rank's slice */
    np_train_result *r;
    np_trainer_t *tr;         /* a traced run records the reads as the driver's "data" tasks */
    np_dist_watchdog_t *wd;   /* told when the reads wait for the other ranks */
    np_data_pos pos[NP_RING]; /* the source's position after each batch in the ring */
    long loaded;              /* batches read so far */
    int ended;                /* the data has no further full batch */
    np_status st;             /* a failure, with err */
    np_error err;
} np_reader;

typedef struct np_run {
    np_config cfg; /* rank fields set, STARPU_SCHED applied */
    np_dist_t *dist;
    int lead; /* rank 0 prints, evaluates and writes the outputs */
    np_train_result *r;
    np_source_t *train, *eval;
    FILE *log; /* --log-json, rank 0 */
    np_model_t *model, *full;
    np_trainer_t *tr;
    np_batch ring[NP_RING];
    double *losses; /* (window) the last steps' losses, by step modulo window */
    long window;    /* steps averaged in train_loss */
    np_ckpt_state *cs; /* the driver's state a checkpoint holds */
    np_dist_watchdog_t *wd;
    long s0; /* the first step this process runs (resumed: the checkpoint's) */
    np_reader rd;
    /* progress */
    long total_steps;  /* --steps, or with --steps 0 on file data the steps its passes hold */
    uint64_t per_pass; /* file data: training records a pass holds (0: not known) */
    int total_est;     /* total_steps is an estimate (a Criteo TSV's size) */
    int tty;
    double t0, last_print, recent;
    long recent_n;
    /* SIGINT/SIGTERM handlers before the run's own, restored at its end */
    struct sigaction old_int, old_term;
    int caught;
} np_run;

/* runtime/train/setup.c: everything before the first step (outputs checked, sources, model,
 * resume, trainer, watchdog). NP_OK, or the failure with *how. */
NP_NODISCARD np_status np_run_setup(np_run *u, const np_graph_t *graph, np_run_fail *how,
                                    np_error *err);
/* Every rank learns the set-up outcome before the next collective, so that a failure on one
 * rank (a file missing on one host) cannot leave the others waiting. A failure on every
 * rank is reported by rank 0; on some ranks only, by each of them, and rank 0 says how many
 * failed. Returns NP_OK when every rank succeeded, else the worst failure, the same kind
 * on every rank, with err and u->r->err_quiet set for this rank. */
NP_NODISCARD np_status np_run_agree(np_run *u, np_status st, np_error *err);
/* err prefixed with "rank R: " when there are several ranks. */
void np_run_rank_prefix(const np_config *cfg, np_error *err);

/* runtime/train/reader.c: reads until batch `upto` is in (or the data or "steps" end). Returns 0,
 * or -1 when a rank failed (rd->st/err hold this rank's failure, NP_OK if another's). */
int np_reader_fill(np_reader *rd, long upto);
/* All ranks agree on a step's outcome: 0 ok, 1 end of data, 2 failed somewhere. */
int np_run_outcome(np_dist_t *dist, np_dist_watchdog_t *wd, int mine);

/* runtime/train/report.c: what a run prints and logs (rank 0 only; quiet honoured) */
double np_run_now(void);
/* The process's peak resident memory in bytes (getrusage), 0 when unknown. */
int64_t np_run_peak_rss(void);
/* A progress line: step/total, loss, samples/s and the time left; with final, the
 * summary's train_loss and the time taken. */
void np_run_progress(const np_run *u, long step, double loss, double sps, double elapsed,
                     int final);
/* One --log-json line: a step, or with ev the run's end and its evaluation (loss is then
 * the summary's train_loss; an evaluation during training has NaN seconds). 0 or -1. */
/* "logloss X  auc Y" (with prefix "eval_": eval_logloss, eval_auc), or for a next-item
 * model "loss X  hr@10 Y  ndcg@10 Z". */
void np_run_eval_figures(const np_eval_result *ev, const char *prefix, char *buf, size_t n);
int np_run_log_line(FILE *f, long step, double loss, double sps, double seconds,
                    const np_eval_result *ev);
/* The run's closing lines ("done: ...", skipped lines, the dbp sync). */
void np_run_print_done(const np_run *u);
/* SIGINT/SIGTERM: the step in flight finishes, the ranks agree to stop after it, a
 * checkpoint is written when a folder is set. A second signal kills at once. */
void np_run_catch_signals(np_run *u);
void np_run_restore_signals(np_run *u);
/* The signal that asked the run to stop, 0 if none. */
int np_run_stop_signal(void);

#endif
