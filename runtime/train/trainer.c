/* np_trainer_t: one optimizer step per global batch on the engine the config names, through
 * one interface (np_engine_ops, runtime/model/engine_ops.h) that the reference trainer and the
 * StarPU engine each fill in their own files; the step-level API's rules: the keys only a
 * whole run honours are refused, and a pipelined mode given fewer batches than it looks
 * ahead says so instead of quietly running without look-ahead.
 * Not here: a whole run (runtime/train/run.c). */
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "runtime/engine/engine.h" /* np_starpu_engine_ops */
#include "runtime/model/engine_ops.h"
#include "graph/pipeline.h"
#include "runtime/model/model.h"
#include "runtime/train/agree.h"
#include "nestpipe/trace.h"

/* The engines, by the config's "engine" (runtime/model/engine_ops.h): each fills its table
 * in its own file. */
static const np_engine_ops *const engines[] = {
    [NP_ENGINE_REFERENCE] = &np_reference_engine_ops,
    [NP_ENGINE_STARPU] = &np_starpu_engine_ops,
};

/* ---- the trainer */

struct np_trainer {
    const np_engine_ops *ops;
    void *impl;
    long steps; /* steps submitted */
    int tail;   /* batches given to the last step that had fewer than the look-ahead (the
                   data's end in sight); 0 while every step had them all */
    long tail_step; /* that step */
    int explicit_pipeline; /* the config named a pipeline (not auto) */
    int step_api;          /* made by np_trainer_create: the caller drives the steps */
};

np_status np_trainer_open(const np_config *cfg, np_model_t *m, np_trainer_t **out, np_error *err) {
    *out = NULL;
    np_trainer_t *tr = np_zalloc(1, sizeof *tr, "trainer", err);
    if (!tr) return NP_STATUS_NO_MEMORY;
    if ((unsigned)cfg->engine >= sizeof engines / sizeof *engines) {
        free(tr);
        return np_err(err, NP_STATUS_BAD_INPUT, "engine: %d is not an engine", (int)cfg->engine);
    }
    tr->ops = engines[cfg->engine];
    tr->explicit_pipeline = cfg->pipeline != NP_PIPELINE_AUTO;
    np_status st = tr->ops->create(cfg, m, &tr->impl, err);
    if (st) {
        free(tr);
        return st;
    }
    *out = tr;
    return NP_OK;
}

np_status np_trainer_create(const np_config *cfg, np_model_t *m, np_trainer_t **out,
                            np_error *err) {
    *out = NULL;
    /* the keys of a whole run would do nothing here: refuse them rather than ignore them */
    np_status st = NP_OK;
    for (int i = 0; np_config_key_at(i) && !st; i++) {
        const np_config_key *k = np_config_key_at(i);
        if (k->run_only && np_config_is_set(cfg, k->name) == 1)
            st = np_err(err, NP_STATUS_BAD_INPUT,
                        "%s: set, but only np_train_run (nestpipe train) honours it; the "
                        "step-level API (np_trainer_create) would ignore it: leave it at its "
                        "default or run the job with np_train_run",
                        k->name);
    }
    /* creation is collective: every rank learns whether one refused, then whether they
     * were all given the same configuration and graph */
    np_comm *world = np_comm_world();
    if (cfg->ranks > 1 && np_comm_size(world) == cfg->ranks) {
        st = np_agree_outcome(world, st, err);
        if (!st) st = np_config_agree(world, cfg, m->graph, err);
    }
    if (!st) st = np_trainer_open(cfg, m, out, err);
    if (!st) (*out)->step_api = 1;
    return st;
}

np_status np_trainer_step(np_trainer_t *tr, const np_batch *batch, double *loss, np_error *err) {
    return np_trainer_step_ahead(tr, &batch, 1, loss, err);
}

np_status np_trainer_step_ahead(np_trainer_t *tr, const np_batch *const *batches, int n,
                                double *loss, np_error *err) {
    np_status st = np_trainer_submit(tr, batches, n, err);
    return st ? st : np_trainer_wait(tr, loss, err);
}

/* A pipelined mode needs the batches after the training one. A step given fewer than it
 * looks ahead says the data ends with the last of them: each later step then has one batch
 * fewer, until none is left. A step that has more shows a caller that gives one batch at a
 * time, which the pipeline cannot look ahead on: refused, saying so. Under "auto" the first
 * step decides: one batch a step runs without look-ahead (what auto picks for such a
 * caller); an explicit dbp, async or nestpipe is refused. */
