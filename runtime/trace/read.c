/* Reading a Chrome trace written by np_trace_write_chrome (events, worker and layer names)
 * back into an np_trace, so reports, pictures and Paje files can be made after the run;
 * traces of earlier versions too (no layers, the kinds before the kind table's split).
 * Not here: foreign Chrome traces (a task event without args.kind is refused) or the overlap
 * analysis (runtime/trace/analyze.c). */
#include "runtime/trace/trace.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"

/* ---- interned task names
 * np_trace_event.name must outlive the trace, and struct np_trace (trace.c) has nowhere to
 * own strings. So names read from files live in one process-lifetime set: a trace names a
 * few dozen codelets, and every trace read in the process shares their single copies. The
 * set is an open-addressing hash table (so a foreign file with 10^5 distinct names stays
 * linear) guarded by a mutex, since traces may be read from several threads. It is never
 * freed: the strings must stay valid for any trace still alive, and valgrind reports them
 * as "still reachable", not lost. */
static pthread_mutex_t names_mu = PTHREAD_MUTEX_INITIALIZER;
static char **names; /* (names_cap) slots, NULL = empty; cap a power of two */
static size_t names_cap, names_n;

static size_t name_hash(const char *s) { /* FNV-1a */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return (size_t)h;
}

/* Slot of s in tab (cap a power of two, never full): its own or the empty one to use. */
static size_t name_slot(char **tab, size_t cap, const char *s) {
    size_t i = name_hash(s) & (cap - 1);
    while (tab[i] && strcmp(tab[i], s))
        i = (i + 1) & (cap - 1);
    return i;
}

/* The interned copy of s; NULL when memory runs out. */
static const char *intern(const char *s) {
    const char *out = NULL;
    pthread_mutex_lock(&names_mu);
    if (2 * (names_n + 1) > names_cap) { /* keep the load under 1/2 */
        size_t cap = names_cap ? 2 * names_cap : 64;
        char **tab = calloc(cap, sizeof *tab);
        if (!tab) goto out;
        for (size_t i = 0; i < names_cap; i++)
            if (names[i]) tab[name_slot(tab, cap, names[i])] = names[i];
        free(names);
        names = tab;
        names_cap = cap;
    }
    size_t i = name_slot(names, names_cap, s);
    if (!names[i]) {
        size_t len = strlen(s);
        char *copy = malloc(len + 1);
        if (!copy) goto out;
        memcpy(copy, s, len + 1);
        names[i] = copy;
        names_n++;
    }
    out = names[i];
out:
    pthread_mutex_unlock(&names_mu);
    return out;
}

/* ---- reading */

/* Worker ids that may carry a name: StarPU has a few dozen workers; a larger id in a file
 * is not ours and would make the name array (one slot per id) huge. */
enum { MAX_NAMED_WORKER = 65535 };
#define MAX_TIME_US 1e15

/* Traces written before the node-kind table (runtime/core/kinds.c) filed some tasks under their
 * neighbours' kinds: the keys' All2All and the owner's dedup under route, pooling and the
 * loss under fwd and bwd. Those kinds were split so that every task of a kind has the same
 * priority, placement and collective flag; their codelet names, which every trace carries,
 * tell which part an old event is, so an old trace reads into today's kinds and analyses to
 * the figures it gave before (dense compute, lookup, exchange and collectives count the same
 * tasks). No new trace has these pairs. */
static const struct {
    const char *kind, *name; /* as an old trace wrote them */
    np_node_kind now;
} renamed[] = {
    {"route", "a2a_keys", NP_NODE_EXCHANGE_KEYS}, {"route", "route_owner", NP_NODE_ROUTE_OWNER},
    {"fwd", "pool_fwd", NP_NODE_POOL_FWD},        {"bwd", "pool_bwd", NP_NODE_POOL_BWD},
    {"fwd", "bce_fwd", NP_NODE_LOSS_FWD},         {"bwd", "bce_bwd", NP_NODE_LOSS_BWD},
};

/* The kind of an event of kind s and task name `name` (NULL: none). */
static int kind_of(const char *s, const char *name, np_node_kind *k) {
    for (size_t i = 0; name && i < sizeof renamed / sizeof *renamed; i++)
        if (!strcmp(s, renamed[i].kind) && !strcmp(name, renamed[i].name)) {
            *k = renamed[i].now;
            return 0;
        }
    return np_node_kind_lookup(s, k);
}

