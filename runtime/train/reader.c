/* The look-ahead ring of a training run: every rank reads its slice of each global batch
 * ahead of the step that trains it (the pipelined modes start work on the batches after
 * the training one), and the ranks agree on each read's outcome, so that a rank whose
 * data fails or ends stops the others at the same batch.
 * Not here: what is done with the batches (runtime/train/run.c). */
#include "nestpipe/trace.h" /* np_trainer_clock_us, np_trainer_trace_data */
#include "runtime/train/run_impl.h"

int np_run_outcome(np_dist_t *dist, np_dist_watchdog_t *wd, int mine) {
    int64_t v = mine;
    np_dist_watchdog_progress(wd, -1, 1); /* waits for the other ranks */
    int failed = np_dist_max_i64(dist, &v, NULL) != NP_OK;
    np_dist_watchdog_progress(wd, -1, 0);
    return failed ? 2 : (int)v;
}

int np_reader_fill(np_reader *rd, long upto) {
    const np_config *cfg = rd->cfg;
    while (!rd->ended && rd->loaded <= upto && (cfg->steps == 0 || rd->loaded < cfg->steps)) {
        np_batch *l = &rd->local[rd->loaded % NP_RING];
        double td = np_run_now(), c0 = np_trainer_clock_us(rd->tr);
        rd->st = np_source_next_slice(rd->src, cfg->batch, rd->lo, rd->local_n, l, &rd->err);
        rd->r->data_seconds += np_run_now() - td;
        if (!rd->st) np_trainer_trace_data(rd->tr, rd->loaded, c0, np_trainer_clock_us(rd->tr));
        int outcome = np_run_outcome(rd->dist, rd->wd,
                                     rd->st == NP_OK                   ? 0
                                     : rd->st == NP_STATUS_END_OF_DATA ? 1
                                                                       : 2);
        if (outcome == 2) {
            if (rd->st == NP_STATUS_END_OF_DATA) rd->st = NP_OK;
            return -1;
        }
        if (outcome == 1) {
            rd->st = NP_OK;
            rd->ended = 1;
        } else {
            np_source_tell(rd->src, &rd->pos[rd->loaded % NP_RING]);
            rd->loaded++;
        }
    }
    return 0;
}
