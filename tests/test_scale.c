/* nestpipe at scale (nestpipe/scale.h): the alpha-beta collectives against hand-computed
 * times, and the replay of hand-made traces whose step time it must reproduce, stretch by a
 * collective's wire time on the critical path, and rescale by calibrated durations. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nestpipe/scale.h"
#include "traceutil.h"

static void test_alltoall_flat(void **state) {
    (void)state;
    /* 4 ranks, 8 Gbit/s = 1e9 bytes/s each way, 5 us a round: rank 0 sends 1 MB to each
     * other rank: its NIC carries 3 MB (3 ms), and the pairwise exchange has 3 rounds */
    np_platform p = {.ranks = 4, .nic_gbit = 8, .latency_us = 5, .host_ranks = 1,
                     .algo = NP_A2A_PAIRWISE};
    double m[16] = {0};
    for (int j = 1; j < 4; j++)
        m[j] = 1e6;
    m[5] = 7e9; /* the diagonal crosses no wire */
    assert_float_equal(np_alltoall_us(&p, m), 3000 + 15, 1e-6);
    /* the busiest receiver decides too: everyone sends rank 3 2 MB */
    double in[16] = {0};
    for (int i = 0; i < 3; i++)
        in[i * 4 + 3] = 2e6;
    assert_float_equal(np_alltoall_us(&p, in), 6000 + 15, 1e-6);
    /* uniform: each rank sends 3 x 1 MB */
    assert_float_equal(np_alltoall_uniform_us(&p, 1e6), 3000 + 15, 1e-6);
    /* all messages posted at once: one latency and 3 message overheads of 0.5 us; Bruck on
     * 8 ranks: 3 rounds of latency and message, and each byte moved 1.5 times */
    p.algo = NP_A2A_DIRECT;
    p.msg_us = 0.5;
    assert_float_equal(np_alltoall_uniform_us(&p, 1e6), 3000 + 5 + 1.5, 1e-6);
    p.algo = NP_A2A_BRUCK;
    p.ranks = 8;
    assert_float_equal(np_alltoall_latency_us(&p), 3 * 5.5, 1e-9);
    assert_float_equal(np_alltoall_uniform_us(&p, 1e6), 1.5 * 7000 + 16.5, 1e-6);
    np_error err = {{0}};
    p.algo = (np_a2a_algo)7;
    assert_int_equal(np_platform_check(&p, &err), NP_STATUS_BAD_INPUT);
    p.ranks = 1;
    p.algo = NP_A2A_PAIRWISE;
    assert_float_equal(np_alltoall_uniform_us(&p, 1e6), 0, 0);
}

static void test_alltoall_two_tiers(void **state) {
    (void)state;
    /* 2 hosts of 2 ranks: intra 80 Gbit/s (1e10 B/s), NIC 8 (1e9 B/s, uplink 2e9), 1 us
     * within a host, 5 between: a round within the host and two across: 11 us. Each pair
     * 1 MB: a host's uplink carries 2 x 2 x 1 MB = 4 MB (2 ms), the bisection at full
     * bandwidth as much; the intra-host link 1 MB (0.1 ms). */
    np_platform p = {.ranks = 4, .nic_gbit = 8, .latency_us = 5, .host_ranks = 2,
                     .intra_gbit = 80, .intra_latency_us = 1, .oversub = 1,
                     .algo = NP_A2A_PAIRWISE};
    np_error err = {{0}};
    assert_int_equal(np_platform_check(&p, &err), NP_OK);
    assert_float_equal(np_alltoall_uniform_us(&p, 1e6), 2000 + 11, 1e-6);
    double m[16];
    for (int i = 0; i < 16; i++)
        m[i] = i % 5 ? 1e6 : 0;
    assert_float_equal(np_alltoall_us(&p, m), 2000 + 11, 1e-6);
    /* two levels (--a2a hier): sizes and blocks within the host (2 x 1 us), then one
     * exchange across (5 us); each rank's blocks for the other index (2 MB) cross its
     * intra-host link first (0.2 ms), then the uplink as before (2 ms) */
    p.algo = NP_A2A_HIER;
    assert_int_equal(np_platform_check(&p, &err), NP_OK);
    assert_float_equal(np_alltoall_latency_us(&p), 2 * 1 + 5, 1e-9);
    assert_float_equal(np_alltoall_uniform_us(&p, 1e6), 2200 + 7, 1e-6);
    assert_float_equal(np_alltoall_us(&p, m), 2200 + 7, 1e-6);
    /* its reduce-scatter as the All2All (7 us), its all-gather across (5) and within (1) */
    assert_float_equal(np_allreduce_latency_us(&p), 7 + 5 + 1, 1e-9);
    /* 1 MB a pair: the reduce-scatter as above (2.2 ms); the all-gather sends 1 MB to the
     * other host (1 ms at 1e9 B/s), then 2 MB within (0.2 ms) */
    assert_float_equal(np_allreduce_bytes_us(&p, 1e6), 2200 + 1000 + 200, 1e-6);
    p.msg_us = 1; /* a message each within the host and across */
    assert_float_equal(np_alltoall_latency_us(&p), 2 * (1 + 1) + (5 + 1), 1e-9);
    p.msg_us = 0;
    p.algo = NP_A2A_PAIRWISE;
    p.oversub = 2; /* the fabric halves: its bisection takes 4 ms */
    assert_float_equal(np_alltoall_uniform_us(&p, 1e6), 4000 + 11, 1e-6);
    assert_float_equal(np_alltoall_us(&p, m), 4000 + 11, 1e-6);
    p.host_ranks = 3; /* does not divide 4 */
    assert_int_equal(np_platform_check(&p, &err), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(err.msg, "3 ranks a host"));
}

