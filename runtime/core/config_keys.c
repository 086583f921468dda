/* Configuration keys: the one table of every key (name, section, default, help, how its
 * value is stored), and the calls over it: np_config_defaults, np_config_set (the single
 * place a value is parsed), np_config_get, np_config_key_at; and the derived settings
 * (pipeline, windows, rows, dense width).
 * Not here: the value parsers (config_values.c), files (config_file.c), checks across keys
 * (config_check.c). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/config_impl.h"
#include "runtime/core/shard.h"
#include "runtime/core/util.h"

int np_config_top_input(const np_config *cfg) {
    int t1 = np_config_slots(cfg) + 1;
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

long np_config_bucket_floats(const np_config *cfg) {
    return cfg->comm == NP_COMM_NCCL ? 0 : cfg->allreduce_bucket * (1024 / (long)sizeof(float));
}

int np_config_dense(const np_config *cfg) {
    return cfg->dense_features > 0 ? cfg->dense_features : cfg->bottom[0];
}

int np_config_seq_slots(const np_config *cfg) {
    return cfg->seq_len > 0 ? cfg->seq_len + cfg->seq_negatives : 0;
}

int np_config_slots(const np_config *cfg) {
    return np_slot_first(cfg->tables, np_config_seq_slots(cfg));
}

int np_config_slot(const np_config *cfg, int t) {
    return np_slot_first(t, np_config_seq_slots(cfg));
}

np_loss np_config_loss(const np_config *cfg) {
    if (cfg->loss != NP_LOSS_AUTO) return cfg->loss;
    return cfg->model == NP_MODEL_HSTU ? NP_LOSS_OUTPUT : NP_LOSS_BCE;
}

int64_t np_config_rows(const np_config *cfg, int t) {
    return cfg->n_rows == 1 ? cfg->rows[0] : cfg->rows[t];
}

#define AT(field) offsetof(np_config, field), sizeof(((np_config *)0)->field)
#define KEY(name, sec, arg, dflt, help, metric, type, run)                                     \
    {name, sec, arg, dflt, help, metric, type, run}
/* an integer field in [lo, hi] */
#define INT_KEY(name, sec, arg, dflt, help, metric, fld, lo, hi, exp_, run)                        \
    {KEY(name, sec, arg, dflt, help, metric, NP_KEY_INT, run), F_INT, AT(fld), .ilo = (lo),           \
     .ihi = (hi), .expect = (exp_)}
#define REAL_KEY(name, sec, arg, dflt, help, metric, fld, lo, hi, open, exp_, run)                 \
    {KEY(name, sec, arg, dflt, help, metric, NP_KEY_REAL, run), F_REAL, AT(fld), .flo = (lo),         \
     .fhi = (hi), .lo_open = (open), .expect = (exp_)}
#define ENUM_KEY(name, sec, arg, dflt, help, metric, fld, names_, run)                                \
    {KEY(name, sec, arg, dflt, help, metric, NP_KEY_TEXT, run), F_ENUM, AT(fld), .names = (names_)}
#define BOOL_KEY(name, sec, help, metric, fld, run)                                                   \
    {KEY(name, sec, NULL, "0", help, metric, NP_KEY_BOOL, run), F_BOOL, AT(fld), .expect = "0 or 1"}
#define PATH_KEY(name, sec, arg, help, fld, run)                                                      \
    {KEY(name, sec, arg, "", help, NULL, NP_KEY_TEXT, run), F_PATH, AT(fld), .expect = "a file path"}
