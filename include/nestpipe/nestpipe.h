/* nestpipe public API: configuration, data sources, model parameters and trainers.
 * Opaque handles here; their definitions live in the private headers of each module.
 *
 * Usage (one process, reference engine):
 *
 *     np_config cfg;
 *     np_error err = {0};
 *     np_config_defaults(&cfg);
 *     if (np_config_set(&cfg, "steps", "100", "example", &err) ||
 *         np_config_check(&cfg, &err)) { fprintf(stderr, "%s\n", err.msg); return 2; }
 *     np_source_t *train, *eval;
 *     np_source_open(&cfg, NP_SPLIT_TRAIN, &train, &err);   // checked the same way
 *     np_source_open(&cfg, NP_SPLIT_EVAL, &eval, &err);
 *     np_model_t *model;
 *     np_model_create(&cfg, &model, &err);
 *     np_trainer_t *tr;
 *     np_trainer_create(&cfg, model, &tr, &err);
 *     np_batch batch = {0};
 *     for (long s = 0; s < cfg.steps; s++) {
 *         if (np_source_next_batch(train, cfg.batch, &batch, &err) != NP_OK) break;
 *         double loss;
 *         np_trainer_step(tr, &batch, &loss, &err);
 *     }
 *     np_eval_result ev;
 *     np_evaluate(model, eval, &cfg, &ev, &err);
 *     np_batch_free(&batch); np_trainer_free(tr); np_model_free(model);
 *     np_source_free(train); np_source_free(eval);
 */
#ifndef NESTPIPE_NESTPIPE_H
#define NESTPIPE_NESTPIPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NP_NODISCARD __attribute__((warn_unused_result))
#else
#define NP_NODISCARD
#endif
/* The library's API: the only symbols libnestpipe.so exports (it is built with hidden
 * visibility; the static library keeps every symbol, for the project's own tests). */
#if defined(__GNUC__)
#define NP_API __attribute__((visibility("default")))
#else
#define NP_API
#endif

/* Status codes: 0 is success, failures are negative. */
typedef enum np_status {
    NP_OK = 0,
    NP_STATUS_BAD_INPUT = -1,   /* a config value, flag, file content or size is wrong */
    NP_STATUS_IO = -2,          /* a file could not be opened, read or written */
    NP_STATUS_NO_MEMORY = -3,   /* an allocation failed */
    NP_STATUS_END_OF_DATA = -4, /* a source has no full batch left (not an error for callers) */
    NP_STATUS_INTERNAL = -5,    /* a bug: an invariant of nestpipe itself was broken */
    NP_STATUS_UNSUPPORTED = -6, /* valid request that this build cannot serve */
} np_status;

/* Filled by every fallible function: one line saying what and where. */
typedef struct np_error {
    char msg[512];
} np_error;

/* Returns a static name for a status code ("ok", "bad input", ...). */
NP_API const char *np_status_name(np_status s);

#if defined(__GNUC__)
#define NP_FORMAT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define NP_FORMAT_PRINTF(fmt, args)
#endif

/* Formats a printf-style message into err (nothing when err is NULL) and returns status, so
 * code outside the library (a layer's shape function, a driver) can report like the library
 * does: `return np_error_set(err, NP_STATUS_BAD_INPUT, "gate: width %d", w);`. Messages
 * longer than np_error.msg are cut. */
NP_API np_status np_error_set(np_error *err, np_status status, const char *fmt, ...)
    NP_FORMAT_PRINTF(3, 4);

/* ---------------------------------------------------------------- output files
 *
 * np_outfile_open creates a temporary with a unique name beside PATH (so the rename stays
 * on one file system), named after the process that writes it: PATH.np-HOST-PID.XXXXXX
 * (mkstemp; PATH.XXXXXX where that name is too long), and opens it for writing; two runs
 * that write the same PATH never share a temporary. It first removes the temporaries of
 * PATH that processes of this host left when killed while writing it (their PID is gone),
 * saying so on stderr. np_outfile_commit flushes, fsyncs and renames the temporary to PATH,
 * or on any failure (also `failed` != 0: the caller's own write failed) removes it and
 * fills err with "WHAT: cannot write PATH: <reason>"; either way the file is closed and `o`
 * is cleared. np_outfile_discard removes the temporary (a NULL or cleared `o` is a no-op).
 * The file gets the mode a plain fopen would give (0666 & ~umask), not mkstemp's 0600. A
 * PATH that exists and is not a regular file (/dev/stdout, a FIFO) is written in place: it
 * cannot be replaced by a rename, and must not be. `what` names the output in messages
 * ("dump-params") and must outlive `o`. */
typedef struct np_outfile {
    FILE *f;          /* write here */
    char *tmp;        /* the temporary's name (owned); NULL when PATH is written in place */
    const char *path; /* the final name (borrowed) */
    const char *what; /* borrowed */
} np_outfile;
NP_NODISCARD NP_API np_status np_outfile_open(np_outfile *o, const char *path,
                                              const char *what, np_error *err);
NP_NODISCARD NP_API np_status np_outfile_commit(np_outfile *o, int failed, np_error *err);
NP_API void np_outfile_discard(np_outfile *o);
/* Makes SIGINT, SIGTERM and SIGHUP remove the temporaries of the np_outfiles open (at most
 * 32 at a time are tracked) before they do what they did before (end the process, mostly);
 * a signal ignored (nohup) stays ignored. For a program that does not handle these signals
 * itself; the command installs it for every command but train, which handles them. Once
 * per process; later calls are no-ops. */
