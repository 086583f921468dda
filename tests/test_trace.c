/* Trace tests: concurrent recording, the Chrome JSON export re-read with jansson field by
 * field, kind names, export errors, layer (node) ids and names through the export and back,
 * data-flow edges. Reading foreign and malformed files is test_trace_read.c's; overlap
 * analysis of real runs is the graph test's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/trace/trace.h"
#include "testutil.h"

static char tmpdir[64];

/* A path in the test's directory; two slots, so a test can hold an input and an output. */
static const char *tmp_path(const char *name) {
    static char path[2][256];
    static int next;
    next ^= 1;
    snprintf(path[next], sizeof path[next], "%s/%s", tmpdir, name);
    return path[next];
}

static np_trace *new_trace(void) {
    np_trace *tr = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_create(&tr, &e), NP_OK);
    assert_non_null(tr);
    return tr;
}

static void test_kind_names(void **state) {
    (void)state;
    static const char *const want[NP_NODE_KIND_COUNT] = {
        [NP_NODE_PREFETCH] = "prefetch",
        [NP_NODE_H2D] = "h2d",
        [NP_NODE_ROUTE] = "route",
        [NP_NODE_EXCHANGE_KEYS] = "exchange_keys",
        [NP_NODE_ROUTE_OWNER] = "route_owner",
        [NP_NODE_RETRIEVE] = "retrieve",
        [NP_NODE_SYNC] = "sync",
        [NP_NODE_EXCHANGE_EMB] = "exchange_emb",
        [NP_NODE_POOL_FWD] = "pool_fwd",
        [NP_NODE_FWD] = "fwd",
        [NP_NODE_LOSS_FWD] = "loss_fwd",
        [NP_NODE_LOSS_BWD] = "loss_bwd",
        [NP_NODE_BWD] = "bwd",
        [NP_NODE_POOL_BWD] = "pool_bwd",
        [NP_NODE_EXCHANGE_GRAD] = "exchange_grad",
        [NP_NODE_ALLREDUCE] = "allreduce",
        [NP_NODE_SPARSE_UPDATE] = "sparse_update",
        [NP_NODE_WRITEBACK] = "writeback",
        [NP_NODE_DENSE_UPDATE] = "dense_update",
        [NP_NODE_DATA] = "data",
        [NP_NODE_CONTROL] = "control",
    };
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        assert_non_null(want[k]); /* a kind added to the enum needs its name here too */
        assert_string_equal(np_node_kind_name((np_node_kind)k), want[k]);
    }
    assert_string_equal(np_node_kind_name(NP_NODE_KIND_COUNT), "?");
    assert_string_equal(np_node_kind_name((np_node_kind)-1), "?");
}

/* ---- concurrent recording */

enum { PER_THREAD = 200000 }; /* well past the initial capacity: growth happens under contention */

typedef struct {
    np_trace *tr;
    int worker;
} rec_arg;

static void *recorder(void *p) {
    rec_arg *a = p;
    for (long i = 0; i < PER_THREAD; i++) {
        np_trace_event ev = {.name = "t",
                             .kind = NP_NODE_FWD,
                             .batch = i,
                             .window = 0,
                             .worker = a->worker,
                             .start_us = (double)i,
                             .end_us = i + 1.0};
        if (np_trace_record(a->tr, &ev) != 0) return p; /* non-NULL = failure */
    }
    return NULL;
}

static void test_concurrent_record(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    pthread_t th[2];
    rec_arg args[2] = {{tr, 0}, {tr, 1}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, recorder, &args[i]), 0);
    for (int i = 0; i < 2; i++) {
        void *ret = NULL;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
    assert_int_equal(np_trace_count(tr), 2 * PER_THREAD);
    assert_int_equal(np_trace_dropped(tr), 0);
    /* No event lost or torn by a racing grow: each (worker, batch) exactly once, intact,
     * and each worker's events in its own program order. */
    unsigned char *seen = calloc(2 * PER_THREAD, 1);
    long next[2] = {0, 0};
    assert_non_null(seen);
    for (size_t i = 0; i < np_trace_count(tr); i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        assert_true(e->worker == 0 || e->worker == 1);
        assert_true(e->batch >= 0 && e->batch < PER_THREAD);
        assert_int_equal(e->batch, next[e->worker]++);
        assert_true(e->start_us == (double)e->batch && e->end_us == e->batch + 1.0);
        assert_int_equal(e->kind, NP_NODE_FWD);
        assert_string_equal(e->name, "t");
        seen[e->worker * PER_THREAD + e->batch]++;
    }
    for (long i = 0; i < 2 * PER_THREAD; i++)
        assert_int_equal(seen[i], 1);
    assert_null(np_trace_get(tr, 2 * PER_THREAD));
    free(seen);
    np_trace_free(tr);
}

