/* The `nestpipe` command: `train` (config + flags -> np_train_run, the library's training
 * job) and `convert` (Criteo TSV -> binary), and the dispatch of the other subcommands.
 * Exit codes: 0 ok, 2 bad input of any kind, 1 other failures. All parsing of values is
 * np_config_set's; this file only maps flags to keys. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "compare.h"
#include "trace_cmd.h"
#include "nestpipe/dist.h"
#include "nestpipe/layer.h"
#include "nestpipe/nestpipe.h"
#include "nestpipe/trace.h"
#include "nestpipe/train.h"

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
        const char *from = cfg->sched_from[0] ? cfg->sched_from : "default";
        if (!strcmp(k->name, "sched") && strlen(k->name) + strlen(v) + strlen(from) + 6 <= 198 &&
            !strpbrk(from, "\r\n")) /* and where the policy came from, when a line holds it */
            fprintf(out, "%s = %s # %s\n", k->name, v, from);
        else
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
    "  generate OUT.bin|OUT.txt --samples N [flags]   synthetic data to a binary file or a\n"
    "                                       Criteo TSV sample (generate --help)\n"
    "  predict --params P --data SPEC --out FILE   score records (nestpipe predict --help)\n"
    "  export MODEL.params OUT.npz          a --dump-params file as a NumPy archive\n"
    "  compare A B [--rtol 1e-4] [--atol 1e-5]    compare two --dump-params files\n"
    "  trace report FILE [--json] [--by-layer] [WINDOW]   overlap report of a --trace file\n"
    "  trace svg FILE OUT.svg | trace paje FILE OUT.paje [WINDOW]   timeline, Paje export\n"
    "                                       WINDOW: --from-batch/--to-batch N or\n"
    "                                       --from-ms/--to-ms T (trace --help)\n"
    "  check-layer --kind K --in W1,W2 [flags]   a layer kind's gradients (check-layer --help)\n"
    "  tune [flags] [train flags]           rank scheduling policies, workers, chunks and\n"
    "                                       windows by measured step time (tune --help)\n"
    "  route-stats --ranks N [train flags]  the bytes N ranks would exchange, per peer\n"
    "                                       (route-stats --help; docs/scale.md)\n"
    "  graph [--format text|dot|json|svg|png] [train flags]   the task graph of one step,\n"
    "                                       its dependencies and guarantees (graph --help)\n"
    "  simulate [--graph RUN.json] --ranks N,... [flags]   a traced run, or the step graph,\n"
    "                                       projected to N ranks\n"
    "                                       (simulate --help; docs/scale.md)\n"
    "  --version                            print the version\n";

static int fail(np_status st, const np_error *err) {
    return np_cli_fail(st, err);
}

static int usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "nestpipe: %s '%s' (see nestpipe train --help)\n", msg, arg);
    return EXIT_BAD_INPUT;
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

/* The --config files of the last np_cli_parse_train_args: inputs no output may replace. */
static const char *config_paths[16];
static int n_config_paths;

