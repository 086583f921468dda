/* MPI backend of comm.h. Collectives are non-blocking calls polled with sched_yield(),
 * then with sleeps when a wait is long (runtime/core/backoff.h): on an oversubscribed machine a
 * blocking collective busy-polls and starves the ranks it waits for. NP_LINK_GBIT paces the data channel to emulate a link (below). Not here: what
 * is exchanged (codelets/exchange.c) or when (runtime/engine/). */
#include <errno.h>
#include <sys/prctl.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/comm/mpi_impl.h"
#include "runtime/core/backoff.h"
#include "runtime/core/util.h"


/* An emulated link (bench/README.md "An emulated link"): with NP_LINK_GBIT=G, once a
 * data-channel collective has completed (over shared memory: just after the last rank
 * joined it), the calling thread sleeps for its bytes to or from other hosts (the larger
 * of the two: a full-duplex NIC per rank) at G Gbit/s, as if they only then crossed the
 * wire; with NP_LINK_US=U, also U microseconds for each message it exchanged with another
 * host (flat: one a rank there with a block either way; two levels: one a host), the
 * latency of each message, paid one after another. Every rank is its own host
 * unless hosts were declared (--ranks-per-host) or the All2All goes in two levels, whose
 * hosts are the topology's (np_comm_set_topology). The host's cores stay free meanwhile,
 * as with a NIC that moves the bytes by itself (a shaped TCP loopback on the same cores is
 * not that). Pessimistic by the memcpy's own time. The control channel (agreements,
 * checkpoints, the final gather) is not paced, nor are a failed collective or NCCL's. Off
 * unless set. */
static np_status link_env(const char *name, double lo, const char *what, double *out,
                          np_error *err) {
    const char *v = getenv(name);
    if (!v) return NP_OK;
    char *end;
    double g = strtod(v, &end);
    if (end == v || *end || !(g >= lo) || !isfinite(g) || g > 1e9)
        return np_err(err, NP_STATUS_BAD_INPUT, "%s: '%s' is not a %s", name, v, what);
    *out = g;
    return NP_OK;
}

static np_status link_rate(np_comm *c, np_error *err) {
    double g = 0;
    /* 1e-6: a sleep stays in range */
    np_status st = link_env("NP_LINK_GBIT", 1e-6, "link rate in Gbit/s (1e-6 or more)", &g, err);
    if (!st)
        st = link_env("NP_LINK_US", 0, "message latency in microseconds (0 or more)",
                      &c->link_msg_us, err);
    c->link_bytes_s = g * 1e9 / 8;
    return st;
}

int np_mpi_link_host(const np_comm *c, int q) {
    return c->topo.set && (c->topo.pseudo || c->topo.hier) ? c->topo.host_of[q] : q;
}

/* Sleeps for a collective's bytes and messages on the link, once it has completed (rc 0).
 * The calling thread's timer slack is cut to 1 us first (Linux's default, 50 us, overshot
 * every sleep: 85 us on a 64 KB All2All at 2 Gbit/s, a third of its 262 us). */
