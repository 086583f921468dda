/* Paje and SVG export tests: a hand-built 2-rank x 2-worker trace written in both formats
 * (and a trace of layer tasks in the SVG), checked by parsing the files here and, where
 * installed, by pj_dump (Paje), xmllint (well-formed XML) and rsvg-convert (the SVG
 * renders), and a route task's pooled-exchange args through the Chrome file. A missing tool
 * skips only its check. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/trace/trace.h"
#include "testutil.h"

static char tmpdir[64];

static const char *tmp_path(const char *name) {
    static char path[4][256]; /* a few live at once */
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", tmpdir, name);
    return p;
}

static np_trace *new_trace(void) {
    np_trace *tr = NULL;
    np_error e = {{0}};
    assert_int_equal(np_trace_create(&tr, &e), NP_OK);
    assert_non_null(tr);
    return tr;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Lines of text that start with prefix. */
static int lines_starting(const char *text, const char *prefix) {
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = text; *p;) {
        if (strncmp(p, prefix, len) == 0) n++;
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        p = nl + 1;
    }
    return n;
}

static int have_tool(const char *name) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s > /dev/null 2>&1", name);
    return system(cmd) == 0;
}

/* Exit status of a shell command, -1 when it did not exit normally. */
static int run(const char *cmd) {
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* xmllint finds the file well-formed XML (where installed). */
static void check_xml(const char *path) {
    if (have_tool("xmllint")) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
        assert_int_equal(run(cmd), 0);
    }
}

/* ---- the test trace: per batch, worker 0 runs the compute chain and worker 1 ("comm")
 * the collectives, at the offsets below (us); rank 1 is 7 us late. Adjacent tasks share
 * an end/start time and h2d is empty, the cases a Paje writer must order correctly.
 * exchange_grad runs under bwd (all hidden), allreduce 100 of its 150 us under bwd. */
enum { N_RANKS = 2, N_BATCHES = 3, PER_BATCH = 14, N_TASKS = N_RANKS * N_BATCHES * PER_BATCH };
static const struct {
    np_node_kind kind;
    int worker, window;
    double start, end;
} shape[PER_BATCH] = {
    {NP_NODE_PREFETCH, 0, -1, 0, 40},        {NP_NODE_H2D, 0, -1, 40, 40},
    {NP_NODE_ROUTE, 0, -1, 40, 60},          {NP_NODE_RETRIEVE, 0, -1, 60, 100},
    {NP_NODE_EXCHANGE_EMB, 1, -1, 100, 150}, {NP_NODE_FWD, 0, 0, 150, 250},
    {NP_NODE_FWD, 0, 1, 250, 350},           {NP_NODE_BWD, 0, 0, 350, 450},
    {NP_NODE_BWD, 0, 1, 450, 550},           {NP_NODE_EXCHANGE_GRAD, 1, -1, 400, 450},
    {NP_NODE_ALLREDUCE, 1, -1, 450, 600},    {NP_NODE_SPARSE_UPDATE, 0, -1, 640, 680},
    {NP_NODE_WRITEBACK, 0, -1, 680, 700},    {NP_NODE_DENSE_UPDATE, 0, -1, 700, 720},
};
static const double T_BASE = 10000, T_BATCH = 750, T_RANK = 7; /* us */
static const char COMM_NAME[] = "comm & <mpi>";                /* needs XML escaping */

static np_trace *sample_trace(void) {
    np_trace *tr = new_trace();
    np_trace_set_worker_name(tr, 0, "cpu 0");
    np_trace_set_worker_name(tr, 1, COMM_NAME);
    /* Recorded rank-interleaved and back to front, as completion callbacks might. */
    for (int b = N_BATCHES - 1; b >= 0; b--)
        for (int i = PER_BATCH - 1; i >= 0; i--)
            for (int r = 0; r < N_RANKS; r++) {
                double t = T_BASE + b * T_BATCH + r * T_RANK;
                np_trace_event ev = {.name = np_node_kind_name(shape[i].kind),
                                     .kind = shape[i].kind,
                                     .batch = b,
                                     .window = shape[i].window,
                                     .rank = r,
                                     .worker = shape[i].worker,
                                     .start_us = t + shape[i].start,
                                     .end_us = t + shape[i].end,
                                     .bytes = shape[i].kind == NP_NODE_EXCHANGE_EMB ? 4096u : 0u,
                                     .node = -1,
                                     .chunk = -1};
                assert_int_equal(np_trace_record(tr, &ev), 0);
            }
    assert_int_equal(np_trace_count(tr), N_TASKS);
    return tr;
}

