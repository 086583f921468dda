/* np_gemm on oneDNN (Debian libdnnl): matmul primitives with the bias and ReLU fused as
 * post-ops, created once per shape and thread and cached; very narrow outputs (N <= 2,
 * where the matmul kernels measured 6x slower) go to dnnl_sgemm plus a bias/ReLU loop.
 * Which path a shape takes depends only on the shape, so equal calls give equal bits.
 * Not here: which products a layer needs (linear.c, cross.c). */
#include "codelets/kernels/gemm.h"

#include "codelets/kernels/kernels.h" /* NP_TARGET_CLONES */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NP_GEMM_CACHE 128 /* shapes kept per thread, least recently used evicted */
#define NP_GEMM_SGEMM_MAX_N 2

typedef struct {
    unsigned flags;
    int has_bias;
    long M, N, K, lda, ldb, ldc;
    unsigned long used;    /* the cache's clock at the last use */
    dnnl_primitive_t prim; /* NULL: this shape runs on dnnl_sgemm */
    dnnl_memory_t a, b, bias, c;
} gemm_entry;

typedef struct {
    dnnl_stream_t stream;
    uint16_t *abuf, *bbuf; /* bf16 copies of A and B */
    size_t acap, bcap;
    gemm_entry e[NP_GEMM_CACHE];
    int n;               /* entries in use */
    unsigned long clock; /* counts lookups */
} gemm_cache;

static dnnl_engine_t g_engine;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static char g_backend[160];

static void die(const char *what, dnnl_status_t s) {
    /* Only a broken oneDNN installation or an exhausted machine gets here, inside a kernel
     * that has no way to report: say what failed rather than compute something else. */
    fprintf(stderr, "nestpipe: error: oneDNN %s failed (status %d)\n", what, (int)s);
    abort();
}

static void entry_free(gemm_entry *x) {
    if (x->prim) dnnl_primitive_destroy(x->prim);
    if (x->a) dnnl_memory_destroy(x->a);
    if (x->b) dnnl_memory_destroy(x->b);
    if (x->bias) dnnl_memory_destroy(x->bias);
    if (x->c) dnnl_memory_destroy(x->c);
    memset(x, 0, sizeof *x);
}

static void cache_free(void *p) {
    gemm_cache *c = p;
    for (int i = 0; i < c->n; i++)
        entry_free(&c->e[i]);
    if (c->stream) dnnl_stream_destroy(c->stream);
    free(c->abuf);
    free(c->bbuf);
    free(c);
}

static void start(void) {
    dnnl_status_t s = dnnl_engine_create(&g_engine, dnnl_cpu, 0);
    if (s != dnnl_success) die("CPU engine creation", s);
    if (pthread_key_create(&g_key, cache_free)) die("thread key creation", dnnl_out_of_memory);
}

static gemm_cache *thread_cache(void) {
    pthread_once(&g_once, start);
    gemm_cache *c = pthread_getspecific(g_key);
    if (c) return c;
    c = calloc(1, sizeof *c);
    if (!c) die("cache allocation", dnnl_out_of_memory);
    dnnl_status_t s = dnnl_stream_create(&c->stream, g_engine, dnnl_stream_default_flags);
    if (s != dnnl_success) die("stream creation", s);
    pthread_setspecific(g_key, c);
    return c;
}

static dnnl_memory_t memory(const dnnl_dims_t dims, const dnnl_dims_t strides,
                            dnnl_data_type_t type) {
    dnnl_memory_desc_t d;
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(&d, 2, dims, type, strides);
    if (s != dnnl_success) die("memory descriptor", s);
    dnnl_memory_t m;
    s = dnnl_memory_create(&m, &d, g_engine, DNNL_MEMORY_NONE);
    if (s != dnnl_success) die("memory creation", s);
    return m;
}

static const dnnl_memory_desc_t *desc_of(dnnl_memory_t m) {
    const dnnl_memory_desc_t *d;
    dnnl_status_t s = dnnl_memory_get_memory_desc(m, &d);
    if (s != dnnl_success) die("memory descriptor query", s);
    return d;
}

