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
    /* Added in 0.5 (leave them out and they are NULL, as before): */
    /* Names of the hyper-parameter slots, by which model files and `nestpipe check-layer
     * --hp` set them (`out = 64` sets i[k] when hp_int[k] is "out"): a-z, 0-9, '-' and
     * '_'. A slot without a name is still set as "i<k>" or "f<k>". */
    const char *hp_int[NP_LAYER_MAX_HP];
    const char *hp_real[NP_LAYER_MAX_HP];
    const char *help; /* one line saying what the kind computes (check-layer --list) */
} np_layer_def;

/* Registers a layer kind (the definition is copied). Fails on a missing kernel, a bad
 * input range, a bad hyper-parameter name, a kind already registered or a full registry.
 * Thread-unsafe: register before creating trainers. The built-in kinds (linear, dot,
 * concat, cross, slice) are always there. */
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

/* Registered kinds: the name of kind i (0 .. count-1, built-in ones first), NULL past
 * the last. */
NP_API const char *np_layer_kind_at(int i);

/* ---------------------------------------------------------------- plugins
 *
 * A plugin is a shared object that registers layer kinds, so that `nestpipe train
 * --plugin ./libmylayers.so --model-file m.ini` trains a model with them and nestpipe is
 * not rebuilt (docs/layers.md). It is built against the installed headers and defines its
 * one entry point with NP_PLUGIN_DEFINE:
 *
 *     static np_status register_kinds(np_error *err) {
 *         return np_layer_register(&gate_layer, err);
 *     }
 *     NP_PLUGIN_DEFINE(register_kinds)
 *
 * NP_PLUGIN_ABI changes whenever np_layer_def, np_layer_io or np_layer_shape change their
 * layout; a plugin built for another value is refused, naming both. */
#define NP_PLUGIN_ABI 1
#if defined(__GNUC__)
#define NP_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define NP_PLUGIN_EXPORT
#endif
#ifdef __cplusplus
#define NP_PLUGIN_LINKAGE extern "C"
#else
#define NP_PLUGIN_LINKAGE
#endif
#define NP_PLUGIN_DEFINE(register_fn)                                                           \
    NP_PLUGIN_LINKAGE NP_PLUGIN_EXPORT extern const int np_plugin_abi;                          \
    NP_PLUGIN_LINKAGE NP_PLUGIN_EXPORT const int np_plugin_abi = NP_PLUGIN_ABI;                 \
    NP_PLUGIN_LINKAGE NP_PLUGIN_EXPORT np_status np_plugin_init(np_error *err);                 \
    NP_PLUGIN_LINKAGE NP_PLUGIN_EXPORT np_status np_plugin_init(np_error *err) {                \
        return register_fn(err);                                                                \
    }

/* Loads the plugin at path (dlopen; a path without '/' is searched the way dlopen
 * searches) and runs its entry point. Loading a path already loaded does nothing. Fails,
 * naming the path, when the file cannot be loaded, has no entry point, was built for
 * another NP_PLUGIN_ABI, or its entry point fails (a kind already registered, ...); the
 * kinds it registered before failing stay. Thread-unsafe, like np_layer_register. The
 * config key "plugin" loads its plugins the same way, in np_graph_from_config. */
NP_NODISCARD NP_API np_status np_plugin_load(const char *path, np_error *err);

/* ---------------------------------------------------------------- gradient check
 *
 * np_layer_gradcheck runs a kind's kernels the way both trainers do, on `rows` random
 * samples, and checks them against its own forward: every element of every input and
 * parameter, by central finite differences (in double, of the float forward, step sizes
 * shrunk where the forward is not smooth), against the backward's gradient of
 * L = sum(out * R) for a random R. It also checks the kernel contract of docs/layers.md:
 * forward gives the same bits twice, backward OVERWRITES din and dparam (they start as
 * garbage), accepts din[k] = NULL, and leaves the inputs and parameters alone. In the CUDA
 * flavour with a GPU it also runs the CUDA slots and compares them with the CPU kernels.
 * `nestpipe check-layer` is its command. */
