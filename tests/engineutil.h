/* Shared by the engine tests (test_engine.c, test_engine_gpu.c): a small config, training
 * a model for some steps through the public trainer, and comparing two models by bytes or
 * within a tolerance. Include after cmocka.h. */
#ifndef NP_TESTS_ENGINEUTIL_H
#define NP_TESTS_ENGINEUTIL_H

#include <math.h>
#include <string.h>

#include "runtime/model/model.h"
#include "nestpipe/nestpipe.h"

/* Engine vs reference after 50 steps: the engine sums chunk partial gradients, the
 * reference sums the whole batch at once; float reassociation differs by ~1e-7 relative
 * per step. The bound. */
#define EQ_RTOL 1e-4
#define EQ_ATOL 1e-5

static inline np_config small_cfg(np_engine engine, const char *optim) {
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    if (np_config_set(&c, "rows", "2000", "t", &e) || np_config_set(&c, "batch", "256", "t", &e) ||
        np_config_set(&c, "tables", "8", "t", &e) || np_config_set(&c, "hot", "3", "t", &e) ||
        np_config_set(&c, "sparse-optim", optim, "t", &e) || np_config_check(&c, &e))
        fail_msg("config: %s", e.msg);
    c.engine = engine;
    c.pipeline = NP_PIPELINE_SEQUENTIAL; /* the baseline the pipelined modes are held to */
    return c;
}

/* Trains c's model on the batches of data's source (usually c itself). */
static inline np_model_t *train_on(const np_config *c, const np_config *data, long steps) {
    np_error e = {{0}};
    np_source_t *src;
    np_model_t *m;
    np_trainer_t *tr;
    np_batch b = {0};
    if (np_model_create(c, &m, &e) || np_source_open(data, NP_SPLIT_TRAIN, &src, &e) ||
        np_trainer_create(c, m, &tr, &e))
        fail_msg("setup: %s", e.msg);
    for (long s = 0; s < steps; s++) {
        double loss;
        assert_int_equal(np_source_next_batch(src, c->batch, &b, &e), NP_OK);
        if (np_trainer_step(tr, &b, &loss, &e)) fail_msg("step %ld: %s", s, e.msg);
        assert_true(isfinite(loss));
    }
    if (np_trainer_finish(tr, &e)) fail_msg("finish: %s", e.msg);
    np_trainer_free(tr);
    np_batch_free(&b);
    np_source_free(src);
    return m;
}

static inline np_model_t *train(const np_config *c, long steps) {
    return train_on(c, c, steps);
}

/* Trains with the batches ahead that the pipeline asks for (as apps/nestpipe.c does). */
static inline np_model_t *train_ahead(const np_config *c, long steps, uint64_t *synced) {
    np_error e = {{0}};
    np_source_t *src;
    np_model_t *m;
    np_trainer_t *tr;
    np_batch ring[6] = {{0}};
    if (np_model_create(c, &m, &e) || np_source_open(c, NP_SPLIT_TRAIN, &src, &e) ||
        np_trainer_create(c, m, &tr, &e))
        fail_msg("setup: %s", e.msg);
    int ahead = np_trainer_lookahead(tr);
    long loaded = 0;
    for (long s = 0; s < steps; s++) {
        while (loaded <= s + ahead && loaded < steps) {
            assert_int_equal(np_source_next_batch(src, c->batch, &ring[loaded % 6], &e), NP_OK);
            loaded++;
        }
        const np_batch *win[6];
        int n = 0;
        for (long k = s; k < loaded && n <= ahead; k++)
            win[n++] = &ring[k % 6];
        double loss;
        if (np_trainer_step_ahead(tr, win, n, &loss, &e)) fail_msg("step %ld: %s", s, e.msg);
        assert_true(isfinite(loss));
    }
    if (np_trainer_finish(tr, &e)) fail_msg("finish: %s", e.msg);
    if (synced) *synced = np_trainer_synced_rows(tr);
    np_trainer_free(tr);
    for (int k = 0; k < 6; k++)
        np_batch_free(&ring[k]);
    np_source_free(src);
    return m;
}

/* Max of |a-b| / (atol + rtol |b|) over every parameter (<= 1 means within tolerance). */
static inline double model_diff(const np_model_t *a, const np_model_t *b, double atol, double rtol) {
    double worst = 0;
    for (size_t i = 0; i < a->n_dense; i++) {
        double r = fabs((double)a->dense[i] - b->dense[i]) / (atol + rtol * fabs(b->dense[i]));
        worst = r > worst ? r : worst;
    }
    size_t n = (size_t)a->row_base[a->T] * a->d;
    for (size_t i = 0; i < n; i++) {
        double r =
            fabs((double)a->table_mem[i] - b->table_mem[i]) / (atol + rtol * fabs(b->table_mem[i]));
        worst = r > worst ? r : worst;
    }
    return worst;
}

static inline int same_bytes(const np_model_t *a, const np_model_t *b) {
    size_t n = (size_t)a->row_base[a->T] * a->d;
    return !memcmp(a->dense, b->dense, a->n_dense * 4) &&
           !memcmp(a->table_mem, b->table_mem, n * 4);
}

/* Trains cs (an engine) and cr (the reference) for `steps` and holds them within (atol,
 * rtol); shows the check can fail: the trained reference is far from its initial model. */
static inline void expect_near_reference(const np_config *cs, const np_config *cr, long steps,
                                         double atol, double rtol, const char *what) {
    np_model_t *ms = train(cs, steps), *mr = train(cr, steps);
    double d = model_diff(ms, mr, atol, rtol);
    print_message("%s: worst |engine-ref| is %.3g of the tolerance\n", what, d);
    assert_true(d <= 1.0);
    np_model_t *m0;
    np_error e = {{0}};
    assert_int_equal(np_model_create(cr, &m0, &e), NP_OK);
    assert_true(model_diff(m0, mr, atol, rtol) > 10.0);
    np_model_free(m0);
    np_model_free(ms);
    np_model_free(mr);
}

#endif
