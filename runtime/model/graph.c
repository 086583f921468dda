/* Model graphs: nodes of registered layer kinds over the dense features, the pooled
 * embeddings and earlier nodes; the DLRM and DCN-v2 builders; the parameter layout.
 * Not here: running a graph (runtime/model/reference.c, runtime/engine/chunk.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/model/graph.h"

np_status np_graph_create(const np_config *cfg, np_graph_t **out, np_error *err) {
    *out = NULL;
    np_graph_t *g = np_zalloc(1, sizeof *g, "model graph", err);
    if (!g) return NP_STATUS_NO_MEMORY;
    g->dense_w = np_config_dense(cfg);
    g->pooled_w = np_config_slots(cfg) * cfg->dim;
    g->seq_slots = np_config_seq_slots(cfg);
    g->output = -1;
    *out = g;
    return NP_OK;
}

void np_graph_free(np_graph_t *g) {
    free(g);
}

int np_graph_nodes(const np_graph_t *g) {
    return g->n;
}

int np_graph_width(const np_graph_t *g, int node) {
    if (node == NP_IN_DENSE) return g->dense_w;
    if (node == NP_IN_POOLED) return g->pooled_w;
    return node >= 0 && node < g->n ? g->node[node].shape.out : 0;
}

static const char *input_name(const np_graph_t *g, int in) {
    return in == NP_IN_DENSE ? "dense features" : in == NP_IN_POOLED ? "pooled embeddings"
                                                                    : g->node[in].name;
}

int np_graph_add(np_graph_t *g, const char *name, const char *kind, const np_layer_hp *hp,
                 int n_in, const int *in, np_error *err) {
    if (!name || !name[0] || strlen(name) >= sizeof g->node[0].name)
        return np_err(err, NP_STATUS_BAD_INPUT, "graph: a node name is 1-31 characters");
    for (int v = 0; v < g->n; v++)
        if (!strcmp(g->node[v].name, name))
            return np_err(err, NP_STATUS_BAD_INPUT, "graph: node name '%s' is taken", name);
    if (g->n == NP_MAX_NODES)
        return np_err(err, NP_STATUS_UNSUPPORTED, "graph: node %s: at most %d nodes", name,
                      NP_MAX_NODES);
    int def = np_layer_index(kind ? kind : "");
    if (def < 0)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "graph: node %s: unknown layer kind '%s' (register it first)", name,
                      kind ? kind : "");
    const np_layer_def *d = np_layer_get(def);
    if (n_in < d->min_in || n_in > d->max_in || (n_in > 0 && !in))
        return np_err(err, NP_STATUS_BAD_INPUT, "graph: node %s: %s takes %d to %d inputs, not %d",
                      name, kind, d->min_in, d->max_in, n_in);
    np_node *v = &g->node[g->n];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->def = def;
    if (hp) v->hp = *hp;
    v->shape.n_in = n_in;
    for (int k = 0; k < n_in; k++) {
        if (in[k] != NP_IN_DENSE && in[k] != NP_IN_POOLED && (in[k] < 0 || in[k] >= g->n))
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "graph: node %s: input %d is %d, not an earlier node or NP_IN_*", name,
                          k, in[k]);
        v->in[k] = in[k];
        v->shape.in[k] = np_graph_width(g, in[k]);
    }
    /* the shape function fills the rest; it may not change what it was given, and a
     * failure it does not explain still gets a message */
    np_layer_shape given = v->shape;
    np_error e = {{0}};
    snprintf(e.msg, sizeof e.msg, "the shape function refused these inputs without a reason");
    np_status st = d->shape(&v->hp, &v->shape, &e);
    if (st) return np_err(err, st < 0 ? st : NP_STATUS_BAD_INPUT, "graph: node %s (%s): %s", name,
                          kind, e.msg);
    if (v->shape.n_in != given.n_in || memcmp(v->shape.in, given.in, sizeof given.in))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "graph: node %s (%s): the shape function changed its input widths", name,
                      kind);
    if (v->shape.out < 1 || v->shape.saved < 0 || v->shape.scratch < 0 ||
        v->shape.n_params < 0 || v->shape.n_params > NP_LAYER_MAX_PARAMS)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "graph: node %s (%s): the shape function gave out %d, saved %d, scratch "
                      "%d, %d tensors",
                      name, kind, v->shape.out, v->shape.saved, v->shape.scratch,
                      v->shape.n_params);
    for (int p = 0; p < v->shape.n_params; p++) {
        const np_param_shape *ps = &v->shape.param[p];
        if ((ps->ndim != 1 && ps->ndim != 2) || ps->dims[0] < 1 ||
            (ps->ndim == 2 && ps->dims[1] < 1) || !ps->name[0] || ps->fan_in < 0 ||
            ps->fan_out < 1)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "graph: node %s (%s): parameter %d has a bad shape, fans or no name",
                          name, kind, p);
    }
    /* the edges into producers, in (consumer, slot) order since nodes only ever append;
     * room for all of them is checked first, so a refused node leaves no edge behind */
    for (int k = 0; k < n_in; k++) {
        if (in[k] == NP_IN_DENSE) continue; /* the data needs no gradient */
        int need = 0;
        for (int j = 0; j < n_in; j++)
            need += in[j] == in[k];
        int have = in[k] == NP_IN_POOLED ? g->n_pooled_out : g->node[in[k]].n_out;
        if (have + need > NP_GRAPH_MAX_EDGES)
            return np_err(err, NP_STATUS_UNSUPPORTED, "graph: node %s: %s feeds too many inputs",
                          name, input_name(g, in[k]));
    }
    for (int k = 0; k < n_in; k++) {
        if (in[k] == NP_IN_DENSE) continue;
        int *n = in[k] == NP_IN_POOLED ? &g->n_pooled_out : &g->node[in[k]].n_out;
        np_edge *ed = in[k] == NP_IN_POOLED ? g->pooled_out : g->node[in[k]].out;
        ed[(*n)++] = (np_edge){g->n, k};
    }
    return g->n++;
}

