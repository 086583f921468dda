/* The public gradient check of a layer kind (np_layer_gradcheck, nestpipe/layer.h): its
 * backward against central finite differences of its own forward, the kernel contract of
 * docs/layers.md, and in the CUDA flavour its CUDA slots against its CPU kernels.
 * Not here: the command around it (apps/check_layer.c) or any graph or engine. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#ifdef NP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "runtime/core/util.h"
#include "codelets/cuda/cuda.h"
#include "runtime/model/graph.h"

/* RNG streams of the check's own data, away from runtime/core/util.h's: input k draws from
 * GC_STREAM_IN + k, R from GC_STREAM_R. Parameters draw from NP_STREAM_PARAM + p, as the
 * tensors of a model's first node would. */
enum { GC_STREAM_IN = NP_STREAM_GRADCHECK, GC_STREAM_R = GC_STREAM_IN + NP_LAYER_MAX_IN };

#define GC_T (NP_LAYER_MAX_IN + NP_LAYER_MAX_PARAMS) /* tensors: inputs, then parameters */
#define GC_MAX_BUFS (5 * GC_T + 8)
#define GC_MAX_ROWS 1000000L /* the check costs a forward per element: more is a mistake */

/* One kind on n rows. Tensor t is input t (t < n_in) or parameter t - n_in. The kernels
 * read x[t], which is x0[t] again before every call, so a kernel that writes into its
 * inputs (a contract break) cannot spoil the finite differences. */
typedef struct rig {
    const np_layer_def *def;
    np_layer_hp hp;
    np_layer_shape s;
    long n;
    int nt;               /* tensors: s.n_in + s.n_params */
    size_t cnt[GC_T];     /* elements of tensor t: (n, in[k]) or the parameter's shape */
    float *x0[GC_T];      /* (cnt[t]): the values drawn */
    float *x[GC_T];       /* (cnt[t]): what the kernels read */
    float *g[GC_T];       /* (cnt[t]): din[k] / dparam[p] as the kernels write them */
    float *ga[GC_T];      /* (cnt[t]): the analytic gradient (the first backward's) */
    float *R;             /* (n, out): L = sum(out * R); dout is a fresh copy of it */
    float *out, *dout;    /* (n, out) each */
    float *saved;         /* (n, saved) or NULL */
    float *scratch;       /* (n, scratch) or NULL */
    float *out0, *saved0; /* (n, out), (n, saved): the first forward's, for bit comparisons */
    char name[GC_T][16];  /* "in0", ..., then the parameters' names */
    void *buf[GC_MAX_BUFS];
    int nbuf;
} rig;

static float *rig_alloc(rig *r, size_t n, const char *what, np_error *err) {
    float *p = np_alloc(n ? n : 1, sizeof(float), what, err);
    if (p) r->buf[r->nbuf++] = p;
    return p;
}

static void rig_free(rig *r) {
    for (int i = 0; i < r->nbuf; i++)
        free(r->buf[i]);
}

static void fill(float *p, size_t n, float v) {
    if (p)
        for (size_t i = 0; i < n; i++)
            p[i] = v;
}

/* The io over the rig's host buffers; din[k] is NULL where bit k of want is clear. */
static np_layer_io rig_io(rig *r, unsigned want) {
    np_layer_io io;
    memset(&io, 0, sizeof io);
    io.hp = &r->hp;
    io.shape = &r->s;
    io.n = r->n;
    io.out = r->out;
    io.saved = r->saved;
    io.scratch = r->scratch;
    io.dout = r->dout;
    io.precision = NP_PRECISION_FP32;
    for (int k = 0; k < r->s.n_in; k++) {
        io.in[k] = r->x[k];
        io.din[k] = (want >> k) & 1u ? r->g[k] : NULL;
    }
    for (int p = 0; p < r->s.n_params; p++) {
        io.param[p] = r->x[r->s.n_in + p];
        io.dparam[p] = r->g[r->s.n_in + p];
    }
    return io;
}

static void reset_x(rig *r) {
    for (int t = 0; t < r->nt; t++)
        memcpy(r->x[t], r->x0[t], r->cnt[t] * sizeof(float));
}

/* First element whose bits differ, or -1: NaN == NaN here, and -0 != 0. */
static long first_diff(const float *a, const float *b, size_t n) {
    if (!a || !b || !memcmp(a, b, n * sizeof *a)) return -1;
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a)) return (long)i;
    return -1;
}