NP_API void np_outfile_clean_on_signals(void);
/* Checks at start that PATH can be written as np_outfile_open will: creates a temporary
 * beside it and removes it (removing stale ones of dead processes too); a device or FIFO is
 * checked for write access. NP_STATUS_IO naming WHAT ("--dump-params") and PATH when not. */
NP_NODISCARD NP_API np_status np_outfile_probe(const char *path, const char *what,
                                               np_error *err);
/* 1 when a and b are the same file: one regular file by any name or link (the same device
 * and inode), or, when neither exists yet, the same name in the same folder once the
 * folders' links are resolved. Devices and FIFOs are never the same file (two outputs may
 * both be /dev/null). Empty paths: 0. */
NP_API int np_same_file(const char *a, const char *b);
/* NP_STATUS_BAD_INPUT, "OUT_WHAT OUT is the same file as IN_WHAT IN, which it would replace;
 * write it to another path", when np_same_file(out, in); NP_OK otherwise. Every
 * command checks its outputs against its inputs (and train its outputs against each other)
 * before it reads or writes anything. */
NP_NODISCARD NP_API np_status np_output_not_input(const char *out, const char *out_what,
                                                  const char *in, const char *in_what,
                                                  np_error *err);

/* Copies s into out (cap bytes, always NUL-terminated) with bytes that would garble a
 * one-line message escaped: control bytes and DEL as \xHH, a backslash as \\. Text from input
 * files goes through it before it reaches an error message. Returns out. */
NP_API char *np_escape(const char *s, size_t len, char *out, size_t cap);

/* For "did you mean": the word of words[0 .. n) nearest to typed, when it is near enough
 * to be a slip (at most one edit for words up to 5 bytes, two beyond; an edit inserts,
 * deletes or changes a byte or swaps two neighbours); NULL otherwise, or for typed itself.
 * NULL entries are skipped. Added in 0.6. */
NP_API const char *np_closest_word(const char *typed, const char *const *words, size_t n);

/* ---------------------------------------------------------------- configuration */

#define NP_MAX_LAYERS 16
#define NP_MAX_TABLES 1024
#define NP_PATH_MAX 1024

/* NP_DATA_MOVIELENS: added in 0.7 */
typedef enum np_data_kind {
    NP_DATA_SYNTHETIC,
    NP_DATA_CRITEO,
    NP_DATA_BIN,
    NP_DATA_MOVIELENS,
} np_data_kind;
typedef enum np_sparse_optim { NP_SPARSE_SGD, NP_SPARSE_ROWWISE_ADAGRAD } np_sparse_optim;
typedef enum np_engine { NP_ENGINE_REFERENCE, NP_ENGINE_STARPU } np_engine;
typedef enum np_shard {
    NP_SHARD_ROW,   /* row k of table t lives on rank (k + t) mod R, as local row k div R */
    NP_SHARD_TABLE, /* table t lives whole on rank t mod R */
    NP_SHARD_SPREAD, /* row k of table t on rank (k + t floor(R / T)) mod R: the tables' hot
                        rows apart (added in 0.8) */
} np_shard;
/* How a (window, table, owner) segment of the embedding exchange travels (key "exchange",
 * docs/pipeline.md "Rows or pooled sums"). */
typedef enum np_exchange {
    NP_EXCHANGE_AUTO,   /* per segment, the form with fewer bytes on the wire */
    NP_EXCHANGE_ROWS,   /* every distinct row a rank needs, and its gradient back */
    NP_EXCHANGE_POOLED, /* the owner's partial sum of each bag, one pooled gradient back */
} np_exchange;

/* How the data channel's All2Alls (keys, rows, gradients) go across hosts (key "a2a",
 * docs/scale.md "A two-level All2All"); every form moves the same bytes. Added in 0.8. */
typedef enum np_a2a_mode {
    NP_A2A_MODE_AUTO, /* hier when the ranks span two hosts or more (real or declared
                         pseudo-hosts) of 4 ranks or more each */
    NP_A2A_MODE_FLAT, /* one All2All over every rank */
    NP_A2A_MODE_HIER, /* within each host, then between hosts */
} np_a2a_mode;

/* Task priorities (key "priorities", docs/engine.md "Priorities"), for the policies that
 * honour them (prio, dmdas, lws, ...). */
typedef enum np_priorities {
    NP_PRIORITIES_FIXED,    /* one constant per node kind, plus earlier windows first */
    NP_PRIORITIES_CRITICAL, /* each task's bottom level in a measured step's graph */
} np_priorities;
typedef enum np_model_kind {
    NP_MODEL_DLRM,  /* bottom MLP, dot interaction with the pooled embeddings, top MLP */
    NP_MODEL_DCNV2, /* bottom MLP, cross layers beside a deep MLP on [bottom || pooled], top */
    NP_MODEL_HSTU,  /* HSTU blocks over table 0's sequence, next-item sampled softmax (0.7) */
} np_model_kind;
/* What the trainers minimise (key "loss"). Added in 0.7. */
typedef enum np_loss {
    NP_LOSS_AUTO,   /* output for --model hstu, bce otherwise */
    NP_LOSS_BCE,    /* sigmoid + binary cross-entropy of the output logit against the label */
    NP_LOSS_OUTPUT, /* the output node's value is each sample's loss (a loss kind: nextitem) */
} np_loss;
typedef enum np_precision {
    NP_PRECISION_FP32, /* every product in fp32 */
    NP_PRECISION_BF16, /* dense products on bf16 inputs, fp32 accumulation and weights */
} np_precision;
/* Where a kind of node runs (key "place"): wherever the scheduler picks among the workers
 * its codelet has (auto), or pinned to the CPU or CUDA workers (docs/gpu.md). */
