/* nestpipe task traces (public): the trace a StarPU trainer records when the config's
 * "trace" key names a file, or one read back from such a file, and what can be made of it:
 * the overlap report, its overall figures, an SVG timeline, a Paje file. Not here:
 * recording (the engine does it). docs/tracing.md defines every figure.
 *
 * Usage (after training with cfg.trace set and np_trainer_finish, on rank 0):
 *
 *     const np_trace_t *t = np_trainer_trace(tr);    // NULL: not traced, or not rank 0
 *     np_trace_summary s;
 *     if (t && !np_trace_summarize(t, &s, &err)) {
 *         const np_trace_kind_time *x = np_trace_summary_kind(&s, "exchange_emb");
 *         printf("step %.0f us, row exchange %.0f us exposed\n", s.step_us,
 *                x ? x->exposed_us : 0);
 *     }
 *     np_trace_print_report(t, stdout, NP_TRACE_REPORT_LAYERS, &err);
 */
#ifndef NESTPIPE_TRACE_H
#define NESTPIPE_TRACE_H

#include <stdio.h>

#include "nestpipe/nestpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A trace: one event per executed task (its node kind, batch, window, layer, chunk,
 * rank, worker, start and end), all ranks merged. */
typedef struct np_trace np_trace_t;

/* The trainer's trace, merged over ranks: on rank 0 of a StarPU trainer whose config set
 * "trace", after np_trainer_finish; NULL otherwise. Owned by the trainer. */
NP_API const np_trace_t *np_trainer_trace(const np_trainer_t *tr);
/* The driver's own work in a traced run: read the clock (0 when the run is not traced)
 * before and after making or reading batch `batch`, and record it; it shows as a "data"
 * task on a "driver" row of its rank. Both are no-ops without a trace. */
NP_API double np_trainer_clock_us(const np_trainer_t *tr);
NP_API void np_trainer_trace_data(np_trainer_t *tr, long batch, double start_us, double end_us);

/* Reads a Chrome trace file written by a traced run (the "trace" key, `nestpipe train
 * --trace`) into *out; free it with np_trace_free. A file of another kind or a malformed
 * one is NP_STATUS_BAD_INPUT naming the path and what is wrong. */
NP_NODISCARD NP_API np_status np_trace_read_chrome(const char *path, np_trace_t **out, np_error *err);
/* A new trace (*out) of the time window [from_us, to_us) of tr (microseconds from the
 * trace's origin; -INFINITY and INFINITY are its ends; a window past them is cut to them):
 * every task that overlaps
 * it, whatever its batch, clipped to it. Its report is tr's restricted to the window: each
 * rank's span is the window, its steps the batches whose last task ended inside it, the
 * peer waits those of tr cut to the window (docs/tracing.md "Part of a run"). A task of no
 * duration counts at either edge. An empty or inverted window, or one with no task (past
 * the trace's ends or in a gap), is NP_STATUS_BAD_INPUT naming the trace's extent.
 * tr is unchanged. Added in 0.6. */
NP_NODISCARD NP_API np_status np_trace_window(const np_trace_t *tr, double from_us, double to_us,
                                              np_trace_t **out, np_error *err);
/* The window of batches from .. to (inclusive; to < 0: to the end): from the end of the
 * last task of batches before `from` (the trace's start for its first batch) to the end of
 * the last task of batches up to `to`, each the latest over the ranks, so that on the
 * slowest rank exactly batches from .. to complete inside it (each rank counts its own).
 * Of a window's trace: within that window. Before 0.6 this kept the tasks of those batches only,
 * which under dbp and nestpipe dropped the tasks that overlap them. A range with no task is
 * NP_STATUS_BAD_INPUT naming the batches the trace holds. */
NP_NODISCARD NP_API np_status np_trace_batches(const np_trace_t *tr, long from, long to,
                                               np_trace_t **out, np_error *err);
/* np_trace_batches(tr, from, -1, ...): steady-state figures without the warm-up. */
NP_NODISCARD NP_API np_status np_trace_from_batch(const np_trace_t *tr, long from, np_trace_t **out,
                                           np_error *err);
/* A fact about the run that made the trace: "sched" (the StarPU policy that ran),
 * "sched_from" (where it came from: "default", "--sched", "FILE:LINE", "STARPU_SCHED..."),
 * "pipeline", "windows", "chunks", "ranks", "workers", "priorities" (when critical-path
 * priorities took over: from which step); NULL when the trace has no such
 * fact (traces before 0.6 have none). Valid while tr lives. Added in 0.6. */
NP_API const char *np_trace_info(const np_trace_t *tr, const char *key);
/* Frees a trace from np_trace_read_chrome or np_trace_from_batch; NULL-safe. Never free the
 * trainer's. */
NP_API void np_trace_free(np_trace_t *tr);
/* Writes tr as a Chrome trace file that np_trace_read_chrome and `nestpipe trace` read
 * (a replayed trace, a window of one); NP_STATUS_IO naming the path when it cannot. */
NP_NODISCARD NP_API np_status np_trace_write_file(const np_trace_t *tr, const char *path,
                                                  np_error *err);

