/* Critical-path priorities (key "priorities" = critical-path; docs/engine.md "Priorities").
 * Every step submits the same graph: the same tasks (node kind, layer, window, chunk, batch
 * relative to the step) reading and writing the same roles of buffers. So one step after
 * the warm-up is recorded: each task's buffers and modes as it is submitted, and its
 * duration as it runs (StarPU's profiling times: the samples a history perf model holds).
 * Once all of them ran, its dependencies follow from the modes as StarPU's sequential
 * consistency derives them (a reader after the last writer, a writer after the last writer
 * and every reader since), and each task's bottom level is its duration plus the longest
 * path after it to the end of the step, across the batches the step overlaps. Later steps
 * give each task the bottom level of its counterpart, scaled to 0..NP_CP_TOP; a task with no
 * counterpart keeps its fixed priority. Not here: building the task (tasks/submit.c records
 * each into this recorder as it submits it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"
#include "tasks/tasks.h"

#define NP_CP_TOP 1000 /* the highest priority: the start of the longest path */
/* Recorded tasks live in blocks that never move: their durations are written by task
 * callbacks while later tasks of the step are still being recorded. */
#define NP_CP_BLOCK 1024
#define NP_CP_BLOCKS 256

typedef struct cp_task {
    uint32_t key;
    int first_acc, n_acc; /* its accesses in cp->acc */
    double cost_us;       /* measured; -1 until it ran */
} cp_task;

typedef struct cp_access {
    const void *h;
    unsigned mode; /* NP_TRACE_READ | NP_TRACE_WRITE */
} cp_access;

typedef struct cp_prio {
    uint32_t key;
    int prio, used;
} cp_prio;

struct np_cp {
    long record_step; /* the step recorded; -1 once priorities are set */
    int state;        /* 0 waiting, 1 recording, 2 recorded (waiting for durations), 3 set */
    long step;        /* the step being submitted */
    cp_task *blk[NP_CP_BLOCKS]; /* task i: blk[i / NP_CP_BLOCK][i % NP_CP_BLOCK] */
    size_t n;
    cp_access *acc;
    size_t n_acc, cap_acc;
    long ran;      /* recorded tasks that ran (atomic) */
    cp_prio *prio; /* open addressing, cap_prio a power of 2 */
    size_t cap_prio;
    int profiling_was; /* StarPU's profiling status before recording */
};

np_status np_cp_create(long record_step, np_cp **out, np_error *err) {
    np_cp *cp = np_zalloc(1, sizeof *cp, "critical-path priorities", err);
    if (!cp) return NP_STATUS_NO_MEMORY;
    cp->record_step = record_step;
    *out = cp;
    return NP_OK;
}

void np_cp_free(np_cp *cp) {
    if (!cp) return;
    for (int b = 0; b < NP_CP_BLOCKS; b++)
        free(cp->blk[b]);
    free(cp->acc);
    free(cp->prio);
    free(cp);
}

/* A task's counterpart in every step: its kind, layer, window, chunk, codelet and batch
 * relative to the step submitting it. */
static uint32_t key_of(const np_cp *cp, const np_task_ctx *ctx, np_node_kind kind,
                       const char *name) {
    int32_t v[5] = {(int32_t)kind, ctx->node, ctx->window, ctx->chunk,
                    (int32_t)(ctx->batch - cp->step)};
    uint32_t k = starpu_hash_crc32c_be_n(v, sizeof v, 0);
    return starpu_hash_crc32c_be_n(name, strlen(name), k);
}

static cp_task *task_at(const np_cp *cp, size_t i) {
    return &cp->blk[i / NP_CP_BLOCK][i % NP_CP_BLOCK];
}

static int grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

int np_cp_task(np_cp *cp, const np_task_ctx *ctx, np_node_kind kind, const char *name, int nbuf,
               const np_h *h, const enum starpu_data_access_mode *modes, struct starpu_task *task) {
    if (cp->state == 3) {
        uint32_t k = key_of(cp, ctx, kind, name);
        for (size_t i = k & (cp->cap_prio - 1);; i = (i + 1) & (cp->cap_prio - 1)) {
            if (!cp->prio[i].used) return -1; /* none: the fixed priority stays */
            if (cp->prio[i].key == k) {
                task->priority = cp->prio[i].prio;
                return -1;
            }
        }
    }
    if (cp->state != 1 || ctx->batch - cp->step < 0) return -1;
    size_t b = cp->n / NP_CP_BLOCK;
    if (b < NP_CP_BLOCKS && !cp->blk[b]) cp->blk[b] = malloc(NP_CP_BLOCK * sizeof *cp->blk[b]);
    if (b >= NP_CP_BLOCKS || !cp->blk[b] ||
        grow((void **)&cp->acc, &cp->cap_acc, cp->n_acc + (size_t)nbuf, sizeof *cp->acc)) {
        np_cp_abandon(cp); /* out of memory, or a step too large: fixed priorities stay */
        return -1;
    }
    *task_at(cp, cp->n) = (cp_task){.key = key_of(cp, ctx, kind, name),
                                    .first_acc = (int)cp->n_acc,
                                    .n_acc = nbuf,
                                    .cost_us = -1};
    for (int i = 0; i < nbuf; i++)
        cp->acc[cp->n_acc++] = (cp_access){.h = h[i],
                                           .mode = ((modes[i] & STARPU_R) ? NP_TRACE_READ : 0) |
                                                   ((modes[i] & STARPU_W) ? NP_TRACE_WRITE : 0)};
    return (int)cp->n++;
}

