/* The public face of graph/ (include/nestpipe/dist.h, trace.h): the logical model gathered
 * on rank 0, for a driver that sees only the public headers. np_trainer_trace is
 * graph/trainer.c's own, declared in both engine.h and nestpipe/trace.h: including both
 * here makes the compiler check that the two declarations agree. */
#include "nestpipe/dist.h"
#include "nestpipe/trace.h"

#include "graph/engine.h"
#include "graph/gather.h"

np_status np_dist_gather_model(np_dist_t *d, const np_model_t *m, np_model_t **full,
                               np_error *err) {
    return np_model_gather(m, d, full, err);
}
