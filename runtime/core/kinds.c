/* The node-kind table (runtime/core/kinds.h): one row per kind of the per-batch graph. A new kind
 * is an enum value, its row here and its submitter in tasks/ (docs/architecture.md "Node kinds");
 * tests/test_kinds.c checks the rows agree with each other. */
#include "runtime/core/kinds.h"

#include <string.h>

/* Priorities, for policies that honour them (prio, lws, dmdas): the dense chain of the
 * training batch is the critical path; input stages run in the gaps. A window's tasks get
 * a boost of W - w (np_task_ctx.boost), so window w's backward, whose gradients the comm
 * worker waits for, goes before the next windows' forward. Above all, the CPU task a
 * collective waits for (route, before the keys' All2All): the comm token is FIFO, so a late
 * route would hold every exchange queued behind its All2All. */
/* clang-format off */
enum { INPUT = 0, BATCH = 1, CRITICAL = 2, FEEDS_COMM = 100 };
/* the columns' words */
enum { COMPUTE = NP_KIND_COMPUTE, BWD = NP_KIND_BACKWARD, LOOKUP = NP_KIND_LOOKUP,
       EXCHANGE = NP_KIND_EXCHANGE, PAYLOAD = NP_KIND_PAYLOAD, IN = NP_KIND_INPUT,
       DRIVER = NP_KIND_DRIVER };
enum { ANY = -1, DENSE = NP_PLACE_DENSE, POOL = NP_PLACE_POOL, LOSS = NP_PLACE_LOSS,
       UPDATE = NP_PLACE_UPDATE };
enum { NONE = -1, KEYS = 0, ROWS = 1, GRADS = 2, ALLRED = 3 }; /* np_trainer_bytes' order */

const np_node_kind_def np_node_kinds[NP_NODE_KIND_COUNT] = {
    /*                         name             colour           flags               place   bytes   prio */
    [NP_NODE_PREFETCH]      = {"prefetch",      {158, 158, 158}, IN,                 ANY,    NONE,   INPUT},
    [NP_NODE_H2D]           = {"h2d",           {188, 189, 34},  IN,                 ANY,    NONE,   INPUT},
    [NP_NODE_ROUTE]         = {"route",         {23, 190, 207},  LOOKUP,             ANY,    NONE,   FEEDS_COMM},
    [NP_NODE_EXCHANGE_KEYS] = {"exchange_keys", {158, 218, 229}, EXCHANGE | LOOKUP,  ANY,    KEYS,   CRITICAL},
    [NP_NODE_ROUTE_OWNER]   = {"route_owner",   {16, 128, 140},  LOOKUP,             ANY,    NONE,   BATCH},
    [NP_NODE_RETRIEVE]      = {"retrieve",      {44, 160, 44},   LOOKUP,             ANY,    NONE,   BATCH},
    [NP_NODE_SYNC]          = {"sync",          {152, 223, 138}, LOOKUP,             ANY,    NONE,   CRITICAL},
    [NP_NODE_EXCHANGE_EMB]  = {"exchange_emb",  {214, 39, 40},   EXCHANGE | PAYLOAD, ANY,    ROWS,   CRITICAL},
    [NP_NODE_POOL_FWD]      = {"pool_fwd",      {57, 59, 121},   COMPUTE,            POOL,   NONE,   CRITICAL},
    [NP_NODE_FWD]           = {"fwd",           {31, 119, 180},  COMPUTE,            DENSE,  NONE,   CRITICAL},
    [NP_NODE_LOSS_FWD]      = {"loss_fwd",      {107, 174, 214}, COMPUTE,            LOSS,   NONE,   CRITICAL},
    [NP_NODE_LOSS_BWD]      = {"loss_bwd",      {197, 176, 213}, COMPUTE | BWD,      LOSS,   NONE,   CRITICAL},
    [NP_NODE_BWD]           = {"bwd",           {148, 103, 189}, COMPUTE | BWD,      DENSE,  NONE,   CRITICAL},
    [NP_NODE_POOL_BWD]      = {"pool_bwd",      {84, 39, 143},   COMPUTE | BWD,      POOL,   NONE,   CRITICAL},
    [NP_NODE_EXCHANGE_GRAD] = {"exchange_grad", {255, 127, 14},  EXCHANGE | PAYLOAD, ANY,    GRADS,  CRITICAL},
    [NP_NODE_ALLREDUCE]     = {"allreduce",     {227, 119, 194}, EXCHANGE | PAYLOAD, ANY,    ALLRED, CRITICAL},
    [NP_NODE_SPARSE_UPDATE] = {"sparse_update", {140, 86, 75},   0,                  ANY,    NONE,   BATCH},
    [NP_NODE_WRITEBACK]     = {"writeback",     {196, 156, 148}, 0,                  ANY,    NONE,   BATCH},
    [NP_NODE_DENSE_UPDATE]  = {"dense_update",  {174, 199, 232}, 0,                  UPDATE, NONE,   CRITICAL},
    [NP_NODE_DATA]          = {"data",          {99, 99, 99},    DRIVER,             ANY,    NONE,   INPUT},
    [NP_NODE_CONTROL]       = {"control",       {199, 199, 199}, DRIVER,             ANY,    NONE,   INPUT},
};
/* clang-format on */

const np_node_kind_def *np_node_kind_get(np_node_kind k) {
    /* The cast catches negative values too, which an enum may hold. */
    return (unsigned)k < (unsigned)NP_NODE_KIND_COUNT ? &np_node_kinds[k] : NULL;
}

int np_node_kind_is(np_node_kind k, unsigned flags) {
    const np_node_kind_def *d = np_node_kind_get(k);
    return d && (d->flags & flags) != 0;
}

const char *np_node_kind_name(np_node_kind k) {
    const np_node_kind_def *d = np_node_kind_get(k);
    return d && d->name ? d->name : "?";
}

int np_node_kind_lookup(const char *name, np_node_kind *out) {
    for (int k = 0; name && k < NP_NODE_KIND_COUNT; k++)
        if (np_node_kinds[k].name && !strcmp(name, np_node_kinds[k].name)) {
            *out = (np_node_kind)k;
            return 0;
        }
    return -1;
}
