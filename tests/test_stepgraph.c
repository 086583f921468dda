/* The step graph (graph/): the guarantees hold for every pipeline, model, window and rank
 * count, and fail when the policy or a contract is planted wrong; the graph a run submits
 * is the graph built without StarPU (its task count per step and kind against a real run's
 * trace; every task's buffers are checked against it as it is submitted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engineutil.h"
#include "graph/bgraph.h"
#include "graph/critical.h"
#include "nestpipe/scale.h"
#include "runtime/model/graph.h"
#include "runtime/trace/trace.h"

static const np_pipeline pipes[] = {NP_PIPELINE_SEQUENTIAL, NP_PIPELINE_DBP, NP_PIPELINE_ASYNC,
                                    NP_PIPELINE_FWP, NP_PIPELINE_NESTPIPE};

static np_config cfg_of(np_pipeline p, const char *model, int windows, int chunks, int ranks,
                        const char *optim) {
    np_config c = small_cfg(NP_ENGINE_STARPU, optim);
    np_error e = {{0}};
    char w[16];
    snprintf(w, sizeof w, "%d", windows);
    if (np_config_set(&c, "model", model, "t", &e) || np_config_set(&c, "windows", w, "t", &e))
        fail_msg("config: %s", e.msg);
    c.pipeline = p;
    c.chunks = chunks;
    c.ranks = ranks;
    return c;
}

static np_graph_t *layers_of(const np_config *c) {
    np_error e = {{0}};
    np_graph_t *g;
    if (np_graph_from_config(c, &g, &e) || np_graph_finalize(g, &e)) fail_msg("layers: %s", e.msg);
    return g;
}

/* The check's report of shape s (policy possibly mutated), contract hook h; *bad gets the
 * violations. */
static void check_shape(const np_step_shape *s, np_sg_contract_hook h, char *report, size_t size,
                        int *bad) {
    np_error e = {{0}};
    np_step_graph_t *g;
    if (np_sg_build(s, 10, h, &g, &e)) fail_msg("build: %s", e.msg);
    *bad = np_step_graph_check(g, report, size);
    np_step_graph_free(g);
}

static void test_guarantees_hold(void **state) {
    (void)state;
    static const char *models[] = {"dlrm", "dcnv2"};
    for (int p = 0; p < 5; p++)
        for (int m = 0; m < 2; m++)
            for (int w = 1; w <= 4; w *= 4)
                for (int r = 1; r <= 2; r++) {
                    np_config c =
                        cfg_of(pipes[p], models[m], w, 2, r, r == 1 ? "sgd" : "rowwise-adagrad");
                    np_graph_t *lg = layers_of(&c);
                    np_step_shape s;
                    np_sg_shape_of(&c, lg, &s);
                    char report[4096];
                    int bad;
                    for (int gpus = 1; gpus >= 0; gpus--) { /* with CUDA workers, then not */
                        s.gpus = gpus;
                        check_shape(&s, NULL, report, sizeof report, &bad);
                        if (bad)
                            fail_msg("%s, %s, %d windows, %d ranks, %d GPUs: %d violations:\n%s",
                                     np_pipeline_name(pipes[p]), models[m], w, r, gpus, bad,
                                     report);
                    }
                    /* what a pipeline does not promise, the checks see it does not do */
                    if (pipes[p] == NP_PIPELINE_ASYNC)
                        assert_non_null(strstr(report, "fresh rows: not promised (async trains on "
                                                       "stale rows), and indeed"));
                    if (w > 1 &&
                        (pipes[p] == NP_PIPELINE_SEQUENTIAL || pipes[p] == NP_PIPELINE_DBP))
                        assert_non_null(strstr(report, "window overlap: not promised (the windows "
                                                       "run one after another), and indeed"));
                    if (w > 1 && (pipes[p] == NP_PIPELINE_FWP || pipes[p] == NP_PIPELINE_NESTPIPE))
                        assert_non_null(strstr(report, "window overlap: ok"));
                    np_graph_free(lg);
                }
}

/* ---- planted mutations: each breaks one guarantee */

static void token_on_dense_update(const np_step_node *n, np_step_buf *b, uint8_t *m, int *nb) {
    if (n->op != NP_OP_DENSE_UPDATE) return;
    b[*nb] = (np_step_buf){.role = NP_B_TOKEN};
    m[(*nb)++] = NP_MODE_RW;
}

static void writeback_reads_tables(const np_step_node *n, np_step_buf *b, uint8_t *m, int *nb) {
    if (n->op != NP_OP_WRITEBACK) return;
    for (int i = 0; i < *nb; i++)
        if (b[i].role == NP_B_TABLES) m[i] = NP_MODE_R;
}

static void update_reads_params(const np_step_node *n, np_step_buf *b, uint8_t *m, int *nb) {
    if (n->op != NP_OP_DENSE_UPDATE) return;
    for (int i = 0; i < *nb; i++)
        if (b[i].role == NP_B_PARAMS) m[i] = NP_MODE_R; /* the step after reads stale ones */
}

