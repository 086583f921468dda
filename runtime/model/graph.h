/* Private side of the layer API: the registry by index, and the model graph as both
 * trainers walk it (nodes in topological order, parameter offsets, and for every producer
 * the consumer edges whose gradients it sums, in a fixed order).
 * Not here: the built-in kinds (codelets/layers/) or scheduling (runtime/engine/). */
#ifndef NP_MODEL_GRAPH_H
#define NP_MODEL_GRAPH_H

#include "nestpipe/layer.h"

/* Registry order index of a kind (-1 if unknown), the definition at an index (NULL if
 * out of range), and the number of kinds. */
int np_layer_index(const char *kind);
const np_layer_def *np_layer_get(int index);
int np_layer_count(void);
/* Elements of a parameter tensor. */
size_t np_param_count(const np_param_shape *p);

/* One consumer edge: input slot `slot` of node `node` reads the producer. */
typedef struct np_edge {
    int node, slot;
} np_edge;

typedef struct np_node {
    char name[32];
    int def; /* registry index */
    np_layer_hp hp;
    np_layer_shape shape;
    int in[NP_LAYER_MAX_IN];           /* producer of each input: node id or NP_IN_* */
    size_t poff[NP_LAYER_MAX_PARAMS]; /* each tensor's offset in the dense parameters */
    size_t p0, pn;                    /* the node's parameters: dense[p0 .. p0+pn) */
    int n_out;                        /* consumer edges of its output */
    np_edge out[NP_MAX_NODES * NP_LAYER_MAX_IN / 8];
} np_node;

/* Consumer edges of the pooled embeddings (NP_IN_POOLED). */
#define NP_GRAPH_MAX_EDGES (NP_MAX_NODES * NP_LAYER_MAX_IN / 8)

struct np_graph {
    int dense_w, pooled_w; /* widths of NP_IN_DENSE and NP_IN_POOLED */
    int seq_slots;         /* np_config_seq_slots: table 0's slots when a sequence (np_slot_first) */
    int n;
    np_node node[NP_MAX_NODES]; /* topological by construction: inputs come first */
    int output;                 /* the logit node, -1 until set */
    int n_pooled_out;
    np_edge pooled_out[NP_GRAPH_MAX_EDGES];
    size_t n_params; /* floats of all dense parameters */
    int n_tensors;   /* parameter tensors of all nodes */
};

/* Checks that an output is set and every node leads to it; lays out the parameters
 * (node order, tensor order). Called by np_model_create_graph on its copy. */
np_status np_graph_finalize(np_graph_t *g, np_error *err);

/* The edges feeding a producer's gradient (a node id or NP_IN_POOLED), in the fixed order
 * its gradient is summed: consumer node ascending, then slot. */
const np_edge *np_graph_grad_edges(const np_graph_t *g, int producer, int *n);

/* Where the gradient of input k of node v goes, the one rule both trainers follow. */
typedef enum np_grad_route {
    NP_GRAD_NONE,     /* the input is the data: no gradient */
    NP_GRAD_PRODUCER, /* the producer's only edge: written into the producer's gradient */
    NP_GRAD_EDGE,     /* one of several edges: its own buffer, summed by np_graph_grad_edges */
} np_grad_route;
np_grad_route np_graph_grad_route(const np_graph_t *g, int v, int k);

/* Loads the plugins of a "plugin" key value (paths joined by ','), each once
 * (runtime/model/plugin.c). */
NP_NODISCARD np_status np_plugins_load_list(const char *list, np_error *err);

/* Which node kind the node is, by definition. */
static inline const np_layer_def *np_node_def(const np_node *v) {
    return np_layer_get(v->def);
}

#endif
