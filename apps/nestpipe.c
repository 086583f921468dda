/* The `nestpipe` command: `train` (config + flags -> training run -> report) and
 * `convert` (Criteo TSV -> binary). Exit codes: 0 ok, 2 bad input of any kind, 1 other
 * failures. All parsing of values is np_config_set's; this file only maps flags to keys. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "compare.h"
#include "metrics.h"
#include "trace_cmd.h"
#include "nestpipe/checkpoint.h"
#include "nestpipe/dist.h"
#include "nestpipe/nestpipe.h"
#include "nestpipe/trace.h"

/* batches held at once: the training one and up to 4 ahead (dbp), plus one being read */
#define NP_RING 6

/* `train --help`, made from the key table (np_config_key_at), so that every key has a
 * line and every default is the one np_config_defaults sets. */
static void train_help(FILE *out) {
    fputs("usage: nestpipe train [--config FILE] [flags]\n"
          "\n"
          "Trains a DLRM or DCN-v2 and reports loss and eval AUC. Flags override the config file; every\n"
          "flag is also a config-file key (key = value). Defaults in brackets.\n\n",
          out);
    const char *section = "";
    for (int i = 0; np_config_key_at(i); i++) {
        const np_config_key *k = np_config_key_at(i);
        if (strcmp(k->section, section)) fprintf(out, "%s:\n", section = k->section);
        char flag[96];
        int w = snprintf(flag, sizeof flag, "--%s%s%s", k->name, k->arg ? " " : "",
                         k->arg ? k->arg : "");
        if (w > 21) /* a long flag: its help on the next line */
            fprintf(out, "  %s\n%25s", flag, "");
        else
            fprintf(out, "  %-23s", flag);
        for (const char *p = k->help; *p; p++) /* '\n' continues in the help's column */
            if (*p == '\n')
                fprintf(out, "\n%25s", "");
            else
                fputc(*p, out);
        if (k->arg && k->dflt[0]) fprintf(out, " [%s]", k->dflt);
        fputc('\n', out);
    }
    fputs("  --config FILE          read keys from an INI file first (docs/cli.md)\n"
          "  --print-config         print the resulting configuration as a config file, then exit\n"
          "  --help                 this text\n",
          out);
}

/* `train --print-config`: every key = its value, a config file that --config reads back. */
/* A value a config line cannot carry as it is: a line break, blanks at either end (the
 * reader trims them), '#' or ';' after a blank (a comment there), or a line longer than
 * the reader takes (198 bytes). */
static int unwritable(const char *key, const char *v) {
    size_t n = strlen(v);
    if (strlen(key) + 3 + n > 198 || strpbrk(v, "\r\n")) return 1;
    if (n && (isspace((unsigned char)v[0]) || isspace((unsigned char)v[n - 1]))) return 1;
    for (size_t i = 1; i < n; i++)
        if ((v[i] == '#' || v[i] == ';') && (v[i - 1] == ' ' || v[i - 1] == '\t')) return 1;
    return 0;
}

/* Returns 0, or an exit code after naming the key whose value a config file cannot hold. */
static int print_config(const np_config *cfg, FILE *out) {
    for (int i = 0; np_config_key_at(i); i++) { /* first, so that nothing half is printed */
        char v[NP_PATH_MAX + 64];
        const char *key = np_config_key_at(i)->name;
        if (!np_config_get(cfg, key, v, sizeof v) && unwritable(key, v)) {
            char shown[160];
            fprintf(stderr,
                    "nestpipe: --print-config: the value of %s ('%s') cannot be written as a "
                    "config line (a line break, blanks at an end, '#' or ';' after a blank, or "
                    "over 198 bytes); give it as a flag\n",
                    key, np_escape(v, strlen(v), shown, sizeof shown));
            return EXIT_BAD_INPUT;
        }
    }
    fputs("# nestpipe train configuration (nestpipe train --config FILE reads it)\n", out);
    const char *section = "";
    for (int i = 0; np_config_key_at(i); i++) {
        const np_config_key *k = np_config_key_at(i);
        if (strcmp(k->section, section)) fprintf(out, "\n# %s\n", section = k->section);
        char v[NP_PATH_MAX + 64];
        if (np_config_get(cfg, k->name, v, sizeof v)) continue;
        if (!v[0]) {
            fprintf(out, "# %s =\n", k->name); /* unset: a commented-out line */
            continue;
        }
        fprintf(out, "%s = %s\n", k->name, v);
    }
    return 0;
}

static const char *main_help =
    "usage: nestpipe COMMAND [args]\n"
    "\n"
    "commands:\n"
    "  train [flags]                        train a model (nestpipe train --help)\n"
    "  convert IN.tsv OUT.bin [--skip-bad-lines]   Criteo TSV to nestpipe binary data\n"
    "  generate OUT.bin --samples N [flags] synthetic data to a binary file (generate --help)\n"
    "  predict --params P --data SPEC --out FILE   score records (nestpipe predict --help)\n"
    "  export MODEL.params OUT.npz          a --dump-params file as a NumPy archive\n"
    "  compare A B [--rtol 1e-4] [--atol 1e-5]    compare two --dump-params files\n"
    "  trace report FILE [--json]           overlap report of a --trace file\n"
    "  trace svg FILE OUT.svg | trace paje FILE OUT.paje   timeline picture, Paje export\n"
    "  check-layer --kind K --in W1,W2 [flags]   a layer kind's gradients (check-layer --help)\n"
    "  --version                            print the version\n";

