/* Trace report tests: overlap figures of hand-made traces with exact expected numbers, the
 * per-layer figures, the JSON report, and the same report from a Chrome trace read back.
 * Not here: recording, the export and reading files (test_trace.c), real runs
 * (test_engine.c). */
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

#include "runtime/trace/trace.h"
#include "traceutil.h"

/* Times in the hand-made traces are small integers, so every union, difference and ratio
 * is exact in double: figures are compared with ==. A trace read back carries ts + dur
 * through 17-digit decimals, which may move an end by an ulp: 1e-3 us is far above that
 * and far below any interval in the tests. */
#define READ_ATOL_US 1e-3

static char tmpdir[64];

/* A path in the test's directory; two slots, so a test can hold an input and an output. */
static const char *tmp_path(const char *name) {
    static char path[2][256];
    static int next;
    next ^= 1;
    snprintf(path[next], sizeof path[next], "%s/%s", tmpdir, name);
    return path[next];
}

/* A trace of a two-rank run: the figures' tests with rank 0 alone stand for one rank's
 * part of it (a one-rank run exchanges nothing: test_one_rank_run). */
static np_trace *new_trace(void) {
    np_trace *tr = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_create(&tr, &e), NP_OK);
    np_trace_set_info(tr, "ranks", "2");
    return tr;
}

static const np_trace_worker_stats *worker(const np_trace_report *r, int rank, int w) {
    for (int i = 0; i < r->n_workers; i++)
        if (r->workers[i].rank == rank && r->workers[i].worker == w) return &r->workers[i];
    fail_msg("no worker %d on rank %d", w, rank);
    return NULL;
}

static void kind_is(const np_trace_rank_stats *r, np_node_kind k, long count, double total,
                    double uni, double exposed) {
    assert_int_equal(r->kind[k].count, count);
    assert_true(r->kind[k].total_us == total);
    assert_true(r->kind[k].union_us == uni);
    assert_true(r->kind[k].exposed_us == exposed);
}

/* Prints r into a string (text or JSON); free() it. */
static char *print_report(const np_trace_report *r, int json) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    np_error e = {{0}};
    assert_int_equal(np_trace_report_print(r, f, json, &e), NP_OK);
    fclose(f);
    return buf;
}

static json_t *report_json(const np_trace_report *r) {
    char *s = print_report(r, 1);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    if (!root) fail_msg("report JSON does not parse: %s (line %d)\n%s", je.text, je.line, s);
    free(s);
    return root;
}

/* ---- figures */

/* Worker 0: fwd [0,100), bwd [150,250); worker 1: exchange_emb [50,200), route [300,320).
 * Exchange union 150, hidden behind compute [50,100) and [150,200): exposed 50 (the gap
 * 100..150), ratio 1/3; the route runs after all compute: 20 exposed. */
static void test_one_rank(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    tu_trace_add(tr, 0, 0, NP_NODE_FWD, 0, 0, 100);
    tu_trace_add(tr, 0, 0, NP_NODE_BWD, 0, 150, 250);
    tu_trace_add(tr, 0, 1, NP_NODE_EXCHANGE_EMB, 0, 50, 200);
    tu_trace_add(tr, 0, 1, NP_NODE_ROUTE, 1, 300, 320);
    np_trace_report r = tu_analyze(tr);
    assert_int_equal(r.n_ranks, 1);
    const np_trace_rank_stats *k = &r.ranks[0];
    assert_int_equal(k->rank, 0);
    assert_int_equal(k->batches, 2);
    assert_true(k->span_us == 320);
    assert_true(k->step_us == 160);
    kind_is(k, NP_NODE_FWD, 1, 100, 100, 100); /* dense compute: exposed = union */
    kind_is(k, NP_NODE_BWD, 1, 100, 100, 100);
    kind_is(k, NP_NODE_EXCHANGE_EMB, 1, 150, 150, 50);
    kind_is(k, NP_NODE_ROUTE, 1, 20, 20, 20);
    kind_is(k, NP_NODE_ALLREDUCE, 0, 0, 0, 0);
    assert_true(k->exchange_us == 150);
    assert_true(k->exchange_exposed_us == 50);
    assert_true(k->exchange_exposed_ratio == 50.0 / 150.0);
    assert_true(k->lookup_us == 20);
    assert_true(k->lookup_exposed_us == 20);
    assert_int_equal(r.n_workers, 2);
    assert_true(worker(&r, 0, 0)->busy_us == 200);
    assert_true(worker(&r, 0, 0)->idle_us == 120);
    assert_true(worker(&r, 0, 1)->busy_us == 170);
    assert_true(worker(&r, 0, 1)->idle_us == 150);
    assert_true(k->idle_us == 270);
    /* one rank: overall = the rank */
    const np_trace_rank_stats *o = &r.overall;
    assert_int_equal(o->rank, -1);
    assert_int_equal(o->batches, 2);
    assert_true(o->span_us == 320 && o->step_us == 160 && o->idle_us == 270);
    assert_true(o->exchange_exposed_ratio == 50.0 / 150.0);
    kind_is(o, NP_NODE_EXCHANGE_EMB, 1, 150, 150, 50);

    char *text = print_report(&r, 0);
    assert_non_null(strstr(text, "rank 0"));
    assert_null(strstr(text, "overall")); /* one rank: its block is the overall one */
    assert_non_null(strstr(text, "step 0.160 ms"));
    assert_non_null(strstr(text, "summed over"));
    assert_non_null(strstr(text, "exposed ratio 0.333"));
    free(text);
    np_trace_report_free(&r);
    np_trace_free(tr);
}