static void expect_violated(np_pipeline p, void (*mutate)(np_pipeline_policy *),
                            np_sg_contract_hook h, const char *which) {
    np_config c = cfg_of(p, "dlrm", 4, 2, 1, "sgd");
    np_graph_t *lg = layers_of(&c);
    np_step_shape s;
    np_sg_shape_of(&c, lg, &s);
    char report[4096];
    int bad;
    check_shape(&s, NULL, report, sizeof report, &bad);
    if (bad) fail_msg("%s unmutated: %s", np_pipeline_name(p), report);
    if (mutate) mutate(&s.pol);
    check_shape(&s, h, report, sizeof report, &bad);
    char want[64];
    snprintf(want, sizeof want, "%s: VIOLATED", which);
    if (!bad || !strstr(report, want))
        fail_msg("%s mutated: expected \"%s\", got:\n%s", np_pipeline_name(p), want, report);
    np_graph_free(lg);
}

static void no_sync(np_pipeline_policy *p) {
    p->sync = 0; /* dbp without its sync: async's mechanism under dbp's promise */
}

static void one_buffer(np_pipeline_policy *p) {
    p->buffers = 1; /* the look-ahead retrieves into the buffer the training batch reads */
}

static void no_overlap(np_pipeline_policy *p) {
    p->overlap_windows = 0; /* fwp's windows one after another */
    p->early_windows = 1;
}

static void test_mutations_fail(void **state) {
    (void)state;
    expect_violated(NP_PIPELINE_DBP, no_sync, NULL, "fresh rows");
    expect_violated(NP_PIPELINE_NESTPIPE, no_sync, NULL, "fresh rows");
    expect_violated(NP_PIPELINE_NESTPIPE, one_buffer, NULL, "batch isolation");
    expect_violated(NP_PIPELINE_FWP, no_overlap, NULL, "window overlap");
    expect_violated(NP_PIPELINE_SEQUENTIAL, NULL, token_on_dense_update, "dense isolation");
    expect_violated(NP_PIPELINE_SEQUENTIAL, NULL, writeback_reads_tables, "fresh rows");
    expect_violated(NP_PIPELINE_DBP, NULL, writeback_reads_tables, "fresh rows");
    expect_violated(NP_PIPELINE_NESTPIPE, NULL, update_reads_params, "fresh parameters");
}

/* ---- the graph a run submits */

/* Trains c with a trace for `steps` steps; the tasks of step k per node kind. */
static np_trace_t *traced_tasks(const np_config *cfg, long steps, long k, long *per_kind) {
    np_config c = *cfg;
    char path[] = "/tmp/np_stepgraph_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    snprintf(c.trace, sizeof c.trace, "%s", path);
    np_model_free(train_ahead(&c, steps, NULL));
    np_error e = {{0}};
    np_trace_t *t;
    if (np_trace_read_chrome(path, &t, &e)) fail_msg("trace: %s", e.msg);
    unlink(path);
    memset(per_kind, 0, NP_NODE_KIND_COUNT * sizeof *per_kind);
    for (size_t i = 0; i < np_trace_count(t); i++) {
        const np_trace_event *ev = np_trace_get(t, i);
        if (ev->issued == k + 1 && !np_node_kind_is(ev->kind, NP_KIND_DRIVER)) per_kind[ev->kind]++;
    }
    return t;
}

/* The trace's data-flow edges are the graph's: task id i of the run is node i - 1 of the
 * graph (both number in submission order), of its kind and batch; every RAW edge into the
 * node is one of the task's producers, and every producer is an ancestor of the node. */
static void edges_are_the_graph(const np_trace_t *t, const np_step_graph_t *g, long k,
                                const char *pipe) {
    long seen = 0;
    for (size_t i = 0; i < np_trace_count(t); i++) {
        const np_trace_event *ev = np_trace_get(t, i);
        if (ev->issued > k + 1 || ev->id <= 0) continue;
        if (ev->id > g->n) fail_msg("%s: task %lld of step %ld is past the graph's %d nodes", pipe,
                                    (long long)ev->id, ev->issued - 1, g->n);
        int v = (int)ev->id - 1;
        if ((int)g->node[v].n.kind != (int)ev->kind || g->node[v].n.batch != ev->batch)
            fail_msg("%s: task %lld is %s of batch %ld, the graph's node %s of batch %ld", pipe,
                     (long long)ev->id, np_node_kind_name(ev->kind), ev->batch,
                     np_node_kind_name(g->node[v].n.kind), g->node[v].n.batch);
        int lo, hi;
        np_sg_in_edges(g, v, &lo, &hi);
        for (int e = lo; e < hi; e++) {
            if (g->edge[e].why != NP_DEP_RAW) continue;
            int found = 0;
            for (int d = 0; d < ev->n_deps; d++)
                found |= np_trace_dep(ev, d) == g->edge[e].from + 1;
            if (!found) fail_msg("%s: task %lld lacks the graph's edge from %d", pipe,
                                 (long long)ev->id, g->edge[e].from + 1);
        }
        for (int d = 0; d < ev->n_deps; d++)
            if (np_sg_reaches(g, (int)np_trace_dep(ev, d) - 1, v, 0) != 1)
                fail_msg("%s: task %lld reads from %lld, which the graph does not order before it",
                         pipe, (long long)ev->id, (long long)np_trace_dep(ev, d));
        seen++;
    }
    assert_true(seen >= g->n - 1); /* all but, at most, a driver's marker */
}

