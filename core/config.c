/* Configuration: defaults, the one parser for every key (shared by config files and
 * command-line flags), INI loading through libinih, and cross-field checks.
 * Not here: what the values mean to training (model/, data/, graph/). */
#include <ctype.h>
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

void np_config_defaults(np_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->data = NP_DATA_SYNTHETIC;
    cfg->skip_bad_lines = 0;
    cfg->eval_every = 10;
    cfg->eval_samples = 16384;
    cfg->zipf = 1.05;
    cfg->hot = 1;
    cfg->tables = 26;
    cfg->n_rows = 1;
    cfg->rows[0] = 20000;
    cfg->dim = 16;
    cfg->n_bottom = 3;
    cfg->bottom[0] = 13;
    cfg->bottom[1] = 64;
    cfg->bottom[2] = 16;
    cfg->n_top = 2;
    cfg->top[0] = 64;
    cfg->top[1] = 1;
    cfg->model = NP_MODEL_DLRM;
    cfg->cross_layers = 3;
    cfg->cross_rank = 0;
    cfg->n_deep = 1;
    cfg->deep[0] = 64;
    cfg->steps = 300;
    cfg->batch = 1024;
    cfg->lr = 0.1;
    cfg->sparse_optim = NP_SPARSE_SGD;
    cfg->adagrad_eps = 1e-8;
    cfg->seed = 42;
    cfg->engine = NP_ENGINE_STARPU;
    cfg->pipeline = NP_PIPELINE_AUTO;
    snprintf(cfg->sched, sizeof cfg->sched, "lws");
    cfg->chunks = 4;
    cfg->windows = 0;
    cfg->cluster = 1;
    cfg->shard = NP_SHARD_ROW;
    cfg->rank = 0;
    cfg->ranks = 1;
    cfg->local_ranks = cfg->nodes = 1;
    cfg->quiet = 0;
    cfg->log_every = 50;
    cfg->rank_timeout = 300;
}

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

