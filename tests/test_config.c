/* Config tests: every key's parser, INI loading with line numbers, cross-field checks.
 * Error texts are checked, not only status codes: they are the user interface. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nestpipe/layer.h"
#include "runtime/train/agree.h"
#include "nestpipe/nestpipe.h"

static char tmpdir[64];

static const char *write_file(const char *name, const char *text) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void expect_bad(const char *key, const char *value, const char *fragment) {
    np_config c, before;
    np_error e = {{0}};
    np_config_defaults(&c);
    before = c;
    assert_int_equal(np_config_set(&c, key, value, "--x", &e), NP_STATUS_BAD_INPUT);
    if (!strstr(e.msg, fragment)) fail_msg("message '%s' lacks '%s'", e.msg, fragment);
    assert_non_null(strstr(e.msg, "--x"));
    assert_memory_equal(&c, &before, sizeof c); /* unchanged on failure */
}

static void test_defaults_valid(void **state) {
    (void)state;
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    assert_int_equal(np_config_check(&c, &e), NP_OK);
    assert_int_equal(np_config_top_input(&c), 16 + 27 * 26 / 2);
    assert_int_equal(np_config_rows(&c, 25), 20000);
}

static void test_set_good_values(void **state) {
    (void)state;
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    assert_int_equal(np_config_set(&c, "bottom", "13-512-256-64-16", "t", &e), NP_OK);
    assert_int_equal(c.n_bottom, 5);
    assert_int_equal(c.bottom[1], 512);
    assert_int_equal(c.bottom[4], 16);
    assert_int_equal(np_config_set(&c, "top", "512-256-1", "t", &e), NP_OK);
    assert_int_equal(c.n_top, 3);
    assert_int_equal(np_config_set(&c, "rows", "10,20,30", "t", &e), NP_OK);
    assert_int_equal(c.n_rows, 3);
    assert_int_equal(c.rows[2], 30);
    assert_int_equal(np_config_set(&c, "tables", "3", "t", &e), NP_OK);
    assert_int_equal(np_config_rows(&c, 1), 20);
    assert_int_equal(np_config_set(&c, "data", "criteo:/x/y.tsv", "t", &e), NP_OK);
    assert_int_equal(c.data, NP_DATA_CRITEO);
    assert_string_equal(c.data_path, "/x/y.tsv");
    assert_int_equal(np_config_set(&c, "sparse-optim", "rowwise-adagrad", "t", &e), NP_OK);
    assert_int_equal(c.sparse_optim, NP_SPARSE_ROWWISE_ADAGRAD);
    assert_int_equal(np_config_set(&c, "lr", "0.05", "t", &e), NP_OK);
    assert_true(c.lr == 0.05);
    assert_int_equal(np_config_set(&c, "seed", "18446744073709551615", "t", &e), NP_OK);
    assert_true(c.seed == UINT64_MAX);
    assert_int_equal(np_config_set(&c, "quiet", "yes", "t", &e), NP_OK);
    assert_int_equal(c.quiet, 1);
}

static void test_set_bad_values(void **state) {
    (void)state;
    expect_bad("steps", "-1", "bad value '-1' for steps");
    expect_bad("steps", "12x", "for steps");
    expect_bad("batch", "0", "for batch");
    expect_bad("batch", "", "for batch");
    expect_bad("lr", "0", "a number > 0 and <= 1e6");
    expect_bad("lr", "1e9", "a number > 0 and <= 1e6");
    expect_bad("lr", "nan", "for lr");
    expect_bad("lr", "inf", "for lr");
    expect_bad("bottom", "13--16", "layer sizes");
    expect_bad("bottom", "13", "layer sizes");
    expect_bad("bottom", "13-0-16", "layer sizes");
    expect_bad("top", "512-256-", "output sizes");
    expect_bad("rows", "10,,20", "comma list");
    expect_bad("rows", "0", "row counts");
    expect_bad("rows", "10,", "trailing comma");
    expect_bad("data", "criteo:", "synthetic, criteo:PATH, bin:PATH or movielens:PATH");
    expect_bad("data", "parquet:x", "synthetic, criteo:PATH, bin:PATH or movielens:PATH");
    expect_bad("sparse-optim", "adam", "sgd or rowwise-adagrad");
    expect_bad("engine", "gpu", "reference or starpu");
    expect_bad("tables", "1025", "[1, 1024]");
    expect_bad("seed", "-3", "unsigned");
    expect_bad("eval-every", "1", "every N-th");
    expect_bad("zipf", "-0.5", "[0, 10]");
    expect_bad("quiet", "maybe", "0 or 1");
    expect_bad("no-such-key", "1", "unknown key 'no-such-key'");
}

