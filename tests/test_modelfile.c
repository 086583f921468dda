/* Model files and the slice kind: slice's backward against central finite differences;
 * examples/models/dlrm.ini and examples/models/dcnv2.ini give the builders' graphs and parameter bytes;
 * np_graph_write reads back to the same graph (DLRM, DCN-v2, slices, unnamed slots); a
 * custom topology over pooled:A-B slices builds with the right shapes and its whole
 * gradient (fan-in sums into the pooled embeddings) matches finite differences; every
 * error names file:line and the node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/model/model.h"
#include "cudautil.h"
#include "testutil.h"

#ifndef NP_MODELS_DIR
#error "NP_MODELS_DIR: the examples/models/ folder (tests/CMakeLists.txt sets it)"
#endif

/* ---------------------------------------------------------------- helpers */

static np_config cfg_of(const char *const (*kv)[2], size_t n) {
    np_config c;
    np_error e = {{0}};
    np_config_defaults(&c);
    for (size_t i = 0; i < n; i++)
        if (np_config_set(&c, kv[i][0], kv[i][1], "t", &e)) fail_msg("%s", e.msg);
    return c;
}

/* text into a fresh temporary file; returns its path (static buffer per call site) */
static void write_tmp(char *path, size_t cap, const char *text) {
    snprintf(path, cap, "/tmp/np_modelfile_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static np_graph_t *read_text(const np_config *c, const char *text) {
    char path[64];
    write_tmp(path, sizeof path, text);
    np_graph_t *g;
    np_error e = {{0}};
    np_status st = np_graph_from_file(c, path, &g, &e);
    unlink(path);
    if (st) fail_msg("model file: %s\n%s", e.msg, text);
    return g;
}

/* The same nodes (names, kinds, hp, inputs, shapes) and output. */
static void assert_same_graph(const np_graph_t *a, const np_graph_t *b) {
    assert_int_equal(a->dense_w, b->dense_w);
    assert_int_equal(a->pooled_w, b->pooled_w);
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->output, b->output);
    for (int v = 0; v < a->n; v++) {
        const np_node *x = &a->node[v], *y = &b->node[v];
        assert_string_equal(x->name, y->name);
        assert_string_equal(np_node_def(x)->kind, np_node_def(y)->kind);
        if (memcmp(&x->hp, &y->hp, sizeof x->hp)) fail_msg("node %s: hyper-parameters differ", x->name);
        assert_int_equal(x->shape.n_in, y->shape.n_in);
        for (int k = 0; k < x->shape.n_in; k++) {
            assert_int_equal(x->in[k], y->in[k]);
            assert_int_equal(x->shape.in[k], y->shape.in[k]);
        }
        assert_int_equal(x->shape.out, y->shape.out);
        assert_int_equal(x->shape.n_params, y->shape.n_params);
        assert_int_equal(x->n_out, y->n_out);
    }
}

/* g written, read back, compared; and the copy written again gives the same text. */
static void roundtrip(const np_config *c, const np_graph_t *g) {
    char *t1 = NULL, *t2 = NULL;
    size_t n1 = 0, n2 = 0;
    np_error e = {{0}};
    FILE *f = open_memstream(&t1, &n1);
    assert_non_null(f);
    if (np_graph_write(g, f, &e)) fail_msg("%s", e.msg);
    fclose(f);
    np_graph_t *h = read_text(c, t1);
    assert_same_graph(g, h);
    f = open_memstream(&t2, &n2);
    assert_non_null(f);
    if (np_graph_write(h, f, &e)) fail_msg("%s", e.msg);
    fclose(f);
    assert_string_equal(t1, t2);
    np_graph_free(h);
    free(t1);
    free(t2);
}

/* ---------------------------------------------------------------- the slice kind */

/* L = sum(out * R), in double */
static double rig_loss(cu_rig *r) {
    np_layer_io io = cu_rig_io(r, 0);
    r->def->fwd(&io);
    double L = 0;
    for (size_t i = 0; i < (size_t)r->n * r->s.out; i++)
        L += (double)r->out[0][i] * r->R[i];
    return L;
}

