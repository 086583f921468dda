/* DLRM dot interaction: the bottom output followed by the strict lower triangle of pairwise
 * dot products of the T1 feature vectors of each sample. Not here: the pooling (embbag.c). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "codelets/kernels/kernels.h"
#include "codelets/layers/layers.h"

/* The dots of one sample. Row i's dots with rows j < i are computed together, vector over j,
 * from the transposed rows FT (d, T1): acc[j] = ((0 + f_i0 f_j0) + f_i1 f_j1) + ... in k order,
 * exactly the sum a scalar dot loop forms, so vectorizing over j changes no bit. */
static void sample_dots(const float *f, int T1, int d, float *ft, float *acc, float *o) {
    /* f (T1, d) -> ft (d, T1) */
    for (int j = 0; j < T1; j++)
        for (int k = 0; k < d; k++)
            ft[(size_t)k * T1 + j] = f[(size_t)j * d + k];
    size_t p = 0;
    for (int i = 1; i < T1; i++) {
        const float *fi = f + (size_t)i * (size_t)d; /* (d) */
        for (int j = 0; j < i; j++)
            acc[j] = 0.0f;
        for (int k = 0; k < d; k++) {
            const float fik = fi[k], *col = ft + (size_t)k * T1; /* (T1) */
            for (int j = 0; j < i; j++)
                acc[j] += fik * col[j];
        }
        memcpy(o + p, acc, (size_t)i * sizeof *acc);
        p += (size_t)i;
    }
}

/* ---- blocked kernels: NP_DOT_LANES samples at a time, each feature of the block stored
 * lane-contiguous (T1, d, LANES), so every multiply-add runs across samples in one vector
 * register. Each lane does exactly the scalar operations of its sample in the scalar order
 * (dots: (0 + f_i0 f_j0) + f_i1 f_j1 + ... over k; gradients: pairs in output order), so
 * the bits equal the per-sample kernels'. The widest vector unit the CPU has is picked at
 * run time (lanes_isa); -ffp-contract=off keeps multiply and add separate on every one. */
#define NP_DOT_LANES 16

/* ---- lane transposes between NP_DOT_LANES per-sample rows and the lane-contiguous layout:
 * to_lanes: dst[e * LANES + l] = src[l][e]; from_lanes: dst[l][e] = src[e * LANES + l], for
 * e < n. Pure moves, so the bits never depend on the path. On x86-64 with AVX2 they run as
 * 8 x 8 register transposes (the scalar loops touched one float at a time: a third of the
 * blocked kernels' time); elsewhere, and for the last n % 8 elements, the plain loops. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define NP_LANES_X86 1

__attribute__((target("avx2"))) static inline void tr8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

__attribute__((target("avx2"))) static size_t to_lanes_avx2(const float *const *src, size_t n,
                                                            float *dst) {
    size_t e = 0;
    for (; e + 8 <= n; e += 8)
        for (int h = 0; h < NP_DOT_LANES; h += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_loadu_ps(src[h + i] + e);
            tr8(r);
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(dst + (e + (size_t)i) * NP_DOT_LANES + h, r[i]);
        }
    return e;
}

__attribute__((target("avx2"))) static size_t from_lanes_avx2(const float *src, size_t n,
                                                              float *const *dst) {
    size_t e = 0;
    for (; e + 8 <= n; e += 8)
        for (int h = 0; h < NP_DOT_LANES; h += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_loadu_ps(src + (e + (size_t)i) * NP_DOT_LANES + h);
            tr8(r);
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(dst[h + i] + e, r[i]);
        }
    return e;
}

/* The widest lane kernels this CPU runs: 2 AVX-512, 1 AVX2, 0 neither. NP_LANES=v4, avx2 or
 * avx512 lowers it (never past the CPU), so that tests run every width on one machine. */
static int lanes_isa(void) {
    static int v = -1;
    if (v < 0) {
        int cpu = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
        const char *f = getenv("NP_LANES");
        int want = !f ? 2 : !strcmp(f, "v4") ? 0 : !strcmp(f, "avx2") ? 1 : 2;
        v = want < cpu ? want : cpu;
    }
    return v;
}
#endif

static void to_lanes(const float *const *src, size_t n, float *dst) {
    size_t e0 = 0;
#ifdef NP_LANES_X86
    if (lanes_isa() >= 1) e0 = to_lanes_avx2(src, n, dst);
#endif
    for (int l = 0; l < NP_DOT_LANES; l++)
        for (size_t e = e0; e < n; e++)
            dst[e * NP_DOT_LANES + (size_t)l] = src[l][e];
}

