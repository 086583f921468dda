/* Helpers shared by the CUDA kernel tests (test_cuda_host: the kernels' code run on the
 * host; test_cuda_kernels: the kernels on a GPU): a layer rig holding a CPU set and a
 * second set of every output buffer, the tolerances, and comparisons that print where
 * they fail. test_layers builds its rigs here too (set 0 only), so every layer test draws
 * its data the same way. */
#ifndef NP_TESTS_CUDAUTIL_H
#define NP_TESTS_CUDAUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/shard.h"
#include "codelets/kernels/kernels.h"
#include "runtime/model/graph.h"

/* GEMM-based results (linear, cross) against the CPU's oneDNN: the two sum the same
 * products in different orders (and the host emulation sums them in double), so they differ
 * by float rounding: at most K * 2^-24 * sum|terms| ~ 32 * 6e-8 * 32 = 6e-5 for the
 * K <= 32 products of [-1, 1] values here (a few chained in the cross layer), ~1e-6
 * typically. A wrong transpose, operand or leading dimension errs by O(0.1 .. 1). */
#define GEMM_ATOL 1e-4
#define GEMM_RTOL 1e-5

/* The BCE on the GPU: CUDA's double exp and log1p are within 2 ulps, not glibc's bits, so
 * the double loss of a chunk (<= a few thousand terms) agrees to ~1e-15 relative, and a
 * gradient rounded once to float can land one float ulp (2^-23 relative) away; the atol
 * covers (sigmoid - y) cancelling to ~1e-16 absolute. */
#define BCE_LOSS_RTOL 1e-12
#define BCE_GRAD_RTOL 2.4e-7
#define BCE_GRAD_ATOL 1e-15

static inline uint64_t cu_next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}
static inline float cu_unif(uint64_t *s, float lo, float hi) {
    return (float)(lo + (hi - lo) * ((double)(cu_next(s) >> 11) * 0x1.0p-53));
}
static inline float *cu_rand(size_t n, uint64_t *s) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = cu_unif(s, -1.0f, 1.0f);
    return x;
}
/* n floats of garbage (1e6): proves a kernel overwrites what it promises to */
static inline float *cu_garbage(size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = 1e6f;
    return x;
}

/* Elements of got outside |got - ref| <= atol + rtol |ref|, the first few printed. */
static inline size_t cu_bad(const char *what, const float *got, const float *ref, size_t n,
                            double atol, double rtol) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - (double)ref[i]);
        if (!(err <= atol + rtol * fabs((double)ref[i]))) {
            if (bad < 4)
                fprintf(stderr, "  %s[%zu]: got %.9g want %.9g\n", what, i, (double)got[i],
                        (double)ref[i]);
            bad++;
        }
    }
    if (bad) fprintf(stderr, "  %s: %zu of %zu out of tolerance\n", what, bad, n);
    return bad;
}
static inline void cu_close(const char *what, const float *got, const float *ref, size_t n,
                            double atol, double rtol) {
    assert_int_equal(cu_bad(what, got, ref, n, atol, rtol), 0);
}
/* The same bits (NaN-free data): memcmp with a message. */
static inline void cu_same(const char *what, const float *got, const float *ref, size_t n) {
    if (n && memcmp(got, ref, n * sizeof *got)) {
        cu_bad(what, got, ref, n, 0.0, 0.0);
        fail_msg("%s: not bit-identical to the CPU twin", what);
    }
}

/* ---- one layer kind on n rows: inputs and parameters, and two sets (0: the CPU kernels',
 * 1: the kernels under test) of everything a call writes */
typedef struct cu_rig {
    const np_layer_def *def;
    np_layer_hp hp;
    np_layer_shape s;
    long n;
    float *in[NP_LAYER_MAX_IN], *param[NP_LAYER_MAX_PARAMS], *R; /* R: the dout fed to bwd */
    int want_din[NP_LAYER_MAX_IN];
    float *out[2], *saved[2], *scratch[2], *dout[2];
    float *din[2][NP_LAYER_MAX_IN], *dparam[2][NP_LAYER_MAX_PARAMS];
} cu_rig;

static inline size_t cu_pcount(const np_param_shape *p) {
    return (size_t)p->dims[0] * (size_t)(p->ndim == 2 ? p->dims[1] : 1);
}

/* x0_is_xl: input 1 is the same buffer as input 0 (a first cross layer). din_mask: bit k
 * set = input k's gradient wanted. */
