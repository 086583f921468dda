/* Task trace: a thread-safe in-memory record of every executed task (node kind, batch,
 * window, model layer and chunk, worker, start/end) and its export as Chrome trace JSON
 * (Perfetto, chrome://tracing).
 * Not here: how tasks are timed (graph/ reads StarPU's profiling info and records). */
#ifndef NP_TRACE_TRACE_H
#define NP_TRACE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/core/kinds.h" /* np_node_kind, its names and what the analysis counts it as */
#include "nestpipe/nestpipe.h"
#include "nestpipe/trace.h"

#define NP_TRACE_MAX_DEPS 16

typedef struct np_trace_event {
    const char *name; /* task name, a string that outlives the trace (codelet name) */
    np_node_kind kind;
    long batch;      /* step index */
    int window;      /* micro-batch / chunk index, -1 when the task spans the batch */
    int rank;        /* MPI rank (0 on one process) */
    int worker;      /* StarPU worker id */
    double start_us; /* microseconds since the trace's time origin */
    double end_us;
    uint64_t bytes; /* bytes moved (exchange tasks), else 0 */
    int node;       /* model graph node (layer) of a layer task, -1 otherwise (0 in events
                       made without it: read traces from before layers say -1) */
    int chunk;      /* chunk of a chunk task (window * chunks + c), -1 otherwise */
    int64_t id;     /* the task's number on its rank, from 1 (np_trace_new_id); 0: none */
    int n_deps;     /* its producers: the first NP_TRACE_MAX_DEPS in dep, the rest in
                       dep_more (np_trace_dep reads either) */
    int64_t dep[NP_TRACE_MAX_DEPS]; /* ids of the tasks on its rank whose output it reads */
    /* route: its remote (window, table, owner) segments and those sent pooled
     * (docs/pipeline.md "Rows or pooled sums"); 0 elsewhere and in older traces */
    uint32_t segments, pooled;
    /* the duration the scheduler predicted from the task's perf model (StarPU's
     * task->predicted: dm, dmda, dmdas), in microseconds; 0 when it predicted none */
    double pred_us;
    /* in a window's trace only: the part of the task's (clipped) time spent waiting for a
     * peer, as np_trace_peer_wait found it in the whole trace, cut to the window */
    double wait_us;
    /* issued: 1 + the driver's step whose submit call made the task (np_trace_set_step),
     * 0 unknown (zeroed events, traces from before the projection); then submit_us, when
     * it was submitted (start_us's clock). What a replay needs to hold a task until the
     * driver issues it (docs/scale.md "The replay"). */
    long issued;
    double submit_us;
    /* What the task counted (docs/tracing.md "What a task records"; 0: none, or a trace
     * from before 0.7.1): flops, StarPU's count of it (task->flops); keys and uniq: route's
     * batch keys and the distinct (window, table) rows among them, route_owner's keys
     * received and the distinct rows they name. */
    double flops;
    uint64_t keys, uniq;
    /* A task that ran collectives on several ranks: how many, and its time split into
     * pack_us (before the first), comm_us (inside them, waiting for peers included) and
     * unpack_us (after the last); the rest of its duration ran between them. */
    uint32_t colls;
    double pack_us, comm_us, unpack_us;
    /* npeer > 0: peer holds 2 npeer counts, the payload bytes the task sent to each rank
     * (its own 0), then those it received from each. The trace that holds the event owns
     * the array: np_trace_record copies the caller's. */
    uint32_t npeer;
    uint64_t *peer;
    /* producers past the first NP_TRACE_MAX_DEPS (n_deps - NP_TRACE_MAX_DEPS of them), owned
     * like peer: np_trace_record copies them; np_trace_add_dep grows a caller's */
    int64_t *dep_more;
    /* when its inputs were ready and StarPU pushed it to the scheduler (the profiling
     * push_start_time, start_us's clock); 0 unknown (traces before 0.7.1) */
    double ready_us;
    /* of comm_us (MPI only): posting the collectives (the MPI_I* calls), and the emulated
     * link's pacing (NP_LINK_GBIT); the rest is MPI's wait for the peers and the transfer */
    double post_us, pace_us;
} np_trace_event;

/* Producer k < e->n_deps of e. */
static inline int64_t np_trace_dep(const np_trace_event *e, int k) {
    return k < NP_TRACE_MAX_DEPS ? e->dep[k] : e->dep_more[k - NP_TRACE_MAX_DEPS];
}
/* Appends producer id to ev (past NP_TRACE_MAX_DEPS into a dep_more that the caller frees
 * with np_trace_event_release). -1: out of memory, the edge is dropped. For an event the
 * caller builds, never for a copy of a trace's event (whose dep_more the trace owns and
 * sized exactly): a copy goes to np_trace_record as it is. */
