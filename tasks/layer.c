/* Layer tasks: one fwd and one bwd StarPU codelet per registered layer kind, with a
 * history-based perf model each, whose CPU function unpacks the buffers into an
 * np_layer_io and calls the kind's kernel; and the submission of one node on one chunk
 * (handles, access modes, flops). Not here: which nodes run in which order (runtime/engine/). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/model/graph.h"
#include "tasks/tasks.h"

typedef struct layer_cl {
    struct starpu_codelet cl[2];       /* fwd, bwd */
    struct starpu_perfmodel model[2];
    char name[2][48];
    char symbol[2][64]; /* the perf model's: nestpipe.<name> */
} layer_cl;

static layer_cl cls[NP_MAX_LAYER_KINDS];
static int n_cls;
static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;

static void fill_io(void *buffers[], const np_cl_layer_args *a, int bwd, np_layer_io *io) {
    memset(io, 0, sizeof *io);
    io->hp = &a->hp;
    io->shape = &a->shape;
    io->n = a->n;
    io->precision = a->precision;
    for (int k = 0; k < a->shape.n_in; k++) {
        io->in[k] = (const float *)NP_BUF(buffers, a->b_in[k]) + a->in_off[k];
        if (bwd && a->b_din[k] >= 0) io->din[k] = NP_BUF(buffers, a->b_din[k]);
    }
    const float *P = a->b_params >= 0 ? NP_BUF(buffers, a->b_params) : NULL;
    float *G = bwd && a->b_gd >= 0 ? NP_BUF(buffers, a->b_gd) : NULL;
    for (int p = 0; p < a->shape.n_params; p++) {
        io->param[p] = P + a->poff[p];
        if (G) io->dparam[p] = G + a->goff[p];
    }
    io->out = NP_BUF(buffers, a->b_out);
    if (a->b_saved >= 0) io->saved = NP_BUF(buffers, a->b_saved);
    if (a->b_scratch >= 0) io->scratch = NP_BUF(buffers, a->b_scratch);
    if (bwd) io->dout = NP_BUF(buffers, a->b_dout);
}

static void layer_fwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_layer_args *a = cl_arg;
    np_layer_io io;
    fill_io(buffers, a, 0, &io);
    np_layer_get(a->def)->fwd(&io);
}

static void layer_bwd_cpu(void *buffers[], void *cl_arg) {
    const np_cl_layer_args *a = cl_arg;
    np_layer_io io;
    fill_io(buffers, a, 1, &io);
    np_layer_get(a->def)->bwd(&io);
}

#ifdef NP_HAVE_CUDA
#include <starpu_cuda.h>
/* The kind's CUDA slot on a CUDA worker: the same np_layer_io, with device pointers, on
 * the worker's stream (the codelet is STARPU_CUDA_ASYNC). */
static void layer_fwd_cuda(void *buffers[], void *cl_arg) {
    const np_cl_layer_args *a = cl_arg;
    np_layer_io io;
    fill_io(buffers, a, 0, &io);
    np_layer_get(a->def)->cuda_fwd(&io, starpu_cuda_get_local_stream());
}

static void layer_bwd_cuda(void *buffers[], void *cl_arg) {
    const np_cl_layer_args *a = cl_arg;
    np_layer_io io;
    fill_io(buffers, a, 1, &io);
    np_layer_get(a->def)->cuda_bwd(&io, starpu_cuda_get_local_stream());
}
#endif

void np_layer_codelets_init(void) {
    pthread_mutex_lock(&cls_lock);
    for (int k = n_cls; k < np_layer_count(); k++) {
        layer_cl *c = &cls[k];
        for (int b = 0; b < 2; b++) {
            snprintf(c->name[b], sizeof c->name[b], "%s_%s", np_layer_get(k)->kind,
                     b ? "bwd" : "fwd");
            snprintf(c->symbol[b], sizeof c->symbol[b], "nestpipe.%s", c->name[b]);
            c->model[b] = (struct starpu_perfmodel){.type = STARPU_HISTORY_BASED,
                                                    .symbol = c->symbol[b],
                                                    .footprint = np_task_footprint};
            c->cl[b] = (struct starpu_codelet){.cpu_funcs = {b ? layer_bwd_cpu : layer_fwd_cpu},
                                               .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                               .model = &c->model[b],
                                               .name = c->name[b]};
#ifdef NP_HAVE_CUDA
            /* a kind with both CUDA slots may run on a CUDA worker; a user kind without
             * them stays on the CPU (and --place dense=cuda refuses it) */
            const np_layer_def *def = np_layer_get(k);
            if (def->cuda_fwd && def->cuda_bwd) {
                c->cl[b].cuda_funcs[0] = b ? layer_bwd_cuda : layer_fwd_cuda;
                c->cl[b].cuda_flags[0] = STARPU_CUDA_ASYNC;
            }
#endif
        }
    }
    n_cls = np_layer_count();
    pthread_mutex_unlock(&cls_lock);
}

