/* The steady-state figures and the prediction errors of a trace (runtime/trace/steady.c) on events
 * whose figures are computed by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/trace/trace.h"

static np_trace *new_trace(void) {
    np_trace *tr = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_create(&tr, &e), NP_OK);
    return tr;
}

/* Steady-state figures by hand: rank 0's batches end at 10, 25, 40, 50, 70; with one
 * warm-up batch its step is (70 - 25) / 3 = 15; rank 1's end every 30 from 30: step 30, the
 * slowest. Idle over [25, 70]: worker 0 ran 20 of 45, worker 1 36 of 45; rank 1's worker
 * all of [30, 120]. The driver row is not a worker. */
static void test_steady_state(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    struct {
        int rank, worker;
        long batch;
        double s, e;
    } ev[] = {{0, 0, 0, 0, 10},  {0, 0, 1, 10, 20}, {0, 1, 1, 15, 25}, {0, 0, 2, 25, 35},
              {0, 1, 2, 30, 40}, {0, 0, 3, 40, 50}, {0, 1, 4, 42, 48}, {0, 1, 4, 50, 70},
              {1, 0, 0, 0, 10},  {1, 0, 1, 10, 30}, {1, 0, 2, 30, 60}, {1, 0, 3, 60, 90},
              {1, 0, 4, 90, 120}};
    for (size_t i = 0; i < sizeof ev / sizeof *ev; i++) {
        np_trace_event e = {.name = "linear_fwd",
                            .kind = NP_NODE_FWD,
                            .batch = ev[i].batch,
                            .rank = ev[i].rank,
                            .worker = ev[i].worker,
                            .start_us = ev[i].s,
                            .end_us = ev[i].e,
                            .node = -1,
                            .chunk = -1,
                            .window = -1};
        assert_int_equal(np_trace_record(tr, &e), 0);
    }
    np_trace_event data = {.name = "data",
                           .kind = NP_NODE_DATA,
                           .batch = 4,
                           .worker = 9,
                           .start_us = 30,
                           .end_us = 31,
                           .node = -1,
                           .chunk = -1,
                           .window = -1};
    assert_int_equal(np_trace_record(tr, &data), 0);
    np_trace_steady st;
    np_error e = {{0}};
    assert_int_equal(np_trace_steady_state(tr, 1, &st, &e), NP_OK);
    assert_int_equal(st.batches, 5);
    assert_true(fabs(st.step_us - 30) < 1e-12);
    assert_true(fabs(st.idle_share - (25.0 / 45 + 9.0 / 45 + 0) / 3) < 1e-12);
    assert_int_equal(np_trace_steady_state(tr, 0, &st, &e), NP_OK); /* (120 - 10) / 4 */
    assert_true(fabs(st.step_us - 27.5) < 1e-12);
    assert_int_equal(np_trace_steady_state(tr, -1, &st, &e), NP_STATUS_BAD_INPUT);
    assert_int_equal(np_trace_steady_state(tr, 4, &st, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "rank 0 has 5 batches: a steady state after 4 warm-up batches "
                                  "needs 6 or more"));
    np_trace_free(tr);
}

/* Prediction errors by hand: "a" after the warm-up batch has errors 0.1, 0.2, 0.3 and one
 * task without a prediction (its warm-up task, error 9, is left out); "b" one exact. The
 * noise floor: "c" has two footprints (predictions 10 and 30), durations 8, 10, 16 (median
 * 10: errors 0.25, 0, 0.375) and 20, 40 (median 30: 0.5, 0.25), whose median is 0.25; a
 * footprint of one task ("a", "b") has none. */
static void test_predictions(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    struct {
        const char *name;
        long batch;
        double dur, pred;
    } ev[] = {{"a", 0, 10, 100}, {"a", 1, 10, 11}, {"a", 1, 10, 8},
              {"a", 2, 10, 13},  {"a", 2, 10, 0},  {"b", 1, 20, 20},
              {"c", 1, 16, 10},  {"c", 1, 40, 30}, {"c", 1, 8, 10},
              {"c", 2, 20, 30},  {"c", 2, 10, 10}};
    for (size_t i = 0; i < sizeof ev / sizeof *ev; i++) {
        np_trace_event x = {.name = ev[i].name,
                            .kind = NP_NODE_FWD,
                            .batch = ev[i].batch,
                            .start_us = 100.0 * (double)i,
                            .end_us = 100.0 * (double)i + ev[i].dur,
                            .pred_us = ev[i].pred,
                            .node = -1,
                            .chunk = -1,
                            .window = -1};
        assert_int_equal(np_trace_record(tr, &x), 0);
    }
    np_trace_pred rows[4];
    int n = 0;
    np_error e = {{0}};
    assert_int_equal(np_trace_predictions(tr, 1, rows, 4, &n, &e), NP_OK);
    assert_int_equal(n, 3);
    assert_string_equal(rows[0].name, "a");
    assert_int_equal(rows[0].tasks, 4);
    assert_int_equal(rows[0].predicted, 3);
    assert_true(fabs(rows[0].mean_us - 10) < 1e-12);
    assert_true(fabs(rows[0].median_err - 0.2) < 1e-12);
    assert_true(fabs(rows[0].p90_err - 0.3) < 1e-12);
    assert_string_equal(rows[1].name, "b");
    assert_int_equal(rows[1].predicted, 1);
    assert_true(rows[1].median_err == 0 && rows[1].p90_err == 0);
    assert_true(rows[0].floor_err == 0 && rows[1].floor_err == 0);
    assert_string_equal(rows[2].name, "c");
    assert_int_equal(rows[2].predicted, 5);
    assert_true(fabs(rows[2].floor_err - 0.25) < 1e-12);
    assert_int_equal(np_trace_predictions(tr, 1, rows, 2, &n, &e), NP_STATUS_INTERNAL);
    np_trace_free(tr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_state),
        cmocka_unit_test(test_predictions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
