/* The "slice" layer: out = columns [from, to) of its one input per sample; backward
 * scatters dout into those columns and zeroes the rest of din. Model files make one over
 * the pooled embeddings for each `pooled:A-B` (tables A..B) they name. No parameters. */
#include <string.h>

#include "runtime/core/util.h"

#include "codelets/layers/layers.h"

/* The column range of hp over an input of width w: to = 0 means w. */
static int slice_to(const np_layer_hp *hp, int w) {
    return hp->i[1] ? hp->i[1] : w;
}

static np_status slice_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    int w = s->in[0], from = hp->i[0], to = slice_to(hp, w);
    if (from < 0 || from >= w)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "from = %d: the first column must lie in [0, %d) (the input's width is %d)",
                      from, w, w);
    if (to <= from || to > w)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "to = %d: the end column must lie in (from = %d, %d], or be 0 for the "
                      "input's width %d",
                      hp->i[1], from, w, w);
    s->out = to - from;
    return NP_OK;
}

static void slice_fwd(const np_layer_io *io) {
    const np_layer_shape *s = io->shape;
    size_t w = (size_t)s->in[0], out = (size_t)s->out, from = (size_t)io->hp->i[0];
    for (long r = 0; r < io->n; r++)
        memcpy(io->out + (size_t)r * out, io->in[0] + (size_t)r * w + from, out * sizeof(float));
}

/* din is the whole input's gradient: zero outside [from, to), dout inside. */
static void slice_bwd(const np_layer_io *io) {
    if (!io->din[0]) return;
    const np_layer_shape *s = io->shape;
    size_t w = (size_t)s->in[0], out = (size_t)s->out, from = (size_t)io->hp->i[0];
    for (long r = 0; r < io->n; r++) {
        float *d = io->din[0] + (size_t)r * w;
        memset(d, 0, from * sizeof *d);
        memcpy(d + from, io->dout + (size_t)r * out, out * sizeof *d);
        memset(d + from + out, 0, (w - from - out) * sizeof *d);
    }
}

const np_layer_def np_layer_slice = {.kind = "slice",
                                     .min_in = 1,
                                     .max_in = 1,
                                     .shape = slice_shape,
                                     .fwd = slice_fwd,
                                     .bwd = slice_bwd,
                                     .hp_int = {"from", "to"},
                                     .help = "columns [from, to) of the input per sample (to = "
                                             "0: its width); backward zero elsewhere",
#ifdef NP_HAVE_CUDA
                                     .cuda_fwd = np_cuda_slice_fwd,
                                     .cuda_bwd = np_cuda_slice_bwd,
#endif
                                     };
