/* The step graph's dependencies as they come (graph/link.c) and critical-path priorities
 * from them (graph/critical.c), on graphs computed by hand: the edges StarPU's sequential
 * consistency derives from the modes (read after write, write after write and after the
 * reads since), the producers the trace draws, bottom levels from given costs, and on the
 * real step graphs priorities that never rise along an edge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engineutil.h"
#include "graph/critical.h"
#include "graph/link.h"
#include "runtime/model/graph.h"

#define R NP_MODE_R
#define W NP_MODE_W

typedef struct spec {
    int n;
    uint8_t role[3]; /* distinct roles stand for distinct buffers */
    uint8_t m[3];
    double cost;
} spec;

enum { A = NP_B_DENSE, B = NP_B_UNIQ, C = NP_B_POS, D = NP_B_META, E = NP_B_MAP };

/* t0 writes A; t1 and t2 read it and write B and C; t3 reads both and writes D; t4 is
 * alone; t5 writes A again after t1 and t2 read it. Bottom levels: t3 1, t5 7, t1 5 + 7,
 * t2 20 + 7, t0 10 + 27 = 37, t4 3. */
static const spec g6[6] = {
    {1, {A}, {W}, 10},       {2, {A, B}, {R, W}, 5},
    {2, {A, C}, {R, W}, 20}, {3, {B, C, D}, {R, R, W}, 1},
    {1, {E}, {W}, 3},        {1, {A}, {W}, 7},
};

typedef struct edges {
    int from[32], to[32], why[32], n;
} edges;

static int keep(void *ctx, int64_t from, int64_t to, const np_step_buf *b, int why) {
    (void)b;
    edges *x = ctx;
    if (x->n == 32) return -1;
    x->from[x->n] = (int)from, x->to[x->n] = (int)to, x->why[x->n] = why;
    x->n++;
    return 0;
}

static void bufs_of(const spec *s, np_step_buf *b) {
    for (int j = 0; j < s->n; j++)
        b[j] = (np_step_buf){.role = s->role[j]};
}

static void test_links(void **state) {
    (void)state;
    np_sg_linker *l = np_sg_linker_new();
    assert_non_null(l);
    edges x = {0};
    for (int i = 0; i < 6; i++) {
        np_step_buf b[3];
        bufs_of(&g6[i], b);
        assert_int_equal(np_sg_link(l, i, b, g6[i].m, g6[i].n, keep, &x), 0);
    }
    /* t1, t2 after t0 (RAW); t3 after t1 and t2 (RAW); t5 after the readers t1, t2 (WAR),
     * not after t0: StarPU orders it through them */
    static const int from[] = {0, 0, 1, 2, 1, 2}, to[] = {1, 2, 3, 3, 5, 5},
                     why[] = {NP_DEP_RAW, NP_DEP_RAW, NP_DEP_RAW,
                              NP_DEP_RAW, NP_DEP_WAR, NP_DEP_WAR};
    assert_int_equal(x.n, 6);
    for (int k = 0; k < 6; k++) {
        assert_int_equal(x.from[k], from[k]);
        assert_int_equal(x.to[k], to[k]);
        assert_int_equal(x.why[k], why[k]);
    }
    np_sg_linker_free(l);

    /* the producers a trace draws, numbered from 1: a read-write after reads still reads
     * what the last writer wrote (a FLOW edge beside the WAR ones); a buffer never written
     * has none; a chunk's rows of a slot are the slot's */
    l = np_sg_linker_new();
    np_step_buf h1 = {.role = NP_B_LABEL}, h2 = {.role = NP_B_KEYS}, h3 = {.role = NP_B_OFFSETS},
                part = {.role = NP_B_LABEL_PART, .c = 3};
    int64_t p[4];
    np_step_buf b1[1] = {h1}, b2[2] = {h1, h2}, b3[3] = {h1, h2, h3}, b4[1] = {part};
    uint8_t w1[1] = {W}, r1w2[2] = {R, W}, rw1r2[2] = {R | W, R}, r123[3] = {R, R, R}, r[1] = {R};
    assert_int_equal(np_sg_link_producers(l, 1, b1, w1, 1, p, 4), 0);
    assert_int_equal(np_sg_link_producers(l, 2, b2, r1w2, 2, p, 4), 1);
    assert_int_equal(p[0], 1);
    assert_int_equal(np_sg_link_producers(l, 3, b2, rw1r2, 2, p, 4), 2);
    assert_int_equal(p[0], 1);
    assert_int_equal(p[1], 2);
    assert_int_equal(np_sg_link_producers(l, 4, b3, r123, 3, p, 4), 2);
    assert_int_equal(p[0], 3);
    assert_int_equal(p[1], 2);
    assert_int_equal(np_sg_link_producers(l, 5, b4, r, 1, p, 4), 1);
    assert_int_equal(p[0], 3);
    np_sg_linker_free(l);
}