/* Rank 1's exchange [50,150) runs while rank 0 computes [0,100) but its own rank computes
 * only at [200,300): exposure is per rank, so all 100 us of it are exposed. */
static void test_two_ranks(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    tu_trace_add(tr, 1, 0, NP_NODE_FWD, 1, 200, 300); /* record order is not rank order */
    tu_trace_add(tr, 0, 0, NP_NODE_FWD, 0, 0, 100);
    tu_trace_add(tr, 0, 1, NP_NODE_EXCHANGE_EMB, 0, 0, 100);
    tu_trace_add(tr, 1, 1, NP_NODE_EXCHANGE_EMB, 0, 50, 150);
    np_trace_report r = tu_analyze(tr);
    assert_int_equal(r.n_ranks, 2);
    assert_int_equal(r.ranks[0].rank, 0);
    assert_int_equal(r.ranks[1].rank, 1);
    assert_true(r.ranks[0].exchange_exposed_us == 0);
    assert_true(r.ranks[0].exchange_exposed_ratio == 0);
    assert_true(r.ranks[1].exchange_exposed_us == 100);
    assert_true(r.ranks[1].exchange_exposed_ratio == 1);
    assert_int_equal(r.ranks[0].batches, 1);
    assert_int_equal(r.ranks[1].batches, 2);
    assert_true(r.ranks[0].span_us == 100 && r.ranks[0].step_us == 100);
    assert_true(r.ranks[1].span_us == 250 && r.ranks[1].step_us == 125);
    assert_true(r.ranks[0].idle_us == 0);
    assert_true(r.ranks[1].idle_us == 300);
    assert_int_equal(r.n_workers, 4);
    assert_int_equal(r.workers[0].rank, 0); /* by rank, then worker */
    assert_int_equal(r.workers[3].rank, 1);
    assert_int_equal(r.workers[3].worker, 1);
    assert_true(worker(&r, 1, 0)->idle_us == 150);

    const np_trace_rank_stats *o = &r.overall;
    assert_int_equal(o->batches, 2);
    assert_true(o->span_us == 250);
    assert_true(o->step_us == 125);
    assert_true(o->exchange_us == 200);
    assert_true(o->exchange_exposed_us == 100);
    assert_true(o->exchange_exposed_ratio == 0.5); /* from the sums, not a mean of ratios */
    assert_true(o->idle_us == 300);
    kind_is(o, NP_NODE_FWD, 2, 200, 200, 200);
    kind_is(o, NP_NODE_EXCHANGE_EMB, 2, 200, 200, 100);
    np_trace_report_free(&r);
    np_trace_free(tr);
}

/* Two retrieves overlap on two workers: union 150, not the sum 200; a bwd [120,200) hides
 * 30 of it. A sync inside the retrieves adds nothing to the lookup union. */
