/* What `nestpipe tune` writes: the ranked table, the SVG bar chart, the JSON figures, the
 * best setting as a config file, and the machine and perf-model lines. Not here: the sweep
 * (tune.c), the runs (tune_run.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tune.h"

void tune_print_table(FILE *f, const tune *t, int *order) {
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
static FILE *tune_open_out(const char *path, char *tmp, size_t n) {
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) fprintf(stderr, "nestpipe: tune: cannot write %s: %s\n", tmp, strerror(errno));
    return f;
}

static int tune_close_out(FILE *f, const char *tmp, const char *path) {
    int bad = ferror(f) | (fclose(f) != 0);
    if (bad || rename(tmp, path)) {
        fprintf(stderr, "nestpipe: tune: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return 1;
    }
    return 0;
}

int tune_write_svg(const tune *t, const int *order) {
    char tmp[4200];
    FILE *f = tune_open_out(t->svg, tmp, sizeof tmp);
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
    return tune_close_out(f, tmp, t->svg);
}

/* Writes a JSON document through PATH.tmp and a rename (steals root). */
int tune_dump_json(json_t *root, const char *path) {
    char tmp[4200];
    FILE *f = root ? tune_open_out(path, tmp, sizeof tmp) : NULL;
    if (!root) fprintf(stderr, "nestpipe: tune: out of memory writing %s\n", path);
    int rc = !f || json_dumpf(root, f, JSON_INDENT(1)) || fputc('\n', f) == EOF;
    json_decref(root);
    if (f)
        rc |= tune_close_out(f, tmp, path);
    else
        rc = 1;
    return rc;
}

json_t *tune_num(double x) {
    return isfinite(x) ? json_real(x) : json_null();
}

int tune_write_json(const tune *t, const int *order) {
    json_t *list = json_array();
    for (int i = 0; list && i < t->n; i++) {
        const setting *s = &t->s[order[i]];
        json_t *runs = json_array();
        for (int r = 0; runs && r < s->runs; r++)
            json_array_append_new(runs, tune_num(s->step_ms[r]));
        json_array_append_new(
            list, json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:b, s:o, s:o, s:o}",
                            "rank", i + 1, "sched", s->sched, "priorities", s->prio, "workers",
                            s->workers, "windows", s->windows, "chunks", s->chunks,
                            "step_ms_median", tune_num(s->med), "step_ms_q1", tune_num(s->q1),
                            "step_ms_q3", tune_num(s->q3), "uncertain", s->uncertain, "idle_share",
                            tune_num(s->idle_med), "exposed_exchange_ms", tune_num(s->exposed_med),
                            "step_ms", runs ? runs : json_null()));
    }
    return tune_dump_json(list ? json_pack("{s:I, s:i, s:i, s:o}", "batch", (json_int_t)t->batch,
                                           "steps", t->steps, "warmup", t->warmup, "settings", list)
                               : NULL,
                          t->json);
}

/* The best setting as a config file: train PASS with its flags, --print-config, under a
 * header that says what tune measured. */
int tune_write_best(const tune *t, const setting *b) {
    char *extra[] = {"--sched",  (char *)b->sched,  "--windows",    (char *)b->windows,
                     "--chunks", (char *)b->chunks, "--priorities", (char *)b->prio};
    char printed[4200], tmp[4200];
    snprintf(printed, sizeof printed, "%s/best.printed", t->dir);
    int rc = tune_print_config(t, extra, (int)(sizeof extra / sizeof *extra), printed);
    if (rc) {
        char line[1024];
        tune_last_line(printed, line, sizeof line);
        fprintf(stderr, "nestpipe: tune: cannot print the best setting's config: %s\n", line);
        return 1;
    }
    FILE *in = fopen(printed, "r"), *f = in ? tune_open_out(t->out, tmp, sizeof tmp) : NULL;
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
    return tune_close_out(f, tmp, t->out);
}

void tune_machine_line(FILE *f) {
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
void tune_models_line(FILE *f) {
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
