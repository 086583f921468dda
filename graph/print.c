/* One step of the step graph as text, Graphviz DOT or JSON (nestpipe/stepgraph.h
 * np_step_graph_write): its tasks in submission order, and what each waits for, in this
 * step or an earlier one, through which buffer and why. The dual-buffer edges (the sync
 * and what it reads and feeds) and the frozen-window edges (the comm token ordering a
 * batch's exchanges) are marked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "graph/bgraph.h"
#include "graph/critical.h"

static const char *why_name(int why) {
    return why == NP_DEP_RAW ? "RAW" : why == NP_DEP_WAR ? "WAR" : "WAW";
}

static const char *mode_name(uint8_t m) {
    return m == NP_MODE_R ? "R" : m == NP_MODE_W ? "W" : m == NP_MODE_RW ? "RW" : "SCRATCH";
}

/* What the edge shows: "dbp" (the dual buffer), "fwp" (the frozen windows' order) or "". */
static const char *mark_of(const np_step_graph_t *g, const np_sg_edge *e) {
    const np_step_node *a = &g->node[e->from].n, *b = &g->node[e->to].n;
    if (a->op == NP_OP_SYNC || b->op == NP_OP_SYNC) return "dbp";
    if (e->buf.role == NP_B_TOKEN && a->window >= 0 && b->window >= 0 && a->batch == b->batch)
        return "fwp";
    return "";
}

/* Whether the text and the picture show edge x into step [lo, ..): all but the waits to
 * reuse a buffer an earlier step's task read or wrote (WAR, WAW), which only order buffer
 * recycling; JSON has them all. */
static int shown_edge(const np_step_graph_t *g, const np_sg_edge *x, int lo) {
    return x->from >= lo || x->why == NP_DEP_RAW || *mark_of(g, x);
}

/* Node v's priority: the critical path's (graph/critical.c) when the config asks for it,
 * else its kind's plus its window's boost, as the engine gives them. */
static int prio(const np_step_graph_t *g, int v) {
    const np_step_node *n = &g->node[v].n;
    int p = g->cp ? np_sg_prio_of(g->cp, n, g->node[v].step) : -1;
    if (p >= 0) return p;
    const np_node_kind_def *k = np_node_kind_get(n->kind);
    return (k ? k->prio : 0) + n->boost;
}

/* The first node of step s, and one past its last. */
static void step_range(const np_step_graph_t *g, long s, int *lo, int *hi) {
    int a = 0;
    while (a < g->n && g->node[a].step < s)
        a++;
    int b = a;
    while (b < g->n && g->node[b].step == s)
        b++;
    *lo = a;
    *hi = b;
}

/* One line on what the step is: the pipeline, the shape, its tasks and dependencies. */
static void header(const np_step_graph_t *g, long step, int lo, int hi, char *out, size_t size) {
    const np_step_shape *s = &g->shape;
    long deps = 0, early = 0;
    char gpus[32] = "";
    if (s->gpus > 0) snprintf(gpus, sizeof gpus, ", %d CUDA worker%s", s->gpus, s->gpus == 1 ? "" : "s");
    for (int v = lo; v < hi; v++) {
        int a, b;
        np_sg_in_edges(g, v, &a, &b);
        deps += b - a;
        for (int e = a; e < b; e++)
            early += g->edge[e].from < lo;
    }
    snprintf(out, size,
             "step %ld of %s (model %.200s; %d window%s x %d chunk%s, %d rank%s, look-ahead %d, "
             "%d embedding buffer%s%s%s%s): %d tasks, %ld dependencies (%ld on earlier steps)",
             step, g->pipeline, g->model[0] ? g->model : "?", s->W, s->W == 1 ? "" : "s", s->C,
             s->C == 1 ? "" : "s", s->R, s->R == 1 ? "" : "s", s->pol.ahead, s->pol.buffers,
             s->pol.buffers == 1 ? "" : "s", s->pol.sync ? ", sync" : "",
             s->pol.split_rows ? ", split rows" : "", gpus, hi - lo, deps, early);
}

