/* Engine dispatch: np_trainer_t runs one optimizer step per global batch with the engine
 * the config names. Today only the reference engine; the StarPU engine and its pipeline
 * modes plug in here. */
#include <stdlib.h>

#include "core/util.h"
#include "model/model.h"

struct np_trainer {
    np_engine engine;
    np_reference *ref;
};

np_status np_trainer_create(const np_config *cfg, np_model_t *m, np_trainer_t **out,
                            np_error *err) {
    *out = NULL;
    if (cfg->engine == NP_ENGINE_STARPU)
        return np_err(err, NP_STATUS_UNSUPPORTED,
                      "engine: 'starpu' is not built yet in this version; use --engine reference");
    np_trainer_t *tr = np_zalloc(1, sizeof *tr, "trainer", err);
    if (!tr) return NP_STATUS_NO_MEMORY;
    tr->engine = cfg->engine;
    np_status st = np_reference_create(cfg, m, &tr->ref, err);
    if (st) {
        free(tr);
        return st;
    }
    *out = tr;
    return NP_OK;
}

np_status np_trainer_step(np_trainer_t *tr, const np_batch *batch, double *loss, np_error *err) {
    return np_reference_step(tr->ref, batch, loss, err);
}

void np_trainer_free(np_trainer_t *tr) {
    if (!tr) return;
    np_reference_free(tr->ref);
    free(tr);
}
