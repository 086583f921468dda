/* Task trace storage (a mutex-guarded growable array, worker and layer names) and its Chrome
 * trace JSON export.
 * Not here: timing tasks or analysing overlap; runtime/engine/ records, tests and tools read. */
#include "runtime/trace/trace.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"

struct np_trace {
    /* Guards everything below. Records come from StarPU worker callbacks on many threads;
     * a mutex is enough because a record is a struct copy, far cheaper than any task. */
    pthread_mutex_t mu;
    np_trace_event *ev; /* (cap), first n in use, in record order */
    size_t n, cap;
    size_t dropped;     /* events lost to a failed grow */
    char **worker_name; /* (n_names) copied names, NULL = default "worker N" */
    size_t n_names;
    char **node_name; /* (n_node_names) copied layer names, NULL = unnamed */
    size_t n_node_names;
    char *info_key[NP_TRACE_MAX_INFO], *info_val[NP_TRACE_MAX_INFO]; /* (n_info) copies */
    int n_info;
    long step; /* np_trace_set_step: atomic, read by np_task_submit without the mutex */
    int64_t next_id; /* np_trace_new_id's last */
    /* a window's trace (np_trace_window): its bounds and, by rank, the batches whose last
     * task ended inside it */
    int windowed;
    double win_from, win_to;
    np_trace_batch_end *win_ends; /* (n_win_ends) */
    size_t n_win_ends;
};

/* The accessors take a const trace but must still lock: the mutex is the one member that
 * changes under a reader. Every trace comes from np_trace_create's malloc, never from a
 * const object, so casting the const away is defined. */
static pthread_mutex_t *lock_of(const np_trace *tr) {
    return &((np_trace *)tr)->mu;
}

np_status np_trace_create(np_trace **out, np_error *err) {
    *out = NULL;
    np_trace *tr = np_zalloc(1, sizeof *tr, "trace", err);
    if (!tr) return NP_STATUS_NO_MEMORY;
    if (pthread_mutex_init(&tr->mu, NULL) != 0) {
        free(tr);
        return np_err(err, NP_STATUS_INTERNAL, "trace: cannot initialise its mutex");
    }
    /* Room for a few thousand tasks up front, so short runs never regrow under the lock. */
    np_status st = np_grow((void **)&tr->ev, &tr->cap, 4096, sizeof *tr->ev, "trace events", err);
    if (st != NP_OK) {
        np_trace_free(tr);
        return st;
    }
    *out = tr;
    return NP_OK;
}

void np_trace_free(np_trace *tr) {
    if (!tr) return;
    for (size_t i = 0; i < tr->n_names; i++)
        free(tr->worker_name[i]);
    free(tr->worker_name);
    for (size_t i = 0; i < tr->n_node_names; i++)
        free(tr->node_name[i]);
    free(tr->node_name);
    for (int i = 0; i < tr->n_info; i++) {
        free(tr->info_key[i]);
        free(tr->info_val[i]);
    }
    free(tr->win_ends);
    for (size_t i = 0; i < tr->n; i++) {
        free(tr->ev[i].peer);
        free(tr->ev[i].dep_more);
    }
    free(tr->ev);
    pthread_mutex_destroy(&tr->mu);
    free(tr);
}

int np_trace_record(np_trace *tr, const np_trace_event *ev) {
    int rc = 0;
    uint64_t *peer = NULL; /* the event's own copy, made outside the lock */
    if (ev->npeer && ev->peer && ev->npeer <= NP_TRACE_MAX_PEERS &&
        (peer = malloc(2 * (size_t)ev->npeer * sizeof *peer)))
        memcpy(peer, ev->peer, 2 * (size_t)ev->npeer * sizeof *peer);
    size_t more = ev->n_deps > NP_TRACE_MAX_DEPS && ev->dep_more
                      ? (size_t)(ev->n_deps - NP_TRACE_MAX_DEPS)
                      : 0;
    int64_t *dep_more = more ? malloc(more * sizeof *dep_more) : NULL;
    if (dep_more) memcpy(dep_more, ev->dep_more, more * sizeof *dep_more);
    pthread_mutex_lock(&tr->mu);
    if (np_grow((void **)&tr->ev, &tr->cap, tr->n + 1, sizeof *tr->ev, "trace events", NULL) !=
        NP_OK) {
        tr->dropped++;
        rc = -1;
        free(peer);
        free(dep_more);
    } else {
        np_trace_event *e = &tr->ev[tr->n++];
        *e = *ev;
        e->peer = peer;
        e->npeer = peer ? ev->npeer : 0;
        e->dep_more = dep_more;
        if (!dep_more && e->n_deps > NP_TRACE_MAX_DEPS) e->n_deps = NP_TRACE_MAX_DEPS;
    }
    pthread_mutex_unlock(&tr->mu);
    return rc;
}