static inline void cu_rig_make(cu_rig *r, const char *kind, np_layer_hp hp, int n_in, const int *w,
                               long n, unsigned din_mask, int x0_is_xl, uint64_t seed) {
    memset(r, 0, sizeof *r);
    r->def = np_layer_find(kind);
    assert_non_null(r->def);
    r->hp = hp;
    r->n = n;
    r->s.n_in = n_in;
    for (int k = 0; k < n_in; k++)
        r->s.in[k] = w[k];
    np_error e;
    if (r->def->shape(&r->hp, &r->s, &e)) fail_msg("%s shape: %s", kind, e.msg);
    size_t N = (size_t)n;
    for (int k = 0; k < n_in; k++) {
        r->in[k] = x0_is_xl && k == 1 ? r->in[0] : cu_rand(N * (size_t)w[k], &seed);
        r->want_din[k] = (din_mask >> k) & 1;
    }
    for (int p = 0; p < r->s.n_params; p++)
        r->param[p] = cu_rand(cu_pcount(&r->s.param[p]), &seed);
    r->R = cu_rand(N * (size_t)r->s.out, &seed);
    for (int b = 0; b < 2; b++) {
        r->out[b] = cu_garbage(N * (size_t)r->s.out);
        r->saved[b] = r->s.saved ? cu_garbage(N * (size_t)r->s.saved) : NULL;
        r->scratch[b] = r->s.scratch ? cu_garbage(N * (size_t)r->s.scratch) : NULL;
        r->dout[b] = cu_garbage(N * (size_t)r->s.out);
        for (int k = 0; k < n_in; k++)
            r->din[b][k] = r->want_din[k] ? cu_garbage(N * (size_t)w[k]) : NULL;
        for (int p = 0; p < r->s.n_params; p++)
            r->dparam[b][p] = cu_garbage(cu_pcount(&r->s.param[p]));
    }
}

static inline void cu_rig_free(cu_rig *r) {
    for (int k = 0; k < r->s.n_in; k++)
        if (!(k == 1 && r->in[1] == r->in[0])) free(r->in[k]);
    for (int p = 0; p < r->s.n_params; p++)
        free(r->param[p]);
    free(r->R);
    for (int b = 0; b < 2; b++) {
        free(r->out[b]);
        free(r->saved[b]);
        free(r->scratch[b]);
        free(r->dout[b]);
        for (int k = 0; k < r->s.n_in; k++)
            free(r->din[b][k]);
        for (int p = 0; p < r->s.n_params; p++)
            free(r->dparam[b][p]);
    }
}

/* The io of set b over host memory. */
static inline np_layer_io cu_rig_io(cu_rig *r, int b) {
    np_layer_io io;
    memset(&io, 0, sizeof io);
    io.hp = &r->hp;
    io.shape = &r->s;
    io.n = r->n;
    io.out = r->out[b];
    io.saved = r->saved[b];
    io.scratch = r->scratch[b];
    io.dout = r->dout[b];
    for (int k = 0; k < r->s.n_in; k++) {
        io.in[k] = r->in[k];
        io.din[k] = r->din[b][k];
    }
    for (int p = 0; p < r->s.n_params; p++) {
        io.param[p] = r->param[p];
        io.dparam[p] = r->dparam[b][p];
    }
    return io;
}

/* Set 1 against set 0 after a backward: outputs (and saved) of the forward, the clobbered
 * dout, and every gradient; exact when atol = rtol = 0. */
static inline void cu_rig_check(cu_rig *r, int bwd, double atol, double rtol) {
    size_t N = (size_t)r->n;
    char what[64];
    if (!bwd) {
        snprintf(what, sizeof what, "%s fwd out", r->def->kind);
        cu_close(what, r->out[1], r->out[0], N * (size_t)r->s.out, atol, rtol);
        if (r->s.saved) {
            snprintf(what, sizeof what, "%s fwd saved", r->def->kind);
            cu_close(what, r->saved[1], r->saved[0], N * (size_t)r->s.saved, atol, rtol);
        }
        return;
    }
    snprintf(what, sizeof what, "%s bwd dout", r->def->kind);
    cu_close(what, r->dout[1], r->dout[0], N * (size_t)r->s.out, atol, rtol);
    for (int k = 0; k < r->s.n_in; k++)
        if (r->want_din[k]) {
            snprintf(what, sizeof what, "%s bwd din[%d]", r->def->kind, k);
            cu_close(what, r->din[1][k], r->din[0][k], N * (size_t)r->s.in[k], atol, rtol);
        }
    for (int p = 0; p < r->s.n_params; p++) {
        snprintf(what, sizeof what, "%s bwd dparam[%d]", r->def->kind, p);
        cu_close(what, r->dparam[1][p], r->dparam[0][p], cu_pcount(&r->s.param[p]), atol, rtol);
    }
}