/* Records what broke (the first thing only) as one line naming the kind. */
static void broke(np_gradcheck_result *res, const rig *r, const char *fmt, ...) {
    if (res->contract[0]) return;
    int at = snprintf(res->contract, sizeof res->contract, "%s: ", r->def->kind);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->contract + at, sizeof res->contract - (size_t)at, fmt, ap);
    va_end(ap);
}

/* After a kernel call: the inputs and parameters must be as drawn. */
static void check_x(rig *r, np_gradcheck_result *res, const char *pass) {
    for (int t = 0; t < r->nt; t++) {
        long i = first_diff(r->x[t], r->x0[t], r->cnt[t]);
        if (i >= 0)
            broke(res, r,
                  "%s wrote into its %s %s (element %ld: %g, was %g); kernels leave "
                  "inputs and parameters alone",
                  pass, t < r->s.n_in ? "input" : "parameter", r->name[t], i, (double)r->x[t][i],
                  (double)r->x0[t][i]);
    }
}

/* A forward with out and saved prefilled with out_fill, scratch with scratch_fill. */
static void run_fwd(rig *r, np_gradcheck_result *res, float out_fill, float scratch_fill) {
    size_t n = (size_t)r->n;
    reset_x(r);
    fill(r->out, n * (size_t)r->s.out, out_fill);
    fill(r->saved, n * (size_t)r->s.saved, out_fill);
    fill(r->scratch, n * (size_t)r->s.scratch, scratch_fill);
    np_layer_io io = rig_io(r, 0);
    r->def->fwd(&io);
    check_x(r, res, "forward");
}

/* out and saved of the last forward against the first one's; why names the difference. */
static void same_fwd(rig *r, np_gradcheck_result *res, const char *why) {
    size_t n = (size_t)r->n;
    long i = first_diff(r->out, r->out0, n * (size_t)r->s.out);
    if (i >= 0) {
        broke(res, r, "out[%ld] is %g, then %g: %s", i, (double)r->out0[i], (double)r->out[i], why);
        return;
    }
    i = first_diff(r->saved, r->saved0, n * (size_t)r->s.saved);
    if (i >= 0)
        broke(res, r, "saved[%ld] is %g, then %g: %s", i, (double)r->saved0[i], (double)r->saved[i],
              why);
}

/* A backward from the first forward's out and saved and dout = R, with din (the inputs in
 * want) and dparam prefilled with g_fill and scratch with scratch_fill. */
static void run_bwd(rig *r, np_gradcheck_result *res, unsigned want, float g_fill,
                    float scratch_fill) {
    size_t n = (size_t)r->n;
    reset_x(r);
    memcpy(r->out, r->out0, n * (size_t)r->s.out * sizeof(float));
    if (r->saved) memcpy(r->saved, r->saved0, n * (size_t)r->s.saved * sizeof(float));
    memcpy(r->dout, r->R, n * (size_t)r->s.out * sizeof(float)); /* bwd may clobber dout */
    for (int t = 0; t < r->nt; t++)
        fill(r->g[t], r->cnt[t], g_fill);
    fill(r->scratch, n * (size_t)r->s.scratch, scratch_fill);
    np_layer_io io = rig_io(r, want);
    r->def->bwd(&io);
    check_x(r, res, "backward");
    /* out and saved are read-only in backward: the engine hands them over as STARPU_R */
    long i = first_diff(r->out, r->out0, n * (size_t)r->s.out);
    if (i >= 0) broke(res, r, "backward wrote into out (element %ld), which it may only read", i);
    i = first_diff(r->saved, r->saved0, n * (size_t)r->s.saved);
    if (i >= 0) broke(res, r, "backward wrote into saved (element %ld), which it may only read", i);
}

/* The gradients of the last backward against the analytic ones, over the tensors in mask
 * (bit t); why says what the difference means. */
static void same_bwd(rig *r, np_gradcheck_result *res, unsigned mask, const char *why) {
    for (int t = 0; t < r->nt; t++) {
        if (!((mask >> t) & 1u)) continue;
        long i = first_diff(r->g[t], r->ga[t], r->cnt[t]);
        if (i >= 0) {
            broke(res, r, "the gradient of %s[%ld] is %g, then %g: %s", r->name[t], i,
                  (double)r->ga[t][i], (double)r->g[t][i], why);
            return;
        }
    }
}

