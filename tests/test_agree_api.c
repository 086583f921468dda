/* The ranks' agreement through the step-level API (public headers only), on 2 ranks of
 * mpirun: np_trainer_create is collective, so a rank given another config, another graph,
 * or a key the step API refuses must not leave the other waiting. Each case: both ranks
 * get NP_STATUS_BAD_INPUT, rank 0's message names what differs. Last, the same config on
 * both ranks creates the trainer. usage: mpirun -np 2 test_agree_api */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nestpipe/dist.h"
#include "nestpipe/layer.h"
#include "nestpipe/nestpipe.h"

static np_dist_t *d;
static int failures;

static void config(np_config *c) {
    np_config_defaults(c);
    static const char *kv[][2] = {{"tables", "3"}, {"rows", "500"},   {"dim", "8"},
                                  {"bottom", "13-8"}, {"top", "8-1"}, {"batch", "64"},
                                  {"quiet", "1"}};
    np_error e = {{0}};
    for (size_t k = 0; k < sizeof kv / sizeof *kv; k++)
        if (np_config_set(c, kv[k][0], kv[k][1], "test", &e)) {
            fprintf(stderr, "test_agree_api: %s\n", e.msg);
            np_dist_abort(d, 1);
        }
    c->rank = np_dist_rank(d);
    c->ranks = np_dist_size(d);
}

/* A graph of one linear layer over the pooled embeddings, or with width > 0 a hidden layer
 * of that width before it. */
static np_graph_t *graph(const np_config *c, int width) {
    np_graph_t *g = NULL;
    np_error e = {{0}};
    int in = NP_IN_POOLED, v;
    np_layer_hp hidden = {.i = {width}}, out = {.i = {1}};
    if (np_graph_create(c, &g, &e)) goto bad;
    if (width > 0 && (in = np_graph_add(g, "hidden", "linear", &hidden, 1, &in, &e)) < 0) goto bad;
    if ((v = np_graph_add(g, "out", "linear", &out, 1, &in, &e)) < 0) goto bad;
    if (np_graph_set_output(g, v, &e)) goto bad;
    return g;
bad:
    fprintf(stderr, "test_agree_api: graph: %s\n", e.msg);
    np_dist_abort(d, 1);
    return NULL;
}

/* Creates a trainer over graph g with config c on this rank; want: the status every rank
 * must get, and the start of rank `who`'s message. */
static void expect(const char *name, const np_config *c, const np_graph_t *g, np_status want,
                   int who, const char *msg) {
    np_model_t *m = NULL;
    np_trainer_t *tr = NULL;
    np_error e = {{0}};
    if (np_model_create_graph(c, g, &m, &e)) {
        fprintf(stderr, "test_agree_api: %s: model: %s\n", name, e.msg);
        np_dist_abort(d, 1);
    }
    np_status st = np_trainer_create(c, m, &tr, &e);
    int good = st == want && (np_dist_rank(d) != who || !msg || !strncmp(e.msg, msg, strlen(msg)));
    if (!good) {
        fprintf(stderr, "FAIL rank %d: %s: status %d (want %d): %s\n", np_dist_rank(d), name,
                (int)st, (int)want, e.msg);
        failures++;
    } else if (np_dist_rank(d) == 0) {
        printf("ok   %s\n", name);
    }
    np_trainer_free(tr);
    np_model_free(m);
}

int main(int argc, char **argv) {
    np_error e = {{0}};
    if (np_dist_init(&argc, &argv, &d, &e)) {
        fprintf(stderr, "test_agree_api: %s\n", e.msg);
        return 1;
    }
    if (np_dist_size(d) != 2) {
        fprintf(stderr, "test_agree_api: run it on 2 ranks\n");
        np_dist_free(d);
        return 2;
    }
    int r1 = np_dist_rank(d) == 1;
    np_config c;
    config(&c);
    np_graph_t *one = graph(&c, 0), *two = graph(&c, 4);

    np_config lr = c;
    if (r1) lr.lr = 0.2;
    expect("another lr on rank 1", &lr, one, NP_STATUS_BAD_INPUT, 0,
           "ranks disagree on lr: '0.1' on rank 0; '0.2' on rank 1");
    expect("another graph on rank 1", &c, r1 ? two : one, NP_STATUS_BAD_INPUT, 0,
           "ranks disagree on the model graph: 1 node, hash ");
    np_config metrics = c; /* a key the step API refuses, set on rank 1 only */
    if (r1 && np_config_set(&metrics, "metrics-json", "/tmp/m.json", "test", &e)) return 1;
    expect("metrics-json on rank 1: refused there", &metrics, one, NP_STATUS_BAD_INPUT, 1,
           "metrics-json: set, but only np_train_run");
    expect("metrics-json on rank 1: rank 0 stops too", &metrics, one, NP_STATUS_BAD_INPUT, 0,
           "another rank failed to set up");
    expect("the same config and graph: created", &c, one, NP_OK, 0, NULL);

    np_graph_free(one);
    np_graph_free(two);
    int64_t f = failures;
    if (np_dist_sum_i64(d, &f, NULL)) return 1;
    if (np_dist_rank(d) == 0) printf("%s\n", f ? "FAILED" : "all passed");
    np_dist_free(d);
    return f ? 1 : 0;
}