static int fail(np_status st, const np_error *err) {
    return np_cli_fail(st, err);
}

static int usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "nestpipe: %s '%s' (see nestpipe train --help)\n", msg, arg);
    return EXIT_BAD_INPUT;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Flags without a value; everything else takes one ("--key value" or "--key=value").
 * -1: no such flag. */
static int is_switch(const char *key) {
    if (!strcmp(key, "print-config")) return 1;
    if (!strcmp(key, "config")) return 0;
    for (int i = 0; np_config_key_at(i); i++)
        if (!strcmp(np_config_key_at(i)->name, key)) return np_config_key_at(i)->arg == NULL;
    return -1;
}

/* Applies argv to cfg: --config first (so flags override it wherever they appear), then
 * every other flag in order. Returns 0 or an exit code. */
int np_cli_parse_train_args(int argc, char **argv, np_config *cfg, int *want_help,
                            int *want_print) {
    np_error err = {{0}};
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < argc; i++) {
            const char *a = argv[i];
            if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
                *want_help = 1;
                return 0;
            }
            if (strncmp(a, "--", 2) || !a[2]) return usage_error("unexpected argument", a);
            char key[64];
            const char *eq = strchr(a + 2, '=');
            size_t klen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            if (klen >= sizeof key) return usage_error("unknown flag", a);
            memcpy(key, a + 2, klen);
            key[klen] = 0;
            const char *value;
            int sw = is_switch(key);
            if (sw < 0) return usage_error("unknown flag", a); /* before taking its value */
            if (eq) {
                value = eq + 1;
            } else if (sw) {
                value = "1";
            } else {
                if (i + 1 >= argc) {
                    fprintf(stderr, "nestpipe: %s needs a value (see nestpipe train --help)\n", a);
                    return EXIT_BAD_INPUT;
                }
                value = argv[++i];
            }
            int is_config = !strcmp(key, "config");
            if (!strcmp(key, "print-config")) {
                if (eq) return usage_error("--print-config takes no value:", a);
                *want_print = 1;
            } else if (pass == 0 && is_config) {
                np_status st = np_config_load(cfg, value, &err);
                if (st) return fail(st, &err);
            } else if (pass == 1 && !is_config) {
                char where[80];
                snprintf(where, sizeof where, "--%s", key);
                np_status st = np_config_set(cfg, key, value, where, &err);
                if (st) {
                    if (strstr(err.msg, "unknown key")) return usage_error("unknown flag", a);
                    return fail(st, &err);
                }
            }
        }
    }
    return 0;
}

static void progress(const np_config *cfg, int tty, long step, long total, double loss, double sps,
                     double elapsed, int final) {
    if (cfg->quiet) return;
    /* step/total (no total with --steps 0), the loss (at the end: the summary's train_loss),
     * samples/s, and the time left, or at the end the time taken */
    char tot[32] = "", eta[48] = "";
    if (total > 0) snprintf(tot, sizeof tot, "/%ld", total);
    if (final)
        snprintf(eta, sizeof eta, "  took %.1fs", elapsed);
    else if (total > 0 && step > 0 && sps > 0) /* from the rate: a resumed run started late */
        snprintf(eta, sizeof eta, "  ETA %.0fs", (double)(total - step) * (double)cfg->batch / sps);
    if (tty) {
        fprintf(stderr, "\rstep %ld%s  %s %.5f  %.0f samples/s%s   ", step, tot,
                final ? "train_loss" : "loss", loss, sps, eta);
        if (final) fputc('\n', stderr);
        fflush(stderr);
    } else if (final || step % cfg->log_every == 0) {
        printf("step %ld%s  %s %.5f  samples/s %.0f%s\n", step, tot, final ? "train_loss" : "loss",
               loss, sps, eta);
        fflush(stdout);
    }
}

/* A number for a JSON line: JSON has no NaN or infinity. */
static void json_num(FILE *f, const char *key, double x) {
    if (isfinite(x))
        fprintf(f, ", \"%s\": %.9g", key, x);
    else
        fprintf(f, ", \"%s\": null", key);
}

/* One --log-json line: a step, or with ev the run's end and its evaluation (loss is then
 * the summary's train_loss). Flushed, so that `tail -f` follows the run. 0 or -1. */
static int log_line(FILE *f, long step, double loss, double sps, double seconds,
                    const np_eval_result *ev) {
    fprintf(f, "{\"step\": %ld", step);
    if (!ev || !isnan(seconds)) { /* an evaluation during training has only its figures */
        json_num(f, ev ? "train_loss" : "loss", loss);
        json_num(f, "samples_per_s", sps);
        json_num(f, "seconds", seconds);
    }
    if (ev) {
        fprintf(f, ", \"eval_samples\": %ld", ev->n);
        json_num(f, "eval_logloss", ev->logloss);
        json_num(f, "eval_auc", ev->auc);
    }
    fputs("}\n", f);
    return fflush(f) || ferror(f) ? -1 : 0;
}

/* SIGINT/SIGTERM: the step in flight finishes, the ranks agree to stop after it (the step's
 * outcome reduction carries the flag), a checkpoint is written when a folder is set, and
 * the run exits 128 + the signal. A second signal kills at once (SA_RESETHAND). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) {
    stop_signal = sig;
}

static void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* --eval-interval: the model after the step just waited for, held (no update writes it)
 * while rank 0 evaluates it on a fresh eval source: gathered first when there are several
 * ranks (collective). A failure is this rank's (the caller stops the job); ev is rank 0's. */
