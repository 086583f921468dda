/* Private to runtime/comm/mpi*.c: the MPI comm's state and what its collectives share (the
 * polled wait, element datatypes, the emulated link's pacing). Not for other callers: they
 * use comm.h. */
#ifndef NP_COMM_MPI_IMPL_H
#define NP_COMM_MPI_IMPL_H

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/comm/comm.h"

/* --a2a auto goes in two levels on hosts of at least this many ranks (mpi_hier.c) */
#define NP_A2A_AUTO_HOST_RANKS 4

/* The hosts as the data channel's collectives see them (np_comm_set_topology): the real
 * hosts (MPI_COMM_TYPE_SHARED) or pseudo-hosts of G consecutive ranks (--ranks-per-host). */
typedef struct np_topo {
    int set;            /* np_comm_set_topology ran with the a2a and per_host below */
    int a2a, per_host;  /* its arguments */
    int hier;           /* 1: the All2Alls of the data channel go in two levels */
    int pseudo;         /* 1: declared hosts (per_host > 0) */
    int G, H, h, l;     /* ranks a host, hosts, this rank's host and its index there */
    int block;          /* 1: rank (h, l) is world rank h G + l (the receive needs no copy) */
    int *host_of;       /* (size) each world rank's host */
    int *rank_at;       /* (H G) the world rank of (h, l) */
    MPI_Comm node;      /* this host's ranks, by index */
    MPI_Comm cross;     /* the ranks of index l on every host, by host */
    pthread_mutex_t mu; /* guards the scratch (one data collective at a time in practice) */
    char *scratch;
    size_t scratch_n;
} np_topo;

struct np_comm {
    int mpi; /* 1: MPI initialised by us */
    int rank, size;
    int local_rank, local_size, nodes; /* among the ranks sharing this host; hosts */
    MPI_Comm chan[2];    /* NP_CHAN_DATA, NP_CHAN_CTL */
    double link_bytes_s; /* NP_LINK_GBIT in bytes a second; 0: no pacing */
    double link_msg_us;  /* NP_LINK_US: the emulated link's cost of one message */
    np_topo topo;
};

/* What the calling thread's data collectives spent posting and pacing (np_comm_take_phases). */
extern _Thread_local double np_mpi_phase_post, np_mpi_phase_pace;

/* Completes a request, yielding the core between polls (runtime/core/backoff.h). */
int np_mpi_wait(MPI_Request *req);
/* A committed contiguous datatype of `elem` bytes; 0 or -1. */
int np_mpi_elem_type(size_t elem, MPI_Datatype *t);
/* int counts and their displacements from int64 counts; -1 past INT_MAX. */
int np_mpi_counts(const int64_t *in, int n, int *counts, int *displs);
/* The host the emulated link sees rank q on: the topology's under hier or pseudo-hosts, else
 * every rank its own (as before hosts could be declared). */
int np_mpi_link_host(const np_comm *c, int q);
/* Once a data-channel collective completed (rc 0): sleeps for its bytes to and from other
 * hosts and its `msgs` messages there on the emulated link, counted in np_mpi_phase_pace. */
void np_mpi_pace(const np_comm *c, np_channel ch, int rc, double sent, double recvd, int msgs);

/* The two-level All2All (runtime/comm/mpi_hier.c) on the data channel: scounts and rcounts
 * as np_comm_alltoallv's, or both NULL for `per` elements to and from every rank. */
int np_mpi_hier_alltoallv(np_comm *c, const void *send, const int64_t *scounts, void *recv,
                          const int64_t *rcounts, size_t per, size_t elem);
/* The two-level in-place All-gatherv (mpi_hier.c): rank q's counts[q] elements, at its
 * displacement of buf, to every rank's buf. */
int np_mpi_hier_allgatherv(np_comm *c, void *buf, const int64_t *counts, size_t elem);
/* Frees the topology's communicators and tables (before MPI_Finalize). */
void np_mpi_topo_free(np_comm *c);

#endif
