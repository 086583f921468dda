/* Configuration: defaults, the one parser for every key (shared by config files and
 * command-line flags), INI loading through libinih, and cross-field checks.
 * Not here: what the values mean to training (model/, data/, engine/). */
#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/util.h"

int np_config_top_input(const np_config *cfg) {
    int t1 = cfg->tables + 1;
    if (cfg->model == NP_MODEL_DCNV2) return t1 * cfg->dim + cfg->deep[cfg->n_deep - 1];
    return cfg->dim + t1 * (t1 - 1) / 2;
}

np_pipeline np_config_pipeline(const np_config *cfg) {
    if (cfg->engine == NP_ENGINE_REFERENCE) return NP_PIPELINE_SEQUENTIAL;
    if (cfg->pipeline != NP_PIPELINE_AUTO) return cfg->pipeline;
    /* the fastest modes that keep the model exact, measured in bench/ (docs/pipeline.md):
     * windows pay off when exchanges cross a network; between ranks on one host they are
     * memory copies, and dbp's one window per batch is faster */
    return cfg->nodes > 1 ? NP_PIPELINE_NESTPIPE : NP_PIPELINE_DBP;
}

int np_config_windows(const np_config *cfg) {
    if (cfg->windows) return cfg->windows;
    np_pipeline p = np_config_pipeline(cfg);
    if (p != NP_PIPELINE_FWP && p != NP_PIPELINE_NESTPIPE) return 1;
    /* 4 by default, fewer when a rank's share of the batch cannot fill 4 x chunks pieces */
    long local = cfg->ranks > 0 ? cfg->batch / cfg->ranks : cfg->batch;
    int w = 4;
    while (w > 1 && (long)w * (cfg->chunks > 0 ? cfg->chunks : 1) > local)
        w--;
    return w;
}

int64_t np_config_rows(const np_config *cfg, int t) {
    return cfg->n_rows == 1 ? cfg->rows[0] : cfg->rows[t];
}

/* ---------------------------------------------------------------- value parsers */

static np_status bad(np_error *err, const char *where, const char *key, const char *value,
                     const char *expect) {
    char shown[256]; /* a value from a file: control bytes escaped, long ones cut */
    np_escape(value, strlen(value), shown, sizeof shown);
    return np_err(err, NP_STATUS_BAD_INPUT, "%s: bad value '%s' for %s: expected %s", where, shown,
                  key, expect);
}

static int parse_i64(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s) return -1;
    long long v = strtoll(s, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_f64(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s) return -1;
    double v = strtod(s, &end);
    while (isspace((unsigned char)*end))
        end++;
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out) {
    if (!strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")) {
        *out = 0;
        return 0;
    }
    return -1;
}

/* "13-512-256-64-16" -> sizes; each in [1, 65536]; count in [min_n, max_n]. */
static int parse_sizes(const char *s, int *out, int min_n, int max_n, int *n_out) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        if (!isdigit((unsigned char)*p)) return -1;
        long v = strtol(p, &end, 10);
        if (errno || v < 1 || v > 65536 || n >= max_n) return -1;
        out[n++] = (int)v;
        if (*end == '-') {
            p = end + 1;
            if (!*p) return -1;
        } else if (*end) {
            return -1;
        } else {
            p = end;
        }
    }
    if (n < min_n) return -1;
    *n_out = n;
    return 0;
}

