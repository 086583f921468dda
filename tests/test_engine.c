/* StarPU engine tests: equal to the reference trainer (within tolerance after 50 steps, bit
 * for bit with one chunk), identical bytes across schedulers and worker counts, and a task
 * trace that matches the graph. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/model/model.h"
#include "engineutil.h"
#include "testutil.h"
#include "runtime/trace/trace.h"


/* The engine's buffers start from a guess of the keys a batch holds (hot keys per bag);
 * batches with more keys make it grow them between steps, keeping what is in flight. Fed
 * bags of 2-6 keys while its config says 1, a one-chunk engine still trains the
 * reference's model bit for bit. */
static void test_buffers_grow(void **state) {
    (void)state;
    np_config eng = small_cfg(NP_ENGINE_STARPU, "rowwise-adagrad"), data = eng;
    np_error e = {{0}};
    if (np_config_set(&eng, "hot", "1", "t", &e) || np_config_set(&data, "hot", "4", "t", &e))
        fail_msg("config: %s", e.msg);
    eng.chunks = 1;
    np_config ref = eng;
    ref.engine = NP_ENGINE_REFERENCE;
    np_model_t *a = train_on(&eng, &data, 6), *b = train_on(&ref, &data, 6);
    if (!same_bytes(a, b)) fail_msg("after growing its buffers the engine left the reference");
    np_model_free(a);
    np_model_free(b);
}

static void check_vs_reference(const char *optim) {
    np_config cs = small_cfg(NP_ENGINE_STARPU, optim), cr = small_cfg(NP_ENGINE_REFERENCE, optim);
    expect_near_reference(&cs, &cr, 50, EQ_ATOL, EQ_RTOL, optim);
}

static void test_matches_reference_sgd(void **state) {
    (void)state;
    check_vs_reference("sgd");
}

static void test_matches_reference_adagrad(void **state) {
    (void)state;
    check_vs_reference("rowwise-adagrad");
}

static void test_one_chunk_is_reference_bit_for_bit(void **state) {
    (void)state;
    np_config cs = small_cfg(NP_ENGINE_STARPU, "rowwise-adagrad");
    np_config cr = small_cfg(NP_ENGINE_REFERENCE, "rowwise-adagrad");
    cs.chunks = 1;
    np_model_t *ms = train(&cs, 10), *mr = train(&cr, 10);
    assert_true(same_bytes(ms, mr));
    size_t n = (size_t)mr->row_base[mr->T];
    assert_memory_equal(ms->state_mem, mr->state_mem, n * sizeof(float));
    np_model_free(ms);
    np_model_free(mr);
}

static void test_same_bytes_any_sched_and_workers(void **state) {
    (void)state;
    const char *sched[] = {"eager", "lws", "prio", "dmda"};
    np_config c = small_cfg(NP_ENGINE_STARPU, "rowwise-adagrad");
    np_model_t *first = NULL;
    for (int s = 0; s < 4; s++)
        for (int ncpu = 1; ncpu <= 2; ncpu++) {
            char n[8];
            snprintf(n, sizeof n, "%d", ncpu);
            setenv("STARPU_NCPU", n, 1);
            snprintf(c.sched, sizeof c.sched, "%s", sched[s]);
            np_model_t *m = train(&c, 8);
            if (!first) {
                first = m;
                continue;
            }
            if (!same_bytes(first, m)) fail_msg("sched %s with %d workers differs", sched[s], ncpu);
            np_model_free(m);
        }
    unsetenv("STARPU_NCPU");
    np_model_free(first);
}

/* DBP reorders work in time, never arithmetic: the same bytes as sequential, on data
 * whose consecutive batches share many rows (small tables, Zipf 1.2, multi-hot). Async,
 * the same overlap without the sync, trains on stale rows: its model differs, which also
 * shows the comparison can fail. */
