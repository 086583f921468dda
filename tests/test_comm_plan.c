/* codelets/kernels/xchg_plan.h by hand (the counts, displacements and segments of an exchange plan,
 * the all-reduce's slices) and --comm's checks (runtime/comm/backend.h). Not here: the exchanges
 * themselves on simulated ranks (test_comm_backend.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/backend.h"
#include "codelets/kernels/xchg_plan.h"
#include "runtime/core/shard.h"

/* Counts and displacements of a plan, by hand: 2 ranks, 1 table, 2 windows. */
static void test_plan_by_hand(void **state) {
    (void)state;
    enum { t1 = 1, w2 = 2, r2 = 2 };
    int64_t meta[NP_META_SIZE(t1, w2, r2)] = {0};
    /* sent to owner o in window w: (0,0)=3 (0,1)=1 (1,0)=2 (1,1)=4 */
    meta[NP_META_SC(t1, w2, 0, 0, 0)] = 3;
    meta[NP_META_SC(t1, w2, 0, 1, 0)] = 1;
    meta[NP_META_SC(t1, w2, 1, 0, 0)] = 2;
    meta[NP_META_SC(t1, w2, 1, 1, 0)] = 4;
    /* received from requester q in window w: (0,0)=5 (0,1)=6 (1,0)=7 (1,1)=8 */
    meta[NP_META_RC(t1, w2, r2, 0, 0, 0)] = 5;
    meta[NP_META_RC(t1, w2, r2, 0, 1, 0)] = 6;
    meta[NP_META_RC(t1, w2, r2, 1, 0, 0)] = 7;
    meta[NP_META_RC(t1, w2, r2, 1, 1, 0)] = 8;
    for (int o = 0; o < r2; o++) /* rows segments: a row a key */
        for (int w = 0; w < w2; w++) {
            meta[NP_META_SR(t1, w2, r2, o, w, 0)] = meta[NP_META_SC(t1, w2, o, w, 0)];
            meta[NP_META_RR(t1, w2, r2, o, w, 0)] = meta[NP_META_RC(t1, w2, r2, o, w, 0)];
        }
    np_xchg_plan p;
    assert_int_equal(np_xchg_plan_rows(meta, t1, w2, r2, 1, &p), 0);
    assert_int_equal(p.send[0], 6);
    assert_int_equal(p.send[1], 8);
    assert_int_equal(p.sdispl[1], 6);
    assert_int_equal(p.recv[0], 1);
    assert_int_equal(p.recv[1], 4);
    assert_int_equal(p.rdispl[1], 1);
    /* map: requester 0's window 0 (5), window 1 (6), requester 1's window 0 (7), 1 (8) */
    assert_int_equal(p.seg[0], 5);
    assert_int_equal(p.seg[1], 5 + 6 + 7);
    np_xchg_plan_free(&p);
    assert_int_equal(np_xchg_plan_grads(meta, t1, w2, r2, 0, &p), 0);
    assert_int_equal(p.send[0], 3);
    assert_int_equal(p.send[1], 2);
    assert_int_equal(p.recv[0], 5);
    assert_int_equal(p.recv[1], 7);
    assert_int_equal(p.rdispl[1], 5);
    assert_int_equal(p.seg[0], 0);
    assert_int_equal(p.seg[1], 11);
    assert_int_equal(p.nseg[1], 7);
    /* a segment that names a row twice is caught */
    int64_t map[26];
    for (int i = 0; i < 26; i++)
        map[i] = i;
    assert_true(np_xchg_segments_distinct(&p, map));
    map[12] = map[15];
    assert_false(np_xchg_segments_distinct(&p, map));
    np_xchg_plan_free(&p);
    /* slices of 10 floats over 4 ranks: 2, 3, 2, 3 */
    int64_t lo[4], len[4];
    np_xchg_slices(10, 4, lo, len);
    assert_int_equal(lo[1], 2);
    assert_int_equal(len[1], 3);
    assert_int_equal(lo[3], 7);
    assert_int_equal(len[3], 3);
    /* rank 1's all-reduce of them: 3 floats from each rank; it sends 10 - 3 floats, then its
     * 3 to the 3 others (reduce-scatter), or all 10 to each (all-gather) */
    np_xchg_allreduce_plan ar;
    setenv("NP_ALLREDUCE", "rs", 1);
    assert_int_equal(np_xchg_plan_allreduce(10, 4, 1, &ar), 0);
    assert_int_equal(ar.rs, 1);
    assert_memory_equal(ar.lo, lo, sizeof lo);
    assert_memory_equal(ar.len, len, sizeof len);
    for (int q = 0; q < 4; q++)
        assert_int_equal(ar.got[q], 3);
    assert_int_equal(ar.nsend, 7 + 3 * 3);
    np_xchg_allreduce_plan_free(&ar);
    setenv("NP_ALLREDUCE", "allgather", 1);
    assert_int_equal(np_xchg_plan_allreduce(10, 4, 1, &ar), 0);
    assert_int_equal(ar.rs, 0);
    assert_int_equal(ar.nsend, 10 * 3);
    unsetenv("NP_ALLREDUCE");
}

