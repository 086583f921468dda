/* Windows of a trace (np_trace_window, np_trace_batches) and the one-rank report: figures of
 * a hand-made pipelined trace, computed by hand, where keeping a batch range's tasks only
 * (the filter before 0.6) showed a false gap and a false exposure. Not here: the whole
 * trace's report (test_trace_report.c), a real run's window (test_cli.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/trace/trace.h"
#include "traceutil.h"

/* Two ranks, batches 0..4, as dbp runs them: batch b's fwd [100 + 100b, 160 + 100b) and bwd
 * [160 + 100b, 200 + 100b) on worker 0 (it ends at 200 + 100b), and its row exchange on
 * worker 1 a batch ahead, during batch b-1's fwd: [10 + 100b, 50 + 100b) on rank 0, 5 us
 * later on rank 1, so rank 0 waits 5 us for its peer in every exchange. */
static np_trace *pipelined(void) {
    np_trace *tr = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_create(&tr, &e), NP_OK);
    for (int r = 0; r < 2; r++)
        for (long b = 0; b < 5; b++) {
            double t = 100.0 * (double)b;
            tu_trace_add(tr, r, 0, NP_NODE_FWD, b, 100 + t, 160 + t);
            tu_trace_add(tr, r, 0, NP_NODE_BWD, b, 160 + t, 200 + t);
            tu_trace_add(tr, r, 1, NP_NODE_EXCHANGE_EMB, b, 10 + 5 * r + t, 50 + t);
        }
    return tr;
}

static double busy(const np_trace_report *r, int rank, int w) {
    for (int i = 0; i < r->n_workers; i++)
        if (r->workers[i].rank == rank && r->workers[i].worker == w) return r->workers[i].busy_us;
    fail_msg("no worker %d on rank %d", w, rank);
    return NAN;
}

/* Batches 2..3: the window runs from batch 1's end (300) to batch 3's (500) and holds the
 * fwd and bwd of batches 2 and 3 and the exchanges of batches 3 and 4 (the latter hidden
 * under batch 3's fwd). Nothing is exposed, worker 0 never idles, two batches of 100 us.
 * Keeping the tasks of batches 2 and 3 only gave the exchange of batch 2 [210, 250) with
 * nothing to hide it (40 us exposed) and worker 0 idle from 210 to 300. */
static void test_batch_window(void **state) {
    (void)state;
    np_trace *tr = pipelined(), *w = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_batches(tr, 2, 3, &w, &e), NP_OK);
    np_trace_report r = tu_analyze(w);
    assert_true(r.windowed && r.window_from_us == 300 && r.window_to_us == 500);
    assert_int_equal(r.n_ranks, 2);
    for (int k = 0; k < 2; k++) {
        const np_trace_rank_stats *s = &r.ranks[k];
        assert_int_equal(s->batches, 2);
        assert_true(s->span_us == 200 && s->step_us == 100);
        assert_true(s->exchange_us == (k ? 70 : 80) && s->exchange_exposed_us == 0);
        assert_true(s->kind[NP_NODE_EXCHANGE_EMB].count == 2);
        assert_true(s->collective_us == (k ? 70 : 80) && s->peer_wait_us == (k ? 0 : 10));
        assert_true(busy(&r, k, 0) == 200 && busy(&r, k, 1) == (k ? 70 : 80));
        assert_true(s->idle_us == (k ? 130 : 120));
    }
    assert_true(r.overall.step_us == 100 && r.overall.exchange_exposed_ratio == 0);
    np_trace_report_free(&r);
    np_trace_free(w);

    /* from the first batch: from the trace's start (10) to batch 1's end (300); the
     * exchange of batch 0 [10, 50) is exposed (no compute before it), 40 us on rank 0 */
    assert_int_equal(np_trace_batches(tr, 0, 1, &w, &e), NP_OK);
    r = tu_analyze(w);
    assert_true(r.window_from_us == 10 && r.window_to_us == 300);
    assert_int_equal(r.ranks[0].batches, 2);
    assert_true(r.ranks[0].exchange_exposed_us == 40 && r.ranks[1].exchange_exposed_us == 35);
    np_trace_report_free(&r);
    np_trace_free(w);

    /* past the last batch, and backwards */
    assert_int_equal(np_trace_batches(tr, 7, -1, &w, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "no task of batches 7 on; the trace holds batches 0 to 4"));
    assert_null(w);
    np_trace_free(tr);
}

