/* Where a rank's threads run, from the host's topology (hwloc): how many StarPU CPU
 * workers, which cores they are bound to, which one runs the collectives, and where the
 * driver (and so the first touch of the tables) runs. A pure function of the config, the
 * host's ranks and the topology, so the CLI's explanation and the engine agree.
 * Not here: starting StarPU with it (engine.c). */
#ifndef NP_ENGINE_PLACEMENT_H
#define NP_ENGINE_PLACEMENT_H

#include "nestpipe/nestpipe.h"

#define NP_PLACE_MAX_WORKERS 256 /* >= STARPU_MAXCPUS (checked in placement.c): Debian 4, the CUDA build 64 */

typedef struct np_placement {
    int cores, pus, numa;      /* this host's */
    int local_rank, local_ranks;
    int first_core, n_cores;   /* this rank's slice of the host's cores */
    int workers;               /* StarPU CPU workers; 0: StarPU's own choice (environment) */
    int env_workers;           /* then: how many the environment asks for, as StarPU reads it */
    int bind;                  /* 1: workers bound to bind_pu[], the driver to the slice */
    int bind_pu[NP_PLACE_MAX_WORKERS]; /* logical PU of each worker */
    int comm_worker;           /* the worker that runs the collectives; -1: none */
    int numa_node;             /* of the slice's first core: where the tables are touched */
    int capped;                /* the slice has more cores than StarPU can use (4) */
    int launcher;              /* the process came bound (mpirun --bind-to, taskset): its
                                  cores are the slice, the driver is left as it is */
    char source[96];           /* "hwloc" or what in the environment decided */
} np_placement;

/* Plans this rank's placement. Uses the host's ranks of np_comm_world(). */
np_status np_placement_plan(const np_config *cfg, np_placement *p, np_error *err);

/* Binds the calling thread to the rank's slice when the plan binds (else nothing). */
void np_placement_bind_thread(const np_placement *p);

/* One line per fact, for --explain-placement and the metrics. */
void np_placement_describe(const np_placement *p, const np_config *cfg, char *buf, size_t n);

#endif
