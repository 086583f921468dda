/* Layout of the SVG picture of a trace (private to runtime/trace/): the tasks on a common time
 * origin, sorted into rows; the scales; where each part of the picture goes; colours,
 * shades and which label fits in a rectangle. Geometry only: runtime/trace/svg.c writes the XML
 * from it. */
#ifndef NP_TRACE_SVG_LAYOUT_H
#define NP_TRACE_SVG_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/trace/trace.h"

/* Layout in px. The width is fixed: a long trace is scaled to fit, not scrolled. */
enum {
    NP_SVG_WIDTH = 1600,
    NP_SVG_LABEL_W = 170, /* row labels left of the plot */
    NP_SVG_PLOT_W = NP_SVG_WIDTH - NP_SVG_LABEL_W - 30,
    NP_SVG_ROW_H = 20, /* one worker */
    NP_SVG_ROW_GAP = 3,
    NP_SVG_RANK_HEAD = 16, /* the rank's title line, which carries the batch labels */
    NP_SVG_RANK_GAP = 8,
    NP_SVG_LEGEND_ITEM_W = 150,
    NP_SVG_LEGEND_PER_LINE = NP_SVG_PLOT_W / NP_SVG_LEGEND_ITEM_W,
    NP_SVG_BAR_H = 16,
    NP_SVG_BAR_GAP = 6,
    NP_SVG_BAR_W = 900, /* the longest bar (largest union) */
    NP_SVG_SUMMARY_H = 160, /* the per-batch summary chart's plot */
};

typedef struct np_svg_task {
    const char *name;
    np_node_kind kind;
    long batch;
    int window, rank, worker, node, chunk;
    double start, end; /* microseconds since the earliest start; end >= start */
    uint64_t bytes;
    size_t seq;
    double wait; /* of a collective: the time waiting for the last peer (np_trace_peer_wait) */
    int64_t id;  /* the task's number on its rank (0: none) and its producers' */
    int n_deps;
    const np_trace_event *ev; /* the trace's event (np_trace_dep(ev, d): producer d), valid
                                 while the picture is drawn from that trace */
    int critical; /* on its rank's critical path (np_svg_critical_path) */
} np_svg_task;

/* One batch of a long run in the summary chart: its window's length (the step) and, per
 * rank on average, what of it was exposed exchange, exposed lookup and exposed input. */
typedef struct np_svg_summary {
    long batch, count; /* batches batch .. batch + count - 1, averaged (one, up to 400 bars) */
    double step, exchange, lookup, input;
} np_svg_summary;

typedef struct np_svg_batch {
    long batch;
    double start;
} np_svg_batch;

/* The picture of one trace: its tasks and where the parts of the document go. */
typedef struct np_svg_picture {
    const np_trace *tr;
    np_svg_task *ts; /* (n) by rank, worker, start, end, record order */
    size_t n;
    np_svg_batch *bs;    /* (n) work array of np_svg_rank_batches */
    double span;         /* microseconds, > 0 */
    np_trace_report rep; /* the analysis, valid when analyzed */
    int analyzed;        /* 0: the analysis refused the trace (no bar chart) */
    np_error why;        /* then why (why.msg) */
    int n_lanes, n_ranks;
    int n_bars;   /* kinds with tasks in the bar chart, or 1 for the line saying why not */
    int n_layers; /* rows of the per-layer chart, 0: no chart (no layer tasks) */
    int n_named;  /* layers in the layer legend (those with a node id) */
    /* a long run: the timeline is the window of batch `detail` out of `batches`, and
     * summary[n_summary] has every batch */
    long detail, batches;
    np_svg_summary *summary;
    int n_summary;
    int arrows; /* draw the dependencies (a short picture) */
    double y_axis, y_rows, y_end, y_legend, y_layer_legend, y_bars, y_layers, y_summary, height;
} np_svg_picture;

/* Timelines of more batches than this are drawn as one batch in detail and a summary bar
 * a batch; dependency arrows are drawn for at most NP_SVG_ARROW_TASKS tasks. */
#define NP_SVG_MAX_BATCHES 12
#define NP_SVG_MAX_BARS 400
#define NP_SVG_ARROW_TASKS 4000