#define CUSTOM_KEY(name, sec, arg, dflt, help, metric, type, fn, exp_, run)                         \
    {KEY(name, sec, arg, dflt, help, metric, type, run), F_CUSTOM, 0, 0, .parse = np_cfg_parse_##fn,         \
     .show = np_cfg_show_##fn, .expect = (exp_)}

/* Every key, in the help's order. The defaults are those of docs/cli.md. */
const key_def np_cfg_keys[] = {
    CUSTOM_KEY("data", "data", "synthetic|criteo:PATH|bin:PATH|movielens:PATH", "synthetic",
               "training data", NULL, NP_KEY_TEXT, data,
               "synthetic, criteo:PATH, bin:PATH or movielens:PATH", 0),
    BOOL_KEY("skip-bad-lines", "data",
             "skip and count malformed Criteo lines (default: stop at the first)", NULL,
             skip_bad_lines, 0),
    CUSTOM_KEY("eval-every", "data", "N", "10",
               "hold out every N-th record for eval; 0 = none", NULL, NP_KEY_INT, eval_every,
               "0 (no held-out split) or an integer >= 2 (every N-th record held out)", 0),
    CUSTOM_KEY("eval-data", "data", "criteo:PATH|bin:PATH|none", "none",
               "evaluate on this file (every record) instead of a held-out\n"
               "split; all training records then train",
               NULL, NP_KEY_TEXT, eval_data, "criteo:PATH, bin:PATH or none", 0),
    INT_KEY("epochs", "data", "E", "1",
            "passes over file data; --steps 0 trains until the last one ends", NULL, epochs, 1,
            1000000, "an integer >= 1", 0),
    INT_KEY("shuffle-buffer", "data", "K", "0",
            "file data: each record read replaces one drawn at random from a\n"
            "pool of K, which trains next; 0 = file order",
            NULL, shuffle_buffer, 0, 1L << 26, "an integer in [0, 2^26]", 0),
    INT_KEY("eval-interval", "data", "N", "0",
            "evaluate every N steps during training too; 0 = at the end only", NULL,
            eval_interval, 0, LONG_MAX, "an integer >= 0 (0: at the end only)", 1),
    INT_KEY("eval-samples", "data", "N", "16384", "cap on held-out records evaluated", NULL,
            eval_samples, 0, 1L << 30, "an integer in [0, 2^30]", 0),
    REAL_KEY("zipf", "data", "A", "1.05", "synthetic key popularity exponent", NULL, zipf, 0.0,
             10.0, 0, "a number in [0, 10]", 0),
    INT_KEY("hot", "data", "K", "1", "synthetic mean keys per sample and table", NULL, hot, 0,
            4096, "an integer in [0, 4096]", 0),
    INT_KEY("groups", "data", "N", "0",
            "synthetic latent groups sharing keys across tables; 0 = none", NULL, groups, 0,
            1L << 20, "an integer in [0, 2^20] (0: independent tables)", 0),

    ENUM_KEY("model", "model", "dlrm|dcnv2|hstu", "dlrm",
             "DLRM (dot interaction), DCN-v2 (cross layers + deep MLP) or\n"
             "HSTU (a generative sequence recommender over table 0's sequence)", "model", model,
             np_cfg_model_names, 0),
    INT_KEY("tables", "model", "T", "26", "embedding tables", "tables", tables, 1, NP_MAX_TABLES,
            "an integer in [1, 1024]", 0),
    CUSTOM_KEY("rows", "model", "N[,N...]", "20000",
               "rows per table, one value or one per table", NULL, NP_KEY_LIST, rows,
               "row counts in [1, 2^40]: one value or a comma list, one per table, no trailing comma", 0),
    INT_KEY("dim", "model", "D", "16", "embedding dimension", "dim", dim, 1, 4096,
            "an integer in [1, 4096]", 0),
    INT_KEY("seq-len", "model", "L", "0",
            "table 0 is a sequence of up to L keys, one embedding per\n"
            "position (0: a pooled bag like every table)",
            "seq_len", seq_len, 0, 4096, "an integer in [0, 4096] (0: no sequence)", 0),
    INT_KEY("seq-negatives", "model", "K", "0",
            "with seq-len: K negative items a sample, drawn by the sources\n"
            "and put before the history (table 0's first K slots)",
            "seq_negatives", seq_negatives, 0, 4096, "an integer in [0, 4096]", 0),
    INT_KEY("seq-clusters", "data", "C", "32",
            "synthetic sequences drift through C item clusters by a Markov\n"
            "chain (0: independent Zipf draws)",
            NULL, seq_clusters, 0, 1L << 20, "an integer in [0, 2^20]", 0),
    INT_KEY("hstu-blocks", "model", "B", "2", "hstu: HSTU blocks", NULL, hstu_blocks, 1,
            NP_MAX_LAYERS, "an integer in [1, 16]", 0),
    INT_KEY("hstu-heads", "model", "H", "2", "hstu: attention heads (dim must split into them)",
            NULL, hstu_heads, 1, 4096, "an integer in [1, 4096]", 0),
    ENUM_KEY("loss", "model", "auto|bce|output", "auto",
             "bce: sigmoid BCE of the logit; output: the output node is each\n"
             "sample's loss (auto: output for hstu, bce otherwise)",
             "loss", loss, np_cfg_loss_names, 0),
    CUSTOM_KEY("bottom", "model", "13-64-16", "13-64-16",
               "bottom MLP sizes, input first, last = dim", "bottom", NP_KEY_LIST, bottom,
               "layer sizes like 13-512-256-64-16 (input first, 2 to 17 sizes in [1, 65536])", 0),
    CUSTOM_KEY("top", "model", "64-1", "64-1", "top MLP output sizes, last = 1", "top",
               NP_KEY_LIST, top, "output sizes like 512-256-1 (1 to 16 sizes in [1, 65536], last 1)", 0),
    INT_KEY("cross-layers", "model", "L", "3", "dcnv2: cross layers on [bottom output || pooled]",
            NULL, cross_layers, 1, NP_MAX_LAYERS, "an integer in [1, 16]", 0),
    INT_KEY("cross-rank", "model", "R", "0", "dcnv2: 0 = full-rank W, R = W as U (D,R) V (R,D)",
            NULL, cross_rank, 0, 65536, "0 (full-rank) or a rank in [1, 65536]", 0),
    CUSTOM_KEY("deep", "model", "64", "64", "dcnv2: deep MLP output sizes beside the cross layers",
               NULL, NP_KEY_LIST, deep, "output sizes like 512-256 (1 to 16 sizes in [1, 65536])", 0),
    PATH_KEY("model-file", "model", "FILE",
             "the model's nodes from this file instead of --model\n"
             "(docs/layers.md \"Model files\")",
             model_file, 0),
    CUSTOM_KEY("plugin", "model", "LIB.so", "",
               "load layer kinds from this shared object (repeatable)", NULL, NP_KEY_TEXT, plugin,
               "the path of a shared object, or several joined by ',' with no blank (setting "
               "the key again adds them)", 0),
    CUSTOM_KEY("dense-features", "model", "N|auto", "auto",
               "dense features per sample; auto: the first --bottom size", NULL, NP_KEY_INT,
               dense_features, "auto or an integer in [1, 65536]", 0),
    PATH_KEY("init-params", "model", "FILE",
             "start from a --dump-params file of the same model shape", init_params, 0),

    INT_KEY("steps", "training", "N", "300", "optimizer steps; 0 = until file data ends", NULL,
            steps, 0, LONG_MAX, "an integer >= 0", 0),
    INT_KEY("batch", "training", "G", "1024", "global batch size", NULL, batch, 1, 1L << 24,
            "an integer in [1, 2^24]", 0),
    REAL_KEY("lr", "training", "X", "0.1", "learning rate, dense and sparse", "lr", lr, 0.0, 1e6,
             1, "a number > 0 and <= 1e6", 0),
    ENUM_KEY("sparse-optim", "training", "sgd|rowwise-adagrad", "sgd",
             "optimizer of the embedding rows", "sparse_optim", sparse_optim, np_cfg_optim_names, 0),
    REAL_KEY("adagrad-eps", "training", "X", "1e-8", "row-wise Adagrad epsilon", NULL, adagrad_eps,
             0.0, 1.0, 1, "a number in (0, 1]", 0),
    {KEY("seed", "training", "S", "42", "seed of data and initialisation", "seed", NP_KEY_INT, 0),
     F_SEED, AT(seed), .expect = "an unsigned integer"},
    ENUM_KEY("engine", "training", "reference|starpu", "starpu",
             "the task-graph engine or the single-threaded reference", "engine", engine,
             np_cfg_engine_names, 0),
    CUSTOM_KEY("sched", "training", "POLICY", "lws",
               "StarPU scheduling policy (lws, eager, prio, dmda, ...);\n"
               "STARPU_SCHED, when set, overrides it",
               "sched", NP_KEY_TEXT, sched, "a StarPU scheduler name such as lws, eager, prio, dmda", 0),
    ENUM_KEY("priorities", "training", "fixed|critical-path", "fixed",
             "task priorities: a constant per node kind, or each task's\n"
             "bottom level in a measured step's graph",
             "priorities", priorities, np_cfg_priorities_names, 0),
    INT_KEY("chunks", "training", "C", "4",
            "row chunks of a window computed in parallel; fixes the\n"
            "arithmetic, never the worker count",
            "chunks", chunks, 1, 64, "an integer in [1, 64]", 0),
    CUSTOM_KEY("windows", "training", "W|auto", "auto",
               "micro-batches per local batch (fwp, nestpipe); fixes the\n"
               "arithmetic; auto: 4 for fwp and nestpipe, else 1",
               "windows", NP_KEY_INT, windows, "an integer in [1, 64] or auto", 0),
    ENUM_KEY("cluster", "training", "keys|none", "keys",
             "samples to windows by key-centric clustering or in order", "cluster", cluster,
             np_cfg_cluster_names, 0),
    ENUM_KEY("shard", "training", "row|table|spread", "row",
             "how tables are split over ranks; spread: row-wise with the\n"
             "tables' hot rows R/T ranks apart", "shard",
             shard, np_cfg_shard_names, 0),
    ENUM_KEY("exchange", "training", "auto|rows|pooled", "auto",
             "embedding exchange: distinct rows, owner-pooled bag sums, or per segment\n"
             "the one with fewer bytes",
             "exchange", exchange, np_cfg_exchange_names, 0),
    ENUM_KEY("precision", "training", "fp32|bf16", "fp32",
             "dense products on bf16 inputs, fp32 accumulation and weights;\n"
             "needs a CPU with avx512_bf16",
             "precision", precision, np_cfg_precision_names, 0),
    ENUM_KEY("pipeline", "training", "auto|sequential|dbp|fwp|nestpipe|async", "auto",
             "how batches overlap; auto = dbp on one host, nestpipe\n"
             "across hosts; async is stale",
             "pipeline", pipeline, np_cfg_pipeline_names, 0),
    CUSTOM_KEY("split-rows", "training", "auto|on|off", "auto",
               "dbp across ranks: the next batch's first rows split at the\n"
               "batch boundary; auto: on for dbp on MPI, off under fwp",
               NULL, NP_KEY_TEXT, split_rows, "auto, on or off", 0),
    ENUM_KEY("a2a", "training", "auto|flat|hier", "auto",
             "the key, row and gradient All2Alls: within each host, then\n"
             "between hosts (hier), or flat; auto: hier across hosts of 4+ ranks",
             "a2a", a2a, np_cfg_a2a_names, 0),
    INT_KEY("ranks-per-host", "training", "G", "0",
            "declare pseudo-hosts of G consecutive ranks (tests, benches,\n"
            "the emulated link); 0 = the real hosts",
            "ranks_per_host", ranks_per_host, 0, 1 << 20, "an integer in [0, 1048576]", 0),
    INT_KEY("allreduce-bucket", "training", "KB", "25600",
            "dense gradients all-reduced together in buckets of at least KB\n"
            "kilobytes, in backward order; 0 = one all-reduce a layer",
            "allreduce_bucket", allreduce_bucket, 0, 1L << 30, "an integer in [0, 2^30]", 0),
    ENUM_KEY("comm", "training", "mpi|nccl", "mpi",
             "backend of the row, gradient and dense exchanges; nccl: one GPU\n"
             "per rank, the CUDA flavour",
             NULL, comm, np_cfg_comm_names, 0),
    REAL_KEY("rank-timeout", "training", "S", "300",
             "seconds a rank may fall silent before the job ends, naming it;\n"
             "0 = wait forever",
             NULL, rank_timeout, 0.0, 1e6, 0, "seconds, a number from 0 (off) to 1e6", 1),
    CUSTOM_KEY("gpus", "training", "N|all", "all",
               "CUDA devices each rank uses (the CUDA build); 0 = CPU only", "gpus",
               NP_KEY_TEXT, gpus, "all or an integer in [0, 64]", 0),
    CUSTOM_KEY("place", "training", "auto|KIND=ARCH,...", "auto",
               "pin node kinds (dense, pool, loss, update, all) to cpu or\n"
               "cuda for reproducible runs; auto: the scheduler picks",
               "place", NP_KEY_TEXT, place,
               "auto or KIND=ARCH pairs joined by ',' (KIND: dense, pool, loss, update, all; "
               "ARCH: cpu, cuda, auto)", 0),

    PATH_KEY("metrics-json", "output", "FILE", "write the run summary as JSON", metrics_json, 1),
    PATH_KEY("trace", "output", "FILE", "write a Chrome trace JSON of every task (starpu engine)",
             trace, 0),
    PATH_KEY("dump-params", "output", "FILE",
             "write the trained model (NPPARAMS format, docs/formats.md)", dump_params, 1),
    PATH_KEY("log-json", "output", "FILE",
             "one JSON line per step (step, loss, samples/s) and the eval", log_json, 1),
    INT_KEY("log-every", "output", "N", "50", "steps between progress lines when not on a terminal",
            NULL, log_every, 1, LONG_MAX, "an integer >= 1", 1),
    PATH_KEY("checkpoint-dir", "output", "DIR",
             "write checkpoints under DIR (every rank its shard, in parallel)", checkpoint_dir, 0),
    INT_KEY("checkpoint-every", "output", "N", "0",
            "steps between checkpoints; 0 = only on SIGINT/SIGTERM", NULL, checkpoint_every, 0,
            LONG_MAX, "an integer >= 0 (0: only on SIGINT/SIGTERM)", 1),
    INT_KEY("keep-checkpoints", "output", "K", "2", "whole checkpoints kept, older ones removed",
            NULL, keep_checkpoints, 1, 1000000, "an integer >= 1", 0),
    PATH_KEY("resume", "output", "DIR",
             "continue from the newest whole checkpoint in DIR, at any rank\n"
             "count; SIGINT/SIGTERM finish the step, checkpoint, exit 130/143",
             resume, 0),
    BOOL_KEY("quiet", "output", "print only errors and warnings (StarPU's notices silenced)", NULL,
             quiet, 0),
    BOOL_KEY("explain-placement", "output",
             "each rank prints where its workers, collectives and driver run", NULL,
             explain_placement, 0),
};
const int np_cfg_n_keys = (int)(sizeof np_cfg_keys / sizeof np_cfg_keys[0]);
#define N_KEYS np_cfg_n_keys
#define keys np_cfg_keys

const np_config_key *np_config_key_at(int i) {
    return i >= 0 && i < N_KEYS ? &keys[i].k : NULL;
}

const key_def *np_cfg_find_key(const char *name) {
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
        if (np_cfg_parse_i64(v, d->ilo, d->ihi, &i)) return -1;
        if (d->size == sizeof(int)) {
            int x = (int)i;
            memcpy(at, &x, sizeof x);
        } else {
            long x = (long)i;
            memcpy(at, &x, sizeof x);
        }
        return 0;
    case F_SEED:
        return np_cfg_parse_u64(v, (uint64_t *)(void *)at);
    case F_REAL:
        if (np_cfg_parse_f64(v, d->flo, d->fhi, &f) || (d->lo_open && f <= d->flo)) return -1;
        memcpy(at, &f, sizeof f);
        return 0;
    case F_BOOL:
        if (np_cfg_parse_bool(v, &b)) return -1;
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
        if (!v[0]) { /* "" unsets the path: a program can undo a config file's value */
            at[0] = 0;
            return 0;
        }
        return np_cfg_copy_path(at, v);
    case F_CUSTOM:
        return d->parse(c, v);
    }
    return -1;
}

