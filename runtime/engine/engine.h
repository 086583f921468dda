/* The StarPU engine (runtime/engine/engine.c), private to the library: np_trainer_t drives it. */
#ifndef NP_ENGINE_ENGINE_H
#define NP_ENGINE_ENGINE_H

#include "nestpipe/nestpipe.h"
#include "runtime/model/engine_ops.h"
#include "runtime/trace/trace.h"

typedef struct np_sp_engine np_sp_engine;

/* Starts StarPU (policy cfg->sched, workers from STARPU_NCPU) and registers the model's
 * parameters and every buffer of the batch graph. One engine per process at a time. */
NP_NODISCARD np_status np_engine_create(const np_config *cfg, np_model_t *m, np_sp_engine **out,
                                        np_error *err);
/* Trains this rank's slice b[0] of the next global batch; b[1..n-1] are the following
 * batches, as far as the driver has read (the pipelined modes start their early stages;
 * sequential needs n = 1). Each b[i] must stay valid until its step returned. Sequential
 * waits for everything; dbp/async wait for this batch's loss only. *loss is this rank's
 * BCE sum over the global batch size; summed over ranks it is the global mean. */
NP_NODISCARD np_status np_engine_step(np_sp_engine *e, const np_batch *const *b, int n,
                                      double *loss, np_error *err);
/* np_engine_step in two halves, so the driver can read the next batch while this one
 * trains: submit returns once the tasks are submitted, wait returns the loss. */
NP_NODISCARD np_status np_engine_submit(np_sp_engine *e, const np_batch *const *b, int n,
                                        np_error *err);
NP_NODISCARD np_status np_engine_wait(np_sp_engine *e, double *loss, np_error *err);
/* Batches the pipeline runs ahead of the training one: 0 sequential, 4 dbp/async. */
int np_engine_lookahead(const np_sp_engine *e);
/* The pipeline that runs ("auto" resolved; sequential or fwp after a dropped look-ahead). */
np_pipeline np_engine_pipeline(const np_sp_engine *e);
/* Before the first step, collective (every rank calls it): when every rank was given one
 * batch, the engine runs its pipeline without look-ahead (graph/pipeline.h); when all were
 * given more, nothing changes; a mix is NP_STATUS_BAD_INPUT on every rank. */
NP_NODISCARD np_status np_engine_drop_lookahead(np_sp_engine *e, int n, np_error *err);
/* Rows copied by dual-buffer syncs so far (dbp). */
uint64_t np_engine_synced_rows(const np_sp_engine *e);
/* Remote exchange segments routed so far, and how many of them went pooled. */
void np_engine_segments(const np_sp_engine *e, uint64_t *segments, uint64_t *pooled);
/* Waits for all tasks and, if a trace was asked for, merges every rank's events on rank 0
 * (times from a common origin taken after a barrier) and writes it there. Collective. */
NP_NODISCARD np_status np_engine_finish(np_sp_engine *e, np_error *err);
/* Bytes this rank sent so far: keys (with counts), rows, row gradients, dense all-reduce. */
void np_engine_bytes(const np_sp_engine *e, uint64_t out[4]);
/* The bytes of the engine's batch buffers now: the input slots, the route sets, the
 * embedding buffers, the exchanges' rows and staging, the dense gradients and their
 * all-reduce staging (not the chunks' activations, nor the model's own memory). */
uint64_t np_engine_buffer_bytes(const np_sp_engine *e);
/* The merged trace on rank 0 after np_engine_finish, NULL elsewhere or without tracing. */
const np_trace *np_engine_trace(const np_sp_engine *e);
/* np_trainer_trace, the trainer's merged trace, is public (nestpipe/trace.h). */
/* The trace's clock now (0 when not tracing), and a record of the driver reading or making
 * batch `batch` between two such times: a "data" event on the row after the workers. */
double np_engine_clock_us(const np_sp_engine *e);
void np_engine_trace_data(np_sp_engine *e, long batch, double start_us, double end_us);
/* The driver's own work of kind (NP_KIND_DRIVER: data, control) on the trace's driver row;
 * name must outlive the trace (a literal); bytes: what it sent to other ranks. */
void np_engine_trace_driver(np_sp_engine *e, np_node_kind kind, const char *name, long batch,
                            double start_us, double end_us, uint64_t bytes);

/* Checkpoints: hold waits until every submitted task that writes the model's dense
 * parameters, tables or optimizer state has run and keeps them readable in main memory
 * (tasks already submitted that only read them, such as retrieve(t+1), keep running);
 * release lets the next step's updates write them again. Between a wait and the next
 * submit only. */
void np_engine_hold(np_sp_engine *e);
void np_engine_release(np_sp_engine *e);
/* np_trainer_hold / np_trainer_release (public, nestpipe.h) go through these. */

/* Unregisters everything (the model memory stays with the model) and stops StarPU. */
void np_engine_free(np_sp_engine *e);

/* The engine behind the trainer's interface (ops.c). */
extern const np_engine_ops np_starpu_engine_ops;

#endif