/* The kernel contract of docs/layers.md, in the order the engine relies on it; leaves the
 * first forward's out and saved in out0/saved0 and the analytic gradients in ga. */
static void contract(rig *r, np_gradcheck_result *res) {
    size_t n = (size_t)r->n, nout = n * (size_t)r->s.out;
    const float nan = nanf(""), big = 1e6f;
    run_fwd(r, res, nan, nan);
    memcpy(r->out0, r->out, nout * sizeof(float));
    if (r->saved) memcpy(r->saved0, r->saved, n * (size_t)r->s.saved * sizeof(float));
    run_fwd(r, res, nan, nan);
    same_fwd(r, res, "forward is not deterministic (the same inputs must give the same bits)");
    run_fwd(r, res, nan, big);
    same_fwd(r, res, "forward reads its scratch before writing it (scratch is uninitialised)");
    run_fwd(r, res, big, nan);
    same_fwd(r, res, "forward reads out or saved before writing them");
    /* after the comparisons, which say more about why an element went bad */
    for (size_t i = 0; i < nout; i++)
        if (!isfinite(r->out0[i])) {
            broke(res, r,
                  "forward left out[%zu] = %g on finite inputs (an element it does "
                  "not write, or an overflow)",
                  i, (double)r->out0[i]);
            break;
        }

    unsigned all_in = (1u << r->s.n_in) - 1u, all_t = (1u << r->nt) - 1u;
    run_bwd(r, res, all_in, big, nan);
    for (int t = 0; t < r->nt; t++)
        memcpy(r->ga[t], r->g[t], r->cnt[t] * sizeof(float));
    run_bwd(r, res, all_in, big, nan);
    same_bwd(r, res, all_t, "backward is not deterministic");
    run_bwd(r, res, all_in, nan, nan);
    same_bwd(r, res, all_t,
             "it depends on what din/dparam held before (1e6, then NaN): backward "
             "must OVERWRITE din and dparam, never add to them");
    run_bwd(r, res, all_in, big, big);
    same_bwd(r, res, all_t, "backward reads its scratch before writing it");
    /* din[k] = NULL (input k is the data): each in turn, then all at once; the other
     * gradients must not change */
    char why[64];
    for (int k = 0; k < r->s.n_in; k++) {
        unsigned want = all_in & ~(1u << k);
        snprintf(why, sizeof why, "with din[%d] = NULL it changes", k);
        run_bwd(r, res, want, big, nan);
        same_bwd(r, res, (all_t & ~all_in) | want, why);
    }
    if (r->s.n_in > 1) {
        run_bwd(r, res, 0u, big, nan);
        same_bwd(r, res, all_t & ~all_in, "with every din NULL it changes");
    }
    for (int t = 0; t < r->nt; t++)
        for (size_t i = 0; i < r->cnt[t]; i++)
            if (!isfinite(r->ga[t][i])) {
                broke(res, r,
                      "backward left the gradient of %s[%zu] = %g (an element it does "
                      "not overwrite, or an overflow)",
                      r->name[t], i, (double)r->ga[t][i]);
                t = r->nt;
                break;
            }
}

/* L = sum(out * R) in double, of the forward with element e of tensor t set to v (t < 0:
 * nothing changed). */
static double loss_at(rig *r, int t, size_t e, float v) {
    reset_x(r);
    if (t >= 0) r->x[t][e] = v;
    np_layer_io io = rig_io(r, 0);
    r->def->fwd(&io);
    double L = 0;
    for (size_t i = 0; i < (size_t)r->n * (size_t)r->s.out; i++)
        L += (double)r->out[i] * (double)r->R[i];
    return L;
}

/* Steps h = GC_H0 max(1, |x|) / 4^k, k < GC_LEVELS. The float forward's rounding of the
 * outputs an element moves (~1e-7 of each, more through a sum of K products) divided by
 * 2h is the noise of a difference; at h = 1e-2 it reached 1e-2 of a gradient on layers 64
 * wide (dot, linear), so the first step is 0.1: the kink tests below make a large step
 * safe for a piecewise-linear forward, and a smooth one loses only O(h^4) to Richardson.
 * The last step, 1e-4, is where the noise takes over. */
#define GC_H0 1e-1
#define GC_LEVELS 6