static void test_same_kind_overlap(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    tu_trace_add(tr, 0, 0, NP_NODE_RETRIEVE, 0, 0, 100);
    tu_trace_add(tr, 0, 1, NP_NODE_RETRIEVE, 0, 50, 150);
    tu_trace_add(tr, 0, 2, NP_NODE_BWD, 0, 120, 200);
    tu_trace_add(tr, 0, 2, NP_NODE_SYNC, 0, 10, 20);
    tu_trace_add(tr, 0, 0, NP_NODE_RETRIEVE, 0, 60, 60); /* zero length: counted, measures nothing */
    tu_trace_add(tr, 0, 0, NP_NODE_PREFETCH, 0, 90, 80); /* ends before it starts: zero length */
    np_trace_report r = tu_analyze(tr);
    const np_trace_rank_stats *k = &r.ranks[0];
    kind_is(k, NP_NODE_RETRIEVE, 3, 200, 150, 120);
    kind_is(k, NP_NODE_SYNC, 1, 10, 10, 10);
    kind_is(k, NP_NODE_PREFETCH, 1, 0, 0, 0);
    assert_true(k->lookup_us == 150);
    assert_true(k->lookup_exposed_us == 120);
    assert_true(worker(&r, 0, 2)->busy_us == 90);
    assert_true(worker(&r, 0, 0)->busy_us == 100);
    assert_true(k->span_us == 200);
    np_trace_report_free(&r);
    np_trace_free(tr);
}

static void test_empty(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_trace_report r = tu_analyze(tr);
    assert_int_equal(r.n_ranks, 0);
    assert_int_equal(r.n_workers, 0);
    assert_int_equal(r.overall.rank, -1);
    assert_int_equal(r.overall.batches, 0);
    assert_true(r.overall.span_us == 0 && r.overall.step_us == 0 && r.overall.idle_us == 0);
    assert_true(isnan(r.overall.exchange_exposed_ratio));
    char *text = print_report(&r, 0);
    assert_non_null(strstr(text, "overall (0 ranks"));
    free(text);
    json_t *j = report_json(&r);
    assert_int_equal(json_array_size(json_object_get(j, "ranks")), 0);
    assert_true(
        json_is_null(json_object_get(json_object_get(j, "overall"), "exchange_exposed_ratio")));
    json_decref(j);
    np_trace_report_free(&r);
    np_trace_report_free(&r); /* twice: the first left it empty */
    np_trace_report_free(NULL);
    np_trace_free(tr);
}

/* Only exchanges, partly overlapping across kinds: one union of 30 us (not the sum 35), all
 * of it exposed. */
static void test_only_exchange(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    tu_trace_add(tr, 0, 3, NP_NODE_EXCHANGE_EMB, 0, 0, 10);
    tu_trace_add(tr, 0, 3, NP_NODE_EXCHANGE_GRAD, 0, 5, 20);
    tu_trace_add(tr, 0, 3, NP_NODE_ALLREDUCE, 0, 30, 40);
    np_trace_report r = tu_analyze(tr);
    assert_true(r.ranks[0].exchange_us == 30);
    assert_true(r.ranks[0].exchange_exposed_us == 30);
    assert_true(r.ranks[0].exchange_exposed_ratio == 1);
    assert_true(r.overall.exchange_exposed_ratio == 1);
    assert_true(worker(&r, 0, 3)->busy_us == 30);
    assert_true(worker(&r, 0, 3)->idle_us == 10);
    np_trace_report_free(&r);
    np_trace_free(tr);
}

static void test_no_exchange(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    tu_trace_add(tr, 0, 0, NP_NODE_FWD, 0, 0, 10);
    tu_trace_add(tr, 0, 0, NP_NODE_DENSE_UPDATE, 0, 10, 12);
    np_trace_report r = tu_analyze(tr);
    assert_true(r.ranks[0].exchange_us == 0);
    assert_true(isnan(r.ranks[0].exchange_exposed_ratio));
    assert_true(isnan(r.overall.exchange_exposed_ratio));
    kind_is(&r.ranks[0], NP_NODE_DENSE_UPDATE, 1, 2, 2, 2);
    json_t *j = report_json(&r);
    json_t *r0 = json_array_get(json_object_get(j, "ranks"), 0);
    assert_true(json_is_null(json_object_get(r0, "exchange_exposed_ratio")));
    assert_true(
        json_is_null(json_object_get(json_object_get(j, "overall"), "exchange_exposed_ratio")));
    json_decref(j);
    char *text = print_report(&r, 0);
    assert_non_null(strstr(text, "no exchange"));
    free(text);
    np_trace_report_free(&r);
    np_trace_free(tr);
}

