/* The public gradient check (np_layer_gradcheck): every built-in kind passes at several
 * shapes, and kinds with planted bugs fail, naming the tensor or the contract rule they
 * break: a wrong gradient term, a gradient accumulated instead of overwritten, a forward
 * that reads its scratch or differs between calls, kernels that write into their inputs,
 * out or parameters, a backward whose results depend on din being NULL. Plus the errors,
 * the defaults, the seed, and the kinks of a non-smooth forward. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nestpipe/layer.h"

/* Runs the check with default options but rows; fails the test on an error status. */
static np_gradcheck_result check(const char *kind, np_layer_hp hp, int n_in, const int *w,
                                 long rows) {
    np_gradcheck_opts o = {.rows = rows};
    np_gradcheck_result r;
    np_error e = {{0}};
    np_status st = np_layer_gradcheck(kind, &hp, n_in, w, &o, &r, &e);
    if (st) fail_msg("%s: status %d: %s", kind, (int)st, e.msg);
    return r;
}

/* The tensor named name in r, or a failed test. */
static const np_gradcheck_tensor *tensor(const np_gradcheck_result *r, const char *name) {
    for (int t = 0; t < r->n; t++)
        if (!strcmp(r->t[t].name, name)) return &r->t[t];
    fail_msg("no tensor %s", name);
    return NULL;
}

static void expect_pass(const char *kind, np_layer_hp hp, int n_in, const int *w, long rows) {
    np_gradcheck_result r = check(kind, hp, n_in, w, rows);
    if (!r.passed || r.contract[0] || !(r.worst <= 1e-2))
        fail_msg("%s (i0 %d, i1 %d, %d inputs, %ld rows): worst %g, contract '%s'", kind, hp.i[0],
                 hp.i[1], n_in, rows, r.worst, r.contract);
    assert_int_equal(r.n, n_in + r.shape.n_params);
    for (int k = 0; k < n_in; k++)
        assert_int_equal(r.t[k].count, (rows ? rows : 4) * w[k]);
    /* the CUDA comparison ran, or says why not (NP_HAVE_CUDA is the library's define, not
     * this test's: ask the library) */
    if (r.cuda_checked)
        assert_string_equal(r.cuda_skipped, "");
    else if (strcmp(r.cuda_skipped, "not the CUDA flavour") &&
             strcmp(r.cuda_skipped, "no CUDA device") &&
             strcmp(r.cuda_skipped, "the kind has no CUDA slots"))
        fail_msg("%s: cuda_skipped '%s'", kind, r.cuda_skipped);
    print_message("%-7s %d inputs, i0 %d, %2ld rows: worst %.2e\n", kind, n_in, hp.i[0],
                  rows ? rows : 4, r.worst);
}

/* Shapes per built-in kind; a built-in kind missing here fails the test, so a new kind
 * gets its cases when it is added. */