/* The numeric gradient of element e of tensor t (L0: the loss at the drawn values; a: the
 * analytic gradient, for kinks). At each step h, from L at x +- h and x +- h/2 (over the
 * differences of the floats actually formed, exact in double): central differences c1, c2
 * and their Richardson extrapolation C, free of the O(h^2) term, and the one-sided slopes
 * d, extrapolated alike to F (right of x) and B (left).
 * - The step is smooth when c1 ~ c2 and F ~ B, and C is an estimate; two smooth steps in
 *   a row that agree end the search: kinks within h (a ReLU's, one per output an element
 *   moves) can look like a curve on one step, not on two a factor 4 apart.
 * - A kink nearer x than the step pulls C towards the mean of the slopes on its two sides,
 *   and shows as F != B. Then a side whose two slopes agree (to tol/2) holds no kink that
 *   matters, and its slope at h/2 is the derivative from that side: an estimate too (at a
 *   kink either side's is a valid gradient).
 * - The estimate nearest a is kept: taken at once within tol/4, after the last step within
 *   tol. Else, so that a wrong gradient fails against the most trustworthy estimate: C of
 *   the first smooth step, or of the step whose c1 and c2 agreed best. */
static double numeric(rig *r, int t, size_t e, double L0, double a, double tol, double floor) {
    const float x = r->x0[t][e];
    double h = GC_H0 * fmax(1.0, fabs((double)x));
    double prev = NAN, first_smooth = NAN, best = NAN, best_gap = INFINITY;
    double cand = NAN, cand_err = INFINITY; /* the valid estimate nearest a so far */
    for (int k = 0; k < GC_LEVELS; k++, h /= 4) {
        float xs[4] = {(float)(x + h), (float)(x + h / 2), (float)(x - h / 2), (float)(x - h)};
        double L[4], d[4]; /* d: one-sided slopes to x + h, x + h/2, x - h/2, x - h */
        for (int i = 0; i < 4; i++) {
            L[i] = loss_at(r, t, e, xs[i]);
            d[i] = (L[i] - L0) / ((double)xs[i] - (double)x);
        }
        double c1 = (L[0] - L[3]) / ((double)xs[0] - (double)xs[3]);
        double c2 = (L[1] - L[2]) / ((double)xs[1] - (double)xs[2]);
        double C = (4 * c2 - c1) / 3, F = 2 * d[1] - d[0], B = 2 * d[2] - d[3];
        double scale = fmax(fabs(C), floor), gap = fabs(c1 - c2) / scale;
        int smooth = gap <= tol / 4 && fabs(F - B) <= tol * scale;
        if (smooth && !isnan(prev) && fabs(C - prev) <= tol / 4 * scale) return prev;
        prev = smooth ? C : NAN;
        if (smooth && isnan(first_smooth)) first_smooth = C;
        if (gap < best_gap || k == 0) best_gap = gap, best = C;
        /* the estimates of this step: C if smooth, else the slopes of the straight sides */
        for (int i = 0; i < (smooth ? 1 : 2); i++) {
            double n1 = d[i ? 3 : 0], v = smooth ? C : d[i ? 2 : 1];
            double er = fabs(a - v) / fmax(fabs(v), floor);
            if ((smooth || fabs(n1 - v) <= tol / 2 * fmax(fabs(v), floor)) && er < cand_err)
                cand = v, cand_err = er;
        }
        if (cand_err <= tol / 4) return cand;
    }
    if (cand_err <= tol) return cand;
    return isnan(first_smooth) ? best : first_smooth;
}

#ifdef NP_HAVE_CUDA
/* The CUDA slots on the rig's data against the CPU results (out0, saved0, ga): the worst
 * |cuda - cpu| / max(|cpu|, floor) and where. GEMM-based kinds sum their products in
 * another order than oneDNN, so they differ by float rounding (~1e-6 absolute for the
 * check's small sizes, tests/cudautil.h GEMM_ATOL): far under floor * tol. Buffers the slots
 * write start as NaN bytes, so an element they skip shows. */
