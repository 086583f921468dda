/* The per-element arithmetic of the CUDA kernels (codelets/cuda/ops.cu, codelets/layers/<kind>.cu),
 * written once as inline functions that compile as CUDA (__host__ __device__) and as plain C, so
 * tests/test_cuda_host.c runs the very same code on the host against the CPU twins. Each function
 * computes the output element(s) one GPU thread owns, given that thread's flat index e; the kernels
 * only add the grid-stride loop. Sums run in the CPU twins' order and multiply/add are never fused
 * (np_fmul/np_fadd: __fmul_rn/__fadd_rn on the device, plain operators in C built with
 * -ffp-contract=off), so wherever the CPU twin's order is reproduced the bits are the same. Not
 * here: launches, streams, cuBLAS (codelets/cuda/ops.cu, codelets/layers/<kind>.cu), the GEMM
 * argument plans (codelets/cuda/plan.h). */
#ifndef NP_CUDA_ELEM_H
#define NP_CUDA_ELEM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "nestpipe/layer.h" /* NP_LAYER_MAX_IN */

#ifdef __CUDACC__
#define NP_HD __host__ __device__
#else
#define NP_HD
#endif

/* ---- unfused float and double arithmetic: name(a, b) = a op b rounded to nearest, never
 * fused into a neighbour (the _rn intrinsic on the device, the operator in C) */
#ifdef __CUDA_ARCH__
#define NP_RN_OP(name, type, op, rn)                                                               \
    static inline NP_HD type name(type a, type b) { return rn(a, b); }
#else
#define NP_RN_OP(name, type, op, rn)                                                               \
    static inline NP_HD type name(type a, type b) { return a op b; }
#endif
NP_RN_OP(np_fmul, float, *, __fmul_rn)
NP_RN_OP(np_fadd, float, +, __fadd_rn)
NP_RN_OP(np_fsub, float, -, __fsub_rn)
NP_RN_OP(np_dmul, double, *, __dmul_rn)
NP_RN_OP(np_dadd, double, +, __dadd_rn)
NP_RN_OP(np_dsub, double, -, __dsub_rn)
#undef NP_RN_OP

/* ---- embedding-bag pooling (codelets/kernels/embbag.c pool_fwd_cpu / pool_bwd_cpu)
 * off (T, nb+1) table-major, the chunk's samples start at row0; pos (nnz) is each key's
 * row of rows / g, both (U, d). */

/* Slots of table 0 (runtime/core/shard.h np_slot_first): L with a sequence (L > 1), else 1. */
static inline NP_HD int np_elem_seq_slots(int L) {
    return L > 1 ? L : 1;
}

/* Thread e in [0, n*S*d) writes P[e], P (n, S, d), S = T - 1 + table 0's slots: the bag's
 * keys summed in key order from 0, as np_embbag_fwd does; a negative pos is skipped, as
 * np_embbag_fwd_skip does. With a sequence (L > 0), table 0's slot p holds its key p alone
 * (0 + the row), as np_embseq_fwd. */
static inline NP_HD void np_elem_pool_fwd(const float *rows, const uint32_t *off,
                                          const int64_t *pos, long nb, long row0, int T, int L,
                                          int d, float *P, size_t e) {
    size_t L0 = (size_t)np_elem_seq_slots(L), S = (size_t)T - 1 + L0;
    size_t j = e % (size_t)d, st = e / (size_t)d;
    size_t slot = st % S, s = st / S;
    size_t t = slot < L0 ? 0 : slot - L0 + 1;
    const uint32_t *o = off + t * (size_t)(nb + 1) + (size_t)row0 + s;
    uint32_t k0 = o[0], k1 = o[1];
    if (t == 0 && L > 0) { /* one position */
        k0 += (uint32_t)slot;
        k1 = k0 < k1 ? k0 + 1 : k0;
    }
    float acc = 0.0f;
    for (uint32_t k = k0; k < k1; k++)
        if (pos[k] >= 0) acc = np_fadd(acc, rows[(size_t)pos[k] * (size_t)d + j]);
    P[e] = acc;
}

/* Thread e in [0, T*d) (table t = e / d, column j = e % d) ACCUMULATES column j of the
 * rows table t's keys hit, from dP's slot of the table (of the key's position in a
 * sequence), sample then key order: np_embbag_bwd's (np_embseq_bwd's) order for every element,
 * because the rows of different tables are distinct in a window's Rin, so no two threads
 * ever touch the same element. */