static np_status check_lookahead(np_trainer_t *tr, int n, np_error *err) {
    int ahead = tr->ops->lookahead ? tr->ops->lookahead(tr->impl) : 0;
    if (!ahead) return NP_OK;
    /* the first step under auto decides, on every rank alike (the engine agrees) */
    if (tr->steps == 0 && tr->step_api && !tr->explicit_pipeline && tr->ops->drop_lookahead) {
        np_status st = tr->ops->drop_lookahead(tr->impl, n, err);
        if (st || !(tr->ops->lookahead ? tr->ops->lookahead(tr->impl) : 0)) return st;
    }
    if (tr->tail && n > tr->tail - 1) {
        np_pipeline p = tr->ops->pipeline ? tr->ops->pipeline(tr->impl) : NP_PIPELINE_SEQUENTIAL;
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "pipeline %s looks %d batches ahead: step %ld was given %d batch%s, which "
                      "says the data ends with the last of them, yet step %ld was given %d; give "
                      "the next np_trainer_lookahead() batches with each step "
                      "(np_trainer_step_ahead), run np_train_run, or use pipeline sequential or "
                      "fwp",
                      np_pipeline_name(p), ahead, tr->tail_step + 1, tr->tail,
                      tr->tail == 1 ? "" : "es", tr->steps + 1, n);
    }
    if (n < ahead + 1) {
        tr->tail = n;
        tr->tail_step = tr->steps;
    }
    return NP_OK;
}

np_status np_trainer_submit(np_trainer_t *tr, const np_batch *const *batches, int n,
                            np_error *err) {
    if (n < 1 || !batches)
        return np_err(err, NP_STATUS_BAD_INPUT, "step %ld: no batch given", tr->steps + 1);
    np_status st = check_lookahead(tr, n, err);
    if (!st) st = tr->ops->submit(tr->impl, batches, n, err);
    if (!st) tr->steps++;
    return st;
}

np_status np_trainer_wait(np_trainer_t *tr, double *loss, np_error *err) {
    return tr->ops->wait(tr->impl, loss, err);
}

int np_trainer_lookahead(const np_trainer_t *tr) {
    return tr->ops->lookahead ? tr->ops->lookahead(tr->impl) : 0;
}

np_pipeline np_trainer_pipeline(const np_trainer_t *tr) {
    return tr->ops->pipeline ? tr->ops->pipeline(tr->impl) : NP_PIPELINE_SEQUENTIAL;
}

uint64_t np_trainer_synced_rows(const np_trainer_t *tr) {
    return tr->ops->synced_rows ? tr->ops->synced_rows(tr->impl) : 0;
}

void np_trainer_exchange_segments(const np_trainer_t *tr, uint64_t *segments, uint64_t *pooled) {
    *segments = *pooled = 0;
    if (tr->ops->segments) tr->ops->segments(tr->impl, segments, pooled);
}

np_status np_trainer_finish(np_trainer_t *tr, np_error *err) {
    return tr->ops->finish ? tr->ops->finish(tr->impl, err) : NP_OK;
}

void np_trainer_bytes(const np_trainer_t *tr, uint64_t out[4]) {
    if (tr->ops->bytes)
        tr->ops->bytes(tr->impl, out);
    else
        memset(out, 0, 4 * sizeof *out);
}

uint64_t np_trainer_buffer_bytes(const np_trainer_t *tr) {
    return tr && tr->ops->buffer_bytes ? tr->ops->buffer_bytes(tr->impl) : 0;
}

double np_trainer_clock_us(const np_trainer_t *tr) {
    return tr && tr->ops->clock_us ? tr->ops->clock_us(tr->impl) : 0;
}

void np_trainer_trace_data(np_trainer_t *tr, long batch, double start_us, double end_us) {
    if (tr && tr->ops->trace_data) tr->ops->trace_data(tr->impl, batch, start_us, end_us);
}

const np_trace *np_trainer_trace(const np_trainer_t *tr) {
    return tr->ops->trace ? tr->ops->trace(tr->impl) : NULL;
}

void np_trainer_hold(np_trainer_t *tr) {
    if (tr && tr->ops->hold) tr->ops->hold(tr->impl);
}

void np_trainer_release(np_trainer_t *tr) {
    if (tr && tr->ops->release) tr->ops->release(tr->impl);
}

void np_trainer_free(np_trainer_t *tr) {
    if (!tr) return;
    tr->ops->free(tr->impl);
    free(tr);
}
