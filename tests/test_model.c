/* Whole-model tests: the float forward/backward of the reference path against an
 * independent double-precision DLRM written here with plain loops (finite differences in
 * double, so the oracle is not checked against itself); init determinism; the NPPARAMS
 * dump layout; one reference SGD/Adagrad step against hand-applied updates; exact AUC. */
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

#include "runtime/core/util.h"
#include "runtime/model/model.h"
#include "testutil.h"

/* Float forward/backward vs double finite differences: float rounding of activations
 * (~1e-7 relative per op, a few hundred ops deep) and FD truncation error O(h^2) ~ 1e-10
 * stay far below these. */
#define FD_H 1e-4
#define FD_ATOL 2e-5
#define FD_RTOL 2e-3

static np_config small_cfg(void) {
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    int ok =
        !np_config_set(&c, "tables", "3", "t", &e) &&
        !np_config_set(&c, "rows", "7,5,9", "t", &e) && !np_config_set(&c, "dim", "3", "t", &e) &&
        !np_config_set(&c, "bottom", "4-5-3", "t", &e) &&
        !np_config_set(&c, "top", "6-4-1", "t", &e) && !np_config_set(&c, "batch", "8", "t", &e) &&
        !np_config_set(&c, "lr", "0.5", "t", &e) && !np_config_check(&c, &e);
    if (!ok) fail_msg("config: %s", e.msg);
    return c;
}

/* The DLRM's dense layers as documented (docs/formats.md): bottom then top, W (out, in)
 * then b (out) each, laid out from the config alone, independently of the model code. */
typedef struct tlayer {
    int in, out, relu;
    size_t w_off, b_off;
} tlayer;

static int dlrm_layers(const np_config *c, tlayer *bot, int *n_bot, tlayer *top, int *n_top) {
    size_t off = 0;
    *n_bot = c->n_bottom - 1;
    *n_top = c->n_top;
    for (int i = 0; i < *n_bot; i++) {
        bot[i] = (tlayer){c->bottom[i], c->bottom[i + 1], 1, off, 0};
        off += (size_t)bot[i].in * bot[i].out;
        bot[i].b_off = off;
        off += (size_t)bot[i].out;
    }
    for (int i = 0; i < *n_top; i++) {
        int in = i ? c->top[i - 1] : np_config_top_input(c);
        top[i] = (tlayer){in, c->top[i], i < *n_top - 1, off, 0};
        off += (size_t)in * top[i].out;
        top[i].b_off = off;
        off += (size_t)top[i].out;
    }
    return (int)off;
}

/* ---- independent double-precision DLRM: loss sum of the batch times scale */
static double ref_loss(const np_model_t *m, const np_batch *b, const double *dense,
                       double *const *tab, double scale) {
    int d = m->d, T1 = m->T + 1;
    tlayer bot[NP_MAX_LAYERS], top[NP_MAX_LAYERS];
    int n_bot, n_top;
    dlrm_layers(&m->cfg, bot, &n_bot, top, &n_top);
    double total = 0;
    double act[2][512], F[64][16];
    for (long s = 0; s < b->n; s++) {
        const double *x = act[1];
        for (int j = 0; j < b->n_dense; j++)
            act[1][j] = b->dense[s * b->n_dense + j];
        int cur = 0;
        for (int i = 0; i < n_bot; i++, cur ^= 1) {
            const tlayer *L = &bot[i];
            for (int o = 0; o < L->out; o++) {
                double v = dense[L->b_off + o];
                for (int k = 0; k < L->in; k++)
                    v += dense[L->w_off + (size_t)o * L->in + k] * x[k];
                act[cur][o] = v > 0 ? v : 0;
            }
            x = act[cur];
        }
        for (int j = 0; j < d; j++)
            F[0][j] = x[j];
        for (int t = 0; t < m->T; t++) {
            const uint32_t *off = b->offsets + (size_t)t * (b->n + 1);
            for (int j = 0; j < d; j++)
                F[1 + t][j] = 0;
            for (uint32_t k = off[s]; k < off[s + 1]; k++)
                for (int j = 0; j < d; j++)
                    F[1 + t][j] += tab[t][b->keys[k] * d + j];
        }
        double z[512];
        int w = 0;
        for (int j = 0; j < d; j++)
            z[w++] = F[0][j];
        for (int i = 1; i < T1; i++)
            for (int j = 0; j < i; j++) {
                double dot = 0;
                for (int k = 0; k < d; k++)
                    dot += F[i][k] * F[j][k];
                z[w++] = dot;
            }
        x = z;
        for (int i = 0; i < n_top; i++, cur ^= 1) {
            const tlayer *L = &top[i];
            for (int o = 0; o < L->out; o++) {
                double v = dense[L->b_off + o];
                for (int k = 0; k < L->in; k++)
                    v += dense[L->w_off + (size_t)o * L->in + k] * x[k];
                act[cur][o] = (L->relu && v < 0) ? 0 : v;
            }
            x = act[cur];
        }
        double lg = x[0], y = b->label[s];
        total += (lg > 0 ? lg : 0) - lg * y + log1p(exp(-fabs(lg)));
    }
    return total * scale;
}

