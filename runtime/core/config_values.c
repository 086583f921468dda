/* Configuration values: the parsers every key's text goes through (integers, numbers,
 * booleans, layer sizes, paths) and the keys with a syntax of their own (data specs, rows,
 * windows, placement, ...), each with the function that prints it back.
 * Not here: which key is which (config_keys.c) or checks across keys (config_check.c). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/config_impl.h"
#include "runtime/core/util.h"

np_status np_cfg_bad(np_error *err, const char *where, const char *key, const char *value,
                     const char *expect) {
    char shown[256]; /* a value from a file: control bytes escaped, long ones cut */
    np_escape(value, strlen(value), shown, sizeof shown);
    return np_err(err, NP_STATUS_BAD_INPUT, "%s: bad value '%s' for %s: expected %s", where, shown,
                  key, expect);
}

int np_cfg_parse_i64(const char *s, long long lo, long long hi, long long *out) {
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

int np_cfg_parse_u64(const char *s, uint64_t *out) {
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

int np_cfg_parse_f64(const char *s, double lo, double hi, double *out) {
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

int np_cfg_parse_bool(const char *s, int *out) {
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
int np_cfg_parse_sizes(const char *s, int *out, int min_n, int max_n, int *n_out) {
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

int np_cfg_copy_path(char *dst, const char *src) {
    size_t n = strlen(src);
    if (n == 0 || n >= NP_PATH_MAX) return -1;
    memcpy(dst, src, n + 1);
    return 0;
}


const char *const np_cfg_data_names[] = {"synthetic", "criteo", "bin", "movielens", NULL};
const char *const np_cfg_model_names[] = {"dlrm", "dcnv2", "hstu", NULL};
const char *const np_cfg_loss_names[] = {"auto", "bce", "output", NULL};
const char *const np_cfg_optim_names[] = {"sgd", "rowwise-adagrad", NULL};
const char *const np_cfg_engine_names[] = {"reference", "starpu", NULL};
const char *const np_cfg_pipeline_names[] = {"sequential", "dbp", "async", "fwp",
                                             "nestpipe", "auto", NULL};
const char *const np_cfg_precision_names[] = {"fp32", "bf16", NULL};
const char *const np_cfg_cluster_names[] = {"none", "keys", NULL};
const char *const np_cfg_shard_names[] = {"row", "table", "spread", NULL};
const char *const np_cfg_exchange_names[] = {"auto", "rows", "pooled", NULL};
const char *const np_cfg_a2a_names[] = {"auto", "flat", "hier", NULL};
const char *const np_cfg_priorities_names[] = {"fixed", "critical-path", NULL};
const char *const np_cfg_comm_names[] = {"mpi", "nccl", NULL};

/* A data spec: NAME:PATH for a file format of np_cfg_data_names (criteo:PATH, bin:PATH,
 * movielens:PATH), or `none_word` (data: synthetic, eval-data: none) for the kind
 * NP_DATA_SYNTHETIC with no path. */
int np_cfg_parse_spec(np_data_kind *kind, char *path, const char *none_word, const char *v) {
    if (!strcmp(v, none_word)) {
        *kind = NP_DATA_SYNTHETIC;
        path[0] = 0;
        return 0;
    }
    for (int k = NP_DATA_SYNTHETIC + 1; np_cfg_data_names[k]; k++) {
        size_t n = strlen(np_cfg_data_names[k]);
        if (!strncmp(v, np_cfg_data_names[k], n) && v[n] == ':' && !np_cfg_copy_path(path, v + n + 1)) {
            *kind = (np_data_kind)k;
            return 0;
        }
    }
    return -1;
}
void np_cfg_show_spec(np_data_kind kind, const char *path, const char *none_word, char *buf,
                      size_t n) {
    if ((unsigned)kind >= sizeof np_cfg_data_names / sizeof *np_cfg_data_names - 1)
        snprintf(buf, n, "?");
    else if (kind == NP_DATA_SYNTHETIC)
        snprintf(buf, n, "%s", none_word);
    else
        snprintf(buf, n, "%s:%s", np_cfg_data_names[kind], path);
}
int np_cfg_parse_data(np_config *c, const char *v) {
    return np_cfg_parse_spec(&c->data, c->data_path, "synthetic", v);
}
void np_cfg_show_data(const np_config *c, char *buf, size_t n) {
    np_cfg_show_spec(c->data, c->data_path, "synthetic", buf, n);
}
int np_cfg_parse_eval_data(np_config *c, const char *v) {
    return np_cfg_parse_spec(&c->eval_data, c->eval_data_path, "none", v);
}
void np_cfg_show_eval_data(const np_config *c, char *buf, size_t n) {
    np_cfg_show_spec(c->eval_data, c->eval_data_path, "none", buf, n);
}

int np_cfg_parse_rows(np_config *c, const char *v) {
    int n = 0;
    const char *p = v;
    char buf[32];
    long long i;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof buf || n >= NP_MAX_TABLES) return -1;
        memcpy(buf, p, len);
        buf[len] = 0;
        if (np_cfg_parse_i64(buf, 1, 1LL << 40, &i)) return -1;
        c->rows[n++] = i;
        p += len;
        if (*p == ',' && !*++p) return -1;
    }
    if (n == 0) return -1;
    c->n_rows = n;
    return 0;
}
void np_cfg_show_rows(const np_config *c, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int t = 0; t < c->n_rows && at < n; t++)
        at += (size_t)snprintf(buf + at, n - at, t ? ",%lld" : "%lld", (long long)c->rows[t]);
}

void np_cfg_show_sizes(const int *s, int count, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < count && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, i ? "-%d" : "%d", s[i]);
}
int np_cfg_parse_bottom(np_config *c, const char *v) {
    return np_cfg_parse_sizes(v, c->bottom, 2, NP_MAX_LAYERS + 1, &c->n_bottom);
}
void np_cfg_show_bottom(const np_config *c, char *buf, size_t n) {
    np_cfg_show_sizes(c->bottom, c->n_bottom, buf, n);
}
int np_cfg_parse_top(np_config *c, const char *v) {
    return np_cfg_parse_sizes(v, c->top, 1, NP_MAX_LAYERS, &c->n_top);
}
void np_cfg_show_top(const np_config *c, char *buf, size_t n) {
    np_cfg_show_sizes(c->top, c->n_top, buf, n);
}
int np_cfg_parse_deep(np_config *c, const char *v) {
    return np_cfg_parse_sizes(v, c->deep, 1, NP_MAX_LAYERS, &c->n_deep);
}
void np_cfg_show_deep(const np_config *c, char *buf, size_t n) {
    np_cfg_show_sizes(c->deep, c->n_deep, buf, n);
}

int np_cfg_parse_eval_every(np_config *c, const char *v) {
    long long i;
    if (np_cfg_parse_i64(v, 0, LONG_MAX, &i) || i == 1) return -1;
    c->eval_every = (long)i;
    return 0;
}
void np_cfg_show_eval_every(const np_config *c, char *buf, size_t n) {
    snprintf(buf, n, "%ld", c->eval_every);
}

int np_cfg_parse_windows(np_config *c, const char *v) {
    long long i;
    if (!strcmp(v, "auto")) {
        c->windows = 0;
        return 0;
    }
    if (np_cfg_parse_i64(v, 1, 64, &i)) return -1;
    c->windows = (int)i;
    return 0;
}
void np_cfg_show_windows(const np_config *c, char *buf, size_t n) {
    if (c->windows)
        snprintf(buf, n, "%d", c->windows);
    else
        snprintf(buf, n, "auto");
}

int np_cfg_parse_sched(np_config *c, const char *v) {
    size_t n = strlen(v);
    if (n == 0 || n >= sizeof c->sched ||
        strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-_") != n)
        return -1;
    memcpy(c->sched, v, n + 1);
    return 0;
}
np_status np_config_sched_env(np_config *cfg, int *overrode, np_error *err) {
    if (overrode) *overrode = 0;
    const char *env = getenv("STARPU_SCHED");
    if (!env || !*env || !strcmp(env, "help") || !strcmp(env, cfg->sched)) return NP_OK;
    char was[sizeof cfg->sched], from[sizeof cfg->sched_from];
    snprintf(was, sizeof was, "%s", cfg->sched);
    snprintf(from, sizeof from, "%s", cfg->sched_from);
    np_status st = np_config_set(cfg, "sched", env, "STARPU_SCHED", err);
    if (st || !from[0]) return st;
    if (overrode) *overrode = 1;
    snprintf(cfg->sched_from, sizeof cfg->sched_from, "STARPU_SCHED, over %s from %.*s", was,
             (int)sizeof cfg->sched_from - 96, from);
    return NP_OK;
}

void np_cfg_show_sched(const np_config *c, char *buf, size_t n) {
    snprintf(buf, n, "%s", c->sched);
}

int np_cfg_parse_gpus(np_config *c, const char *v) {
    long long i;
    if (!strcmp(v, "all")) {
        c->gpus = -1;
        return 0;
    }
    if (np_cfg_parse_i64(v, 0, 64, &i)) return -1;
    c->gpus = (int)i;
    return 0;
}
void np_cfg_show_gpus(const np_config *c, char *buf, size_t n) {
    if (c->gpus < 0)
        snprintf(buf, n, "all");
    else
        snprintf(buf, n, "%d", c->gpus);
}

const char *const np_cfg_place_kinds[NP_PLACE_KINDS] = {"dense", "pool", "loss", "update"};
const char *const np_cfg_arch_names[] = {"auto", "cpu", "cuda", NULL};
/* "auto", or KIND=ARCH[,KIND=ARCH...] with KIND one of np_cfg_place_kinds or "all" (every kind),
 * ARCH one of np_cfg_arch_names; later items win. */
int np_cfg_parse_place(np_config *c, const char *v) {
    np_arch p[NP_PLACE_KINDS] = {0};
    if (strcmp(v, "auto")) {
        const char *s = v;
        for (;;) {
            size_t len = strcspn(s, ","), eq = strcspn(s, "=");
            if (eq >= len) return -1;
            int kind = -1, arch = -1;
            for (int k = 0; k < NP_PLACE_KINDS; k++)
                if (strlen(np_cfg_place_kinds[k]) == eq && !strncmp(s, np_cfg_place_kinds[k], eq)) kind = k;
            if (kind < 0 && !(eq == 3 && !strncmp(s, "all", 3))) return -1;
            for (int a = 0; np_cfg_arch_names[a]; a++)
                if (strlen(np_cfg_arch_names[a]) == len - eq - 1 && !strncmp(s + eq + 1, np_cfg_arch_names[a], len - eq - 1))
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
void np_cfg_show_place(const np_config *c, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < NP_PLACE_KINDS && at < n; k++)
        if (c->place[k] != NP_ARCH_AUTO && (unsigned)c->place[k] <= NP_ARCH_CUDA)
            at += (size_t)snprintf(buf + at, n - at, "%s%s=%s", at ? "," : "", np_cfg_place_kinds[k],
                                   np_cfg_arch_names[c->place[k]]);
    if (!at) snprintf(buf, n, "auto");
}

/* "plugin": each setting adds its paths (one, or several joined by ',', as print-config
 * writes them) to the ','-joined list; a path cannot hold ','. */
int np_cfg_parse_plugin(np_config *c, const char *v) {
    size_t have = strlen(c->plugin), n = strlen(v);
    if (!n || v[0] == ',' || v[n - 1] == ',' || strstr(v, ",,") || strstr(v, ", ") ||
        strstr(v, " ,") || isspace((unsigned char)v[0]) || have + 1 + n >= sizeof c->plugin)
        return -1;
    snprintf(c->plugin + have, sizeof c->plugin - have, "%s%s", have ? "," : "", v);
    return 0;
}
void np_cfg_show_plugin(const np_config *c, char *buf, size_t n) {
    snprintf(buf, n, "%s", c->plugin);
}

int np_cfg_parse_dense_features(np_config *c, const char *v) {
    long long i;
    if (!strcmp(v, "auto")) {
        c->dense_features = 0;
        return 0;
    }
    if (np_cfg_parse_i64(v, 1, 65536, &i)) return -1;
    c->dense_features = (int)i;
    return 0;
}
void np_cfg_show_dense_features(const np_config *c, char *buf, size_t n) {
    if (c->dense_features > 0)
        snprintf(buf, n, "%d", c->dense_features);
    else
        snprintf(buf, n, "auto");
}

int np_cfg_parse_split_rows(np_config *c, const char *v) {
    int b;
    if (!strcmp(v, "auto")) {
        c->split_rows = -1;
        return 0;
    }
    if (np_cfg_parse_bool(v, &b)) return -1;
    c->split_rows = b;
    return 0;
}
void np_cfg_show_split_rows(const np_config *c, char *buf, size_t n) {
    snprintf(buf, n, "%s", c->split_rows < 0 ? "auto" : c->split_rows ? "on" : "off");
}