const char *np_layer_codelet_name(const char *name) {
    for (int k = 0; k < n_cls; k++)
        for (int b = 0; b < 2; b++)
            if (!strcmp(cls[k].name[b], name)) return cls[k].name[b];
    return NULL;
}

/* Adds handle h with mode m to the task's list, once: a handle met again (a producer read
 * twice) keeps its buffer and joins the modes. Returns its buffer index. */
static int add_buf(np_h *hs, enum starpu_data_access_mode *ms, int *nb, np_h h,
                   enum starpu_data_access_mode m) {
    for (int i = 0; i < *nb; i++)
        if (hs[i] == h) {
            ms[i] |= m;
            return i;
        }
    hs[*nb] = h;
    ms[*nb] = m;
    return (*nb)++;
}

/* A hash of what decides a layer task's cost, field by field (never a struct's padding):
 * the kind's hyper-parameters, input and output widths, parameter shapes, rows, precision
 * and whether it computes its inputs' gradients. */
static uint32_t cost_key(const np_cl_layer_args *a, int no_din) {
    uint32_t k = starpu_hash_crc32c_be_n(a->hp.i, sizeof a->hp.i, (uint32_t)a->def);
    k = starpu_hash_crc32c_be_n(a->hp.f, sizeof a->hp.f, k);
    const np_layer_shape *s = &a->shape;
    int dims[4 + NP_LAYER_MAX_IN] = {s->n_in, s->out, s->saved, s->n_params};
    for (int i = 0; i < s->n_in && i < NP_LAYER_MAX_IN; i++)
        dims[4 + i] = s->in[i];
    k = starpu_hash_crc32c_be_n(dims, sizeof dims, k);
    for (int p = 0; p < s->n_params && p < NP_LAYER_MAX_PARAMS; p++)
        k = starpu_hash_crc32c_be_n(s->param[p].dims, sizeof s->param[p].dims, k);
    int64_t n = (int64_t)a->n;
    k = starpu_hash_crc32c_be_n(&n, sizeof n, k);
    return starpu_hash_crc32c_be((uint32_t)a->precision << 1 | (uint32_t)no_din, k);
}

np_status np_submit_layer(const np_task_ctx *c, int bwd, const np_cl_layer_args *args,
                          const np_layer_handles *h, np_error *err) {
    const np_layer_def *def = np_layer_get(args->def);
    if (!def || args->def >= n_cls)
        return np_err(err, NP_STATUS_INTERNAL, "layer kind %d has no codelet", args->def);
    np_cl_layer_args a = *args;
    np_h hs[2 * NP_LAYER_MAX_IN + 8];
    enum starpu_data_access_mode ms[2 * NP_LAYER_MAX_IN + 8];
    int nb = 0;
    for (int k = 0; k < a.shape.n_in; k++) {
        a.b_in[k] = add_buf(hs, ms, &nb, h->in[k], STARPU_R);
        a.in_off[k] = h->in_off[k];
    }
    a.b_params = a.shape.n_params ? add_buf(hs, ms, &nb, h->params, STARPU_R) : -1;
    a.b_out = add_buf(hs, ms, &nb, h->out, bwd ? STARPU_R : STARPU_W);
    a.b_saved = h->saved ? add_buf(hs, ms, &nb, h->saved, bwd ? STARPU_R : STARPU_W) : -1;
    a.b_scratch = h->scratch ? add_buf(hs, ms, &nb, h->scratch, STARPU_SCRATCH) : -1;
    a.b_dout = a.b_gd = -1;
    for (int k = 0; k < NP_LAYER_MAX_IN; k++)
        a.b_din[k] = -1;
    if (bwd) {
        a.b_dout = add_buf(hs, ms, &nb, h->dout, STARPU_RW);
        for (int k = 0; k < a.shape.n_in; k++)
            if (h->din[k]) a.b_din[k] = add_buf(hs, ms, &nb, h->din[k], STARPU_W);
        if (h->gd) a.b_gd = add_buf(hs, ms, &nb, h->gd, STARPU_W);
    }
    np_task_ctx ctx = *c;
    int no_din = 1;
    for (int k = 0; k < a.shape.n_in; k++)
        no_din &= a.b_din[k] < 0;
    ctx.flops = def->flops ? def->flops(&a.hp, &a.shape, a.n, bwd && no_din ? 2 : bwd) : 0;
    /* what decides its cost: hyper-parameters, widths, rows, precision, inputs' gradients */
    ctx = np_task_cost(&ctx, cost_key(&a, no_din), -1, 0);
    return np_task_submit(&ctx, &cls[a.def].cl[bwd], bwd ? NP_NODE_BWD : NP_NODE_FWD, nb, hs, ms,
                          &a, sizeof a, 0, err);
}