/* The matmul primitive for one shape, with the bias and ReLU as part of it. */
static void entry_make(gemm_entry *x) {
    int bf16 = (x->flags & NP_GEMM_BF16) != 0;
    /* dnnl_sgemm or no product; bf16 products always take the matmul */
    if ((x->N <= NP_GEMM_SGEMM_MAX_N && !bf16) || x->K == 0) return;
    dnnl_dims_t da = {x->M, x->K}, db = {x->K, x->N}, dc = {x->M, x->N}, dbias = {1, x->N};
    dnnl_dims_t sa = {x->lda, 1}, sb = {x->ldb, 1}, sc = {x->ldc, 1}, sbias = {x->N, 1};
    if (x->flags & NP_GEMM_TA) sa[0] = 1, sa[1] = x->lda;
    if (x->flags & NP_GEMM_TB) sb[0] = 1, sb[1] = x->ldb;
    dnnl_data_type_t in = bf16 ? dnnl_bf16 : dnnl_f32;
    x->a = memory(da, sa, in);
    x->b = memory(db, sb, in);
    x->c = memory(dc, sc, dnnl_f32);
    if (x->has_bias) x->bias = memory(dbias, sbias, dnnl_f32);
    dnnl_matmul_desc_t md;
    dnnl_status_t s = dnnl_matmul_desc_init(&md, desc_of(x->a), desc_of(x->b),
                                            x->has_bias ? desc_of(x->bias) : NULL, desc_of(x->c));
    if (s != dnnl_success) die("matmul descriptor", s);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if (x->flags & NP_GEMM_RELU) {
        if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success ||
            (s = dnnl_post_ops_create(&po)) != dnnl_success ||
            (s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f)) !=
                dnnl_success ||
            (s = dnnl_primitive_attr_set_post_ops(attr, po)) != dnnl_success)
            die("ReLU post-op", s);
    }
    dnnl_primitive_desc_t pd;
    s = dnnl_primitive_desc_create(&pd, &md, attr, g_engine, NULL);
    if (s != dnnl_success) die("matmul primitive descriptor", s);
    s = dnnl_primitive_create(&x->prim, pd);
    if (s != dnnl_success) die("matmul primitive", s);
    dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
}

static gemm_entry *lookup(gemm_cache *c, unsigned flags, int has_bias, long M, long N, long K,
                          long lda, long ldb, long ldc) {
    c->clock++;
    for (int i = 0; i < c->n; i++) {
        gemm_entry *x = &c->e[i];
        if (x->flags == flags && x->has_bias == has_bias && x->M == M && x->N == N &&
            x->K == K && x->lda == lda && x->ldb == ldb && x->ldc == ldc) {
            x->used = c->clock;
            return x;
        }
    }
    gemm_entry *x;
    if (c->n < NP_GEMM_CACHE) {
        x = &c->e[c->n++];
    } else { /* the least recently used */
        x = &c->e[0];
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < x->used) x = &c->e[i];
        entry_free(x);
    }
    *x = (gemm_entry){.flags = flags, .has_bias = has_bias, .M = M, .N = N, .K = K,
                      .lda = lda, .ldb = ldb, .ldc = ldc, .used = c->clock};
    entry_make(x);
    return x;
}

/* Floats of a matrix stored with `rows` rows of leading dimension ld, `cols` used. */
static size_t extent(long rows, long cols, long ld) {
    return (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
}

NP_TARGET_CLONES void np_to_bf16(const float *restrict x, uint16_t *restrict y, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        uint32_t r = u + 0x7FFFu + ((u >> 16) & 1u); /* to nearest, ties to even */
        y[i] = (u & 0x7FFFFFFFu) > 0x7F800000u ? (uint16_t)((u >> 16) | 0x40u) /* quiet NaN */
                                               : (uint16_t)(r >> 16);
    }
}

static const uint16_t *bf16_copy(uint16_t **buf, size_t *cap, const float *x, size_t n) {
    if (*cap < n) {
        uint16_t *p = realloc(*buf, n * sizeof *p);
        if (!p) die("bf16 buffer allocation", dnnl_out_of_memory);
        *buf = p;
        *cap = n;
    }
    np_to_bf16(x, *buf, n);
    return *buf;
}

static void bias_relu(unsigned flags, long M, long N, const float *bias, float *C, long ldc) {
    for (long m = 0; m < M; m++) {
        float *cm = C + (size_t)m * (size_t)ldc; /* (N) */
        if (bias)
            for (long j = 0; j < N; j++)
                cm[j] += bias[j];
        if (flags & NP_GEMM_RELU)
            for (long j = 0; j < N; j++)
                cm[j] = cm[j] > 0.0f ? cm[j] : 0.0f;
    }
}

static void gemm_run(unsigned flags, long M, long N, long K, const float *A, long lda,
                     const float *B, long ldb, const float *bias, float *C, long ldc);

