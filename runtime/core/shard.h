/* Where each embedding row lives across ranks: pure functions of the config, used by the
 * model (which rows to allocate and initialise), the route codelet (whom to ask) and the
 * gather of the logical model. Private to the library. */
#ifndef NP_CORE_SHARD_H
#define NP_CORE_SHARD_H

#include <stdint.h>

#include "nestpipe/nestpipe.h"

/* The first slot of table t in the pooled embeddings (np_config_slots): table 0 takes
 * seq_len slots when it is a sequence (seq_len > 1), every other table one; t = tables gives
 * the slots in all. */
static inline int np_slot_first(int t, int seq_len) {
    return t > 0 && seq_len > 1 ? t + seq_len - 1 : t;
}

/* docs/engine.md "Sharding": where row k of table t lives (for R = ranks of T = tables;
 * the _in forms take the sharding by value, for codelets, which see no config).
 * Row-wise: on rank (k + o_t) mod R as local row k div R (consecutive hot keys, which Zipf
 * data makes the small ids, spread over all ranks), with the table's offset o_t = t: each
 * table's hottest row on another rank, but the next hottest rows of the tables pile up on
 * ranks T - 1 and around (rank r holds row r - t of every table t <= r). Spread: o_t =
 * t floor(R / T) mod R, the tables' hot rows R / T ranks apart (one row-wise when R < 2T).
 * Table-wise: table t whole on rank t mod R. */
static inline int64_t np_shard_offset(np_shard shard, int ranks, int tables, int t) {
    int64_t step = shard == NP_SHARD_SPREAD && tables > 0 && ranks / tables > 1 ? ranks / tables : 1;
    return (int64_t)t * step % ranks;
}

static inline int np_shard_owner_in(np_shard shard, int ranks, int tables, int t, int64_t k) {
    if (ranks == 1) return 0;
    if (shard == NP_SHARD_TABLE) return t % ranks;
    return (int)((k + np_shard_offset(shard, ranks, tables, t)) % ranks);
}

static inline int64_t np_shard_local_in(np_shard shard, int ranks, int64_t k) {
    return ranks == 1 || shard == NP_SHARD_TABLE ? k : k / ranks;
}

/* The same from a config. */
static inline int np_shard_owner(const np_config *c, int t, int64_t k) {
    return np_shard_owner_in(c->shard, c->ranks, c->tables, t, k);
}

static inline int64_t np_shard_local(const np_config *c, int64_t k) {
    return np_shard_local_in(c->shard, c->ranks, k);
}

/* The global row of local row j of table t on rank r. */
static inline int64_t np_shard_global(const np_config *c, int t, int r, int64_t j) {
    if (c->ranks == 1 || c->shard == NP_SHARD_TABLE) return j;
    int64_t R = c->ranks, o = np_shard_offset(c->shard, c->ranks, c->tables, t);
    int64_t first = (((int64_t)r - o) % R + R) % R;
    return first + R * j;
}

/* Rows of table t (of `rows`) held by rank r. */
static inline int64_t np_shard_rows(const np_config *c, int t, int r, int64_t rows) {
    if (c->ranks == 1) return rows;
    if (c->shard == NP_SHARD_TABLE) return t % c->ranks == r ? rows : 0;
    int64_t R = c->ranks, o = np_shard_offset(c->shard, c->ranks, c->tables, t);
    int64_t first = (((int64_t)r - o) % R + R) % R;
    return rows > first ? (rows - first + R - 1) / R : 0;
}

#endif
