/* Paje export of a task trace (ViTE, pajeng's pj_dump): containers root > rank > worker,
 * one "task" state per task valued by its node kind. Not here: analysis or pictures. */
#include "runtime/trace/trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/util.h"

/* The header: only the events this file uses, with the field names pj_dump's strict mode
 * and ViTE both expect. Event ids are ours to choose. */
static const char paje_header[] = "%EventDef PajeDefineContainerType 0\n"
                                  "%       Alias string\n"
                                  "%       Type string\n"
                                  "%       Name string\n"
                                  "%EndEventDef\n"
                                  "%EventDef PajeDefineStateType 1\n"
                                  "%       Alias string\n"
                                  "%       Type string\n"
                                  "%       Name string\n"
                                  "%EndEventDef\n"
                                  "%EventDef PajeDefineEntityValue 2\n"
                                  "%       Alias string\n"
                                  "%       Type string\n"
                                  "%       Name string\n"
                                  "%       Color color\n"
                                  "%EndEventDef\n"
                                  "%EventDef PajeCreateContainer 3\n"
                                  "%       Time date\n"
                                  "%       Alias string\n"
                                  "%       Type string\n"
                                  "%       Container string\n"
                                  "%       Name string\n"
                                  "%EndEventDef\n"
                                  "%EventDef PajeDestroyContainer 4\n"
                                  "%       Time date\n"
                                  "%       Type string\n"
                                  "%       Name string\n"
                                  "%EndEventDef\n"
                                  "%EventDef PajePushState 5\n"
                                  "%       Time date\n"
                                  "%       Container string\n"
                                  "%       Type string\n"
                                  "%       Value string\n"
                                  "%       Batch string\n"
                                  "%       Window string\n"
                                  "%       Layer string\n"
                                  "%EndEventDef\n"
                                  "%EventDef PajePopState 6\n"
                                  "%       Time date\n"
                                  "%       Container string\n"
                                  "%       Type string\n"
                                  "%EndEventDef\n";

typedef struct {
    int rank, worker;
    np_node_kind kind;
    double start, end; /* seconds since the earliest start */
    size_t seq;        /* record order, the last tie-break */
    long batch;
    int window, node;
} task;

/* A push or pop on one worker, in the order it is written. */
typedef struct {
    double t;
    int rank, worker;
    size_t idx; /* position in its worker's push/pop sequence */
    int push;   /* 1 = push, 0 = pop */
    np_node_kind kind;
    long batch;
    int window, node;
} change;

static int cmp_task(const void *pa, const void *pb) {
    const task *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->worker != b->worker) return a->worker < b->worker ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1; /* an empty task first */
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Time order; ties keep each worker's own sequence, so a pop at t stays before the next
 * push at t on the same worker (adjacent tasks) and a zero-length task pushes first. */
static int cmp_change(const void *pa, const void *pb) {
    const change *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->worker != b->worker) return a->worker < b->worker ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Paje strings are double-quoted with no escapes: quotes, backslashes and control
 * characters in a worker name become '_'. */
static void put_name(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        fputc(c == '"' || c == '\\' || c < 0x20 || c == 0x7f ? '_' : c, f);
    }
    fputc('"', f);
}