static void test_check_cross_fields(void **state) {
    (void)state;
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    /* the built-in models' rules are their builders', not the config's: a user graph
     * need not end its "bottom" at dim */
    np_graph_t *g = NULL;
    assert_int_equal(np_config_set(&c, "dim", "8", "t", &e), NP_OK);
    assert_int_equal(np_config_check(&c, &e), NP_OK);
    assert_int_equal(np_graph_from_config(&c, &g, &e), NP_STATUS_BAD_INPUT);
    assert_null(g);
    assert_non_null(strstr(e.msg, "must equal dim 8"));

    /* a rank's keys past MPI's int count in one All2All: refused, naming the figure */
    np_config_defaults(&c);
    c.ranks = 2;
    assert_int_equal(np_config_set(&c, "batch", "16777216", "t", &e), NP_OK);
    assert_int_equal(np_config_set(&c, "hot", "16", "t", &e), NP_OK); /* bags of up to 24 */
    assert_int_equal(np_config_check(&c, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "hold up to 5234491392 keys, past MPI's count limit"));
    c.ranks = 4; /* 2.6e9 keys a rank: still past */
    assert_int_equal(np_config_check(&c, &e), NP_STATUS_BAD_INPUT);
    c.ranks = 8; /* 1.3e9 keys a rank: fits (a check after it may still refuse) */
    e.msg[0] = 0;
    if (np_config_check(&c, &e)) assert_null(strstr(e.msg, "count limit"));

    np_config_defaults(&c);
    assert_int_equal(np_config_set(&c, "top", "64-2", "t", &e), NP_OK);
    assert_int_equal(np_config_check(&c, &e), NP_OK);
    assert_int_equal(np_graph_from_config(&c, &g, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "must be 1"));

    np_config_defaults(&c); /* dense-features must agree with the builder's bottom MLP */
    assert_int_equal(np_config_set(&c, "dense-features", "7", "t", &e), NP_OK);
    assert_int_equal(np_config_dense(&c), 7);
    assert_int_equal(np_graph_from_config(&c, &g, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "dense-features: 7"));

    np_config_defaults(&c); /* a model file states every layer: the builders' keys clash */
    assert_int_equal(np_config_set(&c, "model-file", "m.ini", "t", &e), NP_OK);
    assert_int_equal(np_config_check(&c, &e), NP_OK);
    assert_int_equal(np_config_set(&c, "top", "32-1", "t", &e), NP_OK);
    assert_int_equal(np_config_check(&c, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "top: the model comes from model-file m.ini"));

    np_config_defaults(&c);
    assert_int_equal(np_config_set(&c, "rows", "5,6", "t", &e), NP_OK);
    assert_int_equal(np_config_check(&c, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "2 values given for 26 tables"));

    np_config_defaults(&c);
    assert_int_equal(np_config_set(&c, "tables", "8", "t", &e), NP_OK);
    assert_int_equal(np_config_set(&c, "data", "criteo:x.tsv", "t", &e), NP_OK);
    assert_int_equal(np_config_check(&c, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "26 categorical"));

    np_config_defaults(&c);
    assert_int_equal(np_config_set(&c, "rows", "1099511627776", "t", &e), NP_OK);
    assert_int_equal(np_config_check(&c, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "GiB"));

    np_config_defaults(&c);
    assert_int_equal(np_config_set(&c, "steps", "0", "t", &e), NP_OK);
    assert_int_equal(np_config_check(&c, &e), NP_STATUS_BAD_INPUT);
    assert_non_null(strstr(e.msg, "synthetic data never ends"));
}

static void test_load_file(void **state) {
    (void)state;
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    const char *p = write_file("good.ini", "# a comment\n"
                                           "steps = 7\n"
                                           "\n"
                                           "[nestpipe]\n"
                                           "batch = 64 ; inline comment\n"
                                           "bottom = 13-32-8\n"
                                           "dim = 8\n");
    assert_int_equal(np_config_load(&c, p, &e), NP_OK);
    assert_int_equal(c.steps, 7);
    assert_int_equal(c.batch, 64);
    assert_int_equal(c.dim, 8);
    assert_int_equal(np_config_check(&c, &e), NP_OK);
}

