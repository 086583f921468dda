/* The "concat" layer: out = [in0 || in1 || ...] per sample; backward splits dout.
 * Used by DCN-v2 (x0, and the cross and deep outputs side by side). */
#include <limits.h>
#include <string.h>

#include "runtime/core/util.h"

#include "codelets/layers/layers.h"

static np_status concat_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp;
    int64_t out = 0;
    for (int k = 0; k < s->n_in; k++)
        out += s->in[k];
    if (out > INT_MAX)
        return np_err(err, NP_STATUS_BAD_INPUT, "%lld floats per sample; too many",
                      (long long)out);
    s->out = (int)out;
    return NP_OK;
}

static void concat_fwd(const np_layer_io *io) {
    const np_layer_shape *s = io->shape;
    for (long r = 0; r < io->n; r++) {
        float *o = io->out + (size_t)r * (size_t)s->out;
        for (int k = 0; k < s->n_in; k++) {
            memcpy(o, io->in[k] + (size_t)r * (size_t)s->in[k], (size_t)s->in[k] * sizeof *o);
            o += s->in[k];
        }
    }
}

static void concat_bwd(const np_layer_io *io) {
    const np_layer_shape *s = io->shape;
    for (long r = 0; r < io->n; r++) {
        const float *g = io->dout + (size_t)r * (size_t)s->out;
        for (int k = 0; k < s->n_in; k++) {
            if (io->din[k])
                memcpy(io->din[k] + (size_t)r * (size_t)s->in[k], g, (size_t)s->in[k] * sizeof *g);
            g += s->in[k];
        }
    }
}

const np_layer_def np_layer_concat = {.kind = "concat",
                                      .min_in = 1,
                                      .max_in = NP_LAYER_MAX_IN,
                                      .shape = concat_shape,
                                      .fwd = concat_fwd,
                                      .bwd = concat_bwd,
                                      .help = "[in0 || in1 || ...] per sample; backward splits dout",
#ifdef NP_HAVE_CUDA
                                      .cuda_fwd = np_cuda_concat_fwd,
                                      .cuda_bwd = np_cuda_concat_bwd,
#endif
                                      };