static np_status eval_now(np_dist_t *dist, const np_config *cfg, const np_config *ecfg,
                          np_split esplit, np_trainer_t *tr, np_model_t *model,
                          np_eval_result *ev, np_error *err) {
    np_model_t *full = NULL;
    np_source_t *src = NULL;
    memset(ev, 0, sizeof *ev);
    np_trainer_hold(tr);
    np_status st = cfg->ranks > 1 ? np_dist_gather_model(dist, model, &full, err) : NP_OK;
    if (!st && cfg->rank == 0 && !(st = np_source_open(ecfg, esplit, &src, err)))
        st = np_evaluate(full ? full : model, src, cfg, ev, err);
    np_trainer_release(tr);
    np_source_free(src);
    np_model_free(full);
    return st;
}

/* Rank r's message: prefixed with the rank when there are several. */
static int fail_rank(const np_config *cfg, np_status st, const np_error *err) {
    if (cfg->ranks > 1) {
        np_error e2;
        snprintf(e2.msg, sizeof e2.msg, "rank %d: %.480s", cfg->rank, err->msg);
        return fail(st, &e2);
    }
    return fail(st, err);
}

/* All ranks agree on a step's outcome: 0 ok, 1 end of data, 2 failed somewhere. A rank
 * that failed says why; the others learn that one did. */
static int agree(np_dist_t *dist, np_dist_watchdog_t *wd, int mine) {
    int64_t v = mine;
    np_dist_watchdog_progress(wd, -1, 1); /* waits for the other ranks */
    int failed = np_dist_max_i64(dist, &v, NULL) != NP_OK;
    np_dist_watchdog_progress(wd, -1, 0);
    return failed ? 2 : (int)v;
}

/* A set-up outcome, agreed by every rank before anything collective follows, so that a
 * failure on one rank (a file missing on one host) cannot leave the others waiting in the
 * next collective. A failure on every rank (the same flags and files everywhere) is
 * reported once, by rank 0; a failure on some ranks only by each of them, with its rank,
 * and rank 0 says that another rank failed. Returns 0 when every rank succeeded, else the
 * worst exit code, the same on every rank. */
static int setup_agree(np_dist_t *dist, const np_config *cfg, np_status st, const np_error *err) {
    int code = !st ? 0
               : st == NP_STATUS_BAD_INPUT || st == NP_STATUS_IO || st == NP_STATUS_UNSUPPORTED
                   ? EXIT_BAD_INPUT
                   : 1;
    int64_t failed = st != NP_OK, worst = code;
    if (np_dist_sum_i64(dist, &failed, NULL) || np_dist_max_i64(dist, &worst, NULL)) {
        fprintf(stderr, "nestpipe: rank %d: MPI failed while the ranks agreed on set-up\n",
                cfg->rank);
        np_dist_abort(dist, 1);
    }
    if (!failed) return 0;
    if (failed == cfg->ranks) {
        if (cfg->rank == 0) fail(st, err);
    } else if (st) {
        fail_rank(cfg, st, err);
    } else if (cfg->rank == 0) {
        fprintf(stderr, "nestpipe: %lld of %d ranks failed to set up; stopping (see their "
                        "messages)\n",
                (long long)failed, cfg->ranks);
    }
    return (int)worst;
}

/* Fault injection for the MPI tests: NP_TEST_KILL_RANK / NP_TEST_KILL_STEP make that rank
 * die (SIGKILL) before that step, as a crashed node would; NP_TEST_FAIL_RANK /
 * NP_TEST_FAIL_STEP make its step fail with an error instead, and NP_TEST_STALL_RANK /
 * NP_TEST_STALL_STEP make its driver sleep there for an hour, as a hung node would (for
 * the --rank-timeout watchdog). Returns 1 for a failure. */
static int maybe_die(const np_config *cfg, long step) {
    const char *r = getenv("NP_TEST_KILL_RANK"), *s = getenv("NP_TEST_KILL_STEP");
    if (r && s && atoi(r) == cfg->rank && atol(s) == step) raise(SIGKILL);
    r = getenv("NP_TEST_STALL_RANK");
    s = getenv("NP_TEST_STALL_STEP");
    if (r && s && atoi(r) == cfg->rank && atol(s) == step) sleep(3600);
    r = getenv("NP_TEST_FAIL_RANK");
    s = getenv("NP_TEST_FAIL_STEP");
    return r && s && atoi(r) == cfg->rank && atol(s) == step;
}

/* Reads global batches into the ring, every rank alike, agreeing on each one's outcome. */
typedef struct reader {
    const np_config *cfg;
    np_dist_t *dist;
    np_source_t *src;
    np_batch *local;  /* (NP_RING) this rank's slices of the global batches */
    long lo, local_n; /* this rank's slice */
    np_run_metrics *r;
    np_trainer_t *tr; /* a traced run records the reads as the driver's "data" tasks */
    np_dist_watchdog_t *wd; /* told when the reads wait for the other ranks */
    np_data_pos pos[NP_RING]; /* the source's position after each batch in the ring */
    long loaded;  /* batches read so far */
    int ended;    /* the data has no further full batch */
    np_status st; /* a failure, with err */
    np_error err;
} reader;

/* Reads until batch `upto` is in (or the data or --steps end). Returns 0, or -1 when a
 * rank failed (rd->st/err hold this rank's failure, NP_OK if it was another rank's). */
