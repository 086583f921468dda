/* The trainer as a library: np_train_run gives the model a program's own step loop gives;
 * every config key is either honoured by the step-level API or refused by it and honoured
 * by np_train_run (no key silently ignored: a key added without being classified here
 * fails the test); the step API under a pipelined mode either pipelines or says it
 * cannot; the model is read back in-process by tensor name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/model/model.h"
#include "nestpipe/checkpoint.h"
#include "nestpipe/dist.h"
#include "nestpipe/train.h"

static char dir[64]; /* a fresh folder for the run's files */

static void path_in(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

/* A small, fast model: 6 steps of 256 samples. */
static np_config small(void) {
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    static const char *kv[][2] = {{"tables", "4"},   {"rows", "1000"},   {"dim", "8"},
                                  {"bottom", "13-16-8"}, {"top", "16-1"}, {"batch", "256"},
                                  {"steps", "6"},    {"eval-samples", "512"}, {"quiet", "1"}};
    for (size_t k = 0; k < sizeof kv / sizeof *kv; k++)
        if (np_config_set(&c, kv[k][0], kv[k][1], "test", &e)) fail_msg("%s", e.msg);
    return c;
}

static void set(np_config *c, const char *key, const char *value) {
    np_error e = {{0}};
    if (np_config_set(c, key, value, "test", &e)) fail_msg("%s", e.msg);
}

static np_train_result run_ok(const np_config *c, np_model_t **model) {
    np_train_result r;
    np_error e = {{0}};
    np_status st = np_train_run(NULL, c, NULL, model, &r, &e);
    if (st) fail_msg("np_train_run: %s", e.msg);
    return r;
}

static long file_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long n = 0;
    for (int ch; (ch = getc(f)) != EOF;)
        n += ch == '\n';
    fclose(f);
    return n;
}

static int same_floats(const float *a, const float *b, size_t n) {
    return !memcmp(a, b, n * sizeof *a);
}

/* ---------------------------------------------------------------- every key */

/* How a key is honoured. RUN: only np_train_run honours it; np_trainer_create refuses it
 * set, and test_run_keys below checks what the run does with it. LIB: the step-level API
 * (sources, model, trainer) honours it; `where` names the check. */