static void cuda_worse(np_gradcheck_result *res, const char *what, const float *got,
                       const float *ref, size_t n, double floor) {
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]) / fmax(fabs((double)ref[i]), floor);
        if (isnan(d)) d = memcmp(got + i, ref + i, sizeof *got) ? INFINITY : 0.0;
        if (d > res->cuda_worst || (isinf(d) && !isinf(res->cuda_worst))) {
            res->cuda_worst = d;
            snprintf(res->cuda_where, sizeof res->cuda_where, "%s[%zu]", what, i);
        }
    }
}

static void cuda_check(rig *r, np_gradcheck_result *res, double floor) {
    size_t n = (size_t)r->n, sz[4] = {n * (size_t)r->s.out, n * (size_t)r->s.saved,
                                      n * (size_t)r->s.scratch, n * (size_t)r->s.out};
    float *dx[GC_T] = {0}, *dg[GC_T] = {0}, *db[4] = {0}; /* device: tensors, gradients, and
                                                           * out, saved, scratch, dout */
    cudaStream_t st = NULL;
    cudaError_t e = cudaStreamCreate(&st);
    for (int t = 0; t < r->nt && e == cudaSuccess; t++) {
        size_t b = r->cnt[t] * sizeof(float);
        if ((e = cudaMalloc((void **)&dx[t], b ? b : 4)) == cudaSuccess &&
            (e = cudaMalloc((void **)&dg[t], b ? b : 4)) == cudaSuccess &&
            (e = cudaMemcpy(dx[t], r->x0[t], b, cudaMemcpyHostToDevice)) == cudaSuccess)
            e = cudaMemset(dg[t], 0xff, b);
    }
    for (int i = 0; i < 4 && e == cudaSuccess; i++)
        if (sz[i] && (e = cudaMalloc((void **)&db[i], sz[i] * sizeof(float))) == cudaSuccess)
            e = cudaMemset(db[i], 0xff, sz[i] * sizeof(float));
    np_layer_io io;
    memset(&io, 0, sizeof io);
    io.hp = &r->hp;
    io.shape = &r->s;
    io.n = r->n;
    io.out = db[0];
    io.saved = db[1];
    io.scratch = db[2];
    io.dout = db[3];
    for (int t = 0; t < r->nt; t++) {
        if (t < r->s.n_in) {
            io.in[t] = dx[t];
            io.din[t] = dg[t];
        } else {
            io.param[t - r->s.n_in] = dx[t];
            io.dparam[t - r->s.n_in] = dg[t];
        }
    }
    if (e == cudaSuccess) {
        r->def->cuda_fwd(&io, st);
        if ((e = cudaStreamSynchronize(st)) == cudaSuccess &&
            (e = cudaGetLastError()) == cudaSuccess &&
            (e = cudaMemcpy(r->out, db[0], sz[0] * sizeof(float), cudaMemcpyDeviceToHost)) ==
                cudaSuccess &&
            sz[1])
            e = cudaMemcpy(r->saved, db[1], sz[1] * sizeof(float), cudaMemcpyDeviceToHost);
    }
    if (e == cudaSuccess && (e = cudaMemcpy(db[3], r->R, sz[3] * sizeof(float),
                                            cudaMemcpyHostToDevice)) == cudaSuccess) {
        r->def->cuda_bwd(&io, st);
        if ((e = cudaStreamSynchronize(st)) == cudaSuccess) e = cudaGetLastError();
        for (int t = 0; t < r->nt && e == cudaSuccess; t++)
            e = cudaMemcpy(r->g[t], dg[t], r->cnt[t] * sizeof(float), cudaMemcpyDeviceToHost);
    }
    res->cuda_checked = 1;
    if (e != cudaSuccess) {
        res->cuda_worst = INFINITY;
        snprintf(res->cuda_where, sizeof res->cuda_where, "a CUDA call failed");
        broke(res, r, "the CUDA slots: %s", cudaGetErrorString(e));
    } else {
        cuda_worse(res, "out", r->out, r->out0, sz[0], floor);
        cuda_worse(res, "saved", r->saved, r->saved0, sz[1], floor);
        for (int t = 0; t < r->nt; t++)
            cuda_worse(res, r->name[t], r->g[t], r->ga[t], r->cnt[t], floor);
    }
    for (int t = 0; t < r->nt; t++) {
        cudaFree(dx[t]);
        cudaFree(dg[t]);
    }
    for (int i = 0; i < 4; i++)
        cudaFree(db[i]);
    if (st) cudaStreamDestroy(st);
}
#endif

