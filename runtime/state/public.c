/* The public face of runtime/state/ (include/nestpipe/dist.h): the logical model gathered on rank
 * 0, for a driver that sees only the public headers. */
#include "nestpipe/dist.h"

#include "runtime/state/gather.h"

np_status np_dist_gather_model(np_dist_t *d, const np_model_t *m, np_model_t **full,
                               np_error *err) {
    return np_model_gather(m, d, full, err);
}