void np_cp_abandon(np_cp *cp) {
    if (cp->state == 1 || cp->state == 2) {
        if (!cp->profiling_was) starpu_profiling_status_set(STARPU_PROFILING_DISABLE);
        cp->state = 0;
    }
    cp->record_step = -1; /* recorded tasks still running only count in `ran` */
}

int np_cp_applied(const np_cp *cp) {
    return cp->state == 3;
}

void np_cp_ran(np_cp *cp, int slot, double us) {
    task_at(cp, (size_t)slot)->cost_us = us > 0 ? us : 0;
    __atomic_fetch_add(&cp->ran, 1, __ATOMIC_RELEASE);
}

/* Per handle: the last writer and the readers since, for the edges (tasks in submission
 * order, so every edge goes forward). */
typedef struct hstate {
    const void *h;
    int writer;
    int *readers;
    size_t n_readers, cap_readers;
} hstate;

static hstate *hfind(hstate *tab, size_t cap, const void *h) {
    size_t i = ((uintptr_t)h >> 4) * 0x9E3779B97F4A7C15ull >> 20 & (cap - 1);
    while (tab[i].h && tab[i].h != h)
        i = (i + 1) & (cap - 1);
    if (!tab[i].h) {
        tab[i].h = h;
        tab[i].writer = -1;
    }
    return &tab[i];
}

typedef struct edge {
    int from, to;
} edge;

static int cmp_edge(const void *a, const void *b) {
    const edge *x = a, *y = b;
    return x->from != y->from ? (x->from > y->from) - (x->from < y->from)
                              : (x->to > y->to) - (x->to < y->to);
}

/* Bottom levels of the recorded step, then the priority table. 0, or -1 out of memory. */
static int compute(np_cp *cp) {
    size_t n = cp->n, cap = 1;
    while (cap < 2 * cp->n_acc + 2)
        cap *= 2;
    hstate *tab = calloc(cap, sizeof *tab);
    edge *e = NULL;
    size_t ne = 0, cap_e = 0;
    double *bl = calloc(n ? n : 1, sizeof *bl);
    int bad = !tab || !bl;
    for (size_t i = 0; i < n && !bad; i++) {
        const cp_task *t = task_at(cp, i);
        for (int a = 0; a < t->n_acc && !bad; a++) {
            const cp_access *x = &cp->acc[t->first_acc + a];
            hstate *s = hfind(tab, cap, x->h);
            if (grow((void **)&e, &cap_e, ne + s->n_readers + 2, sizeof *e)) {
                bad = 1;
                break;
            }
            if (s->writer >= 0) e[ne++] = (edge){s->writer, (int)i};
            if (x->mode & NP_TRACE_WRITE) {
                for (size_t r = 0; r < s->n_readers; r++)
                    if (s->readers[r] != (int)i) e[ne++] = (edge){s->readers[r], (int)i};
                s->writer = (int)i;
                s->n_readers = 0;
            } else if (grow((void **)&s->readers, &s->cap_readers, s->n_readers + 1,
                            sizeof *s->readers)) {
                bad = 1;
            } else {
                s->readers[s->n_readers++] = (int)i;
            }
        }
    }
    if (!bad) {
        /* bottom levels in reverse submission order: every successor comes later */
        qsort(e, ne, sizeof *e, cmp_edge);
        size_t k = ne;
        double top = 0;
        for (size_t i = n; i-- > 0;) {
            double after = 0;
            while (k > 0 && e[k - 1].from == (int)i) {
                k--;
                if (e[k].to != (int)i && bl[e[k].to] > after) after = bl[e[k].to];
            }
            bl[i] = task_at(cp, i)->cost_us + after;
            if (bl[i] > top) top = bl[i];
        }
        size_t pc = 1;
        while (pc < 2 * n + 2)
            pc *= 2;
        cp->prio = calloc(pc, sizeof *cp->prio);
        cp->cap_prio = pc;
        bad = !cp->prio;
        for (size_t i = 0; i < n && !bad; i++) {
            int p = top > 0 ? (int)lround(NP_CP_TOP * bl[i] / top) : 0;
            uint32_t key = task_at(cp, i)->key;
            size_t j = key & (pc - 1);
            while (cp->prio[j].used && cp->prio[j].key != key)
                j = (j + 1) & (pc - 1);
            if (!cp->prio[j].used || p > cp->prio[j].prio) /* a key twice: the higher */
                cp->prio[j] = (cp_prio){.key = key, .prio = p, .used = 1};
        }
    }
    for (size_t i = 0; i < cap && tab; i++)
        free(tab[i].readers);
    free(tab);
    free(e);
    free(bl);
    return bad ? -1 : 0;
}

void np_cp_step(np_cp *cp, long step) {
    cp->step = step;
    if (cp->state == 0 && cp->record_step >= 0 && step == cp->record_step) {
        cp->state = 1;
        cp->profiling_was = starpu_profiling_status_get();
        starpu_profiling_status_set(STARPU_PROFILING_ENABLE); /* the tasks' durations */
    } else if (cp->state == 1) {
        cp->state = 2; /* the recorded step is submitted: wait for its tasks to run */
    }
    if (cp->state == 2 && __atomic_load_n(&cp->ran, __ATOMIC_ACQUIRE) == (long)cp->n) {
        if (!cp->profiling_was) starpu_profiling_status_set(STARPU_PROFILING_DISABLE);
        cp->state = compute(cp) ? 0 : 3;
        cp->record_step = -1;
    }
}