static int read_ahead(reader *rd, long upto) {
    const np_config *cfg = rd->cfg;
    while (!rd->ended && rd->loaded <= upto && (cfg->steps == 0 || rd->loaded < cfg->steps)) {
        np_batch *l = &rd->local[rd->loaded % NP_RING];
        double td = now_s(), c0 = np_trainer_clock_us(rd->tr);
        rd->st = np_source_next_slice(rd->src, cfg->batch, rd->lo, rd->local_n, l, &rd->err);
        rd->r->data_seconds += now_s() - td;
        if (!rd->st) np_trainer_trace_data(rd->tr, rd->loaded, c0, np_trainer_clock_us(rd->tr));
        int outcome = agree(rd->dist, rd->wd, rd->st == NP_OK                   ? 0
                                      : rd->st == NP_STATUS_END_OF_DATA ? 1
                                                                        : 2);
        if (outcome == 2) {
            if (rd->st == NP_STATUS_END_OF_DATA) rd->st = NP_OK;
            return -1;
        }
        if (outcome == 1) {
            rd->st = NP_OK;
            rd->ended = 1;
        } else {
            np_source_tell(rd->src, &rd->pos[rd->loaded % NP_RING]);
            rd->loaded++;
        }
    }
    return 0;
}

/* An output path, checked before the first step so that a typo does not cost a whole run:
 * its folder exists and is writable, and the file, if there, is a writable file. Nothing
 * is created or truncated here. */
