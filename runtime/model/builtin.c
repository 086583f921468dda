/* The built-in models, DLRM and DCN-v2, as builders over the layer graph with their own
 * shape rules; and np_graph_from_config, which picks a model file (runtime/model/modelfile.c) or a
 * builder, after loading the config's plugins (runtime/model/plugin.c).
 * Not here: the graph itself (runtime/model/graph.c). */
#include <stdio.h>

#include "runtime/core/util.h"
#include "runtime/model/graph.h"

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if ((x) < 0) goto fail;                                                                    \
    } while (0)

/* DLRM: bottom MLP (ReLU everywhere), the dot interaction of its output with the pooled
 * embeddings, top MLP (ReLU but the last). Names and order keep the NPPARAMS names. */
static np_status build_dlrm(const np_config *cfg, np_graph_t *g, np_error *err) {
    int bot, z, top;
    TRY(bot = np_graph_mlp(g, "bottom", NP_IN_DENSE, cfg->bottom + 1, cfg->n_bottom - 1, 1, err));
    int in[2] = {bot, NP_IN_POOLED};
    TRY(z = np_graph_add(g, "interaction", "dot", NULL, 2, in, err));
    TRY(top = np_graph_mlp(g, "top", z, cfg->top, cfg->n_top, 0, err));
    return np_graph_set_output(g, top, err);
fail:
    return NP_STATUS_BAD_INPUT;
}

/* DCN-v2 (Wang et al. 2020), parallel form: x0 = [bottom output || pooled embeddings];
 * cross layers x_{l+1} = x0 * (W_l x_l + b_l) + x_l beside a deep MLP on x0; their
 * outputs concatenated feed the top MLP. */
static np_status build_dcnv2(const np_config *cfg, np_graph_t *g, np_error *err) {
    int bot, x0, x, deep, stack, top;
    TRY(bot = np_graph_mlp(g, "bottom", NP_IN_DENSE, cfg->bottom + 1, cfg->n_bottom - 1, 1, err));
    int in[2] = {bot, NP_IN_POOLED};
    TRY(x0 = np_graph_add(g, "x0", "concat", NULL, 2, in, err));
    x = x0;
    for (int l = 0; l < cfg->cross_layers; l++) {
        char name[32];
        snprintf(name, sizeof name, "cross.%d", l);
        np_layer_hp hp = {.i = {cfg->cross_rank}};
        int cin[2] = {x0, x};
        TRY(x = np_graph_add(g, name, "cross", &hp, 2, cin, err));
    }
    TRY(deep = np_graph_mlp(g, "deep", x0, cfg->deep, cfg->n_deep, 1, err));
    int sin[2] = {x, deep};
    TRY(stack = np_graph_add(g, "stack", "concat", NULL, 2, sin, err));
    TRY(top = np_graph_mlp(g, "top", stack, cfg->top, cfg->n_top, 0, err));
    return np_graph_set_output(g, top, err);
fail:
    return NP_STATUS_BAD_INPUT;
}

/* HSTU (Zhai et al. 2024) as a generative recommender: table 0's slots hold K negatives
 * then the history of L items (seq-negatives, seq-len); hstu-blocks HSTU blocks over the
 * history, then next-item prediction at every position against the negatives (nextitem,
 * the loss itself: loss = output). */
