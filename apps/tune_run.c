/* `nestpipe tune`'s runs: each a child `nestpipe train` (through --launcher for several
 * ranks) with its own environment, its output in a log; signals to tune reach the run and
 * stop tune after it. Not here: what is run (tune.c) or written (tune_out.c). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tune.h"

extern char **environ;

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
volatile sig_atomic_t tune_stop_signal;
static volatile pid_t running = -1;

static void on_signal(int sig) {
    tune_stop_signal = sig;
    if (running > 0) kill(running, sig);
}

double tune_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The last line of a child's log, for the one-line error. */
void tune_last_line(const char *path, char *buf, size_t n) {
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
int tune_run_train(const tune *t, char *const *extra, int n_extra, const char *ncpu,
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
    double t0 = tune_now_s();
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old); /* a signal now waits until `running` is set */
    if (tune_stop_signal) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        posix_spawn_file_actions_destroy(&fa);
        free(argv);
        free(env);
        return 128 + tune_stop_signal;
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
    if (tune_stop_signal) return 128 + tune_stop_signal;
    *secs = tune_now_s() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* `train PASS --print-config` (with the setting's flags): checks the train flags once,
 * and gives the configuration the best setting is written as. Returns the exit code. */
int tune_print_config(const tune *t, char *const *extra, int n_extra, const char *path) {
    char *args[16];
    int k = 0;
    for (int i = 0; i < n_extra && k < 15; i++)
        args[k++] = extra[i];
    args[k++] = "--print-config";
    tune local = *t;
    local.n_launcher = 0; /* one process prints it */
    double secs = 0;
    return tune_run_train(&local, args, k, NULL, NULL, path, &secs);
}

/* The value of `key = value` in a config file tune had train print; "" if none. */
void tune_config_value(const char *path, const char *key, char *out, size_t n) {
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

void tune_catch_signals(void) {
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* The temporary folder and the runs' files in it. */
void tune_remove_dir(const char *dir) {
    nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}