static void write_text(const np_step_graph_t *g, long step, int lo, int hi, FILE *f) {
    char h[512];
    header(g, step, lo, hi, h, sizeof h);
    fprintf(f, "%s\n", h);
    fprintf(f, "%5s %-26s %6s %4s %5s %4s  %s\n", "task", "operation", "batch", "win", "chunk",
            "prio",
            "waits for (task: buffer, why; s<N>: an earlier step's task; +N reuses: waits to "
            "reuse buffers earlier steps used)");
    for (int v = lo; v < hi; v++) {
        const np_step_node *n = &g->node[v].n;
        char name[64];
        np_sg_node_name(g, v, name, sizeof name);
        fprintf(f, "%5d %-26s %6ld %4d %5d %4d ", v - lo, name, n->batch, n->window, n->chunk,
                prio(g, v));
        int a, b, reuse = 0;
        np_sg_in_edges(g, v, &a, &b);
        for (int e = a; e < b; e++) {
            const np_sg_edge *x = &g->edge[e];
            char buf[48];
            np_step_buf_name(&x->buf, buf, sizeof buf);
            const char *m = mark_of(g, x);
            if (shown_edge(g, x, lo) == 0) {
                reuse++;
                continue;
            }
            if (x->from >= lo)
                fprintf(f, " %d:%s,%s%s%s", x->from - lo, buf, why_name(x->why), *m ? "," : "", m);
            else {
                char pn[64];
                np_sg_node_name(g, x->from, pn, sizeof pn);
                fprintf(f, " s%ld %s b%ld:%s,%s%s%s", g->node[x->from].step, pn,
                        g->node[x->from].n.batch, buf, why_name(x->why), *m ? "," : "", m);
            }
        }
        if (reuse) fprintf(f, " +%d reuse%s", reuse, reuse == 1 ? "" : "s");
        fputc('\n', f);
    }
}

/* in as the text of a DOT string: '"' and '\\' escaped, cut to fit. */
static const char *dot_esc(const char *in, char *out, size_t size) {
    size_t o = 0;
    for (; *in && o + 3 < size; in++) {
        if (*in == '"' || *in == '\\') out[o++] = '\\';
        out[o++] = *in;
    }
    out[o] = 0;
    return out;
}

static void write_dot(const np_step_graph_t *g, long step, int lo, int hi, FILE *f) {
    char h0[512], h[1024], esc[160];
    header(g, step, lo, hi, h0, sizeof h0);
    dot_esc(h0, h, sizeof h);
    fprintf(f, "strict digraph step%ld {\n  label=\"%s\";\n  labelloc=t;\n", step, h);
    fprintf(f, "  rankdir=TB; node [shape=box, style=filled, fontsize=10];\n");
    /* the nodes, a cluster per (batch, window), in the order the clusters first appear */
    for (int v = lo; v < hi; v++) {
        const np_step_node *n = &g->node[v].n;
        int first = 1;
        for (int u = lo; u < v && first; u++)
            first = !(g->node[u].n.batch == n->batch && g->node[u].n.window == n->window);
        if (!first) continue;
        fprintf(f, "  subgraph cluster_%d {\n    label=\"batch %ld", v, n->batch);
        if (n->window >= 0) fprintf(f, ", window %d", n->window);
        fprintf(f, "\";\n");
        for (int u = v; u < hi; u++) {
            const np_step_node *x = &g->node[u].n;
            if (x->batch != n->batch || x->window != n->window) continue;
            const np_node_kind_def *k = np_node_kind_get(x->kind);
            char name[64], where[32] = "";
            np_sg_node_name(g, u, name, sizeof name);
            if (x->chunk >= 0) snprintf(where, sizeof where, " c%d", x->chunk);
            fprintf(f, "    n%d [label=\"%d %s\\nb%ld%s\", fillcolor=\"#%02x%02x%02x\"];\n", u,
                    u - lo, dot_esc(name, esc, sizeof esc), x->batch, where, k->rgb[0], k->rgb[1], k->rgb[2]);
        }
        fprintf(f, "  }\n");
    }
    /* the earlier steps' tasks this one waits for, once each */
    unsigned char *seen = calloc((size_t)(lo + 1), 1);
    for (int v = lo; v < hi; v++) {
        int a, b;
        np_sg_in_edges(g, v, &a, &b);
        for (int e = a; e < b; e++) {
            const np_sg_edge *x = &g->edge[e];
            if (!shown_edge(g, x, lo)) continue;
            if (x->from < lo && (!seen || !seen[x->from])) {
                char pn[64];
                np_sg_node_name(g, x->from, pn, sizeof pn);
                fprintf(f,
                        "  n%d [label=\"step %ld: %s\\nb%ld\", fillcolor=\"#eeeeee\", "
                        "style=\"filled,dashed\"];\n",
                        x->from, g->node[x->from].step, dot_esc(pn, esc, sizeof esc),
                        g->node[x->from].n.batch);
                if (seen) seen[x->from] = 1;
            }
            char buf[48];
            np_step_buf_name(&x->buf, buf, sizeof buf);
            const char *m = mark_of(g, x);
            fprintf(f, "  n%d -> n%d [tooltip=\"%s %s\", style=%s%s];\n", x->from, v, buf,
                    why_name(x->why), x->why == NP_DEP_RAW ? "solid" : "dashed",
                    !strcmp(m, "dbp")   ? ", color=blue, penwidth=2"
                    : !strcmp(m, "fwp") ? ", color=darkorange, penwidth=2"
                                        : "");
        }
    }
    free(seen);
    fprintf(f, "}\n");
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    fputc('"', f);
}

