/* `nestpipe tune`: which scheduling policy, worker count, --chunks and --windows train a
 * given model, shape and data fastest on this machine, measured with its spread; and
 * `tune --calibrate`: the perf models calibrated, and how well they predict.
 *
 * Every setting runs as a child `nestpipe train ... --trace` (through --launcher for
 * several ranks); rounds run every setting once, in an order that rotates, so drift hits
 * all settings alike. A run's figure is its steady-state step time from the trace: the
 * time between the ends of the last batch and of the first batch after the warm-up,
 * divided by the batches between (not samples/s over the whole run, which holds start-up,
 * warm-up and calibration). The first round's time plans how many rounds fit --budget.
 * Definitions and how to read the table: docs/engine.md "Choosing a scheduler".
 * Not here: the runs themselves (train; tune_run.c starts them), what tune writes
 * (tune_out.c), the trace format (runtime/trace/). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "nestpipe/trace.h"
#include "tune.h"

static const char *tune_help =
    "usage: nestpipe tune [tune flags] [train flags]\n"
    "       nestpipe tune --calibrate [train flags]\n"
    "\n"
    "Runs `nestpipe train` with the train flags (model, shape, data, --config ...) under each\n"
    "setting and ranks the settings by steady-state step time from each run's trace, with the\n"
    "median and interquartile range over repeats that interleave (docs/engine.md \"Choosing a\n"
    "scheduler\"). Writes the best setting as a config file that train --config reads.\n"
    "\n"
    "  --policies LIST   StarPU policies, comma-separated [eager,prio,ws,lws,dm,dmda,dmdas]\n"
    "  --workers LIST    CPU worker counts (STARPU_NCPU) [the environment's]\n"
    "  --chunks LIST     values of --chunks [the train flags' value]\n"
    "  --windows LIST    values of --windows [the train flags' value]\n"
    "  --priorities LIST values of --priorities: fixed, critical-path [the train flags' value]\n"
    "  --repeats N       most runs of each setting [5]\n"
    "  --budget TIME     time for the sweep, e.g. 90s, 10m, 1h [10m]: the first round's time\n"
    "                    says how many rounds fit (at least one round runs)\n"
    "  --steps N         steps of each run [40]\n"
    "  --warmup N        batches left out at the start of each run [a fifth of the steps, >= 2]\n"
    "  --launcher CMD    run each train through CMD, split at blanks (e.g. \"mpirun -n 2\")\n"
    "  --out FILE        the best setting as a config file [tune-best.ini]\n"
    "  --svg FILE        the ranked table as a bar chart\n"
    "  --json FILE       every run's figures\n"
    "  --keep DIR        keep each run's trace, metrics and log there [a temporary folder,\n"
    "                    removed]\n"
    "  --calibrate       calibrate the perf models instead (STARPU_CALIBRATE=1 under dmda, up\n"
    "                    to --repeats runs, until every task has a prediction), then report\n"
    "                    each codelet's prediction error on a fresh run\n"
    "\n"
    "Not among the train flags: --sched (use --policies), --trace, --metrics-json,\n"
    "--print-config. The perf models live in STARPU_HOME (default: your home), which tune\n"
    "names.\n";

static int bad_input(const char *fmt, const char *arg) {
    fprintf(stderr, "nestpipe: tune: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return EXIT_BAD_INPUT;
}

static int parse_list(const char *flag, const char *v, list *l) {
    l->n = 0;
    const char *p = v;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || n >= sizeof l->v[0] || l->n == MAX_LIST) {
            fprintf(stderr,
                    "nestpipe: tune: %s '%s': a comma-separated list of at most %d "
                    "values, none empty\n",
                    flag, v, MAX_LIST);
            return EXIT_BAD_INPUT;
        }
        memcpy(l->v[l->n], p, n);
        l->v[l->n++][n] = 0;
        p += n + (e != NULL);
        if (e && !*p) return bad_input("a list ends with ',': '%s'", v);
    }
    if (!l->n) return bad_input("an empty list: '%s'", flag);
    return 0;
}

static int parse_count(const char *flag, const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "nestpipe: tune: %s '%s': expected an integer in %ld..%ld\n", flag, v, lo,
                hi);
        return EXIT_BAD_INPUT;
    }
    *out = (int)x;
    return 0;
}

/* "90s", "10m", "1h", "600" (seconds) */
static int parse_budget(const char *v, double *s) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    double unit = !*end               ? 1
                  : !strcmp(end, "s") ? 1
                  : !strcmp(end, "m") ? 60
                  : !strcmp(end, "h") ? 3600
                                      : 0;
    if (errno || end == v || !unit || !(x > 0) || !isfinite(x) || x * unit > 7 * 86400.0)
        return bad_input("--budget '%s': expected a time such as 90s, 10m or 1h (at most a week)",
                         v);
    *s = x * unit;
    return 0;
}