static void test_graph_is_the_run(void **state) {
    (void)state;
    /* step k of a run with batches to spare: every stage it submits has its batch */
    const long steps = 12, k = 5;
    for (int p = 0; p < 5; p++) {
        np_config c = cfg_of(pipes[p], p % 2 ? "dcnv2" : "dlrm", 2, 2, 1, "rowwise-adagrad");
        long ran[NP_NODE_KIND_COUNT], built[NP_NODE_KIND_COUNT] = {0};
        np_trace_t *t = traced_tasks(&c, steps, k, ran);
        np_error e = {{0}};
        np_step_graph_t *g;
        if (np_step_graph_create(&c, k + 1, &g, &e)) fail_msg("graph: %s", e.msg);
        for (int i = 0; i < g->n; i++)
            if (g->node[i].step == k) built[g->node[i].n.kind]++;
        long total = 0;
        for (int kind = 0; kind < NP_NODE_KIND_COUNT; kind++) {
            if (ran[kind] != built[kind])
                fail_msg("%s step %ld: %ld %s tasks ran, the graph has %ld",
                         np_pipeline_name(pipes[p]), k, ran[kind], np_node_kind_name(kind),
                         built[kind]);
            total += ran[kind];
        }
        assert_int_equal(total, np_step_graph_tasks(g, k));
        assert_true(total > 20);
        edges_are_the_graph(t, g, k, np_pipeline_name(pipes[p]));
        np_trace_free(t);
        np_step_graph_free(g);
    }
}

/* ---- the graph as a trace to replay (graph/replay_trace.c) */

/* Every task waits for its edges' sources and its step's call, no lane runs two at once,
 * and collectives have the communication lane; on one rank and one lane, sequential, the
 * replayed step is the sum of a step's costs exactly. */
static void test_graph_trace(void **state) {
    (void)state;
    for (int p = 0; p < 5; p++) {
        np_config c = cfg_of(pipes[p], "dlrm", 2, 2, 2, "rowwise-adagrad");
        np_error e = {{0}};
        np_step_graph_t *g;
        np_trace_t *t;
        if (np_step_graph_create(&c, 12, &g, &e) || np_step_graph_trace(g, 2, &t, &e))
            fail_msg("%s: %s", np_pipeline_name(pipes[p]), e.msg);
        assert_int_equal(np_trace_count(t), g->n);
        double lane_end[3] = {0};
        for (size_t i = 0; i < np_trace_count(t); i++) {
            const np_trace_event *ev = np_trace_get(t, i);
            assert_int_equal(ev->id, (int64_t)i + 1);
            assert_true(ev->end_us > ev->start_us);
            assert_true(ev->start_us >= ev->submit_us);
            int comm = np_node_kind_is(ev->kind, NP_KIND_EXCHANGE);
            assert_int_equal(ev->worker == 2, comm);
            assert_true(ev->start_us >= lane_end[ev->worker]); /* in order on its lane */
            lane_end[ev->worker] = ev->end_us;
            int lo, hi;
            np_sg_in_edges(g, (int)i, &lo, &hi);
            for (int k = lo; k < hi; k++)
                assert_true(ev->start_us >= np_trace_get(t, (size_t)g->edge[k].from)->end_us);
        }
        np_trace_free(t);
        np_step_graph_free(g);
    }
    np_config c = cfg_of(NP_PIPELINE_SEQUENTIAL, "dlrm", 1, 2, 1, "sgd");
    np_error e = {{0}};
    np_step_graph_t *g;
    np_trace_t *t;
    if (np_step_graph_create(&c, 12, &g, &e) || np_step_graph_trace(g, 1, &t, &e))
        fail_msg("sequential: %s", e.msg);
    double sum = 0;
    for (int i = 0; i < g->n; i++)
        if (g->node[i].step == 6) sum += np_sg_cost_us(&g->shape, &g->sizes, &g->node[i].n);
    np_replay_cfg rc = {.graph = t, .device_speed = 1, .from_batch = 2, .to_batch = 11,
                        .no_gaps = 1};
    np_replay_out o;
    if (np_replay(&rc, &o, &e)) fail_msg("replay: %s", e.msg);
    if (fabs(o.step_us - sum) > 1e-6 * sum)
        fail_msg("step %.3f us, a step's costs %.3f", o.step_us, sum);
    np_trace_free(o.trace);
    np_trace_free(t);
    np_step_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guarantees_hold),
        cmocka_unit_test(test_mutations_fail),
        cmocka_unit_test(test_graph_is_the_run),
        cmocka_unit_test(test_graph_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
