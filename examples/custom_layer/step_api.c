/* examples/custom_layer/step_api.c: a user layer in a nestpipe model, driven step by step
 * with the step-level API, built against an installed nestpipe (docs/install.md) with
 * nothing but the public headers. This program was written against nestpipe 0.4 and its
 * code is unchanged since: it shows that 0.5 keeps the layer API source-compatible (main.c
 * shows the shorter way, np_train_run and a model file). Three steps:
 *
 *   1. check_gradients: the gate's backward kernel (gate.c) against central finite
 *      differences of its forward, computed in double, for every input and parameter;
 *   2. build_model: register the gate and build a DLRM with it between the interaction
 *      and the top MLP;
 *   3. train: a few dozen steps on synthetic data with the reference trainer and with the
 *      StarPU engine; with one chunk the engine must give the same bits as the reference.
 *
 * Exit status 0 when every check holds, 1 when one fails, 2 on an error. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nestpipe/layer.h>
#include <nestpipe/nestpipe.h>

#include "gate.h"

/* Float kernels against an exact derivative: their rounding gives about 1e-6; a wrong
 * term in a gradient gives O(1). Errors are relative to max(|fd|, GRAD_FLOOR), so that
 * near-zero gradients are judged by their absolute error. */
#define GRAD_RTOL 1e-3
#define GRAD_FLOOR 1e-2
#define STEPS 40

static int fail(const np_error *err) {
    fprintf(stderr, "custom_layer: %s\n", err->msg);
    return 2;
}

/* ---------------------------------------------------------------- 1. gradient check */

/* The gate's forward in double, written from the formula y = x * sigmoid(x W^T + b): an
 * independent second implementation, so the check also tests gate_fwd. */
static void gate_fwd_f64(long n, int D, const double *x, const double *W, const double *b,
                         double *y) {
    for (long i = 0; i < n; i++)
        for (int j = 0; j < D; j++) {
            double a = b[j];
            for (int k = 0; k < D; k++)
                a += x[i * D + k] * W[j * D + k];
            y[i * D + j] = x[i * D + j] / (1.0 + exp(-a));
        }
}

/* The scalar whose gradient is checked: L = sum of r * y, so that dL/dy = r. */
static double loss_f64(long n, int D, const double *x, const double *W, const double *b,
                       const double *r, double *y) {
    gate_fwd_f64(n, D, x, W, b, y);
    double L = 0;
    for (long e = 0; e < n * D; e++)
        L += r[e] * y[e];
    return L;
}

/* Central differences of L in every element of v (one of x, W, b), against the analytic
 * gradient g of those elements; returns the worst relative error. */
static double worst_error(long count, double *v, const float *g, long n, int D, const double *x,
                          const double *W, const double *b, const double *r, double *y) {
    const double h = 1e-6;
    double worst = 0;
    for (long e = 0; e < count; e++) {
        double keep = v[e];
        v[e] = keep + h;
        double up = loss_f64(n, D, x, W, b, r, y);
        v[e] = keep - h;
        double down = loss_f64(n, D, x, W, b, r, y);
        v[e] = keep;
        double fd = (up - down) / (2 * h);
        double rel = fabs(g[e] - fd) / fmax(fabs(fd), GRAD_FLOOR);
        if (rel > worst) worst = rel;
    }
    return worst;
}

/* Calls gate_fwd and gate_bwd the way both trainers do, on a small random batch, and checks
 * the output and the gradients of x, W and b. Returns 0 when all are within GRAD_RTOL. */
