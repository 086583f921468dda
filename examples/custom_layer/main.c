/* examples/custom_layer/main.c: a program that brings its own layer to nestpipe and trains
 * a model with it through the library, built against an installed nestpipe with nothing
 * but the public headers (docs/layers.md walks through it). Three steps:
 *
 *   1. check: the gate's backward against finite differences of its forward, and its
 *      kernel contract (np_layer_gradcheck, what `nestpipe check-layer` runs);
 *   2. train: the model of gate.ini (a DLRM with the gate after the interaction) with
 *      np_train_run, the whole job `nestpipe train` runs, once with the reference trainer
 *      and once with the StarPU engine under every exact pipeline;
 *   3. read back: the trained gate's weights by name (np_dist_model_read), which must be
 *      the same bits under every pipeline, and within the engines' tolerance of the
 *      reference's.
 *
 * Runs on one process or under mpirun (every rank the same). Exit status 0 when every
 * check holds, 1 when one fails, 2 on an error. usage: custom_layer [PATH/TO/gate.ini] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nestpipe/dist.h>
#include <nestpipe/layer.h>
#include <nestpipe/nestpipe.h>
#include <nestpipe/train.h>

#include "gate.h"

/* The StarPU engine against the reference trainer after the steps below: chunked sums
 * reassociate float additions (~1e-7 relative a step), nothing else differs. */
#define RTOL 1e-4
#define ATOL 1e-5
#define STEPS "40"

/* Every rank that failed prints why (np_train_run's err_quiet says when another rank
 * reports the failure instead). */
static int fail(const np_error *err, int quiet) {
    if (!quiet) fprintf(stderr, "custom_layer: %s\n", err->msg);
    return 2;
}

/* ---------------------------------------------------------------- 1. gradient check */

static int check(np_dist_t *dist, np_error *err) {
    int widths[1] = {7};
    np_gradcheck_result r;
    np_status st = np_layer_gradcheck("gate", NULL, 1, widths, NULL, &r, err);
    if (st) return fail(err, np_dist_rank(dist) != 0); /* the same on every rank */
    if (np_dist_rank(dist) == 0) {
        for (int k = 0; k < r.n; k++)
            printf("gradient check: %-6s worst error %.2e\n", r.t[k].name, r.t[k].worst);
        printf("gradient check: contract %s; %s\n", r.contract[0] ? r.contract : "held",
               r.passed ? "passed" : "FAILED");
    }
    return r.passed ? 0 : 1;
}

/* ---------------------------------------------------------------- 2. training */

/* The run's config: the data shape gate.ini expects, a few steps, one key per line. */
static np_status configure(np_config *cfg, const char *model_file, const char *engine,
                           const char *pipeline, np_error *err) {
    const char *keys[][2] = {
        {"model-file", model_file},
        {"tables", "4"},
        {"dim", "8"},
        {"rows", "1000"},
        {"batch", "256"},
        {"steps", STEPS},
        {"windows", "2"}, /* the same windows in every pipeline: the same arithmetic */
        {"eval-samples", "2048"},
        {"engine", engine},
        {"pipeline", pipeline},
        {"quiet", "1"},
    };
    np_config_defaults(cfg);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        np_status st = np_config_set(cfg, keys[k][0], keys[k][1], "custom_layer", err);
        if (st) return st;
    }
    return NP_OK;
}

/* One run; *w gets the trained gate.weight (18 x 18) on every rank. *quiet says whether
 * another rank reports a failure. */
static np_status train(np_dist_t *dist, const char *model_file, const char *engine,
                       const char *pipeline, float *w, double *auc, int *quiet, np_error *err) {
    np_config cfg;
    np_model_t *model = NULL;
    np_train_result res = {0};
    np_status st = configure(&cfg, model_file, engine, pipeline, err);
    *quiet = st && np_dist_rank(dist) != 0; /* a bad key fails alike on every rank */
    if (!st) st = np_train_run(dist, &cfg, NULL, &model, &res, err);
    if (st) {
        if (!*quiet) *quiet = res.err_quiet;
        /* a rank that failed mid-step leaves the others waiting: end the job */
        if (res.must_abort) {
            fail(err, *quiet);
            np_dist_abort(dist, 1);
        }
        return st;
    }
    *auc = res.eval.auc;
    /* ---------------------------------------------------------- 3. reading back */
    st = np_dist_model_read(dist, model, "gate.weight", w, 18 * 18, NULL, err);
    np_model_free(model);
    return st;
}

int main(int argc, char **argv) {
    np_dist_t *dist;
    np_error err = {{0}};
    if (np_dist_init(&argc, &argv, &dist, &err)) {
        fprintf(stderr, "custom_layer: %s\n", err.msg);
        return 2;
    }
    const char *model_file = argc > 1 ? argv[1] : "gate.ini";
    int lead = np_dist_rank(dist) == 0, rc = 0;
    /* the kind, registered in this process; a plugin would do it when loaded (plugin.c) */
    if (np_layer_register(&gate_layer, &err)) rc = fail(&err, !lead);
    if (!rc) rc = check(dist, &err);

    static const char *runs[][2] = {{"reference", "sequential"}, {"starpu", "sequential"},
                                    {"starpu", "dbp"},           {"starpu", "fwp"},
                                    {"starpu", "nestpipe"}};
    float w[5][18 * 18];
    double auc[5];
    for (int k = 0; k < 5 && !rc; k++) {
        /* the reference trainer runs in one process */
        if (!strcmp(runs[k][0], "reference") && np_dist_size(dist) > 1) {
            memset(w[k], 0, sizeof w[k]);
            continue;
        }
        int quiet;
        if (train(dist, model_file, runs[k][0], runs[k][1], w[k], &auc[k], &quiet, &err))
            rc = fail(&err, quiet);
        else if (lead)
            printf("%-9s %-10s eval auc %.4f, gate.weight[0] %.7f\n", runs[k][0], runs[k][1],
                   auc[k], (double)w[k][0]);
    }
    if (!rc) {
        int same = 1, near = 1;
        for (int k = 2; k < 5; k++) /* pipelines reorder work, never arithmetic */
            same &= !memcmp(w[k], w[1], sizeof w[1]);
        for (int i = 0; i < 18 * 18 && np_dist_size(dist) == 1; i++)
            near &= fabsf(w[1][i] - w[0][i]) <= ATOL + RTOL * fabsf(w[0][i]);
        if (lead)
            printf("pipelines: gate.weight %s; starpu vs reference: %s\n",
                   same ? "bit-identical" : "DIFFERS",
                   np_dist_size(dist) > 1 ? "not run on several ranks"
                   : near                  ? "within tolerance"
                                           : "OUT OF TOLERANCE");
        rc = same && near ? 0 : 1;
    }
    np_dist_free(dist);
    return rc;
}
