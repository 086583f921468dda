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
 * Not here: the runs themselves (train), the trace format (trace/). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "nestpipe/trace.h"

extern char **environ;

#define MAX_LIST 16
#define MAX_SETTINGS 64
#define MAX_ROUNDS 50

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

/* ------------------------------------------------------------------ the sweep's plan */

typedef struct list {
    char v[MAX_LIST][64];
    int n;
} list;

typedef struct setting {
    const char *sched, *workers, *windows, *chunks; /* "" workers: the environment's */
    const char *prio;                               /* --priorities */
    double step_ms[MAX_ROUNDS];                     /* each round's steady step */
    double idle[MAX_ROUNDS], exposed_ms[MAX_ROUNDS];
    int runs;
    double med, q1, q3, idle_med, exposed_med; /* after the sweep */
    int uncertain;
} setting;

typedef struct tune {
    list policies, workers, windows, chunks, prios;
    int repeats, steps, warmup, calibrate;
    double budget_s;
    char **launcher; /* NULL-terminated */
    int n_launcher;
    const char *out, *svg, *json, *keep;
    char **pass; /* the train flags */
    int n_pass;
    char exe[4096];
    char dir[4096]; /* where the runs write */
    long batch;     /* from the train flags' configuration: samples per step, all ranks */
    setting s[MAX_SETTINGS];
    int n;
} tune;

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

/* ------------------------------------------------------------------ running train */

/* The environment of a child: the parent's without STARPU_SCHED (tune names the policy),
 * STARPU_NCPU when the setting gives one, STARPU_CALIBRATE as asked. */
static char **child_env(const char *ncpu, const char *calibrate) {
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 4, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(environ[i], "STARPU_SCHED=", 13)) continue;
        if (ncpu &&
            (!strncmp(environ[i], "STARPU_NCPU=", 12) || !strncmp(environ[i], "STARPU_NCPUS=", 13)))
            continue;
        if (calibrate && !strncmp(environ[i], "STARPU_CALIBRATE=", 17)) continue;
        env[k++] = environ[i];
    }
    static char nc[64], cal[64];
    if (ncpu) {
        snprintf(nc, sizeof nc, "STARPU_NCPU=%s", ncpu);
        env[k++] = nc;
    }
    if (calibrate) {
        snprintf(cal, sizeof cal, "STARPU_CALIBRATE=%s", calibrate);
        env[k++] = cal;
    }
    return env;
}

/* A signal to tune goes to its run too, and tune stops after it (removing its folder). */
static volatile sig_atomic_t stop_signal;
static volatile pid_t running = -1;

static void on_signal(int sig) {
    stop_signal = sig;
    if (running > 0) kill(running, sig);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The last line of a child's log, for the one-line error. */
static void last_line(const char *path, char *buf, size_t n) {
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f))
        if (line[0] != '\n') snprintf(buf, n, "%s", line);
    fclose(f);
    size_t l = strlen(buf);
    if (l && buf[l - 1] == '\n') buf[l - 1] = 0;
}

/* Runs [launcher] nestpipe train PASS EXTRA with stdout and stderr to log. Returns the exit
 * code (128 + signal when killed), -1 when it cannot start. */
static int run_train(const tune *t, char *const *extra, int n_extra, const char *ncpu,
                     const char *calibrate, const char *log, double *secs) {
    int n = t->n_launcher + 2 + t->n_pass + n_extra + 1;
    char **argv = calloc((size_t)n, sizeof *argv);
    char **env = child_env(ncpu, calibrate);
    if (!argv || !env) {
        free(argv);
        free(env);
        return -1;
    }
    int k = 0;
    for (int i = 0; i < t->n_launcher; i++)
        argv[k++] = t->launcher[i];
    argv[k++] = (char *)t->exe;
    argv[k++] = "train";
    for (int i = 0; i < t->n_pass; i++)
        argv[k++] = t->pass[i];
    for (int i = 0; i < n_extra; i++)
        argv[k++] = extra[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    double t0 = now_s();
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old); /* a signal now waits until `running` is set */
    if (stop_signal) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        posix_spawn_file_actions_destroy(&fa);
        free(argv);
        free(env);
        return 128 + stop_signal;
    }
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setsigmask(&at, &old); /* the run gets the mask tune had */
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    int rc = t->n_launcher ? posix_spawnp(&pid, argv[0], &fa, &at, argv, env)
                           : posix_spawn(&pid, argv[0], &fa, &at, argv, env);
    if (!rc) running = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    free(argv);
    free(env);
    if (rc) {
        fprintf(stderr, "nestpipe: tune: cannot start %s: %s\n",
                t->n_launcher ? t->launcher[0] : t->exe, strerror(rc));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            running = -1;
            return -1;
        }
    running = -1;
    if (stop_signal) return 128 + stop_signal;
    *secs = now_s() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* `train PASS --print-config` (with the setting's flags): checks the train flags once,
 * and gives the configuration the best setting is written as. Returns the exit code. */
static int print_config(const tune *t, char *const *extra, int n_extra, const char *path) {
    char *args[16];
    int k = 0;
    for (int i = 0; i < n_extra && k < 15; i++)
        args[k++] = extra[i];
    args[k++] = "--print-config";
    tune local = *t;
    local.n_launcher = 0; /* one process prints it */
    double secs = 0;
    return run_train(&local, args, k, NULL, NULL, path, &secs);
}

/* The value of `key = value` in a config file tune had train print; "" if none. */
static void config_value(const char *path, const char *key, char *out, size_t n) {
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1200];
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) || strncmp(line + kl, " = ", 3)) continue;
        char *v = line + kl + 3;
        v[strcspn(v, " \n")] = 0;
        snprintf(out, n, "%s", v);
    }
    fclose(f);
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