typedef enum np_arch { NP_ARCH_AUTO, NP_ARCH_CPU, NP_ARCH_CUDA } np_arch;
typedef enum np_place_kind {
    NP_PLACE_DENSE,  /* the layers' forward and backward, and their gradient sums */
    NP_PLACE_POOL,   /* embedding-bag pooling, forward and backward */
    NP_PLACE_LOSS,   /* sigmoid + BCE, forward and backward */
    NP_PLACE_UPDATE, /* the dense optimizer step */
    NP_PLACE_KINDS
} np_place_kind;
typedef enum np_comm_kind {
    NP_COMM_MPI,  /* the graph's exchanges through MPI on host memory */
    NP_COMM_NCCL, /* rows, gradients and the dense all-reduce through NCCL, one GPU per rank */
} np_comm_kind;
typedef enum np_pipeline {
    NP_PIPELINE_SEQUENTIAL, /* batch t+1 starts after batch t ends */
    NP_PIPELINE_DBP,        /* dual-buffer pipelining: batches overlap, same model */
    NP_PIPELINE_ASYNC,      /* dbp without the sync: the stale baseline */
    NP_PIPELINE_FWP,        /* frozen-window pipelining: windows' exchanges overlap compute */
    NP_PIPELINE_NESTPIPE,   /* dbp + fwp */
    NP_PIPELINE_AUTO,       /* the default: dbp on one host, nestpipe across hosts */
} np_pipeline;

/* Every field has a config-file key and a flag of the same name (see docs/cli.md);
 * np_config_set() is the single place that parses and validates a value. */
