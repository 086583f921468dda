/* The GPUs of a rank (--gpus) and where each kind of node may run (--place): planned
 * before StarPU starts (how many CUDA workers, on which devices), checked after (what
 * StarPU gave, and whether every pinned node has a kernel there). docs/gpu.md. */
#ifndef NP_ENGINE_DEVICES_H
#define NP_ENGINE_DEVICES_H

#include <stdint.h>

#include "nestpipe/nestpipe.h"

struct starpu_conf;
struct np_model;

typedef struct np_devices {
    int ncuda;                      /* CUDA workers asked of StarPU (0: CPU only) */
    int first;                      /* their devices: first, first+1, ... modulo visible */
    int visible;                    /* devices CUDA sees */
    uint32_t where[NP_PLACE_KINDS]; /* per np_place_kind: 0 (any), STARPU_CPU or STARPU_CUDA */
    int nccl_dev;                   /* --comm nccl: the device of the rank's one CUDA worker */
} np_devices;

/* How many GPUs this rank uses and which: --gpus against what CUDA sees, ranks on the host
 * taking turns. A count CUDA cannot serve, or any GPU in a CPU-only build, is an error
 * naming --gpus. */
NP_NODISCARD np_status np_devices_plan(const np_config *cfg, np_devices *d, np_error *err);
/* Into StarPU's configuration: the CUDA workers and their devices (STARPU_NCUDA, when set,
 * wins: the user placed them), and the CPU workers that fit beside them: StarPU binds the
 * CUDA workers' driver threads first, to the first cores of the binding list, so with
 * cpu_workers planned cores the CPU workers take the rest (at least one). */
void np_devices_conf(const np_devices *d, int cpu_workers, struct starpu_conf *conf);
/* After starpu_init: the CUDA workers StarPU started, --place against them and against the
 * model's layer kinds (a kind pinned to cuda needs CUDA kernels); fills d->where, and for
 * --comm nccl d->nccl_dev (exactly one CUDA worker, wherever StarPU put it). */
NP_NODISCARD np_status np_devices_check(const np_config *cfg, const struct np_model *m,
                                        np_devices *d, np_error *err);

#endif