/* Checks a Paje file by reading it: every event id used is defined in the header, the
 * counts of each event, and non-decreasing times. n_workers containers under n_ranks. */
static void check_paje_text(const char *text, int n_tasks, int n_ranks, int n_workers) {
    int defined[16] = {0}, count[16] = {0};
    double last_t = -1;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl); /* every line ends */
        char line[512];
        size_t len = (size_t)(nl - p);
        assert_true(len < sizeof line);
        memcpy(line, p, len);
        line[len] = '\0';
        p = nl + 1;
        int id;
        if (strncmp(line, "%EventDef ", 10) == 0) {
            char name[64];
            assert_int_equal(sscanf(line, "%%EventDef %63s %d", name, &id), 2);
            assert_true(id >= 0 && id < 16);
            defined[id] = 1;
            continue;
        }
        if (line[0] == '%' || line[0] == '#') continue;
        assert_int_equal(sscanf(line, "%d", &id), 1);
        assert_true(id >= 0 && id < 16);
        if (!defined[id]) fail_msg("event %d used before its %%EventDef: %s", id, line);
        count[id]++;
        if (id >= 3) { /* events with a time, all second field */
            double t;
            assert_int_equal(sscanf(line, "%*d %lf", &t), 1);
            if (t < last_t) fail_msg("time goes back to %g after %g: %s", t, last_t, line);
            last_t = t;
        }
    }
    assert_int_equal(count[0], 2);                      /* container types rank, worker */
    assert_int_equal(count[1], 1);                      /* state type task */
    assert_int_equal(count[2], NP_NODE_KIND_COUNT + 1); /* one per kind, and "other" */
    assert_int_equal(count[3], n_ranks + n_workers);    /* create */
    assert_int_equal(count[4], n_ranks + n_workers);    /* destroy */
    assert_int_equal(count[5], n_tasks);                /* push */
    assert_int_equal(count[6], n_tasks);                /* pop */
}

/* Runs pj_dump on path when it is installed: exit 0, nothing on stderr, and one "State,"
 * line per task. Returns the dump (caller frees) or NULL when skipped. */
static char *pj_dump_check(const char *path, int n_tasks) {
    if (access("/usr/bin/pj_dump", X_OK) != 0) {
        print_message("note: /usr/bin/pj_dump not installed (Debian pajeng), its check skipped\n");
        return NULL;
    }
    char cmd[1024];
    const char *out = tmp_path("pj_dump.out"), *errp = tmp_path("pj_dump.err");
    snprintf(cmd, sizeof cmd, "/usr/bin/pj_dump '%s' > '%s' 2> '%s'", path, out, errp);
    int rc = run(cmd);
    char *dump = read_all(out), *errs = read_all(errp);
    if (rc != 0 || errs[0]) fail_msg("pj_dump %s: exit %d, stderr: %s", path, rc, errs);
    assert_int_equal(lines_starting(dump, "State,"), n_tasks);
    free(errs);
    remove(out);
    remove(errp);
    return dump;
}

