/* The collectives of nestpipe's exchanges, timed as the engine runs them (runtime/comm/, paced by
 * NP_LINK_GBIT when set): an All2All of uniform blocks and the dense all-reduce (an
 * all-gather at 2 ranks, a reduce-scatter then an all-gather above), for total sizes from
 * 64 KB to 64 MB a rank. Prints "kind ranks bytes median_us" lines; bench/scale.sh sets
 * them beside `nestpipe simulate --collective` (docs/scale.md, V0).
 * usage: mpirun -np R coll_bench [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/comm/comm.h"
#include "codelets/kernels/xchg_plan.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The engine's dense all-reduce of n floats (codelets/exchange.c, without the sum). */
static int allreduce(np_comm *c, float *mine, float *out, float *all, size_t n) {
    int R = np_comm_size(c), me = np_comm_rank(c);
    np_xchg_allreduce_plan p;
    if (np_xchg_plan_allreduce(n, R, me, &p)) return -1;
    int rc = !p.rs ? np_comm_allgather(c, NP_CHAN_DATA, mine, all, n, sizeof(float))
             : np_comm_alltoallv(c, NP_CHAN_DATA, mine, p.len, all, p.got, sizeof(float))
                 ? -1
                 : np_comm_allgatherv_inplace(c, NP_CHAN_DATA, out, p.len, sizeof(float));
    np_xchg_allreduce_plan_free(&p);
    return rc;
}

int main(int argc, char **argv) {
    np_comm *c = NULL;
    np_error err = {{0}};
    if (np_comm_init(&argc, &argv, &c, &err)) {
        fprintf(stderr, "coll_bench: %s\n", err.msg);
        return 1;
    }
    int reps = argc > 1 ? atoi(argv[1]) : 7, R = np_comm_size(c), me = np_comm_rank(c);
    if (reps < 1) reps = 1;
    size_t max = 64u << 20;
    /* an All2All's send holds R blocks of bytes / (R - 1): up to twice max */
    char *s = calloc(2 * max + 64, 1), *r = calloc(2 * max + 64, 1), *a = calloc(2 * max + 64, 1);
    double *t = malloc((size_t)reps * sizeof *t);
    int64_t *sc = malloc(2 * (size_t)R * sizeof *sc), *rc = sc ? sc + R : NULL; /* (R) each */
    if (!s || !r || !a || !t || !sc) return 1;
    for (size_t bytes = 64u << 10; bytes <= max; bytes *= 4) {
        for (int kind = 0; kind < 2; kind++) {
            /* a2a: the rank's `bytes` go to the others in equal blocks; allreduce: bytes of floats */
            size_t blk = R > 1 ? bytes / (size_t)(R - 1) : bytes;
            for (int q = 0; q < R; q++)
                sc[q] = rc[q] = (int64_t)blk;
            for (int k = 0; k < reps; k++) {
                np_comm_barrier(c, NP_CHAN_CTL);
                double t0 = now_us();
                int rcode = kind == 0
                                ? np_comm_alltoallv(c, NP_CHAN_DATA, s, sc, a, rc, 1)
                                : allreduce(c, (float *)s, (float *)r, (float *)a, bytes / sizeof(float));
                double dt = now_us() - t0;
                if (rcode) return 2;
                int64_t v = (int64_t)(dt * 1000); /* the slowest rank's time, in ns */
                if (np_comm_allreduce_i64(c, NP_CHAN_CTL, &v, 1)) return 2;
                t[k] = (double)v / 1000;
            }
            qsort(t, (size_t)reps, sizeof *t, cmp);
            if (me == 0)
                printf("%s %d %zu %.1f\n", kind ? "allreduce" : "alltoall", R, bytes, t[reps / 2]);
        }
    }
    free(s);
    free(r);
    free(a);
    free(t);
    free(sc);
    np_comm_free(c);
    return 0;
}