static inline NP_HD void np_elem_pool_bwd(const float *dP, const uint32_t *off, const int64_t *pos,
                                          long nb, long row0, long n, int T, int L, int d,
                                          float *g, size_t e) {
    size_t L0 = (size_t)np_elem_seq_slots(L), S = (size_t)T - 1 + L0;
    size_t j = e % (size_t)d, t = e / (size_t)d;
    int seq = t == 0 && L > 0;
    size_t slot = t == 0 ? 0 : t + L0 - 1;
    const uint32_t *o = off + t * (size_t)(nb + 1) + (size_t)row0;
    for (long s = 0; s < n; s++) {
        const float *ds = dP + (size_t)s * S * (size_t)d + j;
        for (uint32_t k = o[s]; k < o[s + 1]; k++) {
            if (seq && k - o[s] >= (uint32_t)L) break; /* past the sequence: not read */
            if (pos[k] < 0) continue; /* a pooled bag's key: its first one takes the gradient */
            float gs = ds[(seq ? (size_t)(k - o[s]) : slot) * (size_t)d];
            float *r = g + (size_t)pos[k] * (size_t)d + j;
            *r = np_fadd(*r, gs);
        }
    }
}

/* ---- sigmoid + BCE on logits (codelets/kernels/bce.c), in double */
static inline NP_HD double np_elem_sigmoid(double z) {
    if (z >= 0.0) return 1.0 / np_dadd(1.0, exp(-z));
    double e = exp(z);
    return e / np_dadd(1.0, e);
}
/* The stable loss term max(z,0) - z*y + log1p(exp(-|z|)) of one sample. */
static inline NP_HD double np_elem_bce(float z, float y) {
    double zs = z, ys = y;
    return np_dadd(np_dsub(fmax(zs, 0.0), np_dmul(zs, ys)), log1p(exp(-fabs(zs))));
}
/* dz = (sigmoid(z) - y) * scale in double, rounded once. */
static inline NP_HD float np_elem_bce_grad(float z, float y, float scale) {
    return (float)np_dmul(np_dsub(np_elem_sigmoid((double)z), (double)y), (double)scale);
}

/* ---- fixed-order sum (codelets/kernels/reduce.c): out[e] = in[0][e] + in[1][e] + ... */
#define NP_SUM_MAX_IN 64
typedef struct np_sum_in {
    const float *p[NP_SUM_MAX_IN];
} np_sum_in;
static inline NP_HD float np_elem_sum(const np_sum_in *in, int k, size_t e) {
    float acc = in->p[0][e];
    for (int i = 1; i < k; i++)
        acc = np_fadd(acc, in->p[i][e]);
    return acc;
}

/* ---- dense SGD (codelets/kernels/optim.c): w -= lr*g; returns 1 when the new w is not finite
 * (x - x is 0 exactly for a finite x, the test np_all_finite makes) */
static inline NP_HD int np_elem_sgd(float *w, const float *g, float lr, size_t e) {
    float v = np_fsub(w[e], np_fmul(lr, g[e]));
    w[e] = v;
    return !(np_fsub(v, v) == 0.0f);
}

/* ---- linear epilogues and small elementwise ops */
/* y[e] = y[e] + b[e % out], then max(., 0) when relu: the bias after the product */
static inline NP_HD float np_elem_bias_act(float y, float b, int relu) {
    float v = np_fadd(y, b);
    return relu ? (v > 0.0f ? v : 0.0f) : v;
}
/* ReLU backward from the forward output (np_relu_bwd) */
static inline NP_HD float np_elem_relu_mask(float y, float d) {
    return y > 0.0f ? d : 0.0f;
}
/* Column j of dy (B, out) summed over the samples in order, from 0 (np_linear_bwd's db). */
static inline NP_HD float np_elem_colsum(const float *dy, long B, int out, size_t j) {
    float acc = 0.0f;
    for (long s = 0; s < B; s++)
        acc = np_fadd(acc, dy[(size_t)s * (size_t)out + j]);
    return acc;
}

/* ---- a node's inputs seen as one row per sample: part k is (n, w[k]) floats at base[k],
 * covering columns [c0[k], c0[k+1]) of the concatenated row. Gradient parts: dbase[k],
 * NULL when not wanted. Used by concat (columns) and dot (vectors of d columns). */
typedef struct np_parts {
    int n;
    const float *base[NP_LAYER_MAX_IN];
    float *dbase[NP_LAYER_MAX_IN];
    long w[NP_LAYER_MAX_IN];
    long c0[NP_LAYER_MAX_IN + 1];
} np_parts;

