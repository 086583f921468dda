/* The ranks' agreement on the configuration, before anything is allocated: every rank
 * hashes its value of every key that must match, its model graph and the sizes of the
 * files it will read; one allgather compares them. A difference is one line per key that
 * differs, naming the values and the ranks that hold them, on every rank alike (so no rank
 * goes on to a collective its peers never join, and none trains a model that no single
 * configuration describes). Not here: the outcome of a rank's own set-up (np_run_agree). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "runtime/comm/comm.h"
#include "runtime/core/util.h"
#include "runtime/model/graph.h"
#include "nestpipe/layer.h"
#include "runtime/train/agree.h"

/* Keys whose value may differ between ranks: what a rank prints, and rank 0's outputs
 * (only rank 0 writes them; the other ranks' values are not used). */
static const char *const own_keys[] = {"quiet",        "explain-placement", "log-every",
                                       "metrics-json", "dump-params",       "log-json"};

int np_agree_key_is_own(const char *key) {
    for (size_t i = 0; i < sizeof own_keys / sizeof *own_keys; i++)
        if (!strcmp(key, own_keys[i])) return 1;
    return 0;
}

enum { SHOWN = 96 }; /* a value as a message shows it, escaped and cut */

/* One thing compared: a key, or what the keys do not say (the graph, a file's size). */
typedef struct item {
    char name[48];
    uint64_t hash;
    char shown[SHOWN];
    int is_key; /* a config key (not the graph or a file) */
    /* what explains this item when it differs too, and is named instead: "*" any key (the
     * graph), a key's name (a file's size: its path), "" nothing */
    const char *follows;
} item;

/* The hash of value v, and v as a message shows it: quoted when it is a key's value,
 * escaped, cut to SHOWN. */
static void set_shown(item *it, const char *v) {
    it->hash = XXH3_64bits(v, strlen(v));
    char esc[4 * SHOWN];
    np_escape(v, strlen(v), esc, sizeof esc);
    if (strlen(esc) > SHOWN - 8) memcpy(esc + SHOWN - 8, "...", 4);
    if (!v[0] && it->is_key)
        snprintf(it->shown, SHOWN, "(none)");
    else
        snprintf(it->shown, SHOWN, it->is_key ? "'%s'" : "%s", esc);
}

/* The graph a run trains, as one hash: every node's name, kind, inputs and
 * hyper-parameters, and the output (the bytes the model computes follow from these). */
static uint64_t graph_hash(const np_graph_t *g) {
    XXH3_state_t *s = XXH3_createState();
    if (!s) return 0;
    XXH3_64bits_reset(s);
    XXH3_64bits_update(s, &g->n, sizeof g->n);
    XXH3_64bits_update(s, &g->output, sizeof g->output);
    XXH3_64bits_update(s, &g->dense_w, sizeof g->dense_w);
    XXH3_64bits_update(s, &g->pooled_w, sizeof g->pooled_w);
    for (int v = 0; v < g->n; v++) {
        const np_node *x = &g->node[v];
        const char *kind = np_layer_get(x->def)->kind;
        XXH3_64bits_update(s, x->name, strlen(x->name) + 1);
        XXH3_64bits_update(s, kind, strlen(kind) + 1);
        XXH3_64bits_update(s, &x->shape.n_in, sizeof x->shape.n_in);
        XXH3_64bits_update(s, x->in, (size_t)x->shape.n_in * sizeof *x->in);
        XXH3_64bits_update(s, x->hp.i, sizeof x->hp.i);
        XXH3_64bits_update(s, x->hp.f, sizeof x->hp.f);
    }
    uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return h;
}

static void graph_item(item *it, const np_config *cfg, const np_graph_t *graph) {
    snprintf(it->name, sizeof it->name, "the model graph");
    it->follows = "*";
    np_graph_t *own = NULL;
    np_error e = {{0}};
    if (!graph && np_graph_from_config(cfg, &own, &e)) {
        /* hash 0: not compared; the model's creation fails alike and says why, on one
         * rank (a plugin missing on one host) or on all (a bad model file) */
        set_shown(it, "(not built)");
        it->hash = 0;
        return;
    }
    const np_graph_t *g = graph ? graph : own;
    char v[SHOWN];
    snprintf(v, sizeof v, "%d node%s, hash %016llx", g->n, g->n == 1 ? "" : "s",
             (unsigned long long)graph_hash(g));
    set_shown(it, v);
    np_graph_free(own);
}

/* A file every rank reads by the same path (a copy on each host): its size, so that two
 * hosts with different files do not train two models. Missing is a value too, and so is
 * none (every rank has the same items, whatever its keys say). */
