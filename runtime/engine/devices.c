/* --gpus and --place (runtime/engine/devices.h): the CUDA workers a rank asks StarPU for, and where
 * each kind of node may run. A CPU-only build plans no GPU and refuses a count or a pin
 * it cannot serve; it never silently trains on the CPU what the user pinned to a GPU. */
#include "runtime/engine/devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "runtime/comm/backend.h"
#include "runtime/core/util.h"
#include "codelets/cuda/cuda.h"
#include "runtime/model/model.h"

static const char *const kind_names[NP_PLACE_KINDS] = {"dense", "pool", "loss", "update"};

np_status np_devices_plan(const np_config *cfg, np_devices *d, np_error *err) {
    memset(d, 0, sizeof *d);
    d->visible = np_cuda_devices();
#ifndef NP_HAVE_CUDA
    if (cfg->gpus > 0)
        return np_err(err, NP_STATUS_UNSUPPORTED,
                      "gpus: %d asked for, but this build has no CUDA (build the CUDA flavour, "
                      "docs/gpu.md; --gpus 0 trains on the CPU)",
                      cfg->gpus);
#endif
    if (cfg->gpus > d->visible)
        return np_err(err, NP_STATUS_BAD_INPUT, "gpus: %d asked for, but CUDA sees %d (%s)",
                      cfg->gpus, d->visible, np_cuda_info());
    if (cfg->gpus > STARPU_MAXCUDADEVS)
        return np_err(err, NP_STATUS_UNSUPPORTED,
                      "gpus: %d asked for, but this StarPU drives at most %d GPUs a process; run "
                      "one rank per %d GPUs (or rebuild StarPU with --enable-maxcudadev)",
                      cfg->gpus, STARPU_MAXCUDADEVS, STARPU_MAXCUDADEVS);
    if (cfg->comm == NP_COMM_NCCL) { /* NCCL drives exactly one GPU per rank */
        np_status st = np_comm_backend_check(cfg, d->visible, err);
        if (st) return st;
        if (cfg->gpus == 0 || cfg->gpus > 1)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "comm: nccl drives one GPU per rank, but --gpus is %d; use --gpus 1 "
                          "(or all) with --comm nccl",
                          cfg->gpus);
        d->ncuda = 1;
        d->first = cfg->local_rank % d->visible;
        return NP_OK;
    }
    int per = cfg->gpus;
    if (per < 0) { /* all: the host's GPUs shared out among its ranks, at least one each */
        int ranks = cfg->local_ranks > 0 ? cfg->local_ranks : 1;
        per = d->visible >= ranks ? d->visible / ranks : d->visible > 0;
    }
    if (per > STARPU_MAXCUDADEVS) per = STARPU_MAXCUDADEVS; /* all: what StarPU can drive */
    d->ncuda = per;
    /* rank r on the host starts at its own device, so ranks spread over the GPUs first */
    d->first = d->visible ? (cfg->local_rank * (per ? per : 1)) % d->visible : 0;
    return NP_OK;
}

void np_devices_conf(const np_devices *d, int cpu_workers, struct starpu_conf *conf) {
    if (getenv("STARPU_NCUDA")) return; /* the user's choice; np_devices_check reads it */
    conf->ncuda = d->ncuda;
    if (d->ncuda > 0 && cpu_workers > 0) { /* each CUDA worker's thread takes a core */
        conf->ncpus = cpu_workers > d->ncuda ? cpu_workers - d->ncuda : 1;
        if (conf->use_explicit_workers_bindid) /* the list wraps for a one-core slice */
            for (int i = cpu_workers; i < conf->ncpus + d->ncuda && i < STARPU_NMAXWORKERS; i++)
                conf->workers_bindid[i] = conf->workers_bindid[i % cpu_workers];
    }
#ifdef STARPU_USE_CUDA
    if (d->ncuda > 0 && d->visible > 0 && d->ncuda <= STARPU_NMAXWORKERS) {
        conf->use_explicit_workers_cuda_gpuid = 1;
        for (int i = 0; i < d->ncuda; i++)
            conf->workers_cuda_gpuid[i] = (unsigned)((d->first + i) % d->visible);
    }
#endif
}

np_status np_devices_check(const np_config *cfg, const struct np_model *m, np_devices *d,
                           np_error *err) {
    char gpus[16] = "?";
    (void)np_config_get(cfg, "gpus", gpus, sizeof gpus); /* "all" or the count, as given */
    d->ncuda = (int)starpu_worker_get_count_by_type(STARPU_CUDA_WORKER);
    if (d->ncuda < 0) d->ncuda = 0;
    for (int k = 0; k < NP_PLACE_KINDS; k++) {
        np_arch a = cfg->place[k];
        d->where[k] = a == NP_ARCH_CPU ? STARPU_CPU : a == NP_ARCH_CUDA ? STARPU_CUDA : 0;
        if (a == NP_ARCH_CUDA && d->ncuda == 0)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "place: %s=cuda, but this rank runs no CUDA worker (--gpus %s; %s)",
                          kind_names[k], gpus, np_cuda_info());
    }
    if (!d->ncuda) memset(d->where, 0, sizeof d->where); /* every codelet has a CPU function */
    d->nccl_dev = -1;
    if (cfg->comm == NP_COMM_NCCL) { /* the communicator goes on its one worker's device */
        int id;
        if (d->ncuda != 1 || starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, &id, 1) != 1)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "comm: nccl drives one GPU per rank, but StarPU started %d CUDA "
                          "workers here (STARPU_NCUDA?)",
                          d->ncuda);
        d->nccl_dev = starpu_worker_get_devid(id);
    }
    if (cfg->place[NP_PLACE_DENSE] == NP_ARCH_CUDA) {
        const np_graph_t *g = m->graph;
        for (int v = 0; v < g->n; v++) {
            const np_layer_def *def = np_node_def(&g->node[v]);
            if (!def->cuda_fwd || !def->cuda_bwd)
                return np_err(err, NP_STATUS_BAD_INPUT,
                              "place: dense=cuda, but layer kind '%s' (node '%s') has no CUDA "
                              "kernels (fill its cuda_fwd/cuda_bwd, or place dense=auto)",
                              def->kind, g->node[v].name);
        }
    }
    return NP_OK;
}
