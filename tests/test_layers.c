/* The layer API: every built-in kind's backward against central finite differences of its
 * own forward (each output is linear in any one input or parameter element, so the
 * difference is exact up to float rounding), the cross layer's forward against the DCN-v2
 * formula in double, shape errors, registration rules, a whole DCN-v2 model's gradient
 * through the graph walk (fan-in sums, splits), and --init-params loading. */
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

#include "runtime/core/shard.h"
#include "codelets/layers/layers.h"
#include "runtime/model/model.h"
#include "cudautil.h"
#include "testutil.h"

/* One kind on n rows: the rig of the CUDA kernel tests (tests/cudautil.h), its set 0 only
 * (the CPU kernels), every input's gradient wanted, the same seed for every rig. */
static void rig_make(cu_rig *r, const char *kind, np_layer_hp hp, int n_in, const int *w, long n) {
    cu_rig_make(r, kind, hp, n_in, w, n, (1u << n_in) - 1u, 0, 12345);
}

/* L = sum(out * R), in double */
static double rig_loss(cu_rig *r) {
    np_layer_io io = cu_rig_io(r, 0);
    r->def->fwd(&io);
    double L = 0;
    for (size_t i = 0; i < (size_t)r->n * r->s.out; i++)
        L += (double)r->out[0][i] * r->R[i];
    return L;
}

/* Central differences of every element of x (count m) against the analytic g. */
static double fd_worst(cu_rig *r, float *x, const float *g, size_t m, const char *what) {
    const float h = 0.05f;
    double worst = 0;
    for (size_t i = 0; i < m; i++) {
        float x0 = x[i];
        x[i] = x0 + h;
        double lp = rig_loss(r);
        x[i] = x0 - h;
        double lm = rig_loss(r);
        x[i] = x0;
        double fd = (lp - lm) / (2.0 * (double)h);
        double err = fabs(fd - g[i]) / (1e-2 + fabs(fd));
        if (err > worst) worst = err;
        if (!tu_close(g[i], fd, 2e-3, 2e-3))
            fail_msg("%s %s[%zu]: analytic %.6g vs finite difference %.6g", r->def->kind, what, i,
                     (double)g[i], fd);
    }
    return worst;
}

static void check_kind(const char *kind, np_layer_hp hp, int n_in, const int *w) {
    cu_rig r;
    rig_make(&r, kind, hp, n_in, w, 3);
    rig_loss(&r);
    memcpy(r.dout[0], r.R, (size_t)r.n * r.s.out * sizeof(float));
    np_layer_io io = cu_rig_io(&r, 0);
    r.def->bwd(&io);
    /* the analytic gradients, kept before the finite differences rerun forward */
    float *gi[NP_LAYER_MAX_IN], *gp[NP_LAYER_MAX_PARAMS];
    for (int k = 0; k < n_in; k++) {
        size_t m = (size_t)r.n * w[k];
        gi[k] = malloc(m * sizeof(float));
        memcpy(gi[k], r.din[0][k], m * sizeof(float));
    }
    for (int p = 0; p < r.s.n_params; p++) {
        size_t m = cu_pcount(&r.s.param[p]);
        gp[p] = malloc(m * sizeof(float));
        memcpy(gp[p], r.dparam[0][p], m * sizeof(float));
    }
    double worst = 0, x;
    for (int k = 0; k < n_in; k++) {
        x = fd_worst(&r, r.in[k], gi[k], (size_t)r.n * w[k], "input");
        worst = x > worst ? x : worst;
        free(gi[k]);
    }
    for (int p = 0; p < r.s.n_params; p++) {
        x = fd_worst(&r, r.param[p], gp[p], cu_pcount(&r.s.param[p]), r.s.param[p].name);
        worst = x > worst ? x : worst;
        free(gp[p]);
    }
    print_message("%-7s hp %d: worst relative error vs finite differences %.2e\n", kind, hp.i[0],
                  worst);
    cu_rig_free(&r);
}

static void test_fd_cross_full(void **state) {
    (void)state;
    int w[2] = {6, 6};
    check_kind("cross", (np_layer_hp){.i = {0}}, 2, w);
}

static void test_fd_cross_lowrank(void **state) {
    (void)state;
    int w[2] = {6, 6};
    check_kind("cross", (np_layer_hp){.i = {2}}, 2, w);
}

