/* Model files (docs/layers.md "Model files"): a graph read from an INI-like file, one
 * [section] per node (or per `kind = mlp` macro of linear layers), and a graph written back
 * as such a file. The reader is written by hand so that every error names file:line and
 * the node. Not here: the graph itself (runtime/model/graph.c) or the built-in builders
 * (runtime/model/builtin.c). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/lines.h"
#include "runtime/core/shard.h"
#include "runtime/core/util.h"
#include "runtime/model/graph.h"

#define LINE_MAX_BYTES 4096 /* longer lines are refused, never split */
#define SECTION_MAX_KEYS 32 /* kind, in and every hyper-parameter slot fit */
#define NAME_MAX_BYTES 32   /* np_node.name */
#define MLP_MAX_SIZES NP_MAX_NODES
#define MLP_MAX_WIDTH (1 << 24)

/* One `key = value` of a section, with its line. */
typedef struct mf_key {
    char key[32];
    char *val; /* owned */
    long line;
} mf_key;

/* The reader's state: the graph so far, the section being read, and what names mean. */
typedef struct mf {
    const np_config *cfg;
    const char *path;
    np_error *err;
    np_graph_t *g;
    /* per graph node: the line and section name its errors point to (an mlp's layers
     * point to the mlp, an implicit pooled:A-B slice to the `in` line that made it) */
    long node_line[NP_MAX_NODES];
    char node_sect[NP_MAX_NODES][NAME_MAX_BYTES];
    /* mlp sections: their name stands for their last layer */
    int n_mlp;
    struct {
        char name[NAME_MAX_BYTES];
        int node;
        long line;
    } mlp[NP_MAX_NODES];
    /* the section being read */
    int open;
    char sect[NAME_MAX_BYTES];
    long sect_line;
    int n_keys;
    mf_key keys[SECTION_MAX_KEYS];
    /* output = NAME, before the first section */
    char output[LINE_MAX_BYTES + 1];
    long output_line;
} mf;

/* ---------------------------------------------------------------- errors */

/* "FILE:LINE: node NAME: what" (node NULL: "FILE:LINE: what"; line 0: "FILE: what"). */
NP_FORMAT_PRINTF(5, 6)
static np_status fail(mf *m, np_status st, long line, const char *node, const char *fmt, ...) {
    char what[sizeof m->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char where[64] = "";
    if (line > 0) snprintf(where, sizeof where, ":%ld", line);
    if (node)
        return np_err(m->err, st, "%s%s: node %s: %s", m->path, where, node, what);
    return np_err(m->err, st, "%s%s: %s", m->path, where, what);
}

/* An error of the graph's own (np_graph_add: shapes, limits) at a section's line. Its
 * "graph: node NAME" prefix becomes the file's "node NAME", so the node is named once. */
static np_status graph_fail(mf *m, np_status st, long line, const char *node, const np_error *e) {
    const char *msg = e->msg;
    if (!strncmp(msg, "graph: ", 7)) msg += 7;
    char pre[NAME_MAX_BYTES + 8];
    snprintf(pre, sizeof pre, "node %s", node);
    size_t pl = strlen(pre);
    char where[64] = "";
    if (line > 0) snprintf(where, sizeof where, ":%ld", line);
    if (!strncmp(msg, pre, pl) && (msg[pl] == ':' || msg[pl] == ' '))
        return np_err(m->err, st < 0 ? st : NP_STATUS_BAD_INPUT, "%s%s: node %s%s", m->path,
                      where, node, msg + pl);
    return np_err(m->err, st < 0 ? st : NP_STATUS_BAD_INPUT, "%s%s: node %s: %s", m->path, where,
                  node, msg);
}

/* Text from the file, fit for a one-line message. */
#define ESC(s) np_escape((s), strlen(s), (char[96]){0}, 96)

/* ---------------------------------------------------------------- names */

/* Why a node name could not be a section name that reads back, or NULL when it can:
 * printable ASCII without whitespace or the file's own punctuation. */
static const char *name_problem(const char *name) {
    size_t n = strlen(name);
    if (!n || n >= NAME_MAX_BYTES) return "a node name is 1-31 characters";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= ' ' || c >= 0x7f)
            return "a node name is printable ASCII without whitespace";
        if (strchr("#;[],=", c))
            return "a node name may not contain '#', ';', '[', ']', ',' or '='";
    }
    if (!strcmp(name, "dense") || !strcmp(name, "pooled"))
        return "dense and pooled name the data (inputs), not a node";
    return NULL;
}

