/* SimGrid timing of the simulated collectives (apps/simgrid.h). Each All2All is one
 * parallel task over the platform's hosts carrying its byte matrix: SimGrid shares every
 * link among the flows that cross it (a rank's up and down links, split duplex, on a
 * backbone of full bisection) and so gives the time of the busiest path exactly, once a
 * latency. SimGrid keeps one platform per process: a child process per call.
 *
 * libsimgrid is loaded at run time (dlopen, its symbols kept local), never linked: it
 * exports SMPI's MPI_Init and the rest of MPI, which would take the place of Open MPI's in
 * the nestpipe command and break every mpirun. So no build needs SimGrid, and a machine
 * with Debian's libsimgrid3.32 (or libsimgrid-dev) times the collectives on it. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "simgrid.h"

/* The few functions of SimGrid's C API this needs (simgrid/engine.h, actor.h, host.h of
 * 3.32), found by name; hosts and actors are opaque pointers. */
typedef void *sg_host;
static struct {
    void *lib;
    void (*init)(int *, char **);
    void (*load_platform)(const char *);
    void *(*actor_create)(const char *, sg_host, void (*)(int, char **), int, const char *const *);
    void (*run)(void);
    double (*clock)(void);
    sg_host (*host_by_name)(const char *);
    void (*parallel_execute)(int, sg_host *, double *, double *);
} sg;

static int sg_load(void) {
    if (sg.lib) return 0;
    static const char *names[] = {"libsimgrid.so.3.32", "libsimgrid.so", NULL};
    for (int i = 0; names[i] && !sg.lib; i++)
        sg.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!sg.lib) return -1;
    *(void **)&sg.init = dlsym(sg.lib, "simgrid_init");
    *(void **)&sg.load_platform = dlsym(sg.lib, "simgrid_load_platform");
    *(void **)&sg.actor_create = dlsym(sg.lib, "sg_actor_create_");
    *(void **)&sg.run = dlsym(sg.lib, "simgrid_run");
    *(void **)&sg.clock = dlsym(sg.lib, "simgrid_get_clock");
    *(void **)&sg.host_by_name = dlsym(sg.lib, "sg_host_by_name");
    *(void **)&sg.parallel_execute = dlsym(sg.lib, "sg_actor_parallel_execute");
    if (!sg.init || !sg.load_platform || !sg.actor_create || !sg.run || !sg.clock ||
        !sg.host_by_name || !sg.parallel_execute) {
        dlclose(sg.lib);
        memset(&sg, 0, sizeof sg);
        return -1;
    }
    return 0;
}

int np_sg_available(void) {
    return sg_load() == 0;
}

static const np_platform *sg_p;
static const double *const *sg_mats;
static int sg_n;
static double *sg_out;

static void sg_actor(int argc, char **argv) {
    (void)argc;
    (void)argv;
    int N = sg_p->ranks;
    sg_host *by_rank = malloc((size_t)N * sizeof *by_rank);
    double *flops = calloc((size_t)N, sizeof *flops), *m = malloc((size_t)N * N * sizeof *m);
    if (!by_rank || !flops || !m) _exit(3);
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "h%d", i);
        by_rank[i] = sg.host_by_name(name);
    }
    for (int k = 0; k < sg_n; k++) {
        memcpy(m, sg_mats[k], (size_t)N * N * sizeof *m);
        for (int i = 0; i < N; i++)
            m[(size_t)i * N + i] = 0;
        double t0 = sg.clock();
        sg.parallel_execute(N, by_rank, flops, m);
        sg_out[k] = (sg.clock() - t0) * 1e6;
    }
    free(by_rank);
    free(flops);
    free(m);
}

/* The platform as a SimGrid file. Flat: host hI's private link (split duplex: each way its
 * own rate) of the NIC's rate and half the latency, through a backbone that limits nothing.
 * Two tiers: a cluster zone per host, its ranks on private links of the intra-host rate
 * (half the intra-host latency each), the zone's router on an uplink of host_ranks NICs
 * (split duplex), all uplinks into one fabric link shared by every flow between hosts, of
 * the uplinks' total rate over the oversubscription. */