int np_trace_add_dep(np_trace_event *ev, int64_t id);
/* Frees what np_trace_add_dep allocated for a caller's event (never a trace's event or a
 * copy of one). */
void np_trace_event_release(np_trace_event *ev);
/* At most this many ranks' peers in an event (np_trace_record drops larger arrays). */
#define NP_TRACE_MAX_PEERS 4096

typedef struct np_trace np_trace;

/* Creates an empty trace; events beyond the initial capacity grow the buffer. */
NP_NODISCARD np_status np_trace_create(np_trace **out, np_error *err);
/* np_trace_free, np_trace_read_chrome, np_trace_from_batch, np_trace_write_svg and
 * np_trace_write_paje are public (nestpipe/trace.h, included above): np_trace is
 * np_trace_t. */

/* Appends one event; safe to call from several threads at once. Returns -1 only when
 * memory runs out (the event is then dropped and counted). The stored event gets its own
 * copies of ev->peer and ev->dep_more (no memory for them: the event is kept without its
 * peers, or with its first NP_TRACE_MAX_DEPS producers). */
int np_trace_record(np_trace *tr, const np_trace_event *ev);

/* Data-flow edges of a traced run, for the Chrome export's flow events: a task's number
 * on its rank, from 1 in submission order (thread-safe). Its deps, the numbers of the tasks
 * whose output it reads, are the step graph's (graph/link.h; np_trace_add_dep). */
int64_t np_trace_new_id(np_trace *tr);

/* The step the driver is submitting now: tasks recorded from here on carry it (step). */
void np_trace_set_step(np_trace *tr, long step);
long np_trace_get_step(const np_trace *tr);

/* Worker names for the export ("cpu 0", "comm"); index = worker id. Copied. */
void np_trace_set_worker_name(np_trace *tr, int worker, const char *name);

/* Model graph node (layer) names ("bottom.0", "interaction"); index = np_trace_event.node.
 * Copied; renaming replaces. A node < 0 or > NP_TRACE_MAX_NODE, or a NULL name, is ignored,
 * and so is a name that cannot be copied (out of memory): names are cosmetic. */
#define NP_TRACE_MAX_NODE 65535
void np_trace_set_node_name(np_trace *tr, int node, const char *name);

/* Facts about the run ("sched", "sched_from", "pipeline", ...), written as the Chrome
 * file's otherData.run and read back (np_trace_info, public, looks one up). Copied; setting
 * a key again replaces its value; at most NP_TRACE_MAX_INFO keys, and a fact that cannot be
 * copied (out of memory) is dropped: facts are cosmetic. */
#define NP_TRACE_MAX_INFO 32
void np_trace_set_info(np_trace *tr, const char *key, const char *value);
/* The i-th fact's key (NULL past the last) and *value; valid until that key is set again. */
const char *np_trace_info_at(const np_trace *tr, int i, const char **value);

/* Copies src's worker and node names (and its facts) (a merged or filtered trace of the same run);
 * names dst already has for the same id are replaced. No-op when dst == src. */
void np_trace_copy_names(np_trace *dst, const np_trace *src);

/* The last end of a batch's tasks on a rank. */
typedef struct np_trace_batch_end {
    int rank;
    long batch;
    double end_us;
} np_trace_batch_end;
/* Makes tr a window's trace (np_trace_window, runtime/trace/window.c): its bounds in microseconds
 * and the batch ends of the whole trace it was cut from (copied), so that a window of it
 * still knows which batches really ended where. The analysis takes the window as each
 * rank's span and the batches that ended inside it as its steps, and np_trace_peer_wait
 * the events' wait_us. -1: out of memory. */
int np_trace_set_window(np_trace *tr, double from_us, double to_us,
                        const np_trace_batch_end *ends, size_t n);
/* 1 and the bounds when tr is a window's trace, else 0. */
int np_trace_get_window(const np_trace *tr, double *from_us, double *to_us);
/* A window's trace: the batch ends of the whole trace (*n of them), valid while tr lives;
 * NULL otherwise. */
const np_trace_batch_end *np_trace_window_ends(const np_trace *tr, size_t *n);
/* Every (rank, batch)'s last end, by rank then batch, into *out (free it): a window's trace
 * gives those of the whole trace it was cut from (runtime/trace/window.c). */
NP_NODISCARD np_status np_trace_batch_ends(const np_trace *tr, np_trace_batch_end **out,
                                           size_t *n, np_error *err);
/* The batches that ended inside the window on `rank` (0 when tr is no window's). */
long np_trace_window_batches(const np_trace *tr, int rank);