/* Writes the trace body; ts (n, sorted by cmp_task) and ch (2n) are work arrays. */
static void emit(FILE *f, const np_trace *tr, task *ts, size_t n, change *ch) {
    fputs(paje_header, f);
    fputs("0 CT_Rank 0 \"Rank\"\n"
          "0 CT_Worker CT_Rank \"Worker\"\n"
          "1 ST_Task CT_Worker \"task\"\n",
          f);
    for (int k = 0; k < NP_NODE_KIND_COUNT; k++) { /* the SVG's colours (runtime/core/kinds.c) */
        const np_node_kind_def *d = &np_node_kinds[k];
        fprintf(f, "2 V_%s ST_Task \"%s\" \"%.3f %.3f %.3f\"\n", d->name, d->name,
                d->rgb[0] / 255.0, d->rgb[1] / 255.0, d->rgb[2] / 255.0);
    }
    /* A kind outside the enum (a newer or corrupt trace) still gets a defined value. */
    fputs("2 V_other ST_Task \"?\" \"0.251 0.251 0.251\"\n", f);
    if (n == 0) return;

    double t_end = 0;
    for (size_t i = 0; i < n; i++)
        if (ts[i].end > t_end) t_end = ts[i].end;

    /* Containers, all created at 0 (the earliest start). */
    for (size_t i = 0; i < n; i++) {
        int new_rank = i == 0 || ts[i].rank != ts[i - 1].rank;
        if (new_rank) {
            char name[32];
            snprintf(name, sizeof name, "rank %d", ts[i].rank);
            fprintf(f, "3 0.000000000 R%d CT_Rank 0 ", ts[i].rank);
            put_name(f, name);
            fputc('\n', f);
        }
        if (!new_rank && ts[i].worker == ts[i - 1].worker) continue;
        char buf[32];
        const char *wname = np_trace_worker_name(tr, ts[i].worker);
        if (!wname) {
            snprintf(buf, sizeof buf, "worker %d", ts[i].worker);
            wname = buf;
        }
        fprintf(f, "3 0.000000000 R%dW%d CT_Worker R%d ", ts[i].rank, ts[i].worker, ts[i].rank);
        put_name(f, wname);
        fputc('\n', f);
    }

    /* Each worker's pushes and pops in sequence. States on one container nest in Paje; a
     * worker runs one task at a time, so a task that overlaps the next one on its worker is
     * a clock glitch and is cut at the next start, keeping one state per task. */
    size_t m = 0, idx = 0;
    for (size_t i = 0; i < n; i++) {
        int same = i > 0 && ts[i].rank == ts[i - 1].rank && ts[i].worker == ts[i - 1].worker;
        if (!same) idx = 0;
        double end = ts[i].end;
        int next_same =
            i + 1 < n && ts[i + 1].rank == ts[i].rank && ts[i + 1].worker == ts[i].worker;
        if (next_same && end > ts[i + 1].start) end = ts[i + 1].start;
        ch[m++] = (change){ts[i].start, ts[i].rank, ts[i].worker, idx++, 1, ts[i].kind,
                           ts[i].batch, ts[i].window, ts[i].node};
        ch[m++] = (change){end, ts[i].rank, ts[i].worker, idx++, 0, ts[i].kind, ts[i].batch,
                           ts[i].window, ts[i].node};
    }
    qsort(ch, m, sizeof *ch, cmp_change);
    for (size_t i = 0; i < m; i++) {
        if (ch[i].push) {
            /* the task's batch, window (-1: batch-wide) and layer ("-" for none) ride along
             * as extra fields of the push */
            fprintf(f, "5 %.9f R%dW%d ST_Task V_%s %ld %d ", ch[i].t, ch[i].rank, ch[i].worker,
                    (unsigned)ch[i].kind < NP_NODE_KIND_COUNT ? np_node_kind_name(ch[i].kind)
                                                              : "other",
                    ch[i].batch, ch[i].window);
            const char *layer = ch[i].node >= 0 ? np_trace_node_name(tr, ch[i].node) : NULL;
            put_name(f, layer ? layer : "-");
            fputc('\n', f);
        } else
            fprintf(f, "6 %.9f R%dW%d ST_Task\n", ch[i].t, ch[i].rank, ch[i].worker);
    }

    /* Workers first, then their rank, all at the last end. */
    for (size_t i = 0; i < n; i++) {
        int last_of_worker =
            i + 1 == n || ts[i + 1].rank != ts[i].rank || ts[i + 1].worker != ts[i].worker;
        if (last_of_worker)
            fprintf(f, "4 %.9f CT_Worker R%dW%d\n", t_end, ts[i].rank, ts[i].worker);
        if (i + 1 == n || ts[i + 1].rank != ts[i].rank)
            fprintf(f, "4 %.9f CT_Rank R%d\n", t_end, ts[i].rank);
    }
}

np_status np_trace_write_paje(const np_trace *tr, const char *path, np_error *err) {
    size_t n = np_trace_count(tr);
    task *ts = np_alloc(n ? n : 1, sizeof *ts, "paje tasks", err);
    change *ch = np_alloc(n ? 2 * n : 1, sizeof *ch, "paje state changes", err);
    np_status st = NP_OK;
    if (!ts || !ch) {
        st = NP_STATUS_NO_MEMORY;
        goto out;
    }

    /* Paje times are seconds; the earliest start is 0 so ViTE's axis starts at the run. A
     * time that is not finite is placed at 0, and a task ending before it starts is empty. */
    double t0 = INFINITY;
    for (size_t i = 0; i < n; i++) {
        const np_trace_event *e = np_trace_get(tr, i);
        if (!e) {
            n = i;
            break;
        }
        ts[i] = (task){e->rank, e->worker, e->kind, e->start_us, e->end_us, i, e->batch, e->window, e->node};
        if (isfinite(e->start_us) && e->start_us < t0) t0 = e->start_us;
    }
    if (!isfinite(t0)) t0 = 0;
    for (size_t i = 0; i < n; i++) {
        double s = isfinite(ts[i].start) ? (ts[i].start - t0) * 1e-6 : 0;
        double e = isfinite(ts[i].end) ? (ts[i].end - t0) * 1e-6 : s;
        ts[i].start = s;
        ts[i].end = e < s ? s : e;
    }
    qsort(ts, n, sizeof *ts, cmp_task);

    /* Through a unique temporary and rename, so a viewer never opens half a trace. */
    np_outfile o;
    if ((st = np_outfile_open(&o, path, "trace paje", err))) goto out;
    errno = 0;
    emit(o.f, tr, ts, n, ch);
    st = np_outfile_commit(&o, 0, err);
out:
    free(ts);
    free(ch);
    return st;
}
