/* The report's "what to try" rules (runtime/trace/advice.c, docs/tracing.md "What to try"): each
 * rule on a hand-made trace that meets it and on one that does not. Every trace has two
 * batches of 100 us per rank: dense compute on worker 0 for the first 60 us of each, and
 * the task under test in the 40 us after it (where nothing hides it) or under the compute. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/trace/trace.h"
#include "traceutil.h"

typedef struct task {
    np_node_kind kind;
    int worker;
    double s, e;    /* within the batch */
    double shift1;  /* rank 1 starts it this much later (a peer arriving late) */
} task;

typedef struct setup {
    int ranks;
    const char *pipeline, *data, *chunks; /* facts; NULL: the trace does not say */
    int busy;                             /* 1: worker 0 computes all 100 us, not 60 */
    task t[2];
    int n;
} setup;

/* The report of s's trace; *fired = whether rule `id` is among its advice. */
static np_trace_report report(const setup *s, const char *id, int *fired) {
    np_trace *tr = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_create(&tr, &e), NP_OK);
    char n[8];
    snprintf(n, sizeof n, "%d", s->ranks);
    np_trace_set_info(tr, "ranks", n);
    if (s->pipeline) np_trace_set_info(tr, "pipeline", s->pipeline);
    if (s->data) np_trace_set_info(tr, "data", s->data);
    if (s->chunks) np_trace_set_info(tr, "chunks", s->chunks);
    for (int r = 0; r < s->ranks; r++)
        for (long b = 0; b < 2; b++) {
            double t0 = 100.0 * (double)b;
            tu_trace_add(tr, r, 0, NP_NODE_FWD, b, t0, t0 + (s->busy ? 100 : 60));
            for (int i = 0; i < s->n; i++)
                tu_trace_add(tr, r, s->t[i].worker, s->t[i].kind, b, t0 + s->t[i].s + r * s->t[i].shift1,
                    t0 + s->t[i].e);
            if (!s->n || s->t[0].e < 100) /* the batch ends at 100 */
                tu_trace_add(tr, r, 0, NP_NODE_DENSE_UPDATE, b, t0 + 99, t0 + 100);
        }
    np_trace_report rep;
    assert_int_equal(np_trace_analyze(tr, &rep, &e), NP_OK);
    *fired = 0;
    for (int i = 0; i < rep.n_advice; i++)
        *fired |= !strcmp(rep.advice[i].rule, id);
    np_trace_free(tr);
    return rep;
}

/* Rule `id` fires for `yes` and not for `no`; with yes its figure is `figure` us. */
static void check(const char *id, const setup *yes, const setup *no, double figure) {
    int fired;
    np_trace_report r = report(yes, id, &fired);
    if (!fired) fail_msg("%s: not met by its trace (%d rules met)", id, r.n_advice);
    for (int i = 0; i < r.n_advice; i++)
        if (!strcmp(r.advice[i].rule, id) && fabs(r.advice[i].figure_us - figure) > 1e-9)
            fail_msg("%s: figure %g, want %g", id, r.advice[i].figure_us, figure);
    np_trace_report_free(&r);
    r = report(no, id, &fired);
    if (fired) fail_msg("%s: met by the trace that should not meet it", id);
    np_trace_report_free(&r);
}

#define GAP(kind, worker) {kind, worker, 60, 100, 0}
#define HIDDEN(kind, worker) {kind, worker, 10, 50, 0}

/* rank 0 starts the exchange at 60, rank 1 at 95: rank 0 waits 35 us, both are on the
 * wire 5; exposed: rank 0 40 us, rank 1 5 us, 22.5 a rank and step */
static void test_exchange_waits(void **state) {
    (void)state;
    setup yes = {2, "nestpipe", NULL, NULL, 0, {{NP_NODE_EXCHANGE_EMB, 1, 60, 100, 35}}, 1};
    setup no = {2, "nestpipe", NULL, NULL, 0, {GAP(NP_NODE_EXCHANGE_EMB, 1)}, 1}; /* on the wire */
    check("exchange-waits", &yes, &no, 22.5);
}

static void test_exchange_by_pipeline(void **state) {
    (void)state;
    setup seq = {2, "sequential", NULL, NULL, 0, {GAP(NP_NODE_EXCHANGE_EMB, 1)}, 1};
    setup dbp = {2, "dbp", NULL, NULL, 0, {GAP(NP_NODE_EXCHANGE_EMB, 1)}, 1};
    setup nest = {2, "nestpipe", NULL, NULL, 0, {GAP(NP_NODE_EXCHANGE_GRAD, 1)}, 1};
    setup hidden = {2, "dbp", NULL, NULL, 0, {HIDDEN(NP_NODE_EXCHANGE_EMB, 1)}, 1};
    setup small = {2, "nestpipe", NULL, NULL, 0, {{NP_NODE_EXCHANGE_EMB, 1, 60, 65, 0}}, 1};
    setup one = {1, "sequential", NULL, NULL, 0, {GAP(NP_NODE_EXCHANGE_EMB, 1)}, 1};
    check("exchange-sequential", &seq, &one, 40); /* one rank exchanges nothing */
    check("exchange-dbp", &dbp, &hidden, 40);
    check("exchange-windows", &nest, &small, 40); /* 5 us: under a tenth of the step */
    check("exchange-sequential", &seq, &dbp, 40);
    /* async, or a trace that does not name its pipeline: the generic rule */
    setup async = {2, "async", NULL, NULL, 0, {GAP(NP_NODE_EXCHANGE_EMB, 1)}, 1};
    setup unnamed = {2, NULL, NULL, NULL, 0, {GAP(NP_NODE_EXCHANGE_GRAD, 1)}, 1};
    check("exchange-other", &async, &nest, 40);
    check("exchange-other", &unnamed, &small, 40);
}