static void link_pace(const np_comm *c, np_channel ch, int rc, double sent, double recvd,
                      int msgs) {
    if (rc || ch != NP_CHAN_DATA || (c->link_bytes_s <= 0 && c->link_msg_us <= 0)) return;
    double left = (c->link_bytes_s > 0 ? (sent > recvd ? sent : recvd) / c->link_bytes_s : 0) +
                  msgs * c->link_msg_us * 1e-6;
    if (left <= 0) return;
    static __thread int slack_set;
    if (!slack_set) {
        slack_set = 1;
        prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL); /* best effort */
    }
    struct timespec ts = {(time_t)left, (long)((left - floor(left)) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

/* What the calling thread's data collectives spent posting (the MPI_I* call) and pacing
 * (the emulated link's wire time, NP_LINK_GBIT) since np_comm_take_phases last took them;
 * the rest of a collective is MPI's wait (the peers, the transfer). */
_Thread_local double np_mpi_phase_post, np_mpi_phase_pace;

void np_mpi_pace(const np_comm *c, np_channel ch, int rc, double sent, double recvd, int msgs) {
    double t0 = np_backoff_now_us();
    link_pace(c, ch, rc, sent, recvd, msgs);
    np_mpi_phase_pace += np_backoff_now_us() - t0;
}

static np_comm *world;

np_comm *np_comm_world(void) {
    return world;
}

/* mpirun (Open MPI, MPICH/hydra, Slurm's PMI) leaves one of these in the environment. */
static int launched_by_mpirun(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

np_status np_comm_init(int *argc, char ***argv, np_comm **out, np_error *err) {
    *out = NULL;
    np_comm *c = calloc(1, sizeof *c);
    if (!c) return np_err(err, NP_STATUS_NO_MEMORY, "out of memory (comm)");
    c->size = c->local_size = c->nodes = 1;
    c->topo.node = c->topo.cross = MPI_COMM_NULL;
    np_status st = link_rate(c, err);
    if (st) {
        free(c);
        return st;
    }
    if (!launched_by_mpirun()) {
        *out = world = c;
        return NP_OK;
    }
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        free(c);
        return np_err(err, NP_STATUS_INTERNAL, "MPI_Init_thread failed");
    }
    c->mpi = 1;
    /* errors come back as codes so a failing rank can say what happened before aborting */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    if (provided < MPI_THREAD_MULTIPLE) {
        np_comm_free(c);
        return np_err(err, NP_STATUS_UNSUPPORTED,
                      "MPI provides thread level %d, nestpipe needs MPI_THREAD_MULTIPLE", provided);
    }
    for (int i = 0; i < 2; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &c->chan[i]);
        MPI_Comm_set_errhandler(c->chan[i], MPI_ERRORS_RETURN);
    }
    /* the ranks on this host (they share its cores and memory), and the hosts in all */
    MPI_Comm host;
    int leader = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL,
                            &host) == MPI_SUCCESS) {
        MPI_Comm_rank(host, &c->local_rank);
        MPI_Comm_size(host, &c->local_size);
        MPI_Comm_free(&host);
        leader = c->local_rank == 0;
        if (MPI_Allreduce(&leader, &c->nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) !=
            MPI_SUCCESS)
            c->nodes = 1;
    }
    *out = world = c;
    return NP_OK;
}

void np_comm_free(np_comm *c) {
    if (!c) return;
    if (c == world) world = NULL;
    if (c->mpi) {
        np_mpi_topo_free(c);
        for (int i = 0; i < 2; i++)
            if (c->chan[i] != MPI_COMM_NULL && c->chan[i]) MPI_Comm_free(&c->chan[i]);
        MPI_Finalize();
    }
    free(c);
}

void np_comm_abort(np_comm *c, int code) {
    fflush(stdout);
    fflush(stderr);
    if (c && c->mpi) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

int np_comm_rank(const np_comm *c) {
    return c ? c->rank : 0;
}

void np_comm_host(const np_comm *c, int *local_rank, int *local_size, int *nodes) {
    *local_rank = c ? c->local_rank : 0;
    *local_size = c ? c->local_size : 1;
    *nodes = c ? c->nodes : 1;
}

int np_comm_size(const np_comm *c) {
    return c ? c->size : 1;
}

int np_comm_is_mpi(const np_comm *c) {
    return c && c->mpi;
}

/* Completes a request, yielding the core between polls, then sleeping when the wait is
 * long (a stalled peer: runtime/core/backoff.h). */
int np_mpi_wait(MPI_Request *req) {
    int done = 0;
    double start = np_backoff_now_us();
    while (!done) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
        if (!done) np_backoff_pause(start);
    }
    return 0;
}

