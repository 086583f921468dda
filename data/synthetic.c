/* Synthetic click data: every value of sample i is a pure function of (seed, i), so a sample
 * is the same whatever the batch split, rank count or order. Not here: the split (source.c).
 * Formulas and streams: docs/data.md "Synthetic data". */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

/* The hidden logistic teacher that makes labels learnable:
 * z = TEACHER_BIAS + TEACHER_DENSE * sum_j a_j x_j / sqrt(n_dense)
 *                  + TEACHER_KEY * sum_t mean_{k in bag t} w_t[k] / sqrt(T).
 * The bias sets the click rate, the other two how much dense and sparse features tell. */
#define TEACHER_BIAS (-1.0)
#define TEACHER_DENSE 2.0
#define TEACHER_KEY 2.0

/* Teacher table weights use a different seed so they share nothing with the model's init. */
#define TEACHER_SEED_XOR 0x5eedULL
/* Dense teacher weights: the stream just past the per-table teacher streams. */
#define TEACHER_DENSE_STREAM ((uint64_t)NP_STREAM_TEACHER_DENSE)

/* A Zipf CDF of 8 bytes per row; beyond this the CDF alone would rival the tables. */
#define SYN_CDF_MAX_ROWS (INT64_C(1) << 28)
/* The teacher weights of keys below this are kept once computed: 64 KiB a table, where the
 * most popular keys of a Zipf table without latent groups are (a cache of every row was
 * no faster: its loads missed the cache as often as the draws it saved). */
#define SYN_TEACHER_CACHE_KEYS 8192
/* Key draw counters are ((i*T + t) << 16) + k, so a bag holds fewer than 2^16 keys. */
#define SYN_MAX_BAG 65535

struct np_syn {
    uint64_t seed;
    int n_dense, T, hot;
    double zipf;
    long groups;        /* latent groups correlating tables; 0 = independent */
    int64_t *rows;      /* (T) rows per table */
    const double **cdf; /* (T) unnormalised Zipf CDF of table t, shared by equal row counts;
                           NULL when zipf == 0 (uniform draws need none) */
    const int64_t **guide; /* (T) its guide table (zipf_guide), stored after the CDF */
    double **own;       /* (n_own) the distinct CDFs, owned: cdf[t] points into these */
    int n_own;
    double *a; /* (n_dense) dense teacher weights */
    /* (T) table t's teacher weights w_t[key] of its first w_keys[t] keys, filled on first
     * use (0.0: not yet; a weight that is 0.0 is recomputed every time, which gives the
     * same value). A cache of a pure function: the data are the same with or without it.
     * np_syn_fill is not to be called on one np_syn from two threads. */
    double **w;
    int64_t *w_keys; /* (T) keys cached for table t: min(rows, SYN_TEACHER_CACHE_KEYS) */
    double *zk; /* (zk_cap) np_syn_fill's scratch */
    size_t zk_cap;
};

void np_syn_free(np_syn *s) {
    if (!s) return;
    for (int k = 0; k < s->n_own; k++)
        free(s->own[k]);
    free(s->own);
    free(s->cdf);
    free(s->guide);
    free(s->rows);
    free(s->a);
    if (s->w)
        for (int t = 0; t < s->T; t++)
            free(s->w[t]);
    free(s->w);
    free(s->w_keys);
    free(s->zk);
    free(s);
}

/* Table t's teacher weight of a key (docs/data.md "Synthetic data"). */
static double teacher_weight(np_syn *s, int t, int64_t key) {
    double *w = key < s->w_keys[t] ? s->w[t] + key : NULL;
    if (w && *w != 0.0) return *w;
    double v = np_rng_normal(s->seed ^ TEACHER_SEED_XOR, (uint64_t)NP_STREAM_TEACHER + (uint64_t)t,
                             (uint64_t)key);
    if (w) *w = v;
    return v;
}

/* Buckets of a CDF's guide table: the inverse-CDF search of a key starts from its bucket's
 * rows instead of the whole table (a bench-shape batch spent a third of its generation time
 * in the 17-step binary search, mostly mispredicted branches). */
static int64_t guide_size(int64_t rows) {
    return rows < 65536 ? rows : 65536;
}

/* The bucket bounds g * total / G, computed the same way when building and searching. */
static double guide_bound(double total, int64_t G, int64_t g) {
    return (double)g * (total / (double)G);
}