static void test_fd_concat_dot_linear(void **state) {
    (void)state;
    int wc[3] = {3, 4, 2}, wd[2] = {3, 6}, wl[1] = {5};
    check_kind("concat", (np_layer_hp){0}, 3, wc);
    check_kind("dot", (np_layer_hp){0}, 2, wd);
    check_kind("linear", (np_layer_hp){.i = {4, 0}}, 1, wl);
}

/* x_{l+1} = x0 * (W x_l + b) + x_l, and with W = U V, element by element in double. */
static void test_cross_formula(void **state) {
    (void)state;
    for (int rank = 0; rank <= 2; rank += 2) {
        int w[2] = {5, 5};
        cu_rig r;
        rig_make(&r, "cross", (np_layer_hp){.i = {rank}}, 2, w, 4);
        rig_loss(&r);
        const float *W = r.param[0], *U = r.param[0], *V = r.param[1];
        const float *b = r.param[rank ? 2 : 1];
        for (long s = 0; s < r.n; s++)
            for (int i = 0; i < 5; i++) {
                const float *x0 = r.in[0] + s * 5, *xl = r.in[1] + s * 5;
                double u = b[i];
                for (int j = 0; j < 5; j++) {
                    double wij = 0;
                    if (!rank) wij = W[i * 5 + j];
                    for (int q = 0; q < rank; q++)
                        wij += (double)U[i * rank + q] * V[q * 5 + j];
                    u += wij * xl[j];
                }
                double want = x0[i] * u + xl[i];
                if (!tu_close(r.out[0][s * 5 + i], want, 1e-5, 1e-5))
                    fail_msg("rank %d out[%ld,%d] = %g, formula %g", rank, s, i,
                             (double)r.out[0][s * 5 + i], want);
            }
        cu_rig_free(&r);
    }
}

/* The HSTU block by its definition (codelets/layers/hstu.c's header), in double, position by
 * position; the bucket rule by hand; and causality: later positions never change earlier
 * outputs (what lets right-padded sequences go without lengths). */
static double silu_d(double z) { return z / (1.0 + exp(-z)); }