typedef struct np_config {
    /* data */
    np_data_kind data; /* key "data": synthetic | criteo:PATH | bin:PATH */
    char data_path[NP_PATH_MAX];
    int skip_bad_lines; /* key "skip-bad-lines": 0|1 */
    long
        eval_every; /* key "eval-every": record i is held out when i % eval_every == eval_every-1 */
    long eval_samples; /* key "eval-samples": size cap of the held-out set */
    double zipf;       /* key "zipf": synthetic key popularity exponent (>= 0) */
    int hot;           /* key "hot": mean keys per sample and table (synthetic) */
    long groups;       /* key "groups": synthetic latent groups correlating keys
                          across tables; 0 = tables drawn independently */
    /* model */
    np_model_kind model;           /* key "model": dlrm | dcnv2 */
    int tables;                    /* key "tables" */
    int n_rows;                    /* values given for "rows": 1 (all tables alike) or tables */
    int64_t rows[NP_MAX_TABLES];   /* key "rows": one value for all tables or a comma list */
    int dim;                       /* key "dim": embedding dimension */
    int n_bottom;                  /* number of sizes in bottom (input size included) */
    int bottom[NP_MAX_LAYERS + 1]; /* key "bottom": e.g. 13-512-256-64-16; last == dim */
    int n_top;                     /* number of sizes in top (input size excluded) */
    int top[NP_MAX_LAYERS];        /* key "top": e.g. 512-256-1; last == 1 */
    int cross_layers;              /* key "cross-layers": DCN-v2 cross layers (1-16) */
    int cross_rank;                /* key "cross-rank": 0 = full-rank W, r = W as U (D,r) V (r,D) */
    int n_deep;                    /* number of sizes in deep */
    int deep[NP_MAX_LAYERS];       /* key "deep": DCN-v2 deep MLP output sizes, e.g. 512-256 */
    char init_params[NP_PATH_MAX]; /* key "init-params": start from this NPPARAMS dump */
    /* training */
    long steps;                   /* key "steps": optimizer steps (global batches) */
    long batch;                   /* key "batch": global batch size G */
    double lr;                    /* key "lr": learning rate, dense and sparse */
    np_sparse_optim sparse_optim; /* key "sparse-optim": sgd | rowwise-adagrad */
    double adagrad_eps;           /* key "adagrad-eps" */
    uint64_t seed;                /* key "seed" */
    np_engine engine;             /* key "engine": reference | starpu */
    np_pipeline pipeline;         /* key "pipeline": sequential, dbp, async, fwp, nestpipe */
    char sched[64];               /* key "sched": StarPU scheduling policy */
    int chunks;                   /* key "chunks": row chunks of a batch computed in parallel;
                                     fixes the arithmetic, so results never depend on workers;
                                     with windows, the chunks of each window */
    int windows;                  /* key "windows": micro-batches of a local batch (FWP); 0:
                                     auto (np_config_windows); fixes the arithmetic too */
    int cluster;                  /* key "cluster": none (0) | keys (1): how samples go to
                                     windows */
    np_precision precision;       /* key "precision": fp32 | bf16 (CPUs with avx512_bf16) */
    /* output */
    char metrics_json[NP_PATH_MAX]; /* key "metrics-json" */
    char dump_params[NP_PATH_MAX];  /* key "dump-params" */
    char trace[NP_PATH_MAX];        /* key "trace": Chrome trace JSON of every task (starpu) */
    /* distribution */
    np_shard shard;  /* key "shard": row | table | spread */
    int rank, ranks; /* this process and the job's size: set from MPI by the
                        launcher (np_comm), not config keys; 0 and 1 alone */
    int local_rank, local_ranks, nodes; /* the same per host, and the hosts: set by the
                                           launcher (np_dist_host); 0, 1, 1 alone */
    int quiet;       /* key "quiet": 0|1 */
    int explain_placement; /* key "explain-placement": 0|1, each rank prints its placement */
    long log_every;  /* key "log-every": steps between plain progress lines */
    /* added in 0.3 */
    np_data_kind eval_data;           /* key "eval-data": criteo:PATH | bin:PATH | none; */
    char eval_data_path[NP_PATH_MAX]; /* synthetic = none: evaluate on the held-out split */
    char log_json[NP_PATH_MAX];       /* key "log-json": one JSON line per step */
    long eval_interval;               /* key "eval-interval": steps between evaluations
                                         during training; 0 = at the end only */
    int epochs;                       /* key "epochs": passes over file data (train split) */
    long shuffle_buffer;              /* key "shuffle-buffer": records pooled to shuffle file
                                         data (train split); 0 = file order */
    /* checkpoints (docs/formats.md "Checkpoints"), added in 0.3 */
    char checkpoint_dir[NP_PATH_MAX]; /* key "checkpoint-dir": where checkpoints are written */
    long checkpoint_every;            /* key "checkpoint-every": steps between checkpoints;
                                         0 = only when stopped by SIGINT/SIGTERM */
    int keep_checkpoints;             /* key "keep-checkpoints": whole checkpoints kept (>= 1) */
    char resume[NP_PATH_MAX];         /* key "resume": continue from the newest whole
                                         checkpoint in this folder */
    double rank_timeout; /* key "rank-timeout": seconds a rank may stall the others; 0 off */
    /* GPUs (docs/gpu.md), added in 0.4 */
    int gpus;                       /* key "gpus": CUDA devices a rank uses; -1 = every
                                       visible one (0 in a CPU-only build); 0 = CPU only */
    np_arch place[NP_PLACE_KINDS];  /* key "place": e.g. dense=cuda,pool=cpu; auto */
    np_comm_kind comm;              /* key "comm": mpi | nccl (the CUDA flavour, one GPU per
                                       rank) */
    /* your own model (docs/layers.md), added in 0.5 */
    char model_file[NP_PATH_MAX]; /* key "model-file": the model's nodes from this file
                                     instead of the built-in "model" */
    char plugin[NP_PATH_MAX];     /* key "plugin": shared objects that register layer kinds,
                                     joined by ','; setting the key again adds to the list */
    int dense_features;           /* key "dense-features": dense features per sample; 0 =
                                     auto, the first "bottom" size */
    int split_rows;               /* key "split-rows": -1 auto, 0 off, 1 on: the first
                                     windows' rows of a batch split at the batch boundary
                                     (docs/pipeline.md "The batch boundary") */
    /* added in 0.6 */
    np_exchange exchange; /* key "exchange": auto | rows | pooled */
    np_priorities priorities; /* key "priorities": fixed | critical-path */
    /* not a key: where "sched" came from, as np_config_set and np_config_load record it:
       "" (the default), "--sched", "FILE:LINE" or "STARPU_SCHED" (np_train_run applies
       that variable like StarPU and says here what it overrode) */
    char sched_from[NP_PATH_MAX + 48];
    /* added in 0.7 */
    int seq_len; /* key "seq-len": table 0 is a sequence of at most seq_len keys, one
                    embedding per position (docs/model.md); 0 = a pooled bag like the rest */
    int seq_negatives; /* key "seq-negatives": K items the sources draw per sample, table
                          0's first K keys (its first K slots), before the history */
    int seq_clusters;  /* key "seq-clusters": synthetic sequences drift through this many
                          item clusters by a Markov chain (0: independent Zipf draws) */
    int hstu_blocks, hstu_heads; /* keys "hstu-blocks", "hstu-heads": --model hstu */
    np_loss loss;                /* key "loss" */
    /* added in 0.8 */
    np_a2a_mode a2a;    /* key "a2a": auto | flat | hier */
    int ranks_per_host; /* key "ranks-per-host": pseudo-hosts of G consecutive ranks for
                           the two-level All2All and the emulated link; 0: the real hosts */
    long allreduce_bucket; /* key "allreduce-bucket": KB of dense gradients all-reduced
                              together, in backward order; 0: one all-reduce a layer */
} np_config;

/* Fills cfg with the documented defaults (docs/cli.md). Never fails. */
NP_API void np_config_defaults(np_config *cfg);

/* Sets one key from its text value. `where` names the origin for error messages
 * ("config.ini:12", "--batch"). Unknown key or bad value -> NP_STATUS_BAD_INPUT with
 * err filled. cfg is unchanged on failure. */
NP_NODISCARD NP_API np_status np_config_set(np_config *cfg, const char *key, const char *value,
                                     const char *where, np_error *err);

/* STARPU_SCHED, when set (and not "help"), replaces cfg's policy as StarPU would: checked
 * like the "sched" key; sched_from then says "STARPU_SCHED", or "STARPU_SCHED, over POLICY
 * from ORIGIN" when it replaced a policy given by flag or file (then *overrode, which may be
 * NULL, is 1: worth a warning). np_train_run applies it; call it to show what a run would
 * use. Added in 0.6. */