static void check_dbp(const char *optim) {
    np_config c = small_cfg(NP_ENGINE_STARPU, optim);
    np_error e = {{0}};
    if (np_config_set(&c, "rows", "300", "t", &e) || np_config_set(&c, "zipf", "1.2", "t", &e))
        fail_msg("%s", e.msg);
    np_model_t *seq = train_ahead(&c, 20, NULL);
    const char *sched[] = {"lws", "eager", "prio", "dmda"};
    for (int k = 0; k < 4; k++) {
        np_config d = c;
        d.pipeline = NP_PIPELINE_DBP;
        snprintf(d.sched, sizeof d.sched, "%s", sched[k]);
        uint64_t synced = 0;
        np_model_t *m = train_ahead(&d, 20, &synced);
        if (!same_bytes(m, seq))
            fail_msg("%s dbp with %s differs from sequential", optim, sched[k]);
        if (m->state_mem)
            assert_memory_equal(m->state_mem, seq->state_mem,
                                (size_t)seq->row_base[seq->T] * sizeof(float));
        assert_true(synced > 1000); /* the sync had work to do */
        np_model_free(m);
    }
    np_config a = c;
    a.pipeline = NP_PIPELINE_ASYNC;
    np_model_t *m = train_ahead(&a, 20, NULL);
    assert_false(same_bytes(m, seq));
    assert_true(model_diff(m, seq, EQ_ATOL, EQ_RTOL) > 1.0);
    np_model_free(m);
    np_model_free(seq);
}

static void test_dbp_equals_sequential_sgd(void **state) {
    (void)state;
    check_dbp("sgd");
}

static void test_dbp_equals_sequential_adagrad(void **state) {
    (void)state;
    check_dbp("rowwise-adagrad");
}

/* The reference and sequential trained on the shape keys[0..nk) (the first nref set on the
 * reference too), sequential within the tolerance of the reference, and dbp, fwp and
 * nestpipe (under the lws, eager and dmda schedulers) giving the bytes of sequential. The
 * config, sequential's model and the reference's come back for more checks. */
static void pipelines_same(const char *optim, const char *const *keys, const char *const *vals,
                           int nk, int nref, const char *label, np_config *c, np_model_t **seq,
                           np_model_t **ref) {
    np_config r = small_cfg(NP_ENGINE_REFERENCE, optim);
    *c = small_cfg(NP_ENGINE_STARPU, optim);
    np_error e = {{0}};
    for (int k = 0; k < nk; k++)
        if (np_config_set(c, keys[k], vals[k], "t", &e) ||
            (k < nref && np_config_set(&r, keys[k], vals[k], "t", &e)))
            fail_msg("%s", e.msg);
    *ref = train(&r, 20);
    *seq = train_ahead(c, 20, NULL);
    double worst = model_diff(*seq, *ref, EQ_ATOL, EQ_RTOL);
    print_message("%s: %s: worst |starpu-ref| is %.3g of the tolerance\n", optim, label, worst);
    assert_true(worst <= 1.0);
    const np_pipeline modes[] = {NP_PIPELINE_DBP, NP_PIPELINE_FWP, NP_PIPELINE_NESTPIPE};
    const char *sched[] = {"lws", "eager", "dmda"};
    for (int k = 0; k < 3; k++) {
        np_config d = *c;
        d.pipeline = modes[k];
        snprintf(d.sched, sizeof d.sched, "%s", sched[k]);
        np_model_t *m = train_ahead(&d, 20, NULL);
        if (!same_bytes(m, *seq)) fail_msg("%s: %s: pipeline %d differs from sequential", optim, label, k);
        if (m->state_mem)
            assert_memory_equal(m->state_mem, (*seq)->state_mem,
                                (size_t)(*seq)->row_base[(*seq)->T] * sizeof(float));
        np_model_free(m);
    }
}

/* FWP reorders work in time, never arithmetic: with the same windows and clustering,
 * dbp, fwp and nestpipe give the bytes of sequential, and all stay within the tolerance of
 * the reference. Latent groups give clustering something to do, so the windows are
 * really reordered batches (cluster none gives other bytes). */