void np_comm_take_phases(double *post_us, double *pace_us) {
    *post_us = np_mpi_phase_post;
    *pace_us = np_mpi_phase_pace;
    np_mpi_phase_post = np_mpi_phase_pace = 0;
}

/* A contiguous datatype of `elem` bytes, so counts stay element counts (int range). */
int np_mpi_elem_type(size_t elem, MPI_Datatype *t) {
    if (elem > INT_MAX) return -1;
    if (MPI_Type_contiguous((int)elem, MPI_BYTE, t) != MPI_SUCCESS) return -1;
    return MPI_Type_commit(t) == MPI_SUCCESS ? 0 : -1;
}

int np_mpi_counts(const int64_t *in, int n, int *counts, int *displs) {
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (in[i] < 0 || in[i] > INT_MAX || off > INT_MAX) return -1;
        counts[i] = (int)in[i];
        displs[i] = (int)off;
        off += in[i];
    }
    return 0;
}

/* Elements of counts[] (NULL: `per` for every rank) to or from ranks on other hosts than
 * this one's, as the emulated link sees them (np_mpi_link_host). */
static double off_host(const np_comm *c, const int64_t *counts, double per) {
    double s = 0;
    int me = np_mpi_link_host(c, c->rank);
    for (int q = 0; q < c->size; q++)
        if (np_mpi_link_host(c, q) != me) s += counts ? (double)counts[q] : per;
    return s;
}

/* The ranks on other hosts a collective exchanges messages with: those with a block either
 * way (a and b NULL: all of them). */
static int off_peers(const np_comm *c, const int64_t *a, const int64_t *b) {
    int n = 0, me = np_mpi_link_host(c, c->rank);
    for (int q = 0; q < c->size; q++)
        n += np_mpi_link_host(c, q) != me && (!a || a[q] || b[q]);
    return n;
}

/* The data channel's All2Alls go in two levels when the topology says so (mpi_hier.c). */
static int two_level(const np_comm *c, np_channel ch) {
    return ch == NP_CHAN_DATA && c->topo.set && c->topo.hier;
}

int np_comm_alltoall_i64(np_comm *c, np_channel ch, const int64_t *send, int64_t *recv,
                         int per_rank) {
    if (!c || !c->mpi) {
        memcpy(recv, send, (size_t)per_rank * sizeof(int64_t));
        return 0;
    }
    if (two_level(c, ch))
        return per_rank < 0 ? -1
                            : np_mpi_hier_alltoallv(c, send, NULL, recv, NULL, (size_t)per_rank,
                                                    sizeof(int64_t));
    MPI_Request req;
    double bytes = off_host(c, NULL, (double)per_rank * sizeof(int64_t));
    double t0 = np_backoff_now_us();
    if (MPI_Ialltoall(send, per_rank, MPI_INT64_T, recv, per_rank, MPI_INT64_T, c->chan[ch],
                      &req) != MPI_SUCCESS)
        return -1;
    np_mpi_phase_post += np_backoff_now_us() - t0;
    int rc = np_mpi_wait(&req);
    np_mpi_pace(c, ch, rc, bytes, bytes, off_peers(c, NULL, NULL));
    return rc;
}