static void from_lanes(const float *src, size_t n, float *const *dst) {
    size_t e0 = 0;
#ifdef NP_LANES_X86
    if (lanes_isa() >= 1) e0 = from_lanes_avx2(src, n, dst);
#endif
    for (int l = 0; l < NP_DOT_LANES; l++)
        for (size_t e = e0; e < n; e++)
            dst[l][e] = src[e * NP_DOT_LANES + (size_t)l];
}

size_t np_interact_ws_floats(int T1, int d) {
    size_t P = (size_t)T1 * (size_t)(T1 - 1) / 2, fsz = (size_t)T1 * (size_t)d;
    return (size_t)NP_DOT_LANES * (2 * fsz + P + (size_t)d + 1);
}

/* Where the T1 vectors of each sample live: n parts, part k holding w[k] floats of sample s
 * at base[k] + s w[k], one after another. F itself is one part of T1 d floats; the layer
 * reads its inputs in place (no copy into F). In dF parts a NULL base is a gradient no one
 * wants. */
typedef struct dot_parts {
    int n;
    const float *base[NP_LAYER_MAX_IN];
    size_t w[NP_LAYER_MAX_IN];
} dot_parts;
typedef struct dot_dparts {
    int n;
    float *base[NP_LAYER_MAX_IN];
    size_t w[NP_LAYER_MAX_IN];
} dot_dparts;

/* ft (T1*d, LANES) <- samples s0 .. s0+nb-1; lanes past nb are zero */
static void block_in(const dot_parts *F, long s0, int nb, size_t fsz, float *ft) {
    if (nb == NP_DOT_LANES) { /* a whole block: every element is written */
        size_t e0 = 0;
        for (int k = 0; k < F->n; k++) {
            const float *src[NP_DOT_LANES];
            for (int l = 0; l < NP_DOT_LANES; l++)
                src[l] = F->base[k] + (size_t)(s0 + l) * F->w[k];
            to_lanes(src, F->w[k], ft + e0 * NP_DOT_LANES);
            e0 += F->w[k];
        }
        return;
    }
    memset(ft, 0, fsz * NP_DOT_LANES * sizeof *ft);
    for (int l = 0; l < nb; l++) {
        size_t e0 = 0;
        for (int k = 0; k < F->n; k++) {
            const float *f = F->base[k] + (size_t)(s0 + l) * F->w[k];
            for (size_t e = 0; e < F->w[k]; e++)
                ft[(e0 + e) * NP_DOT_LANES + l] = f[e];
            e0 += F->w[k];
        }
    }
}

/* samples s0 .. s0+nb-1 of dF <- dft (T1*d, LANES) */
static void block_out(const float *dft, long s0, int nb, const dot_dparts *dF) {
    if (nb == NP_DOT_LANES) {
        size_t e0 = 0;
        for (int k = 0; k < dF->n; k++) {
            if (dF->base[k]) {
                float *dst[NP_DOT_LANES];
                for (int l = 0; l < NP_DOT_LANES; l++)
                    dst[l] = dF->base[k] + (size_t)(s0 + l) * dF->w[k];
                from_lanes(dft + e0 * NP_DOT_LANES, dF->w[k], dst);
            }
            e0 += dF->w[k];
        }
        return;
    }
    for (int l = 0; l < nb; l++) {
        size_t e0 = 0;
        for (int k = 0; k < dF->n; k++) {
            float *df = dF->base[k] ? dF->base[k] + (size_t)(s0 + l) * dF->w[k] : NULL;
            for (size_t e = 0; df && e < dF->w[k]; e++)
                df[e] = dft[(e0 + e) * NP_DOT_LANES + l];
            e0 += dF->w[k];
        }
    }
}

/* The blocked kernels themselves, once per vector width: NP_LW floats a register (16 with
 * AVX-512, 8 with AVX2, 4 otherwise), NP_DOT_LANES / NP_LW registers per lane set
 * (interact_lanes.h). */
#define NP_LW 4
#define NP_LSFX _v4
#define NP_LTGT
#include "codelets/layers/dot_lanes.h"
#ifdef NP_LANES_X86
#define NP_LW 8
#define NP_LSFX _avx2
#define NP_LTGT __attribute__((target("avx2")))
#include "codelets/layers/dot_lanes.h"
#define NP_LW 16
#define NP_LSFX _avx512
#define NP_LTGT __attribute__((target("avx512f")))
#include "codelets/layers/dot_lanes.h"
#endif