/* ------------------------------------------------------------------ output */

static void print_table(FILE *f, const tune *t, int *order) {
    fprintf(f, "%-4s %-8s %-13s %-7s %-7s %-6s %10s %17s %7s %10s %6s %12s\n", "rank", "sched",
            "priorities", "workers", "windows", "chunks", "step ms", "IQR ms", "spread",
            "samples/s", "idle", "exposed ms");
    for (int i = 0; i < t->n; i++) {
        const setting *s = &t->s[order[i]];
        char iqr[40];
        snprintf(iqr, sizeof iqr, "%.2f-%.2f", s->q1, s->q3);
        fprintf(f, "%3d%c %-8s %-13s %-7s %-7s %-6s %10.2f %17s %6.1f%% %10.0f %5.1f%% %12.2f\n",
                i + 1, s->uncertain ? '~' : ' ', s->sched, s->prio,
                s->workers[0] ? s->workers : "env", s->windows, s->chunks, s->med, iqr,
                100 * (s->q3 - s->q1) / s->med, (double)t->batch / (s->med / 1e3),
                100 * s->idle_med, s->exposed_med);
    }
}

/* Writes through PATH.tmp and a rename; returns 0 or prints the error and returns 1. */
static FILE *open_out(const char *path, char *tmp, size_t n) {
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) fprintf(stderr, "nestpipe: tune: cannot write %s: %s\n", tmp, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *tmp, const char *path) {
    int bad = ferror(f) | (fclose(f) != 0);
    if (bad || rename(tmp, path)) {
        fprintf(stderr, "nestpipe: tune: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return 1;
    }
    return 0;
}

static int write_svg(const tune *t, const int *order) {
    char tmp[4200];
    FILE *f = open_out(t->svg, tmp, sizeof tmp);
    if (!f) return 1;
    double top = 0;
    for (int i = 0; i < t->n; i++)
        top = fmax(top, t->s[i].q3);
    const int left = 340, width = 480, row = 26, head = 40;
    int h = head + row * t->n + 40;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            left + width + 120, h);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f,
            "<text x=\"10\" y=\"20\" font-size=\"14\">nestpipe tune: steady-state step time "
            "(median of %d runs at most; whiskers: interquartile range; ~: rank uncertain)"
            "</text>\n",
            t->repeats);
    for (int i = 0; i < t->n; i++) {
        const setting *s = &t->s[order[i]];
        double y = head + row * i, x = (double)width / top;
        fprintf(f, "<text x=\"10\" y=\"%.0f\">%d%s %s %s  windows %s  chunks %s%s%s</text>\n",
                y + 16, i + 1, s->uncertain ? "~" : "", s->sched, s->prio, s->windows, s->chunks,
                s->workers[0] ? "  workers " : "", s->workers);
        fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"%.1f\" height=\"18\" fill=\"%s\"/>\n", left,
                y + 4, s->med * x,
                i == 0         ? "#2b7bba"
                : s->uncertain ? "#7fb2d9"
                               : "#b0b0b0");
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
                left + s->q1 * x, left + s->q3 * x, y + 13, y + 13);
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\">%.2f ms</text>\n", left + s->q3 * x + 6, y + 17,
                s->med);
    }
    fprintf(f, "</svg>\n");
    return close_out(f, tmp, t->svg);
}

/* Writes a JSON document through PATH.tmp and a rename (steals root). */
static int dump_json(json_t *root, const char *path) {
    char tmp[4200];
    FILE *f = root ? open_out(path, tmp, sizeof tmp) : NULL;
    if (!root) fprintf(stderr, "nestpipe: tune: out of memory writing %s\n", path);
    int rc = !f || json_dumpf(root, f, JSON_INDENT(1)) || fputc('\n', f) == EOF;
    json_decref(root);
    if (f)
        rc |= close_out(f, tmp, path);
    else
        rc = 1;
    return rc;
}