static void check_fwp(const char *optim) {
    const char *keys[] = {"rows", "zipf", "groups", "windows", "chunks"};
    const char *vals[] = {"300", "1.2", "4", "4", "2"};
    np_config c;
    np_model_t *seq, *ref;
    pipelines_same(optim, keys, vals, 5, 3, "sequential, 4 windows", &c, &seq, &ref);
    np_config n = c;
    n.cluster = 0;
    n.pipeline = NP_PIPELINE_NESTPIPE;
    np_model_t *m = train_ahead(&n, 20, NULL);
    assert_false(same_bytes(m, seq)); /* other windows, other sums */
    assert_true(model_diff(m, ref, EQ_ATOL, EQ_RTOL) <= 1.0);
    np_model_free(m);
    np_model_free(seq);
    np_model_free(ref);
}

static void test_fwp_equals_sequential_sgd(void **state) {
    (void)state;
    check_fwp("sgd");
}

static void test_fwp_equals_sequential_adagrad(void **state) {
    (void)state;
    check_fwp("rowwise-adagrad");
}

/* The pooled exchange (docs/pipeline.md "Rows or pooled sums"): each bag's rows summed by
 * their owner (here the one rank) before they travel. Every pipeline gives the bytes of
 * sequential with the same form, all within the tolerance of the reference. On one rank a
 * bag's forward sum is the rows' one bit for bit (the owner forms r0 + r1 + ..., the bag
 * 0 + that); the backward differs: a row's gradient adds each bag's gradient into gE
 * directly, where rows first sum a window's bags in grows. With two windows those
 * groupings differ, so rows and auto (rows on one rank) give another model: the check that
 * the pooled path ran. Several keys a bag. */
static void check_pooled(const char *optim) {
    const char *keys[] = {"rows", "zipf", "hot", "windows", "exchange"};
    const char *vals[] = {"300", "1.2", "4", "2", "pooled"};
    np_config c;
    np_model_t *seq, *ref;
    pipelines_same(optim, keys, vals, 5, 3, "pooled, 2 windows", &c, &seq, &ref);
    np_config x = c;
    x.exchange = NP_EXCHANGE_AUTO;
    np_model_t *m = train_ahead(&x, 20, NULL);
    assert_false(same_bytes(m, seq)); /* the rows' sums, in another order */
    assert_true(model_diff(m, ref, EQ_ATOL, EQ_RTOL) <= 1.0);
    np_model_free(m);
    np_model_free(seq);
    np_model_free(ref);
}

static void test_pooled_sgd(void **state) {
    (void)state;
    check_pooled("sgd");
}

static void test_pooled_adagrad(void **state) {
    (void)state;
    check_pooled("rowwise-adagrad");
}

static void test_bad_sched(void **state) {
    (void)state;
    np_config c = small_cfg(NP_ENGINE_STARPU, "sgd");
    np_error e = {{0}};
    np_model_t *m;
    np_trainer_t *tr = NULL;
    snprintf(c.sched, sizeof c.sched, "fastest");
    assert_int_equal(np_model_create(&c, &m, &e), NP_OK);
    assert_int_equal(np_trainer_create(&c, m, &tr, &e), NP_STATUS_BAD_INPUT);
    assert_null(tr);
    assert_non_null(strstr(e.msg, "unknown StarPU policy 'fastest'"));
    assert_non_null(strstr(e.msg, "lws"));
    np_model_free(m);
}

/* ---- the trace against the graph */

typedef struct ev {
    int tid;
    double ts, dur;
} ev;

static int cmp_ev(const void *a, const void *b) {
    const ev *x = a, *y = b;
    if (x->tid != y->tid) return x->tid - y->tid;
    return (x->ts > y->ts) - (x->ts < y->ts);
}

