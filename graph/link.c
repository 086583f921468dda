/* The dependencies of nodes as they come (graph/link.h): each buffer's last writer and its
 * readers since, in a table by buffer. */
#include <stdlib.h>

#include "graph/link.h"

typedef struct bstate {
    uint64_t key;   /* 0: empty */
    int64_t writer; /* -1: none yet */
    int64_t *readers;
    int nr, cr;
} bstate;

struct np_sg_linker {
    bstate *slot;
    size_t cap, used;
};

/* A chunk's rows of the slot are the slot's rows for the dependencies (a read-only
 * partition: the chunks read what the prefetch wrote, the next prefetch waits for them). */
static uint64_t key_of(const np_step_buf *b) {
    np_step_buf x = *b;
    if (x.role == NP_B_DENSE_PART) x.role = NP_B_DENSE, x.c = 0;
    if (x.role == NP_B_LABEL_PART) x.role = NP_B_LABEL, x.c = 0;
    return 1 + ((uint64_t)x.role | (uint64_t)(uint16_t)x.s << 8 | (uint64_t)(uint16_t)x.c << 24 |
                (uint64_t)(uint16_t)x.v << 40 | (uint64_t)x.k << 56);
}

static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    return k ^ (k >> 29);
}

static bstate *lookup(np_sg_linker *t, uint64_t key) {
    if (2 * (t->used + 1) > t->cap) { /* grow to keep half empty */
        size_t cap = t->cap ? 2 * t->cap : 256;
        bstate *s = calloc(cap, sizeof *s);
        if (!s) return NULL;
        for (size_t i = 0; i < t->cap; i++)
            if (t->slot[i].key) {
                size_t j = mix(t->slot[i].key) & (cap - 1);
                while (s[j].key)
                    j = (j + 1) & (cap - 1);
                s[j] = t->slot[i];
            }
        free(t->slot);
        t->slot = s;
        t->cap = cap;
    }
    size_t j = mix(key) & (t->cap - 1);
    while (t->slot[j].key && t->slot[j].key != key)
        j = (j + 1) & (t->cap - 1);
    if (!t->slot[j].key) {
        t->slot[j] = (bstate){.key = key, .writer = -1};
        t->used++;
    }
    return &t->slot[j];
}

np_sg_linker *np_sg_linker_new(void) {
    return calloc(1, sizeof(np_sg_linker));
}

void np_sg_linker_free(np_sg_linker *l) {
    if (!l) return;
    for (size_t i = 0; i < l->cap; i++)
        free(l->slot[i].readers);
    free(l->slot);
    free(l);
}

static int edge(np_sg_edge_fn fn, void *ctx, int64_t from, int64_t to, const np_step_buf *b,
                int why) {
    return from < 0 || from == to ? 0 : fn(ctx, from, to, b, why);
}

int np_sg_link(np_sg_linker *l, int64_t id, const np_step_buf *buf, const uint8_t *mode, int nb,
               np_sg_edge_fn fn, void *ctx) {
    for (int j = 0; j < nb; j++) {
        const np_step_buf *b = &buf[j];
        uint8_t m = mode[j];
        if (m & NP_MODE_SCRATCH) continue; /* StarPU's per-task memory: no dependency */
        bstate *s = lookup(l, key_of(b));
        if (!s) return -1;
        if (m & NP_MODE_W) {
            if (s->nr) {
                for (int r = 0; r < s->nr; r++)
                    if (edge(fn, ctx, s->readers[r], id, b, NP_DEP_WAR)) return -1;
                if ((m & NP_MODE_R) && edge(fn, ctx, s->writer, id, b, NP_DEP_FLOW)) return -1;
            } else if (edge(fn, ctx, s->writer, id, b, (m & NP_MODE_R) ? NP_DEP_RAW : NP_DEP_WAW)) {
                return -1;
            }
            s->writer = id;
            s->nr = 0;
        } else {
            if (edge(fn, ctx, s->writer, id, b, NP_DEP_RAW)) return -1;
            if (s->nr == s->cr) {
                int c = s->cr ? 2 * s->cr : 8;
                int64_t *p = realloc(s->readers, (size_t)c * sizeof *p);
                if (!p) return -1;
                s->readers = p;
                s->cr = c;
            }
            s->readers[s->nr++] = id;
        }
    }
    return 0;
}

typedef struct producers {
    int64_t *out;
    int n, max;
} producers;

static int add_producer(void *ctx, int64_t from, int64_t to, const np_step_buf *b, int why) {
    (void)to, (void)b;
    producers *p = ctx;
    if (why != NP_DEP_RAW && why != NP_DEP_FLOW) return 0;
    for (int i = 0; i < p->n; i++)
        if (p->out[i] == from) return 0;
    if (p->n < p->max) p->out[p->n++] = from;
    return 0;
}

int np_sg_link_producers(np_sg_linker *l, int64_t id, const np_step_buf *b, const uint8_t *mode,
                         int nb, int64_t *out, int max) {
    producers p = {out, 0, max};
    return np_sg_link(l, id, b, mode, nb, add_producer, &p) ? -1 : p.n;
}