static np_status build_hstu(const np_config *cfg, np_graph_t *g, np_error *err) {
    int d = cfg->dim, K = cfg->seq_negatives, L = cfg->seq_len, hist, neg, x, loss;
    np_layer_hp hs = {.i = {K * d, (K + L) * d}}, ns = {.i = {0, K * d}};
    TRY(hist = np_graph_add(g, "history", "slice", &hs, 1, (int[]){NP_IN_POOLED}, err));
    TRY(neg = np_graph_add(g, "negatives", "slice", &ns, 1, (int[]){NP_IN_POOLED}, err));
    x = hist;
    for (int b = 0; b < cfg->hstu_blocks; b++) {
        char name[32];
        snprintf(name, sizeof name, "hstu.%d", b);
        np_layer_hp hp = {.i = {L, cfg->hstu_heads, 32}};
        TRY(x = np_graph_add(g, name, "hstu", &hp, 1, &x, err));
    }
    np_layer_hp lp = {.i = {L}};
    TRY(loss = np_graph_add(g, "nextitem", "nextitem", &lp, 3, (int[]){x, hist, neg}, err));
    return np_graph_set_output(g, loss, err);
fail:
    return NP_STATUS_BAD_INPUT;
}

#undef TRY

/* HSTU's rules: a sequence with negatives, one table, heads that split dim, its loss. */
static np_status check_hstu(const np_config *c, np_error *err) {
    if (c->seq_len < 2 || c->seq_negatives < 1)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "model hstu needs a sequence (--seq-len L >= 2) and negatives "
                      "(--seq-negatives K >= 1); got seq-len %d, seq-negatives %d",
                      c->seq_len, c->seq_negatives);
    if (c->tables != 1)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "model hstu reads table 0's sequence only: use --tables 1 (got %d)",
                      c->tables);
    if (c->dim % c->hstu_heads)
        return np_err(err, NP_STATUS_BAD_INPUT, "hstu-heads: %d heads do not split dim %d",
                      c->hstu_heads, c->dim);
    if (np_config_loss(c) != NP_LOSS_OUTPUT)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "loss: model hstu is trained on its own loss (nextitem): use --loss "
                      "output or auto");
    return NP_OK;
}

/* The built-in models' own rules: the shapes their builders assume. */
static np_status check_builtin(const np_config *c, np_error *err) {
    if (c->model == NP_MODEL_HSTU) return check_hstu(c, err);
    int last_bottom = c->bottom[c->n_bottom - 1];
    if (last_bottom != c->dim)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "bottom: last size %d must equal dim %d (the bottom output meets the "
                      "embeddings in the interaction)",
                      last_bottom, c->dim);
    if (c->top[c->n_top - 1] != 1)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "top: last size is %d, must be 1 (one logit per sample)",
                      c->top[c->n_top - 1]);
    if (c->dense_features > 0 && c->dense_features != c->bottom[0])
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "dense-features: %d, but the %s model's bottom MLP takes %d (its first "
                      "bottom size); set one of them",
                      c->dense_features, c->model == NP_MODEL_DCNV2 ? "dcnv2" : "dlrm",
                      c->bottom[0]);
    if (np_config_top_input(c) > 1 << 20)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "tables %d with dim %d make an interaction of %d features; too large",
                      c->tables, c->dim, np_config_top_input(c));
    if (c->model == NP_MODEL_DCNV2 && c->cross_rank >= (np_config_slots(c) + 1) * c->dim)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "cross-rank: rank %d is not below the cross width (slots + 1) x dim = %d; "
                      "use 0 for a full-rank W",
                      c->cross_rank, (np_config_slots(c) + 1) * c->dim);
    return NP_OK;
}

np_status np_graph_from_config(const np_config *cfg, np_graph_t **out, np_error *err) {
    *out = NULL;
    np_status st = np_plugins_load_list(cfg->plugin, err);
    if (st) return st;
    if (cfg->model_file[0]) return np_graph_from_file(cfg, cfg->model_file, out, err);
    if ((st = check_builtin(cfg, err))) return st;
    np_graph_t *g;
    st = np_graph_create(cfg, &g, err);
    if (st) return st;
    st = cfg->model == NP_MODEL_DCNV2  ? build_dcnv2(cfg, g, err)
         : cfg->model == NP_MODEL_HSTU ? build_hstu(cfg, g, err)
                                       : build_dlrm(cfg, g, err);
    if (st) {
        np_graph_free(g);
        return st;
    }
    *out = g;
    return NP_OK;
}