static void test_builtin_kinds(void **state) {
    (void)state;
    static const char *const covered[] = {"linear", "dot", "concat", "cross", "slice", "hstu", "nextitem"};
    for (int i = 0; np_layer_kind_at(i); i++) {
        const char *k = np_layer_kind_at(i);
        int found = !strncmp(k, "gc_", 3); /* this test's own kinds */
        for (size_t c = 0; c < sizeof covered / sizeof *covered; c++)
            found |= !strcmp(k, covered[c]);
        if (!found) fail_msg("built-in kind %s has no case in test_gradcheck", k);
    }
    int w1[] = {5}, w7[] = {7}, w13[] = {13};
    expect_pass("linear", (np_layer_hp){.i = {4, 0}}, 1, w1, 0);
    expect_pass("linear", (np_layer_hp){.i = {3, 1}}, 1, w7, 0);
    expect_pass("linear", (np_layer_hp){.i = {1, 1}}, 1, w13, 9);
    expect_pass("linear", (np_layer_hp){.i = {16, 1}}, 1, (int[]){16}, 4);
    expect_pass("dot", (np_layer_hp){0}, 1, (int[]){3}, 0);
    expect_pass("dot", (np_layer_hp){0}, 2, (int[]){3, 6}, 0);
    expect_pass("dot", (np_layer_hp){0}, 3, (int[]){4, 8, 4}, 17); /* blocked, and a tail */
    expect_pass("dot", (np_layer_hp){0}, 2, (int[]){2, 10}, 32);   /* blocked only */
    expect_pass("concat", (np_layer_hp){0}, 1, (int[]){5}, 0);
    expect_pass("concat", (np_layer_hp){0}, 3, (int[]){3, 4, 2}, 0);
    expect_pass("concat", (np_layer_hp){0}, 8, (int[]){1, 2, 1, 3, 1, 1, 2, 1}, 3);
    expect_pass("cross", (np_layer_hp){.i = {0}}, 2, (int[]){6, 6}, 0);
    expect_pass("cross", (np_layer_hp){.i = {2}}, 2, (int[]){6, 6}, 0);
    expect_pass("cross", (np_layer_hp){.i = {4}}, 2, (int[]){5, 5}, 7);
    expect_pass("slice", (np_layer_hp){.i = {2, 5}}, 1, (int[]){7}, 0);
    expect_pass("slice", (np_layer_hp){.i = {1, 0}}, 1, (int[]){5}, 0);
    expect_pass("slice", (np_layer_hp){.i = {0, 1}}, 1, (int[]){1}, 2);
    expect_pass("hstu", (np_layer_hp){.i = {3, 1, 4}}, 1, (int[]){3 * 4}, 0);
    expect_pass("hstu", (np_layer_hp){.i = {5, 2, 4}}, 1, (int[]){5 * 4}, 3); /* far buckets */
    expect_pass("hstu", (np_layer_hp){.i = {1, 2, 0}}, 1, (int[]){1 * 6}, 2);
    expect_pass("nextitem", (np_layer_hp){.i = {4}}, 3, (int[]){4 * 3, 4 * 3, 5 * 3}, 0);
    expect_pass("nextitem", (np_layer_hp){.i = {2}}, 3, (int[]){2 * 4, 2 * 4, 1 * 4}, 3);
}

/* ---- planted kinds: y = x * w + b per column (w, b of the input's width), each with one
 * bug; "gc_scale" is the correct one */

static np_status scale_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp;
    (void)err;
    s->out = s->in[0];
    s->scratch = hp->i[0]; /* gc_scratch: floats per sample of scratch */
    s->n_params = 2;
    s->param[0] = np_param_vector("w", s->in[0]);
    s->param[1] = np_param_vector("b", s->in[0]);
    return NP_OK;
}

static void scale_fwd(const np_layer_io *io) {
    int D = io->shape->out;
    for (long i = 0; i < io->n; i++)
        for (int j = 0; j < D; j++)
            io->out[i * D + j] = io->in[0][i * D + j] * io->param[0][j] + io->param[1][j];
}

/* The correct backward; factor scales dw (2: the planted wrong factor). */
static void scale_bwd_f(const np_layer_io *io, float factor, int accumulate) {
    int D = io->shape->out;
    for (int j = 0; j < D; j++) {
        float dw = 0, db = 0;
        for (long i = 0; i < io->n; i++) {
            dw += io->dout[i * D + j] * io->in[0][i * D + j];
            db += io->dout[i * D + j];
        }
        io->dparam[0][j] = factor * dw;
        io->dparam[1][j] = db;
    }
    if (io->din[0])
        for (long i = 0; i < io->n * D; i++) {
            float g = io->dout[i] * io->param[0][i % D];
            io->din[0][i] = accumulate ? io->din[0][i] + g : g;
        }
}
static void scale_bwd(const np_layer_io *io) {
    scale_bwd_f(io, 1.0f, 0);
}
/* dw off by the factor 1 + f[0] (f[0] = 0: 2) */
static void wrong_factor_bwd(const np_layer_io *io) {
    scale_bwd_f(io, io->hp->f[0] ? 1.0f + (float)io->hp->f[0] : 2.0f, 0);
}
static void accum_bwd(const np_layer_io *io) {
    scale_bwd_f(io, 1.0f, 1);
}
/* dw added to what dparam held */
static void accum_param_bwd(const np_layer_io *io) {
    int D = io->shape->out;
    float *keep = malloc((size_t)D * sizeof *keep);
    memcpy(keep, io->dparam[0], (size_t)D * sizeof *keep);
    scale_bwd(io);
    for (int j = 0; j < D; j++)
        io->dparam[0][j] += keep[j];
    free(keep);
}
/* the forward sums into its scratch without clearing it first */
static void scratch_fwd(const np_layer_io *io) {
    int D = io->shape->out;
    for (long i = 0; i < io->n; i++) {
        float *acc = io->scratch + i * io->shape->scratch;
        for (int j = 0; j < D; j++) {
            acc[0] += io->in[0][i * D + j];
            io->out[i * D + j] =
                io->in[0][i * D + j] * io->param[0][j] + io->param[1][j] + 1e-3f * acc[0];
        }
    }
}
/* a forward that drifts from call to call */
static void nondet_fwd(const np_layer_io *io) {
    static int calls;
    scale_fwd(io);
    io->out[0] += 1e-4f * (float)(++calls % 7);
}
/* a forward that writes into its input (clamping it, "in place") */
static void writes_in_fwd(const np_layer_io *io) {
    float *x = (float *)io->in[0];
    for (long i = 0; i < io->n * io->shape->out; i++)
        if (x[i] < -0.5f) x[i] = -0.5f;
    scale_fwd(io);
}
/* a backward that writes into its parameter (a "fused update") */
static void writes_param_bwd(const np_layer_io *io) {
    scale_bwd(io);
    ((float *)io->param[1])[0] -= 0.1f * io->dparam[1][0];
}
/* a backward that masks out in place */
static void writes_out_bwd(const np_layer_io *io) {
    scale_bwd(io);
    io->out[0] = 0;
}
/* a backward that skips dw when din is not wanted */
static void null_din_bwd(const np_layer_io *io) {
    scale_bwd(io);
    if (!io->din[0]) io->dparam[0][0] = 0;
}