static void file_item(item *it, const char *key, const char *path) {
    snprintf(it->name, sizeof it->name, "the size of the %s file", key);
    it->follows = key; /* another path says it better */
    struct stat sb;
    char v[SHOWN];
    if (!path[0])
        snprintf(v, sizeof v, "(no file)");
    else if (stat(path, &sb))
        snprintf(v, sizeof v, "missing");
    else
        snprintf(v, sizeof v, "%lld bytes", (long long)sb.st_size);
    set_shown(it, v);
}

/* Everything compared, in the same order on every rank; returns the count. */
static int collect(const np_config *cfg, const np_graph_t *graph, item *it, int cap) {
    int n = 0;
    char v[NP_PATH_MAX + 64];
    for (int i = 0; np_config_key_at(i) && n < cap; i++) {
        const char *key = np_config_key_at(i)->name;
        if (np_agree_key_is_own(key)) continue;
        snprintf(it[n].name, sizeof it[n].name, "%s", key);
        it[n].is_key = 1;
        it[n].follows = "";
        if (np_config_get(cfg, key, v, sizeof v)) snprintf(v, sizeof v, "(too long to show)");
        set_shown(&it[n++], v);
    }
    if (n < cap) graph_item(&it[n++], cfg, graph);
    if (n < cap) file_item(&it[n++], "data", cfg->data != NP_DATA_SYNTHETIC ? cfg->data_path : "");
    if (n < cap)
        file_item(&it[n++], "eval-data",
                  cfg->eval_data != NP_DATA_SYNTHETIC ? cfg->eval_data_path : "");
    if (n < cap) file_item(&it[n++], "init-params", cfg->init_params);
    return n;
}

/* "0, 2-5, 9" into buf, cut with ", ..." past its room. */
static void rank_list(const int *ranks, int n, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        char part[32];
        if (j == i)
            snprintf(part, sizeof part, "%s%d", i ? ", " : "", ranks[i]);
        else
            snprintf(part, sizeof part, "%s%d-%d", i ? ", " : "", ranks[i], ranks[j]);
        if (at + strlen(part) + 6 >= cap) {
            snprintf(buf + at, cap - at, ", ...");
            return;
        }
        at += (size_t)snprintf(buf + at, cap - at, "%s", part);
        i = j;
    }
}

/* One item's line: its values, each with the ranks that hold it, in the order of the
 * lowest rank holding each; three values at most, then how many more. */
static void key_line(const char *name, const uint64_t *hash, const char *shown, int R,
                     int *ranks, char *line, size_t cap) {
    size_t at = (size_t)snprintf(line, cap, "ranks disagree on %s:", name);
    int values = 0, more = 0;
    for (int r = 0; r < R; r++) {
        int first = 1; /* r holds a value no lower rank holds */
        for (int q = 0; q < r && first; q++)
            first = hash[q] != hash[r];
        if (!first) continue;
        if (values == 3) {
            more++;
            continue;
        }
        int n = 0;
        for (int q = r; q < R; q++)
            if (hash[q] == hash[r]) ranks[n++] = q;
        char list[96];
        rank_list(ranks, n, list, sizeof list);
        if (at < cap)
            at += (size_t)snprintf(line + at, cap - at, "%s %s on rank%s %s", values ? ";" : "",
                                   shown + (size_t)r * SHOWN, n > 1 ? "s" : "", list);
        values++;
    }
    if (more && at < cap) snprintf(line + at, cap - at, "; and %d more values", more);
}

/* The message: one line per item that differs, as many as np_error holds, then the names
 * of the rest. */
static void message(const item *it, const int *differ, int n_differ, const char *lines,
                    size_t line_cap, np_error *err) {
    char msg[sizeof err->msg];
    size_t at = 0;
    msg[0] = 0;
    int k = 0;
    for (; k < n_differ; k++) {
        const char *line = lines + (size_t)k * line_cap;
        size_t need = strlen(line) + 1 + (k + 1 < n_differ ? 64 : 0);
        if (at + need >= sizeof msg) break;
        at += (size_t)snprintf(msg + at, sizeof msg - at, "%s%s", k ? "\n" : "", line);
    }
    if (k < n_differ) {
        at += (size_t)snprintf(msg + at, sizeof msg - at, "%sranks disagree on %d more:",
                               k ? "\n" : "", n_differ - k);
        for (int j = k; j < n_differ && at < sizeof msg; j++)
            at += (size_t)snprintf(msg + at, sizeof msg - at, "%s %s", j > k ? "," : "",
                                   it[differ[j]].name);
    }
    np_error_set(err, NP_STATUS_BAD_INPUT, "%s", msg);
}