enum { RUN, LIB };
static const struct {
    const char *key;
    int how;
    const char *where;
} keys[] = {
    {"data", LIB, "np_source_open (test_data_*)"},
    {"skip-bad-lines", LIB, "np_source_open (test_data_criteo)"},
    {"eval-every", LIB, "np_source_open (test_data_synthetic)"},
    {"eval-data", LIB, "np_source_open (test_source_eval_data below)"},
    {"epochs", LIB, "np_source_open (test_data_bin)"},
    {"shuffle-buffer", LIB, "np_source_open (test_data_bin)"},
    {"eval-interval", RUN, "evaluations during the run"},
    {"eval-samples", LIB, "np_source_open (test_data_synthetic)"},
    {"zipf", LIB, "the synthetic generator (test_data_synthetic)"},
    {"hot", LIB, "the synthetic generator (test_data_synthetic)"},
    {"groups", LIB, "the synthetic generator (test_data_synthetic)"},
    {"seq-len", LIB, "np_graph_create, the pooling kernels, the sources (test_seq.sh)"},
    {"seq-negatives", LIB, "np_source_next_batch (test_data_synthetic, test_seq.sh)"},
    {"seq-clusters", LIB, "the synthetic generator (test_data_synthetic)"},
    {"hstu-blocks", LIB, "np_graph_from_config (test_seq.sh)"},
    {"hstu-heads", LIB, "np_graph_from_config (test_seq.sh)"},
    {"loss", LIB, "the trainers' loss (test_seq.sh)"},
    {"model", LIB, "np_graph_from_config (test_model, test_dcnv2.sh)"},
    {"tables", LIB, "np_model_create"},
    {"rows", LIB, "np_model_create"},
    {"dim", LIB, "np_model_create"},
    {"bottom", LIB, "np_graph_from_config"},
    {"top", LIB, "np_graph_from_config"},
    {"cross-layers", LIB, "np_graph_from_config (test_dcnv2.sh)"},
    {"cross-rank", LIB, "np_graph_from_config (test_dcnv2.sh)"},
    {"deep", LIB, "np_graph_from_config (test_dcnv2.sh)"},
    {"model-file", LIB, "np_graph_from_config (test_modelfile, test_models.sh)"},
    {"plugin", LIB, "np_graph_from_config (test_check_layer.sh, test_plugin.sh)"},
    {"dense-features", LIB, "np_source_open, np_graph_create (test_config)"},
    {"init-params", LIB, "np_model_create (test_init_params below)"},
    {"steps", LIB, "the caller's loop; np_train_run's steps"},
    {"batch", LIB, "the caller's loop and the trainer"},
    {"lr", LIB, "the trainer"},
    {"sparse-optim", LIB, "the trainer"},
    {"adagrad-eps", LIB, "the trainer"},
    {"seed", LIB, "np_model_create, np_source_open"},
    {"engine", LIB, "np_trainer_create"},
    {"sched", LIB, "the StarPU engine (test_engine)"},
    {"chunks", LIB, "the StarPU engine (test_engine)"},
    {"windows", LIB, "the StarPU engine (test_engine)"},
    {"cluster", LIB, "the StarPU engine (test_cluster)"},
    {"shard", LIB, "np_model_create, the engine (test_mpi.sh)"},
    {"precision", LIB, "the kernels (test_kernels)"},
    {"pipeline", LIB, "the StarPU engine (test_step_api_pipelines below)"},
    {"split-rows", LIB, "the StarPU engine (test_mpi.sh)"},
    {"priorities", LIB, "the StarPU engine's priorities (test_critical, test_tune.sh)"},
    {"exchange", LIB, "the StarPU engine's route (test_engine, test_comm_backend, test_mpi.sh)"},
    {"comm", LIB, "the StarPU engine (test_engine_gpu)"},
    {"a2a", LIB, "the StarPU engine's collectives (test_a2a.sh)"},
    {"ranks-per-host", LIB, "the StarPU engine's collectives (test_a2a.sh)"},
    {"allreduce-bucket", LIB, "the StarPU engine's step graph (test_a2a.sh, test_stepgraph)"},
    {"rank-timeout", RUN, "the run's watchdog (test_mpi.sh: a stalled rank is named)"},
    {"gpus", LIB, "the StarPU engine (test_engine_gpu)"},
    {"place", LIB, "the StarPU engine (test_engine_gpu)"},
    {"metrics-json", RUN, "the run's metrics file"},
    {"trace", LIB, "np_trainer_finish writes it (test_trace)"},
    {"dump-params", RUN, "the run's dump"},
    {"log-json", RUN, "the run's log"},
    {"log-every", RUN, "the run's progress lines"},
    {"checkpoint-dir", LIB, "np_ckpt_save (nestpipe/checkpoint.h; test_ckpt.sh), the run's"},
    {"checkpoint-every", RUN, "the run's checkpoints"},
    {"keep-checkpoints", LIB, "np_ckpt_save (test_ckpt.sh), the run's checkpoints"},
    {"resume", LIB, "np_ckpt_load (test_ckpt.sh); np_model_create skips init-params"},
    {"quiet", LIB, "the StarPU engine's notices; the run's lines"},
    {"explain-placement", LIB, "np_trainer_create prints it (test_explain_placement below)"},
};
#define N_KEYS (sizeof keys / sizeof *keys)

/* A value other than the default, which the step API must accept or refuse. */
static const char *other_value(const char *key) {
    static const struct {
        const char *key, *value;
    } v[] = {{"eval-interval", "2"},     {"metrics-json", "m.json"}, {"dump-params", "d.params"},
             {"log-json", "l.jsonl"},    {"log-every", "2"},         {"checkpoint-dir", "ck"},
             {"checkpoint-every", "2"},  {"keep-checkpoints", "1"},  {"resume", "ck"},
             {"rank-timeout", "5"}};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        if (!strcmp(v[i].key, key)) return v[i].value;
    return NULL;
}

/* Every key of the library's table is classified here, and the table's run_only flag
 * agrees: a new key cannot be silently ignored by one of the two APIs. */
static void test_every_key_classified(void **state) {
    (void)state;
    int n = 0;
    for (int i = 0; np_config_key_at(i); i++, n++) {
        const np_config_key *k = np_config_key_at(i);
        size_t j = 0;
        while (j < N_KEYS && strcmp(keys[j].key, k->name))
            j++;
        if (j == N_KEYS) fail_msg("key %s is not classified in tests/test_run.c", k->name);
        if (k->run_only != (keys[j].how == RUN))
            fail_msg("key %s: run_only %d in the library, %s here", k->name, k->run_only,
                     keys[j].how == RUN ? "RUN" : "LIB");
    }
    assert_int_equal(n, (int)N_KEYS);
}