/* cdf[r] = sum_{q <= r} (q+1)^-alpha, summed in increasing q so the result is fixed; then,
 * in the same block, guide[g] = the smallest r with cdf[r] > guide_bound(g) (rows - 1 when
 * none), for g < G = guide_size(rows). */
static double *zipf_cdf(int64_t rows, double alpha, int t, np_error *err) {
    if (rows > SYN_CDF_MAX_ROWS) {
        np_err(err, NP_STATUS_UNSUPPORTED,
               "synthetic data: table %d has %lld rows; Zipf keys (zipf > 0) need an 8-byte CDF "
               "entry per row and support at most 2^28 rows (use zipf 0 or fewer rows)",
               t, (long long)rows);
        return NULL;
    }
    int64_t G = guide_size(rows);
    double *cdf = np_alloc((size_t)(rows + G), sizeof(double), "synthetic Zipf CDF", err);
    if (!cdf) return NULL;
    double sum = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        sum += pow((double)(r + 1), -alpha);
        cdf[r] = sum;
    }
    int64_t *guide = (int64_t *)(void *)(cdf + rows);
    int64_t r = 0;
    for (int64_t g = 0; g < G; g++) {
        double b = guide_bound(sum, G, g);
        while (r < rows - 1 && !(cdf[r] > b))
            r++;
        guide[g] = r;
    }
    return cdf;
}

np_status np_syn_create(const np_config *cfg, np_syn **out, np_error *err) {
    *out = NULL;
    int T = cfg->tables, n_dense = cfg->bottom[0];
    if (T < 1 || T > NP_MAX_TABLES || n_dense < 1)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "synthetic data: need 1..%d tables and >= 1 dense feature, got tables %d "
                      "and bottom input %d",
                      NP_MAX_TABLES, T, n_dense);
    if (cfg->hot < 0 || cfg->hot + cfg->hot / 2 > SYN_MAX_BAG)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "hot: %d gives bags of up to %d keys; the synthetic generator allows %d",
                      cfg->hot, cfg->hot + cfg->hot / 2, SYN_MAX_BAG);
    if (!(cfg->zipf >= 0.0) || !isfinite(cfg->zipf))
        return np_err(err, NP_STATUS_BAD_INPUT, "zipf: %g must be a finite number >= 0", cfg->zipf);
    np_syn *s = np_zalloc(1, sizeof *s, "synthetic generator", err);
    if (!s) return NP_STATUS_NO_MEMORY;
    s->seed = cfg->seed;
    s->n_dense = n_dense;
    s->T = T;
    s->hot = cfg->hot;
    s->zipf = cfg->zipf;
    s->groups = cfg->groups;
    np_status st = NP_STATUS_NO_MEMORY;
    s->rows = np_alloc((size_t)T, sizeof(int64_t), "synthetic row counts", err);
    s->cdf = np_zalloc((size_t)T, sizeof(double *), "synthetic CDF table", err);
    s->guide = np_zalloc((size_t)T, sizeof(int64_t *), "synthetic CDF guides", err);
    s->own = np_zalloc((size_t)T, sizeof(double *), "synthetic CDF list", err);
    s->a = np_alloc((size_t)n_dense, sizeof(double), "synthetic teacher weights", err);
    s->w = np_zalloc((size_t)T, sizeof(double *), "synthetic teacher caches", err);
    s->w_keys = np_zalloc((size_t)T, sizeof(int64_t), "synthetic teacher cache sizes", err);
    if (!s->rows || !s->cdf || !s->guide || !s->own || !s->a || !s->w || !s->w_keys) goto fail;
    for (int t = 0; t < T; t++) {
        s->rows[t] = np_config_rows(cfg, t);
        if (s->rows[t] < 1) {
            st = np_err(err, NP_STATUS_BAD_INPUT,
                        "rows: table %d has %lld rows; give one row count (>= 1) or one per "
                        "table",
                        t, (long long)s->rows[t]);
            goto fail;
        }
    }
    if (s->zipf > 0.0) {
        for (int t = 0; t < T; t++) {
            for (int u = 0; u < t && !s->cdf[t]; u++)
                if (s->rows[u] == s->rows[t]) s->cdf[t] = s->cdf[u];
            if (s->cdf[t]) continue;
            double *c = zipf_cdf(s->rows[t], s->zipf, t, err);
            if (!c) {
                st = s->rows[t] > SYN_CDF_MAX_ROWS ? NP_STATUS_UNSUPPORTED : NP_STATUS_NO_MEMORY;
                goto fail;
            }
            s->own[s->n_own++] = c;
            s->cdf[t] = c;
        }
        for (int t = 0; t < T; t++)
            s->guide[t] = (const int64_t *)(const void *)(s->cdf[t] + s->rows[t]);
    }
    for (int t = 0; t < T; t++) {
        /* latent groups rotate the popular keys away from the small ids: no cache then */
        s->w_keys[t] = s->groups > 0                          ? 0
                       : s->rows[t] < SYN_TEACHER_CACHE_KEYS ? s->rows[t]
                                                              : SYN_TEACHER_CACHE_KEYS;
        if (!(s->w[t] = np_zalloc((size_t)s->w_keys[t], sizeof(double), "synthetic teacher cache",
                                  err)))
            goto fail;
    }
    for (int j = 0; j < n_dense; j++)
        s->a[j] = np_rng_normal(s->seed, TEACHER_DENSE_STREAM, j);
    *out = s;
    return NP_OK;
