/* The replay of a traced step at another scale (nestpipe/scale.h, docs/scale.md "The
 * replay"): one rank's tasks of a traced run, its recorded data-flow edges and each
 * worker's order, with compute durations from an uncontended run and the collectives'
 * wire time at the target. Not here: where the wire times come from (the alpha-beta model,
 * runtime/scale/collective.c, or SimGrid in the command). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "nestpipe/scale.h"
#include "runtime/trace/trace.h"

static int double_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int event_ptr_cmp(const void *a, const void *b) {
    const np_trace_event *x = *(const np_trace_event *const *)a, *y = *(const np_trace_event *const *)b;
    if (x->start_us != y->start_us) return x->start_us < y->start_us ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* ---- median durations of a calibration trace, by (kind, node, chunk, window), with
 *      coarser keys as fallbacks: (kind, node), then (kind) */
typedef struct dkey {
    int kind, node, chunk, window;
    double us;
} dkey;

/* The keys alone, then (dkey_cmp) the durations within a key. */
static int key_cmp(const dkey *x, const dkey *y) {
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    if (x->chunk != y->chunk) return x->chunk < y->chunk ? -1 : 1;
    return x->window < y->window ? -1 : x->window > y->window;
}

static int dkey_cmp(const void *a, const void *b) {
    const dkey *x = a, *y = b;
    int c = key_cmp(x, y);
    return c ? c : x->us < y->us ? -1 : x->us > y->us;
}

typedef struct durations {
    dkey *level[3]; /* fine, (kind, node), (kind): sorted */
    size_t n;
} durations;

static dkey coarse(const np_trace_event *e, int level) {
    dkey k = {(int)e->kind, e->node, e->chunk, e->window, 0};
    if (level >= 1) k.chunk = k.window = -9;
    if (level >= 2) k.node = -9;
    return k;
}

/* The tasks of `rank` in batches 2 and later (the first ones touch the tables first and
 * calibrate), or all of them when the trace has no more. */
static np_status durations_make(const np_trace *tr, int rank, durations *d, np_error *err) {
    memset(d, 0, sizeof *d);
    size_t n = np_trace_count(tr), m = 0;
    long last = -1;
    for (size_t i = 0; i < n; i++)
        if (np_trace_get(tr, i)->batch > last) last = np_trace_get(tr, i)->batch;
    long skip = last >= 4 ? 2 : 0;
    for (int l = 0; l < 3; l++)
        if (!(d->level[l] = np_alloc(n ? n : 1, sizeof(dkey), "replay durations", err))) return NP_STATUS_NO_MEMORY;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (e->rank != rank || e->batch < skip || np_node_kind_is(e->kind, NP_KIND_DRIVER)) continue;
        for (int l = 0; l < 3; l++) {
            d->level[l][m] = coarse(e, l);
            d->level[l][m].us = e->end_us - e->start_us;
        }
        m++;
    }
    d->n = m;
    for (int l = 0; l < 3; l++)
        qsort(d->level[l], m, sizeof(dkey), dkey_cmp);
    return NP_OK;
}

static void durations_free(durations *d) {
    for (int l = 0; l < 3; l++)
        free(d->level[l]);
}

/* The median duration of e's key at the finest level that has it; -1 when none has. */
static double durations_of(const durations *d, const np_trace_event *e) {
    for (int l = 0; l < 3; l++) {
        dkey k = coarse(e, l);
        size_t lo = 0, hi = d->n; /* the key's first entry */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (key_cmp(&d->level[l][mid], &k) < 0) lo = mid + 1; else hi = mid;
        }
        size_t end = lo;
        while (end < d->n && !key_cmp(&d->level[l][end], &k))
            end++;
        if (end > lo) {
            size_t c = end - lo;
            const dkey *v = d->level[l] + lo;
            return c % 2 ? v[c / 2].us : (v[c / 2 - 1].us + v[c / 2].us) / 2;
        }
    }
    return -1;
}

/* ---- the runtime's own delay before each task: in a traced run, from the latest of its
 *      submission, its inputs' ends and its worker's previous task to its start (StarPU's
 *      dispatch, a worker's wake-up, a core lent to another thread); the mean per kind of
 *      a calibration trace is added to every replayed task of that kind (the mean, not the
 *      median: the critical path adds them up, and their tail is long) */
typedef struct kind_gap {
    int kind;
    double us;
} kind_gap;

static int kind_gap_cmp(const void *a, const void *b) {
    const kind_gap *x = a, *y = b;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return x->us < y->us ? -1 : x->us > y->us;
}