np_status np_config_set(np_config *cfg, const char *key, const char *value, const char *where,
                        np_error *err) {
    if (!value) return np_err(err, NP_STATUS_BAD_INPUT, "%s: %s needs a value", where, key);
    const key_def *d = np_cfg_find_key(key);
    if (!d) {
        const char *near = np_config_closest_key(key);
        return np_err(err, NP_STATUS_BAD_INPUT, "%s: unknown key '%s' (%s%s%ssee nestpipe train --help)",
                      where, np_escape(key, strlen(key), (char[128]){0}, 128),
                      near ? "did you mean '" : "", near ? near : "", near ? "'? " : "");
    }
    np_config c = *cfg; /* work on a copy so cfg is unchanged on failure */
    if (set_value(&c, d, value)) {
        char expect[256];
        expect_of(d, expect, sizeof expect);
        /* a path without its kind: say which kind it likely is; a misspelt word, which */
        size_t len = strlen(value);
        int data = d->parse == np_cfg_parse_data, eval = d->parse == np_cfg_parse_eval_data;
        const char *word = data ? "synthetic" : "none";
        if ((data || eval) && !strchr(value, ':') && len && len < 200) {
            int bin = len > 4 && !strcmp(value + len - 4, ".bin");
            if (strchr(value, '/') || strchr(value, '.'))
                snprintf(expect + strlen(expect), sizeof expect - strlen(expect),
                         " (did you mean %s:%s?)", bin ? "bin" : "criteo", value);
            else if (np_closest_word(value, &word, 1))
                snprintf(expect + strlen(expect), sizeof expect - strlen(expect),
                         " (did you mean %s?)", word);
        }
        return np_cfg_bad(err, where, key, value, expect);
    }
    if (!strcmp(d->k.name, "sched")) /* the policy's origin, reported with it */
        snprintf(c.sched_from, sizeof c.sched_from, "%s", where ? where : "");
    *cfg = c;
    return NP_OK;
}

int np_config_is_set(const np_config *cfg, const char *key) {
    const key_def *d = np_cfg_find_key(key);
    if (!d) return -1;
    char v[NP_PATH_MAX + 64];
    if (np_config_get(cfg, key, v, sizeof v)) return 1; /* not printable: not the default */
    np_config dflt; /* the default as the key prints it (a "1e-8" default prints "1e-8") */
    np_config_defaults(&dflt);
    char w[NP_PATH_MAX + 64];
    if (np_config_get(&dflt, key, w, sizeof w)) return 1;
    return strcmp(v, w) != 0;
}

int np_config_get(const np_config *cfg, const char *key, char *buf, size_t n) {
    const key_def *d = np_cfg_find_key(key);
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

const char *np_config_closest_key(const char *typed) {
    const char *names[160];
    size_t n = 0;
    for (int i = 0; np_config_key_at(i) && n < sizeof names / sizeof *names; i++)
        names[n++] = np_config_key_at(i)->name;
    return np_closest_word(typed, names, n);
}
