/* What apps/tune.c (the sweep and the calibration), apps/tune_run.c (the train runs) and
 * apps/tune_out.c (the table, chart, JSON and config file) share: the plan of a sweep and
 * its figures. */
#ifndef NP_APPS_TUNE_H
#define NP_APPS_TUNE_H

#include <jansson.h>
#include <signal.h>
#include <stdio.h>

#define MAX_LIST 16
#define MAX_SETTINGS 64
#define MAX_ROUNDS 50

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

/* ---- apps/tune_run.c: running `nestpipe train` */

/* The signal that stopped tune (0: none); a signal to tune goes to its run too. */
extern volatile sig_atomic_t tune_stop_signal;
void tune_catch_signals(void);
double tune_now_s(void);
/* The last line of a run's log, for the one-line error. */
void tune_last_line(const char *path, char *buf, size_t n);
/* Runs [launcher] nestpipe train PASS EXTRA with stdout and stderr to log, the environment
 * without STARPU_SCHED, with STARPU_NCPU=ncpu and STARPU_CALIBRATE=calibrate when given.
 * Returns the exit code (128 + signal when stopped), -1 when it cannot start. */
int tune_run_train(const tune *t, char *const *extra, int n_extra, const char *ncpu,
                   const char *calibrate, const char *log, double *secs);
/* `train PASS EXTRA --print-config` into path, one process; the exit code. */
int tune_print_config(const tune *t, char *const *extra, int n_extra, const char *path);
/* The value of `key = value` in a file tune_print_config wrote; "" if none. */
void tune_config_value(const char *path, const char *key, char *out, size_t n);
/* The folder of the runs and everything in it. */
void tune_remove_dir(const char *dir);

/* ---- apps/tune_out.c: what tune writes (order: the settings, best first) */

void tune_print_table(FILE *f, const tune *t, int *order);
int tune_write_svg(const tune *t, const int *order);
int tune_write_json(const tune *t, const int *order);
/* The best setting as a config file (--out); 0 or 1 after printing the error. */
int tune_write_best(const tune *t, const setting *b);
/* A JSON document through PATH.tmp and a rename (steals root); 0 or 1. */
int tune_dump_json(json_t *root, const char *path);
json_t *tune_num(double x); /* null when not finite */
void tune_machine_line(FILE *f);
void tune_models_line(FILE *f);

#endif