static np_status gaps_make(const np_trace *tr, int rank, double gap[NP_NODE_KIND_COUNT],
                           np_error *err) {
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++)
        gap[k] = 0;
    size_t n = np_trace_count(tr), m = 0;
    int64_t max_id = 0;
    int workers = 0;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (e->rank != rank || e->id <= 0) continue;
        if (e->worker < 0 || e->worker > 4096 || e->id > 16 * (int64_t)n + 1024)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "replay: task %lld of the calibration trace has worker %d: not a trace "
                          "nestpipe wrote", (long long)e->id, e->worker);
        m++;
        if (e->id > max_id) max_id = e->id;
        if (e->worker + 1 > workers) workers = e->worker + 1;
    }
    const np_trace_event **ev = np_alloc(m ? m : 1, sizeof *ev, "replay (gaps)", err);
    double *end = np_zalloc((size_t)max_id + 1, sizeof *end, "replay (gaps)", err),
           *lane = np_zalloc((size_t)workers + 1, sizeof *lane, "replay (gaps)", err);
    kind_gap *g = np_alloc(m ? m : 1, sizeof *g, "replay (gaps)", err);
    np_status st = NP_STATUS_NO_MEMORY;
    if (!ev || !end || !lane || !g) goto out;
    m = 0;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (e->rank == rank && e->id > 0) ev[m++] = e;
    }
    qsort(ev, m, sizeof *ev, event_ptr_cmp);
    for (size_t i = 0; i < m; i++) {
        const np_trace_event *e = ev[i];
        double ready = e->issued > 0 ? e->submit_us : -INFINITY;
        if (e->worker >= 0 && lane[e->worker] > ready) ready = lane[e->worker];
        for (int k = 0; k < e->n_deps; k++) {
            int64_t p = np_trace_dep(e, k);
            if (p > 0 && p <= max_id && end[p] > ready) ready = end[p];
        }
        g[i] = (kind_gap){(int)e->kind, isfinite(ready) && e->start_us > ready ? e->start_us - ready : 0};
        end[e->id] = e->end_us;
        if (e->worker >= 0) lane[e->worker] = e->end_us;
    }
    qsort(g, m, sizeof *g, kind_gap_cmp);
    for (size_t lo = 0, hi; lo < m; lo = hi) { /* each kind's run */
        for (hi = lo; hi < m && g[hi].kind == g[lo].kind; hi++) {
        }
        size_t c = hi - lo;
        double mean = 0;
        for (size_t i = lo; i < hi; i++)
            mean += g[i].us / (double)c;
        if (g[lo].kind >= 0 && g[lo].kind < NP_NODE_KIND_COUNT)
            gap[g[lo].kind] = mean;
    }
    st = NP_OK;
out:
    free(ev);
    free(end);
    free(lane);
    free(g);
    return st;
}

/* ---- the replay */
static int coll_of(np_node_kind k) {
    switch (k) {
    case NP_NODE_EXCHANGE_KEYS: return NP_COLL_KEYS;
    case NP_NODE_EXCHANGE_EMB: return NP_COLL_ROWS;
    case NP_NODE_EXCHANGE_GRAD: return NP_COLL_GRADS;
    case NP_NODE_ALLREDUCE: return NP_COLL_ALLREDUCE;
    default: return -1;
    }
}

typedef struct task {
    const np_trace_event *e;
    double dur, start, end;
} task;

static int task_cmp(const void *a, const void *b) {
    const task *x = a, *y = b;
    if (x->e->start_us != y->e->start_us) return x->e->start_us < y->e->start_us ? -1 : 1;
    return x->e->id < y->e->id ? -1 : x->e->id > y->e->id;
}

/* Per batch and collective kind: the bytes and tasks of its collectives, and its windows
 * (how many times the per-window wire time is due in the batch). */
typedef struct batch_coll {
    double bytes[NP_COLL_KINDS];
    long tasks[NP_COLL_KINDS];
    uint64_t windows[NP_COLL_KINDS]; /* a bit per window seen (windows < 64) */
} batch_coll;

static int popcount64(uint64_t v) {
    int c = 0;
    for (; v; v &= v - 1)
        c++;
    return c;
}

/* The wire time of collective task t at the target: its kind's time in the batch, shared
 * by bytes among the batch's tasks of that kind (equally when they carry none). */