/* Reads tr into p: times from the earliest start (a non-finite time at 0, a task ending
 * before it starts empty), each collective's wait, the rows, the analysis and the layout.
 * A trace the analysis refuses (NP_STATUS_BAD_INPUT: non-finite times, unknown kinds)
 * still gets its timeline. NP_STATUS_NO_MEMORY otherwise; free with np_svg_picture_free
 * either way. */
NP_NODISCARD np_status np_svg_picture_make(np_svg_picture *p, const np_trace *tr, np_error *err);
/* For a trace of more than NP_SVG_MAX_BATCHES batches: *detail = the window of a batch
 * three fifths into the run (steady state) and p's summary of every batch, which the
 * caller frees with np_svg_picture_free; *detail NULL for a shorter trace. */
NP_NODISCARD np_status np_svg_long_run(const np_trace *tr, np_trace **detail,
                                       np_svg_summary **summary, int *n, long *batch,
                                       long *batches, np_error *err);
/* Marks the tasks of each rank's critical path: from the task that ends last, back through
 * the producer that finished last, while the producers are in the picture. */
void np_svg_critical_path(np_svg_picture *p);
/* A task's rank and id and its index in p->ts, for finding producers. */
typedef struct np_svg_key {
    int rank;
    int64_t id;
    size_t i;
} np_svg_key;
/* p->n keys sorted by (rank, id), for np_svg_find; NULL without memory. */
np_svg_key *np_svg_by_id(const np_svg_picture *p);
/* The index in p->ts of the task `id` of `rank`, or -1 (id 0 is no task). */
long np_svg_find(const np_svg_picture *p, const np_svg_key *keys, int rank, int64_t id);
void np_svg_picture_free(np_svg_picture *p);

/* The median step of p's summary (0 without one). */
double np_svg_median_step(const np_svg_picture *p);
/* Where the parts of the picture go (np_svg_picture_make places them; call it again after
 * attaching a long run's summary). */
void np_svg_place(np_svg_picture *p);

/* x of time t (microseconds since the earliest start). */
double np_svg_x(const np_svg_picture *p, double t);

/* The axis: a tick every *step ms from 0 (a 1-2-5 step near span/10), labels with *dec
 * decimals; at most 21 ticks. */
void np_svg_ticks(const np_svg_picture *p, double *step, int *dec);

/* The distinct batches of the tasks [i0, i1) of one rank, by their first start, into
 * p->bs; returns their count. */
size_t np_svg_rank_batches(const np_svg_picture *p, size_t i0, size_t i1);
/* The batch label group that starts at p->bs[i] (of k): the batches that start too close
 * together to label apart, at most 24; its label ("b0-b2,b4") into out. Returns the index
 * of the group's last batch. */
size_t np_svg_batch_group(const np_svg_picture *p, size_t i, size_t k, char *out, size_t cap);

/* A task's rectangle and what is written in it. */
typedef struct np_svg_box {
    double x, w;       /* at least a hairline (0.5 px) */
    double wait_w;     /* the pale start (its wait for peers), 0: none drawn */
    const char *layer; /* the layer's name to write inside, NULL: none fits */
    char label[32];    /* else "bN wW" to write inside, "" when it does not fit either */
} np_svg_box;
void np_svg_task_box(const np_svg_picture *p, const np_svg_task *t, np_svg_box *b);

/* Colour of kind k (dark grey for a kind outside the enum), shaded by node so that
 * neighbouring layers differ while the hue still says the kind (node -1: plain). */
void np_svg_shade(np_node_kind k, int node, unsigned char out[3]);
/* Dark text on light colours, white on dark ones. */
const char *np_svg_text_on(np_node_kind k, int node);

/* A layer's colour (fwd and bwd tasks of a node): hues a golden angle apart, so any number
 * of layers differ and neighbours most; bwd darker than fwd. */
void np_svg_layer_colour(int node, int bwd, unsigned char out[3]);

/* Legend item k's top left corner, for a legend starting at y. */
void np_svg_legend_at(int k, double y, double *x, double *yy);
/* Length of a bar for v of a chart whose longest bar is max. */
double np_svg_bar_w(double v, double max);

#endif