static int check_gradients(void) {
    enum { N = 5, D = 7 };
    np_error err = {{0}};
    np_layer_hp hp = {0};
    np_layer_shape s = {.n_in = 1, .in = {D}};
    if (gate_layer.shape(&hp, &s, &err)) return fail(&err);

    /* float buffers for the kernels, double copies of the same values for the reference */
    float x[N * D], W[D * D], b[D], y[N * D], saved[N * D], scratch[N * D];
    float dy[N * D], dx[N * D], dW[D * D], db[D];
    double xd[N * D], Wd[D * D], bd[D], rd[N * D], yd[N * D];
    for (int e = 0; e < N * D; e++) { /* np_init_normal: nestpipe's counter-based RNG */
        xd[e] = x[e] = np_init_normal(7, 0, (uint64_t)e, 1.0);
        rd[e] = dy[e] = np_init_normal(7, 1, (uint64_t)e, 1.0);
    }
    for (int e = 0; e < D * D; e++)
        Wd[e] = W[e] = np_init_normal(7, 2, (uint64_t)e, 0.5);
    for (int e = 0; e < D; e++)
        bd[e] = b[e] = np_init_normal(7, 3, (uint64_t)e, 0.5);

    np_layer_io io = {.hp = &hp,
                      .shape = &s,
                      .n = N,
                      .in = {x},
                      .param = {W, b},
                      .out = y,
                      .saved = saved,
                      .scratch = scratch,
                      .dout = dy,
                      .din = {dx},
                      .dparam = {dW, db}};
    gate_layer.fwd(&io);
    gate_layer.bwd(&io); /* may clobber dy: the reference keeps its own copy, rd */

    loss_f64(N, D, xd, Wd, bd, rd, yd);
    double worst_y = 0;
    for (int e = 0; e < N * D; e++)
        worst_y = fmax(worst_y, fabs(y[e] - yd[e]) / fmax(fabs(yd[e]), GRAD_FLOOR));
    double worst_x = worst_error(N * D, xd, dx, N, D, xd, Wd, bd, rd, yd);
    double worst_W = worst_error(D * D, Wd, dW, N, D, xd, Wd, bd, rd, yd);
    double worst_b = worst_error(D, bd, db, N, D, xd, Wd, bd, rd, yd);
    double worst = fmax(fmax(worst_y, worst_x), fmax(worst_W, worst_b));
    printf("gradient check (%d x %d): worst relative error %.2e (output %.1e, dx %.1e, dW %.1e, "
           "db %.1e), tolerance %.0e\n",
           N, D, worst, worst_y, worst_x, worst_W, worst_b, GRAD_RTOL);
    return worst <= GRAD_RTOL ? 0 : 1;
}

/* ---------------------------------------------------------------- 2. the model */

/* A small DLRM: bottom MLP 13-16-8 on the dense features, the dot interaction of its output
 * with the 4 pooled embeddings (width 8 + 5*4/2 = 18), the gate, and a top MLP 16-1. */
static np_status configure(np_config *cfg, const char *engine, np_error *err) {
    static const char *keys[][2] = {
        {"tables", "4"},
        {"rows", "1000"},
        {"dim", "8"},
        {"bottom", "13-16-8"}, /* dense features in, dim out */
        {"top", "16-1"},
        {"batch", "256"},
        {"lr", "0.1"},
        {"seed", "42"},
        {"chunks", "1"}, /* one chunk: the engine's arithmetic is the reference's */
        {"eval-samples", "4096"},
    };
    np_config_defaults(cfg);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        np_status st = np_config_set(cfg, keys[k][0], keys[k][1], "custom_layer", err);
        if (st) return st;
    }
    np_status st = np_config_set(cfg, "engine", engine, "custom_layer", err);
    return st ? st : np_config_check(cfg, err);
}

/* The graph; node names become the tensor names of a dump ("gate.weight"). */
static np_status build_model(const np_config *cfg, np_model_t **model, np_error *err) {
    np_graph_t *g;
    np_status st = np_graph_create(cfg, &g, err);
    if (st) return st;
    /* each call returns the new node's id, or a negative status with err saying why */
    int node = np_graph_mlp(g, "bottom", NP_IN_DENSE, cfg->bottom + 1, cfg->n_bottom - 1, 1, err);
    int in[2] = {node, NP_IN_POOLED};
    if (node >= 0) node = np_graph_add(g, "interaction", "dot", NULL, 2, in, err);
    if (node >= 0) node = np_graph_add(g, "gate", "gate", NULL, 1, &node, err);
    if (node >= 0) node = np_graph_mlp(g, "top", node, cfg->top, cfg->n_top, 0, err);
    st = node < 0 ? (np_status)node : np_graph_set_output(g, node, err); /* the logit */
    if (!st) st = np_model_create_graph(cfg, g, model, err);
    np_graph_free(g); /* the model keeps its own copy */
    return st;
}