static double wire_of(const np_replay_cfg *c, const batch_coll *bc, const np_trace_event *e, int k) {
    double whole = c->wire_us[k];
    if (k == NP_COLL_ROWS || k == NP_COLL_GRADS) whole *= popcount64(bc->windows[k]) ? popcount64(bc->windows[k]) : 1;
    double share = bc->bytes[k] > 0 ? (double)e->bytes / bc->bytes[k] : 1.0 / (double)bc->tasks[k];
    return whole * share + (k == NP_COLL_ALLREDUCE ? c->allreduce_latency_us : 0);
}


/* ---- the driver: step k's submit call issues its tasks (none starts before the call
 * reaches it), then the driver reads the next batch, waits for step k (its loss tasks with
 * a look-ahead, every task issued so far without one: sequential and fwp) and agrees with
 * the other ranks before step k + 1's call (runtime/train/run.c, runtime/engine/schedule.c). Its own times
 * (the call's span, the reading, the agreement) are the recorded ones; the agreement's is
 * the median over the steps, plus cfg->driver_sync_us. */
typedef struct step_rec {
    double s_rec, e_rec; /* first and last submission of the call, recorded */
    double read_us;      /* the driver's reading between this call and the next */
    long wait_left;      /* its own tasks of the wait set not yet replayed */
    double wait_end;     /* the latest end of those, replayed */
    double s;            /* the call's start, replayed; NAN until known */
} step_rec;

typedef struct driver {
    step_rec *st;
    long n;      /* steps: the largest issued */
    int all;     /* no look-ahead: a step waits for every task issued so far */
    double agree_us;
    long next;   /* the first step whose start is not yet known */
    long early;  /* tasks replayed before their call's start was known */
} driver;

static void driver_free(driver *d) {
    free(d->st);
}

/* The step whose wait set holds e as one of its own, or -1. Without a look-ahead a step
 * waits for all tasks issued so far; its own are those its call issued (the earlier ones
 * were waited for by the steps before). */
static long waited_by(const driver *d, const np_trace_event *e) {
    if (e->issued <= 0) return -1;
    if (d->all) return e->issued - 1;
    return e->kind == NP_NODE_LOSS_FWD && e->batch >= 0 && e->batch < d->n ? e->batch : -1;
}

/* 1 when the graph's driver waited for everything: its "lookahead" fact is 0, or (older
 * traces) its pipeline has none. */
static int waits_for_all(const np_trace *g) {
    const char *la = np_trace_info(g, "lookahead"), *pipe = np_trace_info(g, "pipeline");
    if (la) return atoi(la) == 0;
    return pipe && (!strcmp(pipe, "sequential") || !strcmp(pipe, "fwp"));
}

static np_status driver_make(const np_replay_cfg *c, const np_trace *g, const task *t, size_t nt,
                             driver *d, np_error *err) {
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < nt; i++)
        if (t[i].e->issued > d->n) d->n = t[i].e->issued;
    if (!d->n) return NP_OK; /* a trace without submissions: no driver to model */
    d->all = waits_for_all(g);
    if (!(d->st = np_zalloc((size_t)d->n + 1, sizeof *d->st, "replay (driver)", err)))
        return NP_STATUS_NO_MEMORY;
    for (long k = 0; k <= d->n; k++) {
        d->st[k].s_rec = INFINITY;
        d->st[k].e_rec = -INFINITY;
        d->st[k].s = NAN;
    }
    double *wend = np_alloc((size_t)d->n + 1, sizeof *wend, "replay (driver)", err);
    double *ag = np_alloc((size_t)d->n + 1, sizeof *ag, "replay (driver)", err);
    if (!wend || !ag) {
        free(wend);
        free(ag);
        return NP_STATUS_NO_MEMORY;
    }
    for (long k = 0; k <= d->n; k++)
        wend[k] = -INFINITY;
    for (size_t i = 0; i < nt; i++) {
        const np_trace_event *e = t[i].e;
        if (e->issued <= 0) continue;
        step_rec *r = &d->st[e->issued - 1];
        if (e->submit_us < r->s_rec) r->s_rec = e->submit_us;
        if (e->submit_us > r->e_rec) r->e_rec = e->submit_us;
        long k = waited_by(d, e);
        if (k >= 0) {
            d->st[k].wait_left++;
            if (e->end_us > wend[k]) wend[k] = e->end_us;
        }
    }
    for (long k = 0; k < d->n; k++) { /* a call that issued nothing takes no time */
        if (!isfinite(d->st[k].s_rec)) d->st[k].s_rec = d->st[k].e_rec = k ? d->st[k - 1].e_rec : 0;
        if (d->all && k && wend[k - 1] > wend[k]) wend[k] = wend[k - 1]; /* all so far */
    }
    /* the reading: the driver rows' tasks between a call and the next */
    for (size_t i = 0; i < np_trace_count(g); i++) {
        const np_trace_event *e = np_trace_get(g, i);
        if (e->rank != c->rank || e->kind != NP_NODE_DATA) continue;
        for (long k = 0; k < d->n; k++)
            if (e->start_us >= d->st[k].e_rec && (k + 1 >= d->n || e->start_us < d->st[k + 1].s_rec)) {
                d->st[k].read_us += e->end_us - e->start_us;
                break;
            }
    }
    /* the agreement: from the wait's end (or the reading's) to the next call, recorded */
    size_t na = 0;
    for (long k = 0; k + 1 < d->n; k++) {
        double ready = d->st[k].e_rec + d->st[k].read_us;
        if (wend[k] > ready) ready = wend[k];
        if (isfinite(ready) && d->st[k + 1].s_rec >= ready) ag[na++] = d->st[k + 1].s_rec - ready;
    }
    qsort(ag, na, sizeof *ag, double_cmp);
    d->agree_us = (na ? ag[na / 2] : 0) + c->driver_sync_us;
    free(ag);
    free(wend);
    d->st[0].s = d->st[0].s_rec;
    d->st[0].wait_end = -INFINITY;
    for (long k = 1; k <= d->n; k++)
        d->st[k].wait_end = -INFINITY;
    d->next = 1;
    return NP_OK;
}

