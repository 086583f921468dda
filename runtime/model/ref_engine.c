/* The reference trainer as an engine (runtime/model/engine_ops.h): the oracle of
 * reference.c behind the trainer's interface. A step trains when waited for. */
#include <stdlib.h>

#include "runtime/core/util.h"
#include "runtime/model/engine_ops.h"
#include "runtime/model/model.h"

typedef struct ref_impl {
    np_reference *ref;
    const np_batch *held; /* the batch submitted, trained at wait */
} ref_impl;

static np_status ref_create(const np_config *cfg, np_model_t *m, void **impl, np_error *err) {
    ref_impl *r = np_zalloc(1, sizeof *r, "trainer", err);
    if (!r) return NP_STATUS_NO_MEMORY;
    np_status st = np_reference_create(cfg, m, &r->ref, err);
    if (st) {
        free(r);
        return st;
    }
    *impl = r;
    return NP_OK;
}
static np_status ref_submit(void *impl, const np_batch *const *b, int n, np_error *err) {
    (void)n;
    (void)err;
    ((ref_impl *)impl)->held = b[0];
    return NP_OK;
}
static np_status ref_wait(void *impl, double *loss, np_error *err) {
    ref_impl *r = impl;
    if (!r->held) return np_err(err, NP_STATUS_INTERNAL, "wait without a submitted step");
    const np_batch *b = r->held;
    r->held = NULL;
    return np_reference_step(r->ref, b, loss, err);
}
static void ref_free(void *impl) {
    ref_impl *r = impl;
    if (!r) return;
    np_reference_free(r->ref);
    free(r);
}

const np_engine_ops np_reference_engine_ops = {
    .name = "reference",
    .create = ref_create,
    .submit = ref_submit,
    .wait = ref_wait,
    .free = ref_free,
};