static json_t *num(double x) {
    return isfinite(x) ? json_real(x) : json_null();
}

static int write_json(const tune *t, const int *order) {
    json_t *list = json_array();
    for (int i = 0; list && i < t->n; i++) {
        const setting *s = &t->s[order[i]];
        json_t *runs = json_array();
        for (int r = 0; runs && r < s->runs; r++)
            json_array_append_new(runs, num(s->step_ms[r]));
        json_array_append_new(
            list,
            json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:b, s:o, s:o, s:o}", "rank",
                      i + 1, "sched", s->sched, "priorities", s->prio, "workers", s->workers,
                      "windows", s->windows, "chunks", s->chunks, "step_ms_median", num(s->med),
                      "step_ms_q1", num(s->q1), "step_ms_q3", num(s->q3), "uncertain", s->uncertain,
                      "idle_share", num(s->idle_med), "exposed_exchange_ms", num(s->exposed_med),
                      "step_ms", runs ? runs : json_null()));
    }
    return dump_json(list ? json_pack("{s:I, s:i, s:i, s:o}", "batch", (json_int_t)t->batch,
                                      "steps", t->steps, "warmup", t->warmup, "settings", list)
                          : NULL,
                     t->json);
}

/* The best setting as a config file: train PASS with its flags, --print-config, under a
 * header that says what tune measured. */