static void test_model_gradient_fd(void **state) {
    (void)state;
    np_config c = small_cfg();
    np_error e = {{0}};
    np_model_t *m;
    assert_int_equal(np_model_create(&c, &m, &e), NP_OK);
    np_batch b = tu_batch(&c, 8, 3, 99);
    /* make the bags touch every key of table 1 often: larger gradients there */
    np_fwd_ws *ws;
    assert_int_equal(np_fwd_ws_create(m, 8, &ws, &e), NP_OK);
    double ls;
    float prob[8];
    assert_int_equal(np_reference_forward(m, ws, &b, prob, &ls, &e), NP_OK);
    float *gd = calloc(m->n_dense, sizeof(float));
    float *gt[3];
    for (int t = 0; t < 3; t++)
        gt[t] = calloc((size_t)m->rows[t] * m->d, sizeof(float));
    float scale = 1.0f / 8;
    assert_int_equal(np_reference_backward_full(m, ws, &b, scale, gd, gt, &e), NP_OK);

    double *dd = malloc(m->n_dense * sizeof(double));
    double *td[3];
    for (size_t i = 0; i < m->n_dense; i++)
        dd[i] = m->dense[i];
    for (int t = 0; t < 3; t++) {
        size_t n = (size_t)m->rows[t] * m->d;
        td[t] = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++)
            td[t][i] = m->table[t][i];
    }
    /* forward agrees with the double model */
    double lref = ref_loss(m, &b, dd, td, 1.0);
    assert_true(tu_close(ls, lref, 1e-5, 1e-5));

    int checked = 0, nonzero = 0;
    for (size_t i = 0; i < m->n_dense; i++) {
        double keep = dd[i];
        dd[i] = keep + FD_H;
        double lp = ref_loss(m, &b, dd, td, scale);
        dd[i] = keep - FD_H;
        double lm = ref_loss(m, &b, dd, td, scale);
        dd[i] = keep;
        double fd = (lp - lm) / (2 * FD_H);
        if (!tu_close(gd[i], fd, FD_ATOL, FD_RTOL))
            fail_msg("dense param %zu: analytic %.8g vs fd %.8g", i, gd[i], fd);
        checked++;
        nonzero += fabs(fd) > 1e-4;
    }
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < (size_t)m->rows[t] * m->d; i++) {
            double keep = td[t][i];
            td[t][i] = keep + FD_H;
            double lp = ref_loss(m, &b, dd, td, scale);
            td[t][i] = keep - FD_H;
            double lm = ref_loss(m, &b, dd, td, scale);
            td[t][i] = keep;
            double fd = (lp - lm) / (2 * FD_H);
            if (!tu_close(gt[t][i], fd, FD_ATOL, FD_RTOL))
                fail_msg("table %d elem %zu: analytic %.8g vs fd %.8g", t, i, gt[t][i], fd);
            checked++;
            nonzero += fabs(fd) > 1e-4;
        }
    /* the check must have had something to check */
    assert_true(nonzero > checked / 4);

    for (int t = 0; t < 3; t++) {
        free(gt[t]);
        free(td[t]);
    }
    free(gd);
    free(dd);
    np_fwd_ws_free(ws);
    np_batch_free(&b);
    np_model_free(m);
}

