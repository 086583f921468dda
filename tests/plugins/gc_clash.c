/* A test plugin that registers a kind named "linear", which the built-in kind holds:
 * loading it must fail, naming the plugin (tests/test_check_layer.sh). */
#include "nestpipe/layer.h"

static np_status id_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp;
    (void)err;
    s->out = s->in[0];
    return NP_OK;
}

static void nop(const np_layer_io *io) {
    (void)io;
}

static const np_layer_def clash = {
    .kind = "linear", .min_in = 1, .max_in = 1, .shape = id_shape, .fwd = nop, .bwd = nop};

static np_status register_kinds(np_error *err) {
    return np_layer_register(&clash, err);
}
NP_PLUGIN_DEFINE(register_kinds)