/* Splits the launcher at blanks into a NULL-terminated vector (owned by t). */
static int split_launcher(tune *t, const char *cmd) {
    if (t->launcher) return bad_input("--launcher given twice ('%s')", cmd);
    char *copy = strdup(cmd);
    t->launcher = calloc(strlen(cmd) / 2 + 2, sizeof *t->launcher);
    if (!copy || !t->launcher) return bad_input("out of memory reading --launcher%s", "");
    for (char *tok = strtok(copy, " \t"); tok; tok = strtok(NULL, " \t"))
        t->launcher[t->n_launcher++] = tok;
    if (!t->n_launcher) return bad_input("--launcher '%s' names no command", cmd);
    return 0;
}

/* The train flags tune sets itself, refused among the user's. */
static int owned_flag(const char *a) {
    static const char *own[] = {"--sched", "--trace", "--metrics-json", "--print-config", NULL};
    for (int i = 0; own[i]; i++) {
        size_t n = strlen(own[i]);
        if (!strncmp(a, own[i], n) && (a[n] == 0 || a[n] == '=')) return 1;
    }
    return 0;
}

static int parse_args(tune *t, int argc, char **argv) {
    parse_list("--policies", "eager,prio,ws,lws,dm,dmda,dmdas", &t->policies);
    t->repeats = 5;
    t->budget_s = 600;
    t->steps = -1;
    t->warmup = -1;
    t->out = "tune-best.ini";
    t->pass = calloc((size_t)argc + 1, sizeof *t->pass);
    if (!t->pass) return bad_input("out of memory%s", "");
    int rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        char key[64] = "";
        if (!strncmp(a, "--", 2) && (size_t)(eq ? eq - a : (long)strlen(a)) < sizeof key) {
            size_t n = eq ? (size_t)(eq - a) : strlen(a);
            memcpy(key, a, n);
            key[n] = 0;
        }
        static const char *with_value[] = {"--policies",   "--workers",  "--chunks", "--windows",
                                           "--priorities", "--repeats",  "--budget", "--steps",
                                           "--warmup",     "--launcher", "--out",    "--svg",
                                           "--json",       "--keep",     NULL};
        int takes = 0;
        for (int k = 0; with_value[k]; k++)
            takes |= !strcmp(key, with_value[k]);
        if (!strcmp(a, "--calibrate")) {
            t->calibrate = 1;
            continue;
        }
        if (owned_flag(a)) return bad_input("%s is tune's to set (the policies: --policies)", key);
        if (!takes) { /* a train flag, with its value when it takes one */
            t->pass[t->n_pass++] = argv[i];
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) return bad_input("%s needs a value", key);
        if (!strcmp(key, "--policies"))
            rc = parse_list(key, v, &t->policies);
        else if (!strcmp(key, "--workers"))
            rc = parse_list(key, v, &t->workers);
        else if (!strcmp(key, "--chunks"))
            rc = parse_list(key, v, &t->chunks);
        else if (!strcmp(key, "--windows"))
            rc = parse_list(key, v, &t->windows);
        else if (!strcmp(key, "--priorities"))
            rc = parse_list(key, v, &t->prios);
        else if (!strcmp(key, "--repeats"))
            rc = parse_count(key, v, 1, MAX_ROUNDS, &t->repeats);
        else if (!strcmp(key, "--steps"))
            rc = parse_count(key, v, 3, 1000000, &t->steps);
        else if (!strcmp(key, "--warmup"))
            rc = parse_count(key, v, 0, 1000000, &t->warmup);
        else if (!strcmp(key, "--budget"))
            rc = parse_budget(v, &t->budget_s);
        else if (!strcmp(key, "--launcher"))
            rc = split_launcher(t, v);
        else if (!strcmp(key, "--out"))
            t->out = v;
        else if (!strcmp(key, "--svg"))
            t->svg = v;
        else if (!strcmp(key, "--json"))
            t->json = v;
        else if (!strcmp(key, "--keep"))
            t->keep = v;
    }
    if (rc) return rc;
    /* worker counts: positive integers, as STARPU_NCPU takes them */
    for (int i = 0; i < t->workers.n; i++) {
        int w;
        if ((rc = parse_count("--workers", t->workers.v[i], 1, 4096, &w))) return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------ a run's figures */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v[0..n) (sorted in place), linear between ranks. */
static double quantile(double *v, int n, double q) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double at = q * (n - 1);
    int lo = (int)floor(at), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (at - lo);
}