static np_status check_output(const char *flag, const char *path, np_error *err) {
    if (!path[0]) return NP_OK;
    char dir[NP_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
        return np_error_set(err, NP_STATUS_IO, "--%s %s: the folder %s does not exist", flag,
                            path, dir);
    if (access(dir, W_OK))
        return np_error_set(err, NP_STATUS_IO, "--%s %s: the folder %s is not writable", flag,
                            path, dir);
    if (!stat(path, &sb)) {
        if (S_ISDIR(sb.st_mode))
            return np_error_set(err, NP_STATUS_IO, "--%s %s: is a folder, not a file", flag, path);
        if (access(path, W_OK))
            return np_error_set(err, NP_STATUS_IO, "--%s %s: the file is not writable", flag,
                                path);
    }
    return NP_OK;
}

/* --checkpoint-dir: a writable folder, or one rank 0 can create (its parent exists). */
static np_status check_ckpt_dir(const char *path, np_error *err) {
    struct stat sb;
    if (!path[0]) return NP_OK;
    if (!stat(path, &sb)) {
        if (!S_ISDIR(sb.st_mode))
            return np_error_set(err, NP_STATUS_IO, "--checkpoint-dir %s: not a folder", path);
        if (access(path, W_OK))
            return np_error_set(err, NP_STATUS_IO, "--checkpoint-dir %s: the folder is not writable",
                                path);
        return NP_OK;
    }
    return check_output("checkpoint-dir", path, err); /* not there yet: its parent's checks */
}

/* The losses a checkpoint keeps (the window train_loss averages), oldest first. */
static void keep_losses(np_ckpt_state *cs, const double *losses, long window, long steps) {
    long n = steps < window ? steps : window;
    if (n > NP_CKPT_LOSSES) n = NP_CKPT_LOSSES;
    cs->n_losses = (int)n;
    for (long i = 0; i < n; i++)
        cs->losses[i] = losses[(steps - n + i) % window];
}

static int cmd_train(np_dist_t *dist, int argc, char **argv) {
    np_config cfg;
    np_config_defaults(&cfg);
    cfg.rank = np_dist_rank(dist);
    cfg.ranks = np_dist_size(dist);
    np_dist_host(dist, &cfg.local_rank, &cfg.local_ranks, &cfg.nodes);
    int lead = cfg.rank == 0; /* rank 0 prints, evaluates and writes the outputs */
    int help = 0, print = 0;
    int rc = np_cli_parse_train_args(argc, argv, &cfg, &help, &print);
    /* the same flags on every rank, but a config file may differ (or be missing) on one
     * host: every rank learns whether parsing failed anywhere (each failed rank said why) */
    if (cfg.ranks > 1) {
        int64_t v = rc;
        if (np_dist_max_i64(dist, &v, NULL)) np_dist_abort(dist, 1);
        if (v && !rc && lead)
            fprintf(stderr, "nestpipe: another rank failed to read its flags; stopping (see "
                            "its message)\n");
        rc = (int)v;
    }
    if (rc) return rc;
    if (help) {
        if (lead) train_help(stdout);
        return 0;
    }
    if (!lead) cfg.quiet = 1;
    np_error err = {{0}};
    /* StarPU lets STARPU_SCHED override the policy a program asks for (the help and docs say
     * so); check it like --sched and use it everywhere (the compute context too), so the
     * metrics name the policy that ran */
    np_status st = NP_OK;
    const char *env_sched = getenv("STARPU_SCHED");
    if (env_sched && *env_sched && strcmp(env_sched, cfg.sched) && strcmp(env_sched, "help") &&
        cfg.engine == NP_ENGINE_STARPU)
        st = np_config_set(&cfg, "sched", env_sched, "STARPU_SCHED", &err);
    if (!st) st = np_config_check(&cfg, &err);
    if (!st && print) {
        return lead ? print_config(&cfg, stdout) : 0;
    }
    /* rank 0 writes the outputs: it checks them, and every rank stops if one is bad */
    const char *outputs[4][2] = {{"metrics-json", cfg.metrics_json},
                                 {"dump-params", cfg.dump_params},
                                 {"trace", cfg.trace},
                                 {"log-json", cfg.log_json}};
    for (int k = 0; k < 4 && !st && lead; k++)
        st = check_output(outputs[k][0], outputs[k][1], &err);
    if (!st && lead) st = check_ckpt_dir(cfg.checkpoint_dir, &err);
    if ((rc = setup_agree(dist, &cfg, st, &err))) return rc;

    np_source_t *train = NULL, *eval = NULL;
    FILE *log = NULL; /* --log-json, rank 0 */
    np_model_t *model = NULL, *full = NULL;
    np_trainer_t *tr = NULL;
    np_batch ring[NP_RING] = {{0}};
    np_run_metrics r = {.global_batch = cfg.batch, .train_loss = NAN, .train_loss_first = NAN};
    double *losses = NULL;
    np_ckpt_state *cs = NULL; /* the driver's state a checkpoint holds */
    np_dist_watchdog_t *wd = NULL;
    long s0 = 0;              /* the first step this process runs (resumed: the checkpoint's) */
    long local_n = cfg.batch / cfg.ranks, lo = local_n * cfg.rank;
    /* placement first: the driver's binding decides where the tables are first touched */
    if (cfg.engine == NP_ENGINE_STARPU &&
        !(st = np_placement_explain(&cfg, 1, r.placement, sizeof r.placement, &err)) &&
        cfg.explain_placement)
        fprintf(stderr, "nestpipe: placement: %s\n", r.placement);
    /* --eval-data: every record of that file is evaluated, and every training record
     * trains (no held-out split) */
    np_config ecfg = cfg;
    np_split esplit = NP_SPLIT_EVAL;
    if (cfg.eval_data != NP_DATA_SYNTHETIC) {
        cfg.eval_every = 0;
        ecfg.data = cfg.eval_data;
        memcpy(ecfg.data_path, cfg.eval_data_path, sizeof ecfg.data_path);
        esplit = NP_SPLIT_ALL;
    }
    /* a resumed run adds to the log of the run it continues */
    if (!st && lead && cfg.log_json[0] && !(log = fopen(cfg.log_json, cfg.resume[0] ? "a" : "w")))
        st = np_error_set(&err, NP_STATUS_IO, "--log-json %s: cannot create it: %s",
                          cfg.log_json, strerror(errno));
    /* files and memory may fail on one rank only (a file missing on one host): every rank
     * agrees on the outcome before the trainer, whose creation is collective */
    if (!st) st = np_source_open(&cfg, NP_SPLIT_TRAIN, &train, &err);
    if (!st && lead) st = np_source_open(&ecfg, esplit, &eval, &err);
    if (!st) st = np_model_create(&cfg, &model, &err);
    if (!st && cfg.init_params[0] && !cfg.resume[0])
        st = np_model_load(model, cfg.init_params, &err);
    if ((rc = setup_agree(dist, &cfg, st, &err))) goto cleanup;

    long window = cfg.steps / 10 > 1 ? cfg.steps / 10 : 1; /* steps averaged in train_loss */
    losses = calloc((size_t)window, sizeof *losses);
    cs = calloc(1, sizeof *cs);
    if (!losses || !cs) {
        st = np_error_set(&err, NP_STATUS_NO_MEMORY, "out of memory");
        goto step_failed; /* this rank only: the job stops */
    }
    if (cfg.resume[0]) {
        /* every rank loads what it owns now (resharding when the rank count changed); a rank
         * that fails says why, and all stop alike */
        np_ckpt_stats ls;
        st = np_ckpt_load(&cfg, model, cs, &ls, &err);
        if (!st) st = np_source_seek(train, cfg.batch, &cs->data, &err);
        if (st) fail_rank(&cfg, st, &err);
        int64_t v = st ? 1 : 0, hi = cs->step, lo = -cs->step;
        if (np_dist_max_i64(dist, &v, NULL) || v) {
            rc = st ? (st == NP_STATUS_BAD_INPUT || st == NP_STATUS_IO ? EXIT_BAD_INPUT : 1)
                    : EXIT_BAD_INPUT;
            goto cleanup;
        }
        if (np_dist_max_i64(dist, &hi, NULL) || np_dist_max_i64(dist, &lo, NULL) || hi != -lo) {
            st = np_error_set(&err, NP_STATUS_BAD_INPUT,
                              "resume %s: the ranks found different newest checkpoints (steps "
                              "%lld and %lld); is a run still writing there?",
                              cfg.resume, (long long)-lo, (long long)hi);
            goto setup_failed;
        }
        s0 = cs->step;
        r.steps = s0;
        r.train_loss_first = cs->loss_first;
        for (int i = 0; i < cs->n_losses; i++) {
            long k = s0 - cs->n_losses + i;
            if (k >= s0 - window) losses[k % window] = cs->losses[i];
        }
        r.resumed_step = s0;
        r.resume_seconds = ls.seconds;
        r.resume_bytes = ls.bytes;
        if (lead && !cfg.quiet)
            printf("resumed from %s: step %ld, %.1f MB read in %.3f s (%.0f MB/s)\n", ls.path, s0,
                   ls.bytes / 1e6, ls.seconds, ls.seconds > 0 ? ls.bytes / 1e6 / ls.seconds : 0);
    }
    /* a rank that fails inside this collective set-up stops the whole job */
    if ((st = np_trainer_create(&cfg, model, &tr, &err))) goto step_failed;
    /* from here every step is collective: a rank that stalls the others is named */
    if ((st = np_dist_watchdog_start(dist, cfg.rank_timeout, &wd, &err))) goto step_failed;
    catch_stop_signals();
    int tty = lead && isatty(fileno(stderr));
    double t0 = now_s(), last_print = 0, recent = 0;
    long recent_n = 0;
    if (lead && np_config_pipeline(&cfg) == NP_PIPELINE_ASYNC)
        fprintf(stderr, "nestpipe: warning: --pipeline async trains on stale embedding rows (no "
                        "dual-buffer sync): it is not synchronous training, only a baseline\n");
    /* batches are read ahead into a ring: the pipelined modes start work on later ones */
    int ahead = np_trainer_lookahead(tr);
    reader rd = {.cfg = &cfg,
                 .dist = dist,
                 .src = train,
                 .local = ring,
                 .lo = lo,
                 .local_n = local_n,
                 .r = &r,
                 .tr = tr,
                 .loaded = s0,
                 .wd = wd};
    for (long s = s0; cfg.steps == 0 || s < cfg.steps; s++) {
        np_dist_watchdog_progress(wd, s, 0);
        int injected = maybe_die(&cfg, s);
        if (read_ahead(&rd, s + ahead)) {
            st = rd.st;
            err = rd.err;
            goto step_failed;
        }
        if (s >= rd.loaded) {
            r.data_ended = 1;
            break;
        }
        const np_batch *win[NP_RING];
        int nwin = 0;
        for (long k = s; k < rd.loaded && nwin <= ahead; k++)
            win[nwin++] = &rd.local[k % NP_RING];
        double loss = 0;
        /* submitting may wait for earlier steps' tasks, which wait for the other ranks */
        np_dist_watchdog_progress(wd, s, 1);
        st = injected
                 ? np_error_set(&err, NP_STATUS_INTERNAL, "injected failure at step %ld", s + 1)
                 : np_trainer_submit(tr, win, nwin, &err);
        /* read the batch the next step will want while this one trains (the prefetch
         * stage's data), in every mode: batch generation stays off the critical path */
        int read_failed = !st && read_ahead(&rd, s + 1 + ahead);
        np_dist_watchdog_progress(wd, s, 1); /* the step's tasks need the other ranks */
        if (!st) st = np_trainer_wait(tr, &loss, &err);
        if (read_failed) {
            if (!st) {
                st = rd.st; /* NP_OK when another rank's read failed */
                err = rd.err;
            }
            goto step_failed;
        }
        /* the step's outcome, and whether any rank was asked to stop (the same step on
         * every rank): a failure (1000) outranks a signal number */
        int64_t outcome = st ? 1000 : stop_signal;
        np_dist_watchdog_progress(wd, -1, 1); /* waits for the other ranks */
        int mpi_failed = np_dist_max_i64(dist, &outcome, NULL) != NP_OK;
        np_dist_watchdog_progress(wd, -1, 0);
        if (mpi_failed || outcome >= 1000) goto step_failed;
        int stop = (int)outcome;
        if (np_dist_sum_f64(dist, &loss, 1, NULL)) {
            st = np_error_set(&err, NP_STATUS_INTERNAL, "MPI failed summing the loss");
            goto step_failed;
        }
        if (!isfinite(loss)) {
            st = np_error_set(&err, NP_STATUS_BAD_INPUT,
                              "training diverged: loss is %g at step %ld; lower --lr (now %g)",
                              loss, s + 1, cfg.lr);
            goto setup_failed; /* the same loss on every rank */
        }
        if (s == 0) r.train_loss_first = loss;
        losses[s % window] = loss;
        r.steps = s + 1;
        recent += loss;
        recent_n++;
        double el = now_s() - t0 - r.ckpt_seconds - r.eval_seconds;
        if (log && log_line(log, r.steps, loss, (double)(r.steps - s0) * (double)cfg.batch / el, el,
                            NULL)) {
            st = np_error_set(&err, NP_STATUS_IO, "--log-json %s: write error: %s",
                              cfg.log_json, strerror(errno));
            goto step_failed;
        }
        /* the last step's line is the final one, printed after the loop with train_loss */
        if (!tty ? (r.steps % cfg.log_every == 0 && r.steps != cfg.steps)
                 : (el - last_print > 0.2)) {
            progress(&cfg, tty, r.steps, cfg.steps, recent / recent_n,
                     (double)(r.steps - s0) * (double)cfg.batch / el, el, 0);
            last_print = el;
            recent = 0;
            recent_n = 0;
        }
        /* a checkpoint after this step's update, before the next step's submits write the
         * model: taken at a step boundary, so the pipeline continues afterwards as if none
         * was taken (the later batches' read-only stages overlap the write) */
        if (cfg.checkpoint_dir[0] &&
            (stop || (cfg.checkpoint_every && r.steps % cfg.checkpoint_every == 0))) {
            np_ckpt_stats cst;
            cs->step = r.steps;
            cs->data = rd.pos[s % NP_RING];
            cs->loss_first = r.train_loss_first;
            keep_losses(cs, losses, window, r.steps);
            if ((st = np_ckpt_save(dist, &cfg, tr, model, cs, &cst, &err))) goto step_failed;
            r.ckpt_count++;
            r.ckpt_seconds += cst.seconds;
            r.ckpt_bytes += cst.bytes;
            if (lead && !cfg.quiet) {
                if (tty) fputc('\n', stderr);
                printf("checkpoint step %ld: %.1f MB in %.3f s (%.0f MB/s) -> %s\n", r.steps,
                       cst.bytes / 1e6, cst.seconds,
                       cst.seconds > 0 ? cst.bytes / 1e6 / cst.seconds : 0, cst.path);
                fflush(stdout);
            }
        }
        /* --eval-interval: the model after this step, evaluated on rank 0 while the ranks'
         * later read-only stages run; the last step's evaluation is the run's own */
        if (cfg.eval_interval && r.steps % cfg.eval_interval == 0 && !stop &&
            !(cfg.steps && r.steps == cfg.steps)) {
            double te = now_s();
            np_eval_result ev;
            /* every rank waits for rank 0's evaluation: none is stalled (--rank-timeout) */
            np_dist_watchdog_progress(wd, -1, 1);
            st = eval_now(dist, &cfg, &ecfg, esplit, tr, model, &ev, &err);
            np_dist_watchdog_progress(wd, -1, 0);
            if (st) goto step_failed;
            r.eval_seconds += now_s() - te;
            r.evals++;
            if (lead && !cfg.quiet) {
                if (tty) fputc('\n', stderr);
                printf("eval at step %ld: logloss %.5f  auc %.4f  (%ld samples, %.3f s)\n",
                       r.steps, ev.logloss, ev.auc, ev.n, now_s() - te);
                fflush(stdout);
            }
            if (log && log_line(log, r.steps, NAN, NAN, NAN, &ev)) {
                st = np_error_set(&err, NP_STATUS_IO, "--log-json %s: write error: %s",
                                  cfg.log_json, strerror(errno));
                goto step_failed;
            }
        }
        if (stop) {
            if (lead)
                fprintf(stderr, "nestpipe: %s: stopped after step %ld%s\n",
                        stop == SIGINT ? "SIGINT" : stop == SIGTERM ? "SIGTERM" : "signal", r.steps,
                        cfg.checkpoint_dir[0] ? "; resume with --resume and the checkpoint folder"
                                              : " (no --checkpoint-dir: nothing saved)");
            rc = 128 + stop;
            goto cleanup;
        }
    }
    if ((st = np_trainer_finish(tr, &err)) || agree(dist, wd, st ? 2 : 0)) goto step_failed;
    /* training time: checkpoints and evaluations during training apart */
    r.seconds = now_s() - t0 - r.ckpt_seconds - r.eval_seconds;
    {
        double n = (double)(r.steps - s0) * (double)cfg.batch; /* samples this process trained */
        r.samples_per_s = r.seconds > 0 ? n / r.seconds : 0;
        r.samples_per_s_compute = r.seconds > r.data_seconds ? n / (r.seconds - r.data_seconds) : 0;
    }
    np_trainer_bytes(tr, r.bytes);
    {
        int64_t v = (int64_t)np_trainer_synced_rows(tr);
        if (np_dist_sum_i64(dist, &v, NULL)) goto step_failed;
        r.rows_synced = (uint64_t)v;
    }
    for (int k = 0; k < 4; k++) {
        int64_t v = (int64_t)r.bytes[k];
        if (np_dist_sum_i64(dist, &v, NULL)) goto step_failed;
        r.bytes[k] = (uint64_t)v;
    }
    int64_t tb = (int64_t)np_model_table_bytes(model);
    r.dense_flop_fwd = np_model_dense_flops(model, 0);
    r.dense_flop_bwd = np_model_dense_flops(model, 1);
    r.table_bytes_rank0 = tb;
    if (np_dist_max_i64(dist, &tb, NULL)) goto step_failed;
    r.table_bytes_max = tb;
    if (r.steps > 0) {
        long k = r.steps < window ? r.steps : window;
        double sum = 0;
        for (long i = 0; i < k; i++)
            sum += losses[i];
        r.train_loss = sum / k;
        progress(&cfg, tty, r.steps, cfg.steps, r.train_loss, r.samples_per_s, r.seconds, 1);
    }
    /* fewer steps than asked is worth a warning even under --quiet (metrics: data_ended);
     * --steps 0 asks for exactly this */
    if (r.data_ended && lead && (cfg.steps || !cfg.quiet))
        fprintf(stderr, "nestpipe: %sthe training data ended after %ld steps of %ld samples%s\n",
                cfg.steps ? "warning: " : "", r.steps, cfg.batch,
                cfg.steps ? " (before --steps)" : "");
    if (r.steps == 0) {
        st =
            np_error_set(&err, NP_STATUS_BAD_INPUT,
                         "data: not one full batch of %ld training samples in the data", cfg.batch);
        goto setup_failed;
    }
    /* the logical model on rank 0: the single-process layout, whatever the rank count */
    if (cfg.ranks > 1) {
        if ((st = np_dist_gather_model(dist, model, &full, &err))) goto step_failed;
    }
    /* the last collective: rank 0 evaluates and writes alone from here */
    np_dist_watchdog_stop(wd);
    wd = NULL;
    if (lead && np_trainer_trace(tr)) { /* a traced run reports its overlap figures too */
        if ((st = np_trace_summarize(np_trainer_trace(tr), &r.trace_overall, &err)))
            goto local_failed;
        r.traced = 1;
    }
    if (lead) {
        const np_model_t *logical = full ? full : model;
        if ((st = np_evaluate(logical, eval, &cfg, &r.eval, &err))) goto local_failed;
        if (log && (log_line(log, r.steps, r.train_loss, r.samples_per_s, r.seconds, &r.eval) ||
                    fclose(log))) {
            log = NULL;
            st = np_error_set(&err, NP_STATUS_IO, "--log-json %s: write error: %s",
                              cfg.log_json, strerror(errno));
            goto local_failed;
        }
        log = NULL;
        r.skipped_lines = np_source_skipped(train) + np_source_skipped(eval);
        if (!cfg.quiet) {
            printf("done: steps %ld  samples/s %.0f  train_loss %.5f (first %.5f)  eval_logloss "
                   "%.5f  eval_auc %.4f  (eval %ld samples)\n",
                   r.steps, r.samples_per_s, r.train_loss, r.train_loss_first, r.eval.logloss,
                   r.eval.auc, r.eval.n);
            if (r.skipped_lines)
                printf("skipped %ld malformed lines (--skip-bad-lines)\n", r.skipped_lines);
            if (np_config_pipeline(&cfg) == NP_PIPELINE_DBP)
                printf("dual-buffer sync: %.1f rows per step%s\n",
                       (double)r.rows_synced / (double)(r.steps - s0 > 0 ? r.steps - s0 : 1),
                       r.traced ? "" : " (sync time: run with --trace)");
            const np_trace_kind_time *sync = np_trace_summary_kind(&r.trace_overall, "sync");
            if (r.traced && sync && np_config_pipeline(&cfg) == NP_PIPELINE_DBP)
                printf("sync time %.3f ms per step\n", sync->total_us / 1e3 / (double)r.steps);
        }
        if (cfg.dump_params[0] && (st = np_model_dump(logical, cfg.dump_params, &err)))
            goto local_failed;
        if (cfg.metrics_json[0] && np_metrics_write(cfg.metrics_json, &cfg, &r, &err)) {
            st = NP_STATUS_IO;
            goto local_failed;
        }
    }
    goto done;

setup_failed: /* the same failure on every rank: rank 0 reports, all exit alike */
    rc = lead ? fail(st, &err) : (st == NP_STATUS_BAD_INPUT || st == NP_STATUS_IO ? 2 : 1);
    goto cleanup;
step_failed: /* one rank failed mid-run: it says why, then the whole job stops */
    if (st) {
        rc = fail_rank(&cfg, st, &err);
    } else {
        rc = 1;
        if (lead) fprintf(stderr, "nestpipe: another rank failed; stopping (see its message)\n");
    }
    if (cfg.ranks > 1) np_dist_abort(dist, rc);
    goto cleanup;
local_failed: /* rank 0's own output failed after training */
    rc = fail(st, &err);
    goto cleanup;
done:
    rc = 0;
cleanup:
    np_dist_watchdog_stop(wd); /* every rank comes here (a failed step aborts the job) */
    if (log) fclose(log);
    free(losses);
    free(cs);
    np_trainer_free(tr); /* first: it waits for tasks that may read the ring */
    for (int k = 0; k < NP_RING; k++)
        np_batch_free(&ring[k]);
    np_model_free(full);
    np_model_free(model);
    np_source_free(train);
    np_source_free(eval);
    return rc;
}

static int cmd_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    int skip = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(main_help, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--skip-bad-lines")) {
            skip = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage_error("unknown flag", argv[i]);
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            return usage_error("unexpected argument", argv[i]);
        }
    }
    if (!in || !out) {
        fprintf(stderr, "nestpipe: convert needs IN.tsv and OUT.bin\n");
        return EXIT_BAD_INPUT;
    }
    np_error err = {{0}};
    long written = 0, skipped = 0;
    np_status st = np_convert_criteo(in, out, skip, &written, &skipped, &err);
    if (st) return fail(st, &err);
    printf("converted %ld records to %s", written, out);
    if (skipped) printf(" (skipped %ld malformed lines)", skipped);
    printf("\n");
    return 0;
}