static int is_string(json_t *x, const char *s) {
    return json_is_string(x) && !strcmp(json_string_value(x), s);
}

static int get_int(json_t *obj, const char *key, json_int_t lo, json_int_t hi, json_int_t *v) {
    json_t *x = json_object_get(obj, key);
    if (!json_is_integer(x)) return -1;
    *v = json_integer_value(x);
    return *v < lo || *v > hi ? -1 : 0;
}

static int get_num(json_t *obj, const char *key, double *v) {
    json_t *x = json_object_get(obj, key);
    if (!json_is_number(x)) return -1; /* integer or real: hand-edited files write 100 */
    *v = json_number_value(x);
    return 0;
}

/* Fills ev from a "ph":"X" event; on failure names the missing or bad field in *what. */
/* The counts of a task (np_trace_event's flops to peer; written by set_counts in
 * trace.c): each optional, for traces from before 0.7.1. ev->peer is malloc'd (the caller
 * frees it once the event is recorded). */
static np_status read_counts(json_t *args, np_trace_event *ev, const char **what) {
    json_t *flops = json_object_get(args, "flops");
    if (flops && (!json_is_number(flops) || !(json_number_value(flops) >= 0) ||
                  !isfinite(json_number_value(flops))))
        return *what = "\"args.flops\" is not a count >= 0", NP_STATUS_BAD_INPUT;
    ev->flops = flops ? json_number_value(flops) : 0;
    json_t *ready = json_object_get(args, "ready");
    if (ready && (!json_is_number(ready) || !(fabs(json_number_value(ready)) <= MAX_TIME_US)))
        return *what = "\"args.ready\" is not a time", NP_STATUS_BAD_INPUT;
    ev->ready_us = ready ? json_number_value(ready) : 0;
    json_int_t keys = 0, uniq = 0, colls = 0;
    if ((json_object_get(args, "keys") && get_int(args, "keys", 0, INT64_MAX, &keys)) ||
        (json_object_get(args, "uniq") && get_int(args, "uniq", 0, keys, &uniq)))
        return *what = "\"args.keys\" or \"args.uniq\" is not a count (uniq <= keys)",
               NP_STATUS_BAD_INPUT;
    ev->keys = (uint64_t)keys;
    ev->uniq = (uint64_t)uniq;
    if (json_object_get(args, "colls")) {
        double t[3];
        if (get_int(args, "colls", 1, UINT32_MAX, &colls) || get_num(args, "pack_us", &t[0]) ||
            get_num(args, "comm_us", &t[1]) || get_num(args, "unpack_us", &t[2]) ||
            !(t[0] >= 0 && t[1] >= 0 && t[2] >= 0 && t[0] + t[1] + t[2] <= MAX_TIME_US))
            return *what = "\"args.colls\" without a count >= 1 and times >= 0 in "
                           "\"args.pack_us\", \"comm_us\" and \"unpack_us\"",
                   NP_STATUS_BAD_INPUT;
        if (t[0] + t[1] + t[2] > ev->end_us - ev->start_us + 1e-3)
            return *what = "\"args.pack_us\", \"comm_us\" and \"unpack_us\" add up to more "
                           "than the task's \"dur\"",
                   NP_STATUS_BAD_INPUT;
        ev->colls = (uint32_t)colls;
        ev->pack_us = t[0];
        ev->comm_us = t[1];
        ev->unpack_us = t[2];
        /* posting and pacing came a little later (0.7.1 too): optional, within comm_us */
        double pp[2] = {0, 0};
        if ((json_object_get(args, "post_us") && get_num(args, "post_us", &pp[0])) ||
            (json_object_get(args, "pace_us") && get_num(args, "pace_us", &pp[1])) ||
            !(pp[0] >= 0 && pp[1] >= 0 && pp[0] + pp[1] <= t[1] * (1 + 1e-9) + 1e-6))
            return *what = "\"args.post_us\" or \"args.pace_us\" is not a time >= 0 within "
                           "\"args.comm_us\"",
                   NP_STATUS_BAD_INPUT;
        ev->post_us = pp[0];
        ev->pace_us = pp[1];
    }
    json_t *sent = json_object_get(args, "peer_sent"), *got = json_object_get(args, "peer_recv");
    if (!sent && !got) return NP_OK;
    if (!ev->colls)
        return *what = "\"args.peer_sent\" without \"args.colls\" (a task's bytes by peer "
                       "come with its collectives)",
               NP_STATUS_BAD_INPUT;
    size_t n = json_array_size(sent);
    if (!json_is_array(sent) || !json_is_array(got) || json_array_size(got) != n || n < 1 ||
        n > NP_TRACE_MAX_PEERS)
        return *what = "\"args.peer_sent\" and \"args.peer_recv\" are not two arrays of one "
                       "count per rank (1 to 4096)",
               NP_STATUS_BAD_INPUT;
    if (!(ev->peer = malloc(2 * n * sizeof *ev->peer)))
        return *what = "out of memory", NP_STATUS_NO_MEMORY;
    ev->npeer = (uint32_t)n;
    for (size_t q = 0; q < 2 * n; q++) {
        json_t *x = json_array_get(q < n ? sent : got, q % n);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return *what = "\"args.peer_sent\" or \"args.peer_recv\" holds something other "
                           "than byte counts >= 0",
                   NP_STATUS_BAD_INPUT;
        ev->peer[q] = (uint64_t)json_integer_value(x);
    }
    return NP_OK;
}