static int copy_path(char *dst, const char *src) {
    size_t n = strlen(src);
    if (n == 0 || n >= NP_PATH_MAX) return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

/* ---------------------------------------------------------------- the key table */

/* How a key's value is stored in np_config. */
typedef enum field {
    F_INT,    /* a signed integer of `size` bytes (an enum is an int) */
    F_SEED,   /* uint64_t */
    F_REAL,   /* double */
    F_BOOL,   /* int 0|1 */
    F_ENUM,   /* int: the index of the value in `names` */
    F_PATH,   /* char[NP_PATH_MAX] */
    F_CUSTOM, /* `parse` and `show` */
} field;

typedef struct key_def {
    np_config_key k;
    field f;
    size_t off, size;
    long long ilo, ihi;        /* F_INT: the range */
    double flo, fhi;           /* F_REAL: the range; flo excluded when lo_open */
    int lo_open;
    const char *const *names;  /* F_ENUM: values in enum order, NULL-terminated */
    const char *expect;        /* the error's "expected ..." */
    int (*parse)(np_config *c, const char *v);            /* F_CUSTOM: 0, or -1 when bad */
    void (*show)(const np_config *c, char *buf, size_t n); /* F_CUSTOM */
} key_def;

static const char *const data_names[] = {"synthetic", "criteo", "bin", NULL};
static const char *const model_names[] = {"dlrm", "dcnv2", NULL};
static const char *const optim_names[] = {"sgd", "rowwise-adagrad", NULL};
static const char *const engine_names[] = {"reference", "starpu", NULL};
static const char *const pipeline_names[] = {"sequential", "dbp", "async", "fwp",
                                             "nestpipe", "auto", NULL};
static const char *const precision_names[] = {"fp32", "bf16", NULL};
static const char *const cluster_names[] = {"none", "keys", NULL};
static const char *const shard_names[] = {"row", "table", NULL};
static const char *const comm_names[] = {"mpi", "nccl", NULL};

/* A data spec: criteo:PATH or bin:PATH, or `none_word` (data: synthetic, eval-data: none)
 * for the kind NP_DATA_SYNTHETIC with no path. */
static int parse_spec(np_data_kind *kind, char *path, const char *none_word, const char *v) {
    if (!strcmp(v, none_word)) {
        *kind = NP_DATA_SYNTHETIC;
        path[0] = 0;
    } else if (!strncmp(v, "criteo:", 7) && !copy_path(path, v + 7)) {
        *kind = NP_DATA_CRITEO;
    } else if (!strncmp(v, "bin:", 4) && !copy_path(path, v + 4)) {
        *kind = NP_DATA_BIN;
    } else {
        return -1;
    }
    return 0;
}
static void show_spec(np_data_kind kind, const char *path, const char *none_word, char *buf,
                      size_t n) {
    if ((unsigned)kind > NP_DATA_BIN)
        snprintf(buf, n, "?");
    else if (kind == NP_DATA_SYNTHETIC)
        snprintf(buf, n, "%s", none_word);
    else
        snprintf(buf, n, "%s:%s", data_names[kind], path);
}
static int parse_data(np_config *c, const char *v) {
    return parse_spec(&c->data, c->data_path, "synthetic", v);
}
static void show_data(const np_config *c, char *buf, size_t n) {
    show_spec(c->data, c->data_path, "synthetic", buf, n);
}
static int parse_eval_data(np_config *c, const char *v) {
    return parse_spec(&c->eval_data, c->eval_data_path, "none", v);
}
static void show_eval_data(const np_config *c, char *buf, size_t n) {
    show_spec(c->eval_data, c->eval_data_path, "none", buf, n);
}

static int parse_rows(np_config *c, const char *v) {
    int n = 0;
    const char *p = v;
    char buf[32];
    long long i;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof buf || n >= NP_MAX_TABLES) return -1;
        memcpy(buf, p, len);
        buf[len] = 0;
        if (parse_i64(buf, 1, 1LL << 40, &i)) return -1;
        c->rows[n++] = i;
        p += len;
        if (*p == ',' && !*++p) return -1;
    }
    if (n == 0) return -1;
    c->n_rows = n;
    return 0;
}
static void show_rows(const np_config *c, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int t = 0; t < c->n_rows && at < n; t++)
        at += (size_t)snprintf(buf + at, n - at, t ? ",%lld" : "%lld", (long long)c->rows[t]);
}

static void show_sizes(const int *s, int count, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < count && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, i ? "-%d" : "%d", s[i]);
}
static int parse_bottom(np_config *c, const char *v) {
    return parse_sizes(v, c->bottom, 2, NP_MAX_LAYERS + 1, &c->n_bottom);
}
static void show_bottom(const np_config *c, char *buf, size_t n) {
    show_sizes(c->bottom, c->n_bottom, buf, n);
}
static int parse_top(np_config *c, const char *v) {
    return parse_sizes(v, c->top, 1, NP_MAX_LAYERS, &c->n_top);
}
static void show_top(const np_config *c, char *buf, size_t n) {
    show_sizes(c->top, c->n_top, buf, n);
}
static int parse_deep(np_config *c, const char *v) {
    return parse_sizes(v, c->deep, 1, NP_MAX_LAYERS, &c->n_deep);
}
static void show_deep(const np_config *c, char *buf, size_t n) {
    show_sizes(c->deep, c->n_deep, buf, n);
}

static int parse_eval_every(np_config *c, const char *v) {
    long long i;
    if (parse_i64(v, 0, LONG_MAX, &i) || i == 1) return -1;
    c->eval_every = (long)i;
    return 0;
}
static void show_eval_every(const np_config *c, char *buf, size_t n) {
    snprintf(buf, n, "%ld", c->eval_every);
}

static int parse_windows(np_config *c, const char *v) {
    long long i;
    if (!strcmp(v, "auto")) {
        c->windows = 0;
        return 0;
    }
    if (parse_i64(v, 1, 64, &i)) return -1;
    c->windows = (int)i;
    return 0;
}
static void show_windows(const np_config *c, char *buf, size_t n) {
    if (c->windows)
        snprintf(buf, n, "%d", c->windows);
    else
        snprintf(buf, n, "auto");
}

