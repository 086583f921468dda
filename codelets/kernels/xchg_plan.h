/* The host-side logic of the row and gradient exchanges and of the dense all-reduce, as
 * pure functions shared by the CPU codelets (codelets/exchange.c) and the CUDA ones
 * (codelets/exchange.cu, NCCL): per-rank counts and displacements from meta, the packing order
 * of rows, the order received gradients are summed in, the all-reduce's slices. No StarPU,
 * MPI or CUDA here, so tests/test_comm_backend.c checks it on simulated ranks. */
#ifndef NP_CODELETS_XCHG_PLAN_H
#define NP_CODELETS_XCHG_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "nestpipe/nestpipe.h" /* np_exchange */

/* The int64 "meta" buffer of a batch: the counts that route, the exchanges and the updates
 * share. Written by route (requester side), a2a_keys and route_owner (owner side). A batch
 * is W windows (micro-batches, FWP); the requester dedups per window, the owner over the
 * union of windows and requesters, so E, the updates and the dual-buffer sync stay per batch.
 * Send counts are laid out (owner, window, table), which is the order keys travel in. */
#define NP_META_UQ 0              /* rows received, summed over windows (distinct keys when
                                     every segment is a rows one) */
#define NP_META_UO 1              /* distinct rows this rank serves as owner = rows of E */
#define NP_META_NRECV 2           /* keys received as owner (map, recvkeys) */
#define NP_META_UCNT(t) (3 + (t)) /* first E row of table t; NP_META_UCNT(T) = UO */
#define NP_META_WUQ(T, w) (4 + (T) + (w)) /* rows of window w's Rin (and grows) */
#define NP_META_SC(T, W, o, w, t) (4 + (T) + (W) + ((o) * (W) + (w)) * (T) + (t)) /* sent to o */
#define NP_META_RC(T, W, R, q, w, t)                                           /* from q */    \
    (4 + (T) + (W) + ((R) + (q)) * (W) * (T) + (w) * (T) + (t))
/* Rows (vectors of d floats) of each segment, which differ from its keys when the segment
 * is pooled (docs/pipeline.md "Rows or pooled sums"): SR the rows owner o returns for
 * window w and table t (the rows of Rin_w it fills), RR the rows this owner returns to
 * requester q. In a rows segment rows = keys. */
#define NP_META_SR(T, W, R, o, w, t) (4 + (T) + (W) + (2 * (R) + (o)) * (W) * (T) + (w) * (T) + (t))
#define NP_META_RR(T, W, R, q, w, t) (4 + (T) + (W) + (3 * (R) + (q)) * (W) * (T) + (w) * (T) + (t))
/* 1 when some segment of the batch is pooled: its pos holds -1s, which pooling must skip */
#define NP_META_POOLED(T, W, R) (4 + (T) + (W) + 4 * (R) * (W) * (T))
#define NP_META_SIZE(T, W, R) (5 + (T) + (W) + 4 * (R) * (W) * (T))

/* The keys a requester sends are owner-local rows; a negative one, -(row + 1), starts a
 * row of the exchange (np_xchg_key_starts), a non-negative one adds to the row before it.
 * In a rows segment every key starts a row; in a pooled one the first key of each bag's
 * part at that owner does. */
static inline int64_t np_xchg_key_row(int64_t v) {
    return v < 0 ? -v - 1 : v;
}
static inline int np_xchg_key_starts(int64_t v) {
    return v < 0;
}

/* Whether owner o's part of one (window, table) goes pooled: u distinct keys as rows, or
 * n keys in g bags as one row each (docs/pipeline.md "Rows or pooled sums"). mode is an
 * np_exchange. auto counts the bytes both ways take, keys (8 bytes) and rows of d floats
 * there and their gradients back, and keeps rows on a tie and for rank me's own keys,
 * which cross no wire. The route codelet and np_route_stats both decide by it. */
static inline int np_xchg_seg_pooled(int mode, int o, int me, int64_t u, int64_t n, int64_t g,
                                     int d) {
    if (mode != NP_EXCHANGE_AUTO || !u) return mode == NP_EXCHANGE_POOLED && u;
    int64_t row = 2 * (int64_t)d * (int64_t)sizeof(float), key = (int64_t)sizeof(int64_t);
    return o != me && n * key + g * row < u * (key + row);
}

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NP_XCHG_NODISCARD __attribute__((warn_unused_result))
#else
#define NP_XCHG_NODISCARD
#endif