static char *dup_str(const char *s) {
    size_t len = strlen(s);
    char *copy = malloc(len + 1);
    if (copy) memcpy(copy, s, len + 1);
    return copy;
}

/* Sets (*names)[id] to a copy of name, growing the array (*n slots) as needed; called with
 * the lock held. Out of memory: the id keeps its old name; a trace is a diagnostic and must
 * not turn a name into a failure of the run. */
static void set_name(char ***names, size_t *n, size_t id, const char *name) {
    if (id >= *n) {
        char **p = realloc(*names, (id + 1) * sizeof *p);
        if (!p) return;
        for (size_t i = *n; i <= id; i++)
            p[i] = NULL;
        *names = p;
        *n = id + 1;
    }
    char *copy = dup_str(name);
    if (!copy) return;
    free((*names)[id]);
    (*names)[id] = copy;
}

void np_trace_set_worker_name(np_trace *tr, int worker, const char *name) {
    if (worker < 0 || !name) return;
    pthread_mutex_lock(&tr->mu);
    set_name(&tr->worker_name, &tr->n_names, (size_t)worker, name);
    pthread_mutex_unlock(&tr->mu);
}

void np_trace_set_node_name(np_trace *tr, int node, const char *name) {
    if (node < 0 || node > NP_TRACE_MAX_NODE || !name) return;
    pthread_mutex_lock(&tr->mu);
    set_name(&tr->node_name, &tr->n_node_names, (size_t)node, name);
    pthread_mutex_unlock(&tr->mu);
}

/* Takes a copy of the name table under src's lock, then sets the names on dst under its
 * own: one lock at a time, so copies between two traces in both directions cannot deadlock. */
static void copy_table(np_trace *dst, const np_trace *src, int nodes) {
    pthread_mutex_lock(lock_of(src));
    size_t n = nodes ? src->n_node_names : src->n_names;
    char **tab = nodes ? src->node_name : src->worker_name;
    char **snap = n ? calloc(n, sizeof *snap) : NULL;
    for (size_t i = 0; snap && i < n; i++)
        snap[i] = tab[i] ? dup_str(tab[i]) : NULL; /* NULL when out of memory: skipped */
    pthread_mutex_unlock(lock_of(src));
    for (size_t i = 0; snap && i < n; i++) {
        if (!snap[i]) continue;
        if (nodes)
            np_trace_set_node_name(dst, (int)i, snap[i]);
        else
            np_trace_set_worker_name(dst, (int)i, snap[i]);
        free(snap[i]);
    }
    free(snap);
}

void np_trace_set_step(np_trace *tr, long step) {
    __atomic_store_n(&tr->step, step, __ATOMIC_RELAXED);
}

long np_trace_get_step(const np_trace *tr) {
    return __atomic_load_n(&tr->step, __ATOMIC_RELAXED);
}

void np_trace_set_info(np_trace *tr, const char *key, const char *value) {
    if (!key || !value) return;
    pthread_mutex_lock(&tr->mu);
    int i = 0;
    while (i < tr->n_info && strcmp(tr->info_key[i], key))
        i++;
    char *v = dup_str(value), *k = i < tr->n_info ? NULL : dup_str(key);
    if (v && i < tr->n_info) {
        free(tr->info_val[i]);
        tr->info_val[i] = v;
    } else if (v && k && i < NP_TRACE_MAX_INFO) {
        tr->info_key[i] = k;
        tr->info_val[i] = v;
        tr->n_info++;
    } else {
        free(v);
        free(k);
    }
    pthread_mutex_unlock(&tr->mu);
}

const char *np_trace_info_at(const np_trace *tr, int i, const char **value) {
    const char *k = NULL;
    pthread_mutex_lock(lock_of(tr));
    if (i >= 0 && i < tr->n_info) {
        k = tr->info_key[i];
        *value = tr->info_val[i];
    }
    pthread_mutex_unlock(lock_of(tr));
    return k;
}