static void test_bottom_levels(void **state) {
    (void)state;
    np_step_graph_t g = {0};
    np_sg_node nodes[6];
    np_step_buf bufs[18];
    uint8_t modes[18];
    double cost[6], bl[6];
    int nb = 0;
    for (int i = 0; i < 6; i++) {
        nodes[i] = (np_sg_node){.step = 5, .buf0 = nb, .nbuf = g6[i].n};
        bufs_of(&g6[i], bufs + nb);
        memcpy(modes + nb, g6[i].m, (size_t)g6[i].n);
        nb += g6[i].n;
        cost[i] = g6[i].cost;
    }
    nodes[4].step = 4; /* another step's node: no level, and no path through it */
    edges x = {0};
    np_sg_linker *l = np_sg_linker_new();
    for (int i = 0; i < 6; i++)
        assert_int_equal(
            np_sg_link(l, i, bufs + nodes[i].buf0, modes + nodes[i].buf0, nodes[i].nbuf, keep, &x),
            0);
    np_sg_linker_free(l);
    np_sg_edge ed[32];
    for (int k = 0; k < x.n; k++)
        ed[k] = (np_sg_edge){x.from[k], x.to[k], {0}, x.why[k]};
    g.node = nodes, g.n = 6, g.edge = ed, g.nedge = x.n;
    assert_int_equal(np_sg_bottom_levels(&g, 5, cost, bl), 0);
    static const double want[6] = {37, 12, 27, 1, 0, 7};
    for (int i = 0; i < 6; i++)
        assert_true(bl[i] == want[i]);
}

static const np_pipeline pipes[] = {NP_PIPELINE_SEQUENTIAL, NP_PIPELINE_DBP, NP_PIPELINE_ASYNC,
                                    NP_PIPELINE_FWP, NP_PIPELINE_NESTPIPE};

/* On every pipeline's graph: every node of the steady step has a priority, the start of
 * the longest path has the top one, and no edge leads to a higher priority (a node's level
 * is its cost plus its successors' longest); a node of another batch offset has none. */
static void test_priorities_follow_paths(void **state) {
    (void)state;
    for (int p = 0; p < 5; p++)
        for (int ranks = 1; ranks <= 2; ranks++) {
            np_config c = small_cfg(NP_ENGINE_STARPU, "rowwise-adagrad");
            c.pipeline = pipes[p];
            c.ranks = ranks;
            c.chunks = 2;
            np_error e = {{0}};
            np_graph_t *lg;
            if (np_graph_from_config(&c, &lg, &e) || np_graph_finalize(lg, &e))
                fail_msg("layers: %s", e.msg);
            np_step_shape s;
            np_sg_shape_of(&c, lg, &s);
            np_sg_sizes z = {.nb = c.batch / ranks,
                             .T = c.tables,
                             .d = c.dim,
                             .hot = c.hot,
                             .dense = np_config_dense(&c)};
            np_sg_prio *pr;
            np_step_graph_t *g;
            if (np_sg_prio_create(&s, &z, &pr, &e) || np_sg_build(&s, 6, NULL, &g, &e))
                fail_msg("%s: %s", np_pipeline_name(pipes[p]), e.msg);
            int top = 0, checked = 0;
            for (int i = 0; i < g->n; i++) {
                if (g->node[i].step != 5) continue;
                int pi = np_sg_prio_of(pr, &g->node[i].n, 5);
                assert_in_range(pi, 0, NP_CP_TOP);
                if (pi > top) top = pi;
                int lo, hi;
                np_sg_in_edges(g, i, &lo, &hi);
                for (int k = lo; k < hi; k++) {
                    const np_sg_node *u = &g->node[g->edge[k].from];
                    if (u->step != 5) continue;
                    /* a place may appear twice in a step (the higher level is kept) */
                    int pu = np_sg_prio_of(pr, &u->n, 5);
                    if (pu < pi)
                        fail_msg("%s, %d ranks: %s (%d) before %s (%d)", np_pipeline_name(pipes[p]),
                                 ranks, np_step_op_get(u->n.op)->name, pu,
                                 np_step_op_get(g->node[i].n.op)->name, pi);
                    checked++;
                }
            }
            assert_int_equal(top, NP_CP_TOP);
            assert_true(checked > 20);
            np_step_node far = g->node[g->n - 1].n;
            far.batch += 99;
            assert_int_equal(np_sg_prio_of(pr, &far, 5), -1);
            np_step_graph_free(g);
            np_sg_prio_free(pr);
            np_graph_free(lg);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_bottom_levels),
        cmocka_unit_test(test_priorities_follow_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