fail:
    np_syn_free(s);
    return st;
}

/* Keys in bag (i, t): exactly hot when hot <= 1, else uniform in [hot - hot/2, hot + hot/2]. */
static uint32_t bag_size(const np_syn *s, uint64_t i, int t) {
    if (s->hot <= 1) return (uint32_t)s->hot;
    uint32_t lo = (uint32_t)(s->hot - s->hot / 2), hi = (uint32_t)(s->hot + s->hot / 2);
    double u = np_rng_uniform(s->seed, NP_STREAM_SYN_COUNT, i * (uint64_t)s->T + (uint64_t)t);
    uint32_t c = lo + (uint32_t)(u * (double)(hi - lo + 1));
    return c > hi ? hi : c;
}

/* With latent groups, sample i belongs to group g and table t's popularity ranking is
 * rotated by a shift of (g, t): samples of one group share their hot keys in every table,
 * as users of one kind do in click logs. */
static int64_t group_shift(const np_syn *s, uint64_t i, int t) {
    if (s->groups <= 0) return 0;
    uint64_t g = np_rng_u64(s->seed, NP_STREAM_SYN_GROUP, i) % (uint64_t)s->groups;
    return (int64_t)(np_rng_u64(s->seed, (uint64_t)NP_STREAM_SYN_GROUP_SHIFT + (uint64_t)t, g) %
                     (uint64_t)s->rows[t]);
}

static int64_t draw_rank(const np_syn *s, uint64_t i, int t, uint32_t k);

/* Key k of bag (i, t): a Zipf rank (rank 0 the most popular), rotated by the group shift. */
static int64_t draw_key(const np_syn *s, uint64_t i, int t, uint32_t k) {
    int64_t r = draw_rank(s, i, t, k);
    return s->groups > 0 ? (r + group_shift(s, i, t)) % s->rows[t] : r;
}