/* |x| elementwise: a kink at 0 that the check must step around */
static void abs_fwd(const np_layer_io *io) {
    for (long i = 0; i < io->n * io->shape->out; i++)
        io->out[i] = fabsf(io->in[0][i]);
}
static void abs_bwd(const np_layer_io *io) {
    if (!io->din[0]) return;
    for (long i = 0; i < io->n * io->shape->out; i++)
        io->din[0][i] = io->in[0][i] < 0 ? -io->dout[i] : io->dout[i];
}
static np_status abs_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp;
    (void)err;
    s->out = s->in[0];
    return NP_OK;
}

static void reg(const char *kind, np_layer_def d) {
    d.kind = kind;
    d.min_in = d.max_in = 1;
    d.shape = d.shape ? d.shape : scale_shape;
    d.fwd = d.fwd ? d.fwd : scale_fwd;
    d.bwd = d.bwd ? d.bwd : scale_bwd;
    np_error e = {{0}};
    if (np_layer_register(&d, &e)) fail_msg("%s", e.msg);
}

static int setup(void **state) {
    (void)state;
    reg("gc_scale", (np_layer_def){0});
    reg("gc_factor", (np_layer_def){.bwd = wrong_factor_bwd});
    reg("gc_accum", (np_layer_def){.bwd = accum_bwd});
    reg("gc_accum_param", (np_layer_def){.bwd = accum_param_bwd});
    reg("gc_scratch", (np_layer_def){.fwd = scratch_fwd});
    reg("gc_nondet", (np_layer_def){.fwd = nondet_fwd});
    reg("gc_writes_in", (np_layer_def){.fwd = writes_in_fwd});
    reg("gc_writes_param", (np_layer_def){.bwd = writes_param_bwd});
    reg("gc_writes_out", (np_layer_def){.bwd = writes_out_bwd});
    reg("gc_null_din", (np_layer_def){.bwd = null_din_bwd});
    reg("gc_abs", (np_layer_def){.shape = abs_shape, .fwd = abs_fwd, .bwd = abs_bwd});
    return 0;
}

/* A failed check whose contract message holds every fragment given (NULL-terminated). */
static np_gradcheck_result expect_contract(const char *kind, np_layer_hp hp, ...) {
    np_gradcheck_result r = check(kind, hp, 1, (int[]){6}, 0);
    assert_int_equal(r.passed, 0);
    va_list ap;
    va_start(ap, hp);
    for (const char *f; (f = va_arg(ap, const char *));)
        if (!strstr(r.contract, f)) fail_msg("%s: contract '%s' lacks '%s'", kind, r.contract, f);
    va_end(ap);
    print_message("%-16s %s\n", kind, r.contract);
    return r;
}