/* One run of setting s in round r: its figures into s. Returns 0 or the exit code. */
static int run_setting(tune *t, setting *s, int si, int r, double *secs) {
    char trace[4200], metrics[4200], log[4200], steps[32];
    snprintf(trace, sizeof trace, "%s/s%02d-r%02d.trace.json", t->dir, si, r);
    snprintf(metrics, sizeof metrics, "%s/s%02d-r%02d.metrics.json", t->dir, si, r);
    snprintf(log, sizeof log, "%s/s%02d-r%02d.log", t->dir, si, r);
    snprintf(steps, sizeof steps, "%d", t->steps);
    /* the runs neither resume nor write the user's checkpoints, dumps or logs (a config
     * file's too): "" unsets a path */
    char *extra[] = {"--sched",
                     (char *)s->sched,
                     "--windows",
                     (char *)s->windows,
                     "--chunks",
                     (char *)s->chunks,
                     "--steps",
                     steps,
                     "--priorities",
                     (char *)s->prio,
                     "--quiet",
                     "--trace",
                     trace,
                     "--metrics-json",
                     metrics,
                     "--checkpoint-dir=",
                     "--checkpoint-every=0",
                     "--resume=",
                     "--dump-params=",
                     "--log-json="};
    int rc = tune_run_train(t, extra, (int)(sizeof extra / sizeof *extra),
                            s->workers[0] ? s->workers : NULL, NULL, log, secs);
    if (tune_stop_signal) return 128 + tune_stop_signal;
    if (rc) {
        char line[1024];
        tune_last_line(log, line, sizeof line);
        fprintf(stderr,
                "nestpipe: tune: sched %s, priorities %s, workers %s, windows %s, chunks "
                "%s failed (exit %d): %s\n",
                s->sched, s->prio, s->workers[0] ? s->workers : "env", s->windows, s->chunks, rc,
                line[0] ? line : "(no output)");
        return rc == EXIT_BAD_INPUT ? EXIT_BAD_INPUT : 1;
    }
    np_error err = {{0}};
    np_trace_t *tr = NULL;
    np_trace_steady st;
    np_trace_summary sum;
    np_status ss = np_trace_read_chrome(trace, &tr, &err);
    if (!ss) ss = np_trace_steady_state(tr, t->warmup, &st, &err);
    if (!ss) ss = np_trace_summarize(tr, &sum, &err);
    np_trace_free(tr);
    if (ss) {
        fprintf(stderr, "nestpipe: tune: %s\n", err.msg);
        return np_cli_exit_code(ss);
    }
    if (!t->keep) remove(trace); /* traces are large; --keep keeps them */
    s->step_ms[s->runs] = st.step_us / 1e3;
    s->idle[s->runs] = st.idle_share;
    s->exposed_ms[s->runs] = sum.batches ? sum.exchange_exposed_us / 1e3 / (double)sum.batches : 0;
    s->runs++;
    return 0;
}