/* The kinds split off route, fwd and bwd count where their tasks counted before: the keys'
 * All2All is lookup and a collective but not exchange; pooling and the loss are dense
 * compute, bwd by their backward flag. Worker 0: pool_fwd [0,10), loss_fwd [10,20), loss_bwd
 * [20,30), pool_bwd [30,40), route [50,60), route_owner [60,70); worker 1: exchange_keys
 * [5,50); worker 2: exchange_emb [35,45). Dense compute [0,40): exchange 10, 5 exposed;
 * lookup [5,70) = 65, 30 exposed; collectives 45 + 10. */
static void test_split_kinds(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    tu_trace_add(tr, 0, 0, NP_NODE_POOL_FWD, 0, 0, 10);
    tu_trace_add(tr, 0, 0, NP_NODE_LOSS_FWD, 0, 10, 20);
    tu_trace_add(tr, 0, 0, NP_NODE_LOSS_BWD, 0, 20, 30);
    tu_trace_add(tr, 0, 0, NP_NODE_POOL_BWD, 0, 30, 40);
    tu_trace_add(tr, 0, 0, NP_NODE_ROUTE, 0, 50, 60);
    tu_trace_add(tr, 0, 0, NP_NODE_ROUTE_OWNER, 0, 60, 70);
    tu_trace_add(tr, 0, 1, NP_NODE_EXCHANGE_KEYS, 0, 5, 50);
    tu_trace_add(tr, 0, 2, NP_NODE_EXCHANGE_EMB, 0, 35, 45);
    np_trace_report r = tu_analyze(tr);
    const np_trace_rank_stats *k = &r.ranks[0];
    kind_is(k, NP_NODE_POOL_FWD, 1, 10, 10, 10); /* dense compute: exposed = union */
    kind_is(k, NP_NODE_LOSS_BWD, 1, 10, 10, 10);
    kind_is(k, NP_NODE_EXCHANGE_KEYS, 1, 45, 45, 10);
    kind_is(k, NP_NODE_ROUTE_OWNER, 1, 10, 10, 10);
    kind_is(k, NP_NODE_EXCHANGE_EMB, 1, 10, 10, 5);
    assert_true(k->exchange_us == 10 && k->exchange_exposed_us == 5);
    assert_true(k->lookup_us == 65 && k->lookup_exposed_us == 30);
    assert_true(k->collective_us == 55 && k->peer_wait_us == 0);
    assert_true(r.compute_us == 40);
    assert_int_equal(r.n_layers, 1); /* dense compute of no layer */
    const np_trace_layer_stats *l = &r.layers[0];
    assert_true(l->node == -1 && l->fwd_count == 2 && l->bwd_count == 2 && l->other_count == 0);
    assert_true(l->fwd_us == 20 && l->bwd_us == 20 && l->compute_share == 1);
    char *text = print_report(&r, 0);
    assert_non_null(
        strstr(text, "\n  exchange_keys         1       0.045       0.045       0.010"));
    free(text);
    np_trace_report_free(&r);
    np_trace_free(tr);
}

/* 10^5 events in one analysis: the sweep must stay O(n log n) (a quadratic one takes
 * minutes here). Tasks [i, i+1) round-robin over 4 workers tile [0, n). */
static void test_large(void **state) {
    (void)state;
    enum { N = 100000 };
    np_trace *tr = new_trace();
    for (long i = 0; i < N; i++)
        tu_trace_add(tr, 0, (int)(i % 4), i % 2 ? NP_NODE_BWD : NP_NODE_EXCHANGE_GRAD, i / 100, (double)i,
            i + 1.0);
    np_trace_report r = tu_analyze(tr);
    assert_int_equal(r.ranks[0].batches, N / 100);
    assert_true(r.ranks[0].span_us == N);
    assert_true(r.ranks[0].exchange_us == N / 2);
    assert_true(r.ranks[0].exchange_exposed_us == N / 2); /* touches compute, never overlaps */
    assert_true(worker(&r, 0, 1)->busy_us == N / 4);
    np_trace_report_free(&r);
    np_trace_free(tr);
}

/* ---- per layer */

static void add_layer(np_trace *tr, int rank, int worker, np_node_kind kind, int node, double s,
                      double e) {
    np_trace_event ev = {.name = np_node_kind_name(kind),
                         .kind = kind,
                         .window = -1,
                         .rank = rank,
                         .worker = worker,
                         .start_us = s,
                         .end_us = e,
                         .node = node,
                         .chunk = node >= 0 ? 0 : -1};
    assert_int_equal(np_trace_record(tr, &ev), 0);
}