int np_cli_not_a_config(const char *out, const char *what) {
    np_error err = {{0}};
    for (int i = 0; i < n_config_paths; i++) {
        np_status st = np_output_not_input(out, what, config_paths[i], "--config", &err);
        if (st) return np_cli_fail(st, &err);
    }
    return 0;
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
            if (sw < 0) { /* before taking its value */
                const char *near = np_config_closest_key(key);
                if (!near) return usage_error("unknown flag", a);
                fprintf(stderr, "nestpipe: unknown flag '%s' (did you mean --%s? see nestpipe train --help)\n", a, near);
                return EXIT_BAD_INPUT;
            }
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
                if (n_config_paths < (int)(sizeof config_paths / sizeof *config_paths))
                    config_paths[n_config_paths++] = value;
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

/* `nestpipe train`: flags and config file into a config, then np_train_run (the library's
 * whole training job, nestpipe/train.h) and its outcome as an exit code. */
static int cmd_train(np_dist_t *dist, int argc, char **argv) {
    np_config cfg;
    np_config_defaults(&cfg);
    cfg.rank = np_dist_rank(dist);
    cfg.ranks = np_dist_size(dist);
    /* the hosts decide what "auto" resolves to, which --print-config's checks depend on */
    np_dist_host(dist, &cfg.local_rank, &cfg.local_ranks, &cfg.nodes);
    int lead = cfg.rank == 0; /* rank 0 prints */
    int help = 0, print = 0;
    int rc = np_cli_parse_train_args(argc, argv, &cfg, &help, &print);
    /* rank 0's outputs are not its config file (the other inputs: np_train_run) */
    const char *outputs[4][2] = {{"--metrics-json", cfg.metrics_json},
                                 {"--dump-params", cfg.dump_params},
                                 {"--trace", cfg.trace},
                                 {"--log-json", cfg.log_json}};
    for (int k = 0; k < 4 && !rc && lead && !help && !print; k++)
        rc = np_cli_not_a_config(outputs[k][1], outputs[k][0]);
    /* the same flags on every rank, but a config file may differ (or be missing) on one
     * host: every rank learns whether parsing failed anywhere (each failed rank said why) */
    if (cfg.ranks > 1) {
        int64_t v = rc, hi = help * 2 + print, lo = -hi;
        if (np_dist_max_i64(dist, &v, NULL)) np_dist_abort(dist, 1);
        if (v && !rc && lead)
            fprintf(stderr, "nestpipe: another rank failed to read its flags; stopping (see "
                            "its message)\n");
        rc = (int)v;
        /* --help and --print-config end the command: on every rank or on none */
        if (!rc && (np_dist_max_i64(dist, &hi, NULL) || np_dist_max_i64(dist, &lo, NULL)))
            np_dist_abort(dist, 1);
        if (!rc && hi != -lo) {
            if (lead)
                fprintf(stderr, "nestpipe: ranks disagree on --help and --print-config: some "
                                "ranks were given them, some not\n");
            rc = EXIT_BAD_INPUT;
        }
    }
    if (rc) return rc;
    if (help) {
        if (lead) train_help(stdout);
        return 0;
    }
    np_error err = {{0}};
    if (print) {
        /* STARPU_SCHED overrides --sched (np_train_run does the same): print what would run */
        np_status st = NP_OK;
        if (cfg.engine == NP_ENGINE_STARPU) st = np_config_sched_env(&cfg, NULL, &err);
        if (!st) st = np_config_check(&cfg, &err);
        np_graph_t *g = NULL; /* the model's own rules (built-in or file), as train applies */
        if (!st) st = np_graph_from_config(&cfg, &g, &err);
        np_graph_free(g);
        if (st) return lead ? fail(st, &err) : np_cli_exit_code(st);
        return lead ? print_config(&cfg, stdout) : 0;
    }
    np_train_result res;
    np_status st = np_train_run(dist, &cfg, NULL, NULL, &res, &err);
    if (st) {
        int code = np_cli_exit_code(st);
        if (!res.err_quiet) fail(st, &err);
        if (res.must_abort) np_dist_abort(dist, code);
        return code;
    }
    return res.stopped ? 128 + res.stopped : 0;
}

static const char *convert_help =
    "usage: nestpipe convert IN.tsv OUT.bin [--skip-bad-lines]\n"
    "       nestpipe convert movielens:ratings.dat OUT.bin --seq-len L [--dense-features D]\n"
    "\n"
    "Converts a Criteo TSV file (label, 13 integers, 26 hex categories a line) to nestpipe's\n"
    "binary format (docs/data.md), which `--data bin:OUT.bin` reads several times faster and\n"
    "whose header gives the record count. A malformed line stops it with FILE:LINE:COLUMN;\n"
    "--skip-bad-lines skips such lines and counts them. The file is written beside OUT.bin\n"
    "and renamed at the end: a failed convert leaves no file.\n"
    "\n"
    "movielens:ratings.dat writes the records `--data movielens:` reads with --seq-len L\n"
    "(each user's last L movies, without and with the held-out one) and D zero dense\n"
    "features (default 13, the width of the default bottom; a model file's own otherwise);\n"
    "train on them with --data bin:OUT.bin --eval-every 2 --seq-len L for the same batches.\n";

static int cmd_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *seq = NULL, *dense = NULL;
    int skip = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(convert_help, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--skip-bad-lines")) {
            skip = 1;
        } else if (!strcmp(argv[i], "--seq-len")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "nestpipe: convert: --seq-len needs a value\n");
                return EXIT_BAD_INPUT;
            }
            seq = argv[++i];
        } else if (!strcmp(argv[i], "--dense-features")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "nestpipe: convert: --dense-features needs a value\n");
                return EXIT_BAD_INPUT;
            }
            dense = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "nestpipe: convert: unknown flag '%s' (see nestpipe convert --help)\n",
                    argv[i]);
            return EXIT_BAD_INPUT;
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
    if (!strncmp(in, "movielens:", 10)) {
        char *end = NULL;
        long L = seq ? strtol(seq, &end, 10) : 0;
        if (!seq || end == seq || *end || L < 2 || L > 4096) {
            fprintf(stderr, "nestpipe: convert %s: needs --seq-len L, an integer in [2, 4096] "
                            "(each history's last L movies)%s%s%s\n",
                    in, seq ? "; got '" : "", seq ? seq : "", seq ? "'" : "");
            return EXIT_BAD_INPUT;
        }
        if (skip) {
            fprintf(stderr, "nestpipe: convert %s: --skip-bad-lines is for Criteo TSV; a "
                            "MovieLens file stops at its first bad line\n", in);
            return EXIT_BAD_INPUT;
        }
        long D = dense ? strtol(dense, &end, 10) : 13;
        if (dense && (end == dense || *end || D < 0 || D > 65536)) {
            fprintf(stderr, "nestpipe: convert %s: --dense-features takes an integer in [0, "
                            "65536]; got '%s'\n", in, dense);
            return EXIT_BAD_INPUT;
        }
        np_status st = np_convert_movielens(in + 10, out, (int)L, (int)D, &written, &err);
        if (st) return fail(st, &err);
        printf("converted %ld records (%ld users) to %s; train with --data bin:%s --eval-every 2 "
               "--seq-len %ld\n",
               written, written / 2, out, out, L);
        return 0;
    }
    if (seq || dense) {
        fprintf(stderr, "nestpipe: convert %s: --%s is for movielens:PATH input\n", in,
                seq ? "seq-len" : "dense-features");
        return EXIT_BAD_INPUT;
    }
    np_status st = np_convert_criteo(in, out, skip, &written, &skipped, &err);
    if (st) return fail(st, &err);
    printf("converted %ld records to %s", written, out);
    if (skipped) printf(" (skipped %ld malformed lines)", skipped);
    printf("\n");
    return 0;
}