/* Backward against central differences of forward, every input element: exact up to
 * float rounding (out is linear in the input), so 2e-3 is slack; din starts as garbage
 * (1e6), so a column left unwritten fails. */
static void check_slice(int from, int to, int w) {
    cu_rig r;
    np_layer_hp hp = {.i = {from, to}};
    cu_rig_make(&r, "slice", hp, 1, &w, 3, 1u, 0, 777);
    assert_int_equal(r.s.out, (to ? to : w) - from);
    assert_int_equal(r.s.n_params, 0);
    rig_loss(&r);
    for (long s = 0; s < r.n; s++)
        for (int c = 0; c < r.s.out; c++)
            assert_true(r.out[0][s * r.s.out + c] == r.in[0][s * w + from + c]);
    memcpy(r.dout[0], r.R, (size_t)r.n * r.s.out * sizeof(float));
    np_layer_io io = cu_rig_io(&r, 0);
    r.def->bwd(&io);
    size_t m = (size_t)r.n * (size_t)w;
    float *g = malloc(m * sizeof *g);
    memcpy(g, r.din[0][0], m * sizeof *g);
    const float h = 0.05f;
    for (size_t i = 0; i < m; i++) {
        float x0 = r.in[0][i];
        r.in[0][i] = x0 + h;
        double lp = rig_loss(&r);
        r.in[0][i] = x0 - h;
        double lm = rig_loss(&r);
        r.in[0][i] = x0;
        double fd = (lp - lm) / (2.0 * (double)h);
        if (!tu_close(g[i], fd, 2e-3, 2e-3))
            fail_msg("slice [%d, %d) of %d: din[%zu]: analytic %.6g vs finite difference %.6g",
                     from, to, w, i, (double)g[i], fd);
    }
    /* a NULL din is allowed: the input is the data */
    io.din[0] = NULL;
    r.def->bwd(&io);
    free(g);
    cu_rig_free(&r);
}

static void test_slice_kind(void **state) {
    (void)state;
    check_slice(2, 5, 7);
    check_slice(0, 0, 4);
    check_slice(3, 0, 6);
    check_slice(0, 1, 5);
    const np_layer_def *d = np_layer_find("slice");
    assert_non_null(d);
    assert_string_equal(d->hp_int[0], "from");
    assert_string_equal(d->hp_int[1], "to");
    assert_non_null(d->help);
    /* shapes it refuses, with a message */
    struct {
        int from, to, w;
        const char *frag;
    } bad[] = {{-1, 2, 4, "from = -1"}, {2, 2, 4, "to = 2"}, {3, 1, 4, "to = 1"},
               {0, 5, 4, "to = 5"},     {4, 0, 4, "from = 4"}, {0, -2, 4, "to = -2"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        np_layer_shape s = {.n_in = 1, .in = {bad[i].w}};
        np_layer_hp hp = {.i = {bad[i].from, bad[i].to}};
        np_error e = {{0}};
        assert_int_equal(d->shape(&hp, &s, &e), NP_STATUS_BAD_INPUT);
        if (!strstr(e.msg, bad[i].frag)) fail_msg("'%s' lacks '%s'", e.msg, bad[i].frag);
    }
}

/* ---------------------------------------------------------------- the shipped files */

/* examples/models/NAME.ini against the builder: the same graph and the same parameter bytes, by
 * np_graph_from_file + np_model_create_graph and by the model-file key. */
static void check_shipped(const char *file, const char *model) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", NP_MODELS_DIR, file);
    const char *const kv[][2] = {{"model", model}};
    np_config cb = cfg_of(kv, 1), cf;
    np_config_defaults(&cf);
    np_error e = {{0}};
    np_model_t *mb, *mf, *mk;
    if (np_model_create(&cb, &mb, &e)) fail_msg("%s", e.msg);
    np_graph_t *g;
    if (np_graph_from_file(&cf, path, &g, &e)) fail_msg("%s", e.msg);
    if (np_model_create_graph(&cf, g, &mf, &e)) fail_msg("%s", e.msg);
    np_graph_free(g);
    np_config ck = cf;
    if (np_config_set(&ck, "model-file", path, "t", &e)) fail_msg("%s", e.msg);
    if (np_model_create(&ck, &mk, &e)) fail_msg("%s", e.msg);
    const np_model_t *m2[2] = {mf, mk};
    for (int i = 0; i < 2; i++) {
        const np_model_t *m = m2[i];
        assert_same_graph(mb->graph, m->graph);
        for (int v = 0; v < mb->graph->n; v++) {
            assert_int_equal(mb->graph->node[v].p0, m->graph->node[v].p0);
            assert_int_equal(mb->graph->node[v].pn, m->graph->node[v].pn);
        }
        assert_int_equal(mb->n_dense, m->n_dense);
        assert_int_equal(np_model_n_dense_tensors(mb), np_model_n_dense_tensors(m));
        assert_memory_equal(mb->dense, m->dense, mb->n_dense * sizeof(float));
        assert_int_equal(mb->row_base[mb->T], m->row_base[m->T]);
        assert_memory_equal(mb->table_mem, m->table_mem,
                            (size_t)mb->row_base[mb->T] * (size_t)mb->d * sizeof(float));
    }
    print_message("%s: %d nodes, %zu dense parameters, the builder's bytes\n", file,
                  mb->graph->n, mb->n_dense);
    np_model_free(mb);
    np_model_free(mf);
    np_model_free(mk);
}

