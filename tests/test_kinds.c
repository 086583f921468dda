/* Node-kind table tests (runtime/core/kinds.c): every row complete and consistent with the others
 * (names, colours, flags, places, byte counters, priorities), the analysis treating as
 * collectives exactly the exchange kinds, and a trace written before the kinds were split
 * reading into today's kinds with the overlap figures it gave before.
 * Not here: the report's figures in general (test_trace_report.c), the pictures
 * (test_trace_export.c), a real run's kinds (test_engine.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/kinds.h"
#include "runtime/trace/trace.h"

/* The analysis of a read trace: its times went through 17-digit decimals and back, which
 * may move an end by an ulp; the expected figures are whole microseconds. */
#define READ_ATOL_US 1e-6

static np_trace *new_trace(void) {
    np_trace *tr = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_create(&tr, &e), NP_OK);
    return tr;
}

/* ---- the table */

static void test_names(void **state) {
    (void)state;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        const char *name = np_node_kinds[k].name;
        if (!name || !name[0]) fail_msg("kind %d has no name (a row missing in runtime/core/kinds.c)", k);
        for (const char *c = name; *c; c++) /* a Paje value and a CSS class as it is */
            if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
                fail_msg("kind %s: '%c' in its name", name, *c);
        assert_string_equal(np_node_kind_name((np_node_kind)k), name);
        for (int j = 0; j < k; j++)
            if (!strcmp(np_node_kinds[j].name, name))
                fail_msg("kinds %d and %d are both %s", j, k, name);
        np_node_kind back = NP_NODE_KIND_COUNT;
        assert_int_equal(np_node_kind_lookup(name, &back), 0);
        assert_int_equal(back, k);
        assert_ptr_equal(np_node_kind_get((np_node_kind)k), &np_node_kinds[k]);
    }
    np_node_kind untouched = NP_NODE_SYNC;
    assert_int_equal(np_node_kind_lookup("a2a_keys", &untouched), -1); /* a codelet, not a kind */
    assert_int_equal(np_node_kind_lookup("", &untouched), -1);
    assert_int_equal(np_node_kind_lookup(NULL, &untouched), -1);
    assert_int_equal(untouched, NP_NODE_SYNC);
    assert_string_equal(np_node_kind_name(NP_NODE_KIND_COUNT), "?");
    assert_string_equal(np_node_kind_name((np_node_kind)-1), "?");
    assert_null(np_node_kind_get(NP_NODE_KIND_COUNT));
    assert_null(np_node_kind_get((np_node_kind)-1));
    assert_false(np_node_kind_is((np_node_kind)-1, ~0u));
    assert_false(np_node_kind_is(NP_NODE_KIND_COUNT, ~0u));
    /* the public summary holds every kind */
    assert_true(NP_NODE_KIND_COUNT <= NP_TRACE_MAX_KINDS);
}

/* Every kind a colour of its own, none the grey the pictures give an unknown kind. */
static void test_colours(void **state) {
    (void)state;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        const unsigned char *c = np_node_kinds[k].rgb;
        if (c[0] == 64 && c[1] == 64 && c[2] == 64)
            fail_msg("%s: the unknown kind's grey", np_node_kinds[k].name);
        for (int j = 0; j < k; j++)
            if (!memcmp(np_node_kinds[j].rgb, c, 3))
                fail_msg("%s and %s have one colour", np_node_kinds[j].name, np_node_kinds[k].name);
    }
}

static void test_flags(void **state) {
    (void)state;
    int slots[4] = {0};
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        const np_node_kind_def *d = &np_node_kinds[k];
        int compute = (d->flags & NP_KIND_COMPUTE) != 0, xchg = (d->flags & NP_KIND_EXCHANGE) != 0;
        /* dense compute runs where --place says; every place kind has a kind */
        if (compute && !(d->place >= 0 && d->place < NP_PLACE_KINDS))
            fail_msg("compute kind %s has no place", d->name);
        assert_true(d->place >= -1 && d->place < NP_PLACE_KINDS);
        /* backward is a part of dense compute */
        if ((d->flags & NP_KIND_BACKWARD) && !compute)
            fail_msg("%s: backward, not compute", d->name);
        /* the exchange figure and the byte counters are the collectives' */
        if ((d->flags & NP_KIND_PAYLOAD) && !xchg)
            fail_msg("%s: payload, not a collective", d->name);
        if (xchg != (d->bytes_slot >= 0)) fail_msg("%s: a byte counter iff a collective", d->name);
        /* a collective runs on the comm worker, never where --place puts compute */
        if (xchg && (compute || d->place >= 0)) fail_msg("%s: a collective with a place", d->name);
        /* no task time is counted twice: one group of the report at most */
        int groups =
            compute + ((d->flags & NP_KIND_LOOKUP) != 0) + ((d->flags & NP_KIND_PAYLOAD) != 0);
        if (groups > 1) fail_msg("%s: in %d of compute, lookup, exchange", d->name, groups);
        if (d->bytes_slot >= 0) {
            assert_true(d->bytes_slot < 4);
            slots[d->bytes_slot]++;
        }
    }
    for (int s = 0; s < 4; s++)
        assert_int_equal(slots[s], 1); /* keys, rows, grads, all-reduce: one kind each */
    for (int p = 0; p < NP_PLACE_KINDS; p++) {
        int used = 0;
        for (int k = 0; k < NP_NODE_KIND_COUNT; k++)
            used += np_node_kinds[k].place == p;
        if (!used) fail_msg("place kind %d has no node kind", p);
    }
    assert_true(np_node_kind_is(NP_NODE_DATA, NP_KIND_DRIVER));
}