/* ---------------------------------------------------------------- 3. training */

typedef struct run {
    double loss[STEPS]; /* mean BCE of each step's batch, before its update */
    np_eval_result eval;
} run;

/* Trains STEPS steps with `engine`, evaluates, and writes the model to dump_path. */
static np_status train(const char *engine, const char *dump_path, run *out, np_error *err) {
    np_config cfg;
    np_source_t *data = NULL, *eval = NULL;
    np_model_t *model = NULL;
    np_trainer_t *tr = NULL;
    np_batch batch = {0};
    np_status st;
    if ((st = configure(&cfg, engine, err)) || (st = build_model(&cfg, &model, err)) ||
        (st = np_source_open(&cfg, NP_SPLIT_TRAIN, &data, err)) ||
        (st = np_source_open(&cfg, NP_SPLIT_EVAL, &eval, err)) ||
        (st = np_trainer_create(&cfg, model, &tr, err)))
        goto done;
    for (int s = 0; s < STEPS; s++)
        if ((st = np_source_next_batch(data, cfg.batch, &batch, err)) ||
            (st = np_trainer_step(tr, &batch, &out->loss[s], err)))
            goto done;
    /* the engine may still be writing the last update: finish before reading the model */
    if ((st = np_trainer_finish(tr, err)) || (st = np_evaluate(model, eval, &cfg, &out->eval, err)))
        goto done;
    st = np_model_dump(model, dump_path, err);
done:
    np_trainer_free(tr);
    np_batch_free(&batch);
    np_model_free(model);
    np_source_free(data);
    np_source_free(eval);
    return st;
}

/* 1 when the two files hold the same bytes. */
static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb, ca = 0, cb = 0;
    while (same && (ca = getc(fa)) == (cb = getc(fb)) && ca != EOF)
        ;
    same = same && ca == cb;
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

int main(void) {
    int rc = check_gradients();
    if (rc) return rc;

    np_error err = {{0}};
    if (np_layer_register(&gate_layer, &err)) return fail(&err); /* once, before any model */

    char dir[] = "/tmp/custom_layer_XXXXXX", ref_path[64], sp_path[64];
    if (!mkdtemp(dir)) {
        perror("custom_layer: mkdtemp");
        return 2;
    }
    snprintf(ref_path, sizeof ref_path, "%s/reference.params", dir);
    snprintf(sp_path, sizeof sp_path, "%s/starpu.params", dir);
    run ref, sp;
    np_status st = train("reference", ref_path, &ref, &err);
    if (!st) st = train("starpu", sp_path, &sp, &err);
    if (!st) {
        printf("step  reference loss  starpu loss\n");
        for (int s = 0; s < STEPS; s++)
            if (s % 5 == 0 || s == STEPS - 1)
                printf("%4d  %14.6f  %11.6f\n", s + 1, ref.loss[s], sp.loss[s]);
        printf("eval (%ld samples): logloss %.5f  auc %.4f (reference), logloss %.5f  auc %.4f "
               "(starpu)\n",
               ref.eval.n, ref.eval.logloss, ref.eval.auc, sp.eval.logloss, sp.eval.auc);
        int same_loss = !memcmp(ref.loss, sp.loss, sizeof ref.loss);
        int same_model = same_file(ref_path, sp_path);
        printf("starpu vs reference: losses %s, trained model %s\n",
               same_loss ? "bit-identical" : "DIFFER", same_model ? "bit-identical" : "DIFFERS");
        rc = same_loss && same_model ? 0 : 1;
    }
    remove(ref_path);
    remove(sp_path);
    rmdir(dir);
    return st ? fail(&err) : rc;
}
