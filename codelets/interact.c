/* DLRM dot interaction: the bottom output followed by the strict lower triangle of pairwise
 * dot products of the T1 feature vectors of each sample. Not here: the pooling (embbag.c). */
#include "codelets/kernels.h"

#include <stdlib.h>
#include <string.h>

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

void np_interact_fwd(const float *F,                      /* (B, T1, d) */
                     long B, int T1, int d, float *out) { /* (B, d + T1*(T1-1)/2) */
    size_t width = (size_t)d + (size_t)T1 * (size_t)(T1 - 1) / 2;
    /* per-call scratch: the transposed sample (d, T1) and one row of dots (T1) */
    float stack_ft[4096], stack_acc[256];
    float *ft = stack_ft, *acc = stack_acc, *heap = NULL;
    if ((size_t)T1 * (size_t)d > 4096 || T1 > 256) {
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

/* ---- StarPU codelets (codelets/cl.h) */
#include <string.h>

#include "codelets/cl.h"

static void interact_fwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_emb_args *a = cl_arg;
    const float *bot = NP_BUF(buffers, 0); /* (n, d) */
    const float *P = NP_BUF(buffers, 1);   /* (n, T, d) */
    float *F = NP_BUF(buffers, 2);         /* (n, T+1, d) */
    float *Z = NP_BUF(buffers, 3);         /* (n, top_in) */
    size_t d = (size_t)a->d, T = (size_t)a->T;
    for (long s = 0; s < a->n; s++) {
        memcpy(F + s * (T + 1) * d, bot + s * d, d * sizeof(float));
        memcpy(F + s * (T + 1) * d + d, P + s * T * d, T * d * sizeof(float));
    }
    np_interact_fwd(F, a->n, a->T + 1, a->d, Z);
}

static void interact_bwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_emb_args *a = cl_arg;
    const float *F = NP_BUF(buffers, 0), *dZ = NP_BUF(buffers, 1);
    float *dF = NP_BUF(buffers, 2), *dbot = NP_BUF(buffers, 3), *dP = NP_BUF(buffers, 4);
    size_t d = (size_t)a->d, T = (size_t)a->T;
    np_interact_bwd(F, dZ, a->n, a->T + 1, a->d, dF);
    for (long s = 0; s < a->n; s++) {
        memcpy(dbot + s * d, dF + s * (T + 1) * d, d * sizeof(float));
        memcpy(dP + s * T * d, dF + s * (T + 1) * d + d, T * d * sizeof(float));
    }
}

NP_CODELET(np_cl_interact_fwd, interact_fwd_cpu, "interact_fwd");
NP_CODELET(np_cl_interact_bwd, interact_bwd_cpu, "interact_bwd");