static np_status read_task(json_t *e, np_trace_event *ev, const char **what) {
    *ev = (np_trace_event){0};
    json_t *args = json_object_get(e, "args"), *name = json_object_get(e, "name");
    json_t *kind = json_object_get(args, "kind");
    json_int_t pid, tid, batch, window, bytes;
    double ts, dur;
    if (!json_is_object(args)) return *what = "no \"args\" object", NP_STATUS_BAD_INPUT;
    if (!json_is_string(kind)) return *what = "no string \"args.kind\"", NP_STATUS_BAD_INPUT;
    if (kind_of(json_string_value(kind), json_string_value(name), &ev->kind))
        return *what = "unknown \"args.kind\" (expected a node kind: fwd, exchange_emb, ...)",
               NP_STATUS_BAD_INPUT;
    if (!json_is_string(name)) return *what = "no string \"name\"", NP_STATUS_BAD_INPUT;
    if (get_int(e, "pid", 0, INT_MAX, &pid))
        return *what = "no integer \"pid\" (rank) >= 0", NP_STATUS_BAD_INPUT;
    if (get_int(e, "tid", 0, INT_MAX, &tid))
        return *what = "no integer \"tid\" (worker) >= 0", NP_STATUS_BAD_INPUT;
    if (get_num(e, "ts", &ts) || get_num(e, "dur", &dur) || !(dur >= 0))
        return *what = "no number \"ts\" or \"dur\" >= 0", NP_STATUS_BAD_INPUT;
    /* times past 10^15 us (31 years) are not a run's; they would turn spans and
     * per-step figures into inf */
    if (!(fabs(ts) <= MAX_TIME_US) || !(dur <= MAX_TIME_US))
        return *what = "\"ts\" or \"dur\" beyond 1e15 microseconds (31 years)",
               NP_STATUS_BAD_INPUT;
    if (get_int(args, "batch", LONG_MIN, LONG_MAX, &batch))
        return *what = "no integer \"args.batch\"", NP_STATUS_BAD_INPUT;
    if (get_int(args, "window", INT_MIN, INT_MAX, &window))
        return *what = "no integer \"args.window\"", NP_STATUS_BAD_INPUT;
    if (get_int(args, "bytes", 0, INT64_MAX, &bytes))
        return *what = "no integer \"args.bytes\" >= 0", NP_STATUS_BAD_INPUT;
    /* node and chunk came with layers: a trace written before them has neither (-1) */
    json_int_t node = -1, chunk = -1;
    if (json_object_get(args, "node") && get_int(args, "node", -1, INT_MAX, &node))
        return *what = "\"args.node\" is not an integer >= -1", NP_STATUS_BAD_INPUT;
    if (json_object_get(args, "chunk") && get_int(args, "chunk", -1, INT_MAX, &chunk))
        return *what = "\"args.chunk\" is not an integer >= -1", NP_STATUS_BAD_INPUT;
    /* the data-flow edges came later still: optional */
    json_int_t id = 0;
    json_t *deps = json_object_get(args, "deps");
    if (json_object_get(args, "id") && get_int(args, "id", 0, INT64_MAX, &id))
        return *what = "\"args.id\" is not an integer >= 0", NP_STATUS_BAD_INPUT;
    if (deps && !json_is_array(deps))
        return *what = "\"args.deps\" is not an array", NP_STATUS_BAD_INPUT;
    /* a route's segments came with the pooled exchange: optional */
    json_int_t segs = 0, pooled = 0;
    if ((json_object_get(args, "segments") && get_int(args, "segments", 0, UINT32_MAX, &segs)) ||
        (json_object_get(args, "pooled") && get_int(args, "pooled", 0, segs, &pooled)))
        return *what = "\"args.segments\" or \"args.pooled\" is not a count (pooled <= segments)",
               NP_STATUS_BAD_INPUT;
    /* the scheduler's prediction came with tuning (0.6): optional */
    json_t *pred = json_object_get(args, "pred");
    if (pred && (!json_is_number(pred) || !(json_number_value(pred) >= 0) ||
                 !isfinite(json_number_value(pred))))
        return *what = "\"args.pred\" is not a duration >= 0", NP_STATUS_BAD_INPUT;
    ev->pred_us = pred ? json_number_value(pred) : 0;
    /* submission came with the projection (docs/scale.md): optional, both or neither */
    json_t *sub = json_object_get(args, "submit");
    json_int_t step = -1;
    if ((sub && (!json_is_number(sub) || !isfinite(json_number_value(sub)))) ||
        (json_object_get(args, "step") && get_int(args, "step", 0, INT64_MAX - 1, &step)) ||
        (!sub != (step < 0)))
        return *what = "\"args.submit\" and \"args.step\" are not a time and a step >= 0",
               NP_STATUS_BAD_INPUT;
    ev->submit_us = sub ? json_number_value(sub) : 0;
    ev->issued = (long)step + 1;
    ev->segments = (uint32_t)segs;
    ev->pooled = (uint32_t)pooled;
    ev->id = id;
    ev->n_deps = 0;
    for (size_t k = 0; deps && k < json_array_size(deps); k++) {
        json_t *d = json_array_get(deps, k);
        if (!json_is_integer(d) || json_integer_value(d) < 1)
            return *what = "\"args.deps\" holds something other than task ids >= 1",
                   NP_STATUS_BAD_INPUT;
        if (np_trace_add_dep(ev, json_integer_value(d)))
            return *what = "out of memory", NP_STATUS_NO_MEMORY;
    }
    ev->name = intern(json_string_value(name));
    if (!ev->name) return *what = "out of memory", NP_STATUS_NO_MEMORY;
    ev->batch = (long)batch;
    ev->window = (int)window;
    ev->rank = (int)pid;
    ev->worker = (int)tid;
    ev->start_us = ts;
    ev->end_us = ts + dur;
    ev->bytes = (uint64_t)bytes;
    ev->node = (int)node;
    ev->chunk = (int)chunk;
    return read_counts(args, ev, what);
}