/* Tables a..b of "pooled:A-B", written the one way: decimal, no sign, no leading zero.
 * Returns 1 when name has that form (whatever the range), 0 when it does not start with
 * "pooled:". *ok is 1 when the form is canonical. */
static int pooled_range(const char *name, long *a, long *b, int *ok) {
    *ok = 0;
    if (strncmp(name, "pooled:", 7)) return 0;
    const char *p = name + 7;
    char *end;
    if (!isdigit((unsigned char)*p)) return 1;
    errno = 0;
    *a = strtol(p, &end, 10);
    if (errno || *end != '-' || !isdigit((unsigned char)end[1])) return 1;
    *b = strtol(end + 1, &end, 10);
    if (errno || *end) return 1;
    char canon[64];
    snprintf(canon, sizeof canon, "pooled:%ld-%ld", *a, *b);
    *ok = !strcmp(canon, name);
    return 1;
}

/* The columns [from, to) of tables a..b in the pooled embeddings: slot by slot
 * (np_slot_first), so a sequence table 0 spans its seq-len slots. */
static void pooled_cols(const np_graph_t *g, long a, long b, int dim, long *from, long *to) {
    *from = (long)np_slot_first((int)a, g->seq_slots) * dim;
    *to = (long)np_slot_first((int)b + 1, g->seq_slots) * dim;
}

/* Whether node v is the slice a name pooled:A-B promises: kind slice over the pooled
 * embeddings, the columns of those tables (pooled_cols), nothing else set. */
static int pooled_node_ok(const np_graph_t *g, int v, int dim, long a, long b) {
    const np_node *x = &g->node[v];
    if (strcmp(np_node_def(x)->kind, "slice") || x->shape.n_in != 1 || x->in[0] != NP_IN_POOLED)
        return 0;
    long from, to;
    pooled_cols(g, a, b, dim, &from, &to);
    np_layer_hp want = {.i = {(int)from, (int)to}};
    np_layer_hp have = x->hp;
    if (!have.i[1]) have.i[1] = g->pooled_w;
    return !memcmp(&want, &have, sizeof want);
}

/* A node by name, or an mlp section's last layer; -1 when neither. */
static int find_name(const mf *m, const char *name) {
    for (int v = 0; v < m->g->n; v++)
        if (!strcmp(m->g->node[v].name, name)) return v;
    for (int k = 0; k < m->n_mlp; k++)
        if (!strcmp(m->mlp[k].name, name)) return m->mlp[k].node;
    return -1;
}

/* The line where name was defined (node or mlp), 0 if nowhere. */
static long defined_at(const mf *m, const char *name) {
    for (int k = 0; k < m->n_mlp; k++)
        if (!strcmp(m->mlp[k].name, name)) return m->mlp[k].line;
    for (int v = 0; v < m->g->n; v++)
        if (!strcmp(m->g->node[v].name, name)) return m->node_line[v];
    return 0;
}

/* Records a node just added to the graph. */
static void note_node(mf *m, int v, long line, const char *sect) {
    m->node_line[v] = line;
    snprintf(m->node_sect[v], sizeof m->node_sect[v], "%s", sect);
}

/* ---------------------------------------------------------------- a section */

static const mf_key *key_of(const mf *m, const char *key) {
    for (int k = 0; k < m->n_keys; k++)
        if (!strcmp(m->keys[k].key, key)) return &m->keys[k];
    return NULL;
}

