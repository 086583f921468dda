/* The StarPU engine's table of the trainer's interface (runtime/model/engine_ops.h): the
 * engine's functions take their own type, these take the trainer's opaque pointer. */
#include "runtime/engine/engine.h"
#include "runtime/model/engine_ops.h"

static np_status sp_create(const np_config *cfg, np_model_t *m, void **impl, np_error *err) {
    np_sp_engine *e;
    np_status st = np_engine_create(cfg, m, &e, err);
    *impl = e;
    return st;
}
static np_status sp_submit(void *i, const np_batch *const *b, int n, np_error *err) {
    return np_engine_submit(i, b, n, err);
}
static np_status sp_wait(void *i, double *loss, np_error *err) {
    return np_engine_wait(i, loss, err);
}
static int sp_lookahead(const void *i) {
    return np_engine_lookahead(i);
}
static np_pipeline sp_pipeline(const void *i) {
    return np_engine_pipeline(i);
}
static np_status sp_drop(void *i, int n, np_error *err) {
    return np_engine_drop_lookahead(i, n, err);
}
static uint64_t sp_synced(const void *i) {
    return np_engine_synced_rows(i);
}
static void sp_segments(const void *i, uint64_t *segs, uint64_t *pooled) {
    np_engine_segments(i, segs, pooled);
}
static np_status sp_finish(void *i, np_error *err) {
    return np_engine_finish(i, err);
}
static void sp_bytes(const void *i, uint64_t out[4]) {
    np_engine_bytes(i, out);
}
static uint64_t sp_buffer_bytes(const void *i) {
    return np_engine_buffer_bytes(i);
}
static double sp_clock(const void *i) {
    return np_engine_clock_us(i);
}
static void sp_trace_data(void *i, long batch, double s, double e) {
    np_engine_trace_data(i, batch, s, e);
}
static const np_trace_t *sp_trace(const void *i) {
    return np_engine_trace(i);
}
static void sp_hold(void *i) {
    np_engine_hold(i);
}
static void sp_release(void *i) {
    np_engine_release(i);
}
static void sp_free(void *i) {
    np_engine_free(i);
}

const np_engine_ops np_starpu_engine_ops = {
    .name = "starpu",
    .create = sp_create,
    .submit = sp_submit,
    .wait = sp_wait,
    .lookahead = sp_lookahead,
    .pipeline = sp_pipeline,
    .drop_lookahead = sp_drop,
    .synced_rows = sp_synced,
    .segments = sp_segments,
    .finish = sp_finish,
    .bytes = sp_bytes,
    .buffer_bytes = sp_buffer_bytes,
    .clock_us = sp_clock,
    .trace_data = sp_trace_data,
    .trace = sp_trace,
    .hold = sp_hold,
    .release = sp_release,
    .free = sp_free,
};