int np_comm_alltoallv(np_comm *c, np_channel ch, const void *send, const int64_t *scounts,
                      void *recv, const int64_t *rcounts, size_t elem) {
    if (!c || !c->mpi) {
        memcpy(recv, send, (size_t)scounts[0] * elem);
        return 0;
    }
    if (two_level(c, ch)) return np_mpi_hier_alltoallv(c, send, scounts, recv, rcounts, 0, elem);
    int n = c->size, rc = -1;
    int *buf = malloc(4 * (size_t)n * sizeof(int));
    MPI_Datatype t;
    if (!buf) return -1;
    if (!np_mpi_counts(scounts, n, buf, buf + n) &&
        !np_mpi_counts(rcounts, n, buf + 2 * n, buf + 3 * n) && !np_mpi_elem_type(elem, &t)) {
        MPI_Request req;
        double t0 = np_backoff_now_us();
        int posted = MPI_Ialltoallv(send, buf, buf + n, t, recv, buf + 2 * n, buf + 3 * n, t,
                                    c->chan[ch], &req) == MPI_SUCCESS;
        np_mpi_phase_post += np_backoff_now_us() - t0;
        if (posted) rc = np_mpi_wait(&req);
        MPI_Type_free(&t);
        np_mpi_pace(c, ch, rc, off_host(c, scounts, 0) * (double)elem,
                    off_host(c, rcounts, 0) * (double)elem, off_peers(c, scounts, rcounts));
    }
    free(buf);
    return rc;
}

int np_comm_allgather(np_comm *c, np_channel ch, const void *send, void *recv, size_t n,
                      size_t elem) {
    if (!c || !c->mpi) {
        memcpy(recv, send, n * elem);
        return 0;
    }
    if (two_level(c, ch)) { /* in place: this rank's part first */
        int64_t *counts = malloc((size_t)c->size * sizeof *counts);
        if (!counts) return -1;
        for (int q = 0; q < c->size; q++)
            counts[q] = (int64_t)n;
        memcpy((char *)recv + (size_t)c->rank * n * elem, send, n * elem);
        int rc = np_mpi_hier_allgatherv(c, recv, counts, elem);
        free(counts);
        return rc;
    }
    MPI_Datatype t;
    if (n > INT_MAX || np_mpi_elem_type(elem, &t)) return -1;
    MPI_Request req;
    int rc = -1;
    double bytes = off_host(c, NULL, (double)n * (double)elem), t0 = np_backoff_now_us();
    int posted = MPI_Iallgather(send, (int)n, t, recv, (int)n, t, c->chan[ch], &req) == MPI_SUCCESS;
    np_mpi_phase_post += np_backoff_now_us() - t0;
    if (posted) rc = np_mpi_wait(&req);
    MPI_Type_free(&t);
    np_mpi_pace(c, ch, rc, bytes, bytes, off_peers(c, NULL, NULL));
    return rc;
}

int np_comm_allgatherv_inplace(np_comm *c, np_channel ch, void *buf, const int64_t *counts,
                               size_t elem) {
    if (!c || !c->mpi) return 0; /* one rank: its part is in place already */
    if (two_level(c, ch)) return np_mpi_hier_allgatherv(c, buf, counts, elem);
    int n = c->size, rc = -1;
    int *cd = malloc(2 * (size_t)n * sizeof(int));
    MPI_Datatype t;
    if (!cd) return -1;
    if (!np_mpi_counts(counts, n, cd, cd + n) && !np_mpi_elem_type(elem, &t)) {
        MPI_Request req;
        double t0 = np_backoff_now_us();
        int posted = MPI_Iallgatherv(MPI_IN_PLACE, 0, t, buf, cd, cd + n, t, c->chan[ch],
                                     &req) == MPI_SUCCESS;
        np_mpi_phase_post += np_backoff_now_us() - t0;
        if (posted) rc = np_mpi_wait(&req);
        MPI_Type_free(&t);
        np_mpi_pace(c, ch, rc, off_host(c, NULL, (double)counts[c->rank]) * (double)elem,
                    off_host(c, counts, 0) * (double)elem, off_peers(c, NULL, NULL));
    }
    free(cd);
    return rc;
}

int np_comm_allreduce_i64(np_comm *c, np_channel ch, int64_t *inout, int op_max) {
    if (!c || !c->mpi) return 0;
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, inout, 1, MPI_INT64_T, op_max ? MPI_MAX : MPI_SUM, c->chan[ch],
                       &req) != MPI_SUCCESS)
        return -1;
    return np_mpi_wait(&req);
}