static void summarize(tune *t, int *order) {
    for (int i = 0; i < t->n; i++) {
        setting *s = &t->s[i];
        double v[MAX_ROUNDS];
        memcpy(v, s->step_ms, sizeof v);
        s->med = quantile(v, s->runs, 0.5);
        s->q1 = quantile(v, s->runs, 0.25);
        s->q3 = quantile(v, s->runs, 0.75);
        memcpy(v, s->idle, sizeof v);
        s->idle_med = quantile(v, s->runs, 0.5);
        memcpy(v, s->exposed_ms, sizeof v);
        s->exposed_med = quantile(v, s->runs, 0.5);
        order[i] = i;
    }
    for (int i = 1; i < t->n; i++) /* by median, stable: few settings */
        for (int j = i; j > 0 && t->s[order[j]].med < t->s[order[j - 1]].med; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    /* a setting whose interquartile range meets the best's may be the best: its rank is
     * not certain (with one run, ranges are points and only ties meet) */
    const setting *b = &t->s[order[0]];
    for (int i = 1; i < t->n; i++) {
        setting *s = &t->s[order[i]];
        s->uncertain = s->q1 <= b->q3;
    }
}

static int sweep(tune *t) {
    for (int p = 0; p < t->policies.n; p++)
        for (int w = 0; w < (t->workers.n ? t->workers.n : 1); w++)
            for (int x = 0; x < t->windows.n; x++)
                for (int c = 0; c < t->chunks.n; c++)
                    for (int q = 0; q < t->prios.n; q++) {
                        if (t->n == MAX_SETTINGS) {
                            fprintf(stderr,
                                    "nestpipe: tune: more than %d settings; give shorter "
                                    "lists\n",
                                    MAX_SETTINGS);
                            return EXIT_BAD_INPUT;
                        }
                        t->s[t->n++] = (setting){.sched = t->policies.v[p],
                                                 .workers = t->workers.n ? t->workers.v[w] : "",
                                                 .windows = t->windows.v[x],
                                                 .chunks = t->chunks.v[c],
                                                 .prio = t->prios.v[q]};
                    }
    tune_machine_line(stdout);
    tune_models_line(stdout);
    printf("tune: %d settings, steps %d (the first %d left out), up to %d rounds in %.0f s\n", t->n,
           t->steps, t->warmup, t->repeats, t->budget_s);
    fflush(stdout);
    double t0 = tune_now_s();
    int rounds = t->repeats;
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < t->n; k++) {
            int si = (k + r) % t->n; /* the order rotates: drift hits every setting alike */
            double secs = 0;
            int rc = run_setting(t, &t->s[si], si, r, &secs);
            if (rc) return rc;
            if (r == 0 && k == 0 && secs * t->n > t->budget_s)
                fprintf(stderr,
                        "nestpipe: tune: warning: one run took %.0f s, so a round of %d "
                        "settings needs about %.0f s, over --budget %.0f s; one round "
                        "runs (no spread): fewer settings or --steps, or a larger "
                        "--budget\n",
                        secs, t->n, secs * t->n, t->budget_s);
        }
        if (r == 0) { /* plan: the rounds that fit, the first included */
            double round = tune_now_s() - t0;
            int fit = (int)(t->budget_s / round);
            rounds = fit < 1 ? 1 : fit < t->repeats ? fit : t->repeats;
            printf("tune: a round took %.1f s: %d round%s\n", round, rounds,
                   rounds == 1 ? " (no spread: the ranks are not certain)" : "s");
            fflush(stdout);
        }
    }
    int order[MAX_SETTINGS];
    summarize(t, order);
    tune_print_table(stdout, t, order);
    int any = 0;
    for (int i = 1; i < t->n; i++)
        any |= t->s[order[i]].uncertain;
    if (any)
        printf("~: its interquartile range meets the first's: its rank against the first is "
               "not certain (more --repeats, or longer runs)\n");
    int rc = tune_write_best(t, &t->s[order[0]]);
    if (!rc) printf("best setting written to %s (nestpipe train --config %s)\n", t->out, t->out);
    if (!rc && t->svg && !(rc = tune_write_svg(t, order))) printf("chart written to %s\n", t->svg);
    if (!rc && t->json && !(rc = tune_write_json(t, order)))
        printf("figures written to %s\n", t->json);
    return rc;
}

/* --calibrate: runs with STARPU_CALIBRATE=1 under a dm* policy until a fresh run (no
 * calibration) predicts every codelet's tasks, at most --repeats times; then the table. */
