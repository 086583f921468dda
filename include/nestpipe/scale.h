/* nestpipe at scale (public): what a run of N ranks would exchange and how long its steps
 * would take, without running N ranks (docs/scale.md). Every figure of the replay is a
 * projection, calibrated from traces of runs that did happen.
 *
 *     np_route_stats st;                       // bytes per peer at 1,536 ranks
 *     cfg.batch = 1536 * 2048;                  // the global batch at that size
 *     if (!np_route_stats_compute(&cfg, 1536, 4, &st, &err)) { ...; np_route_stats_free(&st); }
 */
#ifndef NESTPIPE_SCALE_H
#define NESTPIPE_SCALE_H

#include <stdint.h>

#include "nestpipe/nestpipe.h"
#include "nestpipe/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- exchange volumes at any rank count (runtime/scale/route_stats.c)
 * The routing is a pure function of the keys, the sharding and the batch split, so the
 * bytes every rank would send every other are computed here from the data stream as the
 * route codelet computes them on each rank: the rank's slice of each global batch, its
 * windows (clustered when cfg says so), the distinct keys per (window, table, owner), the
 * form of each segment (rows or pooled sums, key "exchange"). Bytes are those the engine
 * counts: to other ranks only. */
typedef struct np_route_stats {
    int ranks, windows, tables, dim;
    long steps;
    /* (ranks x ranks), row i = the sender: bytes rank i sends rank j in the keys'
     * All2All (keys and the counts before them), summed over steps; diagonal 0 */
    uint64_t *keys;
    /* (ranks x ranks): bytes owner i sends requester j in the row exchanges, summed over
     * windows and steps. The gradients travel back the same segments: rank i sends rank j
     * rows[j * ranks + i] bytes of gradients. */
    uint64_t *rows;
    uint64_t *rows_window; /* (windows): the row bytes of window w over all ranks and steps */
    uint64_t segments, pooled; /* remote (window, table, owner) segments, those pooled */
    /* (ranks) the bytes of the exchange buffers each rank's engine sizes for the first
     * batch (docs/engine.md "Memory per rank"; the engine's buffer_bytes less its input
     * slots, counts and dense gradients, which do not depend on the exchange): from the
     * owners' bounds, as make_room sizes them (buffer_bytes), and from the first batch's
     * actual counts: the keys each rank receives, the distinct rows it serves, the most
     * rows it returns in one window (buffer_exact) */
    uint64_t *buffer_bytes, *buffer_exact;
    uint64_t buffer_before; /* the same at the sizing before 0.8: R x the largest batch */
} np_route_stats;

/* The exchanges of `steps` global batches of cfg->batch samples (the global batch at
 * `ranks` ranks: divisible by it) of cfg's training data, as `ranks` ranks would route
 * them: sharding, windows (np_config_windows at `ranks` ranks, whatever cfg->ranks says),
 * clustering, exchange form (rows only under comm nccl, as the engine) and dim from cfg. Each rank's slice is read from its own source, so file
 * data is read `ranks` times. Bad values -> NP_STATUS_BAD_INPUT naming them; data with
 * fewer than `steps` batches -> NP_STATUS_BAD_INPUT saying how many it has. */
NP_NODISCARD NP_API np_status np_route_stats_compute(const np_config *cfg, int ranks, long steps,
                                                     np_route_stats *out, np_error *err);
/* Frees the matrices and zeroes s; NULL-safe. */
NP_API void np_route_stats_free(np_route_stats *s);
/* Sums of a matrix: what rank r sends (recv 0) or receives (recv 1); m is keys or rows. */
NP_API uint64_t np_route_stats_rank(const np_route_stats *s, const uint64_t *m, int r, int recv);

/* ---- platforms and the alpha-beta cost of a collective (runtime/scale/collective.c)
 * flat (host_ranks 1): every rank has its own full-duplex NIC of nic_gbit on a fabric of
 * full bisection. Two-tier: hosts of host_ranks ranks joined by intra_gbit links each
 * way per rank (NVLink-like); a host's ranks share its uplink of host_ranks x nic_gbit
 * into a fabric oversubscribed `oversub` times (1: full bisection). latency_us is the
 * per-message latency between hosts, intra_latency_us within one. */
