/* The public face of graph/ (include/nestpipe/dist.h, trace.h): the logical model gathered
 * on rank 0, for a driver that sees only the public headers. np_trainer_trace is
 * graph/trainer.c's own, declared in both engine.h and nestpipe/trace.h: including both
 * here makes the compiler check that the two declarations agree. */
#include "nestpipe/dist.h"
#include "nestpipe/trace.h"

#include "graph/engine.h"
#include "graph/gather.h"
#include "graph/placement.h"

np_status np_placement_explain(const np_config *cfg, int bind_driver, char *line, size_t n,
                               np_error *err) {
    np_placement p;
    np_status st = np_placement_plan(cfg, &p, err);
    if (st) return st;
    if (bind_driver) np_placement_bind_thread(&p);
    if (line && n) np_placement_describe(&p, cfg, line, n);
    return NP_OK;
}

np_status np_dist_gather_model(np_dist_t *d, const np_model_t *m, np_model_t **full,
                               np_error *err) {
    return np_model_gather(m, d, full, err);
}
