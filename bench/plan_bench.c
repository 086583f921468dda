/* The exchange plan of one window (np_xchg_plan_rows) for a rank among R owners, built from
 * real keys, against the plan before 0.8 (a scan of every earlier requester's counts for
 * each requester's segment start: O(R^2 W T), copied below as it was, without its 64-rank
 * arrays), alternately in one process. First checks that both give the same plan. The keys:
 * every rank's slice of one global batch of the synthetic data (the default model's 26
 * tables, Zipf keys), deduplicated per (window, table) as route does (windows of
 * consecutive samples), counted by owner into the meta of rank `me`, the busiest (25: the
 * hottest row of table 25). Prints the median of 11 runs of W plans per side.
 * usage: plan_bench [R W samples_per_rank]   (default 1536 4 512) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/benchutil.h"
#include "runtime/core/shard.h"
#include "codelets/kernels/kernels.h"
#include "codelets/kernels/xchg_plan.h"
#include "nestpipe/nestpipe.h"


/* The plan before 0.8, as codelets/kernels/xchg_plan.c had it (rows plan): totals by a scan of
 * every window, and np_xchg_recv_start once per requester. */
static void old_plan(const int64_t *meta, int T, int W, int R, int w, int64_t *send,
                     int64_t *sdispl, int64_t *recv, int64_t *rdispl, int64_t *seg, int64_t *nseg) {
    for (int o = 0; o < R; o++) {
        send[o] = recv[o] = nseg[o] = 0;
        for (int v = 0; v < W; v++)
            if (v == w)
                for (int t = 0; t < T; t++) {
                    send[o] += meta[NP_META_RR(T, W, R, o, v, t)];
                    recv[o] += meta[NP_META_SR(T, W, R, o, v, t)];
                    nseg[o] += meta[NP_META_RC(T, W, R, o, v, t)];
                }
    }
    int64_t ns = 0, nr = 0;
    for (int q = 0; q < R; q++) {
        sdispl[q] = ns;
        rdispl[q] = nr;
        ns += send[q];
        nr += recv[q];
        seg[q] = np_xchg_recv_start(meta, T, W, R, q, w);
    }
}

int main(int argc, char **argv) {
    int R = argc > 1 ? atoi(argv[1]) : 1536, W = argc > 2 ? atoi(argv[2]) : 4;
    long nb = argc > 3 ? atol(argv[3]) : 512;
    if (R < 2 || W < 1 || nb < W) {
        fprintf(stderr, "plan_bench: R >= 2, W >= 1, samples >= W\n");
        return 2;
    }
    np_config cfg;
    np_error err = {{0}};
    np_config_defaults(&cfg);
    cfg.ranks = R;
    cfg.batch = nb * R;
    int T = cfg.tables, me = 25 % R;
    size_t n = NP_META_SIZE((size_t)T, (size_t)W, (size_t)R);
    int64_t *meta = calloc(n, sizeof *meta), *cnt = calloc((size_t)R * W * T, sizeof *cnt);
    int64_t *uniq = malloc((size_t)nb * 64 * sizeof *uniq), *pos = malloc((size_t)nb * 64 * sizeof *pos);
    np_batch b = {0};
    if (!meta || !cnt || !uniq || !pos) {
        fprintf(stderr, "plan_bench: out of memory\n");
        return 1;
    }
    double t0 = bench_now_us();
    int64_t keys = 0;
    for (int q = 0; q < R; q++) { /* requester q's slice of the first batch, routed as route does */
        np_source_t *src = NULL;
        if (np_source_open(&cfg, NP_SPLIT_TRAIN, &src, &err) ||
            np_source_next_slice(src, cfg.batch, nb * q, nb, &b, &err)) {
            fprintf(stderr, "plan_bench: %s\n", err.msg);
            return 1;
        }
        np_source_free(src);
        memset(cnt, 0, (size_t)R * W * T * sizeof *cnt);
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++) {
                const uint32_t *o = b.offsets + (size_t)t * (size_t)(nb + 1);
                size_t a = o[nb * w / W], e = o[nb * (w + 1) / W], nu = 0;
                if (np_keys_dedup(b.keys + a, e - a, uniq, &nu, pos)) return 1;
                for (size_t u = 0; u < nu; u++)
                    cnt[((size_t)np_shard_owner_in(NP_SHARD_ROW, R, T, t, uniq[u]) * W + w) * T + t]++;
            }
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++) {
                int64_t c = cnt[((size_t)me * W + w) * T + t]; /* q's keys at me */
                meta[NP_META_RC(T, W, R, q, w, t)] = meta[NP_META_RR(T, W, R, q, w, t)] = c;
                keys += c;
                if (q == me) /* me's own keys at every owner */
                    for (int o = 0; o < R; o++) {
                        int64_t s = cnt[((size_t)o * W + w) * T + t];
                        meta[NP_META_SC(T, W, o, w, t)] = meta[NP_META_SR(T, W, R, o, w, t)] = s;
                    }
            }
    }
    double routed = (bench_now_us() - t0) / 1e6;
    int64_t *old = malloc(6 * (size_t)R * sizeof *old);
    if (!old) return 1;
    /* both the same, window by window */
    for (int w = 0; w < W; w++) {
        np_xchg_plan p;
        if (np_xchg_plan_rows(meta, T, W, R, w, &p)) return 1;
        old_plan(meta, T, W, R, w, old, old + R, old + 2 * R, old + 3 * R, old + 4 * R, old + 5 * R);
        const int64_t *mine[6] = {p.send, p.sdispl, p.recv, p.rdispl, p.seg, p.nseg};
        for (int k = 0; k < 6; k++)
            if (memcmp(mine[k], old + (size_t)k * R, (size_t)R * sizeof *old)) {
                fprintf(stderr, "plan_bench: the plans differ (array %d, window %d)\n", k, w);
                return 1;
            }
        np_xchg_plan_free(&p);
    }
    enum { RUNS = 11 };
    double to[RUNS], tn[RUNS];
    int64_t sink = 0;
    for (int run = 0; run < RUNS; run++) {
        double a = bench_now_us();
        for (int w = 0; w < W; w++) {
            old_plan(meta, T, W, R, w, old, old + R, old + 2 * R, old + 3 * R, old + 4 * R, old + 5 * R);
            sink += old[5 * R - 1];
        }
        double m = bench_now_us();
        for (int w = 0; w < W; w++) {
            np_xchg_plan p;
            if (np_xchg_plan_rows(meta, T, W, R, w, &p)) return 1;
            sink += p.seg[R - 1];
            np_xchg_plan_free(&p);
        }
        double z = bench_now_us();
        to[run] = (m - a) / W;
        tn[run] = (z - m) / W;
    }
    qsort(to, RUNS, sizeof *to, bench_cmp_double);
    qsort(tn, RUNS, sizeof *tn, bench_cmp_double);
    char cpu[256];
    bench_cpu_name(cpu, sizeof cpu);
    printf("plan_bench: %s; R %d, W %d, T %d, %ld samples a rank, rank %d receives %lld keys a "
           "batch (routed in %.1f s)\n",
           cpu, R, W, T, nb, me, (long long)keys, routed);
    printf("a window's plan: before 0.8 %.3f ms, now %.3f ms (median of %d, %.0fx; checksum "
           "%lld)\n",
           to[RUNS / 2] / 1e3, tn[RUNS / 2] / 1e3, RUNS, to[RUNS / 2] / tn[RUNS / 2], (long long)sink);
    np_batch_free(&b);
    free(meta), free(cnt), free(uniq), free(pos), free(old);
    return 0;
}
