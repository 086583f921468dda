/* The gate layer of examples/custom_layer (gate.c): y = x * sigmoid(x W^T + b). */
#ifndef CUSTOM_LAYER_GATE_H
#define CUSTOM_LAYER_GATE_H

#include <nestpipe/layer.h>

/* Kind "gate": one input of width D, output width D, parameters weight (D, D) and bias
 * (D). Register it with np_layer_register(&gate_layer, &err) before building a model. */
extern const np_layer_def gate_layer;

#endif
