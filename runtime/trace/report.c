/* The text and JSON report of a trace's analysis (np_trace_report_print): per rank and
 * overall, by kind, workers, the exchange and its split, bytes by peer, layers and what to
 * try. Not here: the figures themselves (analyze.c; docs/tracing.md defines each). */
#include "runtime/trace/trace.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"

/* ---- printing */

static void print_rank(FILE *f, const np_trace_rank_stats *r, const np_trace_report *rep,
                       int n_ranks) {
    if (r->rank >= 0)
        fprintf(f, "rank %d\n", r->rank);
    else
        fprintf(f, "overall (%d rank%s; times summed over ranks, step of the slowest)\n", n_ranks,
                n_ranks == 1 ? "" : "s");
    int nw = 0; /* the workers the idle time is summed over */
    for (int i = 0; i < rep->n_workers; i++)
        nw += r->rank < 0 || rep->workers[i].rank == r->rank;
    if (isnan(r->step_us))
        fprintf(f, "  step -  (no batch ended in these %.3f ms)", r->span_us / 1e3);
    else
        fprintf(f, "  step %.3f ms  (%ld batches %s %.3f ms)", r->step_us / 1e3, r->batches,
                rep->windowed ? "ended in the" : "in", r->span_us / 1e3);
    fprintf(f, "  idle %.3f ms summed over %d worker%s\n", r->idle_us / 1e3, nw,
            nw == 1 ? "" : "s");
    if (r->rank >= 0) {
        fprintf(f, "  %-14s %8s %11s %11s\n", "worker", "", "busy ms", "idle ms");
        for (int i = 0; i < rep->n_workers; i++) {
            const np_trace_worker_stats *w = &rep->workers[i];
            if (w->rank == r->rank)
                fprintf(f, "  %-14d %8s %11.3f %11.3f\n", w->worker, "", w->busy_us / 1e3,
                        w->idle_us / 1e3);
        }
    }
    /* total adds up tasks running side by side; union is wall time, which exposed % is of */
    fprintf(f, "  %-14s %8s %11s %11s %11s %9s\n", "kind", "count", "total ms", "union ms",
            "exposed ms", "exposed %");
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        const np_trace_kind_stats *ks = &r->kind[k];
        if (!ks->count) continue;
        fprintf(f, "  %-14s %8ld %11.3f %11.3f %11.3f", np_node_kind_name((np_node_kind)k),
                ks->count, ks->total_us / 1e3, ks->union_us / 1e3, ks->exposed_us / 1e3);
        if (ks->union_us > 0)
            fprintf(f, " %9.1f\n", 100.0 * ks->exposed_us / ks->union_us);
        else
            fprintf(f, " %9s\n", "-");
    }
    if (rep->one_rank)
        fprintf(f, "  exchange none: one rank (its exchange tasks copy in memory; their time is "
                   "in the kinds above)\n");
    else
        fprintf(f, "  exchange %.3f ms, exposed %.3f ms, exposed ratio ", r->exchange_us / 1e3,
                r->exchange_exposed_us / 1e3);
    if (rep->one_rank)
        ;
    else if (isnan(r->exchange_exposed_ratio))
        fprintf(f, "- (no exchange)\n");
    else
        fprintf(f, "%.3f\n", r->exchange_exposed_ratio);
    fprintf(f, "  lookup %.3f ms, exposed %.3f ms\n", r->lookup_us / 1e3,
            r->lookup_exposed_us / 1e3);
    if (r->collective_us > 0)
        fprintf(f,
                "  collectives %.3f ms of task time: %.3f ms waiting for peers, %.3f ms on the "
                "wire and packing\n",
                r->collective_us / 1e3, r->peer_wait_us / 1e3,
                (r->collective_us - r->peer_wait_us) / 1e3);
    if (r->split_us > 0) /* what the tasks themselves timed */
        fprintf(f,
                "  their split: %.3f ms packing, %.3f ms inside the collectives (%.3f posting, "
                "%.3f on the emulated link, %.3f in MPI's wait), %.3f ms unpacking, %.3f ms "
                "between\n",
                r->pack_us / 1e3, r->comm_us / 1e3, r->post_us / 1e3, r->pace_us / 1e3,
                (r->comm_us - r->post_us - r->pace_us) / 1e3, r->unpack_us / 1e3,
                (r->split_us - r->pack_us - r->comm_us - r->unpack_us) / 1e3);
    if (r->npeer > 0) {
        fprintf(f, "  bytes sent / received by peer:");
        for (int q = 0; q < r->npeer; q++)
            if (q != r->rank)
                fprintf(f, " %d: %.3f / %.3f MB", q, (double)r->peer_sent[q] / 1e6,
                        (double)r->peer_recv[q] / 1e6);
        fprintf(f, "\n");
    }
}