static int write_best(const tune *t, const setting *b) {
    char *extra[] = {"--sched",  (char *)b->sched,  "--windows",    (char *)b->windows,
                     "--chunks", (char *)b->chunks, "--priorities", (char *)b->prio};
    char printed[4200], tmp[4200];
    snprintf(printed, sizeof printed, "%s/best.printed", t->dir);
    int rc = print_config(t, extra, (int)(sizeof extra / sizeof *extra), printed);
    if (rc) {
        char line[1024];
        last_line(printed, line, sizeof line);
        fprintf(stderr, "nestpipe: tune: cannot print the best setting's config: %s\n", line);
        return 1;
    }
    FILE *in = fopen(printed, "r"), *f = in ? open_out(t->out, tmp, sizeof tmp) : NULL;
    if (!f) {
        if (in) fclose(in);
        return 1;
    }
    fprintf(f,
            "# nestpipe tune's best setting: sched %s, priorities %s, windows %s, chunks %s, "
            "workers %s\n# steady-state step %.3f ms (median of %d runs, IQR %.3f-%.3f ms)\n",
            b->sched, b->prio, b->windows, b->chunks,
            b->workers[0] ? b->workers : "(the environment's)", b->med, b->runs, b->q1, b->q3);
    if (b->workers[0])
        fprintf(f, "# run it with STARPU_NCPU=%s (a worker count is not a config key)\n",
                b->workers);
    char line[4200];
    while (fgets(line, sizeof line, in))
        fputs(line, f);
    fclose(in);
    return close_out(f, tmp, t->out);
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
    int rc = run_train(t, extra, (int)(sizeof extra / sizeof *extra),
                       s->workers[0] ? s->workers : NULL, NULL, log, secs);
    if (stop_signal) return 128 + stop_signal;
    if (rc) {
        char line[1024];
        last_line(log, line, sizeof line);
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

static void machine_line(FILE *f) {
    char model[256] = "an unknown CPU", line[512];
    FILE *c = fopen("/proc/cpuinfo", "r");
    while (c && fgets(line, sizeof line, c))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (c) fclose(c);
    fprintf(f, "machine: %s, %ld cores online\n", model, sysconf(_SC_NPROCESSORS_ONLN));
}

/* Where StarPU keeps the perf models (its rule: STARPU_PERF_MODEL_DIR, else
 * STARPU_HOME/.starpu/sampling, else HOME's). */
static void models_line(FILE *f) {
    const char *dir = getenv("STARPU_PERF_MODEL_DIR"), *home = getenv("STARPU_HOME");
    if (dir && *dir)
        fprintf(f, "perf models: %s (STARPU_PERF_MODEL_DIR)\n", dir);
    else
        fprintf(f, "perf models: %s/.starpu/sampling (%s)\n",
                home && *home    ? home
                : getenv("HOME") ? getenv("HOME")
                                 : ".",
                home && *home ? "STARPU_HOME" : "STARPU_HOME unset: your home");
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
    machine_line(stdout);
    models_line(stdout);
    printf("tune: %d settings, steps %d (the first %d left out), up to %d rounds in %.0f s\n", t->n,
           t->steps, t->warmup, t->repeats, t->budget_s);
    fflush(stdout);
    double t0 = now_s();
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
            double round = now_s() - t0;
            int fit = (int)(t->budget_s / round);
            rounds = fit < 1 ? 1 : fit < t->repeats ? fit : t->repeats;
            printf("tune: a round took %.1f s: %d round%s\n", round, rounds,
                   rounds == 1 ? " (no spread: the ranks are not certain)" : "s");
            fflush(stdout);
        }
    }
    int order[MAX_SETTINGS];
    summarize(t, order);
    print_table(stdout, t, order);
    int any = 0;
    for (int i = 1; i < t->n; i++)
        any |= t->s[order[i]].uncertain;
    if (any)
        printf("~: its interquartile range meets the first's: its rank against the first is "
               "not certain (more --repeats, or longer runs)\n");
    int rc = write_best(t, &t->s[order[0]]);
    if (!rc) printf("best setting written to %s (nestpipe train --config %s)\n", t->out, t->out);
    if (!rc && t->svg && !(rc = write_svg(t, order))) printf("chart written to %s\n", t->svg);
    if (!rc && t->json && !(rc = write_json(t, order))) printf("figures written to %s\n", t->json);
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
    machine_line(stdout);
    models_line(stdout);
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
        int rc = run_train(t, cal, (int)(sizeof cal / sizeof *cal), NULL, "1", log, &secs);
        snprintf(trace, sizeof trace, "%s/check-%02d.trace.json", t->dir, c);
        char *check[] = {"--sched",     (char *)sched,       "--steps",
                         steps,         "--quiet",           "--trace",
                         trace,         "--chunks",          t->chunks.v[0],
                         "--windows",   t->windows.v[0],     "--priorities",
                         t->prios.v[0], "--checkpoint-dir=", "--checkpoint-every=0",
                         "--resume=",   "--dump-params=",    "--log-json="};
        if (!rc) {
            snprintf(log, sizeof log, "%s/check-%02d.log", t->dir, c);
            rc = run_train(t, check, (int)(sizeof check / sizeof *check), NULL, "0", log, &secs);
        }
        if (stop_signal) return 128 + stop_signal;
        if (rc) {
            char line[1024];
            last_line(log, line, sizeof line);
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
                printf("%-22s %7s %9s %10s %13s %9s\n", "codelet", "tasks", "predicted", "mean us",
                       "median error", "p90 error");
                for (int i = 0; i < n_rows; i++)
                    printf("%-22s %7ld %8.0f%% %10.1f %12.1f%% %8.1f%%\n", rows[i].name,
                           rows[i].tasks, 100.0 * (double)rows[i].predicted / (double)rows[i].tasks,
                           rows[i].mean_us, 100 * rows[i].median_err, 100 * rows[i].p90_err);
            }
            if (!st && t->json) {
                json_t *list = json_array();
                for (int i = 0; list && i < n_rows; i++)
                    json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:o, s:o, s:o}",
                                                          "codelet", rows[i].name, "tasks",
                                                          (json_int_t)rows[i].tasks, "predicted",
                                                          (json_int_t)rows[i].predicted, "mean_us",
                                                          num(rows[i].mean_us), "median_error",
                                                          num(rows[i].median_err), "p90_error",
                                                          num(rows[i].p90_err)));
                if (dump_json(list, t->json)) st = NP_STATUS_IO;
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

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* The temporary folder and the runs' files in it. */
static void remove_dir(const char *dir) {
    nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
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
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
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
    rc = print_config(&t, NULL, 0, printed);
    if (rc) {
        char line[1024];
        last_line(printed, line, sizeof line);
        fprintf(stderr, "%s\n", line[0] ? line : "nestpipe: tune: the train flags are refused");
        if (!t.keep) remove_dir(t.dir);
        return rc < 0 ? 1 : rc;
    }
    if (!t.windows.n) {
        config_value(printed, "windows", v, sizeof v);
        snprintf(t.windows.v[0], sizeof t.windows.v[0], "%s", v[0] ? v : "0");
        t.windows.n = 1;
    }
    if (!t.chunks.n) {
        config_value(printed, "chunks", v, sizeof v);
        snprintf(t.chunks.v[0], sizeof t.chunks.v[0], "%s", v[0] ? v : "4");
        t.chunks.n = 1;
    }
    if (!t.prios.n) {
        config_value(printed, "priorities", v, sizeof v);
        snprintf(t.prios.v[0], sizeof t.prios.v[0], "%s", v[0] ? v : "fixed");
        t.prios.n = 1;
    }
    config_value(printed, "batch", v, sizeof v);
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
    if (!t.keep) remove_dir(t.dir);
    if (stop_signal) {
        fprintf(stderr, "nestpipe: tune: stopped by signal %d\n", (int)stop_signal);
        return 128 + stop_signal;
    }
    return rc;
}
