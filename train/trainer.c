/* Engine dispatch: np_trainer_t runs one optimizer step per global batch with the engine
 * the config names: the reference trainer (model/) or the StarPU engine (engine/engine.c). */
#include <stdlib.h>

#include "core/util.h"
#include "engine/engine.h"
#include "model/model.h"

struct np_trainer {
    np_reference *ref;    /* NP_ENGINE_REFERENCE */
    np_sp_engine *sp;     /* NP_ENGINE_STARPU */
    const np_batch *held; /* reference: the batch submitted, trained at wait */
};

np_status np_trainer_create(const np_config *cfg, np_model_t *m, np_trainer_t **out,
                            np_error *err) {
    *out = NULL;
    np_trainer_t *tr = np_zalloc(1, sizeof *tr, "trainer", err);
    if (!tr) return NP_STATUS_NO_MEMORY;
    np_status st = cfg->engine == NP_ENGINE_STARPU ? np_engine_create(cfg, m, &tr->sp, err)
                                                   : np_reference_create(cfg, m, &tr->ref, err);
    if (st) {
        free(tr);
        return st;
    }
    *out = tr;
    return NP_OK;
}

np_status np_trainer_step(np_trainer_t *tr, const np_batch *batch, double *loss, np_error *err) {
    return np_trainer_step_ahead(tr, &batch, 1, loss, err);
}

np_status np_trainer_step_ahead(np_trainer_t *tr, const np_batch *const *batches, int n,
                                double *loss, np_error *err) {
    return tr->sp ? np_engine_step(tr->sp, batches, n, loss, err)
                  : np_reference_step(tr->ref, batches[0], loss, err);
}

np_status np_trainer_submit(np_trainer_t *tr, const np_batch *const *batches, int n,
                            np_error *err) {
    if (tr->sp) return np_engine_submit(tr->sp, batches, n, err);
    tr->held = batches[0]; /* the reference trains when waited for */
    return NP_OK;
}

np_status np_trainer_wait(np_trainer_t *tr, double *loss, np_error *err) {
    if (tr->sp) return np_engine_wait(tr->sp, loss, err);
    if (!tr->held) return np_err(err, NP_STATUS_INTERNAL, "wait without a submitted step");
    const np_batch *b = tr->held;
    tr->held = NULL;
    return np_reference_step(tr->ref, b, loss, err);
}

int np_trainer_lookahead(const np_trainer_t *tr) {
    return tr->sp ? np_engine_lookahead(tr->sp) : 0;
}

uint64_t np_trainer_synced_rows(const np_trainer_t *tr) {
    return tr->sp ? np_engine_synced_rows(tr->sp) : 0;
}

np_status np_trainer_finish(np_trainer_t *tr, np_error *err) {
    return tr->sp ? np_engine_finish(tr->sp, err) : NP_OK;
}

void np_trainer_bytes(const np_trainer_t *tr, uint64_t out[4]) {
    if (tr->sp)
        np_engine_bytes(tr->sp, out);
    else
        out[0] = out[1] = out[2] = out[3] = 0;
}

double np_trainer_clock_us(const np_trainer_t *tr) {
    return tr && tr->sp ? np_engine_clock_us(tr->sp) : 0;
}

void np_trainer_trace_data(np_trainer_t *tr, long batch, double start_us, double end_us) {
    if (tr && tr->sp) np_engine_trace_data(tr->sp, batch, start_us, end_us);
}

const np_trace *np_trainer_trace(const np_trainer_t *tr) {
    return tr->sp ? np_engine_trace(tr->sp) : NULL;
}

void np_trainer_hold(np_trainer_t *tr) {
    if (tr && tr->sp) np_engine_hold(tr->sp);
}

void np_trainer_release(np_trainer_t *tr) {
    if (tr && tr->sp) np_engine_release(tr->sp);
}

void np_trainer_free(np_trainer_t *tr) {
    if (!tr) return;
    np_reference_free(tr->ref);
    np_engine_free(tr->sp);
    free(tr);
}