/* ---- export */

/* Times chosen so that ts and dur are not exact binary fractions: the export must keep
 * every double exactly (17 significant digits), not round to a printf default. The last
 * two fields are node and chunk: layers 0 and 2 are named, 1 is not. */
/* The counts (flops to peer): keys on the first, a split and peers on the second, flops on
 * the third. */
static uint64_t sample_peer[6] = {0, 123456789012ULL, 7, 0, 555, 1};
static const np_trace_event sample[] = {
    {"emb_retrieve", NP_NODE_RETRIEVE, 3, -1, 0, 0, 10.1, 25.7, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 1000, 700, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
    {"a2a_rows", NP_NODE_EXCHANGE_EMB, 3, 0, 0, 2, 26.3, 40.9, 123456789012ULL, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1.5, 10.25, 2.75, 3, sample_peer, NULL, 0, 0.5, 3.25},
    {"linear_fwd", NP_NODE_FWD, 3, 0, 0, 1, 1234567.891, 1234999.0003, 0, 0, 0, 0, 0, {0}, 0, 0, 432.25, 0, 4, 1234001.5, 123456789.0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 1234002.25, 0, 0},
    {"allreduce", NP_NODE_ALLREDUCE, 4, -1, 1, 2, 5.5, 9.25, 4096, 2, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
    {"dense_sgd", NP_NODE_DENSE_UPDATE, 4, -1, 1, 0, 0.0, 0.125, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
    {"dot_bwd", NP_NODE_BWD, 3, 1, 0, 1, 11.0, 30.0, 0, 1, 3, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
};
static const char *const sample_layer[] = {[0] = "bottom.0", [2] = "cross.1"}; /* by node */
enum { N_SAMPLE = sizeof sample / sizeof sample[0] };

static json_t *load(const char *path) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) fail_msg("%s:%d: %s", path, je.line, je.text);
    return root;
}

static const char *str_of(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) fail_msg("key '%s' is not a string", key);
    return json_string_value(v);
}

static json_int_t int_of(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) fail_msg("key '%s' is not an integer", key);
    return json_integer_value(v);
}

static double num_of(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) fail_msg("key '%s' is not a number", key);
    return json_number_value(v);
}

/* The metadata event of this name for (pid, tid); tid is ignored for process_name. */
static json_t *find_meta(json_t *events, const char *what, int pid, int tid) {
    size_t i;
    json_t *ev;
    json_t *found = NULL;
    json_array_foreach(events, i, ev) {
        if (strcmp(str_of(ev, "ph"), "M") != 0 || strcmp(str_of(ev, "name"), what) != 0) continue;
        if (int_of(ev, "pid") != pid) continue;
        if (strcmp(what, "thread_name") == 0 && int_of(ev, "tid") != tid) continue;
        if (found) fail_msg("two %s events for pid %d tid %d", what, pid, tid);
        found = ev;
    }
    if (!found) fail_msg("no %s event for pid %d tid %d", what, pid, tid);
    return found;
}

static const char *meta_name(json_t *events, const char *what, int pid, int tid) {
    return str_of(json_object_get(find_meta(events, what, pid, tid), "args"), "name");
}