/* One task of the hand-made graph: its id, deps, times, bytes. */
static void add(np_trace *tr, int64_t id, np_node_kind kind, long batch, int worker, double s,
                double e, int n_deps, const int64_t *deps, uint64_t bytes) {
    np_trace_event ev = {.name = np_node_kind_name(kind), .kind = kind, .batch = batch,
                         .window = -1, .rank = 0, .worker = worker, .start_us = s, .end_us = e,
                         .bytes = bytes, .node = -1, .chunk = -1, .id = id, .n_deps = n_deps};
    for (int k = 0; k < n_deps; k++)
        ev.dep[k] = deps[k];
    assert_int_equal(np_trace_record(tr, &ev), 0);
}

/* 4 batches, each on worker 1 (communication) route 10 us -> keys 20 -> on worker 0 pool 20
 * -> fwd 40 -> grads 10 on worker 1, then the next batch's route on that worker; every task
 * starts exactly when its inputs and its worker are free, so the replay must give back
 * every time, and the step: 100 us. compute_scale stretches the compute tasks. */
static np_trace *graph(double compute_scale) {
    np_trace *tr = NULL;
    np_error err = {{0}};
    assert_int_equal(np_trace_create(&tr, &err), NP_OK);
    np_trace_set_info(tr, "ranks", "2");
    int64_t id = 1, prev_fwd = 0;
    double t = 0;
    for (long b = 0; b < 4; b++) {
        double c = compute_scale;
        int64_t route = id++, keys = id++, pool = id++, fwd = id++, grads = id++;
        add(tr, route, NP_NODE_ROUTE, b, 1, t, t + 10 * c, 0, NULL, 0);
        add(tr, keys, NP_NODE_EXCHANGE_KEYS, b, 1, t + 10 * c, t + 10 * c + 20, 1, &route, 800);
        double p0 = t + 10 * c + 20;
        int64_t d2[2] = {keys, prev_fwd};
        add(tr, pool, NP_NODE_POOL_FWD, b, 0, p0, p0 + 20 * c, prev_fwd ? 2 : 1, d2, 0);
        add(tr, fwd, NP_NODE_FWD, b, 0, p0 + 20 * c, p0 + 60 * c, 1, &pool, 0);
        add(tr, grads, NP_NODE_EXCHANGE_GRAD, b, 1, p0 + 60 * c, p0 + 60 * c + 10, 1, &fwd, 400);
        prev_fwd = fwd;
        t = p0 + 60 * c + 10; /* the next route after the grads, on their worker */
    }
    return tr;
}

static np_replay_out replay(np_replay_cfg c) {
    np_replay_out o;
    np_error err = {{0}};
    assert_int_equal(np_replay(&c, &o, &err), NP_OK);
    return o;
}