static void dots_block(const float *ft, int T1, int d, float *acc) {
#ifdef NP_LANES_X86
    if (lanes_isa() == 2) {
        dots_block_avx512(ft, T1, d, acc);
        return;
    }
    if (lanes_isa() == 1) {
        dots_block_avx2(ft, T1, d, acc);
        return;
    }
#endif
    dots_block_v4(ft, T1, d, acc);
}

static void grads_block(const float *ft, const float *gt, int T1, int d, float *dft) {
#ifdef NP_LANES_X86
    if (lanes_isa() == 2) {
        grads_block_avx512(ft, gt, T1, d, dft);
        return;
    }
    if (lanes_isa() == 1) {
        grads_block_avx2(ft, gt, T1, d, dft);
        return;
    }
#endif
    grads_block_v4(ft, gt, T1, d, dft);
}

/* Blocked forward, ws of np_interact_ws_floats(T1, d) floats. */
static void interact_fwd_blocked(const dot_parts *F, long B, int T1, int d, float *out,
                                 float *ws) {
    size_t width = (size_t)d + (size_t)T1 * (size_t)(T1 - 1) / 2, fsz = (size_t)T1 * d;
    size_t P = width - (size_t)d;
    float *ft = ws, *acc = ws + fsz * NP_DOT_LANES;
    for (long s0 = 0; s0 < B; s0 += NP_DOT_LANES) {
        int nb = B - s0 < NP_DOT_LANES ? (int)(B - s0) : NP_DOT_LANES;
        block_in(F, s0, nb, fsz, ft);
        dots_block(ft, T1, d, acc);
        float *dst[NP_DOT_LANES];
        for (int l = 0; l < nb; l++) {
            float *o = out + (size_t)(s0 + l) * width;
            memcpy(o, F->base[0] + (size_t)(s0 + l) * F->w[0], (size_t)d * sizeof *o);
            dst[l] = o + d;
        }
        if (nb == NP_DOT_LANES) {
            from_lanes(acc, P, dst);
            continue;
        }
        for (int l = 0; l < nb; l++)
            for (size_t p = 0; p < P; p++)
                dst[l][p] = acc[p * NP_DOT_LANES + l];
    }
}

/* Blocked backward, ws of np_interact_ws_floats(T1, d) floats. */
static void interact_bwd_blocked(const dot_parts *F, const float *dout, long B, int T1, int d,
                                 const dot_dparts *dF, float *ws) {
    size_t width = (size_t)d + (size_t)T1 * (size_t)(T1 - 1) / 2, fsz = (size_t)T1 * d;
    size_t P = width - (size_t)d;
    float *ft = ws, *dft = ws + fsz * NP_DOT_LANES, *gt = dft + fsz * NP_DOT_LANES;
    for (long s0 = 0; s0 < B; s0 += NP_DOT_LANES) {
        int nb = B - s0 < NP_DOT_LANES ? (int)(B - s0) : NP_DOT_LANES;
        block_in(F, s0, nb, fsz, ft);
        if (nb == NP_DOT_LANES) { /* F[s,0] passes straight through; the pairs' gradients */
            const float *src[NP_DOT_LANES], *srcp[NP_DOT_LANES];
            for (int l = 0; l < NP_DOT_LANES; l++) {
                src[l] = dout + (size_t)(s0 + l) * width;
                srcp[l] = src[l] + d;
            }
            to_lanes(src, (size_t)d, dft);
            memset(dft + (size_t)d * NP_DOT_LANES, 0, (fsz - (size_t)d) * NP_DOT_LANES * sizeof *dft);
            to_lanes(srcp, P, gt);
            grads_block(ft, gt, T1, d, dft);
            block_out(dft, s0, nb, dF);
            continue;
        }
        memset(dft, 0, fsz * NP_DOT_LANES * sizeof *dft);
        memset(gt, 0, P * NP_DOT_LANES * sizeof *gt);
        for (int l = 0; l < nb; l++) {
            const float *g = dout + (size_t)(s0 + l) * width;
            for (int k = 0; k < d; k++) /* F[s,0] passes straight through */
                dft[(size_t)k * NP_DOT_LANES + l] = g[k];
            for (size_t p = 0; p < P; p++)
                gt[p * NP_DOT_LANES + l] = g[d + p];
        }
        grads_block(ft, gt, T1, d, dft);
        block_out(dft, s0, nb, dF);
    }
}

void np_interact_fwd_blk(const float *F, long B, int T1, int d, float *out, float *ws) {
    dot_parts f = {.n = 1, .base = {F}, .w = {(size_t)T1 * (size_t)d}};
    interact_fwd_blocked(&f, B, T1, d, out, ws);
}

