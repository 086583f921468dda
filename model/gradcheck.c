/* The public gradient check of a layer kind (np_layer_gradcheck, nestpipe/layer.h). */
#include "core/util.h"
#include "model/graph.h"

np_status np_layer_gradcheck(const char *kind, const np_layer_hp *hp, int n_in, const int *widths,
                             const np_gradcheck_opts *opts, np_gradcheck_result *out,
                             np_error *err) {
    (void)hp;
    (void)n_in;
    (void)widths;
    (void)opts;
    (void)out;
    return np_err(err, NP_STATUS_UNSUPPORTED, "check-layer %s: not yet", kind);
}