/* Today's kinds as the code gave them before the table: tasks/tasks.h's NP_PRIO_* per
 * submitter, tasks/submit.c's placement by codelet and byte counter by kind, the `pin = 1`
 * of the collectives' submitters and runtime/trace/analyze.c's masks (route's tasks all lookup,
 * a2a_keys a collective). So scheduling, placement, bytes and the report's figures stay as
 * they were. A kind added later is held to the rules above only. */
static void test_rows_as_before(void **state) {
    (void)state;
    enum {
        C = NP_KIND_COMPUTE,
        B = NP_KIND_BACKWARD,
        L = NP_KIND_LOOKUP,
        X = NP_KIND_EXCHANGE,
        P = NP_KIND_PAYLOAD,
        I = NP_KIND_INPUT,
        D = NP_KIND_DRIVER
    };
    static const struct {
        np_node_kind kind;
        unsigned flags;
        int place, bytes_slot, prio;
    } before[] = {
        {NP_NODE_PREFETCH, I, -1, -1, 0},
        {NP_NODE_H2D, I, -1, -1, 0},
        {NP_NODE_ROUTE, L, -1, -1, 100},          /* ahead of all: the keys' All2All waits for it */
        {NP_NODE_EXCHANGE_KEYS, X | L, -1, 0, 2}, /* lookup as a route task was, not exchange */
        {NP_NODE_ROUTE_OWNER, L, -1, -1, 1},
        {NP_NODE_RETRIEVE, L, -1, -1, 1},
        {NP_NODE_SYNC, L, -1, -1, 2},
        {NP_NODE_EXCHANGE_EMB, X | P, -1, 1, 2},
        {NP_NODE_POOL_FWD, C, NP_PLACE_POOL, -1, 2},
        {NP_NODE_FWD, C, NP_PLACE_DENSE, -1, 2},
        {NP_NODE_LOSS_FWD, C, NP_PLACE_LOSS, -1, 2},
        {NP_NODE_LOSS_BWD, C | B, NP_PLACE_LOSS, -1, 2},
        {NP_NODE_BWD, C | B, NP_PLACE_DENSE, -1, 2}, /* and the gradient sums */
        {NP_NODE_POOL_BWD, C | B, NP_PLACE_POOL, -1, 2},
        {NP_NODE_EXCHANGE_GRAD, X | P, -1, 2, 2},
        {NP_NODE_ALLREDUCE, X | P, -1, 3, 2},
        {NP_NODE_SPARSE_UPDATE, 0, -1, -1, 1},
        {NP_NODE_WRITEBACK, 0, -1, -1, 1},
        {NP_NODE_DENSE_UPDATE, 0, NP_PLACE_UPDATE, -1, 2},
        {NP_NODE_DATA, D, -1, -1, 0},
    };
    for (size_t i = 0; i < sizeof before / sizeof *before; i++) {
        const np_node_kind_def *d = np_node_kind_get(before[i].kind);
        assert_non_null(d);
        if (d->flags != before[i].flags || d->place != before[i].place ||
            d->bytes_slot != before[i].bytes_slot || d->prio != before[i].prio)
            fail_msg("%s: flags %#x place %d bytes %d prio %d, want %#x %d %d %d", d->name,
                     d->flags, d->place, d->bytes_slot, d->prio, before[i].flags, before[i].place,
                     before[i].bytes_slot, before[i].prio);
    }
}

/* The analysis's collectives are the exchange kinds: for each kind, one task on each of two
 * ranks, rank 1 10 us later; only a collective waits for its peer. */