static int run(np_dist_t *dist, int argc, char **argv);

/* rc, or 2 when it is 0 but standard output could not be written (a full disk, a closed
 * pipe): a report that was lost is a failure, not a silent success. */
static int stdout_written(int rc) {
    if ((fflush(stdout) != 0 || ferror(stdout)) && !rc) {
        fprintf(stderr, "nestpipe: cannot write to standard output: %s\n", strerror(errno));
        rc = EXIT_BAD_INPUT;
    }
    return rc;
}

int main(int argc, char **argv) {
    /* tune starts train runs of its own: not an MPI process itself (a singleton's
     * environment would reach them) */
    if (argc >= 2 && !strcmp(argv[1], "tune")) return stdout_written(np_cmd_tune(argc - 2, argv + 2));
    if (argc >= 2 && !strcmp(argv[1], "route-stats")) { /* one process, any N: no MPI */
        np_outfile_clean_on_signals();
        return stdout_written(np_cmd_route_stats(argc - 2, argv + 2));
    }
    if (argc >= 2 && !strcmp(argv[1], "graph")) { /* from the config alone: no MPI */
        np_outfile_clean_on_signals();
        return stdout_written(np_cmd_graph(argc - 2, argv + 2));
    }
    if (argc >= 2 && !strcmp(argv[1], "simulate")) { /* one process; SimGrid forks its own */
        np_outfile_clean_on_signals();
        return stdout_written(np_cmd_simulate(argc - 2, argv + 2));
    }
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
    /* train checkpoints and stops on SIGINT/SIGTERM; the others stop where they are and
     * leave no temporary behind */
    np_outfile_clean_on_signals();
    if (!strcmp(argv[1], "convert")) return cmd_convert(argc - 2, argv + 2);
    if (!strcmp(argv[1], "predict")) return np_cmd_predict(dist, argc - 2, argv + 2);
    if (!strcmp(argv[1], "generate")) return np_cmd_generate(dist, argc - 2, argv + 2);
    if (!strcmp(argv[1], "export")) return np_cmd_export(argc - 2, argv + 2);
    if (!strcmp(argv[1], "compare")) return np_cmd_compare(argc - 2, argv + 2);
    if (!strcmp(argv[1], "trace")) return np_cmd_trace(argc - 2, argv + 2);
    if (!strcmp(argv[1], "check-layer")) return np_cmd_check_layer(argc - 2, argv + 2);
    static const char *const commands[] = {"train",   "convert", "generate", "predict",
                                           "export",  "compare", "trace",    "check-layer",
                                           "tune",    "route-stats", "simulate", "graph"};
    const char *near = np_closest_word(argv[1], commands, sizeof commands / sizeof *commands);
    if (near)
        fprintf(stderr, "nestpipe: unknown command '%s' (did you mean '%s'? try nestpipe --help)\n",
                argv[1], near);
    else
        fprintf(stderr, "nestpipe: unknown command '%s' (try nestpipe --help)\n", argv[1]);
    return EXIT_BAD_INPUT;
}