/* One input of `in` (already trimmed): the data, a node, an mlp, or a range of tables,
 * whose slice node is made here the first time it is named. */
static np_status resolve_input(mf *m, const char *tok, long line, int *out) {
    if (!strcmp(tok, "dense")) return *out = NP_IN_DENSE, NP_OK;
    if (!strcmp(tok, "pooled")) return *out = NP_IN_POOLED, NP_OK;
    int v = find_name(m, tok);
    if (v >= 0) return *out = v, NP_OK;
    long a = 0, b = 0;
    int ok;
    if (pooled_range(tok, &a, &b, &ok)) {
        int T = m->cfg->tables;
        if (!ok || a > b || b >= T)
            return fail(m, NP_STATUS_BAD_INPUT, line, m->sect,
                        "in: %s: pooled:A-B takes tables A to B (0-based, inclusive, written "
                        "like pooled:0-12) with A <= B < tables (%d)",
                        ESC(tok), T);
        long from, to;
        pooled_cols(m->g, a, b, m->cfg->dim, &from, &to);
        np_layer_hp hp = {.i = {(int)from, (int)to}};
        int src = NP_IN_POOLED;
        np_error e;
        int id = np_graph_add(m->g, tok, "slice", &hp, 1, &src, &e);
        if (id < 0) return graph_fail(m, id, line, m->sect, &e);
        note_node(m, id, line, tok);
        return *out = id, NP_OK;
    }
    if (defined_at(m, tok) == 0 && !strcmp(tok, m->sect))
        return fail(m, NP_STATUS_BAD_INPUT, line, m->sect, "in: a node cannot read itself");
    return fail(m, NP_STATUS_BAD_INPUT, line, m->sect,
                "in: '%s' names no earlier node (an input is dense, pooled, pooled:A-B, or a "
                "node or mlp defined above)",
                ESC(tok));
}

/* The inputs of `in = a, b, ...`. */
static np_status parse_inputs(mf *m, const mf_key *k, int *in, int *n_in) {
    *n_in = 0;
    char *s = k->val;
    for (;;) {
        char *comma = strchr(s, ',');
        if (comma) *comma = 0;
        char *tok = s;
        while (isspace((unsigned char)*tok))
            tok++;
        for (size_t n = strlen(tok); n && isspace((unsigned char)tok[n - 1]);)
            tok[--n] = 0;
        if (!*tok)
            return fail(m, NP_STATUS_BAD_INPUT, k->line, m->sect,
                        "in: an empty input (inputs are names joined by ',')");
        if (*n_in == NP_LAYER_MAX_IN)
            return fail(m, NP_STATUS_BAD_INPUT, k->line, m->sect, "in: more than %d inputs",
                        NP_LAYER_MAX_IN);
        np_status st = resolve_input(m, tok, k->line, &in[*n_in]);
        if (st) return st;
        (*n_in)++;
        if (!comma) return NP_OK;
        s = comma + 1;
    }
}

/* A strict integer in [lo, hi]. */
static int parse_int(const char *s, long lo, long hi, long *v) {
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s) && *s != '-') return 0;
    *v = strtol(s, &end, 10);
    return !errno && !*end && *v >= lo && *v <= hi;
}