static void test_replay_reproduces(void **state) {
    (void)state;
    np_trace *g = graph(1);
    np_replay_out o = replay((np_replay_cfg){.graph = g, .device_speed = 1, .from_batch = 1,
                                             .to_batch = -1});
    /* a batch every 10 + 20 + 20 + 40 + 10 = 100 us */
    assert_float_equal(o.step_us, 100, 1e-9);
    assert_int_equal(o.tasks, 20);
    for (size_t i = 0; i < np_trace_count(g); i++) { /* every task where it ran */
        const np_trace_event *a = np_trace_get(g, i), *b = NULL;
        for (size_t j = 0; j < np_trace_count(o.trace); j++)
            if (np_trace_get(o.trace, j)->id == a->id) b = np_trace_get(o.trace, j);
        assert_non_null(b);
        assert_float_equal(a->start_us, b->start_us, 1e-9);
        assert_float_equal(a->end_us, b->end_us, 1e-9);
    }
    np_trace_free(o.trace);
    /* 100 us more on the keys' All2All, on the critical path: 100 us a step more; 30 us
     * more on the gradients: 30 more */
    o = replay((np_replay_cfg){.graph = g, .device_speed = 1, .from_batch = 1, .to_batch = -1,
                               .wire_us = {[NP_COLL_KEYS] = 100}});
    assert_float_equal(o.step_us, 200, 1e-9);
    np_trace_free(o.trace);
    o = replay((np_replay_cfg){.graph = g, .device_speed = 1, .from_batch = 1, .to_batch = -1,
                               .wire_us = {[NP_COLL_GRADS] = 30}});
    assert_float_equal(o.step_us, 130, 1e-9);
    np_trace_free(o.trace);
    /* a graph run over a link of 16 Gbit/s (2e9 B/s): its keys' 800 bytes took 0.4 us of
     * their 20 and its grads' 400 0.2 of their 10, which the replay takes out before it
     * adds the target's wire time */
    o = replay((np_replay_cfg){.graph = g, .device_speed = 1, .from_batch = 1, .to_batch = -1,
                               .graph_link_gbit = 16});
    assert_float_equal(o.step_us, 100 - 0.4 - 0.2, 1e-9);
    np_trace_free(o.trace);
    np_trace_free(g);
}

static void test_replay_calibrated(void **state) {
    (void)state;
    np_trace *g = graph(1), *slow = graph(2);
    /* compute durations from a run twice as slow: the route, pool and fwd take 20, 40, 80;
     * the collectives' local part is the calibration run's too (20 and 10) */
    np_replay_out o = replay((np_replay_cfg){.graph = g, .compute = slow, .device_speed = 1,
                                             .from_batch = 1, .to_batch = -1});
    assert_float_equal(o.step_us, 20 + 20 + 40 + 80 + 10, 1e-9);
    np_trace_free(o.trace);
    /* a device twice as fast brings the compute back, not the collectives */
    o = replay((np_replay_cfg){.graph = g, .compute = slow, .device_speed = 2, .from_batch = 1,
                               .to_batch = -1});
    assert_float_equal(o.step_us, 10 + 10 + 20 + 40 + 5, 1e-9);
    np_trace_free(o.trace);
    np_replay_out bad;
    np_error err = {{0}};
    assert_int_equal(np_replay(&(np_replay_cfg){.graph = g, .device_speed = 1, .from_batch = 2,
                                                .to_batch = 9},
                               &bad, &err),
                     NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(err.msg, "outside the graph's 0..3"));
    assert_int_equal(np_replay(&(np_replay_cfg){.graph = g, .device_speed = 0}, &bad, &err),
                     NP_STATUS_BAD_INPUT);
    np_trace_free(g);
    np_trace_free(slow);
}

/* A sequential run: the driver submits batch b's one task (a loss, 50 us) at S_b, waits for
 * it, and agrees with the other ranks for 20 us before S_b+1: a step of 70 us, of which a
 * replay that ignored the driver would keep 50. */
static np_trace *driven(double dur) {
    np_trace *tr = NULL;
    np_error err = {{0}};
    assert_int_equal(np_trace_create(&tr, &err), NP_OK);
    np_trace_set_info(tr, "pipeline", "sequential");
    double t = 100;
    for (long b = 0; b < 5; b++) {
        np_trace_event ev = {.name = "bce_fwd", .kind = NP_NODE_LOSS_FWD, .batch = b, .window = -1,
                             .worker = 0, .start_us = t, .end_us = t + dur, .node = -1,
                             .chunk = -1, .id = b + 1, .issued = b + 1, .submit_us = t};
        assert_int_equal(np_trace_record(tr, &ev), 0);
        t += dur + 20;
    }
    return tr;
}

static void test_replay_driver(void **state) {
    (void)state;
    np_trace *g = driven(50), *slow = driven(100);
    np_replay_out o = replay((np_replay_cfg){.graph = g, .device_speed = 1, .from_batch = 1,
                                             .to_batch = -1});
    assert_float_equal(o.step_us, 70, 1e-9);
    np_trace_free(o.trace);
    /* compute twice as slow: the driver waits for it, then agrees as recorded: 120 */
    o = replay((np_replay_cfg){.graph = g, .compute = slow, .device_speed = 1, .from_batch = 1,
                               .to_batch = -1});
    assert_float_equal(o.step_us, 120, 1e-9);
    np_trace_free(o.trace);
    /* a slower agreement at the target: 30 us more a step */
    o = replay((np_replay_cfg){.graph = g, .device_speed = 1, .from_batch = 1, .to_batch = -1,
                               .driver_sync_us = 30});
    assert_float_equal(o.step_us, 100, 1e-9);
    np_trace_free(o.trace);
    np_trace_free(g);
    np_trace_free(slow);
}