static void test_shipped_models(void **state) {
    (void)state;
    check_shipped("dlrm.ini", "dlrm");
    check_shipped("dcnv2.ini", "dcnv2");
}

/* ---------------------------------------------------------------- writing */

/* A kind with a named real slot, for the i<k>/f<k> spelling of unnamed slots. */
static np_status ident_shape(const np_layer_hp *hp, np_layer_shape *s, np_error *err) {
    (void)hp;
    (void)err;
    s->out = s->in[0];
    return NP_OK;
}
static void ident_fwd(const np_layer_io *io) {
    memcpy(io->out, io->in[0], (size_t)io->n * (size_t)io->shape->out * sizeof(float));
}
static void ident_bwd(const np_layer_io *io) {
    if (io->din[0])
        memcpy(io->din[0], io->dout, (size_t)io->n * (size_t)io->shape->out * sizeof(float));
}
static const np_layer_def mf_ident = {.kind = "mf_ident", .min_in = 1, .max_in = 1,
                                      .shape = ident_shape, .fwd = ident_fwd, .bwd = ident_bwd,
                                      .hp_int = {"steps"}, .hp_real = {"alpha"}};

static const char *const SLICED =
    "output = top\n"
    "[bottom]\nkind = mlp\nin = dense\nsizes = 8-16\n"
    "[a]\nkind = dot\nin = bottom, pooled:0-12\n"
    "[b]\nkind = dot\nin = bottom, pooled:13-25\n"
    "[mid]\nkind = slice\nin = pooled\nfrom = 16\nto = 48\n"
    "[ab]\nkind = concat\nin = a, b, mid, pooled:13-25\n"
    "[top]\nkind = mlp\nin = ab\nsizes = 8-1\nrelu-last = 0\n";