/* kind = mlp: linear layers NAME.0, NAME.1, ... as np_graph_mlp makes them. */
static np_status close_mlp(mf *m, const mf_key *in_key) {
    const mf_key *sz = key_of(m, "sizes"), *rl = key_of(m, "relu-last");
    for (int k = 0; k < m->n_keys; k++)
        if (strcmp(m->keys[k].key, "kind") && strcmp(m->keys[k].key, "in") &&
            strcmp(m->keys[k].key, "sizes") && strcmp(m->keys[k].key, "relu-last"))
            return fail(m, NP_STATUS_BAD_INPUT, m->keys[k].line, m->sect,
                        "mlp: no key '%s' (an mlp takes kind, in, sizes and relu-last)",
                        m->keys[k].key);
    if (!strncmp(m->sect, "pooled:", 7))
        return fail(m, NP_STATUS_BAD_INPUT, m->sect_line, m->sect,
                    "the names pooled:... are kept for slices of the pooled embeddings; name "
                    "this mlp otherwise");
    if (!sz)
        return fail(m, NP_STATUS_BAD_INPUT, m->sect_line, m->sect,
                    "mlp: no sizes (the layers' output widths, like sizes = 64-16)");
    int sizes[MLP_MAX_SIZES], n = 0;
    const char *p = sz->val;
    for (;;) {
        char part[32];
        size_t len = strcspn(p, "-");
        long v;
        snprintf(part, sizeof part, "%.*s", (int)(len < sizeof part ? len : sizeof part - 1), p);
        if (n == MLP_MAX_SIZES || len >= sizeof part || !isdigit((unsigned char)part[0]) ||
            !parse_int(part, 1, MLP_MAX_WIDTH, &v))
            return fail(m, NP_STATUS_BAD_INPUT, sz->line, m->sect,
                        "sizes = %s: expected output widths in [1, %d] joined by '-', like "
                        "64-16 (at most %d)",
                        ESC(sz->val), MLP_MAX_WIDTH, MLP_MAX_SIZES);
        sizes[n++] = (int)v;
        if (!p[len]) break;
        p += len + 1;
    }
    long relu_last = 1;
    if (rl && !parse_int(rl->val, 0, 1, &relu_last))
        return fail(m, NP_STATUS_BAD_INPUT, rl->line, m->sect,
                    "relu-last = %s: expected 1 (ReLU after every layer) or 0 (not after the "
                    "last)",
                    ESC(rl->val));
    /* the layers' names must be free and fit a node name */
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.%d", m->sect, i);
        if (strlen(name) >= NAME_MAX_BYTES)
            return fail(m, NP_STATUS_BAD_INPUT, m->sect_line, m->sect,
                        "mlp: its layer %s would have a name of more than 31 characters; "
                        "shorten the section name",
                        name);
        long at = defined_at(m, name);
        if (at)
            return fail(m, NP_STATUS_BAD_INPUT, m->sect_line, m->sect,
                        "mlp: its layer %s is a node defined already at line %ld", name, at);
    }
    int in[NP_LAYER_MAX_IN], n_in;
    np_status st = parse_inputs(m, in_key, in, &n_in);
    if (st) return st;
    if (n_in != 1)
        return fail(m, NP_STATUS_BAD_INPUT, in_key->line, m->sect,
                    "in: an mlp takes one input, not %d (concat them first)", n_in);
    int first = m->g->n;
    np_error e;
    int last = np_graph_mlp(m->g, m->sect, in[0], sizes, n, (int)relu_last, &e);
    if (last < 0) return graph_fail(m, last, m->sect_line, m->sect, &e);
    for (int v = first; v <= last; v++)
        note_node(m, v, m->sect_line, m->sect);
    snprintf(m->mlp[m->n_mlp].name, sizeof m->mlp[0].name, "%s", m->sect);
    m->mlp[m->n_mlp].node = last;
    m->mlp[m->n_mlp].line = m->sect_line;
    m->n_mlp++;
    return NP_OK;
}

/* The kinds there are, for an unknown kind's message. */
static void kinds_list(char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; np_layer_kind_at(i) && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s, ", np_layer_kind_at(i));
    if (at < cap) snprintf(buf + at, cap - at, "mlp");
}