/* Zipf rank by inverse CDF. */
static int64_t draw_rank(const np_syn *s, uint64_t i, int t, uint32_t k) {
    uint64_t ctr = ((i * (uint64_t)s->T + (uint64_t)t) << 16) + k;
    double u = np_rng_uniform(s->seed, NP_STREAM_SYN_KEY, ctr); /* [0, 1) */
    int64_t rows = s->rows[t];
    const double *cdf = s->cdf[t];
    if (!cdf) { /* zipf 0: the uniform inverse CDF */
        int64_t r = (int64_t)(u * (double)rows);
        return r < rows ? r : rows - 1;
    }
    /* smallest r with cdf[r] > u * total (rows - 1 when rounding leaves x == total). The
     * answer is monotone in x, so for guide_bound(g) <= x < guide_bound(g + 1) it lies in
     * [guide[g], guide[g + 1]]: the same answer as a search of the whole CDF. */
    double total = cdf[rows - 1], x = u * total;
    const int64_t *guide = s->guide[t];
    int64_t G = guide_size(rows), g = (int64_t)(x / (total / (double)G));
    if (g >= G) g = G - 1;
    if (g < 0) g = 0;
    while (g > 0 && guide_bound(total, G, g) > x)
        g--;
    while (g + 1 < G && guide_bound(total, G, g + 1) <= x)
        g++;
    int64_t lo = guide[g], hi = g + 1 < G ? guide[g + 1] : rows - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

np_status np_syn_fill(np_syn *s, np_split split, long every, uint64_t j0, long n, np_batch *b,
                      np_error *err) {
    const int T = s->T, D = s->n_dense;
    const size_t n1 = (size_t)n + 1;
    np_status st = np_batch_reserve(b, n, D, T, err);
    if (st) return st;
    b->first = np_split_index(split, every, j0);

    /* pass 1: bag sizes into offsets, then an exclusive prefix sum in table-major order */
    uint32_t *off = b->offsets; /* (T, n+1) */
    for (int t = 0; t < T; t++)
        for (long r = 0; r < n; r++)
            off[(size_t)t * n1 + (size_t)r] =
                bag_size(s, np_split_index(split, every, j0 + (uint64_t)r), t);
    uint64_t total = 0;
    for (int t = 0; t < T; t++) {
        for (long r = 0; r < n; r++) {
            uint32_t c = off[(size_t)t * n1 + (size_t)r];
            off[(size_t)t * n1 + (size_t)r] = (uint32_t)(total > UINT32_MAX ? 0 : total);
            total += c;
        }
        off[(size_t)t * n1 + (size_t)n] = (uint32_t)(total > UINT32_MAX ? 0 : total);
    }
    if (total > SIZE_MAX) return np_err(err, NP_STATUS_NO_MEMORY, "synthetic batch too large");
    if ((st = np_batch_reserve_keys(b, (size_t)total, err))) return st;
    b->nnz = (size_t)total;

    /* pass 2: keys, and each bag's mean teacher weight summed into zk (table-major, so one
     * table's CDF and weights stay in cache; each sample still adds its tables in order) */
    double *zk = s->zk; /* (n) the key part of each sample's teacher logit */
    if ((size_t)n > s->zk_cap) {
        if (!(zk = np_alloc((size_t)n, sizeof *zk, "synthetic teacher sums", err)))
            return NP_STATUS_NO_MEMORY;
        free(s->zk);
        s->zk = zk;
        s->zk_cap = (size_t)n;
    }
    for (long r = 0; r < n; r++)
        zk[r] = 0.0;
    for (int t = 0; t < T; t++) {
        for (long r = 0; r < n; r++) {
            uint64_t i = np_split_index(split, every, j0 + (uint64_t)r);
            uint32_t a = off[(size_t)t * n1 + (size_t)r], e = off[(size_t)t * n1 + (size_t)r + 1];
            for (uint32_t k = 0; k < e - a; k++)
                b->keys[a + k] = draw_key(s, i, t, k);
        }
        /* the weights apart from the draws: each loop then runs tight */
        for (long r = 0; r < n; r++) {
            uint32_t a = off[(size_t)t * n1 + (size_t)r], e = off[(size_t)t * n1 + (size_t)r + 1];
            if (e == a) continue; /* an empty bag says nothing */
            double m = 0.0;
            for (uint32_t q = a; q < e; q++)
                m += teacher_weight(s, t, b->keys[q]);
            zk[r] += m / (double)(e - a);
        }
    }

    /* pass 3: dense features and the teacher's label */
    const double sqrt_d = sqrt((double)D), sqrt_t = sqrt((double)T);
    for (long r = 0; r < n; r++) {
        uint64_t i = np_split_index(split, every, j0 + (uint64_t)r);
        float *x = b->dense + (size_t)r * (size_t)D; /* (D) */
        double zd = 0.0;
        for (int j = 0; j < D; j++) {
            x[j] =
                (float)np_rng_normal(s->seed, NP_STREAM_SYN_DENSE, i * (uint64_t)D + (uint64_t)j);
            zd += s->a[j] * (double)x[j];
        }
        double z = TEACHER_BIAS + TEACHER_DENSE * zd / sqrt_d + TEACHER_KEY * zk[r] / sqrt_t;
        double p = 1.0 / (1.0 + exp(-z));
        b->label[r] = np_rng_uniform(s->seed, NP_STREAM_SYN_LABEL, i) < p ? 1.0f : 0.0f;
    }
    return NP_OK;
}
