/* A rank's read of its slice of each global batch from a binary file (np_source_next_slice:
 * a seek through the file's record index, then its records) against the whole batch read
 * and cut (what every rank did before 0.8, and still does for shuffled or skipping data),
 * alternately in one process, batch after batch. First checks that both give the same
 * slice. The file: `records` synthetic records of the default model (26 tables, 13 dense,
 * one key a table), written to DIR. Prints the median time a step of each side.
 * usage: read_bench DIR [ranks batch_per_rank batches]   (default 64 512 8) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/benchutil.h"
#include "runtime/data/data.h"
#include "nestpipe/nestpipe.h"


static int die(const char *what, const np_error *e) {
    fprintf(stderr, "read_bench: %s: %s\n", what, e ? e->msg : "");
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: read_bench DIR [ranks batch_per_rank batches]\n");
        return 2;
    }
    int R = argc > 2 ? atoi(argv[2]) : 64;
    long nb = argc > 3 ? atol(argv[3]) : 512, K = argc > 4 ? atol(argv[4]) : 8;
    if (R < 2 || nb < 1 || K < 1) return 2;
    long g = nb * R;
    char path[4096], v[4200];
    snprintf(path, sizeof path, "%s/read_bench.bin", argv[1]);
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    if (np_generate_synthetic(&c, g * K, path, &e)) return die("generate", &e);
    snprintf(v, sizeof v, "bin:%s", path);
    if (np_config_set(&c, "data", v, "read_bench", &e) ||
        np_config_set(&c, "eval-every", "0", "read_bench", &e))
        return die("config", &e);
    /* the last rank's slice: the most records before it */
    long lo = g - nb;
    np_source_t *whole = NULL, *part = NULL;
    if (np_source_open(&c, NP_SPLIT_TRAIN, &whole, &e) ||
        np_source_open(&c, NP_SPLIT_TRAIN, &part, &e))
        return die("open", &e);
    np_batch bw = {0}, cut = {0}, bp = {0};
    double *tw = malloc((size_t)K * sizeof *tw), *tp = malloc((size_t)K * sizeof *tp);
    if (!tw || !tp) return die("out of memory", NULL);
    for (long k = 0; k < K; k++) {
        double a = bench_now_us();
        if (np_source_next_batch(whole, g, &bw, &e) || np_batch_slice(&bw, lo, nb, &cut, &e))
            return die("whole batch", &e);
        double m = bench_now_us();
        if (np_source_next_slice(part, g, lo, nb, &bp, &e)) return die("slice", &e);
        double z = bench_now_us();
        tw[k] = m - a;
        tp[k] = z - m;
        if (bp.nnz != cut.nnz || memcmp(bp.keys, cut.keys, bp.nnz * sizeof *bp.keys) ||
            memcmp(bp.dense, cut.dense, (size_t)nb * 13 * sizeof *bp.dense) ||
            memcmp(bp.label, cut.label, (size_t)nb * sizeof *bp.label))
            return die("the slices differ", NULL);
    }
    qsort(tw, (size_t)K, sizeof *tw, bench_cmp_double);
    qsort(tp, (size_t)K, sizeof *tp, bench_cmp_double);
    char cpu[256];
    bench_cpu_name(cpu, sizeof cpu);
    printf("read_bench: %s; %d ranks, %ld records a rank, %ld batches of %ld from %s\n", cpu, R,
           nb, K, g, path);
    printf("a step's read: the whole batch, cut %.3f ms; the rank's slice %.3f ms (median of "
           "%ld: %.1fx less)\n",
           tw[K / 2] / 1e3, tp[K / 2] / 1e3, K, tw[K / 2] / tp[K / 2]);
    np_batch_free(&bw), np_batch_free(&cut), np_batch_free(&bp);
    np_source_free(whole), np_source_free(part);
    free(tw), free(tp);
    remove(path);
    return 0;
}