typedef enum np_a2a_algo {
    NP_A2A_DIRECT,   /* every message posted at once (Open MPI's libnbc for the engine's
                        MPI_Ialltoallv, NCCL's send/recv groups): one latency, then a
                        per-message overhead for each peer */
    NP_A2A_PAIRWISE, /* ranks - 1 rounds, each a latency and a message */
    NP_A2A_BRUCK,    /* ceil(log2 ranks) rounds; each byte travels about half of them */
    NP_A2A_HIER,     /* the engine's two-level form (--a2a hier): within the host (the
                        blocks' sizes, then the blocks, each every message at once), then
                        between hosts among the ranks of equal index; added in 0.8 */
} np_a2a_algo;

typedef enum np_allreduce_algo {
    NP_ALLREDUCE_DIRECT, /* a reduce-scatter and an all-gather, each every message at once
                            (the engine's: np_xchg_allreduce_rs; one all-gather at 2 ranks) */
    NP_ALLREDUCE_RING,   /* 2 (ranks - 1) steps of a latency and a message */
    NP_ALLREDUCE_RHD,    /* recursive halving then doubling: 2 ceil(log2 ranks) steps */
} np_allreduce_algo;

typedef struct np_platform {
    int ranks;
    double nic_gbit, latency_us;
    int host_ranks;
    double intra_gbit, intra_latency_us, oversub;
    np_a2a_algo algo;
    double msg_us; /* a message's own overhead at the sender (LogP's o), microseconds */
    np_allreduce_algo allreduce;
} np_platform;

/* Checks p; NP_STATUS_BAD_INPUT naming the bad field. */
NP_NODISCARD NP_API np_status np_platform_check(const np_platform *p, np_error *err);

/* The time in microseconds of an All2All whose rank i sends rank j bytes[i * ranks + j]
 * (the diagonal is ignored): the latency part of p->algo (np_alltoall_latency_us) and the
 * bytes at the busiest bottleneck's rate (times np_alltoall_bytes_factor): a rank's NIC (the
 * larger of what it sends and receives), within hosts a rank's intra-host link, between
 * hosts a host's uplink and the fabric's bisection (docs/scale.md "The alpha-beta model"). */
NP_API double np_alltoall_us(const np_platform *p, const double *bytes);
/* The same for every pair sending `each` bytes (a reduce-scatter's or an all-gather's
 * step: the dense all-reduce is two of them, as the engine does it above 2 ranks). */
NP_API double np_alltoall_uniform_us(const np_platform *p, double each);
/* An All2All's latency part on p: direct, the longest latency once and ranks - 1 message
 * overheads; pairwise, ranks - 1 rounds of a latency and a message (on two tiers the
 * host_ranks - 1 rounds within a host take the intra-host latency); Bruck, ceil(log2
 * ranks) rounds of the longest latency and a message; hier, twice the intra-host latency
 * and host_ranks - 1 messages, then the latency once and hosts - 1 messages. 0 on one
 * rank. */
NP_API double np_alltoall_latency_us(const np_platform *p);
/* How many times the algorithm moves each byte over the bottleneck: 1, or for Bruck half
 * its rounds (at least 1). */
NP_API double np_alltoall_bytes_factor(const np_platform *p);
/* The dense all-reduce's latency part on p by p->allreduce (its bytes: a reduce-scatter and
 * an all-gather of 1/ranks each, 2 (ranks - 1) / ranks of the floats a rank, whatever the
 * algorithm; np_allreduce_bytes_us). direct under --a2a hier: the two-level All2All's part
 * and the all-gather's (one latency across and one within, no sizes). 0 on one rank. */
NP_API double np_allreduce_latency_us(const np_platform *p);
/* The dense all-reduce's bandwidth part on p with `each` bytes a pair (a rank's floats x 4 /
 * ranks): the engine's reduce-scatter and all-gather as two uniform exchanges; under
 * hier the all-gather's bytes cross between hosts once a slice a host (ranks_a_host
 * times fewer) and within the host after. Microseconds; 0 on one rank. Added in 0.8. */
NP_API double np_allreduce_bytes_us(const np_platform *p, double each);

/* ---- the replay of a traced step at another scale (runtime/scale/replay.c) */
typedef enum np_coll {
    NP_COLL_KEYS,      /* the keys' All2All, once a batch (exchange_keys) */
    NP_COLL_ROWS,      /* a window's rows (exchange_emb) */
    NP_COLL_GRADS,     /* a window's row gradients (exchange_grad) */
    NP_COLL_ALLREDUCE, /* all the layers' dense all-reduces of a batch together */
    NP_COLL_KINDS
} np_coll;