/* --comm: the checks that need the device count, one line each naming the key. */
static void test_comm_check(void **state) {
    (void)state;
    np_config c;
    np_error err;
    np_config_defaults(&c);
    assert_int_equal(c.comm, NP_COMM_MPI);
    assert_int_equal(np_comm_backend_check(&c, 0, &err), NP_OK);
    assert_int_equal(np_config_set(&c, "comm", "nccl", "--comm", &err), NP_OK);
    assert_int_equal(c.comm, NP_COMM_NCCL);
    assert_int_not_equal(np_config_set(&c, "comm", "gloo", "--comm", &err), NP_OK);
    assert_non_null(strstr(err.msg, "mpi or nccl"));
    /* the flavour of the library, as the library says (tests do not see its NP_HAVE_CUDA) */
    if (!strncmp(np_cuda_info(), "not built", 9)) {
        assert_int_not_equal(np_comm_backend_check(&c, 8, &err), NP_OK);
        assert_string_equal(err.msg, "comm: nccl needs the CUDA flavour (docs/gpu.md)");
        assert_int_not_equal(np_config_check(&c, &err), NP_OK);
        assert_string_equal(err.msg, "comm: nccl needs the CUDA flavour (docs/gpu.md)");
        np_backend dummy, *b = &dummy;
        assert_int_not_equal(np_backend_nccl_create(NULL, 0, &b, &err), NP_OK);
        assert_null(b);
        np_backend_free(b);
    } else {
        c.rank = 3;
        assert_int_not_equal(np_comm_backend_check(&c, 0, &err), NP_OK);
        assert_non_null(
            strstr(err.msg, "comm: nccl needs a GPU on every rank, but rank 3 sees none"));
        c.local_ranks = 2;
        assert_int_not_equal(np_comm_backend_check(&c, 1, &err), NP_OK);
        assert_non_null(strstr(err.msg,
                               "comm: nccl drives one GPU per rank, but rank 3's host runs 2 "
                               "ranks on 1 GPU"));
        assert_int_equal(np_comm_backend_check(&c, 2, &err), NP_OK);
        assert_int_equal(np_config_check(&c, &err), NP_OK);
    }
    assert_null(strchr(err.msg, '\n'));
}

/* A plan from meta's counts against the same figures summed naively, segment by segment
 * (the per-peer scan np_xchg_recv_start, the plans' way before 0.8), on random counts:
 * R up to 64 and R = 1,536, a few windows and tables, empty segments among them. */
static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static int64_t draw(int64_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int64_t)(rng % (uint64_t)n);
}

