/* The gate as a plugin: libgate.so, built from this file and gate.c, registers the kind
 * when nestpipe loads it (`nestpipe train --plugin ./libgate.so`, `check-layer --plugin`),
 * so a model file can use `kind = gate` without rebuilding nestpipe. NP_PLUGIN_DEFINE
 * (nestpipe/layer.h) makes the one entry point nestpipe looks for, and records the layer
 * API the plugin was built for, which nestpipe checks. */
#include "gate.h"

static np_status register_kinds(np_error *err) {
    return np_layer_register(&gate_layer, err);
}

NP_PLUGIN_DEFINE(register_kinds)