NP_NODISCARD NP_API np_status np_config_sched_env(np_config *cfg, int *overrode, np_error *err);

/* Reads an INI file of `key = value` lines (keys as in np_config_set, no sections or a
 * [nestpipe] section). Stops at the first bad line and names it. */
NP_NODISCARD NP_API np_status np_config_load(np_config *cfg, const char *path, np_error *err);

/* The config keys, one table behind np_config_set, np_config_defaults, `train --help`,
 * `train --print-config` and the metrics JSON (docs/cli.md lists the same keys; a test
 * checks it). */
typedef enum np_key_type {
    NP_KEY_INT,  /* an integer */
    NP_KEY_REAL, /* a number */
    NP_KEY_BOOL, /* 0 or 1; a flag without a value (`--quiet`) */
    NP_KEY_TEXT, /* a word or a path (empty: unset) */
    NP_KEY_LIST, /* integers joined by '-' (layer sizes) or ',' (rows) */
} np_key_type;
typedef struct np_config_key {
    const char *name;    /* flag and config-file key */
    const char *section; /* "data", "model", "training" or "output" */
    const char *arg;     /* the value's placeholder in the help; NULL: a flag without value */
    const char *dflt;    /* the default, as a value np_config_set accepts; "" for none */
    const char *help;    /* one line of help; '\n' continues it on the next line */
    const char *metric;  /* the key's name in the metrics JSON; NULL: only under "config" */
    np_key_type type;
    /* 1: a key of the whole run that np_train_run honours (outputs, checkpoints, periodic
     * evaluation, progress, the watchdog); np_trainer_create refuses a config that sets one
     * to other than its default, since the step-level API would silently ignore it */
    int run_only;
} np_config_key;
/* Key i in the help's order, or NULL past the last. */
NP_API const np_config_key *np_config_key_at(int i);
/* The key nearest to a misspelt one (np_closest_word over the keys), NULL when none is near:
 * "unknown key 'setps' (did you mean 'steps'?)". Added in 0.6. */
NP_API const char *np_config_closest_key(const char *typed);
/* The value of `key` in cfg as text that np_config_set reads back to the same value.
 * Returns -1 for an unknown key or a buffer too small. */
NP_API int np_config_get(const np_config *cfg, const char *key, char *buf, size_t n);

/* Cross-field checks (sizes that must agree, data layout vs model). */
NP_NODISCARD NP_API np_status np_config_check(const np_config *cfg, np_error *err);

/* Number of inputs of the first top layer of the built-in models: dim + (T+1)T/2 for
 * dlrm; (T+1) dim + the last deep size for dcnv2. */
NP_API int np_config_top_input(const np_config *cfg);
/* Dense features per sample: "dense-features", or when it is auto the first "bottom" size
 * (what the data sources read and generate, and the width of NP_IN_DENSE). */
NP_API int np_config_dense(const np_config *cfg);
/* Slots of the pooled embeddings (NP_IN_POOLED is slots x dim wide): one per table, and
 * seq-negatives + seq-len for table 0 when it is a sequence (its keys in order, one slot
 * each, zeros past the sequence's end). np_config_slot gives table t's first slot. Added in
 * 0.7. */
NP_API int np_config_slots(const np_config *cfg);
NP_API int np_config_slot(const np_config *cfg, int t);
/* Slots of table 0 when it is a sequence: seq-negatives + seq-len (0 without one): the most
 * keys a bag of table 0 holds once the sources added the negatives. Added in 0.7. */
NP_API int np_config_seq_slots(const np_config *cfg);
/* The loss "auto" resolves to. Added in 0.7. */
NP_API np_loss np_config_loss(const np_config *cfg);
/* 1 when key `key` holds other than its default (-1 for an unknown key). */
NP_API int np_config_is_set(const np_config *cfg, const char *key);
/* Windows per local batch: "windows", or when it is 0 (auto) 4 for fwp and nestpipe and 1
 * otherwise. Modes match bit for bit only with the same windows, so compare with it set. */
NP_API int np_config_windows(const np_config *cfg);
/* The pipeline a config runs: "auto" resolved by where the ranks are (dbp when they share
 * one host, nestpipe across hosts); sequential for the reference trainer, which has none. */
NP_API np_pipeline np_config_pipeline(const np_config *cfg);
/* The floats of a dense all-reduce bucket ("allreduce-bucket" in floats; 0 under comm nccl,
 * whose all-reduce goes a layer at a time). Added in 0.8. */
NP_API long np_config_bucket_floats(const np_config *cfg);

/* Where this rank's StarPU workers, its collectives and its driver thread run, chosen from
 * the host's topology (hwloc) and the ranks sharing the host (the rules: docs/engine.md
 * "Placement"); the StarPU engine starts its workers that way. With bind_driver, the
 * calling thread is bound to the rank's cores now, so that the tables it creates next are
 * first touched on their NUMA node. Writes one line saying what was chosen and why. */
NP_NODISCARD NP_API np_status np_placement_explain(const np_config *cfg, int bind_driver,
                                                   char *line, size_t n, np_error *err);

/* Rows of table t (handles the single-value form of "rows"). */
NP_API int64_t np_config_rows(const np_config *cfg, int t);

