/* A pipeline as a value: which stages of later batches overlap the training one, how many
 * embedding buffers that takes, whether shared rows are synced, how the windows of a batch
 * overlap their exchanges, and whether the first rows of a batch are split at the batch
 * boundary. sequential, dbp, async, fwp and nestpipe are five values of it
 * (docs/pipeline.md); the step graph (graph/step.c) reads only these fields.
 * Not here: how a mode is picked ("auto": np_config_pipeline) or submitted. */
#ifndef NP_GRAPH_PIPELINE_H
#define NP_GRAPH_PIPELINE_H

#include "nestpipe/nestpipe.h"

typedef struct np_pipeline_policy {
    np_pipeline mode; /* the name it goes by ("auto" resolved) */
    /* batches whose early stages (prefetch, h2d, route, retrieve) run while one trains: 0,
     * or 4 (NP_SLOTS - 1: batches t+1 .. t+4 in the stages 4 .. 1) */
    int ahead;
    int buffers; /* embedding buffers E: 1, or 2 when a later batch is retrieved early */
    /* dual-buffer sync: rows batch t+1 shares with t are refreshed from t's updated buffer,
     * so the look-ahead never trains on a stale row (0 with look-ahead: async, stale) */
    int sync;
    int windows; /* W micro-batches per local batch (fixes the arithmetic) */
    /* frozen windows: window w+1's rows travel while window w computes, w's gradients while
     * w+1 computes (fwp); otherwise the windows run one after another */
    int overlap_windows;
    /* windows whose rows are sent when the step opens, before the later batches' stages */
    int early_windows;
    /* the early windows' rows of batch t+1 split at the boundary: those t does not hold go
     * under t's last window, the shared ones after sync(t+1) (docs/pipeline.md "The batch
     * boundary"); needs sync and a look-ahead */
    int split_rows;
    /* what the pipeline promises, whatever the fields above do (NP_PROMISE_*): the step
     * graph's checks hold the mechanism to it (graph/check.c) */
    unsigned promise;
} np_pipeline_policy;

enum {
    /* every batch trains on rows the previous batches' updates reached: the reference
     * trainer's model (all but async) */
    NP_PROMISE_FRESH = 1u << 0,
    /* window w's rows travel while window w-1 computes (fwp, nestpipe) */
    NP_PROMISE_OVERLAP = 1u << 1,
};

/* The policy of mode (not auto) with W windows, the split off (the engine turns it on where
 * it applies, after the ranks agree). */
np_pipeline_policy np_pipeline_policy_of(np_pipeline mode, int windows);
/* The same pipeline without look-ahead (a caller that gives one batch a step): dbp and
 * async become sequential, nestpipe fwp; windows and buffers stay. */
void np_pipeline_policy_drop_lookahead(np_pipeline_policy *p);
/* "sequential", "dbp", "async", "fwp", "nestpipe", "auto"; "?" out of range. */
const char *np_pipeline_name(np_pipeline mode);

#endif
