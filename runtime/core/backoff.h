/* Waiting without taking a core: a wait yields the core for its first NP_BACKOFF_SPIN_US
 * (every wait of a healthy step: answered at once), then sleeps in steps of a fiftieth of
 * the time waited so far, 1 ms at most. A wait is stretched by 2% at the most, and a long
 * one (a stalled peer, a worker idle while the data is read) costs next to nothing.
 * Measured (bench/results/, the idle bench): with a first sleep after 1 ms and a twentieth, 2
 * ranks on 2 cores under dbp lost 5.7%; waits there last milliseconds. Used by the MPI backend's
 * polled collectives (runtime/comm/mpi.c) and the StarPU workers' idle hook (runtime/engine/engine.c). */
#ifndef NP_CORE_BACKOFF_H
#define NP_CORE_BACKOFF_H

#include <sched.h>
#include <time.h>

#define NP_BACKOFF_SPIN_US 10000.0
#define NP_BACKOFF_MAX_SLEEP_US 1000.0

static inline double np_backoff_now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* One pause of a wait that began at start_us (np_backoff_now_us). */
static inline void np_backoff_pause(double start_us) {
    double waited = np_backoff_now_us() - start_us;
    if (waited < NP_BACKOFF_SPIN_US) {
        sched_yield();
        return;
    }
    double us = waited / 50;
    if (us > NP_BACKOFF_MAX_SLEEP_US) us = NP_BACKOFF_MAX_SLEEP_US;
    struct timespec ts = {0, (long)(us * 1000)};
    nanosleep(&ts, NULL);
}

#endif
