/* The parameter shapes a layer kind's shape function declares (include/nestpipe/layer.h):
 * here, below the built-in kinds that call them, not in runtime/model/ above. */
#include <stdio.h>

#include "nestpipe/layer.h"

np_param_shape np_param_matrix(const char *name, int64_t rows, int64_t cols) {
    np_param_shape p = {.ndim = 2, .dims = {rows, cols}, .fan_in = (int)cols, .fan_out = (int)rows};
    snprintf(p.name, sizeof p.name, "%s", name);
    return p;
}

np_param_shape np_param_vector(const char *name, int64_t n) {
    np_param_shape p = {.ndim = 1, .dims = {n, 1}, .fan_in = 0, .fan_out = (int)n};
    snprintf(p.name, sizeof p.name, "%s", name);
    return p;
}