static void test_roundtrip(void **state) {
    (void)state;
    np_error e = {{0}};
    const char *const dl[][2] = {{"model", "dlrm"}};
    const char *const dc[][2] = {{"model", "dcnv2"}, {"cross-rank", "8"}, {"deep", "32-16"}};
    np_config cd = cfg_of(dl, 1), cc = cfg_of(dc, 3), c0;
    np_config_defaults(&c0);
    np_graph_t *g;
    if (np_graph_from_config(&cd, &g, &e)) fail_msg("%s", e.msg);
    roundtrip(&c0, g);
    np_graph_free(g);
    if (np_graph_from_config(&cc, &g, &e)) fail_msg("%s", e.msg);
    roundtrip(&c0, g);
    np_graph_free(g);
    g = read_text(&c0, SLICED);
    assert_int_equal(np_graph_nodes(g), 10); /* bottom.0-1, pooled:0-12, a, pooled:13-25, b, mid, ab, top.0-1 */
    roundtrip(&c0, g);
    np_graph_free(g);
    /* unnamed slots as i<k> / f<k>, named ones by name, reals exactly */
    if (np_layer_find("mf_ident") == NULL && np_layer_register(&mf_ident, &e))
        fail_msg("%s", e.msg);
    g = read_text(&c0, "[x]\nkind = mf_ident\nin = pooled\nalpha = 0.1\nf3 = -1e-300\ni5 = -7\n"
                       "steps = 3\n[top]\nkind = linear\nin = x\nout = 1\n");
    assert_true(g->node[0].hp.f[0] == 0.1);
    assert_true(g->node[0].hp.f[3] == -1e-300);
    assert_int_equal(g->node[0].hp.i[5], -7);
    assert_int_equal(g->node[0].hp.i[0], 3);
    roundtrip(&c0, g);
    char *t = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&t, &n);
    assert_int_equal(np_graph_write(g, f, &e), NP_OK);
    fclose(f);
    assert_non_null(strstr(t, "alpha = 0.10000000000000001\n"));
    assert_non_null(strstr(t, "f3 = -"));
    assert_non_null(strstr(t, "i5 = -7\n"));
    assert_non_null(strstr(t, "steps = 3\n"));
    assert_non_null(strstr(t, "output = top\n"));
    free(t);
    np_graph_free(g);
}

/* Names that would not read back are refused; a full disk is NP_STATUS_IO. */
static void test_write_refuses(void **state) {
    (void)state;
    np_config c;
    np_config_defaults(&c);
    np_error e = {{0}};
    const char *bad[] = {"a b", "a#b", "a;b", "[a", "a]", "a,b", "a=b", "dense", "pooled",
                         "pooled:0-3", "tab\tname"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        np_graph_t *g;
        assert_int_equal(np_graph_create(&c, &g, &e), NP_OK);
        int in = NP_IN_POOLED;
        np_layer_hp hp = {.i = {1}};
        assert_true(np_graph_add(g, bad[i], "linear", &hp, 1, &in, &e) >= 0);
        assert_int_equal(np_graph_set_output(g, 0, &e), NP_OK);
        FILE *f = tmpfile();
        assert_int_equal(np_graph_write(g, f, &e), NP_STATUS_BAD_INPUT);
        assert_non_null(strstr(e.msg, "cannot be written"));
        fclose(f);
        np_graph_free(g);
    }
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        np_graph_t *g = read_text(&c, SLICED);
        assert_int_equal(np_graph_write(g, full, &e), NP_STATUS_IO);
        fclose(full);
        np_graph_free(g);
    }
}

/* ---------------------------------------------------------------- a custom topology */

/* Two dots over halves of the tables: widths, and the whole model's gradient (two slices
 * of the pooled embeddings, summed back into each table's rows) against finite
 * differences of the reference forward. */