static void test_planted_bugs(void **state) {
    (void)state;
    np_layer_hp hp0 = {0};
    expect_pass("gc_scale", hp0, 1, (int[]){6}, 0);
    /* a wrong factor in dw: w fails, and nothing else */
    np_gradcheck_result r = check("gc_factor", hp0, 1, (int[]){6}, 0);
    assert_int_equal(r.passed, 0);
    assert_string_equal(r.contract, "");
    assert_true(tensor(&r, "w")->worst > 0.5);
    assert_true(tensor(&r, "in0")->worst <= 1e-2);
    assert_true(tensor(&r, "b")->worst <= 1e-2);
    const np_gradcheck_tensor *w = tensor(&r, "w");
    assert_true(fabs(w->analytic - 2 * w->numeric) <= 1e-3 * fabs(w->numeric) + 1e-5);

    /* the tolerance is what decides: dw 3% off fails, 0.2% off passes (tol 1e-2) */
    r = check("gc_factor", (np_layer_hp){.f = {0.03}}, 1, (int[]){6}, 0);
    assert_int_equal(r.passed, 0);
    assert_true(tensor(&r, "w")->worst > 0.02 && tensor(&r, "w")->worst < 0.04);
    r = check("gc_factor", (np_layer_hp){.f = {0.002}}, 1, (int[]){6}, 0);
    assert_int_equal(r.passed, 1);

    r = expect_contract("gc_accum", hp0, "gc_accum: ", "in0[", "OVERWRITE", NULL);
    assert_true(tensor(&r, "in0")->worst > 1);
    expect_contract("gc_accum_param", hp0, "gradient of w[", "OVERWRITE", NULL);
    expect_contract("gc_scratch", (np_layer_hp){.i = {2}}, "forward reads its scratch", NULL);
    expect_contract("gc_nondet", hp0, "not deterministic", NULL);
    expect_contract("gc_writes_in", hp0, "forward wrote into its input in0", NULL);
    expect_contract("gc_writes_param", hp0, "backward wrote into its parameter b", NULL);
    expect_contract("gc_writes_out", hp0, "backward wrote into out", NULL);
    expect_contract("gc_null_din", hp0, "din[0] = NULL", "gradient of w[0]", NULL);
}

/* |x| on 256 inputs in [-1, 1]: several lie within the first step of the kink */
/* ---- planted bugs in the HSTU kind: its backward, then one term taken away */
static void hstu_no_far_rab_bwd(const np_layer_io *io) { /* drab of the last bucket lost */
    np_layer_find("hstu")->bwd(io);
    int H = io->hp->i[1], nb = io->hp->i[2];
    io->dparam[3][H * nb - 1] = 0.0f;
}
static void hstu_no_residual_bwd(const np_layer_io *io) { /* dX lacks the residual's dY */
    np_layer_find("hstu")->bwd(io);
    if (io->din[0])
        for (size_t i = 0; i < (size_t)io->n * (size_t)io->shape->in[0]; i++)
            io->din[0][i] -= io->dout[i];
}

static void test_hstu_planted(void **state) {
    (void)state;
    np_layer_def d = *np_layer_find("hstu");
    d.kind = "gc_hstu_rab";
    d.bwd = hstu_no_far_rab_bwd;
    memset(d.hp_int, 0, sizeof d.hp_int);
    np_error e = {{0}};
    if (np_layer_register(&d, &e)) fail_msg("%s", e.msg);
    d.kind = "gc_hstu_res";
    d.bwd = hstu_no_residual_bwd;
    if (np_layer_register(&d, &e)) fail_msg("%s", e.msg);
    np_layer_hp hp = {.i = {5, 2, 4}}; /* distance 4 is bucket 3, the last */
    expect_pass("hstu", hp, 1, (int[]){20}, 0);
    np_gradcheck_result r = check("gc_hstu_rab", hp, 1, (int[]){20}, 0);
    assert_int_equal(r.passed, 0);
    assert_true(tensor(&r, "rab")->worst > 0.1);
    assert_true(tensor(&r, "W1")->worst <= 1e-2);
    r = check("gc_hstu_res", hp, 1, (int[]){20}, 0);
    assert_int_equal(r.passed, 0);
    assert_true(tensor(&r, "in0")->worst > 0.1);
    assert_true(tensor(&r, "rab")->worst <= 1e-2);
}

static void test_kink(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        np_gradcheck_opts o = {.rows = 8, .seed = seed};
        np_gradcheck_result r;
        np_error e = {{0}};
        assert_int_equal(np_layer_gradcheck("gc_abs", NULL, 1, (int[]){32}, &o, &r, &e), NP_OK);
        if (!r.passed)
            fail_msg("seed %d: worst %g at %ld: analytic %g, numeric %g", (int)seed, r.worst,
                     r.t[0].worst_at, r.t[0].analytic, r.t[0].numeric);
    }
    /* ReLU kinks of linear at many seeds */
    for (uint64_t seed = 1; seed <= 8; seed++) {
        np_gradcheck_opts o = {.seed = seed};
        np_gradcheck_result r;
        np_error e = {{0}};
        np_layer_hp hp = {.i = {12, 1}};
        assert_int_equal(np_layer_gradcheck("linear", &hp, 1, (int[]){12}, &o, &r, &e), NP_OK);
        if (!r.passed)
            fail_msg("linear relu seed %d: worst %g, contract '%s'", (int)seed, r.worst,
                     r.contract);
    }
}