static void test_init_deterministic(void **state) {
    (void)state;
    np_config c = small_cfg();
    np_error e = {{0}};
    np_model_t *a, *b2;
    assert_int_equal(np_model_create(&c, &a, &e), NP_OK);
    assert_int_equal(np_model_create(&c, &b2, &e), NP_OK);
    assert_memory_equal(a->dense, b2->dense, a->n_dense * sizeof(float));
    assert_memory_equal(a->table[2], b2->table[2], 9 * 3 * sizeof(float));
    /* documented law: element e of tensor k depends on (seed, k, e) only */
    int k_t1 = np_model_n_dense_tensors(a) + 1;
    double a1 = sqrt(1.0 / 5);
    float want = (float)(a1 * (2.0 * np_rng_uniform(c.seed, NP_STREAM_PARAM + k_t1, 7) - 1.0));
    assert_true(a->table[1][7] == want);
    assert_true(fabsf(a->table[1][7]) <= sqrtf(1.0f / 5));
    np_model_free(b2);
    c.seed = 43;
    assert_int_equal(np_model_create(&c, &b2, &e), NP_OK);
    assert_memory_not_equal(a->dense, b2->dense, a->n_dense * sizeof(float));
    np_model_free(a);
    np_model_free(b2);
}

static uint32_t rd32(const unsigned char *p) {
    return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_dump_layout(void **state) {
    (void)state;
    np_config c = small_cfg();
    np_error e = {{0}};
    np_model_t *m;
    assert_int_equal(np_model_create(&c, &m, &e), NP_OK);
    char path[] = "/tmp/np_dump_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(np_model_dump(m, path, &e), NP_OK);
    FILE *f = fopen(path, "rb");
    unsigned char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unlink(path);
    assert_memory_equal(buf, "NPPARAMS", 8);
    assert_int_equal(rd32(buf + 8), 1);
    assert_int_equal(rd32(buf + 12), 2 * (2 + 3) + 3); /* 2 bottom, 3 top layers, 3 tables */
    const char *names[] = {"bottom.0.weight",
                           "bottom.0.bias",
                           "bottom.1.weight",
                           "bottom.1.bias",
                           "top.0.weight",
                           "top.0.bias",
                           "top.1.weight",
                           "top.1.bias",
                           "top.2.weight",
                           "top.2.bias",
                           "emb.0",
                           "emb.1",
                           "emb.2"};
    size_t p = 16, doff = 0;
    for (int k = 0; k < 13; k++) {
        uint32_t len = rd32(buf + p);
        assert_int_equal(len, strlen(names[k]));
        assert_memory_equal(buf + p + 4, names[k], len);
        p += 4 + len;
        uint32_t nd = rd32(buf + p);
        p += 4;
        size_t cnt = 1;
        for (uint32_t i = 0; i < nd; i++, p += 8)
            cnt *= rd32(buf + p);
        const float *src = k < 10 ? m->dense + doff : m->table[k - 10];
        if (k < 10) doff += cnt;
        assert_memory_equal(buf + p, src, cnt * 4); /* little-endian host */
        p += cnt * 4;
    }
    assert_int_equal(p, n); /* nothing after the last tensor */
    assert_int_equal(doff, m->n_dense);
    /* shapes: bottom.0.weight is (5, 4); top.0 input is d + T1(T1-1)/2 = 3 + 6 = 9 */
    tlayer bot[NP_MAX_LAYERS], top[NP_MAX_LAYERS];
    int n_bot, n_top;
    assert_int_equal(dlrm_layers(&c, bot, &n_bot, top, &n_top), (int)m->n_dense);
    assert_int_equal(bot[0].out, 5);
    assert_int_equal(top[0].in, 9);
    np_model_free(m);
}

/* One reference step must equal the hand-applied update with the full-table gradients. */
static void run_step_check(int adagrad) {
    np_config c = small_cfg();
    np_error e = {{0}};
    if (adagrad)
        assert_int_equal(np_config_set(&c, "sparse-optim", "rowwise-adagrad", "t", &e), NP_OK);
    np_model_t *m, *m0;
    assert_int_equal(np_model_create(&c, &m, &e), NP_OK);
    assert_int_equal(np_model_create(&c, &m0, &e), NP_OK);
    np_batch b = tu_batch(&c, 8, 3, 7);
    np_fwd_ws *ws;
    assert_int_equal(np_fwd_ws_create(m0, 8, &ws, &e), NP_OK);
    double ls0;
    assert_int_equal(np_reference_forward(m0, ws, &b, NULL, &ls0, &e), NP_OK);
    float *gd = calloc(m0->n_dense, sizeof(float)), *gt[3];
    for (int t = 0; t < 3; t++)
        gt[t] = calloc((size_t)m0->rows[t] * 3, sizeof(float));
    assert_int_equal(np_reference_backward_full(m0, ws, &b, 1.0f / 8, gd, gt, &e), NP_OK);

    np_reference *r;
    assert_int_equal(np_reference_create(&c, m, &r, &e), NP_OK);
    double loss;
    for (int rep = 0; rep < 2; rep++) {
        assert_int_equal(np_reference_step(r, &b, &loss, &e), NP_OK);
        if (rep == 0) assert_true(loss == ls0 / 8);
        /* hand update of m0 (recompute grads for the second step) */
        if (rep == 1) {
            assert_int_equal(np_reference_forward(m0, ws, &b, NULL, &ls0, &e), NP_OK);
            assert_int_equal(np_reference_backward_full(m0, ws, &b, 1.0f / 8, gd, gt, &e), NP_OK);
        }
        for (size_t i = 0; i < m0->n_dense; i++)
            m0->dense[i] -= 0.5f * gd[i];
        for (int t = 0; t < 3; t++)
            for (int64_t row = 0; row < m0->rows[t]; row++) {
                float *g = gt[t] + row * 3, *w = m0->table[t] + row * 3;
                int touched = 0;
                for (uint32_t k = b.offsets[t * 9]; k < b.offsets[t * 9 + 8]; k++)
                    touched |= b.keys[k] == row;
                if (!touched) continue; /* untouched rows keep their state */
                if (adagrad) {
                    float s = (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]) / 3;
                    m0->state[t][row] += s;
                    float den = sqrtf(m0->state[t][row]) + (float)c.adagrad_eps;
                    for (int j = 0; j < 3; j++)
                        w[j] -= 0.5f * g[j] / den;
                } else {
                    for (int j = 0; j < 3; j++)
                        w[j] -= 0.5f * g[j];
                }
            }
        for (size_t i = 0; i < m0->n_dense; i++)
            if (!tu_close(m->dense[i], m0->dense[i], 1e-6, 1e-5))
                fail_msg("step %d dense %zu: %.9g vs %.9g", rep, i, m->dense[i], m0->dense[i]);
        for (int t = 0; t < 3; t++)
            for (int64_t i = 0; i < m0->rows[t] * 3; i++)
                if (!tu_close(m->table[t][i], m0->table[t][i], 1e-6, 1e-5))
                    fail_msg("step %d table %d elem %lld: %.9g vs %.9g", rep, t, (long long)i,
                             m->table[t][i], m0->table[t][i]);
    }
    np_reference_free(r);
    for (int t = 0; t < 3; t++)
        free(gt[t]);
    free(gd);
    np_fwd_ws_free(ws);
    np_batch_free(&b);
    np_model_free(m);
    np_model_free(m0);
}