typedef struct np_gradcheck_opts {
    long rows;      /* samples; 0: 4 */
    double tol;     /* the largest error that passes; 0: 1e-2 */
    double floor;   /* errors are |analytic - numeric| / max(|numeric|, floor); 0: 1e-2 */
    uint64_t seed;  /* inputs, parameters (the kind's init) and R; 0: 1 */
    int no_cuda;    /* 1: skip the CUDA comparison even where a GPU is present */
} np_gradcheck_opts;

typedef struct np_gradcheck_tensor {
    char name[40];  /* "in0", "in1", ..., then the parameter tensors' names */
    long count;     /* elements checked */
    double worst;   /* the worst error over them */
    long worst_at;  /* the element of the worst error */
    double analytic, numeric; /* the two gradients there */
} np_gradcheck_tensor;

typedef struct np_gradcheck_result {
    np_layer_shape shape;  /* what the shape function gave */
    int n;                 /* tensors checked: the inputs, then the parameters */
    np_gradcheck_tensor t[NP_LAYER_MAX_IN + NP_LAYER_MAX_PARAMS];
    double worst;          /* over every tensor */
    char contract[256];    /* "" when the kernel contract held, else what broke */
    /* CUDA flavour: 1 when the CUDA slots ran on a GPU; the worst relative difference of
     * their outputs and gradients from the CPU kernels', and which tensor */
    int cuda_checked;
    double cuda_worst;
    char cuda_where[40];
    char cuda_skipped[128]; /* why the CUDA comparison did not run ("" when it ran) */
    int passed;            /* worst <= tol, the contract held, and CUDA (if run) within tol */
} np_gradcheck_result;

/* Checks kind `kind` with hyper-parameters hp (NULL: all zero) on n_in inputs of the
 * given widths. Returns NP_OK when the check ran (out->passed says how it went), or an
 * error for an unknown kind, a shape its shape function refuses, or no memory. */
NP_NODISCARD NP_API np_status np_layer_gradcheck(const char *kind, const np_layer_hp *hp, int n_in,
                                                 const int *widths, const np_gradcheck_opts *opts,
                                                 np_gradcheck_result *out, np_error *err);

/* Sets hyper-parameter `name` of kind `kind` in hp from its text value ("64", "0.5"): by
 * the kind's slot names, or "i<k>" / "f<k>". For model files and check-layer. */
NP_NODISCARD NP_API np_status np_layer_hp_set(const char *kind, np_layer_hp *hp, const char *name,
                                              const char *value, np_error *err);

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

/* The graph cfg describes: its "model-file" when set (np_graph_from_file), else the
 * built-in "model" (dlrm, dcnv2) with cfg's sizes, checked by that model's own rules (the
 * last bottom size is dim, the last top size 1, ...). Loads cfg's plugins first. */
NP_NODISCARD NP_API np_status np_graph_from_config(const np_config *cfg, np_graph_t **out, np_error *err);

/* A model file (docs/layers.md "Model files"): one [section] per node, in order, with its
 * kind, its inputs and its hyper-parameters by name. Errors name the file, the line and the
 * node. The graph is for cfg's data (dense features, tables, dim); load the plugins whose
 * kinds it uses first (np_plugin_load, or the "plugin" key through np_graph_from_config). */
NP_NODISCARD NP_API np_status np_graph_from_file(const np_config *cfg, const char *path,
                                                 np_graph_t **out, np_error *err);
/* Writes g as a model file that np_graph_from_file reads back to the same graph (the same
 * nodes, inputs, hyper-parameters and output). NP_STATUS_IO when f cannot be written. */
NP_NODISCARD NP_API np_status np_graph_write(const np_graph_t *g, FILE *f, np_error *err);

/* A model over graph g (copied; the caller still frees g), parameters initialised from
 * cfg->seed (and "init-params" loaded) as np_model_create does, which is this over
 * np_graph_from_config. */
NP_NODISCARD NP_API np_status np_model_create_graph(const np_config *cfg, const np_graph_t *g,
                                             np_model_t **out, np_error *err);

#ifdef __cplusplus
}
#endif
#endif