static void test_export_fields(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_error e = {{0}};
    for (int i = 0; i < N_SAMPLE; i++)
        assert_int_equal(np_trace_record(tr, &sample[i]), 0);
    np_trace_set_worker_name(tr, 0, "cpu 0");
    np_trace_set_worker_name(tr, 2, "first name");
    np_trace_set_worker_name(tr, 2, "comm"); /* renaming replaces */
    np_trace_set_worker_name(tr, 7, "never ran");
    np_trace_set_worker_name(tr, -1, "ignored");
    np_trace_set_node_name(tr, 0, sample_layer[0]);
    np_trace_set_node_name(tr, 2, "first name");
    np_trace_set_node_name(tr, 2, sample_layer[2]); /* renaming replaces */
    np_trace_set_node_name(tr, 5, "ran nothing");
    np_trace_set_node_name(tr, -1, "ignored");
    np_trace_set_node_name(tr, NP_TRACE_MAX_NODE + 1, "ignored");
    const char *path = tmp_path("trace.json");
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_OK);
    assert_int_equal(tu_leftovers(path), 0); /* renamed away */

    json_t *root = load(path);
    assert_int_equal(json_object_size(root), 3);
    assert_string_equal(str_of(root, "displayTimeUnit"), "ms");
    /* every named node, by id, whether or not it ran a task */
    json_t *layers = json_object_get(json_object_get(root, "otherData"), "layers");
    assert_int_equal(json_array_size(layers), 3);
    static const struct {
        int node;
        const char *name;
    } named[] = {{0, "bottom.0"}, {2, "cross.1"}, {5, "ran nothing"}};
    for (size_t i = 0; i < 3; i++) {
        json_t *l = json_array_get(layers, i);
        assert_int_equal(json_object_size(l), 2);
        assert_int_equal(int_of(l, "node"), named[i].node);
        assert_string_equal(str_of(l, "name"), named[i].name);
    }
    json_t *events = json_object_get(root, "traceEvents");
    assert_true(json_is_array(events));

    /* Metadata: ranks 0 and 1; lanes (0,0) (0,1) (0,2) (1,0) (1,2); nothing else. */
    assert_string_equal(meta_name(events, "process_name", 0, 0), "rank 0");
    assert_string_equal(meta_name(events, "process_name", 1, 0), "rank 1");
    static const struct {
        int pid, tid;
        const char *name;
    } lanes[] = {
        {0, 0, "cpu 0"}, {0, 1, "worker 1"}, {0, 2, "comm"}, {1, 0, "cpu 0"}, {1, 2, "comm"}};
    for (size_t i = 0; i < sizeof lanes / sizeof lanes[0]; i++) {
        assert_string_equal(meta_name(events, "thread_name", lanes[i].pid, lanes[i].tid),
                            lanes[i].name);
    }

    /* Task events: every field of every event, matched by its unique name. */
    size_t i, n_meta = 0, n_x = 0;
    json_t *ev;
    double last_ts = -1.0;
    int matched[N_SAMPLE] = {0};
    json_array_foreach(events, i, ev) {
        const char *ph = str_of(ev, "ph");
        if (strcmp(ph, "M") == 0) {
            if (n_x) fail_msg("metadata event %zu after a task event", i);
            n_meta++;
            continue;
        }
        assert_string_equal(ph, "X");
        n_x++;
        assert_int_equal(json_object_size(ev), 8);
        int k = -1;
        for (int j = 0; j < N_SAMPLE; j++)
            if (strcmp(sample[j].name, str_of(ev, "name")) == 0) k = j;
        if (k < 0) fail_msg("unexpected event '%s'", str_of(ev, "name"));
        matched[k]++;
        const np_trace_event *s = &sample[k];
        const char *kind = np_node_kind_name(s->kind);
        assert_string_equal(str_of(ev, "cat"), kind);
        assert_int_equal(int_of(ev, "pid"), s->rank);
        assert_int_equal(int_of(ev, "tid"), s->worker);
        /* Exact: the same double expression on both sides, printed to round-trip. */
        assert_true(num_of(ev, "ts") == s->start_us);
        assert_true(num_of(ev, "dur") == s->end_us - s->start_us);
        assert_true(num_of(ev, "ts") >= last_ts); /* sorted by start */
        last_ts = num_of(ev, "ts");
        json_t *args = json_object_get(ev, "args");
        const char *layer = s->node == 0 || s->node == 2 ? sample_layer[s->node] : NULL;
        assert_int_equal(json_object_size(args), (layer ? 7 : 6) + (s->pred_us > 0) +
                                                     2 * (s->issued > 0) + (s->flops > 0) + (s->ready_us != 0) +
                                                     2 * (s->keys > 0) + 6 * (s->colls > 0) +
                                                     2 * (s->npeer > 0));
        if (s->flops > 0) assert_true(num_of(args, "flops") == s->flops);
        if (s->keys) assert_int_equal(int_of(args, "uniq"), (json_int_t)s->uniq);
        if (s->colls) assert_true(num_of(args, "comm_us") == s->comm_us);
        if (s->npeer) /* sent to each rank, then received from each */
            assert_int_equal(json_integer_value(json_array_get(json_object_get(args, "peer_recv"), 1)),
                             (json_int_t)s->peer[s->npeer + 1]);
        if (s->pred_us > 0) assert_true(num_of(args, "pred") == s->pred_us);
        if (s->issued > 0) { /* submitted by step issued - 1, at submit_us */
            assert_true(num_of(args, "submit") == s->submit_us);
            assert_true(num_of(args, "step") == (double)(s->issued - 1));
        }
        assert_string_equal(str_of(args, "kind"), kind);
        assert_int_equal(int_of(args, "batch"), s->batch);
        assert_int_equal(int_of(args, "window"), s->window);
        assert_int_equal(int_of(args, "bytes"), (json_int_t)s->bytes);
        assert_int_equal(int_of(args, "node"), s->node);
        assert_int_equal(int_of(args, "chunk"), s->chunk);
        if (layer) assert_string_equal(str_of(args, "layer"), layer);
    }
    assert_int_equal(n_meta, 2 + 5);
    assert_int_equal(n_x, N_SAMPLE);
    for (int j = 0; j < N_SAMPLE; j++)
        assert_int_equal(matched[j], 1);
    json_decref(root);
    np_trace_free(tr);
}