/* Step k + 1's call starts when step k's reading and wait are over, and the ranks agreed.
 * Without a look-ahead step k's wait set is every task issued so far: the steps before
 * were complete when they advanced, so its own tasks are what remains. */
static void driver_advance(driver *d) {
    while (d->next < d->n && d->st[d->next - 1].wait_left <= 0 && isfinite(d->st[d->next - 1].s)) {
        step_rec *p = &d->st[d->next - 1];
        if (d->all && d->next >= 2 && d->st[d->next - 2].wait_end > p->wait_end)
            p->wait_end = d->st[d->next - 2].wait_end;
        double ready = p->s + (p->e_rec - p->s_rec) + p->read_us;
        if (p->wait_end > ready) ready = p->wait_end;
        d->st[d->next].s = ready + d->agree_us;
        d->next++;
    }
}

/* The earliest start of e: its submission in its call, replayed. A task whose call's start
 * is not yet known (the recorded order broke the driver's) waits for the last call known,
 * and is counted. */
static double driver_release(driver *d, const np_trace_event *e) {
    if (!d->st || e->issued <= 0) return 0;
    driver_advance(d);
    const step_rec *r = &d->st[e->issued - 1];
    if (isfinite(r->s)) return r->s + (e->submit_us - r->s_rec);
    d->early++;
    return d->st[d->next - 1].s;
}

static void driver_done(driver *d, const np_trace_event *e, double end) {
    long k = d->st ? waited_by(d, e) : -1;
    if (k < 0) return;
    d->st[k].wait_left--;
    if (end > d->st[k].wait_end) d->st[k].wait_end = end;
}

/* What the graph trace holds of rank c->rank: its tasks with ids (nt), its last batch, its
 * largest id, and how much its compute workers were sharing cores (share >= 1); refuses a
 * trace nestpipe did not write. */
typedef struct graph_scan {
    size_t nt;
    long last;
    int64_t max_id;
    double share;
} graph_scan;

