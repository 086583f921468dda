/* The five pipelines as values of one policy (graph/pipeline.h). */
#include "graph/pipeline.h"

#include "runtime/core/config_impl.h"

enum { FRESH = NP_PROMISE_FRESH, OVERLAP = NP_PROMISE_OVERLAP };

/* One row per mode: look-ahead, buffers, sync, overlapping windows, and what it promises. */
static const struct {
    np_pipeline mode;
    int ahead, buffers, sync, overlap;
    unsigned promise;
} modes[] = {
    {NP_PIPELINE_SEQUENTIAL, 0, 1, 0, 0, FRESH},
    {NP_PIPELINE_DBP, 4, 2, 1, 0, FRESH},
    {NP_PIPELINE_ASYNC, 4, 2, 0, 0, 0}, /* dbp without the sync: the stale baseline */
    {NP_PIPELINE_FWP, 0, 1, 0, 1, FRESH | OVERLAP},
    {NP_PIPELINE_NESTPIPE, 4, 2, 1, 1, FRESH | OVERLAP},
};

np_pipeline_policy np_pipeline_policy_of(np_pipeline mode, int windows) {
    np_pipeline_policy p = {.mode = NP_PIPELINE_SEQUENTIAL, .buffers = 1, .windows = windows};
    for (unsigned k = 0; k < sizeof modes / sizeof *modes; k++)
        if (modes[k].mode == mode) {
            p.mode = mode;
            p.ahead = modes[k].ahead;
            p.buffers = modes[k].buffers;
            p.sync = modes[k].sync;
            p.overlap_windows = modes[k].overlap;
            p.promise = modes[k].promise;
        }
    /* with overlapping windows, window 1's rows travel under window 0's compute: both go
     * when the step opens */
    p.early_windows = p.overlap_windows && windows > 1 ? 2 : 1;
    if (windows < 2) p.promise &= ~(unsigned)OVERLAP; /* one window overlaps nothing */
    return p;
}

void np_pipeline_policy_drop_lookahead(np_pipeline_policy *p) {
    p->mode = p->overlap_windows ? NP_PIPELINE_FWP : NP_PIPELINE_SEQUENTIAL;
    p->ahead = 0;
    p->sync = 0;
    p->split_rows = 0;
    p->promise = np_pipeline_policy_of(p->mode, p->windows).promise;
}

const char *np_pipeline_name(np_pipeline mode) {
    return (unsigned)mode <= NP_PIPELINE_AUTO ? np_cfg_pipeline_names[mode] : "?"; /* runtime/core/ */
}