void np_interact_bwd_blk(const float *F, const float *dout, long B, int T1, int d, float *dF,
                         float *ws) {
    dot_parts f = {.n = 1, .base = {F}, .w = {(size_t)T1 * (size_t)d}};
    dot_dparts df = {.n = 1, .base = {dF}, .w = {(size_t)T1 * (size_t)d}};
    interact_bwd_blocked(&f, dout, B, T1, d, &df, ws);
}

void np_interact_fwd(const float *F, long B, int T1, int d, float *out) {
    np_interact_fwd_ws(F, B, T1, d, out, NULL);
}

void np_interact_fwd_ws(const float *F,                                /* (B, T1, d) */
                        long B, int T1, int d, float *out, float *ws) { /* (B, width) */
    size_t width = (size_t)d + (size_t)T1 * (size_t)(T1 - 1) / 2;
    /* per-call scratch: the transposed sample (d, T1) and one row of dots (T1) */
    float stack_ft[4096], stack_acc[256];
    float *ft = ws ? ws : stack_ft, *acc = ws ? ws + (size_t)T1 * (size_t)d : stack_acc;
    float *heap = NULL;
    if (!ws && ((size_t)T1 * (size_t)d > 4096 || T1 > 256)) {
        heap = malloc(((size_t)T1 * (size_t)d + (size_t)T1) * sizeof *heap);
        if (!heap) { /* no scratch: fall back to plain dots, same arithmetic */
            for (long s = 0; s < B; s++) {
                const float *f = F + (size_t)s * (size_t)T1 * (size_t)d;
                float *o = out + (size_t)s * width;
                memcpy(o, f, (size_t)d * sizeof *o);
                size_t p = (size_t)d;
                for (int i = 1; i < T1; i++)
                    for (int j = 0; j < i; j++) {
                        float a = 0.0f;
                        for (int k = 0; k < d; k++)
                            a += f[(size_t)i * d + k] * f[(size_t)j * d + k];
                        o[p++] = a;
                    }
            }
            return;
        }
        ft = heap;
        acc = heap + (size_t)T1 * (size_t)d;
    }
    for (long s = 0; s < B; s++) {
        const float *f = F + (size_t)s * (size_t)T1 * (size_t)d; /* (T1, d) */
        float *o = out + (size_t)s * width;                      /* (width) */
        memcpy(o, f, (size_t)d * sizeof *o);
        sample_dots(f, T1, d, ft, acc, o + d);
    }
    free(heap);
}

void np_interact_bwd(const float *F,                     /* (B, T1, d) */
                     const float *dout,                  /* (B, d + T1*(T1-1)/2) */
                     long B, int T1, int d, float *dF) { /* (B, T1, d) */
    size_t width = (size_t)d + (size_t)T1 * (size_t)(T1 - 1) / 2;
    size_t fsz = (size_t)T1 * (size_t)d;
    for (long s = 0; s < B; s++) {
        const float *f = F + (size_t)s * fsz;      /* (T1, d) */
        const float *g = dout + (size_t)s * width; /* (width) */
        float *df = dF + (size_t)s * fsz;          /* (T1, d) */
        /* F[s,0] also passes straight through to the output, so its gradient starts there. */
        memcpy(df, g, (size_t)d * sizeof *df);
        memset(df + d, 0, (fsz - (size_t)d) * sizeof *df);
        /* Pairs in output order: each dF row sums its contributions in a fixed order. */
        size_t p = (size_t)d;
        for (int i = 1; i < T1; i++) {
            const float *fi = f + (size_t)i * (size_t)d; /* (d) */
            float *dfi = df + (size_t)i * (size_t)d;     /* (d) */
            for (int j = 0; j < i; j++) {
                float gp = g[p++];
                const float *fj = f + (size_t)j * (size_t)d; /* (d) */
                float *dfj = df + (size_t)j * (size_t)d;     /* (d) */
                for (int k = 0; k < d; k++) {
                    dfi[k] += gp * fj[k];
                    dfj[k] += gp * fi[k];
                }
            }
        }
    }
}

/* ---- the "dot" layer: its inputs, concatenated, are T1 vectors of d = width of input 0
 * per sample (DLRM: the bottom output, then the pooled tables). The blocked kernels read
 * them in place and write the input gradients in place (no F or dF copy); a call on fewer
 * rows than a block builds F and dF in scratch for the per-sample kernels (the same bits). */

