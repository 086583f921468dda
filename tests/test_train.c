/* Training tests through the public API: the reference trainer learns the synthetic
 * teacher (eval AUC well above chance, loss falls), runs are reproducible bit for bit, and
 * the reference engine is the one under test here (test_engine.c covers StarPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/model/model.h"

static np_config learn_cfg(void) {
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    /* smaller than the default job so the test stays quick on two cores */
    if (np_config_set(&c, "rows", "5000", "t", &e) || np_config_set(&c, "batch", "512", "t", &e) ||
        np_config_set(&c, "eval-samples", "8192", "t", &e) ||
        np_config_set(&c, "engine", "reference", "t", &e) || np_config_check(&c, &e))
        fail_msg("config: %s", e.msg);
    return c;
}

static double eval_auc(const np_model_t *m, const np_config *c) {
    np_error e = {{0}};
    np_source_t *ev;
    np_eval_result r;
    assert_int_equal(np_source_open(c, NP_SPLIT_EVAL, &ev, &e), NP_OK);
    assert_int_equal(np_evaluate(m, ev, c, &r, &e), NP_OK);
    assert_int_equal(r.n, c->eval_samples);
    np_source_free(ev);
    return r.auc;
}

/* Trains `steps` steps; returns mean loss of the first and last 10 steps. */
static void train(np_model_t *m, const np_config *c, long steps, double *first, double *last) {
    np_error e = {{0}};
    np_source_t *src;
    np_trainer_t *tr;
    np_batch b = {0};
    assert_int_equal(np_source_open(c, NP_SPLIT_TRAIN, &src, &e), NP_OK);
    assert_int_equal(np_trainer_create(c, m, &tr, &e), NP_OK);
    *first = *last = 0;
    for (long s = 0; s < steps; s++) {
        double loss;
        assert_int_equal(np_source_next_batch(src, c->batch, &b, &e), NP_OK);
        if (np_trainer_step(tr, &b, &loss, &e)) fail_msg("%s", e.msg);
        assert_true(isfinite(loss));
        if (s < 10) *first += loss / 10;
        if (s >= steps - 10) *last += loss / 10;
    }
    np_batch_free(&b);
    np_trainer_free(tr);
    np_source_free(src);
}

static void test_learns_synthetic(void **state) {
    (void)state;
    np_config c = learn_cfg();
    np_error e = {{0}};
    np_model_t *m;
    assert_int_equal(np_model_create(&c, &m, &e), NP_OK);
    double auc0 = eval_auc(m, &c);
    double first, last;
    train(m, &c, 200, &first, &last);
    double auc1 = eval_auc(m, &c);
    print_message("eval AUC %.4f -> %.4f, loss %.4f -> %.4f\n", auc0, auc1, first, last);
    assert_true(auc1 >= 0.70);
    assert_true(auc1 > auc0 + 0.1);
    assert_true(last < first - 0.02);
    np_model_free(m);
}

static void test_reproducible(void **state) {
    (void)state;
    np_config c = learn_cfg();
    np_error e = {{0}};
    assert_int_equal(np_config_set(&c, "sparse-optim", "rowwise-adagrad", "t", &e), NP_OK);
    np_model_t *a, *b;
    double f, l;
    assert_int_equal(np_model_create(&c, &a, &e), NP_OK);
    assert_int_equal(np_model_create(&c, &b, &e), NP_OK);
    train(a, &c, 20, &f, &l);
    train(b, &c, 20, &f, &l);
    assert_memory_equal(a->dense, b->dense, a->n_dense * sizeof(float));
    for (int t = 0; t < a->T; t++) {
        assert_memory_equal(a->table[t], b->table[t], (size_t)a->rows[t] * a->d * sizeof(float));
        assert_memory_equal(a->state[t], b->state[t], (size_t)a->rows[t] * sizeof(float));
    }
    np_model_free(a);
    np_model_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learns_synthetic),
        cmocka_unit_test(test_reproducible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
