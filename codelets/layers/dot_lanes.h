/* The blocked dot-interaction kernels for one vector width, included by interact.c once per
 * width with NP_LW (floats a register: 4, 8 or 16), NP_LSFX (the names' suffix) and NP_LTGT
 * (the functions' target attribute, or nothing) defined; it undefines them. A lane set is
 * the NP_DOT_LANES samples of a block, NP_LH = NP_DOT_LANES / NP_LW registers.
 * Each lane does exactly the scalar operations of its sample in the scalar order, with
 * GCC vector extension types: their + and * are the element-wise IEEE operations, with no
 * contraction (-ffp-contract=off), so every width gives the same bits. */
#define NP_LCAT2(a, b) a##b
#define NP_LCAT(a, b) NP_LCAT2(a, b)
#define NP_LN(name) NP_LCAT(name, NP_LSFX)
#define NP_LH (NP_DOT_LANES / NP_LW)
#define NP_LINL static inline __attribute__((always_inline)) NP_LTGT

typedef float NP_LN(vl) __attribute__((vector_size(NP_LW * sizeof(float))));

NP_LINL NP_LN(vl) NP_LN(vload)(const float *p) {
    NP_LN(vl) v;
    memcpy(&v, p, sizeof v);
    return v;
}

NP_LINL void NP_LN(vstore)(float *p, NP_LN(vl) v) {
    memcpy(p, &v, sizeof v);
}

/* The pairs (i, j0 .. j0+NJ-1) of lanes h NP_LW .. (h+1) NP_LW - 1, NJ = 4 or 1: x = row i
 * is loaded once for the NJ rows j, whose sums stay in registers. Each sum is
 * (0 + x_0 y_0) + x_1 y_1 + ... in k order, whatever NJ. */
NP_LINL void NP_LN(dots_run)(const float *ft, int i, int j0, int NJ, int d, int h, float *out) {
    NP_LN(vl) a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    size_t row = (size_t)d * NP_DOT_LANES;
    const float *x = ft + (size_t)i * row + NP_LW * h, *y = ft + (size_t)j0 * row + NP_LW * h;
    for (int k = 0; k < d; k++, x += NP_DOT_LANES, y += NP_DOT_LANES) {
        NP_LN(vl) xk = NP_LN(vload)(x);
        a0 += xk * NP_LN(vload)(y);
        if (NJ == 4) {
            a1 += xk * NP_LN(vload)(y + row);
            a2 += xk * NP_LN(vload)(y + 2 * row);
            a3 += xk * NP_LN(vload)(y + 3 * row);
        }
    }
    out += NP_LW * h;
    NP_LN(vstore)(out, a0);
    if (NJ == 4) {
        NP_LN(vstore)(out + NP_DOT_LANES, a1);
        NP_LN(vstore)(out + 2 * NP_DOT_LANES, a2);
        NP_LN(vstore)(out + 3 * NP_DOT_LANES, a3);
    }
}

/* acc (P, LANES) <- the dots of every pair, (1,0), (2,0), (2,1), ..., of ft (T1*d, LANES) */
NP_LTGT static void NP_LN(dots_block)(const float *ft, int T1, int d, float *acc) {
    size_t p = 0;
    for (int i = 1; i < T1; i++) {
        int j = 0;
        for (; j + 4 <= i; j += 4, p += 4)
            for (int h = 0; h < NP_LH; h++)
                NP_LN(dots_run)(ft, i, j, 4, d, h, acc + p * NP_DOT_LANES);
        for (; j < i; j++, p++)
            for (int h = 0; h < NP_LH; h++)
                NP_LN(dots_run)(ft, i, j, 1, d, h, acc + p * NP_DOT_LANES);
    }
}

/* Elements k0 .. k0+NK-1 (NK = 2 or 1) of row i's pairs with every j < i, every lane: row
 * i's own sums and x = row i's values stay in registers over j; row j's take g x in
 * place. */
NP_LINL void NP_LN(grads_run)(const float *ft, const float *gt, int i, int k0, int NK, int d,
                              float *dft) {
    size_t row = (size_t)d * NP_DOT_LANES, at = (size_t)i * row + (size_t)k0 * NP_DOT_LANES;
    NP_LN(vl) a[2][NP_LH], x[2][NP_LH];
    for (int kk = 0; kk < NK; kk++)
        for (int h = 0; h < NP_LH; h++) {
            a[kk][h] = NP_LN(vload)(dft + at + (size_t)kk * NP_DOT_LANES + NP_LW * h);
            x[kk][h] = NP_LN(vload)(ft + at + (size_t)kk * NP_DOT_LANES + NP_LW * h);
        }
    const float *g = gt + (size_t)i * (size_t)(i - 1) / 2 * NP_DOT_LANES;
    const float *y = ft + (size_t)k0 * NP_DOT_LANES;
    float *b = dft + (size_t)k0 * NP_DOT_LANES;
    for (int j = 0; j < i; j++, g += NP_DOT_LANES, y += row, b += row)
        for (int h = 0; h < NP_LH; h++) {
            NP_LN(vl) gp = NP_LN(vload)(g + NP_LW * h);
            for (int kk = 0; kk < NK; kk++) {
                size_t o = (size_t)kk * NP_DOT_LANES + NP_LW * (size_t)h;
                a[kk][h] += gp * NP_LN(vload)(y + o);
                NP_LN(vstore)(b + o, NP_LN(vload)(b + o) + gp * x[kk][h]);
            }
        }
    for (int kk = 0; kk < NK; kk++)
        for (int h = 0; h < NP_LH; h++)
            NP_LN(vstore)(dft + at + (size_t)kk * NP_DOT_LANES + NP_LW * h, a[kk][h]);
}

/* dft (T1*d, LANES) += each pair's gradient. Every element gets its additions in pair
 * order, as the per-sample kernel adds them: row i's own sum over j < i (j in order), then,
 * from the later rows i' > i, one addition each in i' order. Splitting row i's work by k
 * changes no element's order. */
NP_LTGT static void NP_LN(grads_block)(const float *ft, const float *gt, int T1, int d,
                                       float *dft) {
    for (int i = 1; i < T1; i++) {
        int k = 0;
        for (; k + 2 <= d; k += 2)
            NP_LN(grads_run)(ft, gt, i, k, 2, d, dft);
        for (; k < d; k++)
            NP_LN(grads_run)(ft, gt, i, k, 1, d, dft);
    }
}

#undef NP_LINL
#undef NP_LH
#undef NP_LN
#undef NP_LCAT
#undef NP_LCAT2
#undef NP_LW
#undef NP_LSFX
#undef NP_LTGT