static void test_trace_matches_graph(void **state) {
    (void)state;
    np_config c = small_cfg(NP_ENGINE_STARPU, "sgd");
    char path[] = "/tmp/np_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    snprintf(c.trace, sizeof c.trace, "%s", path);
    const long steps = 3;
    np_model_t *m = train(&c, steps);
    /* tasks per batch: 6 before the windows (prefetch, h2d, route, a2a_keys, route_owner,
     * retrieve), per window exchange_rows and exchange_grads, per dense layer a sum and an
     * update (and an allreduce on several ranks: none here), and the sparse update and
     * write-back,
     * and per chunk: pool, each layer's forward (bottom linears, the dot interaction, top
     * linears), bce fwd+bwd, each layer's backward, pool backward */
    long NL = (c.n_bottom - 1) + c.n_top;
    long per_chunk = 2 * (NL + 1) + 4;
    long W = np_config_windows(&c);
    assert_int_equal(c.ranks, 1);
    long expect = steps * (8 + 2 * W + 2 * NL + W * c.chunks * per_chunk);

    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    unlink(path);
    if (!root) fail_msg("trace is not JSON: %s line %d", jerr.text, jerr.line);
    json_t *events = json_object_get(root, "traceEvents");
    assert_true(json_is_array(events));
    ev *v = calloc(json_array_size(events), sizeof *v);
    long n = 0, kinds[NP_NODE_KIND_COUNT] = {0}, per_batch[3] = {0};
    size_t i;
    json_t *x;
    json_array_foreach(events, i, x) {
        if (strcmp(json_string_value(json_object_get(x, "ph")), "X")) continue;
        const char *kind = json_string_value(json_object_get(json_object_get(x, "args"), "kind"));
        long batch = (long)json_integer_value(json_object_get(json_object_get(x, "args"), "batch"));
        int k;
        for (k = 0; k < NP_NODE_KIND_COUNT; k++)
            if (!strcmp(kind, np_node_kind_name((np_node_kind)k))) break;
        assert_true(k < NP_NODE_KIND_COUNT);
        assert_true(batch >= 0 && batch < steps);
        kinds[k]++;
        per_batch[batch]++;
        v[n].tid = (int)json_integer_value(json_object_get(x, "tid"));
        v[n].ts = json_number_value(json_object_get(x, "ts"));
        v[n].dur = json_number_value(json_object_get(x, "dur"));
        assert_true(v[n].dur >= 0);
        n++;
    }
    assert_int_equal(n, expect); /* one complete event per task */
    for (long b = 0; b < steps; b++)
        assert_int_equal(per_batch[b], expect / steps);
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        /* dual-buffer sync exists only in pipelined modes, the all-reduce and the control
         * channel on several ranks, and the driver's data reads only where the driver
         * records them (the CLI) */
        if (k == NP_NODE_SYNC || k == NP_NODE_ALLREDUCE || k == NP_NODE_DATA ||
            k == NP_NODE_CONTROL) {
            assert_int_equal(kinds[k], 0);
            continue;
        }
        if (!kinds[k]) fail_msg("no task of kind %s", np_node_kind_name((np_node_kind)k));
    }
    assert_int_equal(kinds[NP_NODE_PREFETCH], steps);
    /* a worker runs one task at a time */
    qsort(v, (size_t)n, sizeof *v, cmp_ev);
    for (long j = 1; j < n; j++)
        if (v[j].tid == v[j - 1].tid && v[j].ts < v[j - 1].ts + v[j - 1].dur - 1e-3)
            fail_msg("tasks overlap on worker %d at %.3f us", v[j].tid, v[j].ts);
    free(v);
    json_decref(root);
    np_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference_sgd),
        cmocka_unit_test(test_matches_reference_adagrad),
        cmocka_unit_test(test_one_chunk_is_reference_bit_for_bit),
        cmocka_unit_test(test_same_bytes_any_sched_and_workers),
        cmocka_unit_test(test_dbp_equals_sequential_sgd),
        cmocka_unit_test(test_dbp_equals_sequential_adagrad),
        cmocka_unit_test(test_fwp_equals_sequential_sgd),
        cmocka_unit_test(test_fwp_equals_sequential_adagrad),
        cmocka_unit_test(test_pooled_sgd),
        cmocka_unit_test(test_pooled_adagrad),
        cmocka_unit_test(test_bad_sched),
        cmocka_unit_test(test_buffers_grow),
        cmocka_unit_test(test_trace_matches_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