static int parse_sched(np_config *c, const char *v) {
    size_t n = strlen(v);
    if (n == 0 || n >= sizeof c->sched ||
        strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-_") != n)
        return -1;
    memcpy(c->sched, v, n + 1);
    return 0;
}
static void show_sched(const np_config *c, char *buf, size_t n) {
    snprintf(buf, n, "%s", c->sched);
}

static int parse_gpus(np_config *c, const char *v) {
    long long i;
    if (!strcmp(v, "all")) {
        c->gpus = -1;
        return 0;
    }
    if (parse_i64(v, 0, 64, &i)) return -1;
    c->gpus = (int)i;
    return 0;
}
static void show_gpus(const np_config *c, char *buf, size_t n) {
    if (c->gpus < 0)
        snprintf(buf, n, "all");
    else
        snprintf(buf, n, "%d", c->gpus);
}

static const char *const place_kinds[NP_PLACE_KINDS] = {"dense", "pool", "loss", "update"};
static const char *const arch_names[] = {"auto", "cpu", "cuda", NULL};
/* "auto", or KIND=ARCH[,KIND=ARCH...] with KIND one of place_kinds or "all" (every kind),
 * ARCH one of arch_names; later items win. */
static int parse_place(np_config *c, const char *v) {
    np_arch p[NP_PLACE_KINDS] = {0};
    if (strcmp(v, "auto")) {
        const char *s = v;
        for (;;) {
            size_t len = strcspn(s, ","), eq = strcspn(s, "=");
            if (eq >= len) return -1;
            int kind = -1, arch = -1;
            for (int k = 0; k < NP_PLACE_KINDS; k++)
                if (strlen(place_kinds[k]) == eq && !strncmp(s, place_kinds[k], eq)) kind = k;
            if (kind < 0 && !(eq == 3 && !strncmp(s, "all", 3))) return -1;
            for (int a = 0; arch_names[a]; a++)
                if (strlen(arch_names[a]) == len - eq - 1 && !strncmp(s + eq + 1, arch_names[a], len - eq - 1))
                    arch = a;
            if (arch < 0) return -1;
            for (int k = 0; k < NP_PLACE_KINDS; k++)
                if (kind < 0 || k == kind) p[k] = (np_arch)arch;
            if (!s[len]) break;
            s += len + 1;
            if (!*s) return -1; /* a trailing comma */
        }
    }
    memcpy(c->place, p, sizeof p);
    return 0;
}
static void show_place(const np_config *c, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < NP_PLACE_KINDS && at < n; k++)
        if (c->place[k] != NP_ARCH_AUTO && (unsigned)c->place[k] <= NP_ARCH_CUDA)
            at += (size_t)snprintf(buf + at, n - at, "%s%s=%s", at ? "," : "", place_kinds[k],
                                   arch_names[c->place[k]]);
    if (!at) snprintf(buf, n, "auto");
}

#define AT(field) offsetof(np_config, field), sizeof(((np_config *)0)->field)
#define KEY(name, sec, arg, dflt, help, metric, type) {name, sec, arg, dflt, help, metric, type}
/* an integer field in [lo, hi] */
#define INT_KEY(name, sec, arg, dflt, help, metric, fld, lo, hi, exp_)                        \
    {KEY(name, sec, arg, dflt, help, metric, NP_KEY_INT), F_INT, AT(fld), .ilo = (lo),           \
     .ihi = (hi), .expect = (exp_)}
#define REAL_KEY(name, sec, arg, dflt, help, metric, fld, lo, hi, open, exp_)                 \
    {KEY(name, sec, arg, dflt, help, metric, NP_KEY_REAL), F_REAL, AT(fld), .flo = (lo),         \
     .fhi = (hi), .lo_open = (open), .expect = (exp_)}
#define ENUM_KEY(name, sec, arg, dflt, help, metric, fld, names_)                                \
    {KEY(name, sec, arg, dflt, help, metric, NP_KEY_TEXT), F_ENUM, AT(fld), .names = (names_)}
#define BOOL_KEY(name, sec, help, metric, fld)                                                   \
    {KEY(name, sec, NULL, "0", help, metric, NP_KEY_BOOL), F_BOOL, AT(fld), .expect = "0 or 1"}
#define PATH_KEY(name, sec, arg, help, fld)                                                      \
    {KEY(name, sec, arg, "", help, NULL, NP_KEY_TEXT), F_PATH, AT(fld), .expect = "a file path"}