np_status np_config_set(np_config *cfg, const char *key, const char *value, const char *where,
                        np_error *err) {
    np_config c = *cfg; /* work on a copy so cfg is unchanged on failure */
    long long i;
    double f;
    if (!value) return np_err(err, NP_STATUS_BAD_INPUT, "%s: %s needs a value", where, key);

    if (!strcmp(key, "data")) {
        if (!strcmp(value, "synthetic")) {
            c.data = NP_DATA_SYNTHETIC;
            c.data_path[0] = 0;
        } else if (!strncmp(value, "criteo:", 7) && !copy_path(c.data_path, value + 7)) {
            c.data = NP_DATA_CRITEO;
        } else if (!strncmp(value, "bin:", 4) && !copy_path(c.data_path, value + 4)) {
            c.data = NP_DATA_BIN;
        } else {
            return bad(err, where, key, value, "synthetic, criteo:PATH or bin:PATH");
        }
    } else if (!strcmp(key, "skip-bad-lines")) {
        if (parse_bool(value, &c.skip_bad_lines)) return bad(err, where, key, value, "0 or 1");
    } else if (!strcmp(key, "eval-every")) {
        if (parse_i64(value, 0, LONG_MAX, &i) || i == 1)
            return bad(err, where, key, value,
                       "0 (no held-out split) or an integer >= 2 (every N-th record held out)");
        c.eval_every = (long)i;
    } else if (!strcmp(key, "eval-samples")) {
        if (parse_i64(value, 0, 1L << 30, &i))
            return bad(err, where, key, value, "an integer in [0, 2^30]");
        c.eval_samples = (long)i;
    } else if (!strcmp(key, "zipf")) {
        if (parse_f64(value, 0.0, 10.0, &f))
            return bad(err, where, key, value, "a number in [0, 10]");
        c.zipf = f;
    } else if (!strcmp(key, "hot")) {
        if (parse_i64(value, 0, 4096, &i))
            return bad(err, where, key, value, "an integer in [0, 4096]");
        c.hot = (int)i;
    } else if (!strcmp(key, "groups")) {
        if (parse_i64(value, 0, 1L << 20, &i))
            return bad(err, where, key, value, "an integer in [0, 2^20] (0: independent tables)");
        c.groups = (long)i;
    } else if (!strcmp(key, "tables")) {
        if (parse_i64(value, 1, NP_MAX_TABLES, &i))
            return bad(err, where, key, value, "an integer in [1, 1024]");
        c.tables = (int)i;
    } else if (!strcmp(key, "rows")) {
        int n = 0;
        const char *p = value;
        char buf[32];
        while (*p) {
            size_t len = strcspn(p, ",");
            if (len == 0 || len >= sizeof buf || n >= NP_MAX_TABLES)
                return bad(err, where, key, value, "a row count or a comma list, one per table");
            memcpy(buf, p, len);
            buf[len] = 0;
            if (parse_i64(buf, 1, 1LL << 40, &i))
                return bad(err, where, key, value, "row counts in [1, 2^40]");
            c.rows[n++] = i;
            p += len;
            if (*p == ',' && !*++p) return bad(err, where, key, value, "no trailing comma");
        }
        if (n == 0) return bad(err, where, key, value, "a row count");
        c.n_rows = n;
    } else if (!strcmp(key, "dim")) {
        if (parse_i64(value, 1, 4096, &i))
            return bad(err, where, key, value, "an integer in [1, 4096]");
        c.dim = (int)i;
    } else if (!strcmp(key, "bottom")) {
        if (parse_sizes(value, c.bottom, 2, NP_MAX_LAYERS + 1, &c.n_bottom))
            return bad(
                err, where, key, value,
                "layer sizes like 13-512-256-64-16 (input first, 2 to 17 sizes in [1, 65536])");
    } else if (!strcmp(key, "top")) {
        if (parse_sizes(value, c.top, 1, NP_MAX_LAYERS, &c.n_top))
            return bad(err, where, key, value,
                       "output sizes like 512-256-1 (1 to 16 sizes in [1, 65536], last 1)");
    } else if (!strcmp(key, "model")) {
        if (!strcmp(value, "dlrm"))
            c.model = NP_MODEL_DLRM;
        else if (!strcmp(value, "dcnv2"))
            c.model = NP_MODEL_DCNV2;
        else
            return bad(err, where, key, value, "dlrm or dcnv2");
    } else if (!strcmp(key, "cross-layers")) {
        if (parse_i64(value, 1, NP_MAX_LAYERS, &i))
            return bad(err, where, key, value, "an integer in [1, 16]");
        c.cross_layers = (int)i;
    } else if (!strcmp(key, "cross-rank")) {
        if (parse_i64(value, 0, 65536, &i))
            return bad(err, where, key, value, "0 (full-rank) or a rank in [1, 65536]");
        c.cross_rank = (int)i;
    } else if (!strcmp(key, "deep")) {
        if (parse_sizes(value, c.deep, 1, NP_MAX_LAYERS, &c.n_deep))
            return bad(err, where, key, value,
                       "output sizes like 512-256 (1 to 16 sizes in [1, 65536])");
    } else if (!strcmp(key, "init-params")) {
        if (copy_path(c.init_params, value)) return bad(err, where, key, value, "a file path");
    } else if (!strcmp(key, "steps")) {
        if (parse_i64(value, 0, LONG_MAX, &i))
            return bad(err, where, key, value, "an integer >= 0");
        c.steps = (long)i;
    } else if (!strcmp(key, "batch")) {
        if (parse_i64(value, 1, 1L << 24, &i))
            return bad(err, where, key, value, "an integer in [1, 2^24]");
        c.batch = (long)i;
    } else if (!strcmp(key, "lr")) {
        if (parse_f64(value, 0.0, 1e6, &f) || f <= 0)
            return bad(err, where, key, value, "a number > 0 and <= 1e6");
        c.lr = f;
    } else if (!strcmp(key, "sparse-optim")) {
        if (!strcmp(value, "sgd"))
            c.sparse_optim = NP_SPARSE_SGD;
        else if (!strcmp(value, "rowwise-adagrad"))
            c.sparse_optim = NP_SPARSE_ROWWISE_ADAGRAD;
        else
            return bad(err, where, key, value, "sgd or rowwise-adagrad");
    } else if (!strcmp(key, "adagrad-eps")) {
        if (parse_f64(value, 0.0, 1.0, &f) || f <= 0)
            return bad(err, where, key, value, "a number in (0, 1]");
        c.adagrad_eps = f;
    } else if (!strcmp(key, "seed")) {
        if (parse_u64(value, &c.seed)) return bad(err, where, key, value, "an unsigned integer");
    } else if (!strcmp(key, "engine")) {
        if (!strcmp(value, "reference"))
            c.engine = NP_ENGINE_REFERENCE;
        else if (!strcmp(value, "starpu"))
            c.engine = NP_ENGINE_STARPU;
        else
            return bad(err, where, key, value, "reference or starpu");
    } else if (!strcmp(key, "pipeline")) {
        static const char *names[] = {"sequential", "dbp", "async", "fwp", "nestpipe", "auto"};
        int found = -1;
        for (int k = 0; k < 6; k++)
            if (!strcmp(value, names[k])) found = k;
        if (found < 0)
            return bad(err, where, key, value, "auto, sequential, dbp, async, fwp or nestpipe");
        c.pipeline = (np_pipeline)found;
    } else if (!strcmp(key, "sched")) {
        size_t n = strlen(value);
        if (n == 0 || n >= sizeof c.sched ||
            strspn(value, "abcdefghijklmnopqrstuvwxyz0123456789-_") != n)
            return bad(err, where, key, value,
                       "a StarPU scheduler name such as lws, eager, prio, dmda");
        memcpy(c.sched, value, n + 1);
    } else if (!strcmp(key, "precision")) {
        if (!strcmp(value, "fp32"))
            c.precision = NP_PRECISION_FP32;
        else if (!strcmp(value, "bf16"))
            c.precision = NP_PRECISION_BF16;
        else
            return bad(err, where, key, value, "fp32 or bf16");
    } else if (!strcmp(key, "chunks")) {
        if (parse_i64(value, 1, 64, &i))
            return bad(err, where, key, value, "an integer in [1, 64]");
        c.chunks = (int)i;
    } else if (!strcmp(key, "windows")) {
        if (!strcmp(value, "auto"))
            c.windows = 0;
        else if (parse_i64(value, 1, 64, &i))
            return bad(err, where, key, value, "an integer in [1, 64] or auto");
        else
            c.windows = (int)i;
    } else if (!strcmp(key, "cluster")) {
        if (!strcmp(value, "none"))
            c.cluster = 0;
        else if (!strcmp(value, "keys"))
            c.cluster = 1;
        else
            return bad(err, where, key, value, "none or keys");
    } else if (!strcmp(key, "shard")) {
        if (!strcmp(value, "row"))
            c.shard = NP_SHARD_ROW;
        else if (!strcmp(value, "table"))
            c.shard = NP_SHARD_TABLE;
        else
            return bad(err, where, key, value, "row or table");
    } else if (!strcmp(key, "trace")) {
        if (copy_path(c.trace, value)) return bad(err, where, key, value, "a file path");
    } else if (!strcmp(key, "metrics-json")) {
        if (copy_path(c.metrics_json, value)) return bad(err, where, key, value, "a file path");
    } else if (!strcmp(key, "dump-params")) {
        if (copy_path(c.dump_params, value)) return bad(err, where, key, value, "a file path");
    } else if (!strcmp(key, "quiet")) {
        if (parse_bool(value, &c.quiet)) return bad(err, where, key, value, "0 or 1");
    } else if (!strcmp(key, "explain-placement")) {
        if (parse_bool(value, &c.explain_placement))
            return bad(err, where, key, value, "0 or 1");
    } else if (!strcmp(key, "log-every")) {
        if (parse_i64(value, 1, LONG_MAX, &i))
            return bad(err, where, key, value, "an integer >= 1");
        c.log_every = (long)i;
    } else if (!strcmp(key, "rank-timeout")) {
        if (parse_f64(value, 0, 1e6, &f))
            return bad(err, where, key, value, "seconds, a number from 0 (off) to 1e6");
        c.rank_timeout = f;
    } else {
        return np_err(err, NP_STATUS_BAD_INPUT, "%s: unknown key '%s' (see nestpipe train --help)",
                      where, np_escape(key, strlen(key), (char[128]){0}, 128));
    }
    *cfg = c;
    return NP_OK;
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
    if (c->ranks > 1 && c->engine != NP_ENGINE_STARPU)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "engine: the reference trainer runs in one process; run it without "
                      "mpirun or use --engine starpu with %d ranks",
                      c->ranks);
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
    if (c->engine == NP_ENGINE_REFERENCE && c->trace[0])
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "trace: the reference engine runs no tasks to trace; use --engine starpu");
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
