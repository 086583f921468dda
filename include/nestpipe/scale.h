/* nestpipe at scale (public): what a run of N ranks would exchange and how long its steps
 * would take, without running N ranks (docs/scale.md). Every figure of the replay is a
 * projection, calibrated from traces of runs that did happen.
 *
 *     np_route_stats st;                       // bytes per peer at 1,536 ranks
 *     cfg.batch = 1536 * 2048;                  // the global batch at that size
 *     if (!np_route_stats_compute(&cfg, 1536, 4, &st, &err)) { ...; np_route_stats_free(&st); }
 */
#ifndef NESTPIPE_SCALE_H
#define NESTPIPE_SCALE_H

#include <stdint.h>

#include "nestpipe/nestpipe.h"
#include "nestpipe/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- exchange volumes at any rank count (scale/route_stats.c)
 * The routing is a pure function of the keys, the sharding and the batch split, so the
 * bytes every rank would send every other are computed here from the data stream as the
 * route codelet computes them on each rank: the rank's slice of each global batch, its
 * windows (clustered when cfg says so), the distinct keys per (window, table, owner), the
 * form of each segment (rows or pooled sums, key "exchange"). Bytes are those the engine
 * counts: to other ranks only. */
typedef struct np_route_stats {
    int ranks, windows, tables, dim;
    long steps;
    /* (ranks x ranks), row i = the sender: bytes rank i sends rank j in the keys'
     * All2All (keys and the counts before them), summed over steps; diagonal 0 */
    uint64_t *keys;
    /* (ranks x ranks): bytes owner i sends requester j in the row exchanges, summed over
     * windows and steps. The gradients travel back the same segments: rank i sends rank j
     * rows[j * ranks + i] bytes of gradients. */
    uint64_t *rows;
    uint64_t *rows_window; /* (windows): the row bytes of window w over all ranks and steps */
    uint64_t segments, pooled; /* remote (window, table, owner) segments, those pooled */
} np_route_stats;

/* The exchanges of `steps` global batches of cfg->batch samples (the global batch at
 * `ranks` ranks: divisible by it) of cfg's training data, as `ranks` ranks would route
 * them (cfg->ranks is ignored): sharding, windows (np_config_windows), clustering,
 * exchange form and dim from cfg. Each rank's slice is read from its own source, so file
 * data is read `ranks` times. Bad values -> NP_STATUS_BAD_INPUT naming them; data with
 * fewer than `steps` batches -> NP_STATUS_BAD_INPUT saying how many it has. */
NP_NODISCARD NP_API np_status np_route_stats_compute(const np_config *cfg, int ranks, long steps,
                                                     np_route_stats *out, np_error *err);
/* Frees the matrices and zeroes s; NULL-safe. */
NP_API void np_route_stats_free(np_route_stats *s);
/* Sums of a matrix: what rank r sends (recv 0) or receives (recv 1); m is keys or rows. */
NP_API uint64_t np_route_stats_rank(const np_route_stats *s, const uint64_t *m, int r, int recv);

#ifdef __cplusplus
}
#endif
#endif