static void expect_load_error(const char *name, const char *text, np_status want,
                              const char *fragment) {
    np_config c, before;
    np_error e = {{0}};
    np_config_defaults(&c);
    before = c;
    const char *p = write_file(name, text);
    char path[256];
    snprintf(path, sizeof path, "%s", p);
    assert_int_equal(np_config_load(&c, path, &e), want);
    char want_msg[512];
    snprintf(want_msg, sizeof want_msg, "%s%s", path, fragment);
    if (strncmp(e.msg, want_msg, strlen(want_msg)))
        fail_msg("got '%s', want prefix '%s'", e.msg, want_msg);
    assert_memory_equal(&c, &before, sizeof c);
}

static void test_load_errors(void **state) {
    (void)state;
    expect_load_error("unknown.ini", "steps = 3\nbatch = 4\nstpes = 9\n", NP_STATUS_BAD_INPUT,
                      ":3: unknown key 'stpes'");
    expect_load_error("badval.ini", "steps = 3\n\nbatch = lots\n", NP_STATUS_BAD_INPUT,
                      ":3: bad value 'lots' for batch");
    expect_load_error("syntax.ini", "steps = 3\njust words\n", NP_STATUS_BAD_INPUT,
                      ":2: syntax error");
    expect_load_error("section.ini", "[model]\ndim = 4\n", NP_STATUS_BAD_INPUT,
                      ":2: unknown section [model]");
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    assert_int_equal(np_config_load(&c, "/nonexistent/np.ini", &e), NP_STATUS_IO);
    assert_non_null(strstr(e.msg, "cannot open config file /nonexistent/np.ini"));
}

/* The key table: every key's default reads back through np_config_get/np_config_set to the
 * same configuration, names are unique, and a changed value of every type survives. */
static void test_key_table(void **state) {
    (void)state;
    np_config d, c;
    np_error e = {{0}};
    np_config_defaults(&d);
    int n = 0;
    for (int i = 0; np_config_key_at(i); i++, n++) {
        const np_config_key *k = np_config_key_at(i);
        for (int j = 0; j < i; j++)
            if (!strcmp(np_config_key_at(j)->name, k->name)) fail_msg("key %s twice", k->name);
        char v[2048];
        assert_int_equal(np_config_get(&d, k->name, v, sizeof v), 0);
        if (k->dflt[0] && strcmp(v, k->dflt)) {
            /* the text may differ (1e-08 vs 1e-8): the value must not */
            c = d;
            assert_int_equal(np_config_set(&c, k->name, k->dflt, "t", &e), NP_OK);
            memset(c.sched_from, 0, sizeof c.sched_from); /* an origin, not a value */
            assert_memory_equal(&c, &d, sizeof c);
        }
        if (!v[0]) continue; /* an unset path */
        c = d;
        assert_int_equal(np_config_set(&c, k->name, v, "t", &e), NP_OK);
        if (!strcmp(k->name, "sched")) { /* the origin is recorded: "t" */
            assert_string_equal(c.sched_from, "t");
            memset(c.sched_from, 0, sizeof c.sched_from);
        }
        if (memcmp(&c, &d, sizeof c)) fail_msg("key %s: '%s' does not read back", k->name, v);
    }
    assert_true(n >= 36);
    assert_null(np_config_key_at(n));
    assert_null(np_config_key_at(-1));
    /* changed values of each kind read back */
    static const char *kv[][2] = {{"data", "bin:/tmp/x y.bin"}, {"rows", "5,6,7"},
                                  {"lr", "0.3"},               {"adagrad-eps", "1e-07"},
                                  {"seed", "18446744073709551615"}, {"windows", "3"},
                                  {"pipeline", "nestpipe"},    {"quiet", "1"},
                                  {"bottom", "13-512-16"},     {"steps", "9223372036854775807"}};
    c = d;
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        assert_int_equal(np_config_set(&c, kv[i][0], kv[i][1], "t", &e), NP_OK);
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        char v[2048];
        np_config c2 = d;
        assert_int_equal(np_config_get(&c, kv[i][0], v, sizeof v), 0);
        assert_int_equal(np_config_set(&c2, kv[i][0], v, "t", &e), NP_OK);
        char v2[2048];
        assert_int_equal(np_config_get(&c2, kv[i][0], v2, sizeof v2), 0);
        assert_string_equal(v, v2);
    }
    char v[8];
    assert_int_equal(np_config_get(&c, "adagrad-eps", v, sizeof v), 0);
    assert_string_equal(v, "1e-7");
    assert_int_equal(np_config_get(&c, "data", v, sizeof v), -1); /* too small */
    assert_int_equal(np_config_get(&c, "nosuch", v, sizeof v), -1);
}

