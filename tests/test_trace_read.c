/* Reading Chrome traces (np_trace_read_chrome): worker names and foreign phases, and every
 * malformed file refused with one line naming the file and what is wrong. The round trip of
 * nestpipe's own traces is test_trace.c's; of a whole trace and its report,
 * test_trace_report.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/trace/trace.h"
#include "testutil.h"

static char tmpdir[64];

/* A path in the test's directory; two slots, so a test can hold an input and an output. */
static const char *tmp_path(const char *name) {
    static char path[2][256];
    static int next;
    next ^= 1;
    snprintf(path[next], sizeof path[next], "%s/%s", tmpdir, name);
    return path[next];
}

/* ---- reading (np_trace_read_chrome); the round trip of a whole trace and its report is in
 * test_trace_report.c */

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Ranks reuse worker ids; the trace keeps one name per id, the first in the file. Other
 * phases and metadata are skipped, integer times are accepted. */
static void test_read_names_and_foreign_phases(void **state) {
    (void)state;
    const char *path = tmp_path("names.json");
    write_file(path,
               "{\"traceEvents\": ["
               "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":"
               "\"rank 0\"}},"
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1,\"args\":{\"name\":"
               "\"first\"}},"
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":"
               "\"second\"}},"
               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":2}," /* no args: skipped */
               "{\"name\":\"mark\",\"ph\":\"i\",\"pid\":0,\"tid\":1,\"ts\":5},"
               "{\"name\":\"pool_fwd\",\"cat\":\"fwd\",\"ph\":\"X\",\"pid\":1,\"tid\":1,"
               "\"ts\":10,\"dur\":5,\"args\":{\"kind\":\"fwd\",\"batch\":3,\"window\":2,"
               "\"bytes\":0}}]}");
    np_trace *tr = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_read_chrome(path, &tr, &e), NP_OK);
    assert_int_equal(np_trace_count(tr), 1);
    const np_trace_event *ev = np_trace_get(tr, 0);
    assert_string_equal(ev->name, "pool_fwd");
    assert_int_equal(ev->kind, NP_NODE_POOL_FWD); /* an old trace's fwd "pool_fwd" */
    assert_int_equal(ev->rank, 1);
    assert_int_equal(ev->worker, 1);
    assert_int_equal(ev->batch, 3);
    assert_int_equal(ev->window, 2);
    assert_true(ev->node == -1 && ev->chunk == -1); /* written before layers: none */
    assert_true(ev->start_us == 10 && ev->end_us == 15);
    const char *out = tmp_path("names2.json");
    assert_int_equal(np_trace_write_chrome(tr, out, &e), NP_OK);
    json_error_t je;
    json_t *j = json_load_file(out, 0, &je);
    assert_non_null(j);
    size_t i;
    json_t *x;
    int seen = 0;
    json_array_foreach(json_object_get(j, "traceEvents"), i, x) {
        if (strcmp(json_string_value(json_object_get(x, "name")), "thread_name")) continue;
        assert_string_equal(json_string_value(json_object_get(json_object_get(x, "args"), "name")),
                            "first");
        seen++;
    }
    assert_int_equal(seen, 1);
    json_decref(j);
    np_trace_free(tr);
    remove(path);
    remove(out);
}

static void expect_bad(const char *name, const char *text, np_status want, const char *what) {
    const char *path = tmp_path(name);
    if (text) write_file(path, text);
    static char dummy;
    np_trace *tr = (np_trace *)&dummy; /* must come back NULL */
    np_error e = {{0}};
    assert_int_equal(np_trace_read_chrome(path, &tr, &e), want);
    assert_null(tr);
    if (!strstr(e.msg, path)) fail_msg("message does not name %s: %s", path, e.msg);
    if (!strstr(e.msg, what)) fail_msg("message does not say '%s': %s", what, e.msg);
    if (strchr(e.msg, '\n')) fail_msg("message is not one line: %s", e.msg);
    if (text) remove(path);
}

#define X_EVENT(fields)                                                                            \
    "{\"traceEvents\":[{\"name\":\"n\",\"ph\":\"X\",\"pid\":0,\"tid\":0," fields "}]}"

