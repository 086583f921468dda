/* The collectives of `nestpipe simulate` timed on SimGrid (apps/simgrid.c: libsimgrid
 * loaded at run time where installed; docs/scale.md "On SimGrid"). */
#ifndef NP_APPS_SIMGRID_H
#define NP_APPS_SIMGRID_H

#include "nestpipe/scale.h"

/* 1 when SimGrid's library can be loaded. */
int np_sg_available(void);
/* The wire times in microseconds of the n All2Alls whose byte matrices are mats[0..n)
 * (p->ranks x p->ranks, row = sender), each alone on p's platform (flat or two tiers), by
 * one SimGrid parallel task each (host model ptask_L07); the route latency SimGrid charges
 * once is replaced by the algorithm's latency part (np_alltoall_latency_us) and the bytes
 * scaled by its factor. Runs SimGrid in a child process (it loads one platform a
 * process). 0, or -1 with the reason in why. */
int np_sg_alltoall_us(const np_platform *p, const double *const *mats, int n, double *out_us,
                      char *why, size_t why_n);

#endif
