/* Synthetic click data: every value of sample i is a pure function of (seed, i), so a sample
 * is the same whatever the batch split, rank count or order. Not here: the split (source.c).
 * Formulas and streams: docs/data.md "Synthetic data". */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data.h"

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
    int seq_len;      /* table 0 a sequence: lengths uniform in [min(2, L), L] */
    int seq_clusters; /* its items follow a Markov chain over this many clusters (0: Zipf) */
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
    double *xs; /* (xs_cap) np_syn_fill's scratch: one table's inverse-CDF arguments */
    size_t xs_cap;
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
    free(s->xs);
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
    int T = cfg->tables, n_dense = np_config_dense(cfg);
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
    s->seq_len = cfg->seq_len;
    s->seq_clusters = cfg->seq_clusters;
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

/* Keys in bag (i, t): exactly hot when hot <= 1, else uniform in [hot - hot/2, hot + hot/2];
 * table 0's sequence (seq-len L): uniform in [2, L] (a next item to predict), [1, 1] for L = 1. */
static uint32_t bag_size(const np_syn *s, uint64_t i, int t) {
    int seq = t == 0 && s->seq_len > 0;
    if (!seq && s->hot <= 1) return (uint32_t)s->hot;
    uint32_t lo = seq ? (s->seq_len >= 2 ? 2u : 1u) : (uint32_t)(s->hot - s->hot / 2);
    uint32_t hi = seq ? (uint32_t)s->seq_len : (uint32_t)(s->hot + s->hot / 2);
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

/* The uniform draw of key k of bag (i, t), in [0, 1). */
static double key_uniform(const np_syn *s, uint64_t i, int t, uint32_t k) {
    uint64_t ctr = ((i * (uint64_t)s->T + (uint64_t)t) << 16) + k;
    return np_rng_uniform(s->seed, NP_STREAM_SYN_KEY, ctr);
}

/* The guide bucket x falls in, roughly: where the search below starts, and what the draws'
 * prefetches fetch ahead of it. */
static int64_t guide_guess(double x, double total, int64_t G) {
    int64_t g = (int64_t)(x / (total / (double)G));
    return g >= G ? G - 1 : g < 0 ? 0 : g;
}

/* Zipf rank of x = u * total by inverse CDF: the smallest r with cdf[r] > x (rows - 1 when
 * rounding leaves x == total). The answer is monotone in x, so for guide_bound(g) <= x <
 * guide_bound(g + 1) it lies in [guide[g], guide[g + 1]]: the same answer as a search of
 * the whole CDF. */
static int64_t zipf_rank(const np_syn *s, int t, double x) {
    int64_t rows = s->rows[t];
    const double *cdf = s->cdf[t];
    double total = cdf[rows - 1];
    const int64_t *guide = s->guide[t];
    int64_t G = guide_size(rows), g = guide_guess(x, total, G);
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

/* How many keys ahead the draws prefetch: the guide entries at twice this distance, the
 * CDF rows they point to at this distance. The draws are independent, so their cache
 * misses overlap instead of following one another (a third of the generation time went
 * to the guide and CDF loads). */
#define SYN_PREFETCH 8

/* The planted structure of synthetic sequences (docs/data.md "Sequences"): table 0's items
 * fall into C clusters of consecutive ids; a user starts in a random cluster, and each next
 * item stays in the cluster (0.4), moves to the next one (0.4) or jumps to a random one
 * (0.2); within a cluster the item is log-uniform (popularity ~ 1/(rank+1)). Every draw
 * comes from the counter of (sample, position), so any rank makes any slice. */
static void draw_chain_keys(const np_syn *s, np_split split, long every, uint64_t j0, long n,
                            const uint32_t *off_t, int64_t *keys) {
    int64_t rows = s->rows[0];
    int64_t C = s->seq_clusters < rows ? s->seq_clusters : rows;
    for (long r = 0; r < n; r++) {
        uint64_t i = np_split_index(split, every, j0 + (uint64_t)r);
        int64_t c = (int64_t)(np_rng_u64(s->seed, NP_STREAM_SEQ_CHAIN, (i << 16) + 0xffffu) %
                              (uint64_t)C);
        for (uint32_t k = 0; k < off_t[r + 1] - off_t[r]; k++) {
            uint64_t ctr = (i << 16) + k;
            if (k > 0) {
                double u = np_rng_uniform(s->seed, NP_STREAM_SEQ_CHAIN, ctr);
                if (u >= 0.8)
                    c = (int64_t)((u - 0.8) / 0.2 * (double)C);
                else if (u >= 0.4)
                    c = c + 1;
                c = c >= C ? c % C : c;
            }
            int64_t lo = c * rows / C, size = (c + 1) * rows / C - lo;
            double u2 = np_rng_uniform(s->seed, NP_STREAM_SEQ_ITEM, ctr);
            int64_t rank = (int64_t)exp(u2 * log((double)size + 1.0)) - 1;
            keys[off_t[r] + k] = lo + (rank < 0 ? 0 : rank >= size ? size - 1 : rank);
        }
    }
}

/* Table t's keys of samples j0 .. j0+n-1 (slots off_t[0] .. off_t[n] of keys), each
 * the rank of its uniform draw (Zipf by inverse CDF, or uniform), rotated by its sample's
 * group shift where there are latent groups (docs/data.md "Synthetic data"). */
static void draw_table_keys(np_syn *s, np_split split, long every, uint64_t j0, long n, int t,
                            const uint32_t *off_t, int64_t *keys) {
    if (t == 0 && s->seq_len > 0 && s->seq_clusters > 0) {
        draw_chain_keys(s, split, every, j0, n, off_t, keys);
        return;
    }
    int64_t rows = s->rows[t];
    const double *cdf = s->cdf[t];
    uint32_t q0 = off_t[0], q1 = off_t[n];
    if (!cdf) { /* zipf 0: the uniform inverse CDF */
        for (long r = 0; r < n; r++) {
            uint64_t i = np_split_index(split, every, j0 + (uint64_t)r);
            for (uint32_t k = 0; k < off_t[r + 1] - off_t[r]; k++) {
                int64_t v = (int64_t)(key_uniform(s, i, t, k) * (double)rows);
                keys[off_t[r] + k] = v < rows ? v : rows - 1;
            }
        }
    } else {
        /* the arguments first, then the searches with their loads fetched ahead */
        double total = cdf[rows - 1], *xs = s->xs - q0;
        const int64_t *guide = s->guide[t];
        int64_t G = guide_size(rows);
        for (long r = 0; r < n; r++) {
            uint64_t i = np_split_index(split, every, j0 + (uint64_t)r);
            for (uint32_t k = 0; k < off_t[r + 1] - off_t[r]; k++)
                xs[off_t[r] + k] = key_uniform(s, i, t, k) * total;
        }
        for (uint32_t q = q0; q < q1; q++) {
            if (q + 2 * SYN_PREFETCH < q1)
                __builtin_prefetch(guide + guide_guess(xs[q + 2 * SYN_PREFETCH], total, G));
            if (q + SYN_PREFETCH < q1)
                __builtin_prefetch(cdf + guide[guide_guess(xs[q + SYN_PREFETCH], total, G)]);
            keys[q] = zipf_rank(s, t, xs[q]);
        }
    }
    if (s->groups > 0)
        for (long r = 0; r < n; r++) {
            int64_t shift = group_shift(s, np_split_index(split, every, j0 + (uint64_t)r), t);
            for (uint32_t q = off_t[r]; q < off_t[r + 1]; q++)
                keys[q] = (keys[q] + shift) % rows;
        }
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
    size_t most = 0; /* the most keys of one table */
    for (int t = 0; t < T; t++) {
        size_t c = off[(size_t)t * n1 + (size_t)n] - off[(size_t)t * n1];
        most = c > most ? c : most;
    }
    if (most > s->xs_cap) {
        double *xs = np_alloc(most, sizeof *xs, "synthetic key draws", err);
        if (!xs) return NP_STATUS_NO_MEMORY;
        free(s->xs);
        s->xs = xs;
        s->xs_cap = most;
    }
    for (int t = 0; t < T; t++) {
        const uint32_t *off_t = off + (size_t)t * n1;
        draw_table_keys(s, split, every, j0, n, t, off_t, b->keys);
        /* the weights apart from the draws: each loop then runs tight */
        const double *w = s->w[t];
        int64_t wk = s->w_keys[t];
        for (long r = 0; r < n; r++) {
            uint32_t a = off_t[r], e = off_t[r + 1];
            if (e == a) continue; /* an empty bag says nothing */
            if (e + SYN_PREFETCH < off_t[n] && b->keys[e + SYN_PREFETCH] < wk)
                __builtin_prefetch(w + b->keys[e + SYN_PREFETCH]);
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
