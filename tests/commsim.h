/* The memcpy transport of test_comm_backend.c: R ranks as threads of one process, each
 * rank's collectives a barrier and copies between the ranks' buffers, behind runtime/comm/backend.h's
 * interface (sim_ops), with a check that the peers agree on counts and element sizes.
 * Header-only, for that one test. */
#ifndef NP_TESTS_COMMSIM_H
#define NP_TESTS_COMMSIM_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "runtime/comm/backend.h"

enum { MAXR = 130 }; /* past 64: the plans, bags and statistics hold any rank count */

typedef struct hub {
    int R;
    pthread_barrier_t bar;
    const void *send[MAXR];
    void *recv[MAXR];
    const int64_t *sc[MAXR], *rc[MAXR];
    int64_t fixed[MAXR][MAXR]; /* alltoall / allgather counts */
    size_t elem[MAXR];
    int bad;              /* a count or element size that does not match its peer's (atomic) */
    uint64_t calls[MAXR]; /* collectives each rank issued */
} hub;

typedef struct sim {
    hub *h;
    int r;
} sim;

static int64_t displ(const int64_t *c, int q) {
    int64_t s = 0;
    for (int i = 0; i < q; i++)
        s += c[i];
    return s;
}

/* Every rank posts its buffers; after the barrier each copies what its peers send it;
 * after the second barrier the buffers may change again. */
static int sim_v(np_backend *b, const void *send, const int64_t *sc, void *recv, const int64_t *rc,
                 size_t elem) {
    sim *s = b->impl;
    hub *h = s->h;
    int r = s->r;
    h->send[r] = send;
    h->recv[r] = recv;
    h->sc[r] = sc;
    h->rc[r] = rc;
    h->elem[r] = elem;
    h->calls[r]++;
    pthread_barrier_wait(&h->bar);
    for (int q = 0; q < h->R; q++) {
        if (h->sc[q][r] != rc[q] || h->elem[q] != elem)
            __atomic_store_n(&h->bad, 1, __ATOMIC_SEQ_CST);
        int64_t n = rc[q] < h->sc[q][r] ? rc[q] : h->sc[q][r];
        if (n > 0)
            memcpy((char *)recv + (size_t)displ(rc, q) * elem,
                   (const char *)h->send[q] + (size_t)displ(h->sc[q], r) * elem, (size_t)n * elem);
    }
    pthread_barrier_wait(&h->bar);
    return 0;
}

static int sim_alltoall(np_backend *b, const void *send, void *recv, size_t per_rank, size_t elem,
                        void *stream) {
    (void)stream;
    sim *s = b->impl;
    int64_t *c = s->h->fixed[s->r];
    for (int q = 0; q < b->size; q++)
        c[q] = (int64_t)per_rank;
    return sim_v(b, send, c, recv, c, elem);
}

static int sim_alltoallv(np_backend *b, const void *send, const int64_t *sc, void *recv,
                         const int64_t *rc, size_t elem, void *stream) {
    (void)stream;
    return sim_v(b, send, sc, recv, rc, elem);
}

/* all-gather: my n to everyone, as an all-to-all of the same block to every rank */
static int sim_allgather(np_backend *b, const void *send, void *recv, size_t n, size_t elem,
                         void *stream) {
    (void)stream;
    sim *s = b->impl;
    hub *h = s->h;
    int r = s->r;
    h->send[r] = send;
    h->elem[r] = elem;
    h->fixed[r][0] = (int64_t)n;
    h->calls[r]++;
    pthread_barrier_wait(&h->bar);
    for (int q = 0; q < h->R; q++) {
        if (h->fixed[q][0] != (int64_t)n || h->elem[q] != elem)
            __atomic_store_n(&h->bad, 1, __ATOMIC_SEQ_CST);
        memcpy((char *)recv + (size_t)q * n * elem, h->send[q], n * elem);
    }
    pthread_barrier_wait(&h->bar);
    return 0;
}

static int sim_allgatherv_inplace(np_backend *b, void *buf, const int64_t *counts, size_t elem,
                                  void *stream) {
    (void)stream;
    sim *s = b->impl;
    hub *h = s->h;
    int r = s->r;
    h->recv[r] = buf;
    h->rc[r] = counts;
    h->elem[r] = elem;
    h->calls[r]++;
    pthread_barrier_wait(&h->bar);
    for (int q = 0; q < h->R; q++) {
        if (memcmp(h->rc[q], counts, (size_t)h->R * sizeof *counts) || h->elem[q] != elem)
            __atomic_store_n(&h->bad, 1, __ATOMIC_SEQ_CST);
        size_t at = (size_t)displ(counts, q) * elem;
        if (q != r)
            memcpy((char *)buf + at, (const char *)h->recv[q] + at, (size_t)counts[q] * elem);
    }
    pthread_barrier_wait(&h->bar);
    return 0;
}

static const np_backend_ops sim_ops = {.name = "sim",
                                       .on_device = 0,
                                       .alltoall = sim_alltoall,
                                       .alltoallv = sim_alltoallv,
                                       .allgather = sim_allgather,
                                       .allgatherv_inplace = sim_allgatherv_inplace};

#endif