np_status np_agree_outcome(np_comm *comm, np_status st, np_error *err) {
    int64_t failed = st != NP_OK;
    if (np_comm_allreduce_i64(comm, NP_CHAN_CTL, &failed, 1))
        return np_error_set(err, NP_STATUS_INTERNAL, "MPI failed while the ranks agreed on set-up");
    if (st || !failed) return st;
    return np_error_set(err, NP_STATUS_BAD_INPUT,
                        "another rank failed to set up; stopping (see its message)");
}

/* The buffers of one agreement, all allocated before the first collective. */
typedef struct agree_bufs {
    item *it;       /* CAP: this rank's items (R x CAP: every rank's, in one process) */
    char *builds;   /* R x BUILD: every rank's build */
    uint64_t *mine; /* n: this rank's hashes */
    uint64_t *all;  /* R x n: every rank's hashes */
    uint64_t *h;    /* R: one item's hash on every rank */
    char *shown;    /* R x SHOWN: one item's value on every rank */
    char *lines;    /* CAP x LINE: the message's lines */
    int *ranks;     /* R: a value's ranks */
    int *differ;    /* CAP: the items that differ */
} agree_bufs;

enum { CAP = 128, BUILD = 64, LINE = 400 };

static void bufs_free(agree_bufs *b) {
    free(b->it), free(b->builds), free(b->mine), free(b->all), free(b->h);
    free(b->shown), free(b->lines), free(b->ranks), free(b->differ);
}

/* 1 when item i differs between ranks; never for a graph some rank could not build (its
 * hash 0: the model's creation says why). */
static int differs(const agree_bufs *b, int R, int n, int i) {
    int diff = 0, unbuilt = 0;
    for (int q = 0; q < R; q++) {
        uint64_t h = b->all[(size_t)q * (size_t)n + (size_t)i];
        diff |= h != b->all[i];
        unbuilt |= !h && !strcmp(b->it[i].follows, "*");
    }
    return diff && !unbuilt;
}

/* Every rank's shown value of item i into b->shown: an allgather, or a copy in
 * np_config_agree_local. 0, or -1 when MPI failed. */
typedef int (*fetch_fn)(void *ctx, agree_bufs *b, int i);

/* The verdict from every rank's hashes (b->all, R x n): the items that differ, less those a
 * differing key explains, one line each. The same on every rank. */
static np_status verdict(agree_bufs *b, int R, int n, fetch_fn fetch, void *ctx, np_error *err) {
    int n_differ = 0;
    for (int i = 0; i < n; i++)
        if (differs(b, R, n, i)) b->differ[n_differ++] = i;
    int k = 0;
    for (int j = 0; j < n_differ; j++) {
        const item *x = &b->it[b->differ[j]];
        int explained = 0;
        for (int q = 0; q < n_differ && x->follows[0] && !explained; q++) {
            const item *y = &b->it[b->differ[q]];
            explained = y->is_key && (!strcmp(x->follows, "*") || !strcmp(x->follows, y->name));
        }
        if (!explained) b->differ[k++] = b->differ[j];
    }
    n_differ = k;
    for (k = 0; k < n_differ; k++) {
        int i = b->differ[k];
        if (fetch(ctx, b, i))
            return np_error_set(err, NP_STATUS_INTERNAL,
                                "MPI failed while the ranks compared their configurations");
        for (int r = 0; r < R; r++)
            b->h[r] = b->all[(size_t)r * (size_t)n + (size_t)i];
        key_line(b->it[i].name, b->h, b->shown, R, b->ranks, b->lines + (size_t)k * LINE, LINE);
    }
    if (!n_differ) return NP_OK;
    message(b->it, b->differ, n_differ, b->lines, LINE, err);
    return NP_STATUS_BAD_INPUT;
}

static int fetch_mpi(void *comm, agree_bufs *b, int i) {
    return np_comm_allgather(comm, NP_CHAN_CTL, b->it[i].shown, b->shown, SHOWN, 1) ? -1 : 0;
}

/* For R ranks, with the items of `sets` of them (1: this rank's; R: in one process). */
static int bufs_alloc(agree_bufs *b, int R, int sets) {
    size_t r = (size_t)R;
    *b = (agree_bufs){.it = calloc((size_t)sets * CAP, sizeof *b->it),
                      .builds = calloc(r, BUILD),
                      .mine = calloc(CAP, sizeof *b->mine),
                      .all = calloc(r * CAP, sizeof *b->all),
                      .h = calloc(r, sizeof *b->h),
                      .shown = calloc(r, SHOWN),
                      .lines = calloc(CAP, LINE),
                      .ranks = calloc(r, sizeof *b->ranks),
                      .differ = calloc(CAP, sizeof *b->differ)};
    return !b->it || !b->builds || !b->mine || !b->all || !b->h || !b->shown || !b->lines ||
           !b->ranks || !b->differ;
}