static void layer_is(const np_trace_layer_stats *l, int node, const char *name, long nf, double f,
                     long nb, double b, long no, double o, double share) {
    assert_int_equal(l->node, node);
    if (name) assert_string_equal(l->name, name);
    if (!name) assert_null(l->name);
    assert_int_equal(l->fwd_count, nf);
    assert_int_equal(l->bwd_count, nb);
    assert_int_equal(l->other_count, no);
    assert_true(l->fwd_us == f && l->bwd_us == b && l->other_us == o);
    assert_true(l->compute_share == share);
}

/* Two ranks. Dense compute 300 us on rank 0 and 90 on rank 1: 390 in all. Node 0: fwd
 * 100 + 50, bwd 80 + 60 (rank 1), other 80 (all-reduce) + 5 (update), share 290/390;
 * node 1: fwd 20 + 30, bwd 40, share 90/390; node 2: an all-reduce only, share 0; no layer:
 * the loss, 10. An exchange of no layer is in no row; node 3 is named but ran nothing. */
static void test_by_layer(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_trace_set_node_name(tr, 0, "bottom.0");
    np_trace_set_node_name(tr, 1, "interaction");
    np_trace_set_node_name(tr, 3, "top.0");
    add_layer(tr, 0, 0, NP_NODE_FWD, 0, 0, 100);
    add_layer(tr, 0, 0, NP_NODE_FWD, 0, 100, 150);
    add_layer(tr, 0, 0, NP_NODE_FWD, 1, 150, 170);
    add_layer(tr, 0, 0, NP_NODE_LOSS_FWD, -1, 170, 180);
    add_layer(tr, 0, 0, NP_NODE_BWD, 1, 180, 220);
    add_layer(tr, 0, 0, NP_NODE_BWD, 0, 220, 300);
    add_layer(tr, 0, 1, NP_NODE_ALLREDUCE, 0, 250, 330);
    add_layer(tr, 0, 0, NP_NODE_DENSE_UPDATE, 0, 330, 335);
    add_layer(tr, 0, 1, NP_NODE_EXCHANGE_EMB, -1, 0, 50);
    add_layer(tr, 1, 0, NP_NODE_FWD, 1, 0, 30);
    add_layer(tr, 1, 0, NP_NODE_BWD, 0, 30, 90);
    add_layer(tr, 1, 1, NP_NODE_ALLREDUCE, 2, 400, 410);
    np_trace_report r = tu_analyze(tr);
    assert_true(r.compute_us == 390);
    assert_int_equal(r.n_layers, 4);
    layer_is(&r.layers[0], 0, "bottom.0", 2, 150, 2, 140, 2, 85, 290.0 / 390);
    layer_is(&r.layers[1], 1, "interaction", 2, 50, 1, 40, 0, 0, 90.0 / 390);
    layer_is(&r.layers[2], 2, NULL, 0, 0, 0, 0, 1, 10, 0);
    layer_is(&r.layers[3], -1, NULL, 1, 10, 0, 0, 0, 0, 10.0 / 390);

    char *text = print_report(&r, NP_TRACE_PRINT_LAYERS);
    assert_non_null(strstr(text, "layers (all ranks; share of the 0.390 ms of dense compute"));
    assert_non_null(strstr(text, "\n      0 bottom.0              2      0.150      2      0.140 "
                                 "    74.4      2      0.085\n"));
    assert_non_null(strstr(text, "\n     -1 (no layer)            1      0.010      0      0.000 "
                                 "     2.6      0      0.000\n"));
    assert_non_null(strstr(text, "\n      2 (unnamed)             0      0.000      0      0.000 "
                                 "     0.0      1      0.010\n"));
    free(text);
    text = print_report(&r, 0); /* the layer table only when asked for */
    assert_null(strstr(text, "bottom.0"));
    free(text);

    json_t *j = report_json(&r);
    assert_null(json_object_get(j, "layers"));
    json_decref(j);
    text = print_report(&r, NP_TRACE_PRINT_JSON | NP_TRACE_PRINT_LAYERS);
    json_error_t je;
    j = json_loads(text, 0, &je);
    assert_non_null(j);
    assert_true(json_number_value(json_object_get(j, "compute_us")) == 390);
    json_t *ls = json_object_get(j, "layers");
    assert_int_equal(json_array_size(ls), 4);
    json_t *l0 = json_array_get(ls, 0), *l3 = json_array_get(ls, 3);
    assert_string_equal(json_string_value(json_object_get(l0, "name")), "bottom.0");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(l0, "bwd"), "count")), 2);
    assert_true(json_number_value(json_object_get(json_object_get(l0, "fwd"), "total_us")) == 150);
    assert_true(json_number_value(json_object_get(json_object_get(l0, "other"), "total_us")) == 85);
    assert_true(json_number_value(json_object_get(l0, "compute_us")) == 290);
    assert_true(json_number_value(json_object_get(l0, "compute_share")) == 290.0 / 390);
    assert_int_equal(json_integer_value(json_object_get(l3, "node")), -1);
    assert_true(json_is_null(json_object_get(l3, "name")));
    json_decref(j);
    free(text);
    np_trace_report_free(&r);

    /* a trace without layer tasks: no rows, and the shares of nothing are not a number */
    np_trace *plain = new_trace();
    tu_trace_add(plain, 0, 0, NP_NODE_ROUTE, 0, 0, 10);
    r = tu_analyze(plain);
    assert_int_equal(r.n_layers, 0);
    assert_true(r.compute_us == 0);
    text = print_report(&r, NP_TRACE_PRINT_LAYERS);
    assert_non_null(strstr(text, "(no layer tasks in this trace)"));
    free(text);
    np_trace_report_free(&r);
    np_trace_free(plain);
    np_trace_free(tr);
}