static void test_malformed(void **state) {
    (void)state;
    expect_bad("missing.json", NULL, NP_STATUS_IO, "cannot open");
    expect_bad("notjson.json", "{\"traceEvents\": [oops", NP_STATUS_BAD_INPUT, "not JSON");
    expect_bad("empty.json", "", NP_STATUS_BAD_INPUT, "not JSON");
    expect_bad("noevents.json", "{\"foo\": []}", NP_STATUS_BAD_INPUT, "traceEvents");
    expect_bad("evobj.json", "{\"traceEvents\": {}}", NP_STATUS_BAD_INPUT, "traceEvents");
    expect_bad("array.json", "[1, 2]", NP_STATUS_BAD_INPUT, "traceEvents");
    expect_bad("notevent.json", "{\"traceEvents\": [3]}", NP_STATUS_BAD_INPUT, "traceEvents[0]");
    expect_bad("badkind.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"warp\",\"batch\":0,\"window\":0,"
                       "\"bytes\":0}"),
               NP_STATUS_BAD_INPUT, "unknown \"args.kind\"");
    expect_bad("nokind.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"batch\":0,\"window\":0,\"bytes\":0}"),
               NP_STATUS_BAD_INPUT, "args.kind");
    expect_bad("noargs.json", X_EVENT("\"ts\":1,\"dur\":1"), NP_STATUS_BAD_INPUT, "args");
    expect_bad("nodur.json",
               X_EVENT("\"ts\":1,\"args\":{\"kind\":\"fwd\",\"batch\":0,\"window\":0,"
                       "\"bytes\":0}"),
               NP_STATUS_BAD_INPUT, "dur");
    expect_bad("negdur.json",
               X_EVENT("\"ts\":1,\"dur\":-1,\"args\":{\"kind\":\"fwd\",\"batch\":0,\"window\":"
                       "0,\"bytes\":0}"),
               NP_STATUS_BAD_INPUT, "dur");
    expect_bad("pooled.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"route\",\"batch\":0,\"window\":"
                       "0,\"bytes\":0,\"segments\":2,\"pooled\":3}"),
               NP_STATUS_BAD_INPUT, "args.pooled");
    expect_bad("uniq.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"route\",\"batch\":0,\"window\":"
                       "0,\"bytes\":0,\"keys\":2,\"uniq\":3}"),
               NP_STATUS_BAD_INPUT, "args.uniq");
    expect_bad("colls.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"exchange_emb\",\"batch\":0,"
                       "\"window\":0,\"bytes\":0,\"colls\":1,\"pack_us\":-1,\"comm_us\":0,"
                       "\"unpack_us\":0}"),
               NP_STATUS_BAD_INPUT, "args.colls");
    expect_bad("peers.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"exchange_emb\",\"batch\":0,"
                       "\"window\":0,\"bytes\":0,\"colls\":1,\"pack_us\":0,\"comm_us\":0,"
                       "\"unpack_us\":0,\"peer_sent\":[0,1],\"peer_recv\":[0]}"),
               NP_STATUS_BAD_INPUT, "args.peer_sent");
    expect_bad("peerscolls.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"exchange_emb\",\"batch\":0,"
                       "\"window\":0,\"bytes\":0,\"peer_sent\":[0,1],\"peer_recv\":[0,1]}"),
               NP_STATUS_BAD_INPUT, "without \"args.colls\"");
    expect_bad("splitdur.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"exchange_emb\",\"batch\":0,"
                       "\"window\":0,\"bytes\":0,\"colls\":1,\"pack_us\":0.5,\"comm_us\":0.5,"
                       "\"unpack_us\":0.5}"),
               NP_STATUS_BAD_INPUT, "more than the task");
    expect_bad("peerneg.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"exchange_emb\",\"batch\":0,"
                       "\"window\":0,\"bytes\":0,\"colls\":1,\"pack_us\":0,\"comm_us\":0,"
                       "\"unpack_us\":0,\"peer_sent\":[0,1],\"peer_recv\":[0,-4]}"),
               NP_STATUS_BAD_INPUT, "byte counts");
    expect_bad("nobatch.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"fwd\",\"window\":0,\"bytes\":0}"),
               NP_STATUS_BAD_INPUT, "args.batch");
    expect_bad("strbytes.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"fwd\",\"batch\":0,\"window\":0,"
                       "\"bytes\":\"9\"}"),
               NP_STATUS_BAD_INPUT, "args.bytes");
    expect_bad("strnode.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"fwd\",\"batch\":0,\"window\":0,"
                       "\"bytes\":0,\"node\":\"bottom.0\"}"),
               NP_STATUS_BAD_INPUT, "args.node");
    expect_bad("negchunk.json",
               X_EVENT("\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"fwd\",\"batch\":0,\"window\":0,"
                       "\"bytes\":0,\"node\":1,\"chunk\":-2}"),
               NP_STATUS_BAD_INPUT, "args.chunk");
    expect_bad("negpid.json",
               "{\"traceEvents\":[{\"name\":\"n\",\"ph\":\"X\",\"pid\":-1,\"tid\":0,\"ts\":1,"
               "\"dur\":1,\"args\":{\"kind\":\"fwd\",\"batch\":0,\"window\":0,\"bytes\":0}}]}",
               NP_STATUS_BAD_INPUT, "pid");
}

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/np_trace_read_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return rmdir(tmpdir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_names_and_foreign_phases),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