/* The kind, its inputs and its shape into r; errors name the kind. */
static np_status rig_shape(rig *r, const char *kind, const np_layer_hp *hp, int n_in,
                           const int *widths, np_error *err) {
    if (!kind || !(r->def = np_layer_find(kind)))
        return np_err(err, NP_STATUS_BAD_INPUT, "unknown layer kind '%s'", kind ? kind : "");
    const np_layer_def *d = r->def;
    if (n_in < d->min_in || n_in > d->max_in || !widths)
        return np_err(err, NP_STATUS_BAD_INPUT, "%s takes %d to %d inputs, not %d", kind, d->min_in,
                      d->max_in, n_in);
    if (hp) r->hp = *hp;
    r->s.n_in = n_in;
    for (int k = 0; k < n_in; k++) {
        if (widths[k] < 1)
            return np_err(err, NP_STATUS_BAD_INPUT, "%s: input %d has width %d; widths are >= 1",
                          kind, k, widths[k]);
        r->s.in[k] = widths[k];
    }
    np_error e = {{0}};
    np_status st = d->shape(&r->hp, &r->s, &e);
    if (st)
        return np_err(err, st < 0 && st >= NP_STATUS_UNSUPPORTED ? st : NP_STATUS_BAD_INPUT,
                      "%s: %s", kind,
                      e.msg[0] ? e.msg : "its shape function said no, without a reason");
    int changed = r->s.n_in != n_in;
    for (int k = 0; k < n_in; k++)
        changed |= r->s.in[k] != widths[k];
    if (changed)
        return np_err(err, NP_STATUS_BAD_INPUT, "%s: the shape function changed its input widths",
                      kind);
    if (r->s.out < 1 || r->s.saved < 0 || r->s.scratch < 0 || r->s.n_params < 0 ||
        r->s.n_params > NP_LAYER_MAX_PARAMS)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s: the shape function gave out %d, saved %d, scratch %d, %d parameter "
                      "tensors (out >= 1, saved and scratch >= 0, tensors 0..%d)",
                      kind, r->s.out, r->s.saved, r->s.scratch, r->s.n_params, NP_LAYER_MAX_PARAMS);
    for (int p = 0; p < r->s.n_params; p++) {
        const np_param_shape *ps = &r->s.param[p];
        if ((ps->ndim != 1 && ps->ndim != 2) || ps->dims[0] < 0 ||
            (ps->ndim == 2 && ps->dims[1] < 0))
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "%s: parameter %d (%.16s) has %d dimensions of (%lld, %lld)", kind, p,
                          ps->name, ps->ndim, (long long)ps->dims[0], (long long)ps->dims[1]);
    }
    return NP_OK;
}

/* Every buffer of the rig, by r->cnt and r->s. */
static np_status rig_buffers(rig *r, np_error *err) {
    size_t n = (size_t)r->n, nout = n * (size_t)r->s.out;
    for (int t = 0; t < r->nt; t++)
        if (!(r->x0[t] = rig_alloc(r, r->cnt[t], "gradient check tensor", err)) ||
            !(r->x[t] = rig_alloc(r, r->cnt[t], "gradient check tensor", err)) ||
            !(r->g[t] = rig_alloc(r, r->cnt[t], "gradient check gradient", err)) ||
            !(r->ga[t] = rig_alloc(r, r->cnt[t], "gradient check gradient", err)))
            return NP_STATUS_NO_MEMORY;
    if (!(r->R = rig_alloc(r, nout, "gradient check R", err)) ||
        !(r->out = rig_alloc(r, nout, "gradient check out", err)) ||
        !(r->out0 = rig_alloc(r, nout, "gradient check out", err)) ||
        !(r->dout = rig_alloc(r, nout, "gradient check dout", err)))
        return NP_STATUS_NO_MEMORY;
    if (r->s.saved && (!(r->saved = rig_alloc(r, n * (size_t)r->s.saved, "saved", err)) ||
                       !(r->saved0 = rig_alloc(r, n * (size_t)r->s.saved, "saved", err))))
        return NP_STATUS_NO_MEMORY;
    if (r->s.scratch && !(r->scratch = rig_alloc(r, n * (size_t)r->s.scratch, "scratch", err)))
        return NP_STATUS_NO_MEMORY;
    return NP_OK;
}