static void test_export_empty_and_odd_times(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_error e = {{0}};
    const char *path = tmp_path("empty.json");
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_OK);
    json_t *root = load(path);
    assert_int_equal(json_array_size(json_object_get(root, "traceEvents")), 0);
    json_decref(root);

    /* JSON has no NaN; an end before the start would draw backwards. Both become 0. A
     * NULL name falls back to the kind. */
    np_trace_event odd = {NULL, NP_NODE_SYNC, 1, -1, 0, 0, NAN, 5.0, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
    np_trace_event back = {"back", NP_NODE_SYNC, 2, -1, 0, 0, 9.0, 4.0, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
    assert_int_equal(np_trace_record(tr, &odd), 0);
    assert_int_equal(np_trace_record(tr, &back), 0);
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_OK);
    root = load(path);
    json_t *events = json_object_get(root, "traceEvents"), *ev;
    size_t i, n_x = 0;
    json_array_foreach(events, i, ev) {
        if (strcmp(str_of(ev, "ph"), "X") != 0) continue;
        n_x++;
        if (int_of(json_object_get(ev, "args"), "batch") == 1) {
            assert_string_equal(str_of(ev, "name"), "sync");
            assert_true(num_of(ev, "ts") == 0.0 && num_of(ev, "dur") == 0.0);
        } else {
            assert_true(num_of(ev, "ts") == 9.0 && num_of(ev, "dur") == 0.0);
        }
    }
    assert_int_equal(n_x, 2);
    json_decref(root);
    np_trace_free(tr);
}

static void test_export_unwritable(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_error e = {{0}};
    np_trace_event ev = {"x", NP_NODE_ROUTE, 0, -1, 0, 0, 1.0, 2.0, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
    assert_int_equal(np_trace_record(tr, &ev), 0);
    /* A missing directory: unwritable even for root, which ignores permission bits. */
    const char *path = tmp_path("no-such-dir/trace.json");
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_STATUS_IO);
    if (!strstr(e.msg, path)) fail_msg("message '%s' does not name %s", e.msg, path);
    assert_null(strchr(e.msg, '\n')); /* one line */

    /* A path that is a directory: the temporary is written, the rename fails, and the
     * temporary is cleaned up. */
    path = tmp_path("adir");
    assert_int_equal(mkdir(path, 0700), 0);
    memset(&e, 0, sizeof e);
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_STATUS_IO);
    if (!strstr(e.msg, path)) fail_msg("message '%s' does not name %s", e.msg, path);
    assert_int_equal(tu_leftovers(path), 0);
    assert_int_equal(rmdir(path), 0);
    np_trace_free(tr);
    np_trace_free(NULL); /* no-op */
}