/* Keys of window w (every window: w < 0) per rank, summed over tables, on the send side
 * (recv 0: per owner, from meta's send counts) or the receive side (recv 1: per requester).
 * O(R T) for one window, O(R W T) for all. */
void np_xchg_totals(const int64_t *meta, int T, int W, int R, int recv, int w, int64_t *tot);
/* The same in rows (NP_META_SR, NP_META_RR). */
void np_xchg_row_totals(const int64_t *meta, int T, int W, int R, int recv, int w, int64_t *tot);
/* Where the keys received from requester q for window w start in the owner's key list
 * (and in map), which is in (requester, window, table, key) order. O(q W T): for one
 * segment only; a plan finds every requester's start in one pass. */
int64_t np_xchg_recv_start(const int64_t *meta, int T, int W, int R, int q, int w);

/* One window's exchange: counts per rank in rows (of d floats), their packed
 * displacements, and the owner-side segment of map each requester's keys occupy. The
 * arrays hold R entries each, in one block the plan owns (np_xchg_plan_free), so a plan
 * holds any rank count. */
typedef struct np_xchg_plan {
    int R;
    int64_t *send, *sdispl; /* (R) rows to rank q, at */
    int64_t *recv, *rdispl; /* (R) rows from rank q, at */
    int64_t *seg;  /* (R) requester q's keys of the window: map + seg[q], */
    int64_t *nseg; /* (R) nseg[q] of them (the owner's side) */
    int64_t nsend, nrecv;
    int pooled; /* 1: some owner-side segment has fewer rows than keys (a pooled part), so
                   packing and summing follow the row starts of the received keys */
    int64_t *mem; /* (6 R) the block behind the arrays */
} np_xchg_plan;

/* exchange_rows of window w: as owner, to requester q the rows of its keys (send[q] = the
 * rows its keys start, NP_META_RR); as requester, from owner o the rows its keys there
 * start (NP_META_SR). nseg[q]: the keys of q's segment. One pass over meta's counts:
 * O(R W T) (the displacements and segment starts are prefix sums over the ranks).
 * 0, or -1 when the plan's arrays cannot be allocated (then p holds nothing to free). */
NP_XCHG_NODISCARD int np_xchg_plan_rows(const int64_t *meta, int T, int W, int R, int w,
                                        np_xchg_plan *p);
/* exchange_grads of window w: the same ways reversed (send[o] = rows from o, recv[q] =
 * rows to q). */
NP_XCHG_NODISCARD int np_xchg_plan_grads(const int64_t *meta, int T, int W, int R, int w,
                                         np_xchg_plan *p);
/* Frees the plan's arrays and zeroes it; NULL and a zeroed plan are no-ops. */
void np_xchg_plan_free(np_xchg_plan *p);

/* Rows plan: sbuf (nsend, d) = E rows map[seg[q] + i], requester after requester, key after
 * key: the order each requester's Rin expects them in. A pooled segment's row is the sum of
 * the E rows of the keys from one row start (keys: the received keys, np_xchg_key_starts)
 * to the next, in key order: E[k0] + E[k1] + ...; keys may be NULL when !p->pooled. */
void np_xchg_pack_rows(const np_xchg_plan *p, const int64_t *map, const int64_t *keys,
                       const float *E, size_t d, float *sbuf);
/* Grads plan: gE[map[seg[q] + i]] += rbuf row rdispl[q] + i, for q in rank order and i in
 * key order: every row's sum runs in (rank, key) order; window after window, (window,
 * rank, key). In a pooled segment each key adds the received row of its row start (the
 * bag's pooled gradient), in the same order. The CUDA version relies on
 * np_xchg_segments_distinct. */
void np_xchg_sum_grads(const np_xchg_plan *p, const int64_t *map, const int64_t *keys,
                       const float *rbuf, size_t d, float *gE);
/* 1 when no E row occurs twice in one requester's segment of the plan's window (each
 * requester dedups per window and table, the owner maps distinct (table, row) pairs to
 * distinct E rows): then one rank's gradients can be added to gE in parallel, without
 * atomics, and ranks one after another keep the rank order. 0 otherwise (a bug). */
int np_xchg_segments_distinct(const np_xchg_plan *p, const int64_t *map);

/* ---- The split row exchange of the batch boundary (docs/pipeline.md "The batch
 * boundary"). Under dbp a window's rows travel in two parts: the rows the previous batch
 * does not hold (fresh in the table when retrieved, so final) while that batch still
 * computes, and the rows both batches hold after the dual-buffer sync refreshed them.
 * Every row lands where the whole exchange would put it: the same Rin, bit for bit.
 * Bitmaps hold a bit per row of each rank's segment, 1 = shared, in 32-bit words,
 * np_xchg_bit_words(n) words per segment of n rows, segment after segment (rank order). */