int np_graph_mlp(np_graph_t *g, const char *prefix, int in, const int *sizes, int n, int relu_last,
                 np_error *err) {
    int x = in;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s.%d", prefix, i);
        np_layer_hp hp = {.i = {sizes[i], i < n - 1 || relu_last}};
        x = np_graph_add(g, name, "linear", &hp, 1, &x, err);
        if (x < 0) return x;
    }
    return x;
}

np_status np_graph_set_output(np_graph_t *g, int node, np_error *err) {
    if (node < 0 || node >= g->n)
        return np_err(err, NP_STATUS_BAD_INPUT, "graph: output %d is not a node", node);
    if (g->node[node].shape.out != 1)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "graph: output node %s has width %d; the loss wants one logit (width 1)",
                      g->node[node].name, g->node[node].shape.out);
    g->output = node;
    return NP_OK;
}

const np_edge *np_graph_grad_edges(const np_graph_t *g, int producer, int *n) {
    if (producer == NP_IN_POOLED) {
        *n = g->n_pooled_out;
        return g->pooled_out;
    }
    *n = g->node[producer].n_out;
    return g->node[producer].out;
}

np_grad_route np_graph_grad_route(const np_graph_t *g, int v, int k) {
    int p = g->node[v].in[k], n;
    if (p == NP_IN_DENSE) return NP_GRAD_NONE;
    np_graph_grad_edges(g, p, &n);
    return n > 1 ? NP_GRAD_EDGE : NP_GRAD_PRODUCER;
}

np_status np_graph_finalize(np_graph_t *g, np_error *err) {
    if (g->output < 0) return np_err(err, NP_STATUS_BAD_INPUT, "graph: no output node set");
    for (int v = 0; v < g->n; v++)
        if (v != g->output && g->node[v].n_out == 0)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "graph: node %s feeds nothing and is not the output", g->node[v].name);
    if (g->node[g->output].n_out)
        return np_err(err, NP_STATUS_BAD_INPUT, "graph: the output node %s feeds other nodes",
                      g->node[g->output].name);
    if (!g->n_pooled_out)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "graph: no node reads the pooled embeddings (NP_IN_POOLED)");
    size_t off = 0;
    int k = 0;
    for (int v = 0; v < g->n; v++) {
        np_node *x = &g->node[v];
        x->p0 = off;
        for (int p = 0; p < x->shape.n_params; p++, k++) {
            x->poff[p] = off;
            off += np_param_count(&x->shape.param[p]);
        }
        x->pn = off - x->p0;
    }
    g->n_params = off;
    g->n_tensors = k;
    return NP_OK;
}