np_status np_config_agree(np_comm *comm, const np_config *cfg, const np_graph_t *graph,
                          np_error *err) {
    int R = np_comm_size(comm);
    if (R <= 1) return NP_OK;
    agree_bufs b;
    int64_t oom = bufs_alloc(&b, R, 1);
    int n = oom ? 0 : collect(cfg, graph, b.it, CAP);
    np_status st = NP_OK;
    if (np_comm_allreduce_i64(comm, NP_CHAN_CTL, &oom, 1)) goto mpi;
    if (oom) {
        st = np_error_set(err, NP_STATUS_NO_MEMORY, "out of memory comparing the ranks' configurations");
        goto done;
    }
    char build[BUILD] = {0};
    snprintf(build, sizeof build, "nestpipe %s, %d items", NP_LIB_VERSION, n);
    /* the common case first, in O(log R) rounds and O(n) bytes a rank: every hash (the
     * build's first) is the same on every rank when its max and the max of its complement
     * (the min's) agree; only a difference needs every rank's hashes, to name the ranks.
     * The layout is fixed (CAP items, zeros past this build's n), so builds with other item
     * counts still reduce alike, and disagree on the build's hash */
    {
        uint64_t mm[2 * (CAP + 1)] = {0}; /* each hash, then each one's complement */
        mm[0] = XXH3_64bits(build, BUILD);
        for (int i = 0; i < n && i < CAP; i++)
            mm[1 + i] = b.it[i].hash;
        for (int i = 0; i <= CAP; i++)
            mm[CAP + 1 + i] = ~mm[i];
        if (np_comm_allreduce_u64_max(comm, NP_CHAN_CTL, mm, 2 * (CAP + 1))) goto mpi;
        int same = 1;
        for (int i = 0; i <= CAP; i++)
            same &= mm[i] == ~mm[CAP + 1 + i];
        if (same) goto done; /* st NP_OK */
    }
    /* first the builds: another version has other keys */
    if (np_comm_allgather(comm, NP_CHAN_CTL, build, b.builds, BUILD, 1)) goto mpi;
    for (int q = 1; q < R; q++)
        if (memcmp(b.builds + (size_t)q * BUILD, b.builds, BUILD)) {
            for (int k = 0; k < R; k++) {
                b.h[k] = XXH3_64bits(b.builds + (size_t)k * BUILD, BUILD);
                snprintf(b.shown + (size_t)k * SHOWN, SHOWN, "%s", b.builds + (size_t)k * BUILD);
            }
            key_line("the nestpipe build", b.h, b.shown, R, b.ranks, b.lines, LINE);
            st = np_error_set(err, NP_STATUS_BAD_INPUT, "%s", b.lines);
            goto done;
        }
    for (int i = 0; i < n; i++)
        b.mine[i] = b.it[i].hash;
    if (np_comm_allgather(comm, NP_CHAN_CTL, b.mine, b.all, (size_t)n, sizeof *b.mine)) goto mpi;
    /* every rank holds every hash: the same items differ everywhere, in the same order */
    st = verdict(&b, R, n, fetch_mpi, comm, err);
    goto done;
mpi:
    st = np_error_set(err, NP_STATUS_INTERNAL,
                      "MPI failed while the ranks compared their configurations");
done:
    bufs_free(&b);
    return st;
}

/* ---------------------------------------------------------------- in one process */

typedef struct local_ctx {
    int R;
} local_ctx;

static int fetch_local(void *ctx, agree_bufs *b, int i) {
    int R = ((local_ctx *)ctx)->R;
    for (int r = 0; r < R; r++)
        memcpy(b->shown + (size_t)r * SHOWN, b->it[(size_t)r * CAP + (size_t)i].shown, SHOWN);
    return 0;
}

np_status np_config_agree_local(const np_config *cfgs, int R, np_error *err) {
    if (R <= 1) return NP_OK;
    agree_bufs b;
    np_status st = NP_OK;
    if (bufs_alloc(&b, R, R)) {
        st = np_error_set(err, NP_STATUS_NO_MEMORY, "out of memory comparing configurations");
        goto done;
    }
    int n = 0;
    for (int r = 0; r < R; r++) {
        item *it = b.it + (size_t)r * CAP;
        int nr = collect(&cfgs[r], NULL, it, CAP);
        if (r && nr != n) {
            st = np_error_set(err, NP_STATUS_INTERNAL, "agreement: %d items on rank 0, %d on %d",
                              n, nr, r);
            goto done;
        }
        n = nr;
        for (int i = 0; i < n; i++)
            b.all[(size_t)r * (size_t)n + (size_t)i] = it[i].hash;
    }
    local_ctx ctx = {R};
    st = verdict(&b, R, n, fetch_local, &ctx, err);
done:
    bufs_free(&b);
    return st;
}
