/* Test helper shared by the trace tests: one task event into a hand-made trace. Header-only;
 * include it after cmocka.h. */
#ifndef NP_TESTS_TRACEUTIL_H
#define NP_TESTS_TRACEUTIL_H

#include "runtime/trace/trace.h"

/* A task of `kind` on (rank, worker) for batch `batch`, [s, e) microseconds: named after its
 * kind, of no window, layer or chunk. */
static inline void tu_trace_add(np_trace *tr, int rank, int worker, np_node_kind kind,
                                long batch, double s, double e) {
    np_trace_event ev = {.name = np_node_kind_name(kind),
                         .kind = kind,
                         .batch = batch,
                         .window = -1,
                         .rank = rank,
                         .worker = worker,
                         .start_us = s,
                         .end_us = e,
                         .node = -1,
                         .chunk = -1};
    assert_int_equal(np_trace_record(tr, &ev), 0);
}

/* tr's report, which must succeed; free it with np_trace_report_free. */
static inline np_trace_report tu_analyze(const np_trace *tr) {
    np_trace_report r;
    np_error e = {{0}};
    assert_int_equal(np_trace_analyze(tr, &r, &e), NP_OK);
    return r;
}

#endif
