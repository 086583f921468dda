/* The engine on a GPU (CUDA flavour; exits 77, skipped, where CUDA sees no device):
 * every node pinned to the GPU trains the reference trainer's model within tolerance; a
 * pinned run gives the same bytes in every pipeline and scheduler; a mixed CPU + GPU run
 * chosen by dmda stays within tolerance; the pinned tasks really ran on the GPU (the
 * trace's worker names); one rank over NCCL gives the bytes of MPI. docs/gpu.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/util.h"
#include "codelets/cuda/cuda.h"
#include "engineutil.h"

/* GPU vs reference after 50 steps: cuBLAS and oneDNN round the products differently
 * (another blocking of the k sums; no TF32), about 1e-6 relative per product, which the
 * training compounds as the CPU engine's chunk sums do (EQ_*), ten times more room. */
#define GPU_RTOL 1e-3
#define GPU_ATOL 1e-4

static np_config gpu_cfg(const char *optim, const char *place, const char *sched) {
    np_config c = small_cfg(NP_ENGINE_STARPU, optim);
    np_error e = {{0}};
    if (np_config_set(&c, "gpus", "1", "t", &e) || np_config_set(&c, "place", place, "t", &e) ||
        np_config_set(&c, "sched", sched, "t", &e) || np_config_check(&c, &e))
        fail_msg("config: %s", e.msg);
    return c;
}

static void check_vs_reference(const char *optim, const char *place, const char *sched) {
    np_config cg = gpu_cfg(optim, place, sched), cr = small_cfg(NP_ENGINE_REFERENCE, optim);
    char what[96];
    snprintf(what, sizeof what, "%s, place %s, sched %s", optim, place, sched);
    expect_near_reference(&cg, &cr, 50, GPU_ATOL, GPU_RTOL, what);
}

static void test_pinned_matches_reference_sgd(void **state) {
    (void)state;
    check_vs_reference("sgd", "all=cuda", "lws");
}

static void test_pinned_matches_reference_adagrad(void **state) {
    (void)state;
    check_vs_reference("rowwise-adagrad", "all=cuda", "lws");
}

/* dmda picks CPU or GPU per task from the perf models: any mix, within tolerance */
static void test_mixed_matches_reference(void **state) {
    (void)state;
    check_vs_reference("rowwise-adagrad", "auto", "dmda");
}

/* Pinned placement fixes the arithmetic: the pipelines and schedulers only reorder it. */
static void test_pinned_same_bytes(void **state) {
    (void)state;
    struct {
        np_pipeline pipe;
        const char *sched;
    } runs[] = {{NP_PIPELINE_SEQUENTIAL, "lws"},
                {NP_PIPELINE_SEQUENTIAL, "eager"},
                {NP_PIPELINE_SEQUENTIAL, "dmdas"},
                {NP_PIPELINE_DBP, "lws"},
                {NP_PIPELINE_DBP, "dmdas"}};
    np_model_t *first = NULL;
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        np_config c = gpu_cfg("rowwise-adagrad", "all=cuda", runs[r].sched);
        c.pipeline = runs[r].pipe;
        np_model_t *m = train(&c, 12);
        if (!first) {
            first = m;
            continue;
        }
        if (!same_bytes(first, m))
            fail_msg("pipeline %d, sched %s differs from sequential/lws", (int)runs[r].pipe,
                     runs[r].sched);
        np_model_free(m);
    }
    /* windows fix the arithmetic too: fwp and nestpipe with the same windows agree */
    np_model_t *fw[2];
    for (int k = 0; k < 2; k++) {
        np_config c = gpu_cfg("sgd", "all=cuda", "lws");
        c.pipeline = k ? NP_PIPELINE_NESTPIPE : NP_PIPELINE_FWP;
        c.windows = 2;
        fw[k] = train(&c, 12);
    }
    assert_true(same_bytes(fw[0], fw[1]));
    np_model_free(fw[0]);
    np_model_free(fw[1]);
    np_model_free(first);
}

/* --comm nccl on one rank: the row and gradient exchanges go through NCCL send/receive to
 * itself, which moves the same rows as the host copies of --comm mpi: the same bytes. */
static void test_nccl_one_rank_same_bytes(void **state) {
    (void)state;
    np_model_t *m[2];
    for (int k = 0; k < 2; k++) {
        np_config c = gpu_cfg("rowwise-adagrad", "all=cuda", "lws");
        c.comm = k ? NP_COMM_NCCL : NP_COMM_MPI;
        m[k] = train(&c, 12);
    }
    assert_true(same_bytes(m[0], m[1]));
    np_model_free(m[0]);
    np_model_free(m[1]);
}

/* With dense=cuda, every layer task ran on a CUDA worker, and h2d too. */
static void test_pinned_tasks_ran_on_gpu(void **state) {
    (void)state;
    np_config c = gpu_cfg("sgd", "dense=cuda", "lws");
    char path[] = "/tmp/np_gpu_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    snprintf(c.trace, sizeof c.trace, "%s", path);
    np_model_free(train(&c, 3));
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    unlink(path);
    if (!root) fail_msg("trace is not JSON: %s line %d", jerr.text, jerr.line);
    json_t *events = json_object_get(root, "traceEvents"), *x;
    char names[256][96] = {{0}};
    size_t i;
    json_array_foreach(events, i, x) { /* thread names first */
        const char *ph = json_string_value(json_object_get(x, "ph"));
        long tid = (long)json_integer_value(json_object_get(x, "tid"));
        const char *nm = json_string_value(json_object_get(json_object_get(x, "args"), "name"));
        if (ph && !strcmp(ph, "M") && nm && tid >= 0 && tid < 256)
            snprintf(names[tid], sizeof names[tid], "%s", nm);
    }
    long on_gpu = 0, layers = 0, h2d = 0;
    json_array_foreach(events, i, x) {
        const char *ph = json_string_value(json_object_get(x, "ph"));
        if (!ph || strcmp(ph, "X")) continue;
        const char *name = json_string_value(json_object_get(x, "name"));
        long tid = (long)json_integer_value(json_object_get(x, "tid"));
        int gpu = tid >= 0 && tid < 256 && strstr(names[tid], "CUDA");
        if (name && (strstr(name, "linear_") || strstr(name, "dot_"))) {
            layers++;
            on_gpu += gpu;
        }
        if (name && !strcmp(name, "h2d")) {
            assert_true(gpu);
            h2d++;
        }
    }
    print_message("%ld of %ld layer tasks on a CUDA worker, %ld h2d\n", on_gpu, layers, h2d);
    assert_true(layers > 0 && h2d == 3);
    assert_int_equal(on_gpu, layers);
    json_decref(root);
}

int main(void) {
    if (np_cuda_devices() == 0) {
        printf("test_engine_gpu: skipped, no GPU (%s)\n", np_cuda_info());
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pinned_matches_reference_sgd),
        cmocka_unit_test(test_pinned_matches_reference_adagrad),
        cmocka_unit_test(test_mixed_matches_reference),
        cmocka_unit_test(test_pinned_same_bytes),
        cmocka_unit_test(test_pinned_tasks_ran_on_gpu),
        cmocka_unit_test(test_nccl_one_rank_same_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