static void test_custom_topology(void **state) {
    (void)state;
    const char *const kv[][2] = {{"tables", "4"}, {"rows", "5,4,6,3"}, {"dim", "2"},
                                 {"dense-features", "3"}, {"batch", "6"}};
    np_config c = cfg_of(kv, 5);
    np_graph_t *g = read_text(&c, "[bottom]\nkind = mlp\nin = dense\nsizes = 4-2\n"
                                  "[lo]\nkind = dot\nin = bottom, pooled:0-1\n"
                                  "[hi]\nkind = dot\nin = bottom, pooled:2-3\n"
                                  "[both]\nkind = concat\nin = lo, hi, pooled:3-3\n"
                                  "[top]\nkind = mlp\nin = both\nsizes = 3-1\nrelu-last = 0\n");
    /* bottom.0 bottom.1 pooled:0-1 lo pooled:2-3 hi pooled:3-3 both top.0 top.1 */
    assert_int_equal(np_graph_nodes(g), 10);
    const char *names[] = {"bottom.0", "bottom.1", "pooled:0-1", "lo", "pooled:2-3",
                           "hi", "pooled:3-3", "both", "top.0", "top.1"};
    int widths[] = {4, 2, 4, 2 + 3, 4, 2 + 3, 2, 12, 3, 1};
    for (int v = 0; v < 10; v++) {
        assert_string_equal(g->node[v].name, names[v]);
        assert_int_equal(np_graph_width(g, v), widths[v]);
    }
    assert_int_equal(g->node[6].hp.i[0], 6);
    assert_int_equal(g->node[6].hp.i[1], 8);
    assert_int_equal(g->output, 9);
    np_error e = {{0}};
    np_model_t *m;
    np_config ck = c;
    ck.dense_features = 3; /* the batch helper reads bottom[0] */
    ck.bottom[0] = 3;
    if (np_model_create_graph(&ck, g, &m, &e)) fail_msg("%s", e.msg);
    np_graph_free(g);
    np_batch b = tu_batch(&ck, 6, 3, 9);
    np_fwd_ws *ws;
    assert_int_equal(np_fwd_ws_create(m, 6, &ws, &e), NP_OK);
    double ls;
    assert_int_equal(np_reference_forward(m, ws, &b, NULL, &ls, &e), NP_OK);
    assert_true(isfinite(ls));
    float *gd = calloc(m->n_dense, sizeof(float)), *gt[4];
    size_t total = m->n_dense;
    for (int t = 0; t < 4; t++) {
        gt[t] = calloc((size_t)m->rows[t] * 2, sizeof(float));
        total += (size_t)m->rows[t] * 2;
    }
    assert_int_equal(np_reference_backward_full(m, ws, &b, 1.0f, gd, gt, &e), NP_OK);
    const float h = 1e-3f;
    double worst = 0;
    for (size_t i = 0; i < total; i++) {
        float *x, gv;
        if (i < m->n_dense) {
            x = &m->dense[i];
            gv = gd[i];
        } else {
            size_t j = i - m->n_dense;
            int t = 0;
            while (j >= (size_t)m->rows[t] * 2)
                j -= (size_t)m->rows[t++] * 2;
            x = &m->table[t][j];
            gv = gt[t][j];
        }
        float x0 = *x;
        double lp, lm;
        *x = x0 + h;
        assert_int_equal(np_reference_forward(m, ws, &b, NULL, &lp, &e), NP_OK);
        *x = x0 - h;
        assert_int_equal(np_reference_forward(m, ws, &b, NULL, &lm, &e), NP_OK);
        *x = x0;
        double fd = (lp - lm) / (2.0 * h);
        double err = fabs(fd - gv) / (1e-2 + fabs(fd));
        if (err > worst) worst = err;
        /* the loss is smooth but for ReLU kinks; float forward, h = 1e-3: as test_layers */
        if (!tu_close(gv, fd, 2e-3, 1e-2))
            fail_msg("sliced model: element %zu of %zu: analytic %.6g vs finite difference %.6g",
                     i, total, (double)gv, fd);
    }
    print_message("sliced model: %zu elements, worst relative error %.2e\n", total, worst);
    free(gd);
    for (int t = 0; t < 4; t++)
        free(gt[t]);
    np_fwd_ws_free(ws);
    np_batch_free(&b);
    np_model_free(m);
}

/* ---------------------------------------------------------------- errors */

/* Each bad file: the status, "PATH:LINE: " (line 0: "PATH: ") and a fragment. */
typedef struct bad_case {
    const char *text;
    int line;
    const char *frag;
} bad_case;

