/* nestpipe layers and model graphs (public): declare a layer kind as a definition (shape,
 * initialisation, CPU kernels, empty CUDA slots, flop count), register it with one call,
 * and build a model as a graph of nodes of registered kinds. Both trainers walk the graph:
 * the reference calls the CPU kernels on the whole batch, the StarPU engine submits one
 * task per node and chunk. Kernels see only their buffers, never the config or the engine.
 *
 * Usage (a user layer y = x * sigmoid(x W^T + b), see examples/custom_layer/):
 *
 *     static np_status gate_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
 *         s->out = s->in[0];
 *         s->saved = s->in[0];             // sigmoid(x W^T + b), kept for backward
 *         s->n_params = 2;
 *         s->param[0] = np_param_matrix("weight", s->in[0], s->in[0]);
 *         s->param[1] = np_param_vector("bias", s->in[0]);
 *         return NP_OK;
 *     }
 *     static const np_layer_def gate = {.kind = "gate", .min_in = 1, .max_in = 1,
 *         .shape = gate_shape, .fwd = gate_fwd, .bwd = gate_bwd, .flops = gate_flops};
 *     np_layer_register(&gate, &err);
 *
 *     np_graph_t *g;                      // DLRM with the gate after the interaction
 *     np_graph_create(&cfg, &g, &err);
 *     int bot = np_graph_mlp(g, "bottom", NP_IN_DENSE, cfg.bottom + 1, cfg.n_bottom - 1, 1, &err);
 *     int in[2] = {bot, NP_IN_POOLED};
 *     int z = np_graph_add(g, "interaction", "dot", NULL, 2, in, &err);
 *     int gz = np_graph_add(g, "gate", "gate", NULL, 1, &z, &err);
 *     int top = np_graph_mlp(g, "top", gz, cfg.top, cfg.n_top, 0, &err);
 *     np_graph_set_output(g, top, &err);
 *     np_model_create_graph(&cfg, g, &model, &err);   // then np_trainer_create as usual
 */
#ifndef NESTPIPE_LAYER_H
#define NESTPIPE_LAYER_H

#include "nestpipe/nestpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NP_LAYER_MAX_IN 8     /* inputs of one node */
#define NP_LAYER_MAX_PARAMS 4 /* parameter tensors of one node */
#define NP_LAYER_MAX_HP 8     /* integer and float hyper-parameters of one node */
#define NP_MAX_NODES 64       /* nodes of one model graph */
#define NP_MAX_LAYER_KINDS 64 /* registered layer kinds, built-in ones included */

/* Hyper-parameters of one node; each kind documents what its slots mean (linear: i[0] =
 * output width, i[1] = 1 for a ReLU after it). Unused slots are 0. */
typedef struct np_layer_hp {
    int i[NP_LAYER_MAX_HP];
    double f[NP_LAYER_MAX_HP];
} np_layer_hp;

/* One parameter tensor of a node: its name inside the node (the dump calls it
 * "<node>.<name>"), its row-major shape, and fans for the default initialisation. */
typedef struct np_param_shape {
    char name[16];
    int ndim;        /* 1 or 2 */
    int64_t dims[2]; /* (dims[0]) or (dims[0], dims[1]) */
    int fan_in;      /* 0: a bias-like tensor (default init N(0, sqrt(1/fan_out))) */
    int fan_out;     /* default init of a matrix: N(0, sqrt(2/(fan_in+fan_out))) */
} np_param_shape;

/* (rows, cols) weight with fan_in = cols, fan_out = rows; a (n) bias. */
NP_API np_param_shape np_param_matrix(const char *name, int64_t rows, int64_t cols);
NP_API np_param_shape np_param_vector(const char *name, int64_t n);

/* What a shape function sees and fills. Widths are floats per sample. */
typedef struct np_layer_shape {
    int n_in;                /* given: inputs */
    int in[NP_LAYER_MAX_IN]; /* given: width of each input */
    int out;                 /* set: output width (>= 1) */
    int saved;               /* set: floats per sample written by forward for backward */
    int scratch;             /* set: floats per sample of temporary memory, either pass */
    int n_params;            /* set: parameter tensors */
    np_param_shape param[NP_LAYER_MAX_PARAMS];
} np_layer_shape;

/* The buffers of one kernel call on n rows (samples), all row-major float. */
typedef struct np_layer_io {
    const np_layer_hp *hp;
    const np_layer_shape *shape;
    long n;
    const float *in[NP_LAYER_MAX_IN];        /* (n, shape->in[k]) */
    const float *param[NP_LAYER_MAX_PARAMS]; /* each with shape->param[p]'s shape */
    float *out;                              /* (n, out): fwd writes; bwd reads it */
    float *saved;                            /* (n, saved): fwd writes; bwd reads; NULL if 0 */
    float *scratch;                          /* (n, scratch), uninitialised; NULL if 0 */
    /* backward only */
    float *dout;                         /* (n, out): gradient of out; bwd may clobber it */
    float *din[NP_LAYER_MAX_IN];         /* (n, in[k]): OVERWRITTEN; NULL: not wanted */
    float *dparam[NP_LAYER_MAX_PARAMS];  /* OVERWRITTEN with these n rows' gradient */
    /* the run's --precision: NP_PRECISION_BF16 lets a kind take its products on bf16
     * inputs (fp32 accumulation, fp32 parameters); a kind may ignore it */
    np_precision precision;
} np_layer_io;