void np_trace_copy_names(np_trace *dst, const np_trace *src) {
    if (dst == src) return;
    copy_table(dst, src, 0);
    copy_table(dst, src, 1);
    for (int i = 0;; i++) { /* the run's facts: copies, one lock at a time */
        const char *v = NULL, *k = np_trace_info_at(src, i, &v);
        if (!k) break;
        char *kc = dup_str(k), *vc = dup_str(v);
        if (kc && vc) np_trace_set_info(dst, kc, vc);
        free(kc);
        free(vc);
    }
}

size_t np_trace_count(const np_trace *tr) {
    pthread_mutex_lock(lock_of(tr));
    size_t n = tr->n;
    pthread_mutex_unlock(lock_of(tr));
    return n;
}

const np_trace_event *np_trace_get(const np_trace *tr, size_t i) {
    pthread_mutex_lock(lock_of(tr));
    const np_trace_event *e = i < tr->n ? &tr->ev[i] : NULL;
    pthread_mutex_unlock(lock_of(tr));
    return e;
}

size_t np_trace_dropped(const np_trace *tr) {
    pthread_mutex_lock(lock_of(tr));
    size_t d = tr->dropped;
    pthread_mutex_unlock(lock_of(tr));
    return d;
}

/* ---- Chrome trace export */

/* Export order: by start time, then rank and worker, then record order. Record order alone
 * depends on which worker's callback took the lock first, so sorting is what makes two
 * exports of the same run compare equal. */
typedef struct {
    const np_trace_event *e;
    size_t seq;
} ordered;

static int cmp_ordered(const void *pa, const void *pb) {
    const ordered *a = pa, *b = pb;
    if (a->e->start_us != b->e->start_us) return a->e->start_us < b->e->start_us ? -1 : 1;
    if (a->e->rank != b->e->rank) return a->e->rank < b->e->rank ? -1 : 1;
    if (a->e->worker != b->e->worker) return a->e->worker < b->e->worker ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int cmp_lane(const void *pa, const void *pb) {
    const int *a = pa, *b = pb; /* (rank, worker) pairs */
    if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
    return (a[1] > b[1]) - (a[1] < b[1]);
}

/* JSON has no NaN or infinity: a time that is not finite is written as 0 rather than
 * losing the whole trace to one bad clock reading. */
static double finite_or_0(double x) {
    return isfinite(x) ? x : 0.0;
}

/* The counts of a task (np_trace_event's flops to peer) into its args, each only where the
 * task has it, so other tasks' events stay as before. -1: out of memory. */
static int set_counts(json_t *args, const np_trace_event *e) {
    int bad = 0;
    if (e->flops > 0 && isfinite(e->flops)) bad |= json_object_set_new(args, "flops", json_real(e->flops));
    if (e->ready_us != 0 && isfinite(e->ready_us))
        bad |= json_object_set_new(args, "ready", json_real(e->ready_us));
    if (e->keys || e->uniq)
        bad |= json_object_set_new(args, "keys", json_integer((json_int_t)e->keys)) ||
               json_object_set_new(args, "uniq", json_integer((json_int_t)e->uniq));
    if (e->colls)
        bad |= json_object_set_new(args, "colls", json_integer((json_int_t)e->colls)) ||
               json_object_set_new(args, "pack_us", json_real(finite_or_0(e->pack_us))) ||
               json_object_set_new(args, "comm_us", json_real(finite_or_0(e->comm_us))) ||
               json_object_set_new(args, "unpack_us", json_real(finite_or_0(e->unpack_us))) ||
               json_object_set_new(args, "post_us", json_real(finite_or_0(e->post_us))) ||
               json_object_set_new(args, "pace_us", json_real(finite_or_0(e->pace_us)));
    if (e->npeer && e->peer) {
        json_t *sent = json_array(), *got = json_array();
        for (uint32_t q = 0; sent && got && q < e->npeer; q++)
            if (json_array_append_new(sent, json_integer((json_int_t)(e->peer[q] & INT64_MAX))) ||
                json_array_append_new(got, json_integer((json_int_t)(e->peer[e->npeer + q] & INT64_MAX)))) {
                bad = 1;
                break;
            }
        if (!sent || !got) bad = 1;
        if (!bad) {
            bad |= json_object_set_new(args, "peer_sent", sent); /* each steals its array */
            bad |= json_object_set_new(args, "peer_recv", got);
        } else {
            json_decref(sent);
            json_decref(got);
        }
    }
    return bad ? -1 : 0;
}

/* Appends v to arr, taking ownership; returns -1 when either allocation failed. */
static int append(json_t *arr, json_t *v) {
    return (!v || json_array_append_new(arr, v) != 0) ? -1 : 0;
}

/* ---------------------------------------------------------------- data-flow edges */

int64_t np_trace_new_id(np_trace *tr) {
    return __atomic_add_fetch(&tr->next_id, 1, __ATOMIC_RELAXED);
}

int np_trace_add_dep(np_trace_event *ev, int64_t id) {
    if (ev->n_deps < NP_TRACE_MAX_DEPS) {
        ev->dep[ev->n_deps++] = id;
        return 0;
    }
    size_t k = (size_t)(ev->n_deps - NP_TRACE_MAX_DEPS);
    if (!(k & (k - 1)) || !ev->dep_more) { /* grow at powers of two (and from empty) */
        int64_t *p = realloc(ev->dep_more, (k ? 2 * k : 4) * sizeof *p);
        if (!p) return -1;
        ev->dep_more = p;
    }
    ev->dep_more[k] = id;
    ev->n_deps++;
    return 0;
}

void np_trace_event_release(np_trace_event *ev) {
    free(ev->dep_more);
    ev->dep_more = NULL;
    if (ev->n_deps > NP_TRACE_MAX_DEPS) ev->n_deps = NP_TRACE_MAX_DEPS;
}

static json_t *meta_event(const char *what, int pid, int tid, const char *name) {
    return json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", what, "ph", "M", "pid", pid, "tid",
                     tid, "args", "name", name);
}