/* The end of a section: its node (or mlp) joins the graph. */
static np_status close_section(mf *m) {
    if (!m->open) return NP_OK;
    m->open = 0;
    if (!m->n_keys)
        return fail(m, NP_STATUS_BAD_INPUT, m->sect_line, m->sect,
                    "a section with no keys (a node needs at least kind and in)");
    const mf_key *kk = key_of(m, "kind"), *ik = key_of(m, "in");
    if (!kk)
        return fail(m, NP_STATUS_BAD_INPUT, m->sect_line, m->sect,
                    "no kind (kind = linear, dot, ..., or mlp)");
    if (!ik)
        return fail(m, NP_STATUS_BAD_INPUT, m->sect_line, m->sect,
                    "no in (its inputs: dense, pooled, pooled:A-B or nodes defined above)");
    if (!strcmp(kk->val, "mlp")) return close_mlp(m, ik);
    const char *kind = kk->val;
    if (!np_layer_find(kind)) {
        char kinds[256];
        kinds_list(kinds, sizeof kinds);
        return fail(m, NP_STATUS_BAD_INPUT, kk->line, m->sect,
                    "unknown kind '%s' (kinds: %s; a plugin's kind needs its library loaded "
                    "first: --plugin LIB.so)",
                    ESC(kind), kinds);
    }
    np_layer_hp hp;
    memset(&hp, 0, sizeof hp);
    for (int k = 0; k < m->n_keys; k++) {
        const mf_key *x = &m->keys[k];
        if (x == kk || x == ik) continue;
        np_error e;
        if (np_layer_hp_set(kind, &hp, x->key, x->val, &e)) {
            if (!strcmp(x->key, "output"))
                return fail(m, NP_STATUS_BAD_INPUT, x->line, m->sect,
                            "%s has no hyper-parameter output; output = NODE goes at the top "
                            "of the file, before the first [node]",
                            kind);
            return fail(m, NP_STATUS_BAD_INPUT, x->line, m->sect, "%s", e.msg);
        }
    }
    /* pooled:A-B is the slice of those tables, made or written as such */
    long a = 0, b = 0;
    int canon;
    if (pooled_range(m->sect, &a, &b, &canon) &&
        (!canon || a > b || b >= m->cfg->tables || strcmp(kind, "slice") ||
         strcmp(ik->val, "pooled")))
        return fail(m, NP_STATUS_BAD_INPUT, m->sect_line, m->sect,
                    "the name pooled:A-B is kept for the slice of tables A..B of the pooled "
                    "embeddings (kind = slice, in = pooled); name this node otherwise");
    int in[NP_LAYER_MAX_IN], n_in;
    np_status st = parse_inputs(m, ik, in, &n_in);
    if (st) return st;
    np_error e;
    int v = np_graph_add(m->g, m->sect, kind, &hp, n_in, in, &e);
    if (v < 0) return graph_fail(m, v, m->sect_line, m->sect, &e);
    note_node(m, v, m->sect_line, m->sect);
    long from, to;
    if (canon) pooled_cols(m->g, a, b, m->cfg->dim, &from, &to);
    if (canon && !pooled_node_ok(m->g, v, m->cfg->dim, a, b))
        return fail(m, NP_STATUS_BAD_INPUT, m->sect_line, m->sect,
                    "the name pooled:%ld-%ld is kept for the slice of those tables: from = "
                    "%ld, to = %ld",
                    a, b, from, to);
    return NP_OK;
}

/* `[name]` opens a section. */
static np_status open_section(mf *m, char *s, long line) {
    np_status st = close_section(m);
    if (st) return st;
    size_t n = strlen(s);
    if (s[n - 1] != ']')
        return fail(m, NP_STATUS_BAD_INPUT, line, NULL,
                    "'%s': a section header is [name] alone on its line", ESC(s));
    s[n - 1] = 0;
    char *name = s + 1;
    while (isspace((unsigned char)*name))
        name++;
    for (size_t k = strlen(name); k && isspace((unsigned char)name[k - 1]);)
        name[--k] = 0;
    const char *why = name_problem(name);
    if (why)
        return fail(m, NP_STATUS_BAD_INPUT, line, NULL, "[%s]: %s", ESC(name), why);
    long at = defined_at(m, name);
    if (at)
        return fail(m, NP_STATUS_BAD_INPUT, line, name, "defined twice (first at line %ld)", at);
    m->open = 1;
    snprintf(m->sect, sizeof m->sect, "%s", name);
    m->sect_line = line;
    for (int k = 0; k < m->n_keys; k++)
        free(m->keys[k].val);
    m->n_keys = 0;
    return NP_OK;
}

