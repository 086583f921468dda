/* The public face of runtime/engine/: where a rank's workers and driver run
 * (np_placement_explain, nestpipe.h). */
#include "nestpipe/nestpipe.h"

#include "runtime/engine/placement.h"

np_status np_placement_explain(const np_config *cfg, int bind_driver, char *line, size_t n,
                               np_error *err) {
    np_placement p;
    np_status st = np_placement_plan(cfg, &p, err);
    if (st) return st;
    if (bind_driver) np_placement_bind_thread(&p);
    if (line && n) np_placement_describe(&p, cfg, line, n);
    return NP_OK;
}