/* np_trace_print_report flags; 0 = the text tables. */
enum { NP_TRACE_REPORT_JSON = 1, NP_TRACE_REPORT_LAYERS = 2 };
/* Writes the overlap report of `nestpipe trace report` to f: per rank and overall, the step
 * time, each worker's busy and idle time and per node kind the task count, total and exposed
 * time; with NP_TRACE_REPORT_LAYERS also per model layer; with NP_TRACE_REPORT_JSON one JSON
 * object instead of tables. */
NP_NODISCARD NP_API np_status np_trace_print_report(const np_trace_t *tr, FILE *f, int flags,
                                             np_error *err);

/* SVG timeline (rows = ranks x workers, colour = node kind) with charts of exposed time per
 * node kind and compute time per layer; and the Paje format (ViTE, pajeng). Written through
 * PATH.tmp and a rename: NP_STATUS_IO naming the path when it cannot be written. */
NP_NODISCARD NP_API np_status np_trace_write_svg(const np_trace_t *tr, const char *path, np_error *err);
NP_NODISCARD NP_API np_status np_trace_write_paje(const np_trace_t *tr, const char *path, np_error *err);

/* ---------------------------------------------------------------- overall figures */

#define NP_TRACE_MAX_KINDS 32

/* One node kind's tasks over all ranks. */
typedef struct np_trace_kind_time {
    const char *kind;  /* "prefetch", "route", "exchange_emb", "fwd", ... (docs/tracing.md
                          "Node kinds"): static strings */
    long count;        /* tasks */
    double total_us;   /* sum of their durations */
    double exposed_us; /* of the time they ran, the part with no dense compute on their rank */
} np_trace_kind_time;

/* The overall line of the overlap report: sums over ranks, except step_us. */
typedef struct np_trace_summary {
    long batches;                            /* the most of any rank */
    double step_us;                          /* the slowest rank's span / its batches */
    double exchange_us, exchange_exposed_us; /* row, gradient and dense exchanges */
    double exchange_exposed_ratio;           /* exposed / exchange_us; NaN without exchanges */
    double lookup_us, lookup_exposed_us;     /* key routing (route, exchange_keys,
                                                route_owner), retrieve, dual-buffer sync */
    double idle_us;                          /* the workers' idle time */
    double collective_us, peer_wait_us;      /* collectives' task time, and the part of it
                                                spent waiting for the last peer to arrive */
    int n_kinds;
    np_trace_kind_time kind[NP_TRACE_MAX_KINDS]; /* (n_kinds) in the report's order */
} np_trace_summary;

/* Fills *out with tr's overall figures (the analysis of np_trace_print_report). */
NP_NODISCARD NP_API np_status np_trace_summarize(const np_trace_t *tr, np_trace_summary *out,
                                          np_error *err);
/* The entry of node kind `kind` ("sync", "fwd", ...) in s, or NULL when s has none. */
NP_API const np_trace_kind_time *np_trace_summary_kind(const np_trace_summary *s, const char *kind);

/* Steady-state figures (what `nestpipe tune` ranks settings by): per rank, the end of each
 * batch is its last task's end; step_us = (end of the last batch - end of the first batch
 * after `warmup` batches) / the batches between, the slowest rank's; idle_share = over the
 * workers that ran a task (not the driver row), the mean share of that interval in which
 * they ran none. A rank with fewer than warmup + 2 batches is NP_STATUS_BAD_INPUT. Unlike
 * np_trace_from_batch, no task is left out: work of later batches that overlaps counts as
 * busy. Added in 0.6. */
typedef struct np_trace_steady {
    long batches; /* the most of any rank */
    long warmup;  /* batches left out at the start */
    double step_us, idle_share;
} np_trace_steady;
NP_NODISCARD NP_API np_status np_trace_steady_state(const np_trace_t *tr, long warmup,
                                                    np_trace_steady *out, np_error *err);

/* How well the scheduler's perf models predicted (`nestpipe tune --calibrate`): per codelet
 * (task name), over the tasks of batches after the first `warmup`, the tasks, those the
 * scheduler predicted a duration for (dm, dmda, dmdas record task->predicted; other
 * policies none), their mean measured duration, and the median and 90th percentile of
 * |predicted - measured| / measured (NaN with no prediction). `floor_err` is the noise
 * floor: the same median error for a hindsight prediction, each footprint's own median
 * duration in this trace (tasks with equal predictions form a footprint), which no model
 * keyed on the task's footprint can beat by much. rows[max]: more codelets is
 * NP_STATUS_INTERNAL. Names point into the trace. Added in 0.6. */
typedef struct np_trace_pred {
    const char *name;
    long tasks, predicted;
    double mean_us, median_err, p90_err, floor_err;
} np_trace_pred;
NP_NODISCARD NP_API np_status np_trace_predictions(const np_trace_t *tr, long warmup,
                                                   np_trace_pred *rows, int max, int *n_rows,
                                                   np_error *err);

#ifdef __cplusplus
}
#endif
#endif