size_t np_trace_count(const np_trace *tr);
/* Event i in record order, NULL when i >= count. The pointer is valid until the next
 * np_trace_record (which may grow the array): read traces after the tasks have finished. */
const np_trace_event *np_trace_get(const np_trace *tr, size_t i);
size_t np_trace_dropped(const np_trace *tr);

/* Writes {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {"layers": [...]}}:
 * one complete event ("ph":"X") per task with pid = rank, tid = worker, ts/dur in
 * microseconds, args {kind, batch, window, bytes, node, chunk} (node and chunk -1 when the
 * task has none) plus "layer" (the node's name) when the node is named; process_name
 * ("rank N") and thread_name (the worker's name, default "worker N") metadata events for
 * every (rank, worker) that ran a task; otherData.layers lists every named node as
 * {"node": id, "name": name} by id (empty when none is named). Task events are
 * sorted by start, rank, worker, then record order, so equal runs give equal files. A
 * non-finite time is written as 0 and a negative duration as 0 (JSON has no NaN).
 * Through PATH.tmp + rename; NP_STATUS_IO naming the path when it cannot be written. */
NP_NODISCARD np_status np_trace_write_chrome(const np_trace *tr, const char *path, np_error *err);

/* np_trace_read_chrome (public) reads a Chrome trace written by np_trace_write_chrome
 * (single- or multi-rank) back into a trace: task events ("ph":"X" with args.kind), thread names and node names (from
 * otherData.layers, else the events' args.layer). A task without args.node / args.chunk (a
 * trace written before layers were recorded) reads as node = -1, chunk = -1. A task of a
 * trace written before the kinds' split reads as today's kind, by its codelet name: route
 * "a2a_keys" as exchange_keys, route "route_owner" as route_owner, fwd/bwd "pool_fwd"/
 * "pool_bwd" as pool_fwd/pool_bwd, fwd/bwd "bce_fwd"/"bce_bwd" as loss_fwd/loss_bwd. Foreign or
 * malformed files -> NP_STATUS_BAD_INPUT naming the path and what is wrong. (runtime/trace/read.c)
 * np_trace_from_batch keeps the worker and node names. */

/* Name of worker w as set (or read), NULL when none. */
const char *np_trace_worker_name(const np_trace *tr, int worker);
/* Name of node (layer) `node` as set (or read), NULL when none. Valid until that node is
 * renamed or the trace is freed. */
const char *np_trace_node_name(const np_trace *tr, int node);

/* ---- overlap analysis (runtime/trace/analyze.c; docs/tracing.md defines every figure)
 * The groups come from the kind table's flags (runtime/core/kinds.c): dense compute = the
 * NP_KIND_COMPUTE kinds (pooling, layers' fwd and bwd, loss), lookup = NP_KIND_LOOKUP (route,
 * the keys' All2All, route_owner, retrieve, sync), exchange = NP_KIND_PAYLOAD (exchange_emb,
 * exchange_grad, allreduce), collectives = NP_KIND_EXCHANGE (those and exchange_keys). A
 * kind's *exposed* time on a rank is the measure of the union of its intervals minus the
 * union of that rank's dense compute intervals. */
typedef struct np_trace_kind_stats {
    long count;        /* tasks */
    double total_us;   /* sum of durations */
    double union_us;   /* measure of the union of its intervals */
    double exposed_us; /* part of the union with no dense compute running on the rank */
} np_trace_kind_stats;

/* A rule of the report's "what to try" that the figures meet (runtime/trace/advice.c; the table is
 * docs/tracing.md "What to try"): its id, the figure it is about (microseconds per rank
 * and step) and that figure's share of the step, the likely cause and the knob to turn.
 * The strings are the table's. */
typedef struct np_trace_advice {
    const char *rule;
    double figure_us, share;
    const char *cause, *knob;
} np_trace_advice;
#define NP_TRACE_MAX_ADVICE 16

typedef struct np_trace_worker_stats {
    int rank, worker;
    double busy_us; /* measure of the union of its tasks' intervals */
    double idle_us; /* rank span - busy */
    int driver;     /* the driver's row (only driver tasks: reading the data), no worker */
} np_trace_worker_stats;