static const bad_case BAD[] = {
    {"[a]\nkind = lineer\nin = dense\n", 2, "node a: unknown kind 'lineer' (kinds: linear, dot"},
    {"[a]\nkind = lineer\nin = dense\n", 2, "--plugin"},
    {"[a]\nkind = linear\nin = pooled\nout = 1\nouts = 3\n", 5,
     "node a: linear: no hyper-parameter 'outs'"},
    {"[a]\nkind = linear\nin = pooled\nout = x\n", 4, "node a: linear: out = 'x': expected an integer"},
    {"[a]\nkind = linear\nin = b\nout = 1\n", 3, "node a: in: 'b' names no earlier node"},
    {"[a]\nkind = linear\nin = a\nout = 1\n", 3, "node a: in: a node cannot read itself"},
    {"[a]\nkind = linear\nin = pooled\nout = 1\n[b]\nkind = linear\nin = a\nout = 1\n"
     "[a]\nkind = linear\nin = b\nout = 1\n", 9, "node a: defined twice (first at line 1)"},
    {"[a]\nin = pooled\n", 1, "node a: no kind"},
    {"[a]\nkind = dot\n", 1, "node a: no in"},
    {"[a]\n\n# nothing\n[b]\nkind = dot\nin = pooled\n", 1, "node a: a section with no keys"},
    {"[a]\nkind = dot\nin = pooled\nfoo\n", 4, "node a: 'foo': not `key = value` or `[name]`"},
    {"output = a\n[a\nkind = dot\n", 2, "a section header is [name]"},
    {"[m]\nkind = mlp\nin = pooled\n", 1, "node m: mlp: no sizes"},
    {"[m]\nkind = mlp\nin = pooled\nsizes = 4-0-1\n", 4, "node m: sizes = 4-0-1"},
    {"[m]\nkind = mlp\nin = pooled\nsizes = 4-1\nrelu-last = 2\n", 5, "node m: relu-last = 2"},
    {"[m]\nkind = mlp\nin = pooled\nsizes = 1\nout = 3\n", 5, "node m: mlp: no key 'out'"},
    {"[m]\nkind = mlp\nin = pooled, dense\nsizes = 1\n", 3, "node m: in: an mlp takes one input"},
    {"[a]\nkind = linear\nin = pooled\nout = 4\n", 1,
     "node a: the output a has width 4; the loss takes one logit"},
    {"output = a\n[a]\nkind = linear\nin = pooled\nout = 4\n", 1, "the output a has width 4"},
    {"output = zz\n[a]\nkind = linear\nin = pooled\nout = 1\n", 1, "output = zz names no node"},
    {"[a]\nkind = linear\nin = pooled\nout = 1\n[b]\nkind = linear\nin = pooled\nout = 1\n", 1,
     "node a: a feeds no node and is not the output"},
    {"[m]\nkind = mlp\nin = pooled\nsizes = 4-1\n[b]\nkind = linear\nin = pooled\nout = 1\n", 1,
     "node m: m.1 feeds no node"},
    {"output = a\n[a]\nkind = linear\nin = pooled\nout = 1\n[b]\nkind = linear\nin = a\nout = 1\n",
     1, "the output a feeds node b"},
    {"[a]\nkind = linear\nin = dense\nout = 1\n", 0, "no node reads the pooled embeddings"},
    {"# only comments\n\n; and this\n", 3, "no node"},
    {"steps = 3\n", 1, "unknown key 'steps' before the first [node]"},
    {"output = a\noutput = b\n", 2, "output given twice (first at line 1)"},
    {"[a]\nkind = linear\nkind = dot\n", 3, "node a: kind given twice (first at line 2)"},
    {"[a]\nkind = linear\nin =\n", 3, "node a: in: no value"},
    {"[a]\nkind = linear\nIn = x\n", 3, "node a: 'In': a key is"},
    {"[a]\nkind = dot\nin = pooled,, pooled\n", 3, "node a: in: an empty input"},
    {"[a]\nkind = dot\nin = pooled:0-26\n", 3, "node a: in: pooled:0-26: pooled:A-B takes tables"},
    {"[a]\nkind = dot\nin = pooled:3-2\n", 3, "pooled:A-B takes tables"},
    {"[a]\nkind = dot\nin = pooled:01-2\n", 3, "written like pooled:0-12"},
    {"[a]\nkind = dot\nin = pooled:1\n", 3, "pooled:A-B takes tables"},
    {"[pooled:0-1]\nkind = linear\nin = pooled\nout = 1\n", 1,
     "node pooled:0-1: the name pooled:A-B is kept"},
    {"[pooled:0-1]\nkind = slice\nin = pooled\nfrom = 0\nto = 16\n", 1,
     "node pooled:0-1: the name pooled:0-1 is kept for the slice of those tables: from = 0, to = 32"},
    {"[a b]\nkind = dot\nin = pooled\n", 1, "[a b]: a node name is printable ASCII"},
    {"[a=b]\nkind = dot\nin = pooled\n", 1, "'#', ';', '[', ']', ',' or '='"},
    {"[a,b]\nkind = dot\nin = pooled\n", 1, "'#', ';', '[', ']', ',' or '='"},
    {"[dense]\nkind = dot\nin = pooled\n", 1, "dense and pooled name the data"},
    {"[pooled:0-1]\nkind = mlp\nin = pooled\nsizes = 1\n", 1,
     "node pooled:0-1: the names pooled:... are kept"},
    {"[pooled:x]\nkind = dot\nin = pooled\n", 1, "node pooled:x: the name pooled:A-B is kept"},
    {"[a]\nkind = linear\nin = pooled\nout = 1\noutput = a\n", 5,
     "node a: linear has no hyper-parameter output; output = NODE goes at the top"},
    {"[]\nkind = dot\nin = pooled\n", 1, "a node name is 1-31 characters"},
    {"[a23456789012345678901234567890123]\nkind = dot\nin = pooled\n", 1, "1-31 characters"},
    {"[a234567890123456789012345678901]\nkind = mlp\nin = pooled\nsizes = 1\n", 1,
     "more than 31 characters; shorten"},
    {"[x.1]\nkind = linear\nin = pooled\nout = 2\n[x]\nkind = mlp\nin = x.1\nsizes = 2-1\n", 5,
     "node x: mlp: its layer x.1 is a node defined already at line 1"},
    {"[q]\nkind = linear\nin = pooled\nout = 2\n[q.0]\nkind = linear\nin = q\nout = 2\n"
     "[q]\nkind = mlp\nin = q.0\nsizes = 1\n", 9, "defined twice"},
    {"[x]\nkind = linear\nin = pooled\nout = 2\n[z]\nkind = mlp\nin = x\nsizes = 1-1\n"
     "[z.1]\nkind = linear\nin = z\nout = 1\n", 9, "node z.1: defined twice (first at line 5)"},
    /* the graph's own errors at the section's line, the node named once */
    {"[b]\nkind = linear\nin = dense\nout = 3\n[a]\nkind = dot\nin = b, pooled\n", 5,
     "node a (dot): "},
    {"[a]\nkind = cross\nin = pooled\nrank = 2\n", 1, "node a: cross takes 2 to 2 inputs, not 1"},
    {"[a]\nkind = linear\nin = pooled\nout = 0\n", 1, "node a (linear): output width 0"},
    {"[a]\nkind = slice\nin = pooled\nfrom = 500\n", 1, "node a (slice): from = 500"},
    {"[a]\nkind = dot\nin = pooled, pooled, pooled, pooled, pooled, pooled, pooled, pooled, pooled\n",
     3, "node a: in: more than 8 inputs"},
};