/* `key = value`, inside a section or (output only) before the first. */
static np_status add_key(mf *m, char *s, long line) {
    char *eq = strchr(s, '=');
    *eq = 0;
    char *key = s, *val = eq + 1;
    for (size_t k = strlen(key); k && isspace((unsigned char)key[k - 1]);)
        key[--k] = 0;
    while (isspace((unsigned char)*val))
        val++;
    size_t kl = strlen(key);
    if (!kl || kl >= sizeof m->keys[0].key ||
        strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789-_") != kl)
        return fail(m, NP_STATUS_BAD_INPUT, line, m->open ? m->sect : NULL,
                    "'%s': a key is 1-31 characters of a-z, 0-9, - and _", ESC(key));
    if (!*val)
        return fail(m, NP_STATUS_BAD_INPUT, line, m->open ? m->sect : NULL, "%s: no value", key);
    if (!m->open) {
        if (strcmp(key, "output"))
            return fail(m, NP_STATUS_BAD_INPUT, line, NULL,
                        "unknown key '%s' before the first [node] (only output = NODE goes "
                        "there)",
                        key);
        if (m->output_line)
            return fail(m, NP_STATUS_BAD_INPUT, line, NULL,
                        "output given twice (first at line %ld)", m->output_line);
        snprintf(m->output, sizeof m->output, "%s", val);
        m->output_line = line;
        return NP_OK;
    }
    const mf_key *dup = key_of(m, key);
    if (dup)
        return fail(m, NP_STATUS_BAD_INPUT, line, m->sect, "%s given twice (first at line %ld)",
                    key, dup->line);
    if (m->n_keys == SECTION_MAX_KEYS)
        return fail(m, NP_STATUS_BAD_INPUT, line, m->sect, "more than %d keys", SECTION_MAX_KEYS);
    mf_key *k = &m->keys[m->n_keys];
    snprintf(k->key, sizeof k->key, "%s", key);
    size_t vl = strlen(val);
    k->val = np_zalloc(vl + 1, 1, "model file", m->err);
    if (!k->val) return NP_STATUS_NO_MEMORY;
    memcpy(k->val, val, vl);
    k->line = line;
    m->n_keys++;
    return NP_OK;
}

/* One line, newline removed: a comment (# or ; at the start or after whitespace) ends it. */
static np_status read_line(mf *m, char *s, long line) {
    for (char *p = s; *p; p++)
        if ((*p == '#' || *p == ';') && (p == s || isspace((unsigned char)p[-1]))) {
            *p = 0;
            break;
        }
    while (isspace((unsigned char)*s))
        s++;
    for (size_t n = strlen(s); n && isspace((unsigned char)s[n - 1]);)
        s[--n] = 0;
    if (!*s) return NP_OK;
    if (*s == '[') return open_section(m, s, line);
    if (strchr(s, '=')) return add_key(m, s, line);
    return fail(m, NP_STATUS_BAD_INPUT, line, m->open ? m->sect : NULL,
                "'%s': not `key = value` or `[name]`", ESC(s));
}

/* After the last section: the output, and the graph's own rules with a line each. */
static np_status finish(mf *m, long lines) {
    np_graph_t *g = m->g;
    if (!g->n)
        return fail(m, NP_STATUS_BAD_INPUT, lines, NULL,
                    "no node (a model file is [name] sections of kind, in and "
                    "hyper-parameters; docs/layers.md \"Model files\")");
    int out = g->n - 1;
    long out_line = m->node_line[out];
    if (m->output_line) {
        out = find_name(m, m->output);
        out_line = m->output_line;
        if (out < 0)
            return fail(m, NP_STATUS_BAD_INPUT, out_line, NULL, "output = %s names no node",
                        ESC(m->output));
    }
    if (g->node[out].shape.out != 1)
        return fail(m, NP_STATUS_BAD_INPUT, out_line, m->output_line ? NULL : m->node_sect[out],
                    "the output %s has width %d; the loss takes one logit (width 1)%s",
                    g->node[out].name, g->node[out].shape.out,
                    m->output_line ? "" : " (the last node is the output unless output = NODE "
                                          "is set at the top)");
    if (g->node[out].n_out) {
        const np_edge *ed = &g->node[out].out[0];
        return fail(m, NP_STATUS_BAD_INPUT, out_line, NULL,
                    "the output %s feeds node %s; the logit node must feed nothing",
                    g->node[out].name, g->node[ed->node].name);
    }
    for (int v = 0; v < g->n; v++)
        if (v != out && !g->node[v].n_out)
            return fail(m, NP_STATUS_BAD_INPUT, m->node_line[v], m->node_sect[v],
                        "%s feeds no node and is not the output (use it as an input, or set "
                        "output = NODE at the top)",
                        g->node[v].name);
    if (!g->n_pooled_out)
        return fail(m, NP_STATUS_BAD_INPUT, 0, NULL,
                    "no node reads the pooled embeddings (in = pooled or pooled:A-B)");
    np_error e;
    np_status st = np_graph_set_output(g, out, &e);
    if (st) return graph_fail(m, st, out_line, g->node[out].name, &e);
    return NP_OK;
}

np_status np_graph_from_file(const np_config *cfg, const char *path, np_graph_t **out,
                             np_error *err) {
    *out = NULL;
    mf *m = np_zalloc(1, sizeof *m, "model file", err);
    if (!m) return NP_STATUS_NO_MEMORY;
    m->cfg = cfg;
    m->path = path;
    m->err = err;
    np_status st = np_graph_create(cfg, &m->g, err);
    FILE *f = NULL;
    np_lines *lines = NULL;
    long line = 0;
    if (st) goto done;
    f = fopen(path, "r");
    if (!f) {
        st = np_err(err, NP_STATUS_IO, "model-file %s: cannot open it: %s", path, strerror(errno));
        goto done;
    }
    if (!(lines = np_lines_new(f, LINE_MAX_BYTES))) {
        st = np_err(err, NP_STATUS_NO_MEMORY, "model-file %s: out of memory", path);
        goto done;
    }
    char *buf;
    size_t n;
    np_lines_status ls;
    while ((ls = np_lines_next(lines, &buf, &n)) == NP_LINES_OK) {
        line++;
        if (memchr(buf, 0, n)) {
            st = fail(m, NP_STATUS_BAD_INPUT, line, NULL, "a NUL byte: not a text file");
            goto done;
        }
        if ((st = read_line(m, buf, line))) goto done;
    }
    if (ls == NP_LINES_TOO_LONG) {
        st = fail(m, NP_STATUS_BAD_INPUT, line + 1, NULL, "a line of more than %d bytes",
                  LINE_MAX_BYTES);
        goto done;
    }
    if (ls != NP_LINES_END) {
        st = ls == NP_LINES_NO_MEMORY
                 ? np_err(err, NP_STATUS_NO_MEMORY, "model-file %s: out of memory", path)
                 : np_err(err, NP_STATUS_IO, "model-file %s: cannot read it: %s", path,
                          strerror(errno));
        goto done;
    }
    if ((st = close_section(m)) || (st = finish(m, line))) goto done;
    *out = m->g;
    m->g = NULL;
done:
    np_lines_free(lines);
    if (f) fclose(f);
    for (int k = 0; k < m->n_keys; k++)
        free(m->keys[k].val);
    np_graph_free(m->g);
    free(m);
    return st;
}

/* ---------------------------------------------------------------- writing */

static const char *input_text(const np_graph_t *g, int in) {
    return in == NP_IN_DENSE ? "dense" : in == NP_IN_POOLED ? "pooled" : g->node[in].name;
}

/* Why node v could not be written so that it reads back as itself, or NULL. The graph does
 * not know dim, so a pooled:A-B node is checked against the dim its own columns imply. */
static const char *write_problem(const np_graph_t *g, int v) {
    const np_node *x = &g->node[v];
    const char *why = name_problem(x->name);
    if (why) return why;
    if (!strcmp(np_node_def(x)->kind, "mlp"))
        return "its kind is called mlp, which a model file reads as its mlp macro";
    long a = 0, b = 0;
    int canon;
    if (!pooled_range(x->name, &a, &b, &canon)) return NULL;
    const char *kept = "a name pooled:A-B reads back only as the slice of tables A..B of the "
                       "pooled embeddings";
    if (!canon || a > b || strcmp(np_node_def(x)->kind, "slice") || x->shape.n_in != 1 ||
        x->in[0] != NP_IN_POOLED)
        return kept;
    int slots = np_slot_first((int)b + 1, g->seq_slots) - np_slot_first((int)a, g->seq_slots);
    if (slots < 1 || x->shape.out % slots) return kept;
    int dim = x->shape.out / slots;
    if (g->pooled_w % dim || (long)np_slot_first((int)b + 1, g->seq_slots) * dim > g->pooled_w ||
        !pooled_node_ok(g, v, dim, a, b))
        return kept;
    return NULL;
}

np_status np_graph_write(const np_graph_t *g, FILE *f, np_error *err) {
    for (int v = 0; v < g->n; v++) {
        const char *why = write_problem(g, v);
        if (why)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "graph: node %s cannot be written to a model file: %s",
                          ESC(g->node[v].name), why);
    }
    errno = 0;
    int bad = fprintf(f,
                      "# nestpipe model file (np_graph_write): %d nodes over %d dense features "
                      "and %d pooled floats\n",
                      g->n, g->dense_w, g->pooled_w) < 0;
    if (g->output >= 0)
        bad |= fprintf(f, "output = %s\n", g->node[g->output].name) < 0;
    else
        bad |= fputs("# no output set: the last node is the output when read back\n", f) < 0;
    for (int v = 0; v < g->n && !bad; v++) {
        const np_node *x = &g->node[v];
        const np_layer_def *d = np_node_def(x);
        bad |= fprintf(f, "\n[%s]\nkind = %s\nin = ", x->name, d->kind) < 0;
        for (int k = 0; k < x->shape.n_in; k++)
            bad |= fprintf(f, "%s%s", k ? ", " : "", input_text(g, x->in[k])) < 0;
        bad |= fputc('\n', f) < 0;
        for (int i = 0; i < NP_LAYER_MAX_HP; i++) {
            if (!x->hp.i[i]) continue;
            if (d->hp_int[i])
                bad |= fprintf(f, "%s = %d\n", d->hp_int[i], x->hp.i[i]) < 0;
            else
                bad |= fprintf(f, "i%d = %d\n", i, x->hp.i[i]) < 0;
        }
        for (int i = 0; i < NP_LAYER_MAX_HP; i++) {
            if (x->hp.f[i] == 0.0 && !signbit(x->hp.f[i])) continue;
            if (!isfinite(x->hp.f[i]))
                return np_err(err, NP_STATUS_BAD_INPUT,
                              "graph: node %s cannot be written to a model file: its real "
                              "hyper-parameter %d is not finite",
                              x->name, i);
            /* %.17g reads back to the same double */
            if (d->hp_real[i])
                bad |= fprintf(f, "%s = %.17g\n", d->hp_real[i], x->hp.f[i]) < 0;
            else
                bad |= fprintf(f, "f%d = %.17g\n", i, x->hp.f[i]) < 0;
        }
    }
    if (bad || fflush(f) || ferror(f))
        return np_err(err, NP_STATUS_IO, "graph: cannot write the model file: %s",
                      errno ? strerror(errno) : "write error");
    return NP_OK;
}