typedef struct np_replay_cfg {
    /* the task graph: one rank's tasks of a traced run, its recorded data-flow edges and
     * the order each worker ran them in (a run of 2 ranks or more has the exchanges'
     * communication worker and the all-reduces that N ranks run) */
    const np_trace_t *graph;
    int rank;
    /* compute durations: the median of each (kind, layer, chunk, window) in this trace, a
     * one-rank run without contention; NULL: the graph's own durations */
    const np_trace_t *compute;
    double device_speed; /* compute durations are divided by it (1: this machine) */
    /* the wire time of each collective at the target, microseconds: the keys' All2All of
     * a batch, the rows and the gradients of one window, the dense all-reduce of a whole
     * batch (each layer's all-reduce takes its byte share of the bandwidth part, plus
     * allreduce_latency_us) */
    double wire_us[NP_COLL_KINDS];
    double allreduce_latency_us;
    /* when the collectives' own part comes from the graph (compute == NULL, or
     * collectives_from_graph): the graph run's link rate in Gbit/s (its "link_gbit" fact),
     * so that their recorded wire time (bytes / rate) is taken out before the target's is
     * added; 0: the graph's collectives had no wire. Their waits for the peers stay: the
     * calibration run's stragglers (docs/scale.md "What the projection leaves out") */
    double graph_link_gbit;
    long from_batch, to_batch; /* the steady-state batches measured (to < 0: the last) */
    /* added to the driver's agreement of each step with the other ranks (the recorded
     * one is kept): the control channel's all-reduces at the target */
    double driver_sync_us;
    /* 1: no runtime delay before each task (by default the median per kind of the
     * calibration trace's: the compute trace, else the graph) */
    int no_gaps;
    /* 1: with a compute trace, the collectives' own part (packing, MPI's software, the
     * copies, the waits for peers) and the runtime's delays from the graph all the same:
     * its recorded time less its wire time at graph_link_gbit, a multi-rank run's
     * (docs/scale.md "What is calibrated from what") */
    int collectives_from_graph;
    /* ranks sharing a machine's cores (a check on a small machine): the cores a rank's
     * compute workers get between them; compute durations and the runtime's delays are
     * stretched by compute workers / cores_per_rank when that is above 1 (not the delays
     * taken from the graph under collectives_from_graph: its ranks shared the cores when
     * they were measured). 0: no sharing. */
    double cores_per_rank;
} np_replay_cfg;

typedef struct np_replay_out {
    double step_us;             /* steady-state step time */
    double exchange_us;         /* per step: the union of the row and gradient exchanges and
                                   the dense all-reduce */
    double exchange_exposed_us; /* per step: their part with no dense compute running */
    double lookup_exposed_us;   /* per step: the lookup's exposed time (keys included) */
    long tasks;                 /* tasks replayed */
    long unordered;             /* tasks replayed before their step's submit call was known
                                   (the recorded order broke the driver's): 0 normally */
    np_trace_t *trace;          /* the replayed tasks as a trace (free it) */
} np_replay_out;

/* Replays cfg->graph's rank with the durations and wire times of cfg: each task starts
 * when the tasks it reads from have ended and its worker is free, in the order the worker
 * ran them (docs/scale.md "The replay"). Every rank runs the same graph with the same
 * durations, and a collective ends on all ranks at once, so one rank stands for all; the
 * per-peer skew of the bytes is in the wire times. A graph without tasks, or batches
 * outside it -> NP_STATUS_BAD_INPUT. */
NP_NODISCARD NP_API np_status np_replay(const np_replay_cfg *cfg, np_replay_out *out,
                                        np_error *err);
/* The dense floats the all-reduces of batch `batch` on `rank` of a traced run carry, from
 * their bytes: at R ranks (its "ranks" fact) each sends 2 (R - 1) / R of them, all of them
 * at 2 (engine: np_xchg_allreduce_rs). 0 for a one-rank trace (no all-reduce). */
NP_API double np_replay_dense_floats(const np_trace_t *graph, int rank, long batch);

#ifdef __cplusplus
}
#endif
#endif