static void test_errors(void **state) {
    (void)state;
    np_config c;
    np_config_defaults(&c);
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        char path[64], want[128];
        write_tmp(path, sizeof path, BAD[i].text);
        np_graph_t *g = (np_graph_t *)1;
        np_error e = {{0}};
        np_status st = np_graph_from_file(&c, path, &g, &e);
        unlink(path);
        if (st != NP_STATUS_BAD_INPUT)
            fail_msg("case %zu: status %d, want bad input: %s", i, st, e.msg);
        assert_null(g);
        if (BAD[i].line)
            snprintf(want, sizeof want, "%s:%d: ", path, BAD[i].line);
        else
            snprintf(want, sizeof want, "%s: ", path);
        if (strncmp(e.msg, want, strlen(want)) || !strstr(e.msg, BAD[i].frag) ||
            strchr(e.msg, '\n'))
            fail_msg("case %zu: '%s' does not start '%s' or lacks '%s'", i, e.msg, want,
                     BAD[i].frag);
    }
    /* a file that cannot be read; a line too long; a NUL byte */
    np_graph_t *g;
    np_error e = {{0}};
    assert_int_equal(np_graph_from_file(&c, "/nonexistent/m.ini", &g, &e), NP_STATUS_IO);
    assert_non_null(strstr(e.msg, "/nonexistent/m.ini"));
    char path[64];
    char *longl = malloc(5000);
    memset(longl, ' ', 4999);
    memcpy(longl, "[a]\n#", 5);
    longl[4999] = 0;
    write_tmp(path, sizeof path, longl);
    assert_int_equal(np_graph_from_file(&c, path, &g, &e), NP_STATUS_BAD_INPUT);
    unlink(path);
    assert_non_null(strstr(e.msg, ":2: a line of more than 4096 bytes"));
    /* exactly 4096 bytes is fine */
    memset(longl, ' ', 4999);
    const char *body = "[a]\nkind = linear\nin = pooled\nout = 1\n";
    memcpy(longl, body, strlen(body));
    longl[strlen(body) + 4096] = 0;
    longl[strlen(body)] = '#';
    write_tmp(path, sizeof path, longl);
    assert_int_equal(np_graph_from_file(&c, path, &g, &e), NP_OK);
    unlink(path);
    np_graph_free(g);
    free(longl);
    snprintf(path, sizeof path, "/tmp/np_modelfile_XXXXXX");
    int fd = mkstemp(path);
    assert_true(write(fd, "[a]\nki\0nd = dot\n", 16) == 16);
    close(fd);
    assert_int_equal(np_graph_from_file(&c, path, &g, &e), NP_STATUS_BAD_INPUT);
    unlink(path);
    assert_non_null(strstr(e.msg, ":2: a NUL byte"));
}