static void print_layers(FILE *f, const np_trace_report *r) {
    fprintf(f, "layers (all ranks; share of the %.3f ms of dense compute, fwd + bwd)\n",
            r->compute_us / 1e3);
    fprintf(f, "  %5s %-16s %6s %10s %6s %10s %8s %6s %10s\n", "node", "layer", "fwd", "fwd ms",
            "bwd", "bwd ms", "share %", "other", "other ms");
    for (int i = 0; i < r->n_layers; i++) {
        const np_trace_layer_stats *l = &r->layers[i];
        fprintf(f, "  %5d %-16s %6ld %10.3f %6ld %10.3f", l->node,
                l->name       ? l->name
                : l->node < 0 ? "(no layer)"
                              : "(unnamed)",
                l->fwd_count, l->fwd_us / 1e3, l->bwd_count, l->bwd_us / 1e3);
        if (isnan(l->compute_share))
            fprintf(f, " %8s", "-");
        else
            fprintf(f, " %8.1f", 100.0 * l->compute_share);
        fprintf(f, " %6ld %10.3f\n", l->other_count, l->other_us / 1e3);
    }
    if (!r->n_layers) fprintf(f, "  (no layer tasks in this trace)\n");
}

static void print_advice(FILE *f, const np_trace_report *r) {
    fprintf(f, "what to try (a rank's figure a step; docs/tracing.md \"What to try\")\n");
    for (int i = 0; i < r->n_advice; i++) {
        const np_trace_advice *a = &r->advice[i];
        fprintf(f, "  %d. %s: %.3f ms, %.0f%% of the step. %s.\n     try: %s\n", i + 1, a->rule,
                a->figure_us / 1e3, 100 * a->share, a->cause, a->knob);
    }
    if (!r->n_advice)
        fprintf(f, "  nothing stands out: no rule of the table applies (docs/tracing.md \"What "
                   "to try\" gives each rule's limit)\n");
}

/* JSON has no NaN or infinity: such a figure (a ratio without exchanges) is null. */
static json_t *num(double x) {
    return isfinite(x) ? json_real(x) : json_null();
}

