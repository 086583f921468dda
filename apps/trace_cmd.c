/* `nestpipe trace report|svg|paje FILE ...`: reads a Chrome trace written by --trace and
 * prints its overlap report or converts it. Exit codes as the rest of the command: 0 ok,
 * 2 bad input (arguments, missing or malformed trace), 1 other failures. Not here: the
 * analysis or the formats themselves (runtime/trace/). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "nestpipe/trace.h"
#include "trace_cmd.h"

static const char *trace_help =
    "usage: nestpipe trace report FILE [--json] [--by-layer] [WINDOW]   overlap report\n"
    "       nestpipe trace svg FILE OUT.svg [WINDOW]     timeline and exposed-time chart\n"
    "       nestpipe trace paje FILE OUT.paje [WINDOW]   Paje trace for ViTE / pajeng\n"
    "WINDOW: --from-batch N and/or --to-batch M (the time in which batches N..M ended), or\n"
    "        --from-ms A and/or --to-ms B (the trace's timestamps, in milliseconds)\n"
    "\n"
    "FILE is a Chrome trace written by nestpipe train --trace (one rank or merged).\n"
    "report prints, per rank and overall, the step time, each worker's busy and idle\n"
    "time, and per node kind the task count, total and exposed time (not hidden behind\n"
    "dense compute); --json prints the same as one JSON object (docs/tracing.md).\n"
    "--by-layer adds, per model layer (summed over ranks), its fwd and bwd task counts and\n"
    "time, its share of all dense compute time, and its other tasks (all-reduce, update).\n"
    "A window keeps every task that ran in it, of any batch, clipped to it: under dbp and\n"
    "nestpipe the tasks of neighbouring batches are the ones that overlap, and the report\n"
    "of a window is the whole trace's restricted to it. --from-batch N starts it where\n"
    "batch N-1 ended (after the warm-up: first touches of the tables, perf-model\n"
    "calibration) for steady-state figures; --to-batch M ends it where batch M ended, for a\n"
    "readable picture of a long run. A window with no task is an error.\n";

static int fail(np_status st, const np_error *err) {
    return np_cli_fail(st, err);
}

static int usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "nestpipe: trace: %s '%s' (see nestpipe trace --help)\n", msg, arg);
    return EXIT_BAD_INPUT;
}

int np_cmd_trace(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(trace_help, stdout);
            return 0;
        }
    if (argc < 1) {
        fprintf(stderr, "nestpipe: trace needs a subcommand: report, svg or paje (see nestpipe "
                        "trace --help)\n");
        return EXIT_BAD_INPUT;
    }
    const char *sub = argv[0];
    int report = !strcmp(sub, "report"), svg = !strcmp(sub, "svg"), paje = !strcmp(sub, "paje");
    if (!report && !svg && !paje) return usage_error("unknown subcommand", sub);

    const char *in = NULL, *out = NULL;
    int flags = 0; /* NP_TRACE_REPORT_* */
    long from_batch = 0, to_batch = -1;
    double from_ms = NAN, to_ms = NAN;
    for (int i = 1; i < argc; i++) {
        if (report && !strcmp(argv[i], "--json")) {
            flags |= NP_TRACE_REPORT_JSON;
        } else if (report && !strcmp(argv[i], "--by-layer")) {
            flags |= NP_TRACE_REPORT_LAYERS;
        } else if (!strcmp(argv[i], "--from-batch") || !strcmp(argv[i], "--to-batch")) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (!end || *end || end == argv[i + 1] || v < 0) {
                fprintf(stderr, "nestpipe: trace: %s needs a batch number >= 0\n", argv[i]);
                return EXIT_BAD_INPUT;
            }
            if (argv[i][2] == 'f')
                from_batch = v;
            else
                to_batch = v;
            i++;
        } else if (!strcmp(argv[i], "--from-ms") || !strcmp(argv[i], "--to-ms")) {
            char *end = NULL;
            double v = i + 1 < argc ? strtod(argv[i + 1], &end) : NAN;
            if (!end || *end || end == argv[i + 1] || !isfinite(v) || v < 0) {
                fprintf(stderr, "nestpipe: trace: %s needs milliseconds >= 0\n", argv[i]);
                return EXIT_BAD_INPUT;
            }
            if (argv[i][2] == 'f')
                from_ms = v;
            else
                to_ms = v;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage_error("unknown flag", argv[i]);
        } else if (!in) {
            in = argv[i];
        } else if (!out && !report) {
            out = argv[i];
        } else {
            return usage_error("unexpected argument", argv[i]);
        }
    }
    if (!in || (!report && !out)) {
        fprintf(stderr, "nestpipe: trace %s needs %s (see nestpipe trace --help)\n", sub,
                report ? "FILE"
                : svg  ? "FILE and OUT.svg"
                       : "FILE and OUT.paje");
        return EXIT_BAD_INPUT;
    }

    np_error err = {{0}};
    np_trace_t *tr = NULL;
    np_status st = out ? np_output_not_input(out, svg ? "trace svg: the output" : "trace paje: the output",
                                             in, "the trace", &err)
                       : NP_OK;
    if (!st) st = np_trace_read_chrome(in, &tr, &err);
    if (st) return fail(st, &err);
    int by_batch = from_batch > 0 || to_batch >= 0, by_time = !isnan(from_ms) || !isnan(to_ms);
    const char *bad = by_batch && by_time ? "a window is by batches or by milliseconds, not both"
                      : to_batch >= 0 && to_batch < from_batch ? "--to-batch is before --from-batch"
                      : by_time && !isnan(from_ms) && !isnan(to_ms) && to_ms <= from_ms
                          ? "--to-ms must come after --from-ms"
                          : NULL;
    if (bad) {
        np_trace_free(tr);
        fprintf(stderr, "nestpipe: trace: %s\n", bad);
        return EXIT_BAD_INPUT;
    }
    if (by_batch || by_time) {
        np_trace_t *kept = NULL;
        st = by_batch ? np_trace_batches(tr, from_batch, to_batch, &kept, &err)
                      : np_trace_window(tr, isnan(from_ms) ? -INFINITY : from_ms * 1e3,
                                        isnan(to_ms) ? INFINITY : to_ms * 1e3, &kept, &err);
        np_trace_free(tr);
        tr = kept;
        if (st) return fail(st, &err);
    }
    if (report) {
        st = np_trace_print_report(tr, stdout, flags, &err);
    } else if (svg) {
        st = np_trace_write_svg(tr, out, &err);
    } else {
        st = np_trace_write_paje(tr, out, &err);
    }
    np_trace_free(tr);
    if (st) return fail(st, &err);
    if (!report) printf("wrote %s\n", out);
    return 0;
}