/* ---------------------------------------------------------------- data */

/* A batch of samples; embedding keys are table-major CSR.
 * For table t, the bag of sample i holds keys[offsets[t*(n+1)+i] .. offsets[t*(n+1)+i+1]),
 * already reduced to row indices of table t (0 <= key < rows[t]). Bags may be empty. */
typedef struct np_batch {
    long n;            /* samples */
    int n_dense;       /* dense features per sample */
    int n_tables;      /* T */
    float *dense;      /* (n, n_dense) */
    float *label;      /* (n) 0 or 1 */
    uint32_t *offsets; /* (T, n+1) into keys */
    int64_t *keys;     /* (nnz) */
    size_t nnz;        /* keys in the batch */
    uint64_t first;    /* stream index of the first sample (diagnostics, slicing) */
    /* capacities, owned by the batch */
    long cap_n;
    size_t cap_nnz;
} np_batch;

/* Frees the arrays of a batch and zeroes it; NULL-safe. */
NP_API void np_batch_free(np_batch *b);

/* out = samples [lo, lo+n) of full (out grows as needed; offsets rebased to out's keys).
 * out->first is full->first + lo: a position, not the exact stream index when held-out
 * records fall inside the batch (np_source_next_slice gives the exact one for synthetic
 * data). A rank of R takes slice r*G/R of each global batch this way. */
NP_NODISCARD NP_API np_status np_batch_slice(const np_batch *full, long lo, long n, np_batch *out,
                                      np_error *err);

typedef enum np_split {
    NP_SPLIT_TRAIN, /* the records not held out (eval-every) */
    NP_SPLIT_EVAL,  /* the held-out records, at most eval-samples of them */
    NP_SPLIT_ALL,   /* every record in order, no hold-out, no cap: --eval-data, predict */
} np_split;

typedef struct np_source np_source_t;

/* Opens the configured data (synthetic, Criteo TSV or binary) for one split.
 * Files are streamed, never loaded whole. With "eval-data" set, NP_SPLIT_EVAL is every
 * record of that file and NP_SPLIT_TRAIN holds none out. */
NP_NODISCARD NP_API np_status np_source_open(const np_config *cfg, np_split split, np_source_t **out,
                                      np_error *err);

/* Reads the next n samples into b (reallocating it as needed).
 * TRAIN split: NP_STATUS_END_OF_DATA when fewer than n samples remain; nothing is consumed
 * (a later, smaller request still gets them). EVAL split: the last batch may be partial
 * (b->n < n), then END_OF_DATA. Malformed records: NP_STATUS_BAD_INPUT with
 * file:line:column. Errors stick: after a failure every later call fails the same way, so
 * a bad line is never silently passed over on retry. */
NP_NODISCARD NP_API np_status np_source_next_batch(np_source_t *src, long n, np_batch *b, np_error *err);

/* The next global batch of g samples, of which only samples [lo, lo+n) are returned in b:
 * a rank's slice. Synthetic data generates only the slice; files read the whole batch (its
 * records must be parsed and checked) and copy the slice. Same end-of-data rule as
 * np_source_next_batch for g. TRAIN split. */
NP_NODISCARD NP_API np_status np_source_next_slice(np_source_t *src, long g, long lo, long n, np_batch *b,
                                            np_error *err);

/* Records skipped so far with --skip-bad-lines. */
NP_API long np_source_skipped(const np_source_t *src);

NP_API void np_source_free(np_source_t *src);

/* Converts a Criteo TSV file to the binary format (docs/data.md), through OUT.tmp and a
 * rename, so a failed convert leaves no file. *n_written / *n_skipped (each may be NULL)
 * get the records written and lines skipped, partial counts on failure. */
NP_NODISCARD NP_API np_status np_convert_criteo(const char *tsv_path, const char *bin_path,
                                         int skip_bad_lines, long *n_written, long *n_skipped,
                                         np_error *err);

/* Converts a MovieLens ratings.dat to the binary format, the records `data =
 * movielens:PATH` reads with --seq-len seq_len (each user's last seq_len movies without the
 * last one, then with it; label 1, n_dense zero dense features as that source gives a model
 * of that bottom width, one table), through a temporary and a rename. `data = bin:OUT`
 * with --eval-every 2 and the same --seq-len then reads the very batches of the ratings
 * file (docs/data.md "MovieLens"). Added in 0.7.1. */
NP_NODISCARD NP_API np_status np_convert_movielens(const char *ml_path, const char *bin_path,
                                                   int seq_len, int n_dense, long *n_written,
                                                   np_error *err);

/* Writes records 0 .. n_records-1 of cfg's synthetic stream (every record, held-out ones
 * included, in stream order) to the binary format, as np_convert_criteo does (a temporary
 * and a rename). Training on `data = bin:PATH` then reads the very batches `data =
 * synthetic` gives under the same config (docs/data.md "Generated files"). */
NP_NODISCARD NP_API np_status np_generate_synthetic(const np_config *cfg, long n_records,
                                                    const char *bin_path, np_error *err);

/* ---------------------------------------------------------------- model */

typedef struct np_model np_model_t;

/* Allocates and initialises all parameters deterministically from cfg->seed, then loads
 * cfg's "init-params" dump when set (and "resume" is not). */
NP_NODISCARD NP_API np_status np_model_create(const np_config *cfg, np_model_t **out, np_error *err);
NP_API void np_model_free(np_model_t *m);