static int cmp_rank_id(const void *pa, const void *pb) {
    const np_trace_event *a = *(const np_trace_event *const *)pa;
    const np_trace_event *b = *(const np_trace_event *const *)pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* A flow event ("s" on the producer, "f" on the consumer) binds to the slice that encloses
 * its time on its thread: the middle of each task is enclosed by that task alone. */
static double middle(const np_trace_event *e) {
    double s = finite_or_0(e->start_us), d = finite_or_0(e->end_us - e->start_us);
    return s + (d > 0 ? d / 2 : 0);
}

/* One flow (an arrow in Perfetto and chrome://tracing) per data-flow edge whose two tasks
 * are in the trace; returns nonzero when memory runs out. */
static int add_flows(const np_trace *tr, const ordered *ord, json_t *events) {
    size_t m = 0;
    const np_trace_event **by_id = malloc((tr->n ? tr->n : 1) * sizeof *by_id);
    if (!by_id) return 1;
    for (size_t i = 0; i < tr->n; i++)
        if (ord[i].e->id > 0) by_id[m++] = ord[i].e;
    qsort(by_id, m, sizeof *by_id, cmp_rank_id);
    int bad = 0;
    json_int_t flow = 0;
    for (size_t i = 0; i < tr->n && !bad; i++) {
        const np_trace_event *c = ord[i].e;
        for (int k = 0; k < c->n_deps && !bad; k++) {
            np_trace_event key = {.rank = c->rank, .id = np_trace_dep(c, k)};
            const np_trace_event *kp = &key, **hit = bsearch(&kp, by_id, m, sizeof *by_id, cmp_rank_id);
            if (!hit) continue; /* its producer is outside the trace (a batch range) */
            const np_trace_event *p = *hit;
            flow++;
            bad |= append(events, json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:f}", "name", "dep",
                                            "cat", "dep", "ph", "s", "id", flow, "pid", p->rank,
                                            "tid", p->worker, "ts", middle(p)));
            bad |= append(events, json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:f}", "name",
                                            "dep", "cat", "dep", "ph", "f", "bp", "e", "id", flow,
                                            "pid", c->rank, "tid", c->worker, "ts", middle(c)));
        }
    }
    free(by_id);
    return bad;
}