/* [312, 455) in time: dense compute covers all of it (fwd 2 from 312, bwd 2, fwd 3 to 455);
 * rank 0's exchange of batch 3 is cut to [312, 350), of which [312, 315) waits for rank 1,
 * and that of batch 4 [410, 450) waits 5; batch 2 alone ends inside (at 400). A window of a
 * window gives the same figures. */
static void check_time_window(const np_trace *w) {
    np_trace_report r = tu_analyze(w);
    assert_true(r.window_from_us == 312 && r.window_to_us == 455);
    const np_trace_rank_stats *s = &r.ranks[0];
    if (!(s->span_us == 143 && s->batches == 1 && s->step_us == 143)) fail_msg("span %g batches %ld step %g", s->span_us, s->batches, s->step_us);
    assert_true(s->collective_us == 78 && s->peer_wait_us == 8 && s->exchange_exposed_us == 0);
    assert_true(r.ranks[1].collective_us == 70 && r.ranks[1].peer_wait_us == 0);
    assert_true(busy(&r, 0, 0) == 143 && s->idle_us == 143 - 78);
    np_trace_report_free(&r);
}

static void test_time_window(void **state) {
    (void)state;
    np_trace *tr = pipelined(), *w = NULL, *ww = NULL, *b = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_window(tr, 312, 455, &w, &e), NP_OK);
    check_time_window(w);
    assert_int_equal(np_trace_batches(tr, 2, 3, &b, &e), NP_OK); /* [300, 500) */
    assert_int_equal(np_trace_window(b, 312, 455, &ww, &e), NP_OK);
    check_time_window(ww);

    /* a window past the ends is cut to them; a window with no task, or empty, is refused */
    np_trace_free(w);
    assert_int_equal(np_trace_window(tr, -INFINITY, INFINITY, &w, &e), NP_OK);
    np_trace_report r = tu_analyze(w);
    assert_true(r.window_from_us == 10 && r.window_to_us == 600 && r.ranks[0].batches == 5);
    np_trace_report_free(&r);
    np_trace_free(w);
    assert_int_equal(np_trace_window(tr, 700e3, 800e3, &w, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "no task between 700.000 and 800.000 ms; the trace runs "
                                  "from 0.010 to 0.600 ms"));
    assert_int_equal(np_trace_window(tr, 50, 50, &w, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "is empty"));
    /* [60, 90): rank 0's first exchange has ended, rank 1's too, the first fwd is to come */
    assert_int_equal(np_trace_window(tr, 60, 90, &w, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "no task between 0.060 and 0.090 ms"));
    assert_int_equal(np_trace_window(tr, -INFINITY, 5, &w, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "no task between the start and 0.005 ms"));
    /* batches of a window's trace: within that window (batch 3 ended at 500 inside b) */
    np_trace *bb = NULL;
    assert_int_equal(np_trace_batches(b, 3, -1, &bb, &e), NP_OK);
    r = tu_analyze(bb);
    assert_true(r.window_from_us == 400 && r.window_to_us == 500 && r.ranks[0].batches == 1);
    np_trace_report_free(&r);
    np_trace_free(bb);
    assert_int_equal(np_trace_batches(b, 4, -1, &bb, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "no task of batches 4 on; the trace holds batches 2 to 3"));
    np_trace_free(ww);
    np_trace_free(b);
    np_trace_free(tr);
}

