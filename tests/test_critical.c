/* Critical-path priorities (tasks/critical.c) on a graph computed by hand: the edges StarPU's
 * sequential consistency derives from the modes (read after write, write after write and
 * after the reads since), bottom levels from the measured durations, priorities scaled to
 * 0..1000 for the same tasks of a later step, and a task without a counterpart unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <starpu.h>

#include "tasks/tasks.h"

/* The handles are only compared: distinct addresses will do. */
static char A, B, C, D, E;
#define RD STARPU_R
#define WR STARPU_W

typedef struct spec {
    int n;
    np_h h[3];
    enum starpu_data_access_mode m[3];
    double cost;
} spec;

/* t0 writes A; t1 and t2 read it and write B and C; t3 reads both and writes D; t4 is
 * alone; t5 writes A again after t1 and t2 read it. Bottom levels: t3 1, t5 7, t1 5 + 7,
 * t2 20 + 7, t0 10 + 27 = 37, t4 3. */
static const spec g[6] = {
    {1, {(np_h)&A}, {WR}, 10},
    {2, {(np_h)&A, (np_h)&B}, {RD, WR}, 5},
    {2, {(np_h)&A, (np_h)&C}, {RD, WR}, 20},
    {3, {(np_h)&B, (np_h)&C, (np_h)&D}, {RD, RD, WR}, 1},
    {1, {(np_h)&E}, {WR}, 3},
    {1, {(np_h)&A}, {WR}, 7},
};
static const int want[6] = {1000, 324, 730, 27, 81, 189}; /* lround(1000 * bl / 37) */

static void test_bottom_levels(void **state) {
    (void)state;
    np_cp *cp = NULL;
    np_error err = {{0}};
    assert_int_equal(np_cp_create(5, &cp, &err), NP_OK);
    np_cp_step(cp, 4); /* before the recorded step: nothing recorded */
    np_task_ctx ctx = {.batch = 4, .window = -1, .chunk = -1};
    struct starpu_task t = {.priority = 7};
    assert_int_equal(np_cp_task(cp, &ctx, NP_NODE_FWD, "linear_fwd", g[0].n, g[0].h, g[0].m, &t),
                     -1);
    np_cp_step(cp, 5);
    for (int i = 0; i < 6; i++) {
        ctx = (np_task_ctx){.batch = 5, .window = -1, .chunk = -1, .node = i};
        assert_int_equal(
            np_cp_task(cp, &ctx, NP_NODE_FWD, "linear_fwd", g[i].n, g[i].h, g[i].m, &t), i);
    }
    for (int i = 0; i < 6; i++)
        np_cp_ran(cp, i, g[i].cost);
    np_cp_step(cp, 6); /* all ran: the priorities are set from now on */
    for (int i = 0; i < 6; i++) {
        ctx = (np_task_ctx){.batch = 6, .window = -1, .chunk = -1, .node = i};
        t.priority = -1;
        assert_int_equal(
            np_cp_task(cp, &ctx, NP_NODE_FWD, "linear_fwd", g[i].n, g[i].h, g[i].m, &t), -1);
        assert_int_equal(t.priority, want[i]);
    }
    /* another batch offset, kind or codelet has no counterpart: the fixed priority stays */
    ctx = (np_task_ctx){.batch = 7, .window = -1, .chunk = -1, .node = 0};
    t.priority = 3;
    np_cp_task(cp, &ctx, NP_NODE_FWD, "linear_fwd", g[0].n, g[0].h, g[0].m, &t);
    assert_int_equal(t.priority, 3);
    ctx.batch = 6;
    np_cp_task(cp, &ctx, NP_NODE_BWD, "linear_bwd", g[0].n, g[0].h, g[0].m, &t);
    assert_int_equal(t.priority, 3);
    np_cp_free(cp);
}

/* Until every recorded task ran, priorities stay fixed. */
static void test_waits_for_durations(void **state) {
    (void)state;
    np_cp *cp = NULL;
    np_error err = {{0}};
    assert_int_equal(np_cp_create(0, &cp, &err), NP_OK);
    np_cp_step(cp, 0);
    np_task_ctx ctx = {.batch = 0, .window = -1, .chunk = -1};
    struct starpu_task t = {.priority = 2};
    assert_int_equal(np_cp_task(cp, &ctx, NP_NODE_FWD, "linear_fwd", g[0].n, g[0].h, g[0].m, &t),
                     0);
    assert_int_equal(np_cp_task(cp, &ctx, NP_NODE_BWD, "linear_bwd", g[1].n, g[1].h, g[1].m, &t),
                     1);
    np_cp_ran(cp, 0, 4);
    np_cp_step(cp, 1); /* one still running */
    ctx.batch = 1;
    np_cp_task(cp, &ctx, NP_NODE_FWD, "linear_fwd", g[0].n, g[0].h, g[0].m, &t);
    assert_int_equal(t.priority, 2);
    np_cp_ran(cp, 1, 4);
    np_cp_step(cp, 2);
    ctx.batch = 2;
    np_cp_task(cp, &ctx, NP_NODE_FWD, "linear_fwd", g[0].n, g[0].h, g[0].m, &t);
    assert_int_equal(t.priority, 1000); /* 4 + 4 of 8 */
    np_cp_task(cp, &ctx, NP_NODE_BWD, "linear_bwd", g[1].n, g[1].h, g[1].m, &t);
    assert_int_equal(t.priority, 500);
    np_cp_free(cp);
}

int main(void) {
    setenv("STARPU_NCPU", "1", 1);
    if (starpu_init(NULL)) return 1; /* the profiling switch the recorder turns on */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bottom_levels),
        cmocka_unit_test(test_waits_for_durations),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    starpu_shutdown();
    return rc;
}