/* The step API refuses each run-only key set (naming it), and accepts it at its default. */
static void test_step_api_refuses_run_keys(void **state) {
    (void)state;
    np_config plain = small();
    set(&plain, "engine", "reference");
    np_model_t *m;
    np_trainer_t *tr = NULL;
    np_error e = {{0}};
    if (np_model_create(&plain, &m, &e) || np_trainer_create(&plain, m, &tr, &e))
        fail_msg("%s", e.msg);
    np_trainer_free(tr);
    for (size_t j = 0; j < N_KEYS; j++) {
        if (keys[j].how != RUN) continue;
        np_config c = plain;
        const char *v = other_value(keys[j].key);
        if (!v) fail_msg("run-only key %s has no value in other_value(): add one", keys[j].key);
        char p[128];
        if (strchr(v, '.') || !strcmp(v, "ck")) { /* a file or folder: in the test's own */
            path_in(p, sizeof p, v);
            v = p;
        }
        set(&c, keys[j].key, v);
        tr = NULL;
        assert_int_equal(np_trainer_create(&c, m, &tr, &e), NP_STATUS_BAD_INPUT);
        assert_null(tr);
        if (!strstr(e.msg, keys[j].key) || !strstr(e.msg, "np_train_run"))
            fail_msg("%s refused with '%s'", keys[j].key, e.msg);
    }
    np_model_free(m);
}

/* np_train_run honours each run-only key: its files, evaluations, progress lines and
 * checkpoints are there, and a run resumes from them. */
static void test_run_keys(void **state) {
    (void)state;
    char metrics[128], dump[128], log[128], ck[128], out[128];
    path_in(metrics, sizeof metrics, "m.json");
    path_in(dump, sizeof dump, "d.params");
    path_in(log, sizeof log, "l.jsonl");
    path_in(ck, sizeof ck, "ck");
    path_in(out, sizeof out, "stdout.txt");
    np_config c = small();
    set(&c, "engine", "reference");
    set(&c, "metrics-json", metrics);
    set(&c, "dump-params", dump);
    set(&c, "log-json", log);
    set(&c, "eval-interval", "2");
    set(&c, "checkpoint-dir", ck); /* honoured by np_ckpt_save, which the run calls */
    set(&c, "checkpoint-every", "2");
    set(&c, "keep-checkpoints", "1");
    set(&c, "quiet", "0");
    set(&c, "log-every", "2");
    /* the progress lines go to stdout when stderr is not a terminal: catch both in files
     * (a terminal on stderr would get redrawn lines instead) */
    char err_path[128];
    path_in(err_path, sizeof err_path, "stderr.txt");
    fflush(stdout);
    fflush(stderr);
    int saved = dup(1), saved2 = dup(2), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644),
        fd2 = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved >= 0 && saved2 >= 0 && fd >= 0 && fd2 >= 0);
    dup2(fd, 1);
    dup2(fd2, 2);
    close(fd);
    close(fd2);
    np_train_result r = run_ok(&c, NULL);
    fflush(stdout);
    fflush(stderr);
    dup2(saved, 1);
    dup2(saved2, 2);
    close(saved);
    close(saved2);
    assert_int_equal(r.steps, 6);
    assert_int_equal(r.evals, 2);       /* after steps 2 and 4; step 6 is the run's own */
    assert_int_equal(r.ckpt_count, 3);  /* steps 2, 4, 6 */
    assert_true(file_lines(metrics) > 10);
    assert_int_equal(file_lines(log), 6 + 2 + 1); /* steps, evaluations, the summary */
    struct stat sb;
    assert_int_equal(stat(dump, &sb), 0);
    /* log-every 2: lines at steps 2 and 4, then the final one */
    FILE *f = fopen(out, "r");
    char line[512];
    int progress = 0;
    while (f && fgets(line, sizeof line, f))
        progress += !strncmp(line, "step ", 5);
    if (f) fclose(f);
    assert_int_equal(progress, 3);
    /* keep-checkpoints 1: only the newest folder stays */
    int folders = 0;
    DIR *dh = opendir(ck);
    assert_non_null(dh);
    for (struct dirent *de; (de = readdir(dh));)
        folders += !strncmp(de->d_name, "ckpt-", 5);
    closedir(dh);
    assert_int_equal(folders, 1);
    /* resume: two more steps from the checkpoint of step 6 */
    np_config c2 = small();
    set(&c2, "engine", "reference");
    set(&c2, "resume", ck);
    set(&c2, "steps", "8");
    np_train_result r2 = run_ok(&c2, NULL);
    assert_int_equal(r2.resumed_step, 6);
    assert_int_equal(r2.steps, 8);
}

