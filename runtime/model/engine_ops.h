/* The interface an engine fills for the trainer (runtime/train/trainer.c), one table of
 * functions over the engine's own state, as a ggml backend fills its interface: the
 * reference trainer's table is in ref_engine.c, the StarPU engine's in runtime/engine/ops.c.
 * It sits here, beside the lower of the two, so that both can fill it and the trainer,
 * above both, picks one by the config's "engine" without holding any of their functions. */
#ifndef NP_MODEL_ENGINE_OPS_H
#define NP_MODEL_ENGINE_OPS_H

#include <stdint.h>

#include "nestpipe/nestpipe.h"
#include "nestpipe/trace.h"

/* What an engine does for the trainer. NULL entries have the defaults noted. */
typedef struct np_engine_ops {
    const char *name;
    np_status (*create)(const np_config *cfg, np_model_t *m, void **impl, np_error *err);
    np_status (*submit)(void *impl, const np_batch *const *b, int n, np_error *err);
    np_status (*wait)(void *impl, double *loss, np_error *err);
    int (*lookahead)(const void *impl);                            /* NULL: 0 */
    np_pipeline (*pipeline)(const void *impl);                     /* NULL: sequential */
    np_status (*drop_lookahead)(void *impl, int n, np_error *err); /* NULL: none to drop */
    uint64_t (*synced_rows)(const void *impl);                     /* NULL: 0 */
    void (*segments)(const void *impl, uint64_t *segs, uint64_t *pooled); /* NULL: 0, 0 */
    np_status (*finish)(void *impl, np_error *err);                /* NULL: nothing pending */
    void (*bytes)(const void *impl, uint64_t out[4]);              /* NULL: zeros */
    uint64_t (*buffer_bytes)(const void *impl);                    /* NULL: 0 */
    double (*clock_us)(const void *impl);                          /* NULL: 0 */
    void (*trace_data)(void *impl, long batch, double s_us, double e_us); /* NULL: none */
    const np_trace_t *(*trace)(const void *impl);                  /* NULL: untraced */
    void (*hold)(void *impl);                                      /* NULL: no-op */
    void (*release)(void *impl);                                   /* NULL: no-op */
    void (*free)(void *impl);
} np_engine_ops;

/* The reference trainer (ref_engine.c): a step trains when waited for. */
extern const np_engine_ops np_reference_engine_ops;

#endif