#define CUSTOM_KEY(name, sec, arg, dflt, help, metric, type, fn, exp_)                         \
    {KEY(name, sec, arg, dflt, help, metric, type), F_CUSTOM, 0, 0, .parse = parse_##fn,         \
     .show = show_##fn, .expect = (exp_)}

/* Every key, in the help's order. The defaults are those of docs/cli.md. */
static const key_def keys[] = {
    CUSTOM_KEY("data", "data", "synthetic|criteo:PATH|bin:PATH", "synthetic", "training data",
               NULL, NP_KEY_TEXT, data, "synthetic, criteo:PATH or bin:PATH"),
    BOOL_KEY("skip-bad-lines", "data",
             "skip and count malformed Criteo lines (default: stop at the first)", NULL,
             skip_bad_lines),
    CUSTOM_KEY("eval-every", "data", "N", "10",
               "hold out every N-th record for eval; 0 = none", NULL, NP_KEY_INT, eval_every,
               "0 (no held-out split) or an integer >= 2 (every N-th record held out)"),
    CUSTOM_KEY("eval-data", "data", "criteo:PATH|bin:PATH|none", "none",
               "evaluate on this file (every record) instead of a held-out\n"
               "split; all training records then train",
               NULL, NP_KEY_TEXT, eval_data, "criteo:PATH, bin:PATH or none"),
    INT_KEY("epochs", "data", "E", "1",
            "passes over file data; --steps 0 trains until the last one ends", NULL, epochs, 1,
            1000000, "an integer >= 1"),
    INT_KEY("shuffle-buffer", "data", "K", "0",
            "file data: each record read replaces one drawn at random from a\n"
            "pool of K, which trains next; 0 = file order",
            NULL, shuffle_buffer, 0, 1L << 26, "an integer in [0, 2^26]"),
    INT_KEY("eval-interval", "data", "N", "0",
            "evaluate every N steps during training too; 0 = at the end only", NULL,
            eval_interval, 0, LONG_MAX, "an integer >= 0 (0: at the end only)"),
    INT_KEY("eval-samples", "data", "N", "16384", "cap on held-out records evaluated", NULL,
            eval_samples, 0, 1L << 30, "an integer in [0, 2^30]"),
    REAL_KEY("zipf", "data", "A", "1.05", "synthetic key popularity exponent", NULL, zipf, 0.0,
             10.0, 0, "a number in [0, 10]"),
    INT_KEY("hot", "data", "K", "1", "synthetic mean keys per sample and table", NULL, hot, 0,
            4096, "an integer in [0, 4096]"),
    INT_KEY("groups", "data", "N", "0",
            "synthetic latent groups sharing keys across tables; 0 = none", NULL, groups, 0,
            1L << 20, "an integer in [0, 2^20] (0: independent tables)"),

    ENUM_KEY("model", "model", "dlrm|dcnv2", "dlrm",
             "DLRM (dot interaction) or DCN-v2 (cross layers + deep MLP)", "model", model,
             model_names),
    INT_KEY("tables", "model", "T", "26", "embedding tables", "tables", tables, 1, NP_MAX_TABLES,
            "an integer in [1, 1024]"),
    CUSTOM_KEY("rows", "model", "N[,N...]", "20000",
               "rows per table, one value or one per table", NULL, NP_KEY_LIST, rows,
               "row counts in [1, 2^40]: one value or a comma list, one per table, no trailing comma"),
    INT_KEY("dim", "model", "D", "16", "embedding dimension", "dim", dim, 1, 4096,
            "an integer in [1, 4096]"),
    CUSTOM_KEY("bottom", "model", "13-64-16", "13-64-16",
               "bottom MLP sizes, input first, last = dim", "bottom", NP_KEY_LIST, bottom,
               "layer sizes like 13-512-256-64-16 (input first, 2 to 17 sizes in [1, 65536])"),
    CUSTOM_KEY("top", "model", "64-1", "64-1", "top MLP output sizes, last = 1", "top",
               NP_KEY_LIST, top, "output sizes like 512-256-1 (1 to 16 sizes in [1, 65536], last 1)"),
    INT_KEY("cross-layers", "model", "L", "3", "dcnv2: cross layers on [bottom output || pooled]",
            NULL, cross_layers, 1, NP_MAX_LAYERS, "an integer in [1, 16]"),
    INT_KEY("cross-rank", "model", "R", "0", "dcnv2: 0 = full-rank W, R = W as U (D,R) V (R,D)",
            NULL, cross_rank, 0, 65536, "0 (full-rank) or a rank in [1, 65536]"),
    CUSTOM_KEY("deep", "model", "64", "64", "dcnv2: deep MLP output sizes beside the cross layers",
               NULL, NP_KEY_LIST, deep, "output sizes like 512-256 (1 to 16 sizes in [1, 65536])"),
    PATH_KEY("init-params", "model", "FILE",
             "start from a --dump-params file of the same model shape", init_params),

    INT_KEY("steps", "training", "N", "300", "optimizer steps; 0 = until file data ends", NULL,
            steps, 0, LONG_MAX, "an integer >= 0"),
    INT_KEY("batch", "training", "G", "1024", "global batch size", NULL, batch, 1, 1L << 24,
            "an integer in [1, 2^24]"),
    REAL_KEY("lr", "training", "X", "0.1", "learning rate, dense and sparse", "lr", lr, 0.0, 1e6,
             1, "a number > 0 and <= 1e6"),
    ENUM_KEY("sparse-optim", "training", "sgd|rowwise-adagrad", "sgd",
             "optimizer of the embedding rows", "sparse_optim", sparse_optim, optim_names),
    REAL_KEY("adagrad-eps", "training", "X", "1e-8", "row-wise Adagrad epsilon", NULL, adagrad_eps,
             0.0, 1.0, 1, "a number in (0, 1]"),
    {KEY("seed", "training", "S", "42", "seed of data and initialisation", "seed", NP_KEY_INT),
     F_SEED, AT(seed), .expect = "an unsigned integer"},
    ENUM_KEY("engine", "training", "reference|starpu", "starpu",
             "the task-graph engine or the single-threaded reference", "engine", engine,
             engine_names),
    CUSTOM_KEY("sched", "training", "POLICY", "lws",
               "StarPU scheduling policy (lws, eager, prio, dmda, ...);\n"
               "STARPU_SCHED, when set, overrides it",
               "sched", NP_KEY_TEXT, sched, "a StarPU scheduler name such as lws, eager, prio, dmda"),
    INT_KEY("chunks", "training", "C", "4",
            "row chunks of a window computed in parallel; fixes the\n"
            "arithmetic, never the worker count",
            "chunks", chunks, 1, 64, "an integer in [1, 64]"),
    CUSTOM_KEY("windows", "training", "W|auto", "auto",
               "micro-batches per local batch (fwp, nestpipe); fixes the\n"
               "arithmetic; auto: 4 for fwp and nestpipe, else 1",
               "windows", NP_KEY_INT, windows, "an integer in [1, 64] or auto"),
    ENUM_KEY("cluster", "training", "keys|none", "keys",
             "samples to windows by key-centric clustering or in order", "cluster", cluster,
             cluster_names),
    ENUM_KEY("shard", "training", "row|table", "row", "how tables are split over ranks", "shard",
             shard, shard_names),
    ENUM_KEY("precision", "training", "fp32|bf16", "fp32",
             "dense products on bf16 inputs, fp32 accumulation and weights;\n"
             "needs a CPU with avx512_bf16",
             "precision", precision, precision_names),
    ENUM_KEY("pipeline", "training", "auto|sequential|dbp|fwp|nestpipe|async", "auto",
             "how batches overlap; auto = dbp on one host, nestpipe\n"
             "across hosts; async is stale",
             "pipeline", pipeline, pipeline_names),
    ENUM_KEY("comm", "training", "mpi|nccl", "mpi",
             "backend of the row, gradient and dense exchanges; nccl: one GPU\n"
             "per rank, the CUDA flavour",
             NULL, comm, comm_names),
    REAL_KEY("rank-timeout", "training", "S", "300",
             "seconds a rank may fall silent before the job ends, naming it;\n"
             "0 = wait forever",
             NULL, rank_timeout, 0.0, 1e6, 0, "seconds, a number from 0 (off) to 1e6"),
    CUSTOM_KEY("gpus", "training", "N|all", "all",
               "CUDA devices each rank uses (the CUDA build); 0 = CPU only", "gpus",
               NP_KEY_TEXT, gpus, "all or an integer in [0, 64]"),
    CUSTOM_KEY("place", "training", "auto|KIND=ARCH,...", "auto",
               "pin node kinds (dense, pool, loss, update, all) to cpu or\n"
               "cuda for reproducible runs; auto: the scheduler picks",
               "place", NP_KEY_TEXT, place,
               "auto or KIND=ARCH pairs joined by ',' (KIND: dense, pool, loss, update, all; "
               "ARCH: cpu, cuda, auto)"),

    PATH_KEY("metrics-json", "output", "FILE", "write the run summary as JSON", metrics_json),
    PATH_KEY("trace", "output", "FILE", "write a Chrome trace JSON of every task (starpu engine)",
             trace),
    PATH_KEY("dump-params", "output", "FILE",
             "write the trained model (NPPARAMS format, docs/formats.md)", dump_params),
    PATH_KEY("log-json", "output", "FILE",
             "one JSON line per step (step, loss, samples/s) and the eval", log_json),
    INT_KEY("log-every", "output", "N", "50", "steps between progress lines when not on a terminal",
            NULL, log_every, 1, LONG_MAX, "an integer >= 1"),
    PATH_KEY("checkpoint-dir", "output", "DIR",
             "write checkpoints under DIR (every rank its shard, in parallel)", checkpoint_dir),
    INT_KEY("checkpoint-every", "output", "N", "0",
            "steps between checkpoints; 0 = only on SIGINT/SIGTERM", NULL, checkpoint_every, 0,
            LONG_MAX, "an integer >= 0 (0: only on SIGINT/SIGTERM)"),
    INT_KEY("keep-checkpoints", "output", "K", "2", "whole checkpoints kept, older ones removed",
            NULL, keep_checkpoints, 1, 1000000, "an integer >= 1"),
    PATH_KEY("resume", "output", "DIR",
             "continue from the newest whole checkpoint in DIR, at any rank\n"
             "count; SIGINT/SIGTERM finish the step, checkpoint, exit 130/143",
             resume),
    BOOL_KEY("quiet", "output", "print only errors and warnings (StarPU's notices silenced)", NULL,
             quiet),
    BOOL_KEY("explain-placement", "output",
             "each rank prints where its workers, collectives and driver run", NULL,
             explain_placement),
};
#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

const np_config_key *np_config_key_at(int i) {
    return i >= 0 && i < N_KEYS ? &keys[i].k : NULL;
}

static const key_def *find_key(const char *name) {
    for (int i = 0; i < N_KEYS; i++)
        if (!strcmp(keys[i].k.name, name)) return &keys[i];
    return NULL;
}

static void expect_of(const key_def *d, char *buf, size_t n) {
    if (d->expect) {
        snprintf(buf, n, "%s", d->expect);
        return;
    }
    size_t at = 0; /* an enum: "a, b or c" */
    buf[0] = 0;
    for (int i = 0; d->names[i] && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i == 0 ? "" : d->names[i + 1] ? ", " : " or ",
                               d->names[i]);
}

/* Parses v into c by d; 0, or -1 when v is not a value of d. */
static int set_value(np_config *c, const key_def *d, const char *v) {
    char *at = (char *)c + d->off;
    long long i;
    double f;
    int b;
    switch (d->f) {
    case F_INT:
        if (parse_i64(v, d->ilo, d->ihi, &i)) return -1;
        if (d->size == sizeof(int)) {
            int x = (int)i;
            memcpy(at, &x, sizeof x);
        } else {
            long x = (long)i;
            memcpy(at, &x, sizeof x);
        }
        return 0;
    case F_SEED:
        return parse_u64(v, (uint64_t *)(void *)at);
    case F_REAL:
        if (parse_f64(v, d->flo, d->fhi, &f) || (d->lo_open && f <= d->flo)) return -1;
        memcpy(at, &f, sizeof f);
        return 0;
    case F_BOOL:
        if (parse_bool(v, &b)) return -1;
        memcpy(at, &b, sizeof b);
        return 0;
    case F_ENUM:
        for (int k = 0; d->names[k]; k++)
            if (!strcmp(v, d->names[k])) {
                memcpy(at, &k, sizeof k);
                return 0;
            }
        return -1;
    case F_PATH:
        return copy_path(at, v);
    case F_CUSTOM:
        return d->parse(c, v);
    }
    return -1;
}

np_status np_config_set(np_config *cfg, const char *key, const char *value, const char *where,
                        np_error *err) {
    if (!value) return np_err(err, NP_STATUS_BAD_INPUT, "%s: %s needs a value", where, key);
    const key_def *d = find_key(key);
    if (!d)
        return np_err(err, NP_STATUS_BAD_INPUT, "%s: unknown key '%s' (see nestpipe train --help)",
                      where, np_escape(key, strlen(key), (char[128]){0}, 128));
    np_config c = *cfg; /* work on a copy so cfg is unchanged on failure */
    if (set_value(&c, d, value)) {
        char expect[256];
        expect_of(d, expect, sizeof expect);
        return bad(err, where, key, value, expect);
    }
    *cfg = c;
    return NP_OK;
}

int np_config_get(const np_config *cfg, const char *key, char *buf, size_t n) {
    const key_def *d = find_key(key);
    if (!d || n == 0) return -1;
    const char *at = (const char *)cfg + d->off;
    int len = 0;
    switch (d->f) {
    case F_INT: {
        long long v;
        if (d->size == sizeof(int)) {
            int x;
            memcpy(&x, at, sizeof x);
            v = x;
        } else {
            long x;
            memcpy(&x, at, sizeof x);
            v = x;
        }
        len = snprintf(buf, n, "%lld", v);
        break;
    }
    case F_SEED: {
        uint64_t v;
        memcpy(&v, at, sizeof v);
        len = snprintf(buf, n, "%llu", (unsigned long long)v);
        break;
    }
    case F_REAL: {
        double v;
        memcpy(&v, at, sizeof v);
        len = snprintf(buf, n, "%.15g", v); /* the shortest of these that reads back */
        if (len > 0 && (size_t)len < n && strtod(buf, NULL) != v)
            len = snprintf(buf, n, "%.17g", v);
        char *e = strchr(buf, 'e'); /* 1e-08 -> 1e-8, as people write it */
        if (e && (e[1] == '-' || e[1] == '+')) {
            char *d = e + 2;
            while (d[0] == '0' && d[1])
                memmove(d, d + 1, strlen(d));
            len = (int)strlen(buf);
        }
        break;
    }
    case F_BOOL:
    case F_ENUM: {
        int v;
        memcpy(&v, at, sizeof v);
        if (d->f == F_ENUM) { /* a caller may have set any int: only the named ones print */
            int k = 0;
            while (d->names[k] && k < v)
                k++;
            if (v < 0 || !d->names[k]) return -1;
        }
        len = snprintf(buf, n, "%s", d->f == F_BOOL ? (v ? "1" : "0") : d->names[v]);
        break;
    }
    case F_PATH:
        len = snprintf(buf, n, "%s", at);
        break;
    case F_CUSTOM:
        d->show(cfg, buf, n);
        len = (int)strlen(buf);
        if ((size_t)len + 1 >= n) return -1; /* may have been cut */
        break;
    }
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

void np_config_defaults(np_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < N_KEYS; i++) /* the table's defaults parse (test_config checks it) */
        if (keys[i].k.dflt[0] && set_value(cfg, &keys[i], keys[i].k.dflt)) abort();
    /* not keys: set by the launcher */
    cfg->rank = 0;
    cfg->ranks = 1;
    cfg->local_rank = 0;
    cfg->local_ranks = cfg->nodes = 1;
}
/* ---------------------------------------------------------------- INI files */

typedef struct load_ctx {
    np_config *cfg;
    const char *path;
    np_error first; /* message of the first failing line, without its line number */
    int failed;
} load_ctx;

static int ini_handler_fn(void *user, const char *section, const char *name, const char *value) {
    load_ctx *ctx = user;
    if (ctx->failed) return 0;
    if (section[0] && strcmp(section, "nestpipe")) {
        np_err(&ctx->first, NP_STATUS_BAD_INPUT,
               "unknown section [%s] (keys go at the top or under [nestpipe])",
               np_escape(section, strlen(section), (char[128]){0}, 128));
        ctx->failed = 1;
        return 0;
    }
    /* an inline comment: '#' or ';' after whitespace ends the value (inih itself strips only
     * ';'), so `steps = 2 # two steps` reads 2 */
    char v[NP_PATH_MAX + 64];
    snprintf(v, sizeof v, "%s", value);
    for (char *p = v; *p; p++)
        if ((*p == '#' || *p == ';') && p > v && (p[-1] == ' ' || p[-1] == '\t')) {
            *p = 0;
            break;
        }
    for (size_t n = strlen(v); n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t');)
        v[--n] = 0;
    np_error e;
    if (np_config_set(ctx->cfg, name, v, "", &e) != NP_OK) {
        /* drop the empty "where" prefix ": " that np_config_set put in front */
        snprintf(ctx->first.msg, sizeof ctx->first.msg, "%s", e.msg + 2);
        ctx->failed = 1;
        return 0;
    }
    return 1;
}

/* libinih reads lines of at most its INI_MAX_LINE bytes (200 in Debian's build, which
 * cannot be changed from here) and parses the rest of a longer line as a line of its own:
 * the tail of a long comment became a setting. So lines come through this reader, which
 * sees the library's buffer size and stops at the first line that does not fit. */
typedef struct line_reader {
    FILE *f;
    char *line; /* getline's buffer */
    size_t cap;
    int line_no;  /* of the last line read */
    int too_long; /* line_no's length, when it did not fit; 0 otherwise */
    int max_len;  /* the longest line that fits, without its newline */
    int failed;   /* a read error (errno in err_no) */
    int err_no;
} line_reader;

static char *read_line(char *str, int num, void *stream) {
    line_reader *r = stream;
    errno = 0;
    ssize_t n = getline(&r->line, &r->cap, r->f);
    if (n < 0) {
        if (ferror(r->f)) {
            r->failed = 1;
            r->err_no = errno;
        }
        return NULL;
    }
    r->line_no++;
    size_t len = (size_t)n;
    while (len && (r->line[len - 1] == '\n' || r->line[len - 1] == '\r'))
        len--;
    if (len + 2 > (size_t)num) { /* the text, a newline and the NUL must fit */
        r->too_long = (int)(len < INT_MAX ? len : INT_MAX);
        r->max_len = num - 2;
        return NULL;
    }
    memcpy(str, r->line, len);
    str[len] = '\n';
    str[len + 1] = 0;
    return str;
}

np_status np_config_load(np_config *cfg, const char *path, np_error *err) {
    np_config c = *cfg;
    load_ctx ctx = {.cfg = &c, .path = path};
    line_reader lr = {.f = fopen(path, "r")};
    if (!lr.f)
        return np_err(err, NP_STATUS_IO, "cannot open config file %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(lr.f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(lr.f);
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "config file %s is a folder; give the path of an INI file", path);
    }
    int rc = ini_parse_stream(read_line, &lr, ini_handler_fn, &ctx);
    fclose(lr.f);
    free(lr.line);
    if (rc == -2) return np_err(err, NP_STATUS_NO_MEMORY, "out of memory reading %s", path);
    if (rc > 0) {
        if (ctx.failed)
            return np_err(err, NP_STATUS_BAD_INPUT, "%s:%d: %s", path, rc, ctx.first.msg);
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s:%d: syntax error: expected 'key = value', '[nestpipe]' or a comment",
                      path, rc);
    }
    if (lr.failed)
        return np_err(err, NP_STATUS_IO, "%s:%d: cannot read: %s", path, lr.line_no + 1,
                      strerror(lr.err_no));
    if (lr.too_long)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s:%d: line of %d bytes; config lines may have at most %d (split the "
                      "line or shorten the comment)",
                      path, lr.line_no, lr.too_long, lr.max_len);
    *cfg = c;
    return NP_OK;
}

