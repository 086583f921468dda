/* kernels/xchg_plan.h by hand (the counts, displacements and segments of an exchange plan,
 * the all-reduce's slices) and --comm's checks (comm/backend.h). Not here: the exchanges
 * themselves on simulated ranks (test_comm_backend.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/backend.h"
#include "kernels/xchg_plan.h"

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
    np_xchg_plan_rows(meta, t1, w2, r2, 1, &p);
    assert_int_equal(p.send[0], 6);
    assert_int_equal(p.send[1], 8);
    assert_int_equal(p.sdispl[1], 6);
    assert_int_equal(p.recv[0], 1);
    assert_int_equal(p.recv[1], 4);
    assert_int_equal(p.rdispl[1], 1);
    /* map: requester 0's window 0 (5), window 1 (6), requester 1's window 0 (7), 1 (8) */
    assert_int_equal(p.seg[0], 5);
    assert_int_equal(p.seg[1], 5 + 6 + 7);
    np_xchg_plan_grads(meta, t1, w2, r2, 0, &p);
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
    np_xchg_plan_allreduce(10, 4, 1, &ar);
    assert_int_equal(ar.rs, 1);
    assert_memory_equal(ar.lo, lo, sizeof lo);
    assert_memory_equal(ar.len, len, sizeof len);
    for (int q = 0; q < 4; q++)
        assert_int_equal(ar.got[q], 3);
    assert_int_equal(ar.nsend, 7 + 3 * 3);
    setenv("NP_ALLREDUCE", "allgather", 1);
    np_xchg_plan_allreduce(10, 4, 1, &ar);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_by_hand),
        cmocka_unit_test(test_comm_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