static np_status dot_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp;
    int d = s->in[0];
    int64_t total = 0;
    for (int k = 0; k < s->n_in; k++) {
        if (s->in[k] % d)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "input %d has width %d, not a multiple of input 0's width %d", k,
                          s->in[k], d);
        total += s->in[k];
    }
    if (total > INT_MAX)
        return np_err(err, NP_STATUS_BAD_INPUT, "%lld input floats per sample; too many",
                      (long long)total);
    int64_t T1 = total / d, out = d + T1 * (T1 - 1) / 2;
    /* per sample: F and dF (n, total) each, for calls on fewer rows than a block, then the
     * work space; n >= LANES samples bring room for n / LANES blocks' worth of it, and the
     * blocked kernels use it alone */
    int64_t scratch = 2 * total + (int64_t)(np_interact_ws_floats((int)T1, d) / NP_DOT_LANES);
    if (out > INT_MAX || scratch > INT_MAX)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%lld vectors of %d make %lld outputs per sample; too many",
                      (long long)T1, d, (long long)out);
    s->out = (int)out;
    s->saved = 0;
    s->scratch = (int)scratch;
    return NP_OK;
}

/* The inputs as parts of F, and their gradients as parts of dF. */
static dot_parts dot_in(const np_layer_io *io) {
    dot_parts f = {.n = io->shape->n_in};
    for (int k = 0; k < f.n; k++) {
        f.base[k] = io->in[k];
        f.w[k] = (size_t)io->shape->in[k];
    }
    return f;
}

/* F (n, total) built from the inputs, for the per-sample kernels. */
static void gather_F(const np_layer_io *io, float *F) {
    const np_layer_shape *s = io->shape;
    for (long r = 0; r < io->n; r++)
        for (int k = 0; k < s->n_in; k++) {
            memcpy(F, io->in[k] + (size_t)r * (size_t)s->in[k], (size_t)s->in[k] * sizeof *F);
            F += s->in[k];
        }
}

static size_t dot_total(const np_layer_shape *s) {
    size_t total = 0;
    for (int k = 0; k < s->n_in; k++)
        total += (size_t)s->in[k];
    return total;
}

static void dot_layer_fwd(const np_layer_io *io) {
    const np_layer_shape *s = io->shape;
    size_t fsz = dot_total(s), n = (size_t)io->n;
    int d = s->in[0], T1 = (int)(fsz / (size_t)d);
    if (io->n >= NP_DOT_LANES) {
        dot_parts f = dot_in(io);
        interact_fwd_blocked(&f, io->n, T1, d, io->out, io->scratch);
    } else {
        gather_F(io, io->scratch);
        np_interact_fwd_ws(io->scratch, io->n, T1, d, io->out, io->scratch + n * fsz);
    }
}

static void dot_layer_bwd(const np_layer_io *io) {
    const np_layer_shape *s = io->shape;
    size_t fsz = dot_total(s), n = (size_t)io->n;
    int d = s->in[0], T1 = (int)(fsz / (size_t)d);
    dot_dparts df = {.n = s->n_in};
    for (int k = 0; k < s->n_in; k++) {
        df.base[k] = io->din[k];
        df.w[k] = (size_t)s->in[k];
    }
    if (io->n >= NP_DOT_LANES) {
        dot_parts f = dot_in(io);
        interact_bwd_blocked(&f, io->dout, io->n, T1, d, &df, io->scratch);
        return;
    }
    float *F = io->scratch, *dF = io->scratch + n * fsz;
    gather_F(io, F);
    np_interact_bwd(F, io->dout, io->n, T1, d, dF);
    for (size_t r = 0; r < n; r++) {
        const float *g = dF + r * fsz;
        for (int k = 0; k < s->n_in; k++) {
            if (io->din[k])
                memcpy(io->din[k] + r * (size_t)s->in[k], g, (size_t)s->in[k] * sizeof *g);
            g += s->in[k];
        }
    }
}

static double dot_flops(const np_layer_hp *hp, const np_layer_shape *s, long n, int bwd) {
    (void)hp;
    double pairs = (double)(s->out - s->in[0]);
    return (bwd ? 4.0 : 2.0) * (double)n * pairs * s->in[0];
}

const np_layer_def np_layer_dot = {.kind = "dot",
                                   .min_in = 1,
                                   .max_in = NP_LAYER_MAX_IN,
                                   .shape = dot_shape,
                                   .fwd = dot_layer_fwd,
                                   .bwd = dot_layer_bwd,
                                   .flops = dot_flops,
                                   .help = "DLRM dot interaction: input 0, then the pairwise dots of the d-wide vectors",
#ifdef NP_HAVE_CUDA
                                   .cuda_fwd = np_cuda_dot_fwd,
                                   .cuda_bwd = np_cuda_dot_bwd,
#endif
                                   };
