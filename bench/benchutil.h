/* What the C benchmarks share: a monotonic clock in microseconds, a comparison for
 * medians, the CPU's name for the result line. Header-only, bench/ only. */
#ifndef NP_BENCH_BENCHUTIL_H
#define NP_BENCH_BENCHUTIL_H

#include <stdio.h>
#include <string.h>
#include <time.h>

static inline double bench_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* qsort's comparison of doubles, ascending */
static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The CPU's model name from /proc/cpuinfo into buf ("unknown" when not found). */
static inline void bench_cpu_name(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            const char *c = strchr(line, ':');
            snprintf(buf, cap, "%.*s", (int)strcspn(c ? c + 2 : line, "\n"), c ? c + 2 : line);
            break;
        }
    if (f) fclose(f);
}

#endif