/* Builds the whole document; called with the trace locked. NULL when memory runs out. */
static json_t *build_chrome(const np_trace *tr) {
    json_t *root = json_object(), *events = json_array();
    ordered *ord = malloc((tr->n ? tr->n : 1) * sizeof *ord);
    int *lanes = malloc((tr->n ? tr->n : 1) * 2 * sizeof *lanes); /* (n, 2) rank, worker */
    int bad = !root || !events || !ord || !lanes;
    if (bad) goto done;

    for (size_t i = 0; i < tr->n; i++) {
        ord[i] = (ordered){&tr->ev[i], i};
        lanes[2 * i] = tr->ev[i].rank;
        lanes[2 * i + 1] = tr->ev[i].worker;
    }
    qsort(ord, tr->n, sizeof *ord, cmp_ordered);
    qsort(lanes, tr->n, 2 * sizeof *lanes, cmp_lane);

    /* Metadata first, so viewers name the lanes before they draw them: one process per
     * rank, one thread per worker that ran something. */
    char buf[64];
    for (size_t i = 0; i < tr->n && !bad; i++) {
        int rank = lanes[2 * i], worker = lanes[2 * i + 1];
        if (i == 0 || rank != lanes[2 * (i - 1)]) {
            snprintf(buf, sizeof buf, "rank %d", rank);
            bad |= append(events, meta_event("process_name", rank, 0, buf));
        }
        if (i > 0 && rank == lanes[2 * (i - 1)] && worker == lanes[2 * (i - 1) + 1]) continue;
        const char *name = NULL;
        if (worker >= 0 && (size_t)worker < tr->n_names) name = tr->worker_name[worker];
        if (!name) {
            snprintf(buf, sizeof buf, "worker %d", worker);
            name = buf;
        }
        bad |= append(events, meta_event("thread_name", rank, worker, name));
    }

    for (size_t i = 0; i < tr->n && !bad; i++) {
        const np_trace_event *e = ord[i].e;
        double ts = finite_or_0(e->start_us), dur = finite_or_0(e->end_us - e->start_us);
        /* A task that ends before it starts would break viewers; show it as an instant. */
        if (dur < 0) dur = 0;
        /* json_int_t is signed; byte counts past 2^63 do not occur, clamp rather than wrap. */
        json_int_t bytes = e->bytes > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)e->bytes;
        const char *kind = np_node_kind_name(e->kind);
        /* node and chunk in every event (-1: none), so a reader need not guess; the layer's
         * name where it has one, for the viewer's details pane */
        int node = e->node >= 0 ? e->node : -1, chunk = e->chunk >= 0 ? e->chunk : -1;
        json_t *args =
            json_pack("{s:s, s:I, s:i, s:I, s:i, s:i}", "kind", kind, "batch", (json_int_t)e->batch,
                      "window", e->window, "bytes", bytes, "node", node, "chunk", chunk);
        const char *layer =
            node >= 0 && (size_t)node < tr->n_node_names ? tr->node_name[node] : NULL;
        if (args && layer && json_object_set_new(args, "layer", json_string(layer))) {
            json_decref(args);
            args = NULL;
        }
        if (args && e->segments && /* route: how its segments went */
            (json_object_set_new(args, "segments", json_integer((json_int_t)e->segments)) ||
             json_object_set_new(args, "pooled", json_integer((json_int_t)e->pooled)))) {
            json_decref(args);
            args = NULL;
        }
        if (args && e->pred_us > 0 && isfinite(e->pred_us) && /* the model's prediction */
            json_object_set_new(args, "pred", json_real(e->pred_us))) {
            json_decref(args);
            args = NULL;
        }
        if (args && e->issued > 0 && isfinite(e->submit_us) && /* when and by which step issued */
            (json_object_set_new(args, "submit", json_real(e->submit_us)) ||
             json_object_set_new(args, "step", json_integer((json_int_t)e->issued - 1)))) {
            json_decref(args);
            args = NULL;
        }
        if (args && set_counts(args, e)) {
            json_decref(args);
            args = NULL;
        }
        if (args && e->id > 0) { /* the data-flow edges, also drawn as flow events below */
            json_t *deps = json_array();
            for (int k = 0; deps && k < e->n_deps; k++)
                if (json_array_append_new(deps, json_integer((json_int_t)np_trace_dep(e, k)))) {
                    json_decref(deps);
                    deps = NULL;
                }
            if (!deps || json_object_set_new(args, "id", json_integer((json_int_t)e->id)) ||
                json_object_set_new(args, "deps", deps)) {
                json_decref(args);
                args = NULL;
            }
        }
        bad |= !args || append(events, json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:o}", "name",
                                                 e->name ? e->name : kind, "cat", kind, "ph", "X",
                                                 "pid", e->rank, "tid", e->worker, "ts", ts, "dur",
                                                 dur, "args", args));
    }
    bad |= !bad && add_flows(tr, ord, events);
    bad |= json_object_set(root, "traceEvents", events) != 0;
    bad |= json_object_set_new(root, "displayTimeUnit", json_string("ms")) != 0;
    /* Every named layer, by id, including those that ran no task: the reader's source of
     * names (Chrome's format keeps unknown top-level keys as the trace's metadata). */
    json_t *layers = json_array();
    for (size_t i = 0; layers && !bad && i < tr->n_node_names; i++)
        if (tr->node_name[i])
            bad |=
                append(layers, json_pack("{s:i, s:s}", "node", (int)i, "name", tr->node_name[i]));
    json_t *run = json_object(); /* the run's facts (np_trace_set_info) */
    for (int i = 0; run && !bad && i < tr->n_info; i++)
    {
        json_t *v = json_string(tr->info_val[i]); /* a path of other bytes than UTF-8: */
        if (!v) v = json_string("(not UTF-8)"); /* facts are cosmetic, the trace is not */
        bad |= json_object_set_new(run, tr->info_key[i], v) != 0;
    }
    bad |= !layers || !run ||
           json_object_set_new(root, "otherData",
                               json_pack("{s:o, s:o}", "layers", layers, "run", run));