/* ---- layers: node names, and node / chunk / names through the export and back */

/* Data-flow edges: np_trace_new_id numbers tasks, each one's producers are its step graph
 * edges' (graph/link.c, tested in test_critical); the export draws one flow pair per edge
 * whose tasks are both in the trace, and the reader keeps ids and deps. */
static void test_flows(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_error e = {{0}};
    np_trace_event ev[4];
    for (int i = 0; i < 4; i++)
        ev[i] = (np_trace_event){.name = "t", .kind = NP_NODE_FWD, .window = -1,
                                 .worker = i % 2, .start_us = 10.0 * i, .end_us = 10.0 * i + 4,
                                 .node = -1, .chunk = -1};
    /* 1 writes h1; 2 reads h1, writes h2; 3 reads h1 and h2, writes h1; 4 reads h1 (from
     * 3), h2 (from 2) and h3 (never written) */
    static const int64_t deps[4][2] = {{0}, {1}, {1, 2}, {3, 2}};
    static const int n_deps[4] = {0, 1, 2, 2};
    for (int i = 0; i < 4; i++) {
        ev[i].id = np_trace_new_id(tr);
        ev[i].n_deps = 0;
        for (int k = 0; k < n_deps[i]; k++)
            assert_int_equal(np_trace_add_dep(&ev[i], deps[i][k]), 0);
    }
    assert_int_equal(ev[0].id, 1);
    assert_int_equal(ev[0].n_deps, 0);
    assert_int_equal(ev[1].n_deps, 1);
    assert_int_equal(ev[1].dep[0], 1);
    assert_int_equal(ev[2].n_deps, 2);
    assert_int_equal(ev[2].dep[0], 1);
    assert_int_equal(ev[2].dep[1], 2);
    assert_int_equal(ev[3].id, 4);
    assert_int_equal(ev[3].n_deps, 2);
    assert_int_equal(ev[3].dep[0], 3);
    assert_int_equal(ev[3].dep[1], 2);
    for (int i = 1; i < 4; i++) /* task 1 is left out: the edge 1 -> 2 has no source */
        assert_int_equal(np_trace_record(tr, &ev[i]), 0);
    const char *path = tmp_path("flows.json");
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_OK);
    json_t *root = load(path), *events = json_object_get(root, "traceEvents"), *x;
    size_t i;
    int starts = 0, finishes = 0;
    json_array_foreach(events, i, x) {
        const char *ph = str_of(x, "ph");
        if (strcmp(ph, "s") && strcmp(ph, "f")) continue;
        /* each end sits in the middle of its task: s on the producer, f on the consumer */
        double ts = num_of(x, "ts");
        int task = (int)(ts / 10.0);
        assert_true(ts == 10.0 * task + 2);
        assert_int_equal(int_of(x, "tid"), task % 2);
        if (!strcmp(ph, "s")) {
            starts++;
        } else {
            finishes++;
            assert_string_equal(str_of(x, "bp"), "e");
        }
    }
    /* edges 1->2 (source missing), 1->3 (missing), 2->3, 3->4, 2->4: three drawn */
    assert_int_equal(starts, 3);
    assert_int_equal(finishes, 3);
    json_decref(root);
    np_trace *back = NULL;
    assert_int_equal(np_trace_read_chrome(path, &back, &e), NP_OK);
    assert_int_equal(np_trace_count(back), 3);
    for (size_t k = 0; k < 3; k++) {
        const np_trace_event *b = np_trace_get(back, k), *want = &ev[b->id - 1];
        assert_int_equal(b->n_deps, want->n_deps);
        for (int d = 0; d < b->n_deps; d++)
            assert_int_equal(b->dep[d], want->dep[d]);
    }
    np_trace_free(back);
    np_trace_free(tr);
    remove(path);
}

/* No cap on the edges: a task reading 40 handles written by 40 tasks keeps all 40
 * producers through record, the export, the reader and a window. */