int np_comm_allreduce_u64_max(np_comm *c, np_channel ch, uint64_t *inout, int n) {
    if (!c || !c->mpi) return 0;
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, inout, n, MPI_UINT64_T, MPI_MAX, c->chan[ch], &req) !=
        MPI_SUCCESS)
        return -1;
    return np_mpi_wait(&req);
}

int np_comm_reduce_scatter_i64(np_comm *c, np_channel ch, const int64_t *send, int64_t *recv,
                               int per_rank) {
    if (!c || !c->mpi) {
        memcpy(recv, send, (size_t)per_rank * sizeof *recv);
        return 0;
    }
    MPI_Request req;
    if (MPI_Ireduce_scatter_block(send, recv, per_rank, MPI_INT64_T, MPI_SUM, c->chan[ch], &req) !=
        MPI_SUCCESS)
        return -1;
    return np_mpi_wait(&req);
}

int np_comm_allreduce_f64_sum(np_comm *c, np_channel ch, double *inout, int n) {
    if (!c || !c->mpi) return 0;
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, inout, n, MPI_DOUBLE, MPI_SUM, c->chan[ch], &req) !=
        MPI_SUCCESS)
        return -1;
    return np_mpi_wait(&req);
}

int np_comm_gatherv(np_comm *c, np_channel ch, const void *send, int64_t n, void *recv,
                    const int64_t *counts, size_t elem) {
    if (!c || !c->mpi) {
        memcpy(recv, send, (size_t)n * elem);
        return 0;
    }
    int size = c->size, rc = -1;
    int *buf = malloc(2 * (size_t)size * sizeof(int));
    MPI_Datatype t;
    if (!buf || n > INT_MAX || np_mpi_elem_type(elem, &t)) {
        free(buf);
        return -1;
    }
    if (c->rank != 0 || !np_mpi_counts(counts, size, buf, buf + size)) {
        MPI_Request req;
        if (MPI_Igatherv(send, (int)n, t, recv, buf, buf + size, t, 0, c->chan[ch], &req) ==
            MPI_SUCCESS)
            rc = np_mpi_wait(&req);
    }
    MPI_Type_free(&t);
    free(buf);
    return rc;
}

int np_comm_barrier(np_comm *c, np_channel ch) {
    if (!c || !c->mpi) return 0;
    MPI_Request req;
    if (MPI_Ibarrier(c->chan[ch], &req) != MPI_SUCCESS) return -1;
    return np_mpi_wait(&req);
}

int np_comm_bcast(np_comm *c, np_channel ch, void *buf, size_t bytes, int root) {
    if (!c || !c->mpi) return 0;
    if (bytes > INT_MAX) return -1;
    MPI_Request req;
    if (MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, c->chan[ch], &req) != MPI_SUCCESS) return -1;
    return np_mpi_wait(&req);
}

/* ---------------------------------------------------------------- watchdog
 * A rank that stops making progress (a stalled or stopped process, a node gone quiet)
 * would leave every other rank polling its collectives forever. Each rank runs a thread
 * that exchanges heartbeats, on a communicator of its own, with its neighbours in a binary
 * tree of the ranks (parent (p - 1) / 2, children 2p + 1 and 2p + 2): the driver's step
 * and whether it is waiting for the others. So each rank hears at most three others,
 * whatever the rank count (a star around rank 0 made rank 0's work O(R) a tick). A
 * neighbour that sends nothing for `timeout` seconds, or that is busy at the same step for
 * `timeout` seconds while this rank waits, is named and the job aborted; a stalled rank
 * always has a neighbour, and a busy one is waited for by all. Stopping is a handshake
 * along the tree, so no message is left unmatched: a rank says "bye" to its parent once it
 * stops and its children have said bye; the root, once its children have, says bye to
 * them, and each rank passes the bye down and ends. */

enum { WD_TAG = 7411 };