/* shared[j] = 1 when E row j of the current batch (owner rows ucur, table by table as its
 * meta mcur says, sorted within a table) is also a row of the previous batch (uprev, mprev),
 * else 0: the rows the sync copies. shared: (Uo of mcur) bytes. */
void np_xchg_mark_shared(const int64_t *uprev, const int64_t *mprev, const int64_t *ucur,
                         const int64_t *mcur, int T, uint8_t *shared);
static inline int64_t np_xchg_bit_words(int64_t n) {
    return (n + 31) / 32;
}
/* The words of each rank's bitmap segment: side 0 the owner's (rows plan: send[q] rows to
 * requester q), side 1 the requester's (recv[o] rows from owner o). */
void np_xchg_bit_counts(const np_xchg_plan *p, int side, int64_t *words);
/* Owner side of a rows plan: bits of the rows each requester's keys name (a pooled row is
 * shared when one of its keys' rows is). */
void np_xchg_mark_rows(const np_xchg_plan *p, const int64_t *map, const int64_t *keys,
                       const uint8_t *shared, uint32_t *bits);
/* Rows of each rank's segment whose bit is `part` (0 fresh, 1 shared), on side 0 or 1. */
void np_xchg_part_counts(const np_xchg_plan *p, const uint32_t *bits, int side, int part,
                         int64_t *count);
/* Owner side: sbuf = the part's rows (as np_xchg_pack_rows forms them), requester after
 * requester, in key order. */
void np_xchg_pack_part(const np_xchg_plan *p, const int64_t *map, const int64_t *keys,
                       const float *E, size_t d, const uint32_t *bits, int part, float *sbuf);
/* Requester side: the part's rows, packed owner after owner in key order in src, to their
 * rows rdispl[o] + i of Rin. src may be Rin itself: a row only moves forward, and the rows
 * are placed from the last one back. */
void np_xchg_place_part(const np_xchg_plan *p, const uint32_t *bits, int part, const float *src,
                        size_t d, float *Rin);

/* The dense all-reduce's form: 1 for a reduce-scatter (each rank sums its slice of every
 * rank's gradient in rank order) then an all-gather of the slices, 0 for an all-gather and
 * the whole sum in rank order. Both give the same bits. Above 2 ranks the former;
 * NP_ALLREDUCE=allgather|rs forces one (tests). */
int np_xchg_allreduce_rs(int R);
/* Slice q of n floats over R ranks: [lo[q], lo[q] + len[q]), lo[q] = n q / R. */
void np_xchg_slices(size_t n, int R, int64_t *lo, int64_t *len);

/* Rank me's part of the dense all-reduce of n floats over R ranks. In the reduce-scatter
 * form (rs 1) slice q (np_xchg_slices) of its gradient goes to rank q and len[me] floats
 * come from every rank (got[q]); the other form fills none of the three. nsend: the floats
 * it sends, for the codelets' bytes. The arrays hold R entries each, in one block the plan
 * owns (np_xchg_allreduce_plan_free). */
typedef struct np_xchg_allreduce_plan {
    int rs;
    int64_t *lo, *len, *got; /* (R) each; NULL in the all-gather form */
    uint64_t nsend;
} np_xchg_allreduce_plan;
/* 0, or -1 when the arrays cannot be allocated (p then holds nothing to free). */
NP_XCHG_NODISCARD int np_xchg_plan_allreduce(size_t n, int R, int me, np_xchg_allreduce_plan *p);
void np_xchg_allreduce_plan_free(np_xchg_allreduce_plan *p);
/* Floats the all-reduce's staging buffer (the `all` buffer of the allreduce codelets)
 * holds for n floats over R ranks: R x n in the all-gather form, R slices of at most
 * ceil(n / R) in the reduce-scatter form, so about n, whatever R. */
size_t np_xchg_allreduce_staging(size_t n, int R);
/* The staging of a bucket of k layers' n floats: the above, then for k > 1 the gradients
 * packed layer after layer (n) and their sums (n), which the collectives need contiguous. */
size_t np_xchg_allreduce_room(size_t n, int R, int k);

/* ---- What a rank's buffers must hold (docs/engine.md "Memory per rank"). Sized from
 * what a rank sends and receives, never from the rank count times its own batch. */