static int write_platform(const char *path, const np_platform *p) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
               "<platform version=\"4.1\">\n<zone id=\"world\" routing=\"Full\">\n");
    if (p->host_ranks <= 1) {
        fprintf(f,
                "<cluster id=\"c\" prefix=\"h\" suffix=\"\" radical=\"0-%d\" speed=\"1Gf\" "
                "bw=\"%.17gbps\" lat=\"%.17gus\" bb_bw=\"%.17gbps\" bb_lat=\"0us\" "
                "sharing_policy=\"SPLITDUPLEX\"/>\n",
                p->ranks - 1, p->nic_gbit * 1e9, p->latency_us / 2, p->nic_gbit * 1e9 * p->ranks * 4);
    } else {
        int g = p->host_ranks, hosts = p->ranks / g;
        double up_lat = p->latency_us > p->intra_latency_us ? (p->latency_us - p->intra_latency_us) / 2 : 0;
        for (int h = 0; h < hosts; h++) {
            fprintf(f,
                    "<cluster id=\"m%d\" prefix=\"h\" suffix=\"\" radical=\"%d-%d\" speed=\"1Gf\" "
                    "bw=\"%.17gbps\" lat=\"%.17gus\" bb_bw=\"%.17gbps\" bb_lat=\"0us\" "
                    "router_id=\"r%d\" sharing_policy=\"SPLITDUPLEX\"/>\n",
                    h, h * g, h * g + g - 1, p->intra_gbit * 1e9, p->intra_latency_us / 2,
                    p->intra_gbit * 1e9 * g * 4, h);
            fprintf(f, "<link id=\"up%d\" bandwidth=\"%.17gbps\" latency=\"%.17gus\" "
                       "sharing_policy=\"SPLITDUPLEX\"/>\n",
                    h, p->nic_gbit * 1e9 * g, up_lat);
        }
        fprintf(f, "<link id=\"fabric\" bandwidth=\"%.17gbps\" latency=\"0us\"/>\n",
                p->nic_gbit * 1e9 * g * hosts / p->oversub);
        for (int a = 0; a < hosts; a++)
            for (int b = 0; b < hosts; b++)
                if (a != b)
                    fprintf(f,
                            "<zoneRoute src=\"m%d\" dst=\"m%d\" gw_src=\"r%d\" gw_dst=\"r%d\" "
                            "symmetrical=\"NO\"><link_ctn id=\"up%d\" direction=\"UP\"/>"
                            "<link_ctn id=\"fabric\"/><link_ctn id=\"up%d\" direction=\"DOWN\"/>"
                            "</zoneRoute>\n",
                            a, b, a, b, a, b);
    }
    fprintf(f, "</zone>\n</platform>\n");
    return fclose(f) ? -1 : 0;
}

int np_sg_alltoall_us(const np_platform *p, const double *const *mats, int n, double *out_us,
                      char *why, size_t why_n) {
    if (sg_load()) {
        snprintf(why, why_n, "SimGrid is not installed (Debian's libsimgrid3.32)");
        return -1;
    }
    if (p->ranks < 2) {
        for (int k = 0; k < n; k++)
            out_us[k] = 0;
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    char dirbuf[4096], path[4096 + 16];
    int w = snprintf(dirbuf, sizeof dirbuf, "%s/nestpipe-sg-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    char *d = w > 0 && (size_t)w < sizeof dirbuf ? mkdtemp(dirbuf) : NULL;
    if (!d) {
        snprintf(why, why_n, "cannot make a temporary folder in %s: %s", tmp && *tmp ? tmp : "/tmp",
                 strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/platform.xml", d);
    int fds[2];
    if (write_platform(path, p) || pipe(fds)) {
        snprintf(why, why_n, "cannot write the platform file %s", path);
        remove(path);
        rmdir(d);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        double *res = calloc((size_t)n, sizeof *res);
        if (!res) _exit(3);
        sg_p = p;
        sg_mats = mats;
        sg_n = n;
        sg_out = res;
        char a0[] = "nestpipe", a1[] = "--cfg=host/model:ptask_L07", a2[] = "--log=root.thresh:critical";
        char *av[] = {a0, a1, a2, NULL};
        int ac = 3;
        sg.init(&ac, av);
        sg.load_platform(path);
        sg.actor_create("replay", sg.host_by_name("h0"), sg_actor, 0, NULL);
        sg.run();
        ssize_t w = write(fds[1], res, (size_t)n * sizeof *res);
        _exit(w == (ssize_t)((size_t)n * sizeof *res) ? 0 : 4);
    }
    close(fds[1]);
    ssize_t got = 0, r;
    char *buf = (char *)out_us;
    while (pid > 0 && (r = read(fds[0], buf + got, (size_t)n * sizeof *out_us - (size_t)got)) > 0)
        got += r;
    close(fds[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    remove(path);
    rmdir(d);
    if (pid < 0 || got != (ssize_t)((size_t)n * sizeof *out_us) || !WIFEXITED(status) ||
        WEXITSTATUS(status)) {
        snprintf(why, why_n, "the SimGrid run failed (%s)",
                 pid < 0 ? strerror(errno) : "no result from its process");
        return -1;
    }
    /* SimGrid charged the longest route's latency once (between hosts: the NIC latency) and
     * moved each byte once: the algorithm's latency part and byte factor instead */
    double charged = p->host_ranks > 1 && p->host_ranks == p->ranks ? p->intra_latency_us : p->latency_us;
    for (int k = 0; k < n; k++)
        out_us[k] = (out_us[k] - charged) * np_alltoall_bytes_factor(p) + np_alltoall_latency_us(p);
    return 0;
}

