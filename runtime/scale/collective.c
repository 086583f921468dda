/* Platforms and the alpha-beta cost of the collectives (nestpipe/scale.h; docs/scale.md
 * "The alpha-beta model"): the analytic twin of the SimGrid timing, and the model the replay
 * uses when SimGrid is not there. */
#include <math.h>
#include <stdlib.h>

#include "runtime/core/util.h"
#include "nestpipe/scale.h"

np_status np_platform_check(const np_platform *p, np_error *err) {
    if (p->ranks < 1) return np_err(err, NP_STATUS_BAD_INPUT, "platform: ranks %d (1 or more)", p->ranks);
    if (!(p->nic_gbit > 0) || !isfinite(p->nic_gbit))
        return np_err(err, NP_STATUS_BAD_INPUT, "platform: link rate %g Gbit/s (above 0)", p->nic_gbit);
    if (!(p->latency_us >= 0) || !isfinite(p->latency_us))
        return np_err(err, NP_STATUS_BAD_INPUT, "platform: latency %g us (0 or more)", p->latency_us);
    if (p->host_ranks < 1 || p->ranks % p->host_ranks)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "platform: %d ranks a host does not divide %d ranks", p->host_ranks, p->ranks);
    if (p->algo < NP_A2A_DIRECT || p->algo > NP_A2A_HIER || p->allreduce < NP_ALLREDUCE_DIRECT ||
        p->allreduce > NP_ALLREDUCE_RHD || !(p->msg_us >= 0) || !isfinite(p->msg_us))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "platform: an All2All algorithm of the four and a message overhead of 0 or more");
    if (p->host_ranks > 1 && (!(p->intra_gbit > 0) || !isfinite(p->intra_gbit) ||
                              !(p->intra_latency_us >= 0) || !(p->oversub >= 1) || !isfinite(p->oversub)))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "platform: two tiers need an intra-host rate above 0, a latency of 0 or "
                      "more and an oversubscription of 1 or more");
    return NP_OK;
}

static double bytes_s(double gbit) {
    return gbit * 1e9 / 8;
}

