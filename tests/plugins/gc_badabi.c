/* A test plugin built for another layer API than this nestpipe's: its np_plugin_abi is
 * written by hand instead of by NP_PLUGIN_DEFINE, so loading it must fail, naming the
 * plugin and both numbers, before its entry point runs (tests/test_check_layer.sh). */
#include <stdio.h>

#include "nestpipe/layer.h"

NP_PLUGIN_EXPORT extern const int np_plugin_abi;
NP_PLUGIN_EXPORT const int np_plugin_abi = NP_PLUGIN_ABI + 1000;

NP_PLUGIN_EXPORT np_status np_plugin_init(np_error *err);
NP_PLUGIN_EXPORT np_status np_plugin_init(np_error *err) {
    (void)err;
    fprintf(stderr, "gc_badabi: the entry point ran although the ABI differs\n");
    return NP_STATUS_INTERNAL;
}
