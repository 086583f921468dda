/* The public face of runtime/trace/ (include/nestpipe/trace.h): the report of a trace in one call
 * and its overall figures in a struct of the public header. The other public functions are
 * runtime/trace/'s own, declared in both headers: including both here makes the compiler check that
 * the two declarations agree. */
#include "nestpipe/trace.h"

#include <string.h>

#include "runtime/trace/trace.h"

_Static_assert(NP_NODE_KIND_COUNT <= NP_TRACE_MAX_KINDS, "np_trace_summary.kind is too short");
_Static_assert((int)NP_TRACE_REPORT_JSON == (int)NP_TRACE_PRINT_JSON &&
                   (int)NP_TRACE_REPORT_LAYERS == (int)NP_TRACE_PRINT_LAYERS,
               "the public report flags are passed on to np_trace_report_print as they are");

np_status np_trace_print_report(const np_trace_t *tr, FILE *f, int flags, np_error *err) {
    np_trace_report rep;
    np_status st = np_trace_analyze(tr, &rep, err);
    const char *sched = np_trace_info(tr, "sched"), *from = np_trace_info(tr, "sched_from");
    if (!st && sched && !(flags & NP_TRACE_REPORT_JSON)) { /* what ran, when the trace says */
        const char *pipe = np_trace_info(tr, "pipeline"), *w = np_trace_info(tr, "windows"),
                   *c = np_trace_info(tr, "chunks");
        fprintf(f, "run: sched %s (%s)  pipeline %s  windows %s  chunks %s\n", sched,
                from ? from : "?", pipe ? pipe : "?", w ? w : "?", c ? c : "?");
    }
    if (!st) st = np_trace_report_print(&rep, f, flags, err);
    np_trace_report_free(&rep);
    return st;
}

const char *np_trace_info(const np_trace_t *tr, const char *key) {
    const char *v = NULL;
    for (int i = 0;; i++) {
        const char *k = np_trace_info_at(tr, i, &v);
        if (!k) return NULL;
        if (!strcmp(k, key)) return v;
    }
}

np_status np_trace_summarize(const np_trace_t *tr, np_trace_summary *out, np_error *err) {
    np_trace_report rep;
    np_status st = np_trace_analyze(tr, &rep, err);
    if (!st) {
        const np_trace_rank_stats *o = &rep.overall;
        *out = (np_trace_summary){.batches = o->batches,
                                  .step_us = o->step_us,
                                  .exchange_us = o->exchange_us,
                                  .exchange_exposed_us = o->exchange_exposed_us,
                                  .exchange_exposed_ratio = o->exchange_exposed_ratio,
                                  .lookup_us = o->lookup_us,
                                  .lookup_exposed_us = o->lookup_exposed_us,
                                  .idle_us = o->idle_us,
                                  .collective_us = o->collective_us,
                                  .peer_wait_us = o->peer_wait_us,
                                  .n_kinds = NP_NODE_KIND_COUNT};
        for (int k = 0; k < NP_NODE_KIND_COUNT; k++)
            out->kind[k] = (np_trace_kind_time){.kind = np_node_kind_name((np_node_kind)k),
                                                .count = o->kind[k].count,
                                                .total_us = o->kind[k].total_us,
                                                .exposed_us = o->kind[k].exposed_us};
    }
    np_trace_report_free(&rep);
    return st;
}

const np_trace_kind_time *np_trace_summary_kind(const np_trace_summary *s, const char *kind) {
    for (int k = 0; k < s->n_kinds; k++)
        if (!strcmp(s->kind[k].kind, kind)) return &s->kind[k];
    return NULL;
}

np_status np_trace_write_file(const np_trace_t *tr, const char *path, np_error *err) {
    return np_trace_write_chrome(tr, path, err);
}
