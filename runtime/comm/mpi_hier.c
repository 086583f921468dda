/* The hosts of the job and the two-level All2All over them (docs/scale.md "A two-level
 * All2All"). A flat All2All sends each rank's R - 1 messages over the network; at 1,536
 * ranks their latency, not their bytes, is the step. In two levels (the shape of TorchRec's
 * grid comms and HugeCTR's hierarchical all2all), with G ranks on each of H hosts and rank
 * (h, l) the l-th of host h:
 *   1. within the host, (h, l) gives (h, l') every block it has for the ranks of index l'
 *      on any host (first their sizes, unless fixed), host after host;
 *   2. between hosts, (h, l') gives (h', l') the blocks its host has for (h', l'), from
 *      index 0 to G - 1: the receiver's own rcounts, in world order when ranks are placed
 *      host after host (then straight into recv).
 * G - 1 (twice with sizes) messages within the host and H - 1 across, for R - 1; the bytes
 * cross the network once, as before, and every block arrives whole: the result is the flat
 * All2All's, byte for byte. Not here: the flat collectives and the emulated link
 * (runtime/comm/mpi.c). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/mpi_impl.h"
#include "runtime/core/backoff.h"
#include "runtime/core/util.h"

void np_mpi_topo_free(np_comm *c) {
    np_topo *t = &c->topo;
    if (t->node != MPI_COMM_NULL && t->node) MPI_Comm_free(&t->node);
    if (t->cross != MPI_COMM_NULL && t->cross) MPI_Comm_free(&t->cross);
    free(t->host_of);
    free(t->scratch);
    if (t->set) pthread_mutex_destroy(&t->mu);
    *t = (np_topo){.node = MPI_COMM_NULL, .cross = MPI_COMM_NULL};
}

/* This rank's host and index among the real hosts, G when every host holds G ranks (else 0),
 * and the hosts: host h is the h-th by its first rank. Collective over MPI_COMM_WORLD. */