static void test_collectives(void **state) {
    (void)state;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        np_trace *tr = new_trace();
        for (int r = 0; r < 2; r++) {
            np_trace_event ev = {.name = "t",
                                 .kind = (np_node_kind)k,
                                 .window = -1,
                                 .rank = r,
                                 .start_us = 10.0 * r,
                                 .end_us = 100,
                                 .node = -1,
                                 .chunk = -1};
            assert_int_equal(np_trace_record(tr, &ev), 0);
        }
        double wait[2];
        assert_int_equal(np_trace_peer_wait(tr, wait), 0);
        int coll = np_node_kind_is((np_node_kind)k, NP_KIND_EXCHANGE);
        if (wait[0] != (coll ? 10 : 0) || wait[1] != 0)
            fail_msg("%s: waits %g and %g", np_node_kinds[k].name, wait[0], wait[1]);
        np_trace_report r;
        np_error e = {{0}};
        assert_int_equal(np_trace_analyze(tr, &r, &e), NP_OK);
        assert_true(r.overall.collective_us == (coll ? 190 : 0));
        assert_true(r.overall.peer_wait_us == (coll ? 10 : 0));
        np_trace_report_free(&r);
        np_trace_free(tr);
    }
}

/* ---- a trace written before the split (kinds route, fwd and bwd for the tasks that now
 * have kinds of their own) */

static const struct {
    const char *name, *kind, *now; /* codelet, kind as written then, kind read now */
    int worker, window, node;
    double start, end; /* us, rank 0; rank 1 runs everything 10 us later */
} old_tasks[] = {
    {"route", "route", "route", 0, -1, -1, 0, 20},
    {"a2a_keys", "route", "exchange_keys", 1, -1, -1, 20, 40},
    {"route_owner", "route", "route_owner", 0, -1, -1, 40, 50},
    {"retrieve", "retrieve", "retrieve", 0, -1, -1, 50, 60},
    {"exchange_rows", "exchange_emb", "exchange_emb", 1, 0, -1, 60, 80},
    {"pool_fwd", "fwd", "pool_fwd", 0, 0, -1, 70, 90},
    {"linear_fwd", "fwd", "fwd", 0, 0, 0, 90, 120},
    {"bce_fwd", "fwd", "loss_fwd", 0, 0, -1, 120, 130},
    {"bce_bwd", "bwd", "loss_bwd", 0, 0, -1, 130, 135},
    {"linear_bwd", "bwd", "bwd", 0, 0, 0, 135, 165},
    {"pool_bwd", "bwd", "pool_bwd", 0, 0, -1, 165, 175},
    {"exchange_grads", "exchange_grad", "exchange_grad", 1, 0, -1, 170, 190},
    {"allreduce", "allreduce", "allreduce", 1, -1, 0, 190, 200},
    {"sparse_update", "sparse_update", "sparse_update", 0, -1, -1, 200, 210},
    {"writeback", "writeback", "writeback", 0, -1, -1, 210, 220},
    {"dense_update", "dense_update", "dense_update", 0, -1, 0, 220, 225},
};
enum { N_OLD = sizeof old_tasks / sizeof *old_tasks };

static void write_old_trace(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"traceEvents\": [", f);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N_OLD; i++)
            fprintf(f,
                    "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                    "\"ts\":%g,\"dur\":%g,\"args\":{\"kind\":\"%s\",\"batch\":0,\"window\":%d,"
                    "\"bytes\":0,\"node\":%d,\"chunk\":-1}}",
                    r || i ? "," : "", old_tasks[i].name, old_tasks[i].kind, r, old_tasks[i].worker,
                    old_tasks[i].start + 10 * r, old_tasks[i].end - old_tasks[i].start,
                    old_tasks[i].kind, old_tasks[i].window, old_tasks[i].node);
    fputs("], \"displayTimeUnit\": \"ms\"}\n", f);
    assert_int_equal(fclose(f), 0);
}

static int near(double a, double b) {
    return fabs(a - b) <= READ_ATOL_US;
}

/* The figures the analysis gave this trace before the split, per rank (both alike but the
 * wait): dense compute [70, 175); exchange = rows [60, 80), gradients [170, 190) and the
 * all-reduce [190, 200): 50 us, 35 exposed; lookup = route, the keys' All2All, the owner's
 * route and retrieve, [0, 60), all exposed; collectives (the three exchanges and a2a_keys)
 * 70 us of task time, of which rank 0 waits 10 per collective for rank 1. Per layer: node 0
 * fwd 30 + bwd 30 and 15 other (all-reduce, update) per rank, the no-layer row fwd = pool +
 * loss 30, bwd = loss + pool 15 per rank; 210 us of dense compute in all. `nestpipe trace
 * report` of the version before the split prints these for this file. */