static void test_hstu_formula(void **state) {
    (void)state;
    static const int want[][2] = {{0, 0}, {3, 3}, {4, 4}, {7, 4}, {8, 5}, {15, 5}, {16, 6}, {31, 6},
                                  {32, 7}, {1000, 7}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        assert_int_equal(np_hstu_bucket(want[i][0], 8), want[i][1]);
    assert_int_equal(np_hstu_bucket(5, 1), 0);
    enum { L = 6, d = 4, H = 2, dh = 2, NB = 4 };
    int w[1] = {L * d};
    cu_rig r;
    rig_make(&r, "hstu", (np_layer_hp){.i = {L, H, NB}}, 1, w, 3);
    rig_loss(&r);
    const float *W1 = r.param[0], *W2 = r.param[1], *b = r.param[2], *rab = r.param[3];
    for (long s = 0; s < r.n; s++) {
        const float *X = r.in[0] + s * L * d;
        double uvqk[L][4 * d], O[L][d];
        for (int p = 0; p < L; p++)
            for (int j = 0; j < 4 * d; j++) {
                double a = b[j];
                for (int k = 0; k < d; k++)
                    a += (double)W1[j * d + k] * X[p * d + k];
                uvqk[p][j] = silu_d(a);
            }
        for (int p = 0; p < L; p++)
            for (int h = 0; h < H; h++)
                for (int c = 0; c < dh; c++) {
                    double o = 0;
                    for (int q = 0; q <= p; q++) {
                        double sc = rab[h * NB + np_hstu_bucket(p - q, NB)];
                        for (int k = 0; k < dh; k++)
                            sc += uvqk[p][2 * d + h * dh + k] * uvqk[q][3 * d + h * dh + k];
                        o += silu_d(sc) / L * uvqk[q][d + h * dh + c];
                    }
                    O[p][h * dh + c] = o;
                }
        for (int p = 0; p < L; p++) {
            double mu = 0, var = 0, g[d];
            for (int j = 0; j < d; j++)
                mu += O[p][j] / d;
            for (int j = 0; j < d; j++)
                var += (O[p][j] - mu) * (O[p][j] - mu) / d;
            for (int j = 0; j < d; j++)
                g[j] = (O[p][j] - mu) / sqrt(var + 1e-5) * uvqk[p][j];
            for (int i = 0; i < d; i++) {
                double y = X[p * d + i] + b[4 * d + i];
                for (int j = 0; j < d; j++)
                    y += (double)W2[i * d + j] * g[j];
                float got = r.out[0][s * L * d + p * d + i];
                if (!tu_close(got, y, 1e-4, 1e-4))
                    fail_msg("hstu out[%ld, pos %d, %d] = %g, definition %g", s, p, i, (double)got, y);
            }
        }
    }
    /* causality: new values at positions 3.. leave positions 0..2 bit for bit */
    float before[3 * L * d];
    memcpy(before, r.out[0], sizeof before);
    for (long s = 0; s < r.n; s++)
        for (int i = 3 * d; i < L * d; i++)
            r.in[0][s * L * d + i] += 1.0f;
    rig_loss(&r);
    for (long s = 0; s < r.n; s++) {
        assert_memory_equal(before + s * L * d, r.out[0] + s * L * d, 3 * d * sizeof(float));
        assert_memory_not_equal(before + s * L * d + 3 * d, r.out[0] + s * L * d + 3 * d,
                                d * sizeof(float));
    }
    cu_rig_free(&r); /* its gradients: test_gradcheck (steps shrunk where h = 0.05 is coarse) */
}

/* nextitem by its definition in double: position p predicts X_{p+1} against the K
 * negatives, padding (an all-zero X row) and the last position predict nothing, the sum
 * over positions divided by L; and its gradient at a padded position is zero. */
static void test_nextitem_formula(void **state) {
    (void)state;
    enum { L = 5, d = 3, K = 4 };
    cu_rig r;
    rig_make(&r, "nextitem", (np_layer_hp){.i = {L}}, 3, (int[]){L * d, L * d, K * d}, 3);
    for (long s = 0; s < r.n; s++) /* sample s: its last s+0 positions are padding */
        for (int p = L - (int)s; p < L; p++)
            memset(r.in[1] + (s * L + p) * d, 0, d * sizeof(float));
    rig_loss(&r);
    for (long s = 0; s < r.n; s++) {
        const float *Y = r.in[0] + s * L * d, *X = r.in[1] + s * L * d, *N = r.in[2] + s * K * d;
        double want = 0;
        for (int p = 0; p + 1 < L - (int)s; p++) {
            double sc[K + 1];
            for (int j = 0; j <= K; j++) {
                const float *e = j ? N + (j - 1) * d : X + (p + 1) * d;
                sc[j] = 0;
                for (int c = 0; c < d; c++)
                    sc[j] += (double)Y[p * d + c] * e[c];
            }
            double z = 0;
            for (int j = 0; j <= K; j++)
                z += exp(sc[j]);
            want += log(z) - sc[0];
        }
        want /= L;
        if (!tu_close(r.out[0][s], want, 1e-5, 1e-5))
            fail_msg("nextitem loss of sample %ld = %g, definition %g", s, (double)r.out[0][s], want);
    }
    memcpy(r.dout[0], r.R, (size_t)r.n * sizeof(float));
    np_layer_io io = cu_rig_io(&r, 0);
    r.def->bwd(&io);
    /* sample 2: positions 3, 4 are padding; position 2 predicts nothing, position 3 is no target */
    for (int c = 0; c < 2 * d; c++) {
        assert_true(r.din[0][1][(2 * L + 3) * d + c] == 0.0f);
        assert_true(r.din[0][0][(2 * L + 2) * d + c % d] == 0.0f);
    }
    cu_rig_free(&r);
}

static void test_shape_errors(void **state) {
    (void)state;
    np_config c;
    np_config_defaults(&c);
    np_graph_t *g;
    np_error e = {{0}};
    assert_int_equal(np_graph_create(&c, &g, &e), NP_OK);
    int x0 = np_graph_add(g, "x0", "concat", NULL, 1, (int[]){NP_IN_POOLED}, &e);
    assert_true(x0 >= 0);
    np_layer_hp lin = {.i = {7, 1}};
    int y = np_graph_add(g, "y", "linear", &lin, 1, &x0, &e);
    assert_true(y >= 0);
    assert_true(np_graph_add(g, "c", "cross", NULL, 2, (int[]){x0, y}, &e) < 0);
    assert_non_null(strstr(e.msg, "node c (cross)"));
    assert_non_null(strstr(e.msg, "one width"));
    np_layer_hp big = {.i = {10000}};
    assert_true(np_graph_add(g, "c2", "cross", &big, 2, (int[]){x0, x0}, &e) < 0);
    assert_non_null(strstr(e.msg, "rank 10000"));
    assert_true(np_graph_add(g, "d", "dot", NULL, 2, (int[]){y, x0}, &e) < 0);
    assert_non_null(strstr(e.msg, "not a multiple"));
    assert_true(np_graph_add(g, "z", "nosuchkind", NULL, 1, &y, &e) < 0);
    assert_non_null(strstr(e.msg, "unknown layer kind 'nosuchkind'"));
    assert_true(np_graph_add(g, "y", "linear", &lin, 1, &x0, &e) < 0); /* name taken */
    assert_true(np_graph_add(g, "f", "linear", &lin, 1, (int[]){5}, &e) < 0); /* later node */
    /* an output of width 7 is no logit; a dangling node is refused when the model is made */
    assert_int_not_equal(np_graph_set_output(g, y, &e), NP_OK);
    np_layer_hp one = {.i = {1, 0}};
    int o = np_graph_add(g, "o", "linear", &one, 1, &x0, &e);
    assert_int_equal(np_graph_set_output(g, o, &e), NP_OK);
    np_model_t *m = NULL;
    assert_int_equal(np_model_create_graph(&c, g, &m, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "node y feeds nothing"));
    np_graph_free(g);
}

static void nop(const np_layer_io *io) {
    (void)io;
}

static np_status id_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp;
    (void)err;
    s->out = s->in[0];
    return NP_OK;
}