static int real_hosts(const np_comm *c, int *h, int *l, int *G, int *H) {
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return -1;
    int g = 0, lo = 0, hi = 0, leader, before = 0, rc = 0;
    MPI_Comm_rank(node, l);
    MPI_Comm_size(node, &g);
    leader = *l == 0;
    rc |= MPI_Allreduce(&g, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS;
    rc |= MPI_Allreduce(&g, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS;
    rc |= MPI_Exscan(&leader, &before, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
    if (c->rank == 0) before = 0; /* MPI_Exscan leaves rank 0's undefined */
    rc |= MPI_Bcast(&before, 1, MPI_INT, 0, node) != MPI_SUCCESS; /* the leader's count */
    rc |= MPI_Allreduce(&leader, H, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
    MPI_Comm_free(&node);
    *h = before;
    *G = lo == hi && (int64_t)g * *H == c->size ? g : 0;
    return rc ? -1 : 0;
}

np_status np_comm_set_topology(np_comm *c, int a2a, int per_host, np_error *err) {
    if (!c || !c->mpi || c->size < 2) return NP_OK;
    np_topo *t = &c->topo;
    if (t->set && t->a2a == a2a && t->per_host == per_host) return NP_OK;
    if (per_host > 0 && c->size % per_host)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "ranks-per-host: %d ranks a host do not divide the job's %d ranks",
                      per_host, c->size);
    np_mpi_topo_free(c);
    int h, l, G, H;
    if (per_host > 0) { /* NP_TEST_HOSTS_CYCLIC: rank q on host q mod H (a test's placement) */
        int cyclic = getenv("NP_TEST_HOSTS_CYCLIC") != NULL;
        G = per_host;
        H = c->size / G;
        h = cyclic ? c->rank % H : c->rank / G;
        l = cyclic ? c->rank / H : c->rank % G;
    } else if (real_hosts(c, &h, &l, &G, &H)) {
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI failed finding the hosts", c->rank);
    }
    if (a2a == NP_A2A_MODE_HIER && !G)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "a2a: hier needs the same number of ranks on every host, and these hosts "
                      "hold different numbers; start as many on each, declare pseudo-hosts "
                      "with --ranks-per-host G, or use --a2a flat");
    /* auto: where it cuts each rank's messages between hosts by 4 or more (G - 1 of every G
     * go); with 2 a host it saves one message a collective for two more rounds within
     * the host, which cost more on 4 ranks of 2 pseudo-hosts here (bench/results,
     * 2026-12-04, collectives: hier 0.84-1.07x of flat with the same all-reduce bucket,
     * slower in 3 of 4 settings) */
    int hier = a2a == NP_A2A_MODE_HIER || (a2a == NP_A2A_MODE_AUTO && G >= NP_A2A_AUTO_HOST_RANKS && H > 1);
    int R = c->size, me[2] = {h, l};
    int *pairs = malloc(2 * (size_t)R * sizeof *pairs);
    t->host_of = malloc((2 * (size_t)R + 1) * sizeof *t->host_of);
    if (!pairs || !t->host_of) {
        free(pairs);
        np_mpi_topo_free(c);
        return np_err(err, NP_STATUS_NO_MEMORY, "rank %d: out of memory (hosts)", c->rank);
    }
    int rc = MPI_Allgather(me, 2, MPI_INT, pairs, 2, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS;
    t->rank_at = t->host_of + R;
    t->block = 1;
    for (int q = 0; q < R && G; q++) {
        t->host_of[q] = pairs[2 * q];
        t->rank_at[pairs[2 * q] * G + pairs[2 * q + 1]] = q;
        t->block &= pairs[2 * q] * G + pairs[2 * q + 1] == q;
    }
    free(pairs);
    if (!rc && hier) {
        rc |= MPI_Comm_split(MPI_COMM_WORLD, h, l, &t->node) != MPI_SUCCESS;
        rc |= MPI_Comm_split(MPI_COMM_WORLD, l, h, &t->cross) != MPI_SUCCESS;
        if (!rc) {
            MPI_Comm_set_errhandler(t->node, MPI_ERRORS_RETURN);
            MPI_Comm_set_errhandler(t->cross, MPI_ERRORS_RETURN);
        }
    }
    if (rc) {
        np_mpi_topo_free(c);
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI failed splitting the hosts",
                      c->rank);
    }
    pthread_mutex_init(&t->mu, NULL);
    t->set = 1;
    t->a2a = a2a;
    t->per_host = per_host;
    t->hier = hier;
    t->pseudo = per_host > 0;
    t->G = G;
    t->H = H;
    t->h = h;
    t->l = l;
    return NP_OK;
}

int np_comm_a2a_levels(const np_comm *c, int *per_host) {
    int on = c && c->topo.set && c->topo.hier;
    if (per_host) *per_host = on ? c->topo.G : 1;
    return on ? 2 : 1;
}

/* The scratch of n bytes (t->mu held); NULL when out of memory. */
static char *scratch(np_topo *t, size_t n) {
    if (n > t->scratch_n) {
        char *p = realloc(t->scratch, n);
        if (!p) return NULL;
        t->scratch = p;
        t->scratch_n = n;
    }
    return t->scratch;
}

/* An All2Allv on communicator `comm` of n ranks; counts in elements of datatype `type`. */
static int a2av(const int64_t *sc, const int64_t *rc, int n, const void *send, void *recv,
                MPI_Datatype type, MPI_Comm comm, int *ib) {
    if (np_mpi_counts(sc, n, ib, ib + n) || np_mpi_counts(rc, n, ib + 2 * n, ib + 3 * n))
        return -1;
    MPI_Request req;
    double t0 = np_backoff_now_us();
    int posted = MPI_Ialltoallv(send, ib, ib + n, type, recv, ib + 2 * n, ib + 3 * n, type, comm,
                                &req) == MPI_SUCCESS;
    np_mpi_phase_post += np_backoff_now_us() - t0;
    return posted ? np_mpi_wait(&req) : -1;
}

/* The exchange itself, t->mu held. c1s (G x H): what this rank has for (h, l'), at l' H + h;
 * c1r (G x H): what index l of this host has for (h, my index); cnt (the per-peer counts
 * of the two levels: 2 G for the host, 2 H across). */
static int exchange(np_comm *c, const void *send, const int64_t *scounts, void *recv,
                    const int64_t *rcounts, size_t per, size_t elem, int64_t *work, int *ib,
                    MPI_Datatype type) {
    np_topo *t = &c->topo;
    int G = t->G, H = t->H, R = c->size;
    int64_t *c1s = work, *c1r = c1s + (size_t)G * H, *sdisp = c1r + (size_t)G * H,
            *lv = sdisp + R + 1; /* lv: 2 G + 2 H counts of the two levels */
    sdisp[0] = 0;
    for (int q = 0; q < R; q++)
        sdisp[q + 1] = sdisp[q] + (scounts ? scounts[q] : (int64_t)per);
    for (int j = 0; j < G; j++)
        for (int h = 0; h < H; h++) {
            int q = t->rank_at[h * G + j];
            c1s[j * H + h] = sdisp[q + 1] - sdisp[q];
        }
    /* 1a. the sizes within the host (fixed sizes need none) */
    if (!scounts) {
        for (size_t i = 0; i < (size_t)G * H; i++)
            c1r[i] = (int64_t)per;
    } else {
        MPI_Request req;
        if (MPI_Ialltoall(c1s, H, MPI_INT64_T, c1r, H, MPI_INT64_T, t->node, &req) !=
                MPI_SUCCESS ||
            np_mpi_wait(&req))
            return -1;
    }
    int64_t *s1 = lv, *r1 = lv + G, *s2 = lv + 2 * G, *r2 = s2 + H, nA = 0, nB = 0, nD = 0;
    for (int j = 0; j < G; j++) {
        s1[j] = r1[j] = 0;
        for (int h = 0; h < H; h++) {
            s1[j] += c1s[j * H + h];
            r1[j] += c1r[j * H + h];
        }
        nA += s1[j];
        nB += r1[j];
    }
    for (int h = 0; h < H; h++) {
        s2[h] = r2[h] = 0;
        for (int j = 0; j < G; j++) {
            s2[h] += c1r[j * H + h];
            int q = t->rank_at[h * G + j];
            r2[h] += rcounts ? rcounts[q] : (int64_t)per;
        }
        nD += r2[h];
    }
    size_t bA = (size_t)nA * elem, bB = (size_t)nB * elem, bD = t->block ? 0 : (size_t)nD * elem;
    char *A = scratch(t, bA + 2 * bB + bD + 1), *B = A + bA, *C = B + bB, *D = C + bB;
    if (!A) return -1;
    /* 1b. pack for the host's ranks by index, host after host, and send */
    char *at = A;
    const char *src = send;
    for (int j = 0; j < G; j++)
        for (int h = 0; h < H; h++) {
            int q = t->rank_at[h * G + j];
            size_t n = (size_t)c1s[j * H + h] * elem;
            memcpy(at, src + (size_t)sdisp[q] * elem, n);
            at += n;
        }
    if (a2av(s1, r1, G, A, B, type, t->node, ib)) return -1;
    /* 2. B holds, from each index j, its blocks for (h, my index) host after host: repack
     * by host, index after index (C holds as many bytes as B), and send across */
    int64_t *boff = c1s, off = 0; /* c1s is spent: where each block lies in B */
    for (size_t i = 0; i < (size_t)G * H; i++) {
        boff[i] = off;
        off += c1r[i];
    }
    at = C;
    for (int h = 0; h < H; h++)
        for (int j = 0; j < G; j++) {
            size_t n = (size_t)c1r[j * H + h] * elem;
            memcpy(at, B + (size_t)boff[j * H + h] * elem, n);
            at += n;
        }
    char *out = t->block ? recv : D;
    if (a2av(s2, r2, H, C, out, type, t->cross, ib)) return -1;
    if (!t->block) { /* to recv's world order */
        int64_t *rdisp = sdisp; /* sdisp is spent */
        rdisp[0] = 0;
        for (int q = 0; q < R; q++)
            rdisp[q + 1] = rdisp[q] + (rcounts ? rcounts[q] : (int64_t)per);
        const char *from = D;
        for (int h = 0; h < H; h++)
            for (int j = 0; j < G; j++) {
                int q = t->rank_at[h * G + j];
                size_t n = (size_t)(rdisp[q + 1] - rdisp[q]) * elem;
                memcpy((char *)recv + (size_t)rdisp[q] * elem, from, n);
                from += n;
            }
    }
    /* the emulated link: what crossed to other hosts, in H - 1 messages at most */
    double sent = 0, got = 0;
    int msgs = 0;
    for (int h = 0; h < H; h++) {
        if (h == t->h) continue;
        sent += (double)s2[h] * (double)elem;
        got += (double)r2[h] * (double)elem;
        msgs += s2[h] || r2[h];
    }
    np_mpi_pace(c, NP_CHAN_DATA, 0, sent, got, msgs);
    return 0;
}

int np_mpi_hier_alltoallv(np_comm *c, const void *send, const int64_t *scounts, void *recv,
                          const int64_t *rcounts, size_t per, size_t elem) {
    np_topo *t = &c->topo;
    int G = t->G, H = t->H, R = c->size, m = G > H ? G : H;
    int64_t *work = malloc((2 * (size_t)G * H + (size_t)R + 1 + 2 * (size_t)G + 2 * (size_t)H) *
                           sizeof *work);
    int *ib = malloc(4 * (size_t)m * sizeof *ib);
    MPI_Datatype type;
    int rc = -1;
    if (work && ib && !np_mpi_elem_type(elem, &type)) {
        pthread_mutex_lock(&t->mu);
        rc = exchange(c, send, scounts, recv, rcounts, per, elem, work, ib, type);
        pthread_mutex_unlock(&t->mu);
        MPI_Type_free(&type);
    }
    free(work);
    free(ib);
    return rc;
}

/* An All-gatherv on communicator `comm` of n ranks: this rank's `mine` elements, every
 * rank's counts[q] into recv, rank after rank. */
static int agv(const void *send, int64_t mine, const int64_t *counts, int n, void *recv,
               MPI_Datatype type, MPI_Comm comm, int *ib) {
    if (mine > INT_MAX || np_mpi_counts(counts, n, ib, ib + n)) return -1;
    MPI_Request req;
    double t0 = np_backoff_now_us();
    int posted = MPI_Iallgatherv(send, (int)mine, type, recv, ib, ib + n, type, comm, &req) ==
                 MPI_SUCCESS;
    np_mpi_phase_post += np_backoff_now_us() - t0;
    return posted ? np_mpi_wait(&req) : -1;
}

/* The gather itself, t->mu held: between hosts among the ranks of this index (1), then
 * within the host what each index gathered (2), then to buf's world order. */
static int gather(np_comm *c, char *buf, const int64_t *counts, size_t elem, int64_t *work,
                  int *ib, MPI_Datatype type) {
    np_topo *t = &c->topo;
    int G = t->G, H = t->H, R = c->size;
    int64_t *disp = work, *ch = disp + R + 1, *cj = ch + H, total = 0, mine = 0;
    disp[0] = 0;
    for (int q = 0; q < R; q++)
        disp[q + 1] = disp[q] + counts[q];
    total = disp[R];
    for (int h = 0; h < H; h++) {
        ch[h] = counts[t->rank_at[h * G + t->l]];
        mine += ch[h];
    }
    for (int j = 0; j < G; j++) {
        cj[j] = 0;
        for (int h = 0; h < H; h++)
            cj[j] += counts[t->rank_at[h * G + j]];
    }
    char *S1 = scratch(t, ((size_t)mine + (size_t)total) * elem + 1), *S2 = S1 + (size_t)mine * elem;
    if (!S1) return -1;
    if (agv(buf + (size_t)disp[c->rank] * elem, counts[c->rank], ch, H, S1, type, t->cross, ib) ||
        agv(S1, mine, cj, G, S2, type, t->node, ib))
        return -1;
    const char *from = S2;
    for (int j = 0; j < G; j++)
        for (int h = 0; h < H; h++) {
            int q = t->rank_at[h * G + j];
            size_t n = (size_t)counts[q] * elem;
            if (q != c->rank) memcpy(buf + (size_t)disp[q] * elem, from, n);
            from += n;
        }
    double sent = 0, got = 0;
    int msgs = 0;
    for (int h = 0; h < H; h++) {
        if (h == t->h) continue;
        sent += (double)counts[c->rank] * (double)elem;
        got += (double)ch[h] * (double)elem;
        msgs += counts[c->rank] || ch[h];
    }
    np_mpi_pace(c, NP_CHAN_DATA, 0, sent, got, msgs);
    return 0;
}

int np_mpi_hier_allgatherv(np_comm *c, void *buf, const int64_t *counts, size_t elem) {
    np_topo *t = &c->topo;
    int G = t->G, H = t->H, R = c->size, m = G > H ? G : H;
    int64_t *work = malloc(((size_t)R + 1 + (size_t)G + (size_t)H) * sizeof *work);
    int *ib = malloc(2 * (size_t)m * sizeof *ib);
    MPI_Datatype type;
    int rc = -1;
    if (work && ib && !np_mpi_elem_type(elem, &type)) {
        pthread_mutex_lock(&t->mu);
        rc = gather(c, buf, counts, elem, work, ib, type);
        pthread_mutex_unlock(&t->mu);
        MPI_Type_free(&type);
    }
    free(work);
    free(ib);
    return rc;
}