/* Node names from otherData.layers ([{"node": id, "name": "bottom.0"}, ...]). Names are
 * cosmetic: a malformed entry is skipped, not a reason to refuse the trace. */
static void read_layer_names(json_t *root, np_trace *tr) {
    json_t *layers = json_object_get(json_object_get(root, "otherData"), "layers"), *l;
    size_t i;
    json_int_t node;
    json_array_foreach(layers, i, l) {
        const char *name = json_string_value(json_object_get(l, "name"));
        if (name && !get_int(l, "node", 0, NP_TRACE_MAX_NODE, &node))
            np_trace_set_node_name(tr, (int)node, name);
    }
}

/* The run's facts from otherData.run ({"sched": "lws", ...}); cosmetic like the names. */
static void read_run_info(json_t *root, np_trace *tr) {
    json_t *run = json_object_get(json_object_get(root, "otherData"), "run"), *v;
    const char *key;
    json_object_foreach(run, key, v) {
        if (json_is_string(v)) np_trace_set_info(tr, key, json_string_value(v));
    }
}

np_status np_trace_read_chrome(const char *path, np_trace **out, np_error *err) {
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        if (json_error_code(&jerr) == json_error_cannot_open_file) {
            FILE *f = fopen(path, "r"); /* for errno's words; jansson's text repeats the path */
            int e = errno;
            if (f) fclose(f);
            return np_err(err, NP_STATUS_IO, "trace: cannot open %s: %s", path,
                          f ? "unreadable" : strerror(e));
        }
        return np_err(err, NP_STATUS_BAD_INPUT, "trace: %s:%d:%d: not JSON: %s", path, jerr.line,
                      jerr.column, jerr.text);
    }
    np_status st = NP_OK;
    np_trace *tr = NULL;
    unsigned char *named = NULL; /* (n_named) 1 = worker id already named by an earlier rank */
    size_t n_named = 0;
    json_t *events = json_object_get(root, "traceEvents");
    if (!json_is_array(events)) {
        st = np_err(err, NP_STATUS_BAD_INPUT,
                    "trace: %s: no \"traceEvents\" array (not a Chrome trace written by "
                    "nestpipe)",
                    path);
        goto done;
    }
    if ((st = np_trace_create(&tr, err))) goto done;

    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (!json_is_object(e) || !ph) {
            st = np_err(err, NP_STATUS_BAD_INPUT,
                        "trace: %s: traceEvents[%zu] is not an event (an object with \"ph\")", path,
                        i);
            goto done;
        }
        if (!strcmp(ph, "X")) {
            np_trace_event ev;
            const char *what = NULL;
            st = read_task(e, &ev, &what);
            if (!st && np_trace_record(tr, &ev))
                st = NP_STATUS_NO_MEMORY, what = NULL;
            free(ev.peer); /* the trace holds its own copies */
            np_trace_event_release(&ev);
            if (st == NP_STATUS_NO_MEMORY && !what) {
                st = np_err(err, NP_STATUS_NO_MEMORY, "trace: out of memory reading %s", path);
                goto done;
            }
            if (st) {
                const char *k =
                    json_string_value(json_object_get(json_object_get(e, "args"), "kind"));
                char shown[128]; /* the file's text: control bytes escaped */
                if (k) k = np_escape(k, strlen(k), shown, sizeof shown);
                st = np_err(err, st, "trace: %s: traceEvents[%zu] (\"ph\":\"X\"%s%s%s): %s", path,
                            i, k ? ", kind '" : "", k ? k : "", k ? "'" : "", what);
                goto done;
            }
            /* otherData.layers (read below) names every layer; a file without it (written
             * by hand, or cut) still names those its events carry */
            const char *layer =
                json_string_value(json_object_get(json_object_get(e, "args"), "layer"));
            if (layer && ev.node >= 0 && !np_trace_node_name(tr, ev.node))
                np_trace_set_node_name(tr, ev.node, layer);
        } else if (!strcmp(ph, "M") && is_string(json_object_get(e, "name"), "thread_name")) {
            /* Names are cosmetic: a malformed one is skipped rather than refusing the file,
             * and so is an id past MAX_NAMED_WORKER (names are an array indexed by id).
             * Ranks reuse worker ids and the trace keeps one name per id: the first wins. */
            json_int_t tid;
            const char *name =
                json_string_value(json_object_get(json_object_get(e, "args"), "name"));
            if (!name || get_int(e, "tid", 0, MAX_NAMED_WORKER, &tid)) continue;
            size_t w = (size_t)tid;
            if (w >= n_named) {
                size_t cap = n_named;
                if (np_grow((void **)&named, &cap, w + 1, 1, "trace worker names", err)) {
                    st = NP_STATUS_NO_MEMORY;
                    goto done;
                }
                memset(named + n_named, 0, cap - n_named);
                n_named = cap;
            }
            if (named[w]) continue;
            named[w] = 1;
            np_trace_set_worker_name(tr, (int)w, name);
        }
        /* Other phases (process_name metadata, instants a viewer added) carry no task. */
    }

    read_layer_names(root, tr);
    read_run_info(root, tr);

done:
    free(named);
    json_decref(root);
    if (st) {
        np_trace_free(tr);
        return st;
    }
    *out = tr;
    return NP_OK;
}