/* Writes the logical model in the NPPARAMS format (docs/formats.md). */
NP_NODISCARD NP_API np_status np_model_dump(const np_model_t *m, const char *path, np_error *err);
/* Loads an NPPARAMS dump into m (this rank's shard of the tables): the dump must hold the
 * same tensors with the same shapes, in order; the first one that differs is named in err.
 * Optimizer state starts at zero. The file is streamed into the model: after a failure the
 * model may hold part of it, so create it afresh before using it. */
NP_NODISCARD NP_API np_status np_model_load(np_model_t *m, const char *path, np_error *err);

/* Reading any NPPARAMS dump tensor by tensor: the one reader of --init-params, predict,
 * compare and export, so all of them accept and refuse the same files. Every check is made:
 * the magic and version 1; 1 to NP_PARAMS_MAX_TENSORS tensors, exactly as many as the
 * header says, and no byte after the last; names of 1-255 bytes with no control byte, none
 * given twice; 1-8 dims whose values fit in the bytes left; every value finite. Errors read
 * "WHAT PATH: tensor 3 (emb.0): ...", naming a non-finite value's element (and its row and
 * column in a matrix). The file is streamed, never read whole; a pipe or device works too
 * (its end decides where it ends). */
#define NP_PARAMS_MAX_TENSORS 100000
typedef struct np_params_reader np_params_reader;
typedef struct np_params_tensor {
    char name[256];
    int index;        /* 0 for the first tensor of the file */
    int ndim;         /* 1..8 */
    uint64_t dims[8]; /* row-major */
    uint64_t count;   /* values: the product of dims */
} np_params_tensor;
/* Opens path and checks its header; `what` ("compare") starts every message; both strings
 * must outlive the reader. */
NP_NODISCARD NP_API np_status np_params_open(const char *path, const char *what,
                                             np_params_reader **out, np_error *err);
/* Tensors the header announces. */
NP_API uint32_t np_params_count(const np_params_reader *r);
/* Skips what is left of the current tensor's values (checking them), then reads the next
 * tensor's header into t with *more = 1; after the last one, checks that nothing follows
 * and sets *more = 0. */
NP_NODISCARD NP_API np_status np_params_next(np_params_reader *r, np_params_tensor *t, int *more,
                                             np_error *err);
/* The current tensor's next n values (at most those left) into x; x NULL: skip them. */
NP_NODISCARD NP_API np_status np_params_read(np_params_reader *r, float *x, uint64_t n,
                                             np_error *err);
NP_API void np_params_close(np_params_reader *r); /* NULL is a no-op */

/* ---------------------------------------------------------------- training */

typedef struct np_trainer np_trainer_t;

/* Creates the configured engine over model m (borrowed, must outlive the trainer), for a
 * program that drives the steps itself. The keys only a whole run honours (outputs,
 * periodic checkpoints and evaluation, progress, the watchdog: np_config_key.run_only)
 * are refused when set, naming the key: np_train_run (nestpipe/train.h) runs such a job.
 * The checkpoint keys (checkpoint-dir, keep-checkpoints, resume) are np_ckpt_save's and
 * np_ckpt_load's (nestpipe/checkpoint.h). */
NP_NODISCARD NP_API np_status np_trainer_create(const np_config *cfg, np_model_t *m, np_trainer_t **out,
                                         np_error *err);

/* Finishes pending work and writes the outputs the engine owns (--trace). Call once after
 * the last step; the model is then up to date in memory. */
NP_NODISCARD NP_API np_status np_trainer_finish(np_trainer_t *tr, np_error *err);

/* One optimizer step on a global batch; *loss is the batch's mean BCE before the update.
 * The pipelined modes (dbp, async, nestpipe) look ahead at later batches: a step given
 * fewer than np_trainer_lookahead() + 1 batches says the data ends with the last of them,
 * so each later step must have one batch fewer; a step given more is refused, saying so. Under pipeline "auto" a first step given one batch runs the
 * pipeline without look-ahead instead (sequential, or fwp where auto picked nestpipe), so
 * np_trainer_step alone works and gives the same model; np_trainer_pipeline says what runs. */
NP_NODISCARD NP_API np_status np_trainer_step(np_trainer_t *tr, const np_batch *batch, double *loss,
                                       np_error *err);
/* Pipelined modes run the early stages of later batches while one trains: they want the
 * next np_trainer_lookahead() batches too. b[0] is the batch to train, b[1..n-1] the ones
 * after it as far as they are read (fewer near the end of the data); every b[i] must stay
 * valid until the step that trains it has returned. np_trainer_step(tr, b, ...) is
 * np_trainer_step_ahead(tr, &b, 1, ...). */
NP_NODISCARD NP_API np_status np_trainer_step_ahead(np_trainer_t *tr, const np_batch *const *b, int n,
                                             double *loss, np_error *err);
NP_API int np_trainer_lookahead(const np_trainer_t *tr);
/* The pipeline the trainer runs ("auto" resolved; sequential for the reference trainer). */
NP_API np_pipeline np_trainer_pipeline(const np_trainer_t *tr);
/* np_trainer_step_ahead in two halves: submit returns once the step's work is queued, so the
 * caller can read the next batch meanwhile; wait returns its loss. Alternate them. */
NP_NODISCARD NP_API np_status np_trainer_submit(np_trainer_t *tr, const np_batch *const *b, int n,
                                         np_error *err);