static void write_json(const np_step_graph_t *g, long step, int lo, int hi, FILE *f) {
    const np_step_shape *s = &g->shape;
    fprintf(f, "{\"step\": %ld, \"pipeline\": ", step);
    json_str(f, g->pipeline);
    fprintf(f, ", \"model\": ");
    json_str(f, g->model);
    fprintf(f,
            ", \"windows\": %d, \"chunks\": %d, \"ranks\": %d, \"lookahead\": %d, \"buffers\": "
            "%d, \"sync\": %d, \"split_rows\": %d,\n \"nodes\": [",
            s->W, s->C, s->R, s->pol.ahead, s->pol.buffers, s->pol.sync, s->pol.split_rows);
    for (int v = lo; v < hi; v++) {
        const np_step_node *n = &g->node[v].n;
        const np_sg_node *x = &g->node[v];
        char name[64];
        np_sg_node_name(g, v, name, sizeof name);
        fprintf(f, "%s\n  {\"id\": %d, \"name\": ", v > lo ? "," : "", v);
        json_str(f, name);
        fprintf(f,
                ", \"kind\": \"%s\", \"batch\": %ld, \"window\": %d, \"chunk\": %d, \"node\": %d, "
                "\"priority\": %d, \"buffers\": [",
                np_node_kind_name(n->kind), n->batch, n->window, n->chunk, n->node, prio(g, v));
        for (int j = 0; j < x->nbuf; j++) {
            char buf[48];
            np_step_buf_name(&g->buf[x->buf0 + j], buf, sizeof buf);
            fprintf(f, "%s[\"%s\", \"%s\"]", j ? ", " : "", buf, mode_name(g->mode[x->buf0 + j]));
        }
        fprintf(f, "]}");
    }
    fprintf(f, "],\n \"edges\": [");
    int first = 1;
    for (int v = lo; v < hi; v++) {
        int a, b;
        np_sg_in_edges(g, v, &a, &b);
        for (int e = a; e < b; e++) {
            const np_sg_edge *x = &g->edge[e];
            char buf[48];
            np_step_buf_name(&x->buf, buf, sizeof buf);
            fprintf(f,
                    "%s\n  {\"from\": %d, \"to\": %d, \"buffer\": \"%s\", \"why\": \"%s\", "
                    "\"mark\": \"%s\"",
                    first ? "" : ",", x->from, x->to, buf, why_name(x->why), mark_of(g, x));
            if (x->from < lo) {
                char pn[64];
                np_sg_node_name(g, x->from, pn, sizeof pn);
                fprintf(f, ", \"from_step\": %ld, \"from_name\": ", g->node[x->from].step);
                json_str(f, pn);
                fprintf(f, ", \"from_batch\": %ld", g->node[x->from].n.batch);
            }
            fputc('}', f);
            first = 0;
        }
    }
    fprintf(f, "]}\n");
}

np_status np_step_graph_write(const np_step_graph_t *g, long step, np_step_graph_format fmt,
                              FILE *f, np_error *err) {
    if (step < 0 || step >= g->steps)
        return np_err(err, NP_STATUS_BAD_INPUT, "step graph: step %ld was not built (0 to %ld)",
                      step, g->steps - 1);
    int lo, hi;
    step_range(g, step, &lo, &hi);
    switch (fmt) {
    case NP_STEP_GRAPH_TEXT:
        write_text(g, step, lo, hi, f);
        break;
    case NP_STEP_GRAPH_DOT:
        write_dot(g, step, lo, hi, f);
        break;
    case NP_STEP_GRAPH_JSON:
        write_json(g, step, lo, hi, f);
        break;
    default:
        return np_err(err, NP_STATUS_BAD_INPUT, "step graph: format %d unknown", (int)fmt);
    }
    if (ferror(f)) return np_err(err, NP_STATUS_IO, "step graph: writing failed");
    return NP_OK;
}