np_status np_layer_gradcheck(const char *kind, const np_layer_hp *hp, int n_in, const int *widths,
                             const np_gradcheck_opts *opts, np_gradcheck_result *out,
                             np_error *err) {
    np_gradcheck_opts o = opts ? *opts : (np_gradcheck_opts){0};
    if (o.rows < 0 || o.rows > GC_MAX_ROWS || !(o.tol >= 0) || !(o.floor >= 0))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "gradient check of %s: rows %ld (1..%ld), tol %g, floor %g (> 0; 0 for "
                      "the defaults)",
                      kind ? kind : "", o.rows, GC_MAX_ROWS, o.tol, o.floor);
    if (!o.rows) o.rows = 4;
    if (o.tol == 0) o.tol = 1e-2;
    if (o.floor == 0) o.floor = 1e-2;
    if (!o.seed) o.seed = 1;
    if (!out)
        return np_err(err, NP_STATUS_BAD_INPUT, "gradient check of %s: no result",
                      kind ? kind : "");
    memset(out, 0, sizeof *out);
    rig r;
    memset(&r, 0, sizeof r);
    r.n = o.rows;
    np_status st = rig_shape(&r, kind, hp, n_in, widths, err);
    if (st) return st;
    out->shape = r.s;
    size_t n = (size_t)r.n;
    r.nt = n_in + r.s.n_params;
    for (int t = 0; t < r.nt; t++) {
        r.cnt[t] = t < n_in ? n * (size_t)widths[t] : np_param_count(&r.s.param[t - n_in]);
        if (t < n_in)
            snprintf(r.name[t], sizeof r.name[t], "in%d", t);
        else
            snprintf(r.name[t], sizeof r.name[t], "%.15s", r.s.param[t - n_in].name);
    }
    if ((st = rig_buffers(&r, err))) {
        rig_free(&r);
        return st;
    }
    /* inputs U(-1, 1); parameters from the kind's own init; R U(-1, 1): all counter-based */
    for (int t = 0; t < r.nt; t++)
        for (size_t e = 0; e < r.cnt[t]; e++)
            r.x0[t][e] = t < n_in ? np_init_uniform(o.seed, GC_STREAM_IN + (uint64_t)t, e, -1, 1)
                                  : r.def->init(&r.hp, &r.s, t - n_in, o.seed,
                                                NP_STREAM_PARAM + (uint64_t)(t - n_in), e);
    for (size_t e = 0; e < n * (size_t)r.s.out; e++)
        r.R[e] = np_init_uniform(o.seed, GC_STREAM_R, e, -1, 1);

    contract(&r, out);
    double L0 = loss_at(&r, -1, 0, 0);
    out->n = r.nt;
    for (int t = 0; t < r.nt; t++) {
        np_gradcheck_tensor *gt = &out->t[t];
        snprintf(gt->name, sizeof gt->name, "%s", r.name[t]);
        gt->count = (long)r.cnt[t];
        gt->worst = -1;
        for (size_t e = 0; e < r.cnt[t]; e++) {
            double a = r.ga[t][e], num = numeric(&r, t, e, L0, a, o.tol, o.floor);
            double er = fabs(a - num) / fmax(fabs(num), o.floor);
            if (isnan(er)) er = INFINITY;
            if (er > gt->worst) {
                gt->worst = er;
                gt->worst_at = (long)e;
                gt->analytic = a;
                gt->numeric = num;
            }
        }
        if (gt->worst < 0) gt->worst = 0;
        if (gt->worst > out->worst) out->worst = gt->worst;
    }

#ifdef NP_HAVE_CUDA
    if (o.no_cuda)
        snprintf(out->cuda_skipped, sizeof out->cuda_skipped, "no_cuda set");
    else if (!r.def->cuda_fwd || !r.def->cuda_bwd)
        snprintf(out->cuda_skipped, sizeof out->cuda_skipped, "the kind has no CUDA slots");
    else if (np_cuda_devices() <= 0)
        snprintf(out->cuda_skipped, sizeof out->cuda_skipped, "no CUDA device");
    else
        cuda_check(&r, out, o.floor);
#else
    snprintf(out->cuda_skipped, sizeof out->cuda_skipped, "not the CUDA flavour");
#endif
    out->passed = out->worst <= o.tol && !out->contract[0] &&
                  (!out->cuda_checked || out->cuda_worst <= o.tol);
    rig_free(&r);
    return NP_OK;
}