static np_status scan_graph(const np_replay_cfg *c, graph_scan *gs, np_error *err) {
    const np_trace *g = c->graph;
    size_t n = np_trace_count(g), nt = 0;
    long last = -1;
    int64_t max_id = 0;
    unsigned char ran_compute[4097] = {0}; /* the workers that ran compute */
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(g, i);
        if (e->rank != c->rank || e->id <= 0) continue;
        nt++;
        if (e->batch > last) last = e->batch;
        if (e->id > max_id) max_id = e->id;
        if (e->batch < 0 || e->worker < 0 || e->worker > 4096 || e->issued < 0)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "replay: task %lld of the graph has batch %ld, worker %d, step %ld: "
                          "not a trace nestpipe wrote",
                          (long long)e->id, e->batch, e->worker, e->issued - 1);
        if (np_node_kind_is(e->kind, NP_KIND_COMPUTE) && e->worker >= 0 && e->worker <= 4096)
            ran_compute[e->worker] = 1;
    }
    for (size_t i = 0; nt && i < n; i++) { /* ids and steps count tasks and batches */
        const np_trace_event *e = np_trace_get(g, i);
        if (e->rank == c->rank && e->id > 0 && (e->issued > last + 2 || max_id > 16 * (int64_t)nt + 1024))
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "replay: task %lld of the graph says step %ld of %ld batches, or ids "
                          "past %lld for %zu tasks: not a trace nestpipe wrote",
                          (long long)e->id, e->issued - 1, last + 1, (long long)max_id, nt);
    }
    if (!(c->cores_per_rank >= 0) || !isfinite(c->cores_per_rank))
        return np_err(err, NP_STATUS_BAD_INPUT, "replay: cores a rank %g (0 or more)", c->cores_per_rank);
    /* ranks sharing cores: a rank's compute workers get cores_per_rank cores between them */
    int cw = 0;
    for (int w = 0; w <= 4096; w++)
        cw += ran_compute[w];
    if (!nt)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "replay: the graph trace has no task of rank %d with data-flow ids (a "
                      "trace from nestpipe train --trace, 0.5 or later)", c->rank);
    *gs = (graph_scan){.nt = nt,
                       .last = last,
                       .max_id = max_id,
                       .share = c->cores_per_rank > 0 && cw > c->cores_per_rank ? cw / c->cores_per_rank : 1};
    return NP_OK;
}

/* The replayed timeline as a trace of one rank: the graph's tasks at their new times,
 * without what only the recorded run knew (its submissions, predictions, split by peer). */
static np_status timeline_trace(const np_trace *g, const task *t, size_t nt, np_trace **out,
                                np_error *err) {
    np_trace *rt;
    np_status st = np_trace_create(&rt, err);
    if (st) return st;
    np_trace_copy_names(rt, g);
    np_trace_set_info(rt, "projection", "replay");
    for (size_t i = 0; i < nt; i++) {
        np_trace_event ev = *t[i].e;
        ev.rank = 0;
        ev.start_us = t[i].start;
        ev.end_us = t[i].end;
        ev.pred_us = ev.wait_us = 0;
        ev.issued = 0; /* its submissions are the graph's, not this timeline's */
        ev.submit_us = ev.ready_us = 0;
        /* and so are its measured split and bytes by peer (the recorded rank count's) */
        ev.colls = 0;
        ev.pack_us = ev.comm_us = ev.unpack_us = ev.post_us = ev.pace_us = 0;
        ev.npeer = 0;
        ev.peer = NULL;
        if (np_trace_record(rt, &ev)) {
            np_trace_free(rt);
            return np_err(err, NP_STATUS_NO_MEMORY, "out of memory (replay)");
        }
    }
    *out = rt;
    return NP_OK;
}