static void test_register_rules(void **state) {
    (void)state;
    np_error e = {{0}};
    np_layer_def d = {.kind = "test_id", .min_in = 1, .max_in = 1, .shape = id_shape, .fwd = nop,
                      .bwd = nop};
    assert_int_equal(np_layer_register(&d, &e), NP_OK);
    assert_non_null(np_layer_find("test_id"));
    assert_true(np_layer_find("test_id")->init == np_layer_init_default);
    assert_int_equal(np_layer_register(&d, &e), NP_STATUS_BAD_INPUT); /* twice */
    assert_non_null(strstr(e.msg, "already registered"));
    np_layer_def nobwd = d;
    nobwd.kind = "test_nobwd";
    nobwd.bwd = NULL;
    assert_int_equal(np_layer_register(&nobwd, &e), NP_STATUS_BAD_INPUT);
    np_layer_def badname = d;
    badname.kind = "Bad Name";
    assert_int_equal(np_layer_register(&badname, &e), NP_STATUS_BAD_INPUT);
    np_layer_def badin = d;
    badin.kind = "test_badin";
    badin.max_in = NP_LAYER_MAX_IN + 1;
    assert_int_equal(np_layer_register(&badin, &e), NP_STATUS_BAD_INPUT);
    assert_null(np_layer_find("test_badin"));
}

static np_status silent_no(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp, (void)s, (void)err;
    return 1; /* a positive "error" and no message: must not read as node id 1 */
}

static np_status widens(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp, (void)err;
    s->in[0] *= 2; /* changes what it was given */
    s->out = s->in[0];
    return NP_OK;
}

/* The graph refuses what a sloppy user layer or caller does, and a refused node leaves the
 * graph as it was. */
static void test_graph_guards(void **state) {
    (void)state;
    np_error e = {{0}};
    np_layer_def a = {.kind = "test_silent", .min_in = 1, .max_in = 1, .shape = silent_no,
                      .fwd = nop, .bwd = nop};
    np_layer_def b = a;
    b.kind = "test_widens";
    b.shape = widens;
    np_layer_def r = a;
    r.kind = "pool";
    assert_int_equal(np_layer_register(&a, &e), NP_OK);
    assert_int_equal(np_layer_register(&b, &e), NP_OK);
    assert_int_equal(np_layer_register(&r, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "the name is reserved"));
    r.kind = "mlp"; /* a model file's macro */
    assert_int_equal(np_layer_register(&r, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "layer mlp: the name is reserved"));
    assert_null(np_layer_find(NULL));
    np_config c;
    np_config_defaults(&c);
    np_graph_t *g;
    assert_int_equal(np_graph_create(&c, &g, &e), NP_OK);
    int p = np_graph_add(g, "p", "concat", NULL, 1, (int[]){NP_IN_POOLED}, &e);
    assert_true(p >= 0);
    assert_true(np_graph_add(g, "s", "test_silent", NULL, 1, &p, &e) < 0);
    assert_non_null(strstr(e.msg, "without a reason"));
    assert_true(np_graph_add(g, "w", "test_widens", NULL, 1, &p, &e) < 0);
    assert_non_null(strstr(e.msg, "changed its input widths"));
    assert_true(np_graph_add(g, "n", "concat", NULL, 2, NULL, &e) < 0);
    /* p feeds 64 edges at most: 8 nodes of 8, then a ninth is refused whole */
    int p8[8] = {p, p, p, p, p, p, p, p};
    for (int i = 0; i < 8; i++) {
        char name[8];
        snprintf(name, sizeof name, "c%d", i);
        assert_true(np_graph_add(g, name, "concat", NULL, 8, p8, &e) >= 0);
    }
    int mixed[2] = {NP_IN_POOLED, p};
    assert_true(np_graph_add(g, "c8", "concat", NULL, 2, mixed, &e) < 0);
    assert_int_equal(g->node[p].n_out, 64);
    assert_int_equal(g->n_pooled_out, 1); /* the pooled edge of the refused node is not kept */
    assert_int_equal(np_graph_nodes(g), 9);
    np_graph_free(g);
}