/* ---- JSON report fields */

static const char *const rank_keys[] = {"rank",
                                        "batches",
                                        "span_us",
                                        "step_us",
                                        "idle_us",
                                        "exchange_us",
                                        "exchange_exposed_us",
                                        "exchange_exposed_ratio",
                                        "lookup_us",
                                        "lookup_exposed_us",
                                        "kinds"};

static void check_rank_object(json_t *o) {
    assert_true(json_is_object(o));
    for (size_t i = 0; i < sizeof rank_keys / sizeof *rank_keys; i++)
        if (!json_object_get(o, rank_keys[i])) fail_msg("report lacks \"%s\"", rank_keys[i]);
    json_t *kinds = json_object_get(o, "kinds");
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        json_t *ks = json_object_get(kinds, np_node_kind_name((np_node_kind)k));
        assert_true(json_is_integer(json_object_get(ks, "count")));
        assert_true(json_is_number(json_object_get(ks, "total_us")));
        assert_true(json_is_number(json_object_get(ks, "union_us")));
        assert_true(json_is_number(json_object_get(ks, "exposed_us")));
    }
}

static void test_json_report(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    tu_trace_add(tr, 0, 0, NP_NODE_FWD, 0, 0, 100);
    tu_trace_add(tr, 0, 0, NP_NODE_BWD, 0, 150, 250);
    tu_trace_add(tr, 0, 1, NP_NODE_EXCHANGE_EMB, 0, 50, 200);
    tu_trace_add(tr, 1, 0, NP_NODE_ROUTE, 0, 300, 320);
    np_trace_report r = tu_analyze(tr);
    json_t *j = report_json(&r);
    json_t *ranks = json_object_get(j, "ranks"), *o = json_object_get(j, "overall");
    assert_int_equal(json_array_size(ranks), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *rk = json_array_get(ranks, i);
        check_rank_object(rk);
        assert_int_equal(json_integer_value(json_object_get(rk, "rank")), (json_int_t)i);
        json_t *ws = json_object_get(rk, "workers");
        assert_int_equal(json_array_size(ws), i == 0 ? 2 : 1);
        json_t *w = json_array_get(ws, 0);
        assert_true(json_is_integer(json_object_get(w, "worker")));
        assert_true(json_is_number(json_object_get(w, "busy_us")));
        assert_true(json_is_number(json_object_get(w, "idle_us")));
    }
    json_t *r0 = json_array_get(ranks, 0);
    assert_true(json_number_value(json_object_get(r0, "exchange_exposed_us")) == 50);
    assert_true(json_number_value(json_object_get(r0, "exchange_exposed_ratio")) == 50.0 / 150);
    json_t *emb = json_object_get(json_object_get(r0, "kinds"), "exchange_emb");
    assert_int_equal(json_integer_value(json_object_get(emb, "count")), 1);
    assert_true(json_number_value(json_object_get(emb, "union_us")) == 150);
    check_rank_object(o);
    assert_null(json_object_get(o, "workers"));
    assert_int_equal(json_integer_value(json_object_get(o, "rank")), -1);
    assert_true(json_number_value(json_object_get(o, "lookup_exposed_us")) == 20);
    json_decref(j);
    np_trace_report_free(&r);
    np_trace_free(tr);
}