void np_gemm(unsigned flags, long M, long N, long K, const float *A, long lda, const float *B,
             long ldb, const float *bias, float *C, long ldc) {
    if (M <= 0 || N <= 0) return;
    /* One OpenMP thread per product: the caller (a StarPU worker, or the reference's
     * thread) is the unit of parallelism, and a fixed thread count keeps oneDNN's choice of
     * kernel, and so the summation order, fixed. The caller's own setting comes back after. */
    int threads = omp_get_max_threads();
    if (threads != 1) omp_set_num_threads(1);
    gemm_run(flags, M, N, K, A, lda, B, ldb, bias, C, ldc);
    if (threads != 1) omp_set_num_threads(threads);
}

static void gemm_run(unsigned flags, long M, long N, long K, const float *A, long lda,
                     const float *B, long ldb, const float *bias, float *C, long ldc) {
    if (K <= 0) {
        for (long m = 0; m < M; m++)
            memset(C + (size_t)m * (size_t)ldc, 0, (size_t)N * sizeof *C);
        bias_relu(flags, M, N, bias, C, ldc);
        return;
    }
    gemm_cache *c = thread_cache();
    gemm_entry *x = lookup(c, flags, bias != NULL, M, N, K, lda, ldb, ldc);
    dnnl_status_t s;
    if (!x->prim) {
        s = dnnl_sgemm(flags & NP_GEMM_TA ? 'T' : 'N', flags & NP_GEMM_TB ? 'T' : 'N', M, N, K,
                       1.0f, A, lda, B, ldb, 0.0f, C, ldc);
        if (s != dnnl_success) die("sgemm", s);
        bias_relu(flags, M, N, bias, C, ldc);
        return;
    }
    if (flags & NP_GEMM_BF16) {
        int ta = (flags & NP_GEMM_TA) != 0, tb = (flags & NP_GEMM_TB) != 0;
        dnnl_memory_set_data_handle(
            x->a, (void *)bf16_copy(&c->abuf, &c->acap, A,
                                    ta ? extent(K, M, lda) : extent(M, K, lda)));
        dnnl_memory_set_data_handle(
            x->b, (void *)bf16_copy(&c->bbuf, &c->bcap, B,
                                    tb ? extent(N, K, ldb) : extent(K, N, ldb)));
    } else {
        dnnl_memory_set_data_handle(x->a, (void *)A);
        dnnl_memory_set_data_handle(x->b, (void *)B);
    }
    dnnl_memory_set_data_handle(x->c, C);
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, x->a}, {DNNL_ARG_WEIGHTS, x->b}, {DNNL_ARG_DST, x->c}, {DNNL_ARG_BIAS, NULL}};
    int nargs = 3;
    if (bias) {
        dnnl_memory_set_data_handle(x->bias, (void *)bias);
        args[nargs++].memory = x->bias;
    }
    s = dnnl_primitive_execute(x->prim, c->stream, nargs, args);
    if (s != dnnl_success) die("matmul", s);
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "generic";
    }
}

int np_gemm_bf16_supported(const char **isa) {
    dnnl_cpu_isa_t have = dnnl_get_effective_cpu_isa();
    if (isa) *isa = isa_name(have);
    return ((unsigned)have & (unsigned)dnnl_cpu_isa_avx512_core_bf16) ==
           (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

static pthread_once_t g_backend_once = PTHREAD_ONCE_INIT;

static void backend_describe(void) {
    /* The kernel of a typical hidden layer (512 samples, 512 -> 256, bias and ReLU), as a
     * product would get it: on one OpenMP thread. */
    int threads = omp_get_max_threads();
    if (threads != 1) omp_set_num_threads(1);
    pthread_once(&g_once, start); /* the engine; the probe needs no stream */
    gemm_entry probe = {.flags = NP_GEMM_TB | NP_GEMM_RELU, .has_bias = 1, .M = 512, .N = 256,
                        .K = 512, .lda = 512, .ldb = 512, .ldc = 256};
    entry_make(&probe);
    const char *impl = "?";
    const_dnnl_primitive_desc_t pd;
    if (dnnl_primitive_get_primitive_desc(probe.prim, &pd) != dnnl_success ||
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
        impl = "?";
    const dnnl_version_t *v = dnnl_version();
    snprintf(g_backend, sizeof g_backend, "oneDNN %d.%d.%d, %s (matmul %s)", v->major, v->minor,
             v->patch, isa_name(dnnl_get_effective_cpu_isa()), impl);
    entry_free(&probe);
    if (threads != 1) omp_set_num_threads(threads);
}

const char *np_dense_kernels(void) {
    pthread_once(&g_backend_once, backend_describe);
    return g_backend;
}