/* A layer kind. kind, shape, fwd and bwd are required; init NULL means the default
 * (np_layer_init_default); the CUDA slots stay NULL until a CUDA build fills them.
 * Kernels must be deterministic: the same inputs give the same bits, in any thread. */
typedef struct np_layer_def {
    const char *kind; /* "linear", "dot", ...: unique; also the codelet names <kind>_fwd/_bwd */
    int min_in, max_in; /* inputs it takes (1 <= min_in <= max_in <= NP_LAYER_MAX_IN) */
    /* Fills out, saved, scratch and the parameter shapes from hp and the input widths;
     * a shape it cannot take is NP_STATUS_BAD_INPUT with err saying why. */
    np_status (*shape)(const np_layer_hp *hp, np_layer_shape *s, np_error *err);
    /* Initial value of element e of parameter tensor p, a pure function of
     * (seed, stream, e): any rank can make any shard of a tensor alone. */
    float (*init)(const np_layer_hp *hp, const np_layer_shape *s, int p, uint64_t seed,
                  uint64_t stream, uint64_t e);
    void (*fwd)(const np_layer_io *io);
    void (*bwd)(const np_layer_io *io);
    void (*cuda_fwd)(const np_layer_io *io, void *stream); /* filled by the CUDA build */
    void (*cuda_bwd)(const np_layer_io *io, void *stream);
    /* Floating-point operations of one call on n rows: forward (backward = 0), backward
     * (1), or backward with no input gradient wanted (2: the node reads only the data);
     * NULL: unknown (0). Goes into StarPU's task->flops and the bench's GFLOP/s. */
    double (*flops)(const np_layer_hp *hp, const np_layer_shape *s, long n, int backward);
} np_layer_def;

/* Registers a layer kind (the definition is copied). Fails on a missing kernel, a bad
 * input range, a kind already registered or a full registry. Thread-unsafe: register
 * before creating trainers. The built-in kinds (linear, dot, concat, cross) are always
 * there. */
NP_NODISCARD NP_API np_status np_layer_register(const np_layer_def *def, np_error *err);
/* The registered definition of a kind, or NULL. */
NP_API const np_layer_def *np_layer_find(const char *kind);

/* The default initialisation: a tensor with fan_in > 0 draws N(0, sqrt(2/(fan_in +
 * fan_out))), one with fan_in = 0 draws N(0, sqrt(1/fan_out)). */
NP_API float np_layer_init_default(const np_layer_hp *hp, const np_layer_shape *s, int p, uint64_t seed,
                            uint64_t stream, uint64_t e);
/* N(0, sd) and U(lo, hi) from (seed, stream, counter): for custom init functions. */
NP_API float np_init_normal(uint64_t seed, uint64_t stream, uint64_t e, double sd);
NP_API float np_init_uniform(uint64_t seed, uint64_t stream, uint64_t e, double lo, double hi);

/* ---------------------------------------------------------------- model graphs */

/* Inputs a node can take besides other nodes (ids 0, 1, ...): the sample's dense features
 * (width: the first "bottom" size) and its pooled embeddings, table after table (width
 * tables * dim). */
#define NP_IN_DENSE (-1)
#define NP_IN_POOLED (-2)

typedef struct np_graph np_graph_t;

/* An empty graph for cfg's data (dense features, tables, dim). */
NP_NODISCARD NP_API np_status np_graph_create(const np_config *cfg, np_graph_t **out, np_error *err);
NP_API void np_graph_free(np_graph_t *g);

/* Adds a node of a registered kind over earlier nodes or NP_IN_*; hp NULL = all zero.
 * Runs the kind's shape function. Returns the node id (>= 0), or a negative np_status
 * with err naming the node. Names are unique; they name the node's tensors in dumps. */
NP_API int np_graph_add(np_graph_t *g, const char *name, const char *kind, const np_layer_hp *hp,
                 int n_in, const int *in, np_error *err);
/* n linear layers "<prefix>.0" .. "<prefix>.{n-1}" of output widths sizes[0..n-1] from
 * input `in`, ReLU after each (after all but the last when relu_last = 0). Returns the
 * last node's id or a negative np_status. */
NP_API int np_graph_mlp(np_graph_t *g, const char *prefix, int in, const int *sizes, int n, int relu_last,
                 np_error *err);
/* The node whose output (width 1) is the logit of the sigmoid BCE loss. Every node must
 * lead to it. */
NP_NODISCARD NP_API np_status np_graph_set_output(np_graph_t *g, int node, np_error *err);
/* Output width of a node (0 for an unknown id); nodes in the graph. */
NP_API int np_graph_width(const np_graph_t *g, int node);
NP_API int np_graph_nodes(const np_graph_t *g);

/* The graph of cfg->model (dlrm, dcnv2) with cfg's sizes. */
NP_NODISCARD NP_API np_status np_graph_from_config(const np_config *cfg, np_graph_t **out, np_error *err);

/* A model over graph g (copied; the caller still frees g), parameters initialised from
 * cfg->seed as np_model_create does (which is this over np_graph_from_config). */
NP_NODISCARD NP_API np_status np_model_create_graph(const np_config *cfg, const np_graph_t *g,
                                             np_model_t **out, np_error *err);

#ifdef __cplusplus
}
#endif
#endif