static void test_errors_and_options(void **state) {
    (void)state;
    np_gradcheck_result r;
    np_error e = {{0}};
    np_layer_hp lin = {.i = {3, 0}};
    assert_int_equal(np_layer_gradcheck("nosuch", NULL, 1, (int[]){4}, NULL, &r, &e),
                     NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "unknown layer kind 'nosuch'"));
    assert_int_equal(np_layer_gradcheck("linear", &lin, 2, (int[]){4, 4}, NULL, &r, &e),
                     NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "linear takes 1 to 1 inputs, not 2"));
    assert_int_equal(np_layer_gradcheck("linear", &lin, 1, (int[]){0}, NULL, &r, &e),
                     NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "width 0"));
    assert_int_equal(np_layer_gradcheck("linear", NULL, 1, (int[]){4}, NULL, &r, &e),
                     NP_STATUS_BAD_INPUT); /* out = 0: the kind's own message, prefixed */
    assert_non_null(strstr(e.msg, "linear: output width 0"));
    assert_int_equal(np_layer_gradcheck("cross", NULL, 2, (int[]){4, 5}, NULL, &r, &e),
                     NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "cross: a cross layer takes"));
    np_gradcheck_opts neg = {.rows = -1};
    assert_int_equal(np_layer_gradcheck("linear", &lin, 1, (int[]){4}, &neg, &r, &e),
                     NP_STATUS_BAD_INPUT);

    /* defaults (opts NULL: rows 4, seed 1) equal the explicit ones; another seed differs */
    np_gradcheck_result a, b, c;
    assert_int_equal(np_layer_gradcheck("linear", &lin, 1, (int[]){4}, NULL, &a, &e), NP_OK);
    np_gradcheck_opts o = {.rows = 4, .tol = 1e-2, .floor = 1e-2, .seed = 1};
    assert_int_equal(np_layer_gradcheck("linear", &lin, 1, (int[]){4}, &o, &b, &e), NP_OK);
    o.seed = 2;
    assert_int_equal(np_layer_gradcheck("linear", &lin, 1, (int[]){4}, &o, &c, &e), NP_OK);
    assert_int_equal(a.t[0].count, 16);
    assert_int_equal(a.n, 3);
    assert_string_equal(a.t[1].name, "weight");
    for (int t = 0; t < a.n; t++) {
        assert_memory_equal(&a.t[t].worst, &b.t[t].worst, sizeof(double));
        assert_memory_equal(&a.t[t].analytic, &b.t[t].analytic, sizeof(double));
    }
    assert_memory_not_equal(&a.t[1].analytic, &c.t[1].analytic, sizeof(double));
    /* a tolerance under the float noise fails a correct kind, and passed says so */
    o.tol = 1e-12;
    o.seed = 1;
    assert_int_equal(np_layer_gradcheck("gc_scale", NULL, 1, (int[]){6}, &o, &a, &e), NP_OK);
    assert_int_equal(a.passed, 0);
    assert_string_equal(a.contract, "");
    /* why the CUDA comparison did not run, in either flavour */
    int cpu_only = !strcmp(b.cuda_skipped, "not the CUDA flavour");
    o.no_cuda = 1;
    assert_int_equal(np_layer_gradcheck("linear", &lin, 1, (int[]){4}, &o, &a, &e), NP_OK);
    assert_int_equal(a.cuda_checked, 0);
    assert_string_equal(a.cuda_skipped, cpu_only ? "not the CUDA flavour" : "no_cuda set");
    assert_int_equal(np_layer_gradcheck("gc_scale", NULL, 1, (int[]){6}, NULL, &a, &e), NP_OK);
    assert_string_equal(a.cuda_skipped,
                        cpu_only ? "not the CUDA flavour" : "the kind has no CUDA slots");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_kinds),
        cmocka_unit_test_setup(test_planted_bugs, setup),
        cmocka_unit_test(test_hstu_planted),
        cmocka_unit_test(test_kink),
        cmocka_unit_test(test_errors_and_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