/* ---------------------------------------------------------------- cross-field checks */

/* Parameters of an MLP from `in` through sizes[0..n) (weights and biases), in double: the
 * sizes may multiply past any integer type. */
static double mlp_params(double in, const int *sizes, int n) {
    double p = 0;
    for (int i = 0; i < n; i++) {
        p += in * sizes[i] + sizes[i];
        in = sizes[i];
    }
    return p;
}

/* The dense parameters of the config's model graph (model/graph.c builds the same). */
static double dense_params(const np_config *c) {
    double p = mlp_params(c->bottom[0], c->bottom + 1, c->n_bottom - 1);
    if (c->model == NP_MODEL_DCNV2) {
        double d = (double)(c->tables + 1) * c->dim;
        double cross = c->cross_rank ? 2.0 * d * c->cross_rank + d : d * d + d;
        p += c->cross_layers * cross + mlp_params(d, c->deep, c->n_deep);
    }
    return p + mlp_params(np_config_top_input(c), c->top, c->n_top);
}

np_status np_config_check(const np_config *cfg, np_error *err) {
    const np_config *c = cfg;
    int last_bottom = c->bottom[c->n_bottom - 1];
    if (last_bottom != c->dim)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "bottom: last size %d must equal dim %d (the bottom output meets the "
                      "embeddings in the interaction)",
                      last_bottom, c->dim);
    if (c->top[c->n_top - 1] != 1)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "top: last size is %d, must be 1 (one logit per sample)",
                      c->top[c->n_top - 1]);
    if (c->n_rows != 1 && c->n_rows != c->tables)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "rows: %d values given for %d tables; give one value or one per table",
                      c->n_rows, c->tables);
    if (np_config_top_input(c) > 1 << 20)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "tables %d with dim %d make an interaction of %d features; too large",
                      c->tables, c->dim, np_config_top_input(c));
    if (c->model == NP_MODEL_DCNV2 && c->cross_rank >= (c->tables + 1) * c->dim)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "cross-rank: rank %d is not below the cross width (tables+1) x dim = %d; "
                      "use 0 for a full-rank W",
                      c->cross_rank, (c->tables + 1) * c->dim);
    if (c->data == NP_DATA_CRITEO && (c->tables != 26 || c->bottom[0] != 13))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "data criteo:%s: Criteo records have 13 dense and 26 categorical "
                      "features, but bottom starts with %d and tables is %d",
                      c->data_path, c->bottom[0], c->tables);
    if (c->checkpoint_every > 0 && !c->checkpoint_dir[0])
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "checkpoint-every: %ld steps, but no checkpoint-dir to write them to",
                      c->checkpoint_every);
    if (c->eval_data == NP_DATA_CRITEO && (c->tables != 26 || c->bottom[0] != 13))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "eval-data criteo:%s: Criteo records have 13 dense and 26 categorical "
                      "features, but bottom starts with %d and tables is %d",
                      c->eval_data_path, c->bottom[0], c->tables);
    if (c->ranks > 1 && c->engine != NP_ENGINE_STARPU)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "engine: the reference trainer runs in one process; run it without "
                      "mpirun or use --engine starpu with %d ranks",
                      c->ranks);
    if (c->comm == NP_COMM_NCCL) {
#ifndef NP_HAVE_CUDA
        return np_err(err, NP_STATUS_BAD_INPUT, "comm: nccl needs the CUDA flavour (docs/gpu.md)");
#else
        if (c->engine != NP_ENGINE_STARPU)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "comm: nccl moves the starpu engine's exchanges; the reference "
                          "trainer has none (use --engine starpu or --comm mpi)");