/* --eval-data honoured by the sources themselves: the eval split is the whole file. */
static void test_source_eval_data(void **state) {
    (void)state;
    char bin[128];
    path_in(bin, sizeof bin, "eval.bin");
    np_config c = small();
    np_error e = {{0}};
    if (np_generate_synthetic(&c, 300, bin, &e)) fail_msg("%s", e.msg);
    char spec[160];
    snprintf(spec, sizeof spec, "bin:%s", bin);
    set(&c, "eval-data", spec);
    np_source_t *src;
    if (np_source_open(&c, NP_SPLIT_EVAL, &src, &e)) fail_msg("%s", e.msg);
    np_batch b = {0};
    long n = 0;
    while (np_source_next_batch(src, 128, &b, &e) == NP_OK) /* the last one partial */
        n += b.n;
    assert_int_equal(n, 300); /* every record, no cap of eval-samples 512 needed */
    np_batch_free(&b);
    np_source_free(src);
}

/* --init-params honoured by np_model_create: the model starts from the dump's values. */
static void test_init_params(void **state) {
    (void)state;
    char dump[128];
    path_in(dump, sizeof dump, "init.params");
    np_config c = small();
    set(&c, "engine", "reference");
    set(&c, "dump-params", dump);
    np_model_t *trained = NULL;
    run_ok(&c, &trained);
    np_config c2 = small();
    set(&c2, "init-params", dump);
    np_model_t *m;
    np_error e = {{0}};
    if (np_model_create(&c2, &m, &e)) fail_msg("%s", e.msg);
    assert_true(same_floats(m->dense, trained->dense, m->n_dense));
    assert_true(same_floats(m->table_mem, trained->table_mem,
                            (size_t)m->row_base[m->T] * (size_t)m->d));
    np_model_free(m);
    np_model_free(trained);
}

/* A checkpoint holding a non-finite value (a run that saved a diverging model) is refused
 * on resume, naming the tensor and the element; the same model as a dump is refused by
 * --init-params alike (issue 26: it trained on, keeping the NaN). */
static void test_nonfinite_refused(void **state) {
    (void)state;
    static const struct {
        int table; /* 1: emb.2, row 5, column 3; 0: the dense tensor top.1.bias */
        float v;
        const char *ckpt, *dump;
    } cases[] = {
        {1, NAN, "tensor emb.2: row 5, column 3 is nan",
         "tensor 10 (emb.2): element 43 (row 5, column 3) is nan"},
        {0, -INFINITY, "tensor top.1.bias: element 0 is -inf",
         "tensor 7 (top.1.bias): element 0 is -inf"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char ck[128], dump[128];
        path_in(ck, sizeof ck, k ? "ck_nan1" : "ck_nan0");
        path_in(dump, sizeof dump, "nan.params");
        np_config c = small();
        set(&c, "engine", "reference");
        set(&c, "checkpoint-dir", ck);
        np_model_t *m;
        np_error e = {{0}};
        if (np_model_create(&c, &m, &e)) fail_msg("%s", e.msg);
        if (cases[k].table)
            m->table[2][5 * 8 + 3] = cases[k].v;
        else
            m->dense[m->n_dense - 1] = cases[k].v; /* the last layer's bias: one value */
        np_ckpt_state s = {.step = 2};
        np_ckpt_stats cs;
        if (np_ckpt_save(NULL, &c, NULL, m, &s, &cs, &e)) fail_msg("%s", e.msg);
        if (np_model_dump(m, dump, &e)) fail_msg("%s", e.msg);
        np_model_free(m);
        np_config c2 = small();
        set(&c2, "engine", "reference");
        set(&c2, "resume", ck);
        np_train_result r;
        assert_int_equal(np_train_run(NULL, &c2, NULL, NULL, &r, &e), NP_STATUS_BAD_INPUT);
        if (!strstr(e.msg, cases[k].ckpt)) fail_msg("resume: %s", e.msg);
        np_config c3 = small();
        set(&c3, "init-params", dump);
        assert_int_equal(np_model_create(&c3, &m, &e), NP_STATUS_BAD_INPUT);
        if (!strstr(e.msg, cases[k].dump)) fail_msg("init-params: %s", e.msg);
    }
}

/* explain-placement honoured by the StarPU trainer: each rank says where it runs. */
static void test_explain_placement(void **state) {
    (void)state;
    char err_path[128];
    path_in(err_path, sizeof err_path, "stderr.txt");
    np_config c = small();
    set(&c, "explain-placement", "1");
    np_model_t *m;
    np_trainer_t *tr;
    np_error e = {{0}};
    if (np_model_create(&c, &m, &e)) fail_msg("%s", e.msg);
    fflush(stderr);
    int saved = dup(2), fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    np_status st = np_trainer_create(&c, m, &tr, &e);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (st) fail_msg("%s", e.msg);
    np_trainer_free(tr);
    np_model_free(m);
    FILE *f = fopen(err_path, "r");
    char line[1024] = "";
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, "nestpipe: placement: ") != NULL;
    if (f) fclose(f);
    assert_true(found);
}