typedef struct np_trace_rank_stats {
    int rank; /* -1 for the overall figures */
    long batches;
    double span_us; /* last end - first start */
    double step_us; /* span / batches (overall: the largest rank's) */
    np_trace_kind_stats kind[NP_NODE_KIND_COUNT];
    double exchange_us, exchange_exposed_us; /* union of exchange kinds, its exposed part */
    double exchange_exposed_ratio;           /* exposed / physical; NaN without exchanges */
    double lookup_us, lookup_exposed_us;
    double idle_us; /* sum of the workers' idle time */
    /* the collectives' task time (sum of durations of the NP_KIND_EXCHANGE kinds), split
     * by np_trace_peer_wait: waiting for the last peer to arrive, and the rest (moving the
     * bytes, packing, summing) */
    double collective_us, peer_wait_us;
    /* the collectives that recorded their split (docs/tracing.md "What a task records"):
     * their task time, and its parts packing, inside the collectives (the peer wait
     * included) and unpacking */
    double split_us, pack_us, comm_us, unpack_us;
    double post_us, pace_us; /* of comm_us: posting, the emulated link (MPI only) */
    /* per rank (not overall): the payload bytes its collectives sent to each of npeer
     * ranks, and those they received from each (peer_recv = peer_sent + npeer, one
     * allocation the report frees); npeer 0 when the trace has no peers */
    int npeer;
    uint64_t *peer_sent, *peer_recv;
} np_trace_rank_stats;

/* Per model layer, summed over ranks: the tasks whose event.node is this node. fwd / bwd are
 * its dense compute tasks (NP_KIND_COMPUTE kinds, bwd those with NP_KIND_BACKWARD); other =
 * its tasks of other kinds (the layer's all-reduce, dense update). */
typedef struct np_trace_layer_stats {
    int node;   /* model graph node; -1: dense compute tasks of no layer (loss, pooling) */
    char *name; /* the node's name (the report's copy), NULL when the trace has none */
    long fwd_count, bwd_count, other_count;
    double fwd_us, bwd_us, other_us; /* sums of task durations */
    double compute_share;            /* (fwd_us + bwd_us) / report compute_us; NaN when 0 */
} np_trace_layer_stats;

typedef struct np_trace_report {
    int n_ranks;
    np_trace_rank_stats *ranks;  /* (n_ranks) by rank */
    np_trace_rank_stats overall; /* sums over ranks (ratio from the sums) */
    int n_workers;
    np_trace_worker_stats *workers; /* (n_workers) by rank, then worker */
    double compute_us;              /* sum of the durations of all dense compute tasks */
    int n_layers;
    np_trace_layer_stats *layers; /* (n_layers) by node id, the node -1 row (if any) last */
    int windowed;                 /* a window's trace (np_trace_window): its bounds */
    double window_from_us, window_to_us;
    /* the run had one rank (its "ranks" fact, else the trace's): no exchange, no peer, so
     * the exchange and collective figures are 0 (the copies stay in the kind rows) */
    int one_rank;
    /* what to try (np_trace_advise), the largest figure first */
    int n_advice;
    np_trace_advice advice[NP_TRACE_MAX_ADVICE];
} np_trace_report;

/* For each event i of tr, wait[i] = the part of its time spent waiting for a peer: for a
 * collective (an NP_KIND_EXCHANGE kind), the time from its start to the
 * start of the same collective (batch, window, layer) on the last rank to reach it, capped
 * at its duration; 0 for other tasks, on one rank, and for a collective that some rank of
 * the trace lacks (a batch range cut). Start times of different ranks share the trace's
 * origin (a barrier), so across hosts the split is as good as that barrier's skew.
 * Returns -1 when memory runs out. */
int np_trace_peer_wait(const np_trace *tr, double *wait);

NP_NODISCARD np_status np_trace_analyze(const np_trace *tr, np_trace_report *out, np_error *err);
/* The rules of the table that r (tr's report) meets, at most max, into out, the largest
 * figure first; returns how many. np_trace_analyze fills r->advice with them. */
int np_trace_advise(const np_trace *tr, const np_trace_report *r, np_trace_advice *out, int max);
/* The table's rules. */
int np_trace_rule_count(void);
void np_trace_report_free(np_trace_report *r);

/* np_trace_report_print flags; 0 = the text report. */
enum { NP_TRACE_PRINT_JSON = 1, NP_TRACE_PRINT_LAYERS = 2 };
/* Human-readable tables, or one JSON object with NP_TRACE_PRINT_JSON; with
 * NP_TRACE_PRINT_LAYERS also the per-layer figures (a table after the overall one, or
 * "compute_us" and "layers" in the JSON object). */
NP_NODISCARD np_status np_trace_report_print(const np_trace_report *r, FILE *f, int flags,
                                             np_error *err);

/* ---- pictures and other formats (paje.c; svg.c over svg_layout.c) */
/* Paje trace (ViTE, pajeng's pj_dump): containers rank > worker, one state per task
 * (value = node kind), events in time order. */
/* SVG: a timeline (rows = ranks x workers, colour = node kind, shaded by layer, batches
 * labelled, each task's tooltip naming its layer and chunk), a bar chart of exposed vs
 * hidden time per node kind and one of compute time per layer. Self-contained, no scripts. */

#endif