/* The ranks' agreement, in one process: the verdict and the lines np_config_agree gives. */
static void test_agree_local(void **state) {
    (void)state;
    np_config c[3];
    np_error e = {{0}};
    for (int r = 0; r < 3; r++) {
        np_config_defaults(&c[r]);
        c[r].ranks = 3;
        c[r].rank = r;
    }
    assert_int_equal(np_config_agree_local(c, 3, &e), NP_OK);
    /* own keys may differ */
    assert_int_equal(np_config_set(&c[1], "quiet", "1", "t", &e), NP_OK);
    assert_int_equal(np_config_set(&c[2], "metrics-json", "/tmp/m.json", "t", &e), NP_OK);
    assert_int_equal(np_config_agree_local(c, 3, &e), NP_OK);
    /* one value on ranks 0 and 2, another on 1 */
    assert_int_equal(np_config_set(&c[1], "lr", "0.2", "t", &e), NP_OK);
    assert_int_equal(np_config_agree_local(c, 3, &e), NP_STATUS_BAD_INPUT);
    assert_string_equal(e.msg, "ranks disagree on lr: '0.1' on ranks 0, 2; '0.2' on rank 1");
    /* a key that changes the graph: the key is named, not the graph it explains */
    assert_int_equal(np_config_set(&c[1], "lr", "0.1", "t", &e), NP_OK);
    assert_int_equal(np_config_set(&c[2], "tables", "5", "t", &e), NP_OK);
    assert_int_equal(np_config_agree_local(c, 3, &e), NP_STATUS_BAD_INPUT);
    assert_string_equal(e.msg, "ranks disagree on tables: '26' on ranks 0-1; '5' on rank 2");
    /* data on one rank only: every rank has the same items (0.5.0 compared the builds'
     * item counts and blamed "the nestpipe build"); the file's size follows its key */
    assert_int_equal(np_config_set(&c[2], "tables", "26", "t", &e), NP_OK);
    assert_int_equal(np_config_set(&c[0], "data", "bin:/dev/null", "t", &e), NP_OK);
    assert_int_equal(np_config_agree_local(c, 3, &e), NP_STATUS_BAD_INPUT);
    assert_string_equal(e.msg,
                        "ranks disagree on data: 'bin:/dev/null' on rank 0; 'synthetic' on ranks 1-2");
}

/* "did you mean": one edit for short words, two beyond, a swap is one edit; an exact word
 * or a far one gets no suggestion. */
static void test_closest_word(void **state) {
    (void)state;
    const char *const w[] = {"train", "trace", NULL, "compare", "tune"};
    assert_string_equal(np_closest_word("trian", w, 5), "train"); /* a swap */
    assert_string_equal(np_closest_word("trae", w, 5), "trace");  /* a deletion */
    assert_string_equal(np_closest_word("compeer", w, 5), "compare"); /* two edits, 7 bytes */
    assert_null(np_closest_word("tnu", w, 5));   /* two edits in a short word */
    assert_null(np_closest_word("train", w, 5)); /* itself */
    assert_null(np_closest_word("export", w, 5));
    assert_string_equal(np_config_closest_key("setps"), "steps");
    assert_string_equal(np_config_closest_key("sparse-optm"), "sparse-optim");
    assert_null(np_config_closest_key("bogus"));
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/np_cfg_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_valid), cmocka_unit_test(test_key_table), cmocka_unit_test(test_set_good_values),
        cmocka_unit_test(test_set_bad_values), cmocka_unit_test(test_check_cross_fields),
        cmocka_unit_test(test_load_file),      cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_agree_local),    cmocka_unit_test(test_closest_word),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) rc = rc ? rc : 1;
    return rc;
}