static int calibrate(tune *t, int policies_given) {
    const char *sched = policies_given ? t->policies.v[0] : "dmda";
    if ((policies_given && t->policies.n > 1) || t->chunks.n > 1 || t->windows.n > 1 ||
        t->prios.n > 1 || t->workers.n) {
        fprintf(stderr, "nestpipe: tune: --calibrate calibrates one setting: give --policies, "
                        "--chunks, --windows and --priorities one value each, and no --workers "
                        "(set STARPU_NCPU)\n");
        return EXIT_BAD_INPUT;
    }
    if (strncmp(sched, "dm", 2)) {
        fprintf(stderr,
                "nestpipe: tune: --calibrate measures the predictions of a policy that "
                "uses the perf models (dm, dmda, dmdas), not '%s'\n",
                sched);
        return EXIT_BAD_INPUT;
    }
    tune_machine_line(stdout);
    tune_models_line(stdout);
    char steps[32], trace[4200], log[4200];
    snprintf(steps, sizeof steps, "%d", t->steps);
    np_trace_pred rows[96];
    int n_rows = 0;
    for (int c = 0; c < t->repeats; c++) {
        snprintf(log, sizeof log, "%s/calibrate-%02d.log", t->dir, c);
        char *cal[] = {"--sched",
                       (char *)sched,
                       "--steps",
                       steps,
                       "--quiet",
                       "--chunks",
                       t->chunks.v[0],
                       "--windows",
                       t->windows.v[0],
                       "--priorities",
                       t->prios.v[0],
                       "--checkpoint-dir=",
                       "--checkpoint-every=0",
                       "--resume=",
                       "--dump-params=",
                       "--log-json="};
        double secs = 0;
        int rc = tune_run_train(t, cal, (int)(sizeof cal / sizeof *cal), NULL, "1", log, &secs);
        snprintf(trace, sizeof trace, "%s/check-%02d.trace.json", t->dir, c);
        char *check[] = {"--sched",     (char *)sched,       "--steps",
                         steps,         "--quiet",           "--trace",
                         trace,         "--chunks",          t->chunks.v[0],
                         "--windows",   t->windows.v[0],     "--priorities",
                         t->prios.v[0], "--checkpoint-dir=", "--checkpoint-every=0",
                         "--resume=",   "--dump-params=",    "--log-json="};
        if (!rc) {
            snprintf(log, sizeof log, "%s/check-%02d.log", t->dir, c);
            rc = tune_run_train(t, check, (int)(sizeof check / sizeof *check), NULL, "0", log,
                                &secs);
        }
        if (tune_stop_signal) return 128 + tune_stop_signal;
        if (rc) {
            char line[1024];
            tune_last_line(log, line, sizeof line);
            fprintf(stderr, "nestpipe: tune: calibration run failed (exit %d): %s\n", rc, line);
            return rc == EXIT_BAD_INPUT ? EXIT_BAD_INPUT : 1;
        }
        np_error err = {{0}};
        np_trace_t *tr = NULL;
        np_status st = np_trace_read_chrome(trace, &tr, &err);
        if (!st) st = np_trace_predictions(tr, t->warmup, rows, 96, &n_rows, &err);
        long tasks = 0, predicted = 0;
        for (int i = 0; !st && i < n_rows; i++) {
            tasks += rows[i].tasks;
            predicted += rows[i].predicted;
        }
        if (!st) {
            printf("calibration run %d: %ld of %ld tasks predicted on a fresh run\n", c + 1,
                   predicted, tasks);
            fflush(stdout);
        }
        if (st || predicted == tasks || c + 1 == t->repeats) {
            if (!st) {
                printf("%-22s %7s %9s %10s %13s %9s %12s\n", "codelet", "tasks", "predicted",
                       "mean us", "median error", "p90 error", "noise floor");
                for (int i = 0; i < n_rows; i++)
                    printf("%-22s %7ld %8.0f%% %10.1f %12.1f%% %8.1f%% %11.1f%%\n", rows[i].name,
                           rows[i].tasks, 100.0 * (double)rows[i].predicted / (double)rows[i].tasks,
                           rows[i].mean_us, 100 * rows[i].median_err, 100 * rows[i].p90_err,
                           100 * rows[i].floor_err);
                printf("noise floor: the median error of a hindsight prediction, each footprint's "
                       "own median duration in this run\n");
            }
            if (!st && t->json) {
                json_t *list = json_array();
                for (int i = 0; list && i < n_rows; i++)
                    json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:o, s:o, s:o, s:o}",
                                                          "codelet", rows[i].name, "tasks",
                                                          (json_int_t)rows[i].tasks, "predicted",
                                                          (json_int_t)rows[i].predicted, "mean_us",
                                                          tune_num(rows[i].mean_us), "median_error",
                                                          tune_num(rows[i].median_err), "p90_error",
                                                          tune_num(rows[i].p90_err), "noise_floor",
                                                          tune_num(rows[i].floor_err)));
                if (tune_dump_json(list, t->json)) st = NP_STATUS_IO;
            }
            np_trace_free(tr);
            if (st) return err.msg[0] ? np_cli_fail(st, &err) : 1;
            if (predicted < tasks)
                printf("some tasks still have no prediction after %d calibration runs: more "
                       "--repeats or --steps\n",
                       t->repeats);
            return 0;
        }
        np_trace_free(tr);
        if (!t->keep) remove(trace);
    }
    return 0;
}