static void test_many_deps(void **state) {
    (void)state;
    enum { N = 40 };
    np_trace *tr = new_trace();
    np_error e = {{0}};
    np_trace_event ev[N + 1];
    for (int i = 0; i <= N; i++) {
        ev[i] = (np_trace_event){.name = "t", .kind = NP_NODE_FWD, .window = -1, .worker = 0,
                                 .start_us = i, .end_us = i + 0.5, .node = -1, .chunk = -1};
        ev[i].id = np_trace_new_id(tr);
        if (i < N) assert_int_equal(np_trace_record(tr, &ev[i]), 0);
    }
    for (int d = 0; d < N; d++) /* the last reads what each of the others wrote */
        assert_int_equal(np_trace_add_dep(&ev[N], d + 1), 0);
    assert_int_equal(ev[N].n_deps, N);
    for (int d = 0; d < N; d++)
        assert_int_equal(np_trace_dep(&ev[N], d), d + 1);
    assert_int_equal(np_trace_record(tr, &ev[N]), 0);
    np_trace_event_release(&ev[N]); /* the trace keeps its own copy */
    const np_trace_event *in = np_trace_get(tr, N);
    assert_int_equal(in->n_deps, N);
    assert_int_equal(np_trace_dep(in, N - 1), N);
    const char *path = tmp_path("deps.json");
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_OK);
    np_trace *back = NULL, *win = NULL;
    assert_int_equal(np_trace_read_chrome(path, &back, &e), NP_OK);
    assert_int_equal(np_trace_window(back, 30.0, 41.0, &win, &e), NP_OK);
    for (int t = 0; t < 2; t++) {
        const np_trace *x = t ? win : back;
        const np_trace_event *last = NULL;
        for (size_t k = 0; k < np_trace_count(x); k++)
            if (np_trace_get(x, k)->id == N + 1) last = np_trace_get(x, k);
        assert_non_null(last);
        assert_int_equal(last->n_deps, N);
        for (int d = 0; d < N; d++)
            assert_int_equal(np_trace_dep(last, d), d + 1);
    }
    np_trace_free(win);
    np_trace_free(back);
    np_trace_free(tr);
    remove(path);
}