/* Comments, blank lines, CRLF, spacing and inline comments are ignored; `#` inside a
 * value without whitespace before it is not a comment (and refused as a name). */
static void test_syntax(void **state) {
    (void)state;
    np_config c;
    np_config_defaults(&c);
    np_graph_t *g = read_text(&c, "  # a model\r\n; another comment\r\n\r\noutput=top ; here\r\n"
                                  "[ bottom ]   # the bottom\r\n  kind=mlp\r\nin   =   dense\t\r\n"
                                  "sizes = 64-16\r\n[interaction]\r\nkind = dot\r\n"
                                  "in = bottom ,pooled\r\n[top]\r\nkind = mlp\r\nin = interaction\r\n"
                                  "sizes = 64-1\r\nrelu-last = 0 # logit\r\n");
    np_graph_t *ref;
    np_error e = {{0}};
    if (np_graph_from_config(&c, &ref, &e)) fail_msg("%s", e.msg);
    assert_same_graph(ref, g);
    np_graph_free(g);
    np_graph_free(ref);
    char path[64];
    write_tmp(path, sizeof path, "[a]\nkind = linear\nin = pooled#x\nout = 1\n");
    assert_int_equal(np_graph_from_file(&c, path, &g, &e), NP_STATUS_BAD_INPUT);
    unlink(path);
    assert_non_null(strstr(e.msg, ":3: node a: in: 'pooled#x' names no earlier node"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_kind),     cmocka_unit_test(test_shipped_models),
        cmocka_unit_test(test_roundtrip),      cmocka_unit_test(test_write_refuses),
        cmocka_unit_test(test_custom_topology), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_syntax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