NP_NODISCARD NP_API np_status np_trainer_wait(np_trainer_t *tr, double *loss, np_error *err);
/* Rows refreshed by the dual-buffer sync so far (dbp); 0 in other modes. */
NP_API uint64_t np_trainer_synced_rows(const np_trainer_t *tr);
/* The embedding exchange's (window, table, owner) segments with keys for another rank routed
 * so far, and how many of them went pooled (key "exchange"); 0 and 0 for the reference. */
NP_API void np_trainer_exchange_segments(const np_trainer_t *tr, uint64_t *segments,
                                         uint64_t *pooled);

/* Bytes this rank sent so far: [0] keys (and counts), [1] embedding rows, [2] row
 * gradients, [3] dense all-reduce. All zero for the reference engine. */
NP_API void np_trainer_bytes(const np_trainer_t *tr, uint64_t out[4]);
/* The bytes of this rank's engine buffers for the batches (input slots, routing, the
 * embedding buffers and the exchanges' rows, dense gradients; docs/engine.md "Memory per
 * rank"): they follow what the rank sends and receives, not the rank count. 0 for the
 * reference engine. */
NP_API uint64_t np_trainer_buffer_bytes(const np_trainer_t *tr);
NP_API void np_trainer_free(np_trainer_t *tr);
/* A consistent model between steps: after np_trainer_wait (or np_trainer_step), hold waits
 * until every update of the steps waited for has written the parameters, tables and
 * optimizer state, and keeps later updates from writing them until release; tasks that
 * only read them (a later batch's lookup) keep running. Read the model (evaluate it, gather
 * it, save it) in between; submit nothing. No-ops for the reference engine. */
NP_API void np_trainer_hold(np_trainer_t *tr);
NP_API void np_trainer_release(np_trainer_t *tr);

/* The model's parameter tensors, in dump order: every node's ("<node>.<tensor>", e.g.
 * "top.0.weight"), then the tables ("emb.<t>"). np_model_tensor_info gives tensor i's name
 * (into name, name_cap bytes; NULL: not wanted), its dimensions (1 or 2) and shape (dims[1]
 * = 1 for a vector); NP_STATUS_BAD_INPUT for i out of range. Read the values with
 * np_dist_model_read (nestpipe/dist.h), which gathers the tables' shards. */
NP_API int np_model_tensor_count(const np_model_t *m);
NP_NODISCARD NP_API np_status np_model_tensor_info(const np_model_t *m, int i, char *name,
                                                   size_t name_cap, int *ndim, int64_t dims[2],
                                                   np_error *err);

/* Bytes of embedding tables (and optimizer state) this process holds: its shard. */
NP_API size_t np_model_table_bytes(const np_model_t *m);
/* Floating-point operations of the model's layers per sample, forward (backward = 0) or
 * backward, from each layer kind's flop count: the dense work a step does, for GFLOP/s.
 * Embedding pooling, the loss and the optimizers are not counted. */
NP_API double np_model_dense_flops(const np_model_t *m, int backward);

/* The kernels the dense layers' matrix products run on here, chosen at run time from the
 * CPU's features, e.g. "oneDNN 2.6.3, avx512_core_bf16 (matmul brg:avx512_core)". */
NP_API const char *np_dense_kernels(void);
/* The CUDA flavour (docs/gpu.md): "not built with CUDA", or the CUDA runtime and the
 * devices it sees, e.g. "CUDA runtime 13.0, driver present, 1 device: NVIDIA H200 (sm_90,
 * 140 GiB)". Asked once, on the first call. */
NP_API const char *np_cuda_info(void);

typedef struct np_eval_result {
    long n;         /* samples evaluated */
    double logloss; /* mean BCE (loss = output: the mean of the output, each sample's loss) */
    double auc;     /* exact ROC AUC, ties averaged; NaN if one class is absent or loss = output */
    /* added in 0.7: a model whose output is a nextitem loss predicts each sequence's last
     * item from the one before, ranked against every item of table 0 (docs/model.md);
     * NaN for other models */
    double hr10;   /* share of sequences whose last item ranks in the top 10 */
    double ndcg10; /* mean over the ranked sequences of 1 / log2(rank + 1) when rank <= 10,
                      else 0 (rank 1 = top) */
    long ranked;   /* sequences ranked (2 items or more) */
} np_eval_result;

/* Evaluates m on every remaining batch of src (forward only), in pieces of
 * NP_EVAL_PIECE samples whatever the batch size, so that np_predict on the same records
 * gives the same scores, bit for bit. */
#define NP_EVAL_PIECE 4096
NP_NODISCARD NP_API np_status np_evaluate(const np_model_t *m, np_source_t *src, const np_config *cfg,
                                   np_eval_result *out, np_error *err);
/* np_evaluate that also writes each record's score (the predicted click probability), one
 * per line in record order, to `scores` when it is not NULL. A write error is
 * NP_STATUS_IO. */
NP_NODISCARD NP_API np_status np_predict(const np_model_t *m, np_source_t *src, FILE *scores,
                                  np_eval_result *out, np_error *err);

/* Exact AUC of scores against 0/1 labels: Mann-Whitney U with tied scores averaged.
 * Returns NaN when all labels are equal. Sorts a private copy. */
NP_API double np_auc(const float *score, const float *label, long n);

#ifdef __cplusplus
}
#endif
#endif