/* ---------------------------------------------------------------- the same model */

/* A program's own loop of np_trainer_step (sequential) and np_train_run give the same
 * bytes; np_train_run keeps the model for the caller. */
static void test_run_equals_step_loop(void **state) {
    (void)state;
    np_config c = small();
    set(&c, "pipeline", "sequential");
    np_model_t *ran = NULL;
    np_train_result r = run_ok(&c, &ran);
    assert_non_null(ran);
    assert_true(isfinite(r.train_loss) && r.eval.n > 0);
    assert_int_equal(r.pipeline, NP_PIPELINE_SEQUENTIAL);

    np_model_t *m;
    np_source_t *src;
    np_trainer_t *tr;
    np_error e = {{0}};
    np_batch b = {0};
    if (np_model_create(&c, &m, &e) || np_source_open(&c, NP_SPLIT_TRAIN, &src, &e) ||
        np_trainer_create(&c, m, &tr, &e))
        fail_msg("%s", e.msg);
    for (int s = 0; s < 6; s++) {
        double loss;
        if (np_source_next_batch(src, c.batch, &b, &e) || np_trainer_step(tr, &b, &loss, &e))
            fail_msg("step %d: %s", s, e.msg);
    }
    if (np_trainer_finish(tr, &e)) fail_msg("%s", e.msg);
    assert_true(same_floats(m->dense, ran->dense, m->n_dense));
    assert_true(same_floats(m->table_mem, ran->table_mem, (size_t)m->row_base[m->T] * (size_t)m->d));
    np_trainer_free(tr);
    np_batch_free(&b);
    np_source_free(src);
    np_model_free(m);
    np_model_free(ran);
}

/* The step API: an explicit pipelined mode given one batch a step says it cannot pipeline
 * (at the step after the one that seemed to end the data); "auto" runs without look-ahead
 * and gives sequential's bytes; given the batches ahead, dbp gives them too. */
static np_model_t *step_loop(np_config *c, int ahead_given, np_status *st, np_error *e,
                             np_pipeline *ran) {
    np_model_t *m;
    np_source_t *src;
    np_trainer_t *tr;
    np_batch ring[6] = {{0}};
    if (np_model_create(c, &m, e) || np_source_open(c, NP_SPLIT_TRAIN, &src, e) ||
        np_trainer_create(c, m, &tr, e))
        fail_msg("%s", e->msg);
    *st = NP_OK;
    long loaded = 0;
    for (long s = 0; s < 6 && !*st; s++) {
        int ahead = ahead_given ? np_trainer_lookahead(tr) : 0;
        while (loaded <= s + ahead && loaded < 6) {
            if (np_source_next_batch(src, c->batch, &ring[loaded % 6], e)) fail_msg("%s", e->msg);
            loaded++;
        }
        const np_batch *win[6];
        int n = 0;
        for (long k = s; k < loaded && n <= ahead; k++)
            win[n++] = &ring[k % 6];
        double loss;
        *st = np_trainer_step_ahead(tr, win, n, &loss, e);
    }
    *ran = np_trainer_pipeline(tr);
    np_status fst = np_trainer_finish(tr, e);
    if (!*st) *st = fst;
    np_trainer_free(tr);
    for (int k = 0; k < 6; k++)
        np_batch_free(&ring[k]);
    np_source_free(src);
    return m;
}