static void test_lookup(void **state) {
    (void)state;
    setup seq = {1, "sequential", NULL, NULL, 0, {GAP(NP_NODE_ROUTE, 1)}, 1};
    setup fwp = {1, "fwp", NULL, NULL, 0, {GAP(NP_NODE_RETRIEVE, 1)}, 1};
    setup dbp = {1, "dbp", NULL, NULL, 0, {GAP(NP_NODE_RETRIEVE, 1)}, 1};
    setup small = {1, "dbp", NULL, NULL, 0, {{NP_NODE_ROUTE, 1, 60, 70, 0}}, 1};
    check("lookup-not-ahead", &seq, &dbp, 40);
    check("lookup-not-ahead", &fwp, &small, 40);
    check("lookup-cpu", &dbp, &small, 40); /* 10 us: under 15% */
    check("lookup-cpu", &dbp, &seq, 40);
}

static void test_input(void **state) {
    (void)state;
    setup file = {1, "dbp", "criteo", NULL, 0, {GAP(NP_NODE_PREFETCH, 1)}, 1};
    setup syn = {1, "dbp", "synthetic", NULL, 0, {GAP(NP_NODE_DATA, 9)}, 1};
    setup hidden = {1, "dbp", "bin", NULL, 0, {HIDDEN(NP_NODE_PREFETCH, 1)}, 1};
    check("input-file", &file, &syn, 40);
    check("input-synthetic", &syn, &file, 40);
    check("input-file", &file, &hidden, 40);
    /* a trace that does not say what it read is not told about files */
    setup unsaid = {1, "dbp", NULL, NULL, 0, {GAP(NP_NODE_PREFETCH, 1)}, 1};
    check("input", &unsaid, &file, 40);
    check("input-file", &file, &unsaid, 40);
    setup ml = {1, "dbp", "movielens", NULL, 0, {GAP(NP_NODE_PREFETCH, 1)}, 1}; /* a file too */
    check("input-file", &ml, &syn, 40);
}

static void test_allreduce(void **state) {
    (void)state;
    setup two = {2, NULL, NULL, NULL, 0, {GAP(NP_NODE_ALLREDUCE, 1)}, 1};
    setup one = {1, NULL, NULL, NULL, 0, {GAP(NP_NODE_ALLREDUCE, 1)}, 1};
    check("allreduce", &two, &one, 40);
}

/* worker 0 computes 61 us of each 100 (60 and the dense update at 99): idle 39%; the
 * driver's row (worker 9) idles more but is no worker */
static void test_idle(void **state) {
    (void)state;
    setup few = {1, "dbp", NULL, "2", 0, {{NP_NODE_DATA, 9, 0, 5, 0}}, 1};
    setup busy = {1, "dbp", NULL, "2", 1, {{NP_NODE_DATA, 9, 0, 5, 0}}, 1};
    setup many = {1, "dbp", NULL, "8", 0, {{NP_NODE_DATA, 9, 0, 5, 0}}, 1};
    check("idle-few-chunks", &few, &busy, 39);
    check("idle-many-chunks", &many, &few, 39);
}

/* A window in which no batch ended has no step (NaN): no rule gives a share of it. */
static void test_no_step(void **state) {
    (void)state;
    setup few = {1, "dbp", NULL, "2", 0, {{NP_NODE_DATA, 9, 0, 5, 0}}, 1};
    np_trace *tr = NULL, *w = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_create(&tr, &e), NP_OK);
    np_trace_set_info(tr, "ranks", "1");
    np_trace_set_info(tr, "chunks", few.chunks);
    tu_trace_add(tr, 0, 0, NP_NODE_FWD, 0, 0, 60);
    tu_trace_add(tr, 0, 0, NP_NODE_DENSE_UPDATE, 0, 99, 100);
    assert_int_equal(np_trace_window(tr, 50, 90, &w, &e), NP_OK);
    np_trace_report r;
    assert_int_equal(np_trace_analyze(w, &r, &e), NP_OK);
    assert_true(isnan(r.overall.step_us));
    assert_int_equal(r.n_advice, 0);
    np_trace_report_free(&r);
    np_trace_free(w);
    np_trace_free(tr);
}

/* With no rule met, the report says so; every rule above has its own test. */
static void test_nothing(void **state) {
    (void)state;
    setup calm = {2, "nestpipe", "bin", "4", 1, {HIDDEN(NP_NODE_EXCHANGE_EMB, 0)}, 1};
    int fired;
    np_trace_report r = report(&calm, "-", &fired);
    assert_int_equal(r.n_advice, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    np_error e = {{0}};
    assert_int_equal(np_trace_report_print(&r, f, 0, &e), NP_OK);
    fclose(f);
    assert_non_null(strstr(buf, "what to try"));
    assert_non_null(strstr(buf, "nothing stands out"));
    free(buf);
    np_trace_report_free(&r);
    assert_int_equal(np_trace_rule_count(), 13);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exchange_waits), cmocka_unit_test(test_exchange_by_pipeline),
        cmocka_unit_test(test_lookup),         cmocka_unit_test(test_input),
        cmocka_unit_test(test_allreduce),      cmocka_unit_test(test_idle),
        cmocka_unit_test(test_nothing),        cmocka_unit_test(test_no_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