static void check_random_plan(int R, int W, int T) {
    size_t n = NP_META_SIZE((size_t)T, (size_t)W, (size_t)R);
    int64_t *meta = calloc(n, sizeof *meta);
    assert_non_null(meta);
    for (int q = 0; q < R; q++)
        for (int w = 0; w < W; w++)
            for (int t = 0; t < T; t++) {
                int64_t c = draw(4) ? draw(9) : 0, g = draw(4) ? draw(9) : 0;
                meta[NP_META_SC(T, W, q, w, t)] = c;
                meta[NP_META_SR(T, W, R, q, w, t)] = c - (c > 1 && !draw(3)); /* a pooled part */
                meta[NP_META_RC(T, W, R, q, w, t)] = g;
                meta[NP_META_RR(T, W, R, q, w, t)] = g - (g > 1 && !draw(3));
            }
    for (int w = 0; w < W; w++)
        for (int rows = 0; rows < 2; rows++) {
            np_xchg_plan p;
            assert_int_equal(rows ? np_xchg_plan_rows(meta, T, W, R, w, &p)
                                  : np_xchg_plan_grads(meta, T, W, R, w, &p),
                             0);
            assert_int_equal(p.R, R);
            int64_t ns = 0, nr = 0;
            int pooled = 0;
            for (int q = 0; q < R; q++) {
                int64_t sr = 0, rr = 0, keys = 0;
                for (int t = 0; t < T; t++) {
                    sr += meta[NP_META_SR(T, W, R, q, w, t)];
                    rr += meta[NP_META_RR(T, W, R, q, w, t)];
                    keys += meta[NP_META_RC(T, W, R, q, w, t)];
                }
                assert_int_equal(p.send[q], rows ? rr : sr);
                assert_int_equal(p.recv[q], rows ? sr : rr);
                assert_int_equal(p.sdispl[q], ns);
                assert_int_equal(p.rdispl[q], nr);
                assert_int_equal(p.seg[q], np_xchg_recv_start(meta, T, W, R, q, w));
                assert_int_equal(p.nseg[q], keys);
                pooled |= keys != rr;
                ns += p.send[q];
                nr += p.recv[q];
            }
            assert_int_equal(p.nsend, ns);
            assert_int_equal(p.nrecv, nr);
            assert_int_equal(p.pooled, pooled);
            np_xchg_plan_free(&p);
        }
    free(meta);
}

static void test_plan_random(void **state) {
    (void)state;
    for (int R = 1; R <= 64; R += 9)
        check_random_plan(R, 1 + R % 4, 1 + R % 5);
    check_random_plan(64, 4, 26);
    check_random_plan(1536, 4, 3);
    /* the all-reduce's slices and staging for a rank count past 64 */
    np_xchg_allreduce_plan ar;
    setenv("NP_ALLREDUCE", "rs", 1);
    assert_int_equal(np_xchg_plan_allreduce(1000, 1536, 1535, &ar), 0);
    int64_t sum = 0;
    for (int q = 0; q < 1536; q++)
        sum += ar.len[q];
    assert_int_equal(sum, 1000);
    assert_int_equal(ar.lo[1535] + ar.len[1535], 1000);
    np_xchg_allreduce_plan_free(&ar);
    np_xchg_allreduce_plan_free(&ar); /* a freed plan frees again as a no-op */
    assert_int_equal(np_xchg_allreduce_staging(1000, 1536), 1536); /* 1536 slices of one */
    assert_int_equal(np_xchg_allreduce_staging(1000, 3), 1002);
    unsetenv("NP_ALLREDUCE");
    assert_int_equal(np_xchg_allreduce_staging(1000, 2), 2000); /* the all-gather form */
}

/* Growth of the buffers' caps: only what is short, to at least 1.25 times. */
static void test_caps(void **state) {
    (void)state;
    np_xchg_caps c = {100, 100, 100, 100, 100}, need = {90, 101, 200, 100, 100};
    assert_int_equal(np_xchg_caps_grow(&c, &need), 1);
    assert_int_equal(c.keys, 100);
    assert_int_equal(c.recv_keys, 125);
    assert_int_equal(c.recv, 200);
    assert_int_equal(c.stage, 100);
    assert_int_equal(c.win, 100);
    assert_int_equal(np_xchg_caps_grow(&c, &need), 0);
    /* bytes by hand: d 2 (8-byte rows), W 1, R 4, one E buffer, no split, 1 slot, 1 rset */
    np_xchg_caps b = {.keys = 10, .recv_keys = 20, .recv = 30, .stage = 40, .win = 5};
    uint64_t want = 10 * 8 + (3 * 10 * 8 + 2 * 20 * 8 + 30 * 8) + 30 * (8 + 4) + 2 * 5 * 8 +
                    30 * 8 + 2 * 40 * 8;
    assert_int_equal(np_xchg_caps_bytes(&b, 2, 1, 4, 1, 0, 1, 1), want);
}