static int log2_ceil(int n) {
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

double np_alltoall_latency_us(const np_platform *p) {
    int n = p->ranks, g = p->host_ranks > 1 ? p->host_ranks : 1;
    if (n <= 1) return 0;
    double far = g == 1 || n > g ? p->latency_us : p->intra_latency_us;
    switch (p->algo) {
    case NP_A2A_PAIRWISE:
        if (g == 1) return (n - 1) * (p->latency_us + p->msg_us);
        return (g - 1) * (p->intra_latency_us + p->msg_us) + (n - g) * (p->latency_us + p->msg_us);
    case NP_A2A_BRUCK:
        return log2_ceil(n) * (far + p->msg_us);
    case NP_A2A_HIER: { /* sizes and blocks within the host, then one exchange across */
        int hosts = n / g;
        return (g > 1 ? 2 * (p->intra_latency_us + (g - 1) * p->msg_us) : 0) +
               (hosts > 1 ? p->latency_us + (hosts - 1) * p->msg_us : 0);
    }
    default:
        return far + (n - 1) * p->msg_us;
    }
}

double np_allreduce_latency_us(const np_platform *p) {
    int n = p->ranks;
    if (n <= 1) return 0;
    double far = p->host_ranks > 1 && n <= p->host_ranks ? p->intra_latency_us : p->latency_us;
    switch (p->allreduce) {
    case NP_ALLREDUCE_RING:
        return (n == 2 ? 1 : 2 * (n - 1)) * (far + p->msg_us);
    case NP_ALLREDUCE_RHD:
        return (n == 2 ? 1 : 2 * log2_ceil(n)) * (far + p->msg_us);
    default: { /* the All2All's direct latency part, once at 2 ranks, twice above (the
                * engine's reduce-scatter and all-gather); two-level: the reduce-scatter
                * as the All2All, the all-gather across hosts then within, no sizes */
        np_platform q = *p;
        q.algo = p->algo == NP_A2A_HIER ? NP_A2A_HIER : NP_A2A_DIRECT;
        double a2a = np_alltoall_latency_us(&q);
        if (q.algo != NP_A2A_HIER) return (n == 2 ? 1 : 2) * a2a;
        int g = p->host_ranks > 1 ? p->host_ranks : 1, hosts = n / g;
        double ag = (hosts > 1 ? p->latency_us + (hosts - 1) * p->msg_us : 0) +
                    (g > 1 ? p->intra_latency_us + (g - 1) * p->msg_us : 0);
        return n == 2 ? ag : a2a + ag;
    }
    }
}

double np_allreduce_bytes_us(const np_platform *p, double each) {
    int n = p->ranks, g = p->host_ranks > 1 ? p->host_ranks : 1, hosts = n / g;
    if (n <= 1) return 0;
    double lat = np_alltoall_latency_us(p);
    if (p->algo != NP_A2A_HIER || g == 1) /* as two uniform exchanges, bytes moved once */
        return 2 * (np_alltoall_uniform_us(p, each) - lat) / np_alltoall_bytes_factor(p);
    /* the reduce-scatter as the two-level All2All; the all-gather sends a rank's slice to
     * its index on each other host (its host's uplink, the bisection), then what it
     * gathered, a slice a host, to the G - 1 others within */
    double rs = np_alltoall_uniform_us(p, each) - lat;
    double up = each * (hosts - 1) / bytes_s(p->nic_gbit),
           bis = each * (double)n * (hosts - 1) / 2 / (bytes_s(p->nic_gbit * g) * hosts / 2 / p->oversub),
           in = each * hosts * (g - 1) / bytes_s(p->intra_gbit);
    return rs + ((bis > up ? bis : up) + in) * 1e6;
}

double np_alltoall_bytes_factor(const np_platform *p) {
    if (p->algo != NP_A2A_BRUCK || p->ranks <= 2) return 1;
    double f = log2_ceil(p->ranks) / 2.0;
    return f > 1 ? f : 1;
}

double np_alltoall_us(const np_platform *p, const double *bytes) {
    int n = p->ranks, g = p->host_ranks > 1 ? p->host_ranks : 1, hosts = n / g;
    if (n <= 1) return 0;
    double *sent = calloc(2 * (size_t)n + 2 * (size_t)hosts, sizeof *sent);
    if (!sent) return NAN;
    double *recv = sent + n, *hout = recv + n, *hin = hout + hosts;
    double nic = 0, intra = 0, fabric = 0, hier = p->algo == NP_A2A_HIER && g > 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double b = i == j ? 0 : bytes[(size_t)i * n + j];
            if (hier && i % g != j % g) { /* the first level: to the rank of j's index */
                sent[i] += b;
                recv[i - i % g + j % g] += b;
            }
            if (hier && i / g == j / g) continue; /* within a host: the first level only */
            if (!hier && g > 1 && i / g == j / g) { /* within a host: the intra-host links */
                sent[i] += b;
                recv[j] += b;
                continue;
            }
            hout[i / g] += b;
            hin[j / g] += b;
            fabric += b;
        }
    for (int i = 0; i < n; i++) {
        double m = sent[i] > recv[i] ? sent[i] : recv[i];
        if (m > intra) intra = m;
    }
    for (int h = 0; h < hosts; h++) {
        double m = hout[h] > hin[h] ? hout[h] : hin[h];
        if (m > nic) nic = m;
    }
    free(sent);
    double t;
    if (g == 1) {
        t = nic / bytes_s(p->nic_gbit); /* flat: every rank its own NIC, full bisection */
    } else {
        double up = nic / bytes_s(p->nic_gbit * g), in = intra / bytes_s(p->intra_gbit);
        /* the fabric: half the hosts talk to the other half through its bisection */
        double bis = fabric / 2 / (bytes_s(p->nic_gbit * g) * hosts / 2 / p->oversub);
        t = bis > up ? bis : up;
        /* flat: the host's links and the uplink at once; hier: the first level, then */
        t = hier ? in + t : (in > t ? in : t);
    }
    return np_alltoall_latency_us(p) + t * np_alltoall_bytes_factor(p) * 1e6;
}

double np_alltoall_uniform_us(const np_platform *p, double each) {
    int n = p->ranks, g = p->host_ranks > 1 ? p->host_ranks : 1, hosts = n / g;
    if (n <= 1) return 0;
    double t;
    if (g == 1) {
        t = each * (n - 1) / bytes_s(p->nic_gbit);
    } else {
        int hier = p->algo == NP_A2A_HIER;
        double up = each * (double)g * (n - g) / bytes_s(p->nic_gbit * g),
               in = each * (hier ? n - hosts : g - 1) / bytes_s(p->intra_gbit),
               bis = each * (double)n * (n - g) / 2 / (bytes_s(p->nic_gbit * g) * hosts / 2 / p->oversub);
        t = bis > up ? bis : up;
        t = hier ? in + t : (in > t ? in : t); /* as np_alltoall_us */
    }
    return np_alltoall_latency_us(p) + t * np_alltoall_bytes_factor(p) * 1e6;
}