/* The part holding column c (0 <= c < c0[n]). */
static inline NP_HD int np_parts_find(const np_parts *P, long c) {
    int k = 0;
    while (k + 1 < P->n && c >= P->c0[k + 1])
        k++;
    return k;
}
/* Column c of sample s. */
static inline NP_HD const float *np_parts_at(const np_parts *P, long s, long c) {
    int k = np_parts_find(P, c);
    return P->base[k] + (size_t)s * (size_t)P->w[k] + (size_t)(c - P->c0[k]);
}

/* ---- concat: thread e in [0, n*width) owns column e % width of sample e / width */
static inline NP_HD void np_elem_concat_fwd(const np_parts *P, float *out, size_t e) {
    size_t width = (size_t)P->c0[P->n];
    out[e] = *np_parts_at(P, (long)(e / width), (long)(e % width));
}
static inline NP_HD void np_elem_concat_bwd(const np_parts *P, const float *dout, size_t e) {
    size_t width = (size_t)P->c0[P->n];
    long s = (long)(e / width), c = (long)(e % width);
    int k = np_parts_find(P, c);
    if (P->dbase[k]) P->dbase[k][(size_t)s * (size_t)P->w[k] + (size_t)(c - P->c0[k])] = dout[e];
}

/* ---- dot interaction (codelets/layers/dot.c): T1 vectors of d per sample, output width
 * d + T1(T1-1)/2: vector 0 then the pairs (i, j), j < i, row by row. */
static inline NP_HD long np_dot_pair_index(int i, int j) {
    return (long)i * (i - 1) / 2 + j;
}
/* The pair (i, j) of index p. */
static inline NP_HD void np_dot_pair(long p, int *i, int *j) {
    long a = (long)((1.0 + sqrt(1.0 + 8.0 * (double)p)) / 2.0);
    while (a > 1 && a * (a - 1) / 2 > p)
        a--;
    while ((a + 1) * a / 2 <= p)
        a++;
    *i = (int)a;
    *j = (int)(p - a * (a - 1) / 2);
}

/* Thread e in [0, n*width) writes out[e]: a copy of vector 0, or the dot of pair (i, j)
 * summed over k in order from 0 (the CPU kernels' order). */
static inline NP_HD void np_elem_dot_fwd(const np_parts *P, int T1, int d, float *out, size_t e) {
    size_t width = (size_t)d + (size_t)T1 * (size_t)(T1 - 1) / 2;
    long s = (long)(e / width), c = (long)(e % width);
    if (c < d) {
        out[e] = *np_parts_at(P, s, c);
        return;
    }
    int i, j;
    np_dot_pair(c - d, &i, &j);
    const float *fi = np_parts_at(P, s, (long)i * d), *fj = np_parts_at(P, s, (long)j * d);
    float acc = 0.0f;
    for (int k = 0; k < d; k++)
        acc = np_fadd(acc, np_fmul(fi[k], fj[k]));
    out[e] = acc;
}

/* Thread e in [0, n*T1*d) writes element k of vector v's gradient (when that part's is
 * wanted): its terms in output order, which is the pairs (v, 0..v-1) then (v+1.., v);
 * vector 0 starts from the pass-through gradient, the others from 0. */
static inline NP_HD void np_elem_dot_bwd(const np_parts *P, const float *dout, int T1, int d,
                                         size_t e) {
    size_t width = (size_t)d + (size_t)T1 * (size_t)(T1 - 1) / 2;
    size_t fsz = (size_t)T1 * (size_t)d;
    long s = (long)(e / fsz);
    int v = (int)(e % fsz / (size_t)d), k = (int)(e % (size_t)d);
    long c = (long)v * d + k;
    int part = np_parts_find(P, c);
    if (!P->dbase[part]) return;
    const float *g = dout + (size_t)s * width; /* (width) */
    float acc = v == 0 ? g[k] : 0.0f;
    for (int j = 0; j < v; j++)
        acc = np_fadd(acc,
                      np_fmul(g[d + np_dot_pair_index(v, j)], np_parts_at(P, s, (long)j * d)[k]));
    for (int i = v + 1; i < T1; i++)
        acc = np_fadd(acc,
                      np_fmul(g[d + np_dot_pair_index(i, v)], np_parts_at(P, s, (long)i * d)[k]));
    P->dbase[part][(size_t)s * (size_t)P->w[part] + (size_t)(c - P->c0[part])] = acc;
}

#endif