/* dout of both sets <- R (backward may clobber dout, so it is refilled before each) */
static inline void cu_rig_dout(cu_rig *r) {
    size_t m = (size_t)r->n * (size_t)r->s.out;
    if (!m) return;
    memcpy(r->dout[0], r->R, m * sizeof(float));
    memcpy(r->dout[1], r->R, m * sizeof(float));
}

/* ---- pooling data: T tables, nb samples, bags of 0..4 keys; a window's Rin holds each
 * table's rows in its own range (rows of different tables are distinct, as route makes
 * them), keys repeat within a table. */
typedef struct cu_pool {
    int T, d;
    int L; /* table 0 a sequence of L slots (0: a bag); set after cu_pool_make */
    long nb, U, nnz;
    uint32_t *off; /* (T, nb+1) */
    int64_t *pos;  /* (nnz) */
    float *rows;   /* (U, d) */
} cu_pool;

static inline void cu_pool_make(cu_pool *p, int T, int d, long nb, long rows_per_table,
                                uint64_t seed) {
    p->T = T;
    p->d = d;
    p->L = 0;
    p->nb = nb;
    p->U = (long)T * rows_per_table;
    p->off = malloc((size_t)T * (size_t)(nb + 1) * sizeof *p->off);
    assert_non_null(p->off);
    uint32_t at = 0;
    for (int t = 0; t < T; t++)
        for (long s = 0; s <= nb; s++) {
            p->off[(size_t)t * (size_t)(nb + 1) + (size_t)s] = at;
            if (s < nb) at += (uint32_t)(cu_next(&seed) % 5);
        }
    p->nnz = at;
    p->pos = malloc((at ? at : 1) * sizeof *p->pos);
    assert_non_null(p->pos);
    for (int t = 0; t < T; t++) {
        const uint32_t *o = p->off + (size_t)t * (size_t)(nb + 1);
        for (uint32_t k = o[0]; k < o[nb]; k++)
            p->pos[k] =
                (int64_t)t * rows_per_table + (int64_t)(cu_next(&seed) % (uint64_t)rows_per_table);
    }
    p->rows = cu_rand((size_t)p->U * (size_t)d, &seed);
}
static inline void cu_pool_free(cu_pool *p) {
    free(p->off);
    free(p->pos);
    free(p->rows);
}
/* The CPU twins the pooling kernels answer to. Forward (pool_fwd_cpu): P (n, S*d), sample
 * i's pooled bag of table t at P + i * S*d + np_slot_first(t, L)*d (table 0's L positions
 * there when it is a sequence), of window samples row0 .. row0+n-1. */
static inline size_t cu_pool_slots(const cu_pool *p) {
    return (size_t)np_slot_first(p->T, p->L);
}
static inline void cu_pool_fwd_cpu(const cu_pool *p, long row0, long n, float *P) {
    long stride = (long)cu_pool_slots(p) * p->d;
    for (int t = 0; t < p->T; t++) {
        const uint32_t *o = p->off + (size_t)t * (size_t)(p->nb + 1) + row0;
        float *Pt = P + (size_t)np_slot_first(t, p->L) * (size_t)p->d;
        if (t == 0 && p->L > 0)
            np_embseq_fwd(p->rows, o, p->pos, n, p->L, p->d, Pt, stride);
        else
            np_embbag_fwd_skip(p->rows, o, p->pos, n, p->d, Pt, stride);
    }
}
/* Backward (pool_bwd_cpu): dP (n, S*d) added into the window's row grads g (U, d). */
static inline void cu_pool_bwd_cpu(const cu_pool *p, const float *dP, long row0, long n,
                                   float *g) {
    long stride = (long)cu_pool_slots(p) * p->d;
    for (int t = 0; t < p->T; t++) {
        const uint32_t *o = p->off + (size_t)t * (size_t)(p->nb + 1) + row0;
        const float *dPt = dP + (size_t)np_slot_first(t, p->L) * (size_t)p->d;
        if (t == 0 && p->L > 0)
            np_embseq_bwd(dPt, stride, o, p->pos, n, p->L, p->d, g);
        else
            np_embbag_bwd_skip(dPt, stride, o, p->pos, n, p->d, g);
    }
}

/* ---- BCE data: n logits in [-30, 30] (both tails of the sigmoid) and labels alternating
 * 0, 1, with every third soft in [0, 1]. */
static inline void cu_bce_data(float *z, float *y, int n, uint64_t seed) {
    for (int s = 0; s < n; s++) {
        z[s] = cu_unif(&seed, -30.0f, 30.0f);
        y[s] = s % 3 == 2 ? cu_unif(&seed, 0.0f, 1.0f) : (float)(s % 2);
    }
}

#endif
