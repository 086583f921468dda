/* The node kinds of the per-batch graph, and the one table that says, per kind, everything
 * the rest of the library decides by kind: its name in traces, its colour in pictures, what
 * the overlap report counts it as, where it may run (--place, the communication worker), which
 * byte counter its reports go to, and its StarPU priority. tasks/ submits by it, runtime/trace/
 * names, draws and analyses by it (docs/architecture.md "Node kinds").
 * Not here: the codelets (codelets/) or which task a submitter builds (tasks/). */
#ifndef NP_CORE_KINDS_H
#define NP_CORE_KINDS_H

#include "nestpipe/nestpipe.h"

/* In the report's order: a batch's tasks roughly as they run. The value indexes
 * np_node_kinds; a trace file names kinds, never numbers (runtime/engine/trace_merge.c sends the
 * number between ranks of one build). */
typedef enum np_node_kind {
    NP_NODE_PREFETCH,      /* the batch into its input slot */
    NP_NODE_H2D,           /* the slot to the CUDA workers (a no-op on the CPU) */
    NP_NODE_ROUTE,         /* requester: dedup and bucket the keys by owner */
    NP_NODE_EXCHANGE_KEYS, /* the two-phase All2All of counts and keys (a2a_keys) */
    NP_NODE_ROUTE_OWNER,   /* owner: dedup what it was asked for, map keys to rows */
    NP_NODE_RETRIEVE,      /* table rows -> the batch's embedding buffer */
    NP_NODE_SYNC,          /* dual-buffer sync of the rows two batches share */
    NP_NODE_EXCHANGE_EMB,  /* rows owner -> requester */
    NP_NODE_POOL_FWD,      /* embedding-bag pooling of a chunk */
    NP_NODE_FWD,           /* a layer's forward on a chunk */
    NP_NODE_LOSS_FWD,      /* sigmoid + BCE of a chunk */
    NP_NODE_LOSS_BWD,      /* its gradient */
    NP_NODE_BWD,           /* a layer's backward on a chunk, and the chunks' gradient sums */
    NP_NODE_POOL_BWD,      /* pooling's backward: row gradients of a window */
    NP_NODE_EXCHANGE_GRAD, /* row gradients requester -> owner */
    NP_NODE_ALLREDUCE,     /* a layer's dense gradients across ranks */
    NP_NODE_SPARSE_UPDATE, /* the optimizer on the batch's rows */
    NP_NODE_WRITEBACK,     /* the batch's rows -> the tables */
    NP_NODE_DENSE_UPDATE,  /* the optimizer on a layer's dense parameters */
    NP_NODE_DATA, /* the driver reading or generating a batch (not a task: the "driver" row) */
    NP_NODE_CONTROL, /* the driver's collectives on the control channel (the ranks agreeing
                        on a batch's sizes; not a task: the "driver" row) */
    NP_NODE_KIND_COUNT
} np_node_kind;

/* np_node_kind_def.flags */
enum {
    /* dense compute: the critical path, whose intervals hide everything else in the overlap
     * report ("exposed" = outside them); its own time is all exposed */
    NP_KIND_COMPUTE = 1u << 0,
    NP_KIND_BACKWARD = 1u << 1, /* the backward pass (the report's per-layer bwd column) */
    NP_KIND_LOOKUP = 1u << 2,   /* counts in the report's "lookup" figure */
    /* a collective: every rank runs it, in the same order (it takes the comm token RW), on
     * the communication worker; the report splits its time into waiting for peers and the
     * wire */
    NP_KIND_EXCHANGE = 1u << 3,
    /* counts in the report's "exchange" figure: the collectives that move rows or gradients
     * (the keys' All2All counts in lookup instead) */
    NP_KIND_PAYLOAD = 1u << 4,
    NP_KIND_INPUT = 1u << 5,  /* an input stage, before the batch's graph proper */
    NP_KIND_DRIVER = 1u << 6, /* the driver's own work, recorded, never submitted */
};

typedef struct np_node_kind_def {
    const char *name;     /* the trace's "kind", the report's row, the Paje value */
    unsigned char rgb[3]; /* colour in the SVG and Paje pictures (distinct per kind) */
    unsigned flags;       /* NP_KIND_* */
    int place;            /* np_place_kind its tasks follow (--place), -1: where its
                             codelet runs */
    int bytes_slot;       /* np_trainer_bytes counter its reports add to: 0 keys, 1 rows,
                             2 row gradients, 3 dense all-reduce; -1 none */
    int prio;             /* StarPU task priority (policies that honour it) */
} np_node_kind_def;

/* The table, indexed by np_node_kind (runtime/core/kinds.c). */
extern const np_node_kind_def np_node_kinds[NP_NODE_KIND_COUNT];

/* Row of kind k, NULL for a value outside the enum (a read trace's junk). */
const np_node_kind_def *np_node_kind_get(np_node_kind k);
/* Whether kind k has any of flags; 0 for a value outside the enum. */
int np_node_kind_is(np_node_kind k, unsigned flags);
/* "prefetch", "exchange_keys", ...; "?" for a value outside the enum. */
const char *np_node_kind_name(np_node_kind k);
/* The kind named name into *out: 0, or -1 (*out untouched) when no kind has that name. */
int np_node_kind_lookup(const char *name, np_node_kind *out);

#endif