typedef struct wd_peer {
    int rank;          /* the neighbour */
    int64_t msg[3];    /* received: step, waiting, bye */
    int64_t out[3];    /* being sent to it */
    MPI_Request sreq;  /* the send in flight, MPI_REQUEST_NULL when none */
    double heard;      /* when its last message came */
    double changed;    /* when its step or waiting last changed */
    int64_t step;      /* as last heard */
    int waiting, bye;  /* as last heard; bye: it stopped (its subtree, or the whole job) */
    int sent_bye;      /* this rank's last message to it went */
} wd_peer;

struct np_watchdog {
    np_comm *c;
    MPI_Comm comm;
    double timeout, tick;
    pthread_t th;
    int stop;          /* atomic: the driver asks the thread to finish */
    int64_t step;      /* atomic: the driver's step */
    int waiting;       /* atomic: the driver waits for the other ranks */
    wd_peer peer[3];   /* the tree neighbours: the parent first (none for rank 0), children */
    int npeer, parent; /* parent: 1 when peer[0] is the parent */
};

static double wd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sends this rank's state to neighbour q unless the previous send is still in flight;
 * bye: its last message to q, which must go. */
static void wd_send(struct np_watchdog *w, wd_peer *q, int bye) {
    int done = 1;
    if (q->sent_bye) return;
    if (q->sreq != MPI_REQUEST_NULL) MPI_Test(&q->sreq, &done, MPI_STATUS_IGNORE);
    while (bye && !done) { /* the bye must go: the last heartbeat is matched soon */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        MPI_Test(&q->sreq, &done, MPI_STATUS_IGNORE);
    }
    if (!done) return;
    q->out[0] = __atomic_load_n(&w->step, __ATOMIC_RELAXED);
    q->out[1] = __atomic_load_n(&w->waiting, __ATOMIC_RELAXED);
    q->out[2] = bye;
    q->sent_bye = bye;
    MPI_Isend(q->out, 3, MPI_INT64_T, q->rank, WD_TAG, w->comm, &q->sreq);
}

static void wd_receive(struct np_watchdog *w, double now) {
    for (;;) {
        int flag = 0;
        MPI_Status s;
        if (MPI_Iprobe(MPI_ANY_SOURCE, WD_TAG, w->comm, &flag, &s) != MPI_SUCCESS || !flag) return;
        wd_peer *q = NULL;
        for (int i = 0; i < w->npeer; i++)
            if (w->peer[i].rank == s.MPI_SOURCE) q = &w->peer[i];
        int64_t junk[3];
        MPI_Recv(q ? q->msg : junk, 3, MPI_INT64_T, s.MPI_SOURCE, WD_TAG, w->comm,
                 MPI_STATUS_IGNORE);
        if (!q) continue; /* not a neighbour: cannot happen */
        q->heard = now;
        if (q->msg[0] != q->step || (int)q->msg[1] != q->waiting) q->changed = now;
        q->step = q->msg[0];
        q->waiting = (int)q->msg[1];
        q->bye |= q->msg[2] != 0;
    }
}