/* A task of no duration counts at either edge of a window. */
static void test_zero_length(void **state) {
    (void)state;
    np_trace *tr = NULL, *w = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_create(&tr, &e), NP_OK);
    np_trace_set_info(tr, "ranks", "1");
    tu_trace_add(tr, 0, 0, NP_NODE_FWD, 0, 0, 100);
    tu_trace_add(tr, 0, 1, NP_NODE_SYNC, 0, 100, 100); /* at the end: batch 0's last */
    tu_trace_add(tr, 0, 1, NP_NODE_ROUTE, 1, 50, 50);
    assert_int_equal(np_trace_window(tr, 50, 100, &w, &e), NP_OK);
    assert_int_equal(np_trace_count(w), 3);
    np_trace_report r = tu_analyze(w);
    assert_int_equal(r.ranks[0].batches, 1); /* batch 0 ended at 100, inside */
    np_trace_report_free(&r);
    np_trace_free(w);
    np_trace_free(tr);
}

/* A window in which no batch ends has no step (NaN, "-" in the text). */
static void test_no_step(void **state) {
    (void)state;
    np_trace *tr = pipelined(), *w = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_window(tr, 320, 340, &w, &e), NP_OK);
    np_trace_report r = tu_analyze(w);
    assert_int_equal(r.ranks[0].batches, 0);
    assert_true(isnan(r.ranks[0].step_us) && isnan(r.overall.step_us));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(np_trace_report_print(&r, f, 0, &e), NP_OK);
    fclose(f);
    assert_non_null(strstr(buf, "step -  (no batch ended in these 0.020 ms)"));
    assert_non_null(strstr(buf, "window 0.320 to 0.340 ms of the trace"));
    free(buf);
    np_trace_report_free(&r);
    np_trace_free(w);
    np_trace_free(tr);
}

/* One rank exchanges nothing: its exchange tasks are copies in memory, so no exchange
 * figures, whether the trace says it ran on one rank or only has one. */
static void test_one_rank_run(void **state) {
    (void)state;
    for (int fact = 0; fact < 3; fact++) {
        np_trace *tr = NULL;
        np_error e = {{0}};
        assert_int_equal(np_trace_create(&tr, &e), NP_OK);
        if (fact) np_trace_set_info(tr, "ranks", fact == 1 ? "1" : "2");
        tu_trace_add(tr, 0, 0, NP_NODE_FWD, 0, 0, 100);
        tu_trace_add(tr, 0, 1, NP_NODE_EXCHANGE_EMB, 0, 50, 150);
        tu_trace_add(tr, 0, 1, NP_NODE_EXCHANGE_KEYS, 0, 150, 160);
        np_trace_report r = tu_analyze(tr);
        const np_trace_rank_stats *s = &r.ranks[0];
        int one = fact < 2; /* "ranks" 2: rank 0's part of a two-rank run */
        assert_int_equal(r.one_rank, one);
        assert_true(s->exchange_us == (one ? 0 : 100) && s->exchange_exposed_us == (one ? 0 : 50));
        assert_true(one ? isnan(s->exchange_exposed_ratio) : s->exchange_exposed_ratio == 0.5);
        assert_true(s->collective_us == (one ? 0 : 110));
        /* the copies keep their time in the kind rows, and the lookup group its keys */
        assert_true(s->kind[NP_NODE_EXCHANGE_EMB].union_us == 100);
        assert_true(s->kind[NP_NODE_EXCHANGE_EMB].exposed_us == 50 && s->lookup_us == 10);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_int_equal(np_trace_report_print(&r, f, 0, &e), NP_OK);
        fclose(f);
        assert_true(!strstr(buf, "exchange none: one rank") == !one);
        free(buf);
        np_trace_report_free(&r);
        np_trace_free(tr);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_window),
        cmocka_unit_test(test_time_window),
        cmocka_unit_test(test_no_step),
        cmocka_unit_test(test_zero_length),
        cmocka_unit_test(test_one_rank_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