/* ---- reading back */

static void same_stats(const np_trace_rank_stats *a, const np_trace_rank_stats *b) {
    assert_int_equal(a->rank, b->rank);
    assert_int_equal(a->batches, b->batches);
    const double x[] = {a->span_us,   a->step_us,           a->exchange_us, a->exchange_exposed_us,
                        a->lookup_us, a->lookup_exposed_us, a->idle_us};
    const double y[] = {b->span_us,   b->step_us,           b->exchange_us, b->exchange_exposed_us,
                        b->lookup_us, b->lookup_exposed_us, b->idle_us};
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        assert_true(fabs(x[i] - y[i]) <= READ_ATOL_US);
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        assert_int_equal(a->kind[k].count, b->kind[k].count);
        assert_true(fabs(a->kind[k].total_us - b->kind[k].total_us) <= READ_ATOL_US);
        assert_true(fabs(a->kind[k].union_us - b->kind[k].union_us) <= READ_ATOL_US);
        assert_true(fabs(a->kind[k].exposed_us - b->kind[k].exposed_us) <= READ_ATOL_US);
    }
}

static void test_round_trip(void **state) {
    (void)state;
    static const char *const names[] = {"linear_fwd", "exchange_rows", "sum", "route"};
    np_trace *tr = new_trace();
    np_trace_set_worker_name(tr, 0, "cpu 0");
    np_trace_set_worker_name(tr, 2, "comm");
    /* distinct, increasing starts: the export's order is the record order */
    uint64_t seed = 7;
    double t = 1234567.125;
    for (int i = 0; i < 300; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        t += 0.1 + (double)(seed >> 40) / 1e6;
        np_trace_event ev = {.name = names[i % 4],
                             .kind = (np_node_kind)((seed >> 20) % NP_NODE_KIND_COUNT),
                             .batch = i / 30,
                             .window = i % 3 - 1,
                             .rank = (int)(seed >> 33) % 2,
                             .worker = (int)((seed >> 35) % 3),
                             .start_us = t,
                             .end_us = t + 3.3 + (double)((seed >> 45) % 100),
                             .bytes = i % 5 == 0 ? (uint64_t)i * 1000003 : 0,
                             .node = i % 4 - 1,
                             .chunk = i % 7 - 1};
        assert_int_equal(np_trace_record(tr, &ev), 0);
    }
    np_error e = {{0}};
    const char *path = tmp_path("rt.json");
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_OK);
    np_trace *back = NULL;
    assert_int_equal(np_trace_read_chrome(path, &back, &e), NP_OK);
    assert_int_equal(np_trace_count(back), np_trace_count(tr));
    for (size_t i = 0; i < np_trace_count(tr); i++) {
        const np_trace_event *a = np_trace_get(tr, i), *b = np_trace_get(back, i);
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->kind, b->kind);
        assert_int_equal(a->batch, b->batch);
        assert_int_equal(a->window, b->window);
        assert_int_equal(a->rank, b->rank);
        assert_int_equal(a->worker, b->worker);
        assert_true(fabs(a->start_us - b->start_us) <= READ_ATOL_US);
        assert_true(fabs(a->end_us - b->end_us) <= READ_ATOL_US);
        assert_int_equal(a->bytes, b->bytes);
        assert_int_equal(a->node, b->node);
        assert_int_equal(a->chunk, b->chunk);
    }
    /* names are interned: equal names share one copy, valid after the trace is freed */
    assert_ptr_equal(np_trace_get(back, 0)->name, np_trace_get(back, 4)->name);

    np_trace_report ra = tu_analyze(tr), rb = tu_analyze(back);
    assert_int_equal(ra.n_ranks, rb.n_ranks);
    assert_int_equal(ra.n_workers, rb.n_workers);
    for (int i = 0; i < ra.n_ranks; i++)
        same_stats(&ra.ranks[i], &rb.ranks[i]);
    same_stats(&ra.overall, &rb.overall);
    for (int i = 0; i < ra.n_workers; i++) {
        assert_int_equal(ra.workers[i].worker, rb.workers[i].worker);
        assert_true(fabs(ra.workers[i].busy_us - rb.workers[i].busy_us) <= READ_ATOL_US);
        assert_true(fabs(ra.workers[i].idle_us - rb.workers[i].idle_us) <= READ_ATOL_US);
    }
    np_trace_report_free(&ra);
    np_trace_report_free(&rb);

    /* worker names came back: written again, the lanes carry them */
    const char *path2 = tmp_path("rt2.json");
    assert_int_equal(np_trace_write_chrome(back, path2, &e), NP_OK);
    json_error_t je;
    json_t *j = json_load_file(path2, 0, &je);
    assert_non_null(j);
    size_t i;
    json_t *ev;
    int seen = 0;
    json_array_foreach(json_object_get(j, "traceEvents"), i, ev) {
        if (strcmp(json_string_value(json_object_get(ev, "name")), "thread_name")) continue;
        json_int_t tid = json_integer_value(json_object_get(ev, "tid"));
        const char *n = json_string_value(json_object_get(json_object_get(ev, "args"), "name"));
        assert_string_equal(n, tid == 0 ? "cpu 0" : tid == 2 ? "comm" : "worker 1");
        seen++;
    }
    assert_int_equal(seen, 6); /* 2 ranks x 3 workers */
    json_decref(j);
    np_trace_free(tr);
    np_trace_free(back);
    remove(path);
    remove(path2);
}

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/np_trace_report_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return rmdir(tmpdir);
}