np_status np_replay(const np_replay_cfg *c, np_replay_out *out, np_error *err) {
    memset(out, 0, sizeof *out);
    if (!(c->device_speed > 0) || !isfinite(c->device_speed))
        return np_err(err, NP_STATUS_BAD_INPUT, "replay: device speed %g (above 0)", c->device_speed);
    const np_trace *g = c->graph;
    graph_scan gs = {0};
    np_status st = scan_graph(c, &gs, err);
    if (st) return st;
    size_t n = np_trace_count(g), nt = gs.nt;
    long last = gs.last;
    int64_t max_id = gs.max_id;
    double share = gs.share;
    long from = c->from_batch, to = c->to_batch < 0 ? last : c->to_batch;
    if (from < 0 || from > to || to > last)
        return np_err(err, NP_STATUS_BAD_INPUT, "replay: batches %ld..%ld outside the graph's 0..%ld",
                      from, to, last);
    task *t = np_alloc(nt, sizeof *t, "replay", err);
    double *lane = NULL, *id_end = np_alloc((size_t)max_id + 1, sizeof *id_end, "replay", err);
    batch_coll *bc = np_zalloc((size_t)last + 1, sizeof *bc, "replay", err);
    durations dur = {0};
    driver drv = {0};
    np_trace *rt = NULL;
    st = NP_STATUS_NO_MEMORY;
    if (!t || !id_end || !bc) goto out;

    if (c->compute && (st = durations_make(c->compute, 0, &dur, err))) goto out;
    double gap[NP_NODE_KIND_COUNT];
    int gaps_of_compute = c->compute && !c->collectives_from_graph;
    /* delays taken from the graph's run already had its ranks sharing the cores: not
     * stretched again */
    double gap_share = gaps_of_compute || !c->compute ? share : 1;
    if ((st = gaps_make(gaps_of_compute ? c->compute : g, gaps_of_compute ? 0 : c->rank, gap, err)))
        goto out;
    int workers = 0;
    nt = 0;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(g, i);
        if (e->rank != c->rank || e->id <= 0) continue;
        int k = coll_of(e->kind);
        double rec = e->end_us - e->start_us, d;
        if (k < 0) { /* compute: the calibration's median, else as recorded */
            d = c->compute ? durations_of(&dur, e) : -1;
            d = (d >= 0 ? d : rec) / c->device_speed * share;
        } else { /* a collective: its local part now, its wire below */
            if (c->compute && !c->collectives_from_graph) {
                d = durations_of(&dur, e);
                d = d >= 0 ? d / c->device_speed : 0;
            } else {
                double wire = c->graph_link_gbit > 0 ? e->bytes / (c->graph_link_gbit * 1e9 / 8) * 1e6 : 0;
                d = rec - wire; /* its waits for the peers stay: the run's stragglers */
                d = d > 0 ? d : 0;
            }
            batch_coll *b = &bc[e->batch];
            b->bytes[k] += (double)e->bytes;
            b->tasks[k]++;
            if (e->window >= 0 && e->window < 64) b->windows[k] |= (uint64_t)1 << e->window;
            else b->windows[k] |= 1;
        }
        t[nt++] = (task){.e = e, .dur = d};
        if (e->worker + 1 > workers) workers = e->worker + 1;
    }
    for (size_t i = 0; i < nt; i++) {
        int k = coll_of(t[i].e->kind);
        if (k >= 0) t[i].dur += wire_of(c, &bc[t[i].e->batch], t[i].e, k);
    }
    qsort(t, nt, sizeof *t, task_cmp); /* recorded start order: deps and lanes before */
    if (!(lane = np_zalloc((size_t)workers + 1, sizeof *lane, "replay", err))) {
        st = NP_STATUS_NO_MEMORY;
        goto out;
    }
    for (int64_t i = 0; i <= max_id; i++)
        id_end[i] = 0;
    if ((st = driver_make(c, g, t, nt, &drv, err))) goto out;
    for (size_t i = 0; i < nt; i++) {
        const np_trace_event *e = t[i].e;
        double s = e->worker >= 0 ? lane[e->worker] : 0;
        double rel = driver_release(&drv, e);
        if (rel > s) s = rel;
        for (int k = 0; k < e->n_deps; k++) {
            int64_t p = np_trace_dep(e, k);
            if (p > 0 && p <= max_id && id_end[p] > s) s = id_end[p];
        }
        if (c->no_gaps == 0) s += gap[e->kind] * gap_share;
        t[i].start = s;
        t[i].end = s + t[i].dur;
        id_end[e->id] = t[i].end;
        if (e->worker >= 0) lane[e->worker] = t[i].end;
        driver_done(&drv, e, t[i].end);
    }
    if ((st = timeline_trace(g, t, nt, &rt, err))) goto out;
    np_trace *win = NULL;
    if ((st = np_trace_batches(rt, from, to, &win, err))) goto out;
    np_trace_summary s;
    st = np_trace_summarize(win, &s, err);
    np_trace_free(win);
    if (st) goto out;
    out->step_us = s.step_us;
    long b = s.batches > 0 ? s.batches : 1;
    out->exchange_us = s.exchange_us / b;
    out->exchange_exposed_us = s.exchange_exposed_us / b;
    out->lookup_exposed_us = s.lookup_exposed_us / b;
    out->tasks = (long)nt;
    out->unordered = drv.early;
    out->trace = rt;
    rt = NULL;
out:
    np_trace_free(rt);
    durations_free(&dur);
    driver_free(&drv);
    free(t);
    free(lane);
    free(id_end);
    free(bc);
    return st;
}

double np_replay_dense_floats(const np_trace *g, int rank, long batch) {
    const char *v = np_trace_info(g, "ranks");
    int R = v ? atoi(v) : 1;
    double bytes = 0;
    for (size_t i = 0; i < np_trace_count(g); i++) {
        const np_trace_event *e = np_trace_get(g, i);
        if (e->rank == rank && e->batch == batch && e->kind == NP_NODE_ALLREDUCE) bytes += (double)e->bytes;
    }
    return R > 1 ? bytes / sizeof(float) * R / (2.0 * (R - 1)) : 0;
}