static void test_paje(void **state) {
    (void)state;
    np_trace *tr = sample_trace();
    np_error e = {{0}};
    const char *path = tmp_path("trace.paje");
    assert_int_equal(np_trace_write_paje(tr, path, &e), NP_OK);
    char *text = read_all(path);
    check_paje_text(text, N_TASKS, N_RANKS, N_RANKS * 2);

    /* Names, kinds and seconds relative to the earliest start (T_BASE). */
    assert_non_null(strstr(text, "3 0.000000000 R1 CT_Rank 0 \"rank 1\"\n"));
    assert_non_null(strstr(text, "3 0.000000000 R0W0 CT_Worker R0 \"cpu 0\"\n"));
    assert_non_null(strstr(text, "3 0.000000000 R1W1 CT_Worker R1 \"comm & <mpi>\"\n"));
    assert_non_null(strstr(text, "2 V_exchange_emb ST_Task \"exchange_emb\" \""));
    /* pushes carry batch, window (-1: batch-wide) and layer ("-": none) */
    assert_non_null(strstr(text, "5 0.000000000 R0W0 ST_Task V_prefetch 0 -1 \"-\"\n"));
    /* rank 1, batch 1, fwd chunk 0: 750 + 7 + 150 us */
    assert_non_null(strstr(text, "5 0.000907000 R1W0 ST_Task V_fwd 1 0 \"-\"\n"));
    /* the empty h2d: pop of prefetch, push and pop of h2d, push of route, in that order */
    assert_non_null(strstr(text, "6 0.000040000 R0W0 ST_Task\n5 0.000040000 R0W0 ST_Task "
                                 "V_h2d 0 -1 \"-\"\n6 0.000040000 R0W0 ST_Task\n5 0.000040000 "
                                 "R0W0 ST_Task V_route 0 -1 \"-\"\n"));
    /* containers end at the last end: rank 1, batch 2, dense_update at 1500 + 7 + 720 us */
    assert_non_null(strstr(text, "4 0.002227000 CT_Rank R1\n"));

    char *dump = pj_dump_check(path, N_TASKS);
    if (dump) {
        assert_int_equal(count_of(dump, ", fwd\n"), N_RANKS * N_BATCHES * 2);
        assert_int_equal(count_of(dump, ", h2d\n"), N_RANKS * N_BATCHES);
        free(dump);
    }
    free(text);
    np_trace_free(tr);
}

/* Overlapping tasks on one worker (a clock glitch), non-finite times and a task ending
 * before it starts still give one state per task and a file pj_dump accepts. */