static int run(np_dist_t *dist, int argc, char **argv);

int main(int argc, char **argv) {
    np_dist_t *dist = NULL;
    np_error err = {{0}};
    np_status st = np_dist_init(&argc, &argv, &dist, &err);
    if (st) return fail(st, &err);
    int rc = run(dist, argc, argv);
    /* a report that could not be written (a full disk, a closed pipe) is a failure, not a
     * silent success */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        np_error_set(&err, NP_STATUS_IO, "cannot write to standard output: %s", strerror(errno));
        int wrc = fail(NP_STATUS_IO, &err);
        if (!rc) rc = wrc;
    }
    np_dist_free(dist);
    return rc;
}

static int run(np_dist_t *dist, int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "nestpipe: no command given; usage: nestpipe train|convert ... "
                        "(try nestpipe --help)\n");
        return EXIT_BAD_INPUT;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(main_help, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("nestpipe %s\ndense kernels: %s\ncuda: %s\n", NP_VERSION_STRING, np_dense_kernels(),
               np_cuda_info());
        return 0;
    }
    if (!strcmp(argv[1], "train")) return cmd_train(dist, argc - 2, argv + 2);
    if (!strcmp(argv[1], "convert")) return cmd_convert(argc - 2, argv + 2);
    if (!strcmp(argv[1], "predict")) return np_cmd_predict(dist, argc - 2, argv + 2);
    if (!strcmp(argv[1], "generate")) return np_cmd_generate(dist, argc - 2, argv + 2);
    if (!strcmp(argv[1], "export")) return np_cmd_export(argc - 2, argv + 2);
    if (!strcmp(argv[1], "compare")) return np_cmd_compare(argc - 2, argv + 2);
    if (!strcmp(argv[1], "trace")) return np_cmd_trace(argc - 2, argv + 2);
    if (!strcmp(argv[1], "check-layer")) return np_cmd_check_layer(argc - 2, argv + 2);
    fprintf(stderr, "nestpipe: unknown command '%s' (try nestpipe --help)\n", argv[1]);
    return EXIT_BAD_INPUT;
}