done:
    json_decref(events);
    free(ord);
    free(lanes);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

np_status np_trace_write_chrome(const np_trace *tr, const char *path, np_error *err) {
    pthread_mutex_lock(lock_of(tr));
    json_t *root = build_chrome(tr);
    pthread_mutex_unlock(lock_of(tr));
    if (!root)
        return np_err(err, NP_STATUS_NO_MEMORY,
                      "trace: cannot build the JSON for %s (out of memory, or a worker or layer "
                      "name that is not UTF-8)",
                      path);

    /* Through a unique temporary and rename, so a reader never sees half a trace and a
     * failed export leaves an earlier file of the same name intact. */
    np_outfile o;
    np_status st = np_outfile_open(&o, path, "trace", err);
    if (st) {
        json_decref(root);
        return st;
    }
    errno = 0;
    int failed = json_dumpf(root, o.f, JSON_COMPACT | JSON_REAL_PRECISION(17)) != 0 ||
                 fputc('\n', o.f) == EOF;
    st = np_outfile_commit(&o, failed, err);
    json_decref(root);
    return st;
}

/* The name is the trace's copy: valid until np_trace_set_worker_name renames that worker
 * or the trace is freed. */
const char *np_trace_worker_name(const np_trace *tr, int worker) {
    const char *name = NULL;
    pthread_mutex_lock(lock_of(tr));
    if (worker >= 0 && (size_t)worker < tr->n_names) name = tr->worker_name[worker];
    pthread_mutex_unlock(lock_of(tr));
    return name;
}

const char *np_trace_node_name(const np_trace *tr, int node) {
    const char *name = NULL;
    pthread_mutex_lock(lock_of(tr));
    if (node >= 0 && (size_t)node < tr->n_node_names) name = tr->node_name[node];
    pthread_mutex_unlock(lock_of(tr));
    return name;
}

int np_trace_set_window(np_trace *tr, double from_us, double to_us,
                        const np_trace_batch_end *ends, size_t n) {
    np_trace_batch_end *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) return -1;
    if (n) memcpy(copy, ends, n * sizeof *copy);
    pthread_mutex_lock(&tr->mu);
    free(tr->win_ends);
    tr->win_ends = copy;
    tr->n_win_ends = n;
    tr->win_from = from_us;
    tr->win_to = to_us;
    tr->windowed = 1;
    pthread_mutex_unlock(&tr->mu);
    return 0;
}

int np_trace_get_window(const np_trace *tr, double *from_us, double *to_us) {
    pthread_mutex_lock(lock_of(tr));
    int w = tr->windowed;
    if (w) {
        *from_us = tr->win_from;
        *to_us = tr->win_to;
    }
    pthread_mutex_unlock(lock_of(tr));
    return w;
}

/* Set once, on a new trace, before anyone reads it. */
const np_trace_batch_end *np_trace_window_ends(const np_trace *tr, size_t *n) {
    pthread_mutex_lock(lock_of(tr));
    const np_trace_batch_end *e = tr->windowed ? tr->win_ends : NULL;
    *n = tr->windowed ? tr->n_win_ends : 0;
    pthread_mutex_unlock(lock_of(tr));
    return e;
}

long np_trace_window_batches(const np_trace *tr, int rank) {
    size_t n = 0;
    const np_trace_batch_end *e = np_trace_window_ends(tr, &n);
    long done = 0;
    for (size_t i = 0; i < n; i++)
        done += e[i].rank == rank && e[i].end_us > tr->win_from && e[i].end_us <= tr->win_to;
    return done;
}
