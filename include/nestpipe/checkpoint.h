/* Checkpoints (public): a training run's whole state at a step boundary, written by every
 * rank in parallel and read back at the same or another rank count. The format and its
 * guarantees: docs/formats.md "Checkpoints". Not here: when to take one (the driver).
 *
 * Usage (every rank, after np_trainer_wait of step s-1 returned):
 *
 *     np_ckpt_state cs = {.step = s, .data = pos_after_batch_s_minus_1};
 *     np_ckpt_stats stats;
 *     if (np_ckpt_save(dist, &cfg, trainer, model, &cs, &stats, &err)) ...   // collective
 *     // later, in a new process, before np_trainer_create:
 *     if (np_ckpt_load(&cfg, model, &cs, &stats, &err)) ...                   // per rank
 *     np_source_seek(train, cfg.batch, &cs.data, &err);
 */
#ifndef NESTPIPE_CHECKPOINT_H
#define NESTPIPE_CHECKPOINT_H

#include <stdint.h>

#include "nestpipe/dist.h"
#include "nestpipe/nestpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a training source stands: what np_source_seek needs to continue from there. */
typedef struct np_data_pos {
    uint64_t delivered;  /* training records handed out in batches so far */
    uint64_t next_index; /* files: stream index (line or record) of the next record to read */
    int64_t skipped;     /* files: bad lines skipped so far (--skip-bad-lines) */
} np_data_pos;

/* The source's position now (after the last batch it returned). */
NP_API void np_source_tell(const np_source_t *src, np_data_pos *pos);
/* Moves a freshly opened TRAIN source to pos, reading batches of g records: synthetic data
 * jumps there at once; files are read up to it and must arrive at the same stream index and
 * skipped-line count, else NP_STATUS_BAD_INPUT (the data changed since the checkpoint). */
NP_NODISCARD NP_API np_status np_source_seek(np_source_t *src, long g, const np_data_pos *pos,
                                             np_error *err);

#define NP_CKPT_LOSSES 1024 /* most recent step losses a checkpoint keeps */

/* What a checkpoint holds besides the model: the driver's own state. */
typedef struct np_ckpt_state {
    long step;        /* optimizer steps done: the next step trains batch `step` */
    np_data_pos data; /* the training source after batch step-1 (the same on every rank) */
    double loss_first;
    int n_losses;                  /* losses of steps step-n_losses .. step-1 */
    double losses[NP_CKPT_LOSSES]; /* oldest first */
} np_ckpt_state;

typedef struct np_ckpt_stats {
    double seconds;         /* wall time of the save or load (on this rank, collective for save) */
    double bytes;           /* bytes of all files written (save) or read on this rank (load) */
    char path[NP_PATH_MAX]; /* the checkpoint folder */
    /* load: a ckpt-<step> newer than the one loaded that was passed over as not whole, and
     * why ("ckpt-40 (no manifest: ...)"); "" when none. A caller should say so. */
    char skipped[256];
} np_ckpt_stats;

/* Collective: writes checkpoint `s->step` under cfg->checkpoint_dir: every rank its shard
 * of the tables and optimizer state, rank 0 the dense parameters, then (rank 0) the
 * manifest with every file's size and checksum, fsync'd and renamed into place last, so
 * the checkpoint is whole or absent. Then keeps only the newest cfg->keep_checkpoints.
 * Waits for the trainer's pending updates of the model (the pipeline's later read-only
 * stages keep running meanwhile). A failure on any rank fails it on every rank; err on the
 * others says another rank failed. */
NP_NODISCARD NP_API np_status np_ckpt_save(np_dist_t *d, const np_config *cfg, np_trainer_t *tr,
                                           np_model_t *m, const np_ckpt_state *s,
                                           np_ckpt_stats *stats, np_error *err);

/* This rank: loads the newest whole checkpoint under cfg->resume into m (created from cfg,
 * before a trainer uses it), resharding the tables when the checkpoint was written by
 * another rank count, and fills s. Refuses (NP_STATUS_BAD_INPUT, or NP_STATUS_IO when the
 * folder cannot be read) a checkpoint that is torn, corrupted or written with another
 * arithmetic (model shape, batch, lr, optimizer, seed, chunks, windows, ...), naming the
 * file and what is wrong. */
NP_NODISCARD NP_API np_status np_ckpt_load(const np_config *cfg, np_model_t *m, np_ckpt_state *s,
                                           np_ckpt_stats *stats, np_error *err);

#ifdef __cplusplus
}
#endif
#endif
