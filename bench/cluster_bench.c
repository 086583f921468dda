/* Key-centric clustering benchmark: exchange volume (sum over windows of distinct keys)
 * with contiguous windows vs clustered windows, and the clustering's time, for G = 8192 on
 * Zipf 1.05 synthetic data, W = 4 and 8. Median of several batches. Prints markdown rows.
 * usage: cluster_bench TABLES ROWS GROUPS. Run by bench/cluster.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "codelets/kernels/kernels.h"
#include "nestpipe/nestpipe.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *tables = argc > 1 ? argv[1] : "26", *rows = argc > 2 ? argv[2] : "100000";
    const char *groups = argc > 3 ? argv[3] : "0";
    const long G = 8192;
    const int reps = 5;
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    if (np_config_set(&c, "tables", tables, "bench", &e) ||
        np_config_set(&c, "groups", groups, "bench", &e) ||
        np_config_set(&c, "rows", rows, "bench", &e) ||
        np_config_set(&c, "batch", "8192", "bench", &e) ||
        np_config_set(&c, "zipf", "1.05", "bench", &e)) {
        fprintf(stderr, "cluster_bench: %s\n", e.msg);
        return 2;
    }
    np_source_t *src;
    if (np_source_open(&c, NP_SPLIT_TRAIN, &src, &e)) {
        fprintf(stderr, "cluster_bench: %s\n", e.msg);
        return 1;
    }
    np_batch b = {0};
    long *perm = malloc(G * sizeof *perm), bounds[65];

    int Ws[2] = {4, 8};
    for (int wi = 0; wi < 2; wi++) {
        int W = Ws[wi];
        double red[8], ms[8];
        long vn = 0, vk = 0;
        for (int r = 0; r < reps; r++) {
            if (np_source_next_batch(src, G, &b, &e)) return 1;
            np_cluster_windows(b.offsets, b.keys, b.n, b.n_tables, W, 0, perm, bounds);
            vn = np_window_volume(b.offsets, b.keys, b.n, b.n_tables, W, perm, bounds);
            double t0 = now_ms();
            if (np_cluster_windows(b.offsets, b.keys, b.n, b.n_tables, W, 1, perm, bounds))
                return 1;
            ms[r] = now_ms() - t0;
            vk = np_window_volume(b.offsets, b.keys, b.n, b.n_tables, W, perm, bounds);
            red[r] = 100.0 * (double)(vn - vk) / (double)vn;
        }
        qsort(red, reps, sizeof *red, cmp_d);
        qsort(ms, reps, sizeof *ms, cmp_d);
        printf("| %s | %s | %s | %d | %ld | %ld | %.1f%% | %.2f |\n", tables, rows, groups, W, vn,
               vk, red[reps / 2], ms[reps / 2]);
    }
    free(perm);
    np_batch_free(&b);
    np_source_free(src);
    return 0;
}