static void test_paje_odd_times(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_trace_event evs[] = {
        /* ..., bytes, node, chunk */
        {"a", NP_NODE_FWD, 0, -1, 0, 3, 100, 300, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
        {"b", NP_NODE_BWD, 0, -1, 0, 3, 200, 250, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},  /* inside a */
        {"c", NP_NODE_SYNC, 0, -1, 0, 3, 280, 400, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0}, /* overlaps a */
        {"d", NP_NODE_ROUTE, 1, -1, 0, 3, NAN, 50, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
        {"e", NP_NODE_ROUTE, 1, -1, 0, 3, 500, INFINITY, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
        {"f", NP_NODE_ROUTE, 1, -1, 0, 3, 600, 550, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
        {"g", (np_node_kind)99, 1, -1, 0, 3, 700, 710, 0, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
    };
    /* a control character, invalid UTF-8 and a quote: '_' in Paje, '?' and &quot; in SVG */
    np_trace_set_worker_name(tr, 3, "odd\x01\xff\"name");
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        assert_int_equal(np_trace_record(tr, &evs[i]), 0);
    np_error e = {{0}};
    const char *path = tmp_path("odd.paje");
    assert_int_equal(np_trace_write_paje(tr, path, &e), NP_OK);
    char *text = read_all(path);
    check_paje_text(text, 7, 1, 1);
    assert_non_null(strstr(text, "R0W3 CT_Worker R0 \"odd_\xff_name\"\n"));
    free(text);
    free(pj_dump_check(path, 7));
    remove(path);

    /* The SVG too stays well-formed and draws every task. */
    path = tmp_path("odd.svg");
    assert_int_equal(np_trace_write_svg(tr, path, &e), NP_OK);
    text = read_all(path);
    assert_int_equal(count_of(text, "class=\"task\""), 7);
    /* np_trace_analyze refuses non-finite times: the timeline stays, the chart says why */
    assert_non_null(strstr(text, "no bar chart: "));
    assert_non_null(strstr(text, ">odd??&quot;name<"));
    check_xml(path);
    assert_null(strstr(text, "nan"));
    assert_null(strstr(text, "inf"));
    free(text);
    remove(path);
    np_trace_free(tr);
}

/* Colour of kind k as "#rrggbb" from the Paje entity value ("r g b" in 0..1). */
static void paje_colour(const char *paje, const char *kind, char out[8]) {
    char key[64];
    snprintf(key, sizeof key, "2 V_%s ST_Task \"%s\" \"", kind, kind);
    const char *p = strstr(paje, key);
    if (!p) fail_msg("no Paje entity value for %s", kind);
    double r, g, b;
    assert_int_equal(sscanf(p + strlen(key), "%lf %lf %lf", &r, &g, &b), 3);
    snprintf(out, 8, "#%02x%02x%02x", (int)lround(r * 255), (int)lround(g * 255),
             (int)lround(b * 255));
}

static void test_svg(void **state) {
    (void)state;
    np_trace *tr = sample_trace();
    np_error e = {{0}};
    const char *path = tmp_path("trace.svg"), *ppath = tmp_path("trace2.paje");
    assert_int_equal(np_trace_write_svg(tr, path, &e), NP_OK);
    assert_int_equal(np_trace_write_paje(tr, ppath, &e), NP_OK);
    char *svg = read_all(path), *paje = read_all(ppath);

    assert_int_equal(strncmp(svg, "<?xml", 5), 0);
    assert_int_equal(count_of(svg, "<svg "), 1);
    assert_int_equal(count_of(svg, "</svg>"), 1);
    assert_null(strstr(svg, "<script"));
    assert_null(strstr(svg, "href")); /* nothing external */
    assert_int_equal(count_of(svg, "class=\"task\""), N_TASKS);
    assert_int_equal(count_of(svg, "class=\"legend "), NP_NODE_KIND_COUNT);
    /* one bar pair per kind that ran: the sample's 12 (no sync, no driver row, no keys'
     * All2All, route_owner, pooling or loss) */
    int ran = 0;
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++)
        for (int i = 0; i < PER_BATCH; i++)
            if (shape[i].kind == (np_node_kind)k) {
                ran++;
                break;
            }
    assert_int_equal(ran, 12);
    assert_int_equal(count_of(svg, "class=\"bar exposed\""), ran);
    assert_int_equal(count_of(svg, "class=\"bar hidden\""), ran);
    assert_non_null(strstr(svg, ">rank 0<"));
    assert_non_null(strstr(svg, ">rank 1<"));
    assert_non_null(strstr(svg, ">cpu 0<"));
    assert_non_null(strstr(svg, ">comm &amp; &lt;mpi&gt;<"));
    assert_null(strstr(svg, COMM_NAME));
    for (int b = 0; b < N_BATCHES; b++) { /* a label per batch start on each rank */
        char lab[16];
        snprintf(lab, sizeof lab, ">b%d</text>", b);
        assert_true(count_of(svg, lab) >= N_RANKS);
    }
    /* Bar values from np_trace_analyze, 6 tasks each (2 ranks x 3 batches). */
    assert_non_null(strstr(svg, ">exposed 0.000 ms, hidden 0.300 ms (6 tasks")); /* grad */
    assert_non_null(strstr(svg, ">exposed 0.300 ms, hidden 0.600 ms (6 tasks")); /* allreduce */
    assert_non_null(strstr(svg, ">exposed 0.300 ms, hidden 0.000 ms (6 tasks")); /* emb */

    /* Same palette in both formats, and every kind a different colour. */
    char seen[NP_NODE_KIND_COUNT][8];
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) {
        const char *kind = np_node_kind_name((np_node_kind)k);
        paje_colour(paje, kind, seen[k]);
        char key[80];
        snprintf(key, sizeof key, "class=\"legend %s\"", kind);
        const char *p = strstr(svg, key);
        if (!p) fail_msg("no legend entry for %s", kind);
        const char *fill = strstr(p, "fill=\"");
        assert_non_null(fill);
        if (strncmp(fill + 6, seen[k], 7) != 0)
            fail_msg("%s: SVG %.7s, Paje %s", kind, fill + 6, seen[k]);
        for (int j = 0; j < k; j++)
            assert_string_not_equal(seen[j], seen[k]);
    }

    char cmd[1024];
    if (have_tool("xmllint")) {
        snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
        assert_int_equal(run(cmd), 0);
    } else {
        print_message("note: xmllint not installed, SVG well-formedness check skipped\n");
    }
    if (have_tool("rsvg-convert")) {
        const char *png = tmp_path("trace.png");
        snprintf(cmd, sizeof cmd, "rsvg-convert -o '%s' '%s'", png, path);
        assert_int_equal(run(cmd), 0);
        FILE *f = fopen(png, "rb");
        assert_non_null(f);
        unsigned char sig[8] = {0};
        assert_int_equal(fread(sig, 1, 8, f), 8);
        fclose(f);
        assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
        if (!getenv("NP_KEEP_PNG")) remove(png);
    } else {
        print_message("note: rsvg-convert not installed (librsvg2-bin), render check skipped\n");
    }
    free(svg);
    free(paje);
    remove(ppath);
    np_trace_free(tr);
}

/* Layers in the SVG: each task's tooltip names its layer (escaped) and chunk, layer tasks of
 * one kind differ in shade by node, and a bar per layer gives its compute time. One rank,
 * 520 us of dense compute: node 0 "bottom.0" 200 fwd + 140 bwd, node 1 60 + 60, node 2
 * (unnamed) 20, the loss (no layer) 40. */
static void test_svg_layers(void **state) {
    (void)state;
    static const struct {
        const char *name;
        np_node_kind kind;
        int worker, node, chunk;
        double start, end;
    } evs[] = {
        {"linear_fwd", NP_NODE_FWD, 0, 0, 0, 0, 100},
        {"linear_fwd", NP_NODE_FWD, 0, 0, 1, 100, 200},
        {"dot_fwd", NP_NODE_FWD, 0, 1, 0, 200, 260},
        {"bce_fwd", NP_NODE_LOSS_FWD, 0, -1, -1, 260, 300},
        {"dot_bwd", NP_NODE_BWD, 0, 1, 0, 300, 360},
        {"linear_bwd", NP_NODE_BWD, 0, 0, 0, 360, 500},
        {"allreduce", NP_NODE_ALLREDUCE, 1, 0, -1, 400, 450},
        {"cross_fwd", NP_NODE_FWD, 0, 2, 5, 500, 520},
    };
    np_trace *tr = new_trace();
    np_trace_set_node_name(tr, 0, "bottom.0");
    np_trace_set_node_name(tr, 1, "dot <&>");
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++) {
        np_trace_event ev = {.name = evs[i].name,
                             .kind = evs[i].kind,
                             .window = 0,
                             .worker = evs[i].worker,
                             .start_us = evs[i].start,
                             .end_us = evs[i].end,
                             .node = evs[i].node,
                             .chunk = evs[i].chunk,
                             .id = (int64_t)i + 1,
                             .n_deps = i == 1 || i == 2,
                             .dep = {(int64_t)i}};
        assert_int_equal(np_trace_record(tr, &ev), 0);
    }
    np_error e = {{0}};
    const char *path = tmp_path("layers.svg");
    assert_int_equal(np_trace_write_svg(tr, path, &e), NP_OK);
    char *svg = read_all(path);
    /* a layer's fwd and bwd tasks take its colour: hues a golden angle apart from blue
     * (node 0 #5ca3e6, 1 #e65c7b, 2 #5ce665), bwd darker (node 0 #3d6d99) */
    assert_non_null(strstr(svg, "fill=\"#5ca3e6\"><title>linear_fwd (fwd) layer bottom.0 (node 0) "
                                "batch 0 window 0 chunk 1, 0.100-0.200 ms (0.100 ms)</title>"));
    assert_non_null(strstr(svg, "fill=\"#e65c7b\"><title>dot_fwd (fwd) layer dot &lt;&amp;&gt; "
                                "(node 1) batch 0 window 0 chunk 0,"));
    /* the task that ends last, outlined: the critical path (it reads nothing drawn) */
    assert_non_null(strstr(svg, "fill=\"#5ce665\" stroke=\"#000\" stroke-width=\"1.5\"><title>"
                                "cross_fwd (fwd) node 2 batch 0 window 0 chunk 5,"));
    assert_int_equal(count_of(svg, "; on the critical path"), 1);
    assert_non_null(strstr(svg, "fill=\"#3d6d99\"><title>linear_bwd (bwd) layer bottom.0"));
    /* the layer legend: a fwd and a bwd swatch per layer node */
    assert_int_equal(count_of(svg, "class=\"layer-legend\""), 6);
    /* the dense compute lane: the layers and the loss follow each other from 0 to 520 us:
     * one block, all of the span */
    assert_int_equal(count_of(svg, "class=\"busy\""), 1);
    assert_non_null(strstr(svg, ">100% busy</text>"));
    /* dependencies: linear_fwd chunk 1 (id 2) reads chunk 0's output (id 1), dot_fwd (id 3)
     * reads id 2: arrows, and the critical path back from the task that ends last */
    assert_int_equal(count_of(svg, "<line class=\"dep"), 2);
    assert_non_null(strstr(svg, "<title>bce_fwd (loss_fwd) batch 0 window 0, "));
    assert_non_null(strstr(svg, "<title>allreduce (allreduce) layer bottom.0 (node 0) batch 0 "
                                "window 0, "));
    assert_non_null(strstr(svg, ">bottom.0</text>")); /* a wide task shows its layer's name */
    /* the per-layer chart: nodes 0, 1, 2 and the loss */
    assert_int_equal(count_of(svg, "class=\"layer-bar fwd\""), 4);
    assert_int_equal(count_of(svg, "class=\"layer-bar bwd\""), 4);
    assert_non_null(strstr(svg, ">fwd 0.200 ms, bwd 0.140 ms, 65.4% of compute (3 tasks)<"));
    assert_non_null(strstr(svg, ">(no layer)</text>"));
    /* the loss is dense compute of no layer: a fwd bar of its own */
    assert_non_null(strstr(svg, ">fwd 0.040 ms, bwd 0.000 ms, 7.7% of compute (1 tasks)<"));
    assert_non_null(strstr(svg, ">node 2</text>"));
    assert_null(strstr(svg, "dot <&>"));
    check_xml(path);
    free(svg);
    remove(path);

    /* without layer tasks there is no layer chart */
    np_trace *plain = sample_trace();
    assert_int_equal(np_trace_write_svg(plain, path, &e), NP_OK);
    svg = read_all(path);
    assert_null(strstr(svg, "layer-bar"));
    assert_null(strstr(svg, "Dense compute per layer"));
    free(svg);
    remove(path);
    np_trace_free(plain);
    np_trace_free(tr);
}

static void test_empty(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_error e = {{0}};
    const char *path = tmp_path("empty.paje");
    assert_int_equal(np_trace_write_paje(tr, path, &e), NP_OK);
    char *text = read_all(path);
    assert_non_null(strstr(text, "%EventDef PajePushState"));
    assert_int_equal(lines_starting(text, "5 "), 0);
    free(text);
    free(pj_dump_check(path, 0));
    remove(path);

    path = tmp_path("empty.svg");
    assert_int_equal(np_trace_write_svg(tr, path, &e), NP_OK);
    text = read_all(path);
    assert_non_null(strstr(text, "</svg>"));
    assert_int_equal(count_of(text, "class=\"task\""), 0);
    free(text);
    check_xml(path);
    remove(path);
    np_trace_free(tr);
}

typedef np_status (*writer)(const np_trace *, const char *, np_error *);

static void check_unwritable(writer w) {
    np_trace *tr = sample_trace();
    np_error e = {{0}};
    /* A missing directory: unwritable even for root, which ignores permission bits. */
    const char *path = tmp_path("no-such-dir/out");
    assert_int_equal(w(tr, path, &e), NP_STATUS_IO);
    if (!strstr(e.msg, path)) fail_msg("message '%s' does not name %s", e.msg, path);
    assert_null(strchr(e.msg, '\n'));

    /* A directory in the way: the rename fails and the temporary is cleaned up. */
    path = tmp_path("adir");
    assert_int_equal(mkdir(path, 0700), 0);
    memset(&e, 0, sizeof e);
    assert_int_equal(w(tr, path, &e), NP_STATUS_IO);
    if (!strstr(e.msg, path)) fail_msg("message '%s' does not name %s", e.msg, path);
    assert_int_equal(tu_leftovers(path), 0);
    assert_int_equal(rmdir(path), 0);
    np_trace_free(tr);
}

static void test_unwritable(void **state) {
    (void)state;
    check_unwritable(np_trace_write_paje);
    check_unwritable(np_trace_write_svg);
}

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/np_trace_export_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (!getenv("NP_KEEP_PNG")) remove(tmp_path("trace.paje"));
    if (!getenv("NP_KEEP_PNG")) remove(tmp_path("trace.svg"));
    return getenv("NP_KEEP_PNG") ? 0 : rmdir(tmpdir);
}

/* A run of more batches than a timeline shows: one batch three fifths in, drawn in detail
 * (the window in which it ended: its fwd and the exchange of the next batch under it), and a
 * summary bar for every batch. Batch b: fwd [100b, 100b + 60) and the exchange of batch b
 * during its fwd [100b - 90, 100b - 70) (exposed for batch 0 only), a dense update ending
 * the batch at 100b + 100. */
static void test_svg_long(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    for (long b = 0; b < 20; b++) {
        double t = 100.0 * (double)b;
        np_trace_event evs[] = {
            {.name = "linear_fwd", .kind = NP_NODE_FWD, .batch = b, .window = -1, .start_us = t,
             .end_us = t + 60, .node = 0, .chunk = -1},
            {.name = "exchange_rows", .kind = NP_NODE_EXCHANGE_EMB, .batch = b + 1, .window = -1,
             .worker = 1, .start_us = t + 10, .end_us = t + 30, .node = -1, .chunk = -1},
            {.name = "dense_sgd", .kind = NP_NODE_DENSE_UPDATE, .batch = b, .window = -1,
             .start_us = t + 99, .end_us = t + 100, .node = 0, .chunk = -1},
        };
        for (int k = 0; k < 3; k++)
            assert_int_equal(np_trace_record(tr, &evs[k]), 0);
    }
    np_error e = {{0}};
    const char *path = tmp_path("long.svg");
    assert_int_equal(np_trace_write_svg(tr, path, &e), NP_OK);
    char *svg = read_all(path);
    /* batches 0..20 (the last exchange is batch 20's): batch 12 in detail, [1200, 1300) */
    assert_non_null(strstr(svg, "21 batches: batch 12 in detail"));
    assert_int_equal(count_of(svg, "class=\"task\""), 3);
    assert_non_null(strstr(svg, "<title>linear_fwd (fwd) node 0 batch 12,"));
    /* every batch that has a window gets a bar: 0..19 (batch 20 has no task ending after
     * batch 19's end) */
    assert_int_equal(count_of(svg, "<title>batch "), 20);
    assert_non_null(strstr(svg, "<title>batch 12: step 0.100 ms, exposed exchange 0.000"));
    free(svg);
    /* a window of batches 2..17 draws those: 16 bars, batch 2 + 15 * 3 / 5 = 11 in detail */
    np_trace *part = NULL;
    assert_int_equal(np_trace_batches(tr, 2, 17, &part, &e), NP_OK);
    assert_int_equal(np_trace_write_svg(part, path, &e), NP_OK);
    np_trace_free(part);
    svg = read_all(path);
    assert_non_null(strstr(svg, "16 batches: batch 11 in detail"));
    assert_int_equal(count_of(svg, "<title>batch "), 16);
    check_xml(path);
    free(svg);
    remove(path);
    np_trace_free(tr);
}

/* A route's segments and pooled count (the pooled exchange) go out as args and read back;
 * other tasks carry neither. */
static void test_route_segments(void **state) {
    (void)state;
    np_trace *tr = new_trace();
    np_error e = {{0}};
    np_trace_event ev[2] = {
        {"route", NP_NODE_ROUTE, 2, -1, 0, 0, 1.0, 2.0, 0, -1, -1, 0, 0, {0}, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
        {"a2a_rows", NP_NODE_EXCHANGE_EMB, 2, 0, 0, 1, 3.0, 4.0, 512, -1, -1, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0, 0},
    };
    for (int i = 0; i < 2; i++)
        assert_int_equal(np_trace_record(tr, &ev[i]), 0);
    const char *path = tmp_path("segments.json");
    assert_int_equal(np_trace_write_chrome(tr, path, &e), NP_OK);
    np_trace *back = NULL;
    assert_int_equal(np_trace_read_chrome(path, &back, &e), NP_OK);
    assert_int_equal(np_trace_count(back), 2);
    for (size_t k = 0; k < 2; k++) {
        const np_trace_event *b = np_trace_get(back, k);
        int route = b->kind == NP_NODE_ROUTE;
        assert_int_equal(b->segments, route ? 7 : 0);
        assert_int_equal(b->pooled, route ? 3 : 0);
    }
    np_trace_free(back);
    np_trace_free(tr);
    remove(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paje),  cmocka_unit_test(test_paje_odd_times),
        cmocka_unit_test(test_svg),   cmocka_unit_test(test_svg_layers), cmocka_unit_test(test_svg_long),
        cmocka_unit_test(test_route_segments),
        cmocka_unit_test(test_empty), cmocka_unit_test(test_unwritable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