static void test_step_api_pipelines(void **state) {
    (void)state;
    np_status st;
    np_error e = {{0}};
    np_pipeline ran;
    np_config seq = small();
    set(&seq, "pipeline", "sequential");
    np_model_t *ms = step_loop(&seq, 0, &st, &e, &ran);
    assert_int_equal(st, NP_OK);

    np_config dbp = small();
    set(&dbp, "pipeline", "dbp");
    np_model_t *m1 = step_loop(&dbp, 0, &st, &e, &ran); /* one batch a step: refused */
    assert_int_equal(st, NP_STATUS_BAD_INPUT);
    if (!strstr(e.msg, "pipeline dbp looks 4 batches ahead") || !strstr(e.msg, "step 2"))
        fail_msg("%s", e.msg);
    np_model_free(m1);
    np_model_t *m2 = step_loop(&dbp, 1, &st, &e, &ran); /* with the batches ahead */
    assert_int_equal(st, NP_OK);
    assert_int_equal(ran, NP_PIPELINE_DBP);
    assert_true(same_floats(m2->dense, ms->dense, ms->n_dense));

    np_config aut = small(); /* auto, one batch a step: no look-ahead, the same model */
    np_model_t *m3 = step_loop(&aut, 0, &st, &e, &ran);
    assert_int_equal(st, NP_OK);
    assert_int_equal(ran, NP_PIPELINE_SEQUENTIAL);
    assert_true(same_floats(m3->dense, ms->dense, ms->n_dense));
    assert_true(same_floats(m3->table_mem, ms->table_mem,
                            (size_t)ms->row_base[ms->T] * (size_t)ms->d));
    np_model_free(m2);
    np_model_free(m3);
    np_model_free(ms);
}

/* ---------------------------------------------------------------- reading a model back */

static void test_model_read(void **state) {
    (void)state;
    np_config c = small();
    np_model_t *m;
    np_error e = {{0}};
    if (np_model_create(&c, &m, &e)) fail_msg("%s", e.msg);
    int n = np_model_tensor_count(m);
    assert_int_equal(n, 2 * 2 + 2 * 2 + 4); /* bottom, top (weight, bias each), 4 tables */
    char name[64];
    int nd;
    int64_t dims[2];
    assert_int_equal(np_model_tensor_info(m, 0, name, sizeof name, &nd, dims, &e), NP_OK);
    assert_string_equal(name, "bottom.0.weight");
    assert_int_equal(nd, 2);
    assert_true(dims[0] == 16 && dims[1] == 13);
    assert_int_equal(np_model_tensor_info(m, n - 1, name, sizeof name, &nd, dims, &e), NP_OK);
    assert_string_equal(name, "emb.3");
    assert_true(dims[0] == 1000 && dims[1] == 8);
    assert_int_equal(np_model_tensor_info(m, n, name, sizeof name, &nd, dims, &e),
                     NP_STATUS_BAD_INPUT);
    float *buf = malloc(8000 * sizeof *buf);
    size_t got;
    assert_int_equal(np_dist_model_read(NULL, m, "emb.2", buf, 8000, &got, &e), NP_OK);
    assert_int_equal(got, 8000);
    assert_true(same_floats(buf, m->table[2], 8000));
    assert_int_equal(np_dist_model_read(NULL, m, "top.0.bias", buf, 8000, &got, &e), NP_OK);
    assert_int_equal(got, 16);
    const np_node *top0 = &m->graph->node[3]; /* bottom.0, bottom.1, interaction, top.0 */
    assert_string_equal(top0->name, "top.0");
    assert_true(same_floats(buf, m->dense + top0->poff[1], 16));
    assert_int_equal(np_dist_model_read(NULL, m, "emb.2", buf, 100, &got, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "room for 100"));
    assert_int_equal(np_dist_model_read(NULL, m, "top.9.bias", buf, 8000, &got, &e),
                     NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "no tensor 'top.9.bias'"));
    free(buf);
    np_model_free(m);
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/np_run_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_key_classified),
        cmocka_unit_test(test_step_api_refuses_run_keys),
        cmocka_unit_test(test_run_keys),
        cmocka_unit_test(test_source_eval_data),
        cmocka_unit_test(test_init_params),
        cmocka_unit_test(test_nonfinite_refused),
        cmocka_unit_test(test_explain_placement),
        cmocka_unit_test(test_run_equals_step_loop),
        cmocka_unit_test(test_step_api_pipelines),
        cmocka_unit_test(test_model_read),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