static np_config dcn_cfg(void) {
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    const char *kv[][2] = {{"model", "dcnv2"}, {"tables", "2"},      {"rows", "6,5"},
                           {"dim", "2"},       {"bottom", "3-4-2"},  {"deep", "3"},
                           {"top", "4-1"},     {"cross-layers", "2"}, {"batch", "6"}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++)
        if (np_config_set(&c, kv[i][0], kv[i][1], "t", &e)) fail_msg("%s", e.msg);
    return c;
}

/* The whole DCN-v2 graph: x0 feeds both inputs of cross.0, cross.1 and deep.0 (four
 * edges summed), two concats split gradients. Every dense and table element's gradient
 * against central differences of the loss. */
static void dcn_fd(int rank) {
    np_config c = dcn_cfg();
    np_error e = {{0}};
    char r[8];
    snprintf(r, sizeof r, "%d", rank);
    assert_int_equal(np_config_set(&c, "cross-rank", r, "t", &e), NP_OK);
    np_model_t *m;
    if (np_model_create(&c, &m, &e)) fail_msg("%s", e.msg);
    np_batch b = tu_batch(&c, 6, 3, 5);
    np_fwd_ws *ws;
    assert_int_equal(np_fwd_ws_create(m, 6, &ws, &e), NP_OK);
    double ls;
    assert_int_equal(np_reference_forward(m, ws, &b, NULL, &ls, &e), NP_OK);
    float *gd = calloc(m->n_dense, sizeof(float)), *gt[2];
    for (int t = 0; t < 2; t++)
        gt[t] = calloc((size_t)m->rows[t] * 2, sizeof(float));
    assert_int_equal(np_reference_backward_full(m, ws, &b, 1.0f, gd, gt, &e), NP_OK);
    const float h = 1e-3f;
    double worst = 0;
    size_t total = m->n_dense + (size_t)(m->rows[0] + m->rows[1]) * 2;
    for (size_t i = 0; i < total; i++) {
        float *x, g;
        if (i < m->n_dense) {
            x = &m->dense[i];
            g = gd[i];
        } else {
            size_t j = i - m->n_dense, n0 = (size_t)m->rows[0] * 2;
            x = j < n0 ? &m->table[0][j] : &m->table[1][j - n0];
            g = j < n0 ? gt[0][j] : gt[1][j - n0];
        }
        float x0 = *x;
        double lp, lm;
        *x = x0 + h;
        assert_int_equal(np_reference_forward(m, ws, &b, NULL, &lp, &e), NP_OK);
        *x = x0 - h;
        assert_int_equal(np_reference_forward(m, ws, &b, NULL, &lm, &e), NP_OK);
        *x = x0;
        double fd = (lp - lm) / (2.0 * h);
        double err = fabs(fd - g) / (1e-2 + fabs(fd));
        if (err > worst) worst = err;
        if (!tu_close(g, fd, 2e-3, 1e-2))
            fail_msg("dcnv2 rank %d: element %zu of %zu: analytic %.6g vs finite difference %.6g",
                     rank, i, total, (double)g, fd);
    }
    print_message("dcnv2 rank %d: %zu elements, worst relative error %.2e\n", rank, total, worst);
    free(gd);
    free(gt[0]);
    free(gt[1]);
    np_fwd_ws_free(ws);
    np_batch_free(&b);
    np_model_free(m);
}