int np_cmd_tune(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(tune_help, stdout);
            return 0;
        }
    static tune t; /* large: the settings' figures */
    memset(&t, 0, sizeof t);
    int policies_given = 0;
    for (int i = 0; i < argc; i++)
        policies_given |= !strncmp(argv[i], "--policies", 10);
    int rc = parse_args(&t, argc, argv);
    if (rc) return rc;
    tune_catch_signals();
    ssize_t n = readlink("/proc/self/exe", t.exe, sizeof t.exe - 1);
    if (n <= 0) return bad_input("cannot find the nestpipe program (%s)", "/proc/self/exe");
    t.exe[n] = 0;
    if (t.keep) {
        if (mkdir(t.keep, 0755) && errno != EEXIST)
            return bad_input("--keep: cannot make the folder %s", t.keep);
        snprintf(t.dir, sizeof t.dir, "%s", t.keep);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(t.dir, sizeof t.dir, "%s/nestpipe-tune-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(t.dir)) return bad_input("cannot make a temporary folder in %s", t.dir);
    }
    if (getenv("STARPU_SCHED") && *getenv("STARPU_SCHED"))
        fprintf(stderr,
                "nestpipe: tune: warning: STARPU_SCHED=%s is not passed on: each run "
                "names its policy\n",
                getenv("STARPU_SCHED"));
    /* the train flags, checked once; their configuration gives the defaults */
    char printed[4200], v[64];
    snprintf(printed, sizeof printed, "%s/flags.printed", t.dir);
    rc = tune_print_config(&t, NULL, 0, printed);
    if (rc) {
        char line[1024];
        tune_last_line(printed, line, sizeof line);
        fprintf(stderr, "%s\n", line[0] ? line : "nestpipe: tune: the train flags are refused");
        if (!t.keep) tune_remove_dir(t.dir);
        return rc < 0 ? 1 : rc;
    }
    if (!t.windows.n) {
        tune_config_value(printed, "windows", v, sizeof v);
        snprintf(t.windows.v[0], sizeof t.windows.v[0], "%s", v[0] ? v : "0");
        t.windows.n = 1;
    }
    if (!t.chunks.n) {
        tune_config_value(printed, "chunks", v, sizeof v);
        snprintf(t.chunks.v[0], sizeof t.chunks.v[0], "%s", v[0] ? v : "4");
        t.chunks.n = 1;
    }
    if (!t.prios.n) {
        tune_config_value(printed, "priorities", v, sizeof v);
        snprintf(t.prios.v[0], sizeof t.prios.v[0], "%s", v[0] ? v : "fixed");
        t.prios.n = 1;
    }
    tune_config_value(printed, "batch", v, sizeof v);
    t.batch = atol(v);
    if (t.steps < 0) t.steps = 40;
    if (t.warmup < 0) t.warmup = t.steps / 5 > 2 ? t.steps / 5 : 2;
    if (t.warmup + 3 > t.steps) {
        fprintf(stderr,
                "nestpipe: tune: --steps %d leaves too few batches after --warmup %d "
                "(at least 3)\n",
                t.steps, t.warmup);
        rc = EXIT_BAD_INPUT;
    }
    if (!rc) rc = t.calibrate ? calibrate(&t, policies_given) : sweep(&t);
    if (!t.keep) tune_remove_dir(t.dir);
    if (tune_stop_signal) {
        fprintf(stderr, "nestpipe: tune: stopped by signal %d\n", (int)tune_stop_signal);
        return 128 + tune_stop_signal;
    }
    return rc;
}
