/* The buffers of one chunk of a batch, from the layers' shape functions: pooled embeddings,
 * each node's activations, gradients, saved values, scratch and dense gradients, and the
 * edge gradients of a producer feeding several consumers.
 * Not here: the chunk's tasks (graph/step.c, submit.c) or the arithmetic (codelets/). */
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/engine/engine_impl.h"

np_status np_chunk_register(np_sp_engine *e, np_chunk *k, np_error *err) {
    const np_graph_t *g = e->m->graph;
    size_t n = (size_t)k->n, f = sizeof(float);
    np_status st = np_buf_reg(&k->P, n * (size_t)g->pooled_w, f, "pooled embeddings", err);
    if (!st) st = np_buf_reg(&k->dP, n * (size_t)g->pooled_w, f, "pooled grads", err);
    if (!st) st = np_buf_reg(&k->loss, 1, sizeof(double), "chunk loss", err);
    for (int v = 0; v < g->n && !st; v++) {
        const np_node *x = &g->node[v];
        const np_layer_shape *s = &x->shape;
        st = np_buf_reg(&k->act[v], n * (size_t)s->out, f, "activations", err);
        if (!st) st = np_buf_reg(&k->dact[v], n * (size_t)s->out, f, "activation grads", err);
        if (!st && s->saved)
            st = np_buf_reg(&k->saved[v], n * (size_t)s->saved, f, "saved activations", err);
        if (!st && x->pn) st = np_buf_reg(&k->gd[v], x->pn, f, "chunk dense grads", err);
        if (!st && s->scratch) { /* no home memory: StarPU provides it per task */
            if (n * (size_t)s->scratch > UINT32_MAX)
                st = np_err(err, NP_STATUS_UNSUPPORTED,
                            "layer %s: %zu scratch floats for a chunk exceed a StarPU vector; "
                            "use more chunks",
                            x->name, n * (size_t)s->scratch);
            else
                starpu_vector_data_register(&k->scratch[v], -1, 0,
                                            (uint32_t)(n * (size_t)s->scratch), f);
        }
        for (int i = 0; i < s->n_in && !st; i++)
            if (np_graph_grad_route(g, v, i) == NP_GRAD_EDGE)
                st = np_buf_reg(&k->edge[v][i], n * (size_t)s->in[i], f, "edge grads", err);
    }
    return st;
}

void np_chunk_unregister(np_chunk *k) {
    np_buf_unreg(&k->P);
    np_buf_unreg(&k->dP);
    np_buf_unreg(&k->loss);
    for (int v = 0; v < NP_MAX_NODES; v++) {
        np_buf_unreg(&k->act[v]);
        np_buf_unreg(&k->dact[v]);
        np_buf_unreg(&k->saved[v]);
        np_buf_unreg(&k->gd[v]);
        if (k->scratch[v]) starpu_data_unregister_no_coherency(k->scratch[v]);
        k->scratch[v] = NULL;
        for (int i = 0; i < NP_LAYER_MAX_IN; i++)
            np_buf_unreg(&k->edge[v][i]);
    }
}
