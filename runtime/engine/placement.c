/* Placement from the topology (hwloc). The rules, measured on the bench machine
 * (docs/engine.md "Placement"):
 * - the host's cores are split into one contiguous slice per rank on the host;
 * - a slice of 2+ cores gets one worker per core (at most StarPU's 4), each bound to its
 *   core; the last one runs the collectives when there are several ranks, so the comm
 *   worker has a core of its own; the driver is bound to the slice too, so the tables it
 *   allocates and fills are first touched on the slice's NUMA node;
 * - a rank with less than 2 cores (more ranks than half the cores) binds nothing: every
 *   rank's workers would be pinned to the same first cores (StarPU numbers them from 0 in
 *   each process), and the OS spreads them better (2 ranks on 2 cores: 44-45k samples/s
 *   unbound against 24.7k as StarPU binds them);
 * - a process that comes bound to some cores (mpirun --bind-to, taskset) keeps them: they
 *   are its slice, and the driver keeps its binding;
 * - STARPU_NCPU, STARPU_NCPUS, STARPU_WORKERS_CPUID or STARPU_WORKERS_NOBIND in the
 *   environment win: the user placed the workers. */
#include "runtime/engine/placement.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <starpu.h>

#include "runtime/comm/comm.h"
#include "runtime/core/util.h"
#include "runtime/engine/devices.h"

_Static_assert(NP_PLACE_MAX_WORKERS >= STARPU_MAXCPUS, "one bind_pu entry per StarPU CPU");

/* The cores the process is bound to, when the launcher bound it to part of the host:
 * their logical indexes into cores[] (at most max), and how many; 0 when unbound. */
static int bound_cores(hwloc_topology_t t, int *cores, int max) {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int n = 0;
    if (set && hwloc_get_cpubind(t, set, HWLOC_CPUBIND_PROCESS) == 0 &&
        !hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(t), set)) {
        int nc = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
        for (int c = 0; c < nc && n < max; c++) {
            hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)c);
            if (core && hwloc_bitmap_isincluded(core->cpuset, set)) cores[n++] = c;
        }
        if (n == 0) n = -1; /* bound to part of a core: treat as one core, unbound */
    }
    hwloc_bitmap_free(set);
    return n;
}

static const char *env_placed(void) {
    static const char *vars[] = {"STARPU_NCPU", "STARPU_NCPUS", "STARPU_WORKERS_CPUID",
                                 "STARPU_WORKERS_NOBIND"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return vars[i];
    return NULL;
}

/* Workers bound one per core of the slice cores[0..n) (logical core indexes, n >= 1): at
 * most StarPU's CPU count of them, each on its core's first PU; the slice's NUMA node is
 * its first core's. */
static void bind_slice(hwloc_topology_t t, np_placement *p, const int *cores, int n) {
    p->first_core = cores[0];
    p->n_cores = n;
    p->workers = n < STARPU_MAXCPUS ? n : STARPU_MAXCPUS;
    p->capped = n > STARPU_MAXCPUS;
    p->bind = 1;
    for (int i = 0; i < p->workers; i++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)cores[i]);
        hwloc_obj_t pu = core ? hwloc_get_obj_inside_cpuset_by_type(t, core->cpuset, HWLOC_OBJ_PU, 0)
                              : NULL;
        p->bind_pu[i] = pu ? (int)pu->logical_index : cores[i];
    }
    hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)cores[0]);
    int node = core && core->nodeset ? hwloc_bitmap_first(core->nodeset) : 0;
    p->numa_node = node < 0 ? 0 : node;
}