static void test_step_sgd(void **state) {
    (void)state;
    run_step_check(0);
}

static void test_step_adagrad(void **state) {
    (void)state;
    run_step_check(1);
}

static void test_auc_exact(void **state) {
    (void)state;
    float s1[] = {0.1f, 0.4f, 0.35f, 0.8f}, l1[] = {0, 0, 1, 1};
    assert_true(fabs(np_auc(s1, l1, 4) - 0.75) < 1e-12); /* sklearn's textbook example */
    float s2[] = {0.5f, 0.5f, 0.5f, 0.5f}, l2[] = {0, 1, 0, 1};
    assert_true(fabs(np_auc(s2, l2, 4) - 0.5) < 1e-12); /* all tied: one half */
    float s3[] = {0.2f, 0.7f, 0.7f, 0.9f}, l3[] = {0, 0, 1, 1};
    /* positives 0.7 (ties one negative: 0.5 + 1) and 0.9 (beats both: 2) -> 3.5/4 */
    assert_true(fabs(np_auc(s3, l3, 4) - 0.875) < 1e-12);
    float l4[] = {1, 1, 1, 1};
    assert_true(isnan(np_auc(s3, l4, 4)));
}

/* Next-item ranking: which vector and which item each sequence brings (its history after
 * K negatives: position len-2 predicts item len-1; histories of 1 item or more than L are
 * skipped), and ranks against a naive count over 2,500 items (three blocks). */