/* [{"peer": q, "sent": bytes, "received": bytes}, ...] for every other rank; NULL: no memory */
static json_t *peers_json(const np_trace_rank_stats *r) {
    json_t *a = json_array();
    for (int q = 0; a && q < r->npeer; q++)
        if (q != r->rank &&
            json_array_append_new(a, json_pack("{s:i, s:I, s:I}", "peer", q, "sent",
                                               (json_int_t)(r->peer_sent[q] & INT64_MAX),
                                               "received",
                                               (json_int_t)(r->peer_recv[q] & INT64_MAX)))) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

static json_t *rank_json(const np_trace_rank_stats *r, const np_trace_report *rep) {
    json_t *kinds = json_object();
    for (int k = 0; kinds && k < NP_NODE_KIND_COUNT; k++) {
        const np_trace_kind_stats *ks = &r->kind[k];
        if (json_object_set_new(kinds, np_node_kind_name((np_node_kind)k),
                                json_pack("{s:I, s:o, s:o, s:o}", "count", (json_int_t)ks->count,
                                          "total_us", num(ks->total_us), "union_us",
                                          num(ks->union_us), "exposed_us", num(ks->exposed_us)))) {
            json_decref(kinds);
            kinds = NULL;
        }
    }
    json_t *o =
        json_pack("{s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "rank", r->rank,
                  "batches", (json_int_t)r->batches, "span_us", num(r->span_us), "step_us",
                  num(r->step_us), "idle_us", num(r->idle_us), "exchange_us", num(r->exchange_us),
                  "exchange_exposed_us", num(r->exchange_exposed_us), "exchange_exposed_ratio",
                  num(r->exchange_exposed_ratio), "lookup_us", num(r->lookup_us),
                  "lookup_exposed_us", num(r->lookup_exposed_us), "kinds", kinds);
    if (o && (json_object_set_new(o, "collective_us", num(r->collective_us)) ||
              json_object_set_new(o, "peer_wait_us", num(r->peer_wait_us)) ||
              (r->split_us > 0 && json_object_set_new(o, "split", json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}",
                  "task_us", num(r->split_us), "pack_us", num(r->pack_us), "comm_us",
                  num(r->comm_us), "post_us", num(r->post_us), "pace_us", num(r->pace_us),
                  "unpack_us", num(r->unpack_us)))) ||
              (r->npeer > 0 && json_object_set_new(o, "peers", peers_json(r))))) {
        json_decref(o);
        return NULL;
    }
    if (!o || r->rank < 0) return o;
    json_t *ws = json_array();
    for (int i = 0; ws && i < rep->n_workers; i++) {
        const np_trace_worker_stats *w = &rep->workers[i];
        if (w->rank != r->rank) continue;
        if (json_array_append_new(ws, json_pack("{s:i, s:o, s:o}", "worker", w->worker, "busy_us",
                                                num(w->busy_us), "idle_us", num(w->idle_us)))) {
            json_decref(ws);
            ws = NULL;
        }
    }
    if (!ws || json_object_set_new(o, "workers", ws)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *part_json(long count, double us) {
    return json_pack("{s:I, s:o}", "count", (json_int_t)count, "total_us", num(us));
}

static json_t *layers_json(const np_trace_report *r) {
    json_t *a = json_array();
    for (int i = 0; a && i < r->n_layers; i++) {
        const np_trace_layer_stats *l = &r->layers[i];
        if (json_array_append_new(
                a, json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o}", "node", l->node, "name",
                             l->name ? json_string(l->name) : json_null(), "fwd",
                             part_json(l->fwd_count, l->fwd_us), "bwd",
                             part_json(l->bwd_count, l->bwd_us), "other",
                             part_json(l->other_count, l->other_us), "compute_us",
                             num(l->fwd_us + l->bwd_us), "compute_share", num(l->compute_share)))) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

np_status np_trace_report_print(const np_trace_report *r, FILE *f, int flags, np_error *err) {
    if (flags & NP_TRACE_PRINT_JSON) {
        json_t *ranks = json_array(), *root = NULL;
        int bad = !ranks;
        for (int i = 0; !bad && i < r->n_ranks; i++)
            bad = json_array_append_new(ranks, rank_json(&r->ranks[i], r)) != 0;
        if (!bad) {
            root = json_pack("{s:o, s:o}", "ranks", ranks, "overall", rank_json(&r->overall, r));
            ranks = NULL; /* "o" stole it, even when the pack failed */
        }
        json_decref(ranks);
        if (root && r->windowed &&
            json_object_set_new(root, "window",
                                json_pack("{s:o, s:o}", "from_us", num(r->window_from_us),
                                          "to_us", num(r->window_to_us)))) {
            json_decref(root);
            root = NULL;
        }
        if (root && json_object_set_new(root, "one_rank", json_boolean(r->one_rank))) {
            json_decref(root);
            root = NULL;
        }
        json_t *adv = root ? json_array() : NULL;
        for (int i = 0; adv && i < r->n_advice; i++) {
            const np_trace_advice *a = &r->advice[i];
            if (json_array_append_new(adv, json_pack("{s:s, s:o, s:o, s:s, s:s}", "rule", a->rule,
                                                     "figure_us", num(a->figure_us), "share",
                                                     num(a->share), "cause", a->cause, "try",
                                                     a->knob))) {
                json_decref(adv);
                adv = NULL;
            }
        }
        if (root && (!adv || json_object_set_new(root, "advice", adv))) {
            json_decref(root);
            root = NULL;
        }
        if (root && (flags & NP_TRACE_PRINT_LAYERS) &&
            (json_object_set_new(root, "compute_us", num(r->compute_us)) ||
             json_object_set_new(root, "layers", layers_json(r)))) {
            json_decref(root);
            root = NULL;
        }
        if (!root) return np_err(err, NP_STATUS_NO_MEMORY, "trace report: out of memory");
        bad = json_dumpf(root, f, JSON_INDENT(2)) != 0 || fputc('\n', f) == EOF;
        json_decref(root);
        if (bad || fflush(f) != 0 || ferror(f))
            return np_err(err, NP_STATUS_IO, "trace report: cannot write the JSON report");
        return NP_OK;
    }
    if (r->windowed)
        fprintf(f, "window %.3f to %.3f ms of the trace: every task that ran in it, clipped to "
                   "it\n",
                r->window_from_us / 1e3, r->window_to_us / 1e3);
    for (int i = 0; i < r->n_ranks; i++)
        print_rank(f, &r->ranks[i], r, r->n_ranks);
    if (r->n_ranks != 1) print_rank(f, &r->overall, r, r->n_ranks); /* one rank: the same */
    if (flags & NP_TRACE_PRINT_LAYERS) print_layers(f, r);
    if (r->n_ranks) print_advice(f, r);
    if (fflush(f) != 0 || ferror(f))
        return np_err(err, NP_STATUS_IO, "trace report: cannot write the report");
    return NP_OK;
}