np_status np_placement_plan(const np_config *cfg, np_placement *p, np_error *err) {
    memset(p, 0, sizeof *p);
    p->comm_worker = -1;
    int nodes;
    np_comm_host(np_comm_world(), &p->local_rank, &p->local_ranks, &nodes);
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) || hwloc_topology_load(t)) {
        hwloc_topology_destroy(t);
        return np_err(err, NP_STATUS_INTERNAL, "hwloc could not read this host's topology");
    }
    p->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    p->pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    p->numa = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    if (p->cores < 1) p->cores = p->pus > 0 ? p->pus : 1;
    if (p->numa < 1) p->numa = 1;
    int share = p->cores / (p->local_ranks > 0 ? p->local_ranks : 1);
    int several = cfg->ranks > 1;
    const char *env = env_placed();
    int mine[NP_PLACE_MAX_WORKERS];
    int nbound = env ? 0 : bound_cores(t, mine, NP_PLACE_MAX_WORKERS);
    if (env) {
        snprintf(p->source, sizeof p->source, "the environment (%s)", env);
    } else if (nbound != 0) {
        p->launcher = 1;
        if (nbound >= 2) {
            snprintf(p->source, sizeof p->source, "the launcher's binding (%d cores)", nbound);
            bind_slice(t, p, mine, nbound);
        } else { /* one core or less: the workers share it, inheriting the binding */
            snprintf(p->source, sizeof p->source, "the launcher's binding (1 core: unbound)");
            p->n_cores = 1;
            p->workers = several ? 2 : 1;
        }
    } else if (share >= 2 || (p->local_ranks <= 1 && p->cores >= 1)) {
        if (share < 1) share = 1;
        snprintf(p->source, sizeof p->source, "hwloc");
        int slice[NP_PLACE_MAX_WORKERS];
        int n = share < NP_PLACE_MAX_WORKERS ? share : NP_PLACE_MAX_WORKERS;
        for (int i = 0; i < n; i++)
            slice[i] = p->local_rank * share + i;
        bind_slice(t, p, slice, n);
        p->n_cores = share; /* the whole slice, of which StarPU uses `workers` */
        p->capped = share > STARPU_MAXCPUS;
    } else {
        snprintf(p->source, sizeof p->source, "hwloc (%d ranks on %d cores: unbound)",
                 p->local_ranks, p->cores);
        p->n_cores = p->cores;
        p->workers = p->cores < STARPU_MAXCPUS ? p->cores : STARPU_MAXCPUS;
    }
    /* the environment's count: STARPU_NCPU (or NCPUS) when set, else StarPU's default */
    int workers = p->workers;
    if (!workers) {
        const char *n = getenv("STARPU_NCPU");
        if (!n) n = getenv("STARPU_NCPUS");
        workers = n && atoi(n) > 0 ? atoi(n) : p->cores;
        if (workers > STARPU_MAXCPUS) workers = STARPU_MAXCPUS;
        p->env_workers = workers;
    }
    if (several && workers >= 2) p->comm_worker = workers - 1;
    hwloc_topology_destroy(t);
    return NP_OK;
}

void np_placement_bind_thread(const np_placement *p) {
    if (!p->bind || p->launcher) return; /* the launcher's binding stands */
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) || hwloc_topology_load(t)) {
        hwloc_topology_destroy(t);
        return; /* binding is an optimisation: the plan said what it wanted */
    }
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    for (int i = 0; set && i < p->n_cores; i++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)(p->first_core + i));
        if (core) hwloc_bitmap_or(set, set, core->cpuset);
    }
    if (set && !hwloc_bitmap_iszero(set)) hwloc_set_cpubind(t, set, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(t);
}

void np_placement_describe(const np_placement *p, const np_config *cfg, char *buf, size_t n) {
    size_t len = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (len < n) len += (size_t)snprintf(buf + len, n - len, __VA_ARGS__);                     \
    } while (0)
    buf[0] = 0;
    ADD("rank %d: host of %d cores (%d PUs, %d NUMA node%s), %d rank%s on it; placed by %s",
        cfg->rank, p->cores, p->pus, p->numa, p->numa == 1 ? "" : "s", p->local_ranks,
        p->local_ranks == 1 ? "" : "s", p->source);
    int nw = p->workers ? p->workers : p->env_workers;
    if (nw) ADD("; %d CPU worker%s", nw, nw == 1 ? "" : "s");
    if (p->bind && p->launcher) {
        ADD(" on the launcher's cores (PUs");
        for (int i = 0; i < p->workers; i++)
            ADD(" %d", p->bind_pu[i]);
        ADD("), NUMA node %d", p->numa_node);
    } else if (p->bind) {
        ADD(" on cores %d-%d (PUs", p->first_core, p->first_core + p->n_cores - 1);
        for (int i = 0; i < p->workers; i++)
            ADD(" %d", p->bind_pu[i]);
        ADD("), driver and tables on NUMA node %d", p->numa_node);
    }
    if (p->comm_worker >= 0)
        ADD("; worker %d runs the collectives%s", p->comm_worker,
            p->bind ? ", on a core of its own" : "");
    np_devices d;
    np_error derr;
    if (!np_devices_plan(cfg, &d, &derr)) {
        if (d.ncuda) {
            ADD("; %d CUDA worker%s on device", d.ncuda, d.ncuda == 1 ? "" : "s");
            for (int i = 0; i < d.ncuda; i++)
                ADD("%s%d", i ? "," : " ", (d.first + i) % d.visible);
            ADD(" (%s)", np_cuda_info());
        } else {
            ADD("; no GPU (%s)", cfg->gpus == 0 ? "--gpus 0" : np_cuda_info());
        }
        char place[128];
        if (!np_config_get(cfg, "place", place, sizeof place) && strcmp(place, "auto"))
            ADD(", pinned %s", place);
    }
    if (p->capped)
        ADD("; %d cores but StarPU runs at most %d CPU workers per process: run one rank per "
            "NUMA node or socket (mpirun --map-by numa)",
            p->n_cores, STARPU_MAXCPUS);
#undef ADD
}