static void test_layer_names(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_error e = {{0}};
    for (int i = 0; i < N_SAMPLE; i++)
        assert_int_equal(np_trace_record(tr, &sample[i]), 0);
    np_trace_set_node_name(tr, 0, sample_layer[0]);
    np_trace_set_node_name(tr, 2, sample_layer[2]);
    np_trace_set_node_name(tr, 5, "ran nothing");
    np_trace_set_node_name(tr, 3, NULL); /* ignored */
    np_trace_set_info(tr, "sched", "eager"); /* the run's facts round-trip too */
    np_trace_set_info(tr, "sched", "dmda");  /* set again: replaced */
    np_trace_set_info(tr, "sched_from", "--sched");
    assert_string_equal(np_trace_node_name(tr, 2), "cross.1");
    assert_null(np_trace_node_name(tr, 1));
    assert_null(np_trace_node_name(tr, 3));
    assert_null(np_trace_node_name(tr, -1));
    assert_null(np_trace_node_name(tr, 1000));

    const char *path = tmp_path("layers.json");
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_OK);
    np_trace *back = NULL;
    assert_int_equal(np_trace_read_chrome(path, &back, &e), NP_OK);
    assert_int_equal(np_trace_count(back), N_SAMPLE);
    for (size_t i = 0; i < N_SAMPLE; i++) { /* export order is by start: match by name */
        const np_trace_event *b = np_trace_get(back, i);
        int k = -1;
        for (int j = 0; j < N_SAMPLE; j++)
            if (!strcmp(sample[j].name, b->name)) k = j;
        assert_true(k >= 0);
        assert_int_equal(b->node, sample[k].node);
        assert_int_equal(b->chunk, sample[k].chunk);
        assert_true(b->pred_us == sample[k].pred_us); /* the prediction, 0 where none */
        assert_int_equal(b->issued, sample[k].issued); /* submission: 0 where unknown */
        assert_true(b->submit_us == sample[k].submit_us);
        assert_true(b->flops == sample[k].flops); /* the counts, 0 where none */
        assert_true(b->ready_us == sample[k].ready_us); /* when it was ready, 0 unknown */
        assert_true(b->keys == sample[k].keys && b->uniq == sample[k].uniq);
        assert_int_equal(b->colls, sample[k].colls);
        assert_true(b->pack_us == sample[k].pack_us && b->comm_us == sample[k].comm_us &&
                    b->unpack_us == sample[k].unpack_us);
        assert_true(b->post_us == sample[k].post_us && b->pace_us == sample[k].pace_us);
        assert_int_equal(b->npeer, sample[k].npeer);
        if (b->npeer) assert_memory_equal(b->peer, sample[k].peer, 2 * b->npeer * sizeof *b->peer);
        assert_true(!b->npeer == !b->peer);
    }
    assert_string_equal(np_trace_node_name(back, 0), "bottom.0");
    assert_string_equal(np_trace_node_name(back, 2), "cross.1");
    assert_string_equal(np_trace_node_name(back, 5), "ran nothing"); /* from otherData */
    assert_string_equal(np_trace_info(back, "sched"), "dmda");
    assert_string_equal(np_trace_info(back, "sched_from"), "--sched");
    assert_null(np_trace_info(back, "pipeline"));
    assert_null(np_trace_node_name(back, 1));

    /* names travel with np_trace_copy_names and np_trace_from_batch */
    np_trace *copy = new_trace(), *late = NULL;
    np_trace_set_node_name(copy, 2, "replaced");
    np_trace_copy_names(copy, back);
    np_trace_copy_names(copy, copy); /* no-op */
    assert_string_equal(np_trace_node_name(copy, 2), "cross.1");
    assert_string_equal(np_trace_node_name(copy, 5), "ran nothing");
    /* worker names too: the export wrote the default name, the reader kept it */
    assert_string_equal(np_trace_worker_name(copy, 2), "worker 2");
    /* batch 4's tasks end before batch 3's: no window of their own */
    assert_int_equal(np_trace_from_batch(back, 4, &late, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "no window of batches 4 on: they end by 1234.999 ms, before "
                                  "the batches before them do (1234.999 ms)"));
    assert_int_equal(np_trace_from_batch(back, 3, &late, &e), NP_OK);
    assert_int_equal(np_trace_count(late), N_SAMPLE);
    assert_string_equal(np_trace_node_name(late, 0), "bottom.0");
    np_trace_free(copy);
    np_trace_free(late);
    np_trace_free(back);
    np_trace_free(tr);
    remove(path);
}

/* A file without otherData still names the layers its events carry; with it, otherData wins. */
static void test_layer_names_from_args(void **state) {
    (void)state;
    static const char *const ev =
        "{\"name\":\"dot_fwd\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":1,\"dur\":2,"
        "\"args\":{\"kind\":\"fwd\",\"batch\":0,\"window\":0,\"bytes\":0,\"node\":4,"
        "\"chunk\":1,\"layer\":\"interaction\"}}";
    const char *path = tmp_path("args.json");
    for (int with_meta = 0; with_meta < 2; with_meta++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "{\"traceEvents\":[%s]%s}\n", ev,
                with_meta ? ",\"otherData\":{\"layers\":[{\"node\":4,\"name\":\"dot\"},"
                            "{\"node\":\"x\",\"name\":\"skipped\"},{\"node\":6}]}"
                          : "");
        fclose(f);
        np_trace *tr = NULL;
        np_error e = {{0}};
        assert_int_equal(np_trace_read_chrome(path, &tr, &e), NP_OK);
        assert_int_equal(np_trace_get(tr, 0)->node, 4);
        assert_int_equal(np_trace_get(tr, 0)->chunk, 1);
        assert_string_equal(np_trace_node_name(tr, 4), with_meta ? "dot" : "interaction");
        assert_null(np_trace_node_name(tr, 6));
        np_trace_free(tr);
    }
    remove(path);
}

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/np_trace_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    remove(tmp_path("trace.json"));
    remove(tmp_path("empty.json"));
    return rmdir(tmpdir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_concurrent_record),
        cmocka_unit_test(test_export_fields),
        cmocka_unit_test(test_export_empty_and_odd_times),
        cmocka_unit_test(test_export_unwritable),
        cmocka_unit_test(test_layer_names), cmocka_unit_test(test_flows),
        cmocka_unit_test(test_many_deps),
        cmocka_unit_test(test_layer_names_from_args),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