/* The driver with a look-ahead waits for the batch's loss only: batch b's tail (its grads,
 * 30 us after the loss) runs while step b + 1's call goes on; without one (fwp, the fact
 * "lookahead" 0) it waits for the tail too. Each batch: loss 50 us, then grads 30 us on
 * another worker; the agreement 20 us after the wait. */
static np_trace *tail_graph(const char *lookahead) {
    np_trace *tr = NULL;
    np_error err = {{0}};
    assert_int_equal(np_trace_create(&tr, &err), NP_OK);
    np_trace_set_info(tr, "pipeline", "nestpipe");
    np_trace_set_info(tr, "lookahead", lookahead);
    int all = !strcmp(lookahead, "0");
    double t = 100;
    int64_t id = 1;
    for (long b = 0; b < 5; b++) {
        np_trace_event loss = {.name = "bce_fwd", .kind = NP_NODE_LOSS_FWD, .batch = b, .window = -1,
                               .worker = 0, .start_us = t, .end_us = t + 50, .node = -1,
                               .chunk = -1, .id = id, .issued = b + 1, .submit_us = t};
        np_trace_event grads = {.name = "exchange_grads", .kind = NP_NODE_EXCHANGE_GRAD,
                                .batch = b, .window = -1, .worker = 1, .start_us = t + 50,
                                .end_us = t + 80, .node = -1, .chunk = -1, .id = id + 1,
                                .n_deps = 1, .dep = {id}, .issued = b + 1, .submit_us = t};
        assert_int_equal(np_trace_record(tr, &loss), 0);
        assert_int_equal(np_trace_record(tr, &grads), 0);
        id += 2;
        t += (all ? 80 : 50) + 20;
    }
    return tr;
}

static void test_replay_lookahead(void **state) {
    (void)state;
    np_trace *pipe = tail_graph("4"), *fwp = tail_graph("0");
    np_replay_out o = replay((np_replay_cfg){.graph = pipe, .device_speed = 1, .from_batch = 1,
                                             .to_batch = -1});
    assert_float_equal(o.step_us, 70, 1e-9); /* the grads hide under the next call */
    np_trace_free(o.trace);
    o = replay((np_replay_cfg){.graph = fwp, .device_speed = 1, .from_batch = 1, .to_batch = -1});
    assert_float_equal(o.step_us, 100, 1e-9); /* the driver waits for them */
    assert_int_equal(o.unordered, 0);
    np_trace_free(o.trace);
    /* two compute workers on one core: compute (and its delays) twice as long; the
     * collectives are not compute */
    o = replay((np_replay_cfg){.graph = pipe, .device_speed = 1, .from_batch = 1, .to_batch = -1,
                               .cores_per_rank = 0.5});
    assert_float_equal(o.step_us, 120, 1e-9);
    np_trace_free(o.trace);
    np_trace_free(pipe);
    np_trace_free(fwp);
}

/* A trace that is not one nestpipe wrote is refused, not read out of bounds. */
static void test_replay_refuses(void **state) {
    (void)state;
    np_trace *tr = NULL;
    np_error err = {{0}};
    assert_int_equal(np_trace_create(&tr, &err), NP_OK);
    np_trace_event ev = {.name = "x", .kind = NP_NODE_EXCHANGE_KEYS, .batch = -3, .window = -1,
                         .start_us = 0, .end_us = 1, .node = -1, .chunk = -1, .id = 1};
    assert_int_equal(np_trace_record(tr, &ev), 0);
    np_replay_out o;
    assert_int_equal(np_replay(&(np_replay_cfg){.graph = tr, .device_speed = 1}, &o, &err),
                     NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(err.msg, "not a trace nestpipe wrote"));
    np_trace_free(tr);
    assert_int_equal(np_trace_create(&tr, &err), NP_OK);
    ev.batch = 0;
    ev.issued = 1000000; /* step 999999 of one batch */
    assert_int_equal(np_trace_record(tr, &ev), 0);
    assert_int_equal(np_replay(&(np_replay_cfg){.graph = tr, .device_speed = 1}, &o, &err),
                     NP_STATUS_BAD_INPUT);
    np_trace_free(tr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alltoall_flat),
        cmocka_unit_test(test_alltoall_two_tiers),
        cmocka_unit_test(test_replay_reproduces),
        cmocka_unit_test(test_replay_calibrated),
        cmocka_unit_test(test_replay_driver),
        cmocka_unit_test(test_replay_lookahead),
        cmocka_unit_test(test_replay_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