/* The owners' bounds by hand: 2 ranks, row-wise, one table of 10 rows, 2 windows, 4
 * samples of one key each; keys outside the table (a caller's bad batch, which route then
 * refuses) count nowhere, and write nowhere. */
static void test_owner_bounds(void **state) {
    (void)state;
    const uint32_t off[5] = {0, 1, 2, 3, 4};
    const int64_t keys[4] = {3, 3, 4, 6}, rows[1] = {10};
    int64_t out[4];
    np_xchg_bound_scratch x = {0};
    /* owner of k: k mod 2. Key 3 twice (min(2, W) = 2 windows), key 4 and 6 once: owner 1
     * 2 keys and 1 row, owner 0 2 keys and 2 rows */
    assert_int_equal(np_xchg_owner_bounds(off, keys, 4, 1, rows, NP_SHARD_ROW, 2, 2, 4,
                                          NP_EXCHANGE_ROWS, 0, out, &x),
                     0);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 2);
    assert_int_equal(out[3], 1);
    const int64_t bad[4] = {-7, 3, INT64_MAX, 10};
    assert_int_equal(np_xchg_owner_bounds(off, bad, 4, 1, rows, NP_SHARD_ROW, 2, 2, 4,
                                          NP_EXCHANGE_AUTO, 0, out, &x),
                     0);
    assert_int_equal(out[0] + out[1], 0);
    assert_int_equal(out[2], 1);
    assert_int_equal(out[3], 1);
    np_xchg_bound_scratch_free(&x);
}

/* Every layout is a partition of each table: rank r's local row j is a global row that r
 * owns at local j, and the ranks' row counts add up. Spread puts at most one of every
 * table's R / T hottest rows (the small ids) on a rank, where row-wise piles them on the
 * ranks below T. */
static void test_shard_layouts(void **state) {
    (void)state;
    static const int ranks[] = {1, 2, 5, 26, 64, 130, 1536};
    static const int tables[] = {3, 26};
    for (int sh = 0; sh < 3; sh++)
        for (size_t i = 0; i < sizeof ranks / sizeof *ranks; i++)
            for (size_t ti = 0; ti < 2; ti++) {
                np_config c = {.shard = (np_shard)sh, .ranks = ranks[i], .tables = tables[ti]};
                int64_t rows = 3001;
                for (int t = 0; t < c.tables; t++) {
                    int64_t total = 0;
                    for (int r = 0; r < c.ranks; r++) {
                        int64_t n = np_shard_rows(&c, t, r, rows);
                        total += n;
                        for (int64_t j = 0; j < n; j += 1 + n / 7) {
                            int64_t k = np_shard_global(&c, t, r, j);
                            assert_true(k >= 0 && k < rows);
                            assert_int_equal(np_shard_owner(&c, t, k), r);
                            assert_int_equal(np_shard_local(&c, k), j);
                        }
                    }
                    assert_int_equal(total, rows);
                }
            }
    np_config row = {.shard = NP_SHARD_ROW, .ranks = 1536, .tables = 26};
    np_config spread = row;
    spread.shard = NP_SHARD_SPREAD;
    int *hot_row = calloc(1536, sizeof *hot_row), *hot_spread = calloc(1536, sizeof *hot_spread);
    assert_non_null(hot_row);
    assert_non_null(hot_spread);
    int most_row = 0, most_spread = 0;
    for (int t = 0; t < 26; t++)
        for (int64_t k = 0; k < 1536 / 26; k++) {
            int a = ++hot_row[np_shard_owner(&row, t, k)];
            int b = ++hot_spread[np_shard_owner(&spread, t, k)];
            most_row = a > most_row ? a : most_row;
            most_spread = b > most_spread ? b : most_spread;
        }
    assert_int_equal(most_spread, 1);
    assert_int_equal(most_row, 26);
    assert_int_equal(np_shard_owner(&spread, 1, 0), 1536 / 26); /* table 1's hottest row */
    free(hot_row);
    free(hot_spread);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_by_hand),
        cmocka_unit_test(test_plan_random),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_owner_bounds),
        cmocka_unit_test(test_comm_check),
        cmocka_unit_test(test_shard_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