/* The engine's input slots (batches t .. t+4) and route sets (t .. t+2): runtime/engine/ sizes its
 * arrays by these, route-stats its prediction. */
enum { NP_XCHG_SLOTS = 5, NP_XCHG_RSETS = 3 };
typedef struct np_xchg_caps {
    size_t keys;      /* requester: its batch's keys (the slots' keys, uniq, pos, sendkeys) */
    size_t recv_keys; /* owner: keys received in the key All2All (recvkeys, map) */
    size_t recv;      /* owner: its distinct rows (uniq_o, E, its state and gradients) */
    size_t stage;     /* owner: rows it returns in one window (the staging, its bitmaps) */
    size_t win;       /* requester: rows of one window (Rin, their gradients) */
} np_xchg_caps;

/* Growth: each cap that is short of need becomes the larger of need and 1.25 times
 * itself (a growth drains the pipeline, so not by one row at a time; not doubling, so a
 * rank holds at most 1.25 times the most it was ever asked for). 1 when something grew. */
int np_xchg_caps_grow(np_xchg_caps *cap, const np_xchg_caps *need);

/* The bytes of the engine's buffers at caps c (runtime/engine/engine.c np_engine_grow_nnz and
 * register_batch_buffers allocate exactly these): d floats a row, W windows, R ranks,
 * `ebuffers` embedding buffers (2 under the dual buffer), `split` early windows with
 * bitmaps (dbp's split rows, else 0), `slots` input slots and `rsets` route sets. */
uint64_t np_xchg_caps_bytes(const np_xchg_caps *c, int d, int W, int R, int ebuffers, int split,
                            int slots, int rsets);

/* Scratch of np_xchg_owner_bounds, grown on demand; zero it first, free it with
 * np_xchg_bound_scratch_free. */
typedef struct np_xchg_bound_scratch {
    /* a table's keys counted in an open-addressing hash table of `slots` (a power of two,
     * at least twice the table's keys): key, count, and the stamp of the table it holds
     * (slots of other stamps are empty: nothing to clear between tables) */
    int64_t *key;
    uint32_t *cnt, *stamp;
    size_t slots;
    uint32_t now;   /* the current table's stamp */
    size_t *used;   /* (slots / 2) the slots the table filled, in order */
    int64_t *m, *raw; /* (R) per owner: table t's sum of min(count, W), its keys */
    int *touched;     /* (R) owners table t has keys at */
    int capR;
} np_xchg_bound_scratch;
void np_xchg_bound_scratch_free(np_xchg_bound_scratch *x);

/* Bounds, per owner o, of what one rank's batch sends it in the key All2All, whatever the
 * windows and their clustering: out[2 o] the keys (each distinct key of a table once per
 * window it can be in: min(count, W), or, where a segment may go pooled, the keys of its
 * bags, which the rows-or-pooled rule caps at (8 + 8d) / (8 + 8d/h) times that, h the
 * table's longest bag), out[2 o + 1] the rows those keys can name (the distinct keys: a
 * segment that auto sends pooled returns fewer rows than it has distinct keys; under
 * exchange pooled, a row a bag: the keys). Summed over the
 * requesters (a reduce-scatter), they bound the owner's received keys (recv_keys), the
 * rows any window returns (stage), and its distinct rows (recv; also at most the rows it
 * owns). The batch: offsets (T, n+1),
 * keys as the slot holds them; exchange an np_exchange, seq 1 when table 0 is a sequence
 * (sent as rows); rows (T) the tables' rows: a key outside [0, rows[t]) counts nowhere
 * (the route codelet refuses its batch). O(keys + R) a table. 0, or -1 when out of memory
 * (out then all zeros, so a caller can still take part in the collective it feeds). */
NP_XCHG_NODISCARD int np_xchg_owner_bounds(const uint32_t *off, const int64_t *keys, long n, int T,
                                           const int64_t *rows, int shard, int R, int W, int d,
                                           int exchange, int seq, int64_t *out,
                                           np_xchg_bound_scratch *x);

/* The most keys any one window of a batch can hold, whichever samples clustering puts
 * together: the keys of its ceil(n / W) largest samples (all keys when W = 1). offsets
 * (T, n+1). 0, or -1 when out of memory. */
NP_XCHG_NODISCARD int np_xchg_window_keys_bound(const uint32_t *off, long n, int T, int W,
                                                size_t nnz, size_t *out);

#ifdef __cplusplus
}
#endif
#endif