static void test_dcnv2_model_fd(void **state) {
    (void)state;
    dcn_fd(0);
    dcn_fd(3);
}

/* A dump loads back exactly; a rank keeps its shard; another shape names the tensor. */
static void test_init_params(void **state) {
    (void)state;
    np_config c = dcn_cfg();
    np_error e = {{0}};
    np_model_t *a, *b;
    assert_int_equal(np_model_create(&c, &a, &e), NP_OK);
    char path[] = "/tmp/np_layers_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(np_model_dump(a, path, &e), NP_OK);
    c.seed = 777; /* a different start, overwritten by the load */
    assert_int_equal(np_model_create(&c, &b, &e), NP_OK);
    assert_memory_not_equal(a->dense, b->dense, a->n_dense * sizeof(float));
    assert_int_equal(np_model_load(b, path, &e), NP_OK);
    assert_memory_equal(a->dense, b->dense, a->n_dense * sizeof(float));
    assert_memory_equal(a->table_mem, b->table_mem, (size_t)a->row_base[2] * 2 * sizeof(float));
    np_model_free(b);
    /* rank 1 of 2 (row sharding) holds rows (k + t) mod 2 == 1 of the dump */
    np_config c1 = c;
    c1.ranks = 2;
    c1.rank = 1;
    c1.chunks = 1;
    assert_int_equal(np_model_create(&c1, &b, &e), NP_OK);
    assert_int_equal(np_model_load(b, path, &e), NP_OK);
    for (int t = 0; t < 2; t++)
        for (int64_t j = 0; j < b->local_rows[t]; j++) {
            int64_t k = np_shard_global(&c1, t, 1, j);
            assert_memory_equal(b->table[t] + j * 2, a->table[t] + k * 2, 2 * sizeof(float));
        }
    np_model_free(b);
    /* another shape: the first tensor that differs is named */
    np_config c2 = c;
    assert_int_equal(np_config_set(&c2, "deep", "5", "t", &e), NP_OK);
    assert_int_equal(np_model_create(&c2, &b, &e), NP_OK);
    assert_int_equal(np_model_load(b, path, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "tensor 8 is deep.0.weight (3, 6) in the file but deep.0.weight (5, 6)"));
    np_model_free(b);
    np_config c3 = c; /* DLRM from a DCN-v2 dump */
    c3.model = NP_MODEL_DLRM;
    assert_int_equal(np_model_create(&c3, &b, &e), NP_OK);
    assert_int_equal(np_model_load(b, path, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "in the file but"));
    np_model_free(b);
    assert_int_equal(np_model_load(a, "/nonexistent/x.params", &e), NP_STATUS_IO);
    unlink(path);
    np_model_free(a);
}

/* The model's flop count from its layers, against the count by hand for a small DLRM:
 * bottom 4-5-3, dot over 4 vectors of 3 (6 pairs), top 9-6-4-1. */
static void test_dense_flops(void **state) {
    (void)state;
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    const char *kv[][2] = {{"tables", "3"}, {"rows", "10"}, {"dim", "3"},
                           {"bottom", "4-5-3"}, {"top", "6-4-1"}, {"batch", "8"}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++)
        assert_int_equal(np_config_set(&c, kv[i][0], kv[i][1], "t", &e), NP_OK);
    np_model_t *m;
    assert_int_equal(np_model_create(&c, &m, &e), NP_OK);
    /* fwd: 2 (4*5 + 5*3) + 2 (9*6 + 6*4 + 4*1) + 2*6*3 */
    assert_true(np_model_dense_flops(m, 0) == 70.0 + 164.0 + 36.0);
    /* bwd: bottom.0 reads the data (dW only) 2*20; bottom.1 4*15; top 4*82; dot 4*6*3 */
    assert_true(np_model_dense_flops(m, 1) == 40.0 + 60.0 + 328.0 + 72.0);
    np_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_cross_full),  cmocka_unit_test(test_fd_cross_lowrank),
        cmocka_unit_test(test_fd_concat_dot_linear), cmocka_unit_test(test_cross_formula),
        cmocka_unit_test(test_hstu_formula),
        cmocka_unit_test(test_nextitem_formula),
        cmocka_unit_test(test_shape_errors),   cmocka_unit_test(test_register_rules),
        cmocka_unit_test(test_dcnv2_model_fd), cmocka_unit_test(test_init_params),
        cmocka_unit_test(test_dense_flops),    cmocka_unit_test(test_graph_guards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