/* Names a silent neighbour and ends the job; returns when every neighbour is alive. */
static void wd_diagnose(struct np_watchdog *w, double now, double my_wait_since) {
    np_comm *c = w->c;
    for (int i = 0; i < w->npeer; i++) {
        wd_peer *q = &w->peer[i];
        if (q->bye) continue;
        const char *why = NULL;
        if (now - q->heard > w->timeout)
            why = "has sent no heartbeat for %.0f s (its process is stopped or its node "
                  "unreachable), last at step %lld";
        else if (!q->waiting && now - q->changed > w->timeout && my_wait_since > 0 &&
                 now - my_wait_since > w->timeout)
            why = "has made no progress for %.0f s at step %lld while the others wait for it";
        if (!why) continue;
        char what[160];
        snprintf(what, sizeof what, why, now - (now - q->heard > w->timeout ? q->heard : q->changed),
                 (long long)q->step + 1);
        fprintf(stderr, "nestpipe: rank %d: rank %d %s; stopping the job (--rank-timeout %g)\n",
                c->rank, q->rank, what, w->timeout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void *wd_main(void *arg) {
    struct np_watchdog *w = arg;
    double start = wd_now(), wait_since = 0;
    for (int i = 0; i < w->npeer; i++)
        w->peer[i].heard = w->peer[i].changed = start;
    wd_peer *up = w->parent ? &w->peer[0] : NULL, *kids = w->peer + w->parent;
    int nkids = w->npeer - w->parent;
    for (;;) {
        double now = wd_now();
        int stop = __atomic_load_n(&w->stop, __ATOMIC_SEQ_CST);
        int waiting = __atomic_load_n(&w->waiting, __ATOMIC_RELAXED);
        wait_since = waiting ? (wait_since > 0 ? wait_since : now) : 0;
        wd_receive(w, now);
        int kids_bye = 1;
        for (int i = 0; i < nkids; i++)
            kids_bye &= kids[i].bye;
        /* up: bye once this rank and its subtree stopped; down: bye once the whole job did
         * (the root: its subtree is the job; the others: the parent said so) */
        if (up) wd_send(w, up, stop && kids_bye);
        int job_done = up ? up->bye && up->sent_bye : stop && kids_bye;
        for (int i = 0; i < nkids; i++)
            wd_send(w, &kids[i], job_done);
        if (job_done) break;
        /* while stopping this rank waits for the others: it counts as waiting */
        wd_diagnose(w, now, stop ? (wait_since > 0 ? wait_since : now) : wait_since);
        double t = w->tick;
        struct timespec ts = {(time_t)t, (long)((t - floor(t)) * 1e9)};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < w->npeer; i++)
        if (w->peer[i].sreq != MPI_REQUEST_NULL) MPI_Wait(&w->peer[i].sreq, MPI_STATUS_IGNORE);
    return NULL;
}

np_status np_comm_watchdog_start(np_comm *c, double timeout_s, np_watchdog **out,
                                 np_error *err) {
    *out = NULL;
    if (!c || !c->mpi || c->size < 2 || !(timeout_s > 0)) return NP_OK;
    struct np_watchdog *w = calloc(1, sizeof *w);
    if (!w) return np_err(err, NP_STATUS_NO_MEMORY, "out of memory (watchdog)");
    w->c = c;
    w->timeout = timeout_s;
    w->tick = timeout_s / 4 < 0.5 ? timeout_s / 4 : 0.5;
    int me = c->rank;
    if (me > 0) w->peer[w->npeer++].rank = (me - 1) / 2;
    w->parent = me > 0;
    for (int k = 1; k <= 2; k++)
        if (2 * (int64_t)me + k < c->size) w->peer[w->npeer++].rank = 2 * me + k;
    for (int i = 0; i < w->npeer; i++)
        w->peer[i].sreq = MPI_REQUEST_NULL;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &w->comm) != MPI_SUCCESS) {
        free(w);
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI_Comm_dup failed (watchdog)", c->rank);
    }
    if (pthread_create(&w->th, NULL, wd_main, w)) {
        MPI_Comm_free(&w->comm);
        free(w);
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: cannot start the watchdog thread",
                      c->rank);
    }
    *out = w;
    return NP_OK;
}

void np_comm_watchdog_progress(np_watchdog *w, long step, int waiting) {
    if (!w) return;
    if (step >= 0) __atomic_store_n(&w->step, (int64_t)step, __ATOMIC_RELAXED);
    __atomic_store_n(&w->waiting, waiting, __ATOMIC_RELAXED);
}

void np_comm_watchdog_stop(np_watchdog *w) {
    if (!w) return;
    __atomic_store_n(&w->stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(w->th, NULL);
    MPI_Comm_free(&w->comm);
    free(w);
}