static void test_rank_items(void **state) {
    (void)state;
    enum { L = 4, K = 2, d = 3, N = 4 };
    static const uint32_t lens[N] = {K + 3, K + 1, K + 4, K + 2}; /* histories 3, 1, 4, 2 */
    np_batch b = {.n = N, .n_tables = 1};
    uint32_t off[N + 1] = {0};
    int64_t keys[64];
    for (int s = 0; s < N; s++)
        off[s + 1] = off[s] + lens[s];
    for (uint32_t k = 0; k < off[N]; k++)
        keys[k] = 100 + k;
    b.offsets = off;
    b.keys = keys;
    b.nnz = off[N];
    float Y[N * L * d];
    for (int i = 0; i < N * L * d; i++)
        Y[i] = (float)i;
    float user[N * d];
    int64_t target[N];
    assert_int_equal(np_rank_select(Y, &b, L, K, d, user, target), 3);
    /* sample 0: position 1, last key at off 4; sample 2: position 2, key 5+5; sample 3 */
    const int pos[3] = {0 * L + 1, 2 * L + 2, 3 * L + 0};
    const int64_t want[3] = {100 + 4, 100 + off[2] + 5, 100 + off[3] + 3};
    for (int u = 0; u < 3; u++) {
        assert_int_equal(target[u], want[u]);
        assert_memory_equal(user + u * d, Y + pos[u] * d, d * sizeof(float));
    }
    enum { ITEMS = 2500, NU = 5 };
    float *E = malloc(ITEMS * d * sizeof(float)), us[NU * d], ts[NU];
    float *sc = malloc(NU * 1024 * sizeof(float));
    long rank[NU];
    int64_t tg[NU] = {0, 1023, 1024, 2499, 1500};
    uint64_t seed = 3;
    for (int i = 0; i < ITEMS * d; i++)
        E[i] = (float)((long)(tu_next(&seed) % 2001) - 1000) / 1000.0f;
    for (int i = 0; i < NU * d; i++)
        us[i] = (float)((long)(tu_next(&seed) % 2001) - 1000) / 1000.0f;
    np_rank_items(us, NU, d, E, ITEMS, tg, ts, sc, rank);
    for (int u = 0; u < NU; u++) {
        double t = 0;
        for (int c = 0; c < d; c++)
            t += (double)us[u * d + c] * E[tg[u] * d + c];
        long sure = 0, near = 0; /* above the target; within float error of it */
        for (int j = 0; j < ITEMS; j++) {
            double x = 0;
            for (int c = 0; c < d; c++)
                x += (double)us[u * d + c] * E[j * d + c];
            sure += x > t + 1e-5;
            near += j != tg[u] && fabs(x - t) <= 1e-5;
        }
        if (rank[u] < sure + 1 || rank[u] > sure + 1 + near)
            fail_msg("user %d: rank %ld, naive %ld (+%ld near ties)", u, rank[u], sure + 1, near);
        if (!(fabs(ts[u] - t) < 1e-5)) fail_msg("user %d: target score %g, naive %g", u, (double)ts[u], t);
    }
    free(E);
    free(sc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_gradient_fd), cmocka_unit_test(test_init_deterministic),
        cmocka_unit_test(test_dump_layout),       cmocka_unit_test(test_step_sgd),
        cmocka_unit_test(test_step_adagrad),      cmocka_unit_test(test_auc_exact),
        cmocka_unit_test(test_rank_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