/* Waiting for peers: a collective's wait is from its start to the last rank's start of the
 * same (batch, window, layer) collective, capped at its duration; other tasks, a collective
 * some rank lacks and one rank alone wait 0. */
static void test_peer_wait(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    tu_trace_add(tr, 0, 0, NP_NODE_EXCHANGE_EMB, 0, 0, 100);   /* waits 30 for rank 1 */
    tu_trace_add(tr, 1, 0, NP_NODE_EXCHANGE_EMB, 0, 30, 100);  /* the last to arrive: 0 */
    tu_trace_add(tr, 0, 0, NP_NODE_ALLREDUCE, 0, 200, 210);    /* waits 10, capped at its 10 */
    tu_trace_add(tr, 1, 0, NP_NODE_ALLREDUCE, 0, 250, 260);
    tu_trace_add(tr, 0, 0, NP_NODE_EXCHANGE_GRAD, 1, 300, 400); /* rank 1 lacks it: 0 */
    tu_trace_add(tr, 0, 1, NP_NODE_FWD, 0, 0, 500);             /* not a collective */
    tu_trace_add(tr, 1, 1, NP_NODE_FWD, 0, 100, 500);
    double wait[7];
    assert_int_equal(np_trace_peer_wait(tr, wait), 0);
    const double want[7] = {30, 0, 10, 0, 0, 0, 0};
    for (int i = 0; i < 7; i++)
        if (wait[i] != want[i]) fail_msg("event %d: wait %g, want %g", i, wait[i], want[i]);
    np_trace_report r = tu_analyze(tr);
    assert_true(r.ranks[0].peer_wait_us == 40);
    assert_true(r.ranks[0].collective_us == 100 + 10 + 100);
    assert_true(r.ranks[1].peer_wait_us == 0);
    assert_true(r.ranks[1].collective_us == 70 + 10);
    assert_true(r.overall.peer_wait_us == 40);
    np_trace_report_free(&r);
    np_trace_free(tr);

    tr = new_trace(); /* one rank: nobody to wait for */
    tu_trace_add(tr, 0, 0, NP_NODE_EXCHANGE_EMB, 0, 0, 100);
    tu_trace_add(tr, 0, 0, NP_NODE_EXCHANGE_EMB, 1, 200, 300);
    assert_int_equal(np_trace_peer_wait(tr, wait), 0);
    assert_true(wait[0] == 0 && wait[1] == 0);
    np_trace_free(tr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank),    cmocka_unit_test(test_two_ranks),
        cmocka_unit_test(test_peer_wait),   cmocka_unit_test(test_same_kind_overlap),
        cmocka_unit_test(test_empty),       cmocka_unit_test(test_only_exchange),
        cmocka_unit_test(test_no_exchange), cmocka_unit_test(test_split_kinds),
        cmocka_unit_test(test_large),       cmocka_unit_test(test_json_report),
        cmocka_unit_test(test_by_layer),    cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
