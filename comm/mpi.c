/* MPI backend of comm.h. Collectives are non-blocking calls polled with sched_yield():
 * on an oversubscribed machine a blocking collective busy-polls and starves the ranks it
 * waits for. Not here: what is exchanged (codelets/exchange.c) or when (graph/). */
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/util.h"

struct np_comm {
    int mpi; /* 1: MPI initialised by us */
    int rank, size;
    int local_rank, local_size, nodes; /* among the ranks sharing this host; hosts */
    MPI_Comm chan[2]; /* NP_CHAN_DATA, NP_CHAN_CTL */
};

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

/* Completes a request, yielding the core between polls. */
static int wait_yield(MPI_Request *req) {
    int done = 0;
    while (!done) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
        if (!done) sched_yield();
    }
    return 0;
}

/* A contiguous datatype of `elem` bytes, so counts stay element counts (int range). */
static int elem_type(size_t elem, MPI_Datatype *t) {
    if (elem > INT_MAX) return -1;
    if (MPI_Type_contiguous((int)elem, MPI_BYTE, t) != MPI_SUCCESS) return -1;
    return MPI_Type_commit(t) == MPI_SUCCESS ? 0 : -1;
}

static int to_int_counts(const int64_t *in, int n, int *counts, int *displs) {
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (in[i] < 0 || in[i] > INT_MAX || off > INT_MAX) return -1;
        counts[i] = (int)in[i];
        displs[i] = (int)off;
        off += in[i];
    }
    return 0;
}

int np_comm_alltoall_i64(np_comm *c, np_channel ch, const int64_t *send, int64_t *recv,
                         int per_rank) {
    if (!c || !c->mpi) {
        memcpy(recv, send, (size_t)per_rank * sizeof(int64_t));
        return 0;
    }
    MPI_Request req;
    if (MPI_Ialltoall(send, per_rank, MPI_INT64_T, recv, per_rank, MPI_INT64_T, c->chan[ch],
                      &req) != MPI_SUCCESS)
        return -1;
    return wait_yield(&req);
}

int np_comm_alltoallv(np_comm *c, np_channel ch, const void *send, const int64_t *scounts,
                      void *recv, const int64_t *rcounts, size_t elem) {
    if (!c || !c->mpi) {
        memcpy(recv, send, (size_t)scounts[0] * elem);
        return 0;
    }
    int n = c->size, rc = -1;
    int *buf = malloc(4 * (size_t)n * sizeof(int));
    MPI_Datatype t;
    if (!buf) return -1;
    if (!to_int_counts(scounts, n, buf, buf + n) &&
        !to_int_counts(rcounts, n, buf + 2 * n, buf + 3 * n) && !elem_type(elem, &t)) {
        MPI_Request req;
        if (MPI_Ialltoallv(send, buf, buf + n, t, recv, buf + 2 * n, buf + 3 * n, t, c->chan[ch],
                           &req) == MPI_SUCCESS)
            rc = wait_yield(&req);
        MPI_Type_free(&t);
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
    MPI_Datatype t;
    if (n > INT_MAX || elem_type(elem, &t)) return -1;
    MPI_Request req;
    int rc = -1;
    if (MPI_Iallgather(send, (int)n, t, recv, (int)n, t, c->chan[ch], &req) == MPI_SUCCESS)
        rc = wait_yield(&req);
    MPI_Type_free(&t);
    return rc;
}

int np_comm_allgatherv_inplace(np_comm *c, np_channel ch, void *buf, const int64_t *counts,
                               size_t elem) {
    if (!c || !c->mpi) return 0; /* one rank: its part is in place already */
    int n = c->size, rc = -1;
    int *cd = malloc(2 * (size_t)n * sizeof(int));
    MPI_Datatype t;
    if (!cd) return -1;
    if (!to_int_counts(counts, n, cd, cd + n) && !elem_type(elem, &t)) {
        MPI_Request req;
        if (MPI_Iallgatherv(MPI_IN_PLACE, 0, t, buf, cd, cd + n, t, c->chan[ch], &req) ==
            MPI_SUCCESS)
            rc = wait_yield(&req);
        MPI_Type_free(&t);
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
    return wait_yield(&req);
}

int np_comm_allreduce_f64_sum(np_comm *c, np_channel ch, double *inout, int n) {
    if (!c || !c->mpi) return 0;
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, inout, n, MPI_DOUBLE, MPI_SUM, c->chan[ch], &req) !=
        MPI_SUCCESS)
        return -1;
    return wait_yield(&req);
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
    if (!buf || n > INT_MAX || elem_type(elem, &t)) {
        free(buf);
        return -1;
    }
    if (c->rank != 0 || !to_int_counts(counts, size, buf, buf + size)) {
        MPI_Request req;
        if (MPI_Igatherv(send, (int)n, t, recv, buf, buf + size, t, 0, c->chan[ch], &req) ==
            MPI_SUCCESS)
            rc = wait_yield(&req);
    }
    MPI_Type_free(&t);
    free(buf);
    return rc;
}

int np_comm_barrier(np_comm *c, np_channel ch) {
    if (!c || !c->mpi) return 0;
    MPI_Request req;
    if (MPI_Ibarrier(c->chan[ch], &req) != MPI_SUCCESS) return -1;
    return wait_yield(&req);
}
