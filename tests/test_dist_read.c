/* Reading a model back across ranks, through the public API only: a job trained with
 * np_train_run on every rank of mpirun, then every tensor read by name with
 * np_dist_model_read on every rank. Each rank must get the same values, and they must be
 * the values of the whole model gathered on rank 0 (np_dist_gather_model), which the dump
 * tests hold to the single-process model. Run under mpirun (tests/CMakeLists.txt: 2 ranks
 * row-sharded, 3 ranks table-sharded). usage: test_dist_read row|table */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nestpipe/dist.h"
#include "nestpipe/train.h"

static int fail(np_dist_t *d, const char *what, const np_error *e) {
    fprintf(stderr, "test_dist_read: rank %d: %s%s%s\n", np_dist_rank(d), what, e ? ": " : "",
            e ? e->msg : "");
    np_dist_abort(d, 1);
    return 1;
}

/* The same double on every rank: the maximum of its bits and of their negation agree. */
static int same_everywhere(np_dist_t *d, double x) {
    int64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int64_t hi = bits, lo = -bits;
    if (np_dist_max_i64(d, &hi, NULL) || np_dist_max_i64(d, &lo, NULL)) return 0;
    return hi == -lo;
}

int main(int argc, char **argv) {
    np_dist_t *d;
    np_error e = {{0}};
    if (np_dist_init(&argc, &argv, &d, &e)) {
        fprintf(stderr, "test_dist_read: %s\n", e.msg);
        return 1;
    }
    const char *shard = argc > 1 ? argv[1] : "row";
    np_config c;
    np_config_defaults(&c);
    static const char *kv[][2] = {{"tables", "5"},    {"rows", "997"},  {"dim", "8"},
                                  {"bottom", "13-16-8"}, {"top", "16-1"}, {"batch", "240"},
                                  {"steps", "4"},     {"quiet", "1"},   {"eval-samples", "240"}};
    for (size_t k = 0; k < sizeof kv / sizeof *kv; k++)
        if (np_config_set(&c, kv[k][0], kv[k][1], "test", &e)) return fail(d, "config", &e);
    if (np_config_set(&c, "shard", shard, "test", &e)) return fail(d, "config", &e);
    np_model_t *m = NULL;
    np_train_result r;
    if (np_train_run(d, &c, NULL, &m, &r, &e)) return fail(d, "np_train_run", &e);
    np_model_t *full = NULL; /* rank 0: the whole model */
    if (np_dist_gather_model(d, m, &full, &e)) return fail(d, "gather", &e);
    int checked = 0;
    for (int i = 0; i < np_model_tensor_count(m); i++) {
        char name[64];
        int nd;
        int64_t dims[2];
        if (np_model_tensor_info(m, i, name, sizeof name, &nd, dims, &e))
            return fail(d, "tensor info", &e);
        size_t n = (size_t)dims[0] * (size_t)dims[1], got = 0;
        float *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
        if (!v || !w) return fail(d, "out of memory", NULL);
        if (np_dist_model_read(d, m, name, v, n, &got, &e)) return fail(d, name, &e);
        if (got != n) return fail(d, "a short read", NULL);
        double sum = 0; /* a checksum every rank must share */
        for (size_t k = 0; k < n; k++)
            sum += (double)v[k] * (double)((k % 7) + 1);
        if (!same_everywhere(d, sum)) return fail(d, "ranks read different values", NULL);
        if (full) {
            if (np_dist_model_read(NULL, full, name, w, n, &got, &e)) return fail(d, name, &e);
            if (memcmp(v, w, n * sizeof *v)) {
                fprintf(stderr, "test_dist_read: %s differs from the gathered model\n", name);
                np_dist_abort(d, 1);
            }
        }
        free(v);
        free(w);
        checked++;
    }
    if (np_dist_rank(d) == 0)
        printf("test_dist_read: %d tensors read on %d ranks (%s-sharded): the same values on "
               "every rank, equal to the gathered model\n",
               checked, np_dist_size(d), shard);
    np_model_free(full);
    np_model_free(m);
    np_dist_free(d);
    return 0;
}
