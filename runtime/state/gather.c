/* Gathers the sharded tables onto rank 0 in the single-process layout (row k of table t at
 * row k), so --dump-params writes the same file however many ranks trained the model. */
#include <stdlib.h>
#include <string.h>

#include "runtime/core/shard.h"
#include "runtime/core/util.h"
#include "runtime/state/gather.h"
#include "runtime/model/model.h"

np_status np_model_gather(const np_model_t *m, np_comm *c, np_model_t **full, np_error *err) {
    *full = NULL;
    const np_config *cfg = &m->cfg;
    int R = np_comm_size(c), me = np_comm_rank(c);
    np_config one = *cfg;
    one.rank = 0;
    one.ranks = 1;
    one.init_params[0] = 0; /* the copy takes m's values, not the dump's */
    np_model_t *f = NULL;
    np_status st = NP_OK;
    if (me == 0) {
        st = np_model_create_graph(&one, m->graph, &f, err);
        if (!st) memcpy(f->dense, m->dense, m->n_dense * sizeof(float));
    }
    /* rank 0 needs room for the largest table; all ranks agree before the first gather */
    size_t d = (size_t)m->d;
    int64_t max_rows = 0;
    for (int t = 0; t < m->T; t++)
        if (m->rows[t] > max_rows) max_rows = m->rows[t];
    int64_t *counts = calloc((size_t)R, sizeof *counts);
    float *buf = me == 0 ? malloc(((size_t)max_rows * d + 1) * sizeof *buf) : NULL;
    int64_t bad = st != NP_OK || !counts || (me == 0 && !buf);
    if (np_comm_allreduce_i64(c, NP_CHAN_CTL, &bad, 1)) bad = 1;
    for (int t = 0; t < m->T && !bad; t++) {
        for (int r = 0; r < R; r++)
            counts[r] = np_shard_rows(cfg, t, r, m->rows[t]) * (int64_t)d;
        if (np_comm_gatherv(c, NP_CHAN_CTL, m->table[t], m->local_rows[t] * (int64_t)d, buf, counts,
                            sizeof(float))) {
            bad = 1; /* an MPI error: the caller aborts the job */
            break;
        }
        if (me == 0) {
            const float *src = buf;
            for (int r = 0; r < R; r++) {
                int64_t n = np_shard_rows(cfg, t, r, m->rows[t]);
                for (int64_t j = 0; j < n; j++, src += d)
                    memcpy(f->table[t] + (size_t)np_shard_global(cfg, t, r, j) * d, src,
                           d * sizeof(float));
            }
        }
    }
    free(buf);
    free(counts);
    if (bad) {
        np_model_free(f);
        if (st) return st;
        return np_err(err, NP_STATUS_NO_MEMORY, "rank %d: gathering the model failed", me);
    }
    *full = f;
    return NP_OK;
}
