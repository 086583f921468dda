/* The public face of runtime/comm/ (include/nestpipe/dist.h): thin wrappers that fix the channel
 * to the driver's control one and turn -1 into a status. Not here: MPI itself (mpi.c). */
#include "nestpipe/dist.h"

#include "runtime/comm/comm.h"
#include "runtime/core/util.h"

np_status np_dist_init(int *argc, char ***argv, np_dist_t **out, np_error *err) {
    return np_comm_init(argc, argv, out, err);
}

void np_dist_free(np_dist_t *d) {
    np_comm_free(d);
}

void np_dist_abort(np_dist_t *d, int code) {
    np_comm_abort(d, code);
}

int np_dist_rank(const np_dist_t *d) {
    return np_comm_rank(d);
}

void np_dist_host(const np_dist_t *d, int *local_rank, int *local_ranks, int *nodes) {
    np_comm_host(d, local_rank, local_ranks, nodes);
}

int np_dist_size(const np_dist_t *d) {
    return np_comm_size(d);
}

np_status np_dist_watchdog_start(np_dist_t *d, double timeout_s, np_dist_watchdog_t **out,
                                 np_error *err) {
    return np_comm_watchdog_start(d, timeout_s, out, err);
}

void np_dist_watchdog_progress(np_dist_watchdog_t *w, long step, int waiting) {
    np_comm_watchdog_progress(w, step, waiting);
}

void np_dist_watchdog_stop(np_dist_watchdog_t *w) {
    np_comm_watchdog_stop(w);
}

static np_status mpi_failed(np_error *err, const char *what) {
    return np_err(err, NP_STATUS_INTERNAL, "MPI failed in the %s over ranks", what);
}

np_status np_dist_sum_i64(np_dist_t *d, int64_t *inout, np_error *err) {
    return np_comm_allreduce_i64(d, NP_CHAN_CTL, inout, 0) ? mpi_failed(err, "integer sum") : NP_OK;
}

np_status np_dist_max_i64(np_dist_t *d, int64_t *inout, np_error *err) {
    return np_comm_allreduce_i64(d, NP_CHAN_CTL, inout, 1) ? mpi_failed(err, "maximum") : NP_OK;
}

np_status np_dist_sum_f64(np_dist_t *d, double *inout, int n, np_error *err) {
    return np_comm_allreduce_f64_sum(d, NP_CHAN_CTL, inout, n) ? mpi_failed(err, "sum") : NP_OK;
}