static void check_old_figures(const np_trace *tr) {
    np_trace_report r;
    np_error e = {{0}};
    assert_int_equal(np_trace_analyze(tr, &r, &e), NP_OK);
    assert_int_equal(r.n_ranks, 2);
    for (int i = 0; i < 2; i++) {
        const np_trace_rank_stats *s = &r.ranks[i];
        assert_true(near(s->span_us, 225) && s->batches == 1);
        assert_true(near(s->exchange_us, 50) && near(s->exchange_exposed_us, 35));
        assert_true(near(s->exchange_exposed_ratio, 0.7));
        assert_true(near(s->lookup_us, 60) && near(s->lookup_exposed_us, 60));
        assert_true(near(s->collective_us, 70));
        assert_true(near(s->peer_wait_us, i == 0 ? 40 : 0));
        assert_true(near(s->idle_us, 225 - 170 + 225 - 70)); /* worker 0 busy 170, worker 1 70 */
    }
    const np_trace_rank_stats *o = &r.overall;
    assert_true(near(o->exchange_us, 100) && near(o->exchange_exposed_us, 70));
    assert_true(near(o->lookup_us, 120) && near(o->lookup_exposed_us, 120));
    assert_true(near(o->collective_us, 140) && near(o->peer_wait_us, 40));
    /* the old kinds' rows are the sums of today's parts */
    long route = 0, fwd = 0, bwd = 0;
    double route_us = 0, fwd_us = 0, bwd_us = 0;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        const np_trace_kind_stats *ks = &o->kind[k];
        if (k == NP_NODE_ROUTE || k == NP_NODE_EXCHANGE_KEYS || k == NP_NODE_ROUTE_OWNER)
            route += ks->count, route_us += ks->total_us;
        if (k == NP_NODE_POOL_FWD || k == NP_NODE_FWD || k == NP_NODE_LOSS_FWD)
            fwd += ks->count, fwd_us += ks->total_us;
        if (k == NP_NODE_LOSS_BWD || k == NP_NODE_BWD || k == NP_NODE_POOL_BWD)
            bwd += ks->count, bwd_us += ks->total_us;
    }
    assert_true(route == 6 && near(route_us, 100));
    assert_true(fwd == 6 && near(fwd_us, 120));
    assert_true(bwd == 6 && near(bwd_us, 90));
    assert_true(near(r.compute_us, 210));
    assert_int_equal(r.n_layers, 2);
    const np_trace_layer_stats *l0 = &r.layers[0], *nl = &r.layers[1];
    assert_int_equal(l0->node, 0);
    assert_true(l0->fwd_count == 2 && l0->bwd_count == 2 && l0->other_count == 4);
    assert_true(near(l0->fwd_us, 60) && near(l0->bwd_us, 60) && near(l0->other_us, 30));
    assert_int_equal(nl->node, -1);
    assert_true(nl->fwd_count == 4 && nl->bwd_count == 4 && nl->other_count == 0);
    assert_true(near(nl->fwd_us, 60) && near(nl->bwd_us, 30));
    assert_true(near(nl->compute_share, 90.0 / 210));
    np_trace_report_free(&r);
}

static void test_old_trace(void **state) {
    (void)state;
    char path[] = "/tmp/np_kinds_XXXXXX", path2[64];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_old_trace(path);
    np_trace *tr = NULL;
    np_error e = {{0}};
    if (np_trace_read_chrome(path, &tr, &e)) fail_msg("%s", e.msg);
    assert_int_equal(np_trace_count(tr), 2 * N_OLD);
    for (size_t i = 0; i < np_trace_count(tr); i++) {
        const np_trace_event *ev = np_trace_get(tr, i);
        assert_string_equal(np_node_kind_name(ev->kind), old_tasks[i % N_OLD].now);
        assert_string_equal(ev->name, old_tasks[i % N_OLD].name);
    }
    check_old_figures(tr);

    /* written again, it is a trace of today's kinds, and reads to the same */
    snprintf(path2, sizeof path2, "%s.new", path);
    assert_int_equal(np_trace_write_chrome(tr, path2, &e), NP_OK);
    np_trace *again = NULL;
    if (np_trace_read_chrome(path2, &again, &e)) fail_msg("%s", e.msg);
    assert_int_equal(np_trace_count(again), 2 * N_OLD);
    for (size_t i = 0; i < np_trace_count(again); i++) {
        const np_trace_event *ev = np_trace_get(again, i);
        int found = 0; /* the export sorts by time: find the task by its name */
        for (int j = 0; j < N_OLD; j++)
            if (!strcmp(ev->name, old_tasks[j].name)) {
                assert_string_equal(np_node_kind_name(ev->kind), old_tasks[j].now);
                found = 1;
            }
        assert_true(found);
    }
    check_old_figures(again);
    np_trace_free(again);
    np_trace_free(tr);
    remove(path2);
    remove(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),       cmocka_unit_test(test_colours),
        cmocka_unit_test(test_flags),       cmocka_unit_test(test_rows_as_before),
        cmocka_unit_test(test_collectives), cmocka_unit_test(test_old_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