#endif
    }
    if (c->ranks > 1 && c->batch % c->ranks)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "batch: the global batch %ld is not divisible by %d ranks (each rank "
                      "takes batch/ranks samples); use a multiple of %d",
                      c->batch, c->ranks, c->ranks);
    long local = c->batch / c->ranks;
    int nwin = np_config_windows(c);
    if (c->engine == NP_ENGINE_STARPU && nwin == 1 && c->chunks > local)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "chunks: %d chunks of a local batch of %ld samples leave some empty; use "
                      "at most %ld",
                      c->chunks, local, local);
    if (c->engine == NP_ENGINE_STARPU && (long)nwin * c->chunks > local)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "chunks: %d windows of %d chunks of a local batch of %ld samples leave "
                      "some empty; use windows x chunks <= %ld",
                      nwin, c->chunks, local, local);
    if (c->engine == NP_ENGINE_STARPU && nwin * c->chunks > 64)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "chunks: %d windows of %d chunks make %d pieces; use windows x chunks "
                      "<= 64",
                      nwin, c->chunks, nwin * c->chunks);
    if (c->engine == NP_ENGINE_REFERENCE && c->pipeline != NP_PIPELINE_SEQUENTIAL &&
        c->pipeline != NP_PIPELINE_AUTO)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "pipeline: the reference trainer has no pipeline; use --engine starpu for "
                      "dbp, async, fwp or nestpipe");
    if (c->engine == NP_ENGINE_REFERENCE && c->gpus > 0)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "gpus: the reference trainer runs on the CPU only; use --engine starpu "
                      "for %d GPU%s",
                      c->gpus, c->gpus == 1 ? "" : "s");
    for (int k = 0; k < NP_PLACE_KINDS; k++)
        if (c->engine == NP_ENGINE_REFERENCE && c->place[k] == NP_ARCH_CUDA)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "place: the reference trainer runs on the CPU only; use --engine "
                          "starpu to place nodes on cuda");
    if (c->engine == NP_ENGINE_REFERENCE && c->trace[0])
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "trace: the reference engine runs no tasks to trace; use --engine starpu");
    if (c->data == NP_DATA_SYNTHETIC && c->epochs > 1)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "epochs: %d passes over synthetic data, which never ends; give --steps",
                      c->epochs);
    if (c->data == NP_DATA_SYNTHETIC && c->steps == 0)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "steps: 0 means 'until the data ends', but synthetic data never ends; "
                      "give a step count");
    /* memory: the tables (and Adagrad state) must fit in this machine's RAM */
    double bytes = 0;
    for (int t = 0; t < c->tables; t++) {
        double r = (double)np_config_rows(c, t);
        bytes += r * c->dim * 4.0;
        if (c->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD) bytes += r * 4.0;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes > (double)pages * (double)page * 0.9)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "rows/dim: the embedding tables need %.1f GiB but this machine has %.1f "
                      "GiB of memory; reduce rows or dim",
                      bytes / (1 << 30), (double)pages * page / (1 << 30));
    /* the dense layers: weights and their gradients at least (were an allocation failure,
     * exit 1, after the tables were built) */
    double dense = dense_params(c) * 8.0;
    if (pages > 0 && page > 0 && dense + bytes > (double)pages * (double)page * 0.9)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "model: the dense layers hold %.3g parameters, %.1f GiB with their "
                      "gradients, and the tables %.1f GiB, but this machine has %.1f GiB of "
                      "memory; reduce the layer sizes (bottom, top, deep, cross-rank)",
                      dense / 8.0, dense / (1 << 30), bytes / (1 << 30),
                      (double)pages * page / (1 << 30));
    return NP_OK;
}
