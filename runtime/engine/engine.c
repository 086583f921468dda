/* The StarPU engine's life cycle: starts StarPU (policy, workers, the communication
 * worker and the compute context), registers the model's parameters and tables and every
 * buffer of the batch graph, and stops it all. Submission is runtime/engine/schedule.c's and
 * runtime/engine/chunk.c's; the buffers of a chunk come from the layers' shapes (chunk.c).
 * Pipelines: sequential, dbp, async, fwp, nestpipe (docs/pipeline.md). */
#include <errno.h>
#include <sched.h>

#include <starpu_expert.h>
#ifdef NP_HAVE_CUDA
#include <starpu_cublas.h>

#include "codelets/cuda/cuda.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/comm/backend.h"
#include "runtime/core/backoff.h"
#include "runtime/core/util.h"
#include "runtime/engine/engine_impl.h"
#include "runtime/engine/placement.h"

/* The buffers whose size follows the keys of a batch, at caps c: exactly what
 * np_xchg_caps_bytes counts. */
np_status np_engine_grow_nnz(np_sp_engine *e, const np_xchg_caps *c, np_error *err) {
    size_t row = (size_t)e->m->d * sizeof(float), i64 = sizeof(int64_t);
    size_t stage = c->stage > c->win ? c->stage : c->win; /* the staging serves both sides */
    np_status st = NP_OK;
    for (int k = 0; k < NP_SLOTS && !st; k++)
        st = np_buf_grow(&e->slot[k].keys, c->keys, i64, "batch keys", err);
    for (int k = 0; k < NP_RSETS && !st; k++) {
        np_rset *r = &e->rset[k];
        if (!st) st = np_buf_grow(&r->uniq, c->keys, i64, "unique keys", err);
        if (!st) st = np_buf_grow(&r->pos, c->keys, i64, "key positions", err);
        if (!st) st = np_buf_grow(&r->sendkeys, c->keys, i64, "keys to send", err);
        if (!st) st = np_buf_grow(&r->recvkeys, c->recv_keys, i64, "received keys", err);
        if (!st) st = np_buf_grow(&r->uniq_o, c->recv, i64, "owner rows", err);
        if (!st) st = np_buf_grow(&r->map, c->recv_keys, i64, "owner row map", err);
    }
    for (int k = 0; k < e->pol.buffers && !st; k++) {
        st = np_buf_grow(&e->E[k], c->recv, row, "embedding buffer", err);
        if (!st) st = np_buf_grow(&e->Es[k], c->recv, sizeof(float), "optimizer state buffer", err);
    }
    for (int w = 0; w < e->W && !st; w++) {
        st = np_buf_grow(&e->Rin[w], c->win, row, "received rows", err);
        if (!st) st = np_buf_grow(&e->grows[w], c->win, row, "row gradients", err);
    }
    if (!st) st = np_buf_grow(&e->gE, c->recv, row, "owner row gradients", err);
    if (!st) st = np_buf_grow(&e->sbuf, stage, row, "send staging", err);
    if (!st) st = np_buf_grow(&e->rbuf, stage, row, "receive staging", err);
    int split = e->pol.split_rows ? e->pol.early_windows : 0;
    for (int w = 0; w < split && !st; w++) {
        size_t R = (size_t)e->R;
        st = np_buf_grow(&e->obits[w], c->stage / 32 + R, sizeof(uint32_t), "owner row bitmaps",
                         err);
        if (!st)
            st = np_buf_grow(&e->rbits[w], c->win / 32 + R, sizeof(uint32_t), "row bitmaps", err);
    }
    if (!st) {
        e->cap = *c;
        e->buffer_bytes = np_xchg_caps_bytes(c, e->m->d, e->W, e->R, e->pol.buffers, split,
                                             NP_SLOTS, NP_RSETS);
    }
    return st;
}

static void unreg_all_buffers(np_sp_engine *e) {
    for (int k = 0; k < NP_SLOTS; k++) {
        np_slot *sl = &e->slot[k];
        unsigned K = (unsigned)(e->W * e->C);
        if (sl->planned) { /* the sub-handles go before their parents */
            starpu_data_partition_clean(sl->dense.h, K, sl->dense_part);
            starpu_data_partition_clean(sl->label.h, K, sl->label_part);
            sl->planned = 0;
        }
        np_buf_unreg(&e->slot[k].dense);
        np_buf_unreg(&e->slot[k].label);
        np_buf_unreg(&e->slot[k].offsets);
        np_buf_unreg(&e->slot[k].keys);
    }
    for (int k = 0; k < NP_RSETS; k++) {
        np_rset *r = &e->rset[k];
        np_buf *all[] = {&r->uniq,     &r->pos,    &r->sendkeys, &r->meta,
                         &r->recvkeys, &r->uniq_o, &r->map};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            np_buf_unreg(all[i]);
    }
    np_buf *all[] = {&e->E[0],     &e->E[1],     &e->Es[0],    &e->Es[1],   &e->gE,
                     &e->sbuf,     &e->rbuf,     &e->token,    &e->obits[0], &e->obits[1],
                     &e->rbits[0], &e->rbits[1]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        np_buf_unreg(all[i]);
    for (int v = 0; v < NP_MAX_NODES; v++) {
        np_buf_unreg(&e->glocal[v]);
        np_buf_unreg(&e->gdense[v]);
        np_buf_unreg(&e->gall[v]);
    }
    for (int w = 0; w < e->W; w++) {
        if (e->Rin) np_buf_unreg(&e->Rin[w]);
        if (e->grows) np_buf_unreg(&e->grows[w]);
    }
}

/* The dense parameters cut by node: the graph lays every node's tensors out contiguously in
 * node order (np_graph_finalize), so the nodes with parameters tile the block, and a list
 * filter makes one child handle each. Batch t+1's first layer then waits for its own
 * node's update(t) only, and a CUDA worker moves only its node's parameters. */
static void partition_params(np_sp_engine *e) {
    const np_graph_t *g = e->m->graph;
    uint32_t len[NP_MAX_NODES];
    int who[NP_MAX_NODES], n = 0;
    for (int v = 0; v < g->n; v++)
        if (g->node[v].pn) {
            len[n] = (uint32_t)g->node[v].pn;
            who[n++] = v;
        }
    if (!n) return; /* no node has parameters: the block stays whole (and empty) */
    struct starpu_data_filter f = {.filter_func = starpu_vector_filter_list,
                                   .nchildren = (unsigned)n,
                                   .filter_arg_ptr = len};
    starpu_data_partition(e->params, &f);
    for (int k = 0; k < n; k++)
        e->node_params[who[k]] = starpu_data_get_sub_data(e->params, 1, k);
    e->n_param_nodes = n;
}

/* ---------------------------------------------------------------- life cycle */

static int sched_known(const char *name) {
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    for (; p && *p; p++)
        if (!strcmp((*p)->policy_name, name)) return 1;
    return 0;
}

/* The policies' names, the modular-* family counted rather than listed, so that the list
 * fits in one error line. */
static void sched_list(char *buf, size_t n) {
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    int modular = 0;
    buf[0] = 0;
    for (; p && *p; p++) {
        if (!strncmp((*p)->policy_name, "modular-", 8)) {
            modular++;
            continue;
        }
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", len ? ", " : "", (*p)->policy_name);
    }
    size_t len = strlen(buf);
    if (modular)
        snprintf(buf + len, n - len, ", and %d modular-* policies (STARPU_SCHED=help lists them)",
                 modular);
}

/* Debian's StarPU is built with non-blocking drivers: a worker with nothing to run polls
 * its queue in a loop, taking the core from the driver (which generates the next batches)
 * and from the other ranks' threads. StarPU calls idle hooks from that loop, so this one
 * hands the core to whoever else is runnable, and costs nothing when nobody is. Measured
 * (docs/engine.md): 3.0x samples/s with 2 ranks on 2 cores, within noise on 1 rank.
 * NP_IDLE_SPIN=1 turns it off (for the bench's ablation). */
static unsigned idle_yield(void *arg) {
    (void)arg;
    /* A worker idle for long (a peer stalled, the driver reading data) sleeps rather than
     * yields (runtime/core/backoff.h). Its idleness began at the first of a run of calls with no
     * gap between them: a gap over 200 us means it ran a task (or was descheduled). */
    static __thread double idle_since, last;
    double now = np_backoff_now_us();
    if (now - last > 200.0) idle_since = now;
    np_backoff_pause(idle_since);
    last = np_backoff_now_us();
    return 0;
}

void np_engine_hold(np_sp_engine *e) {
    /* R mode waits for the writers submitted before (update(t), write-back(t)) only */
    for (int v = 0; v < NP_MAX_NODES; v++)
        if (e->node_params[v]) starpu_data_acquire(e->node_params[v], STARPU_R);
    starpu_data_acquire(e->tables, STARPU_R);
    if (e->state) starpu_data_acquire(e->state, STARPU_R);
}

void np_engine_release(np_sp_engine *e) {
    if (e->state) starpu_data_release(e->state);
    starpu_data_release(e->tables);
    for (int v = 0; v < NP_MAX_NODES; v++)
        if (e->node_params[v]) starpu_data_release(e->node_params[v]);
}

void np_engine_free(np_sp_engine *e) {
    if (!e) return;
    starpu_task_wait_for_all();
    unreg_all_buffers(e);
    for (int c = 0; e->ch && c < e->W * e->C; c++)
        np_chunk_unregister(&e->ch[c]);
    free(e->ch);
    free(e->Rin);
    free(e->grows);
    free(e->owner_bound);
    np_xchg_bound_scratch_free(&e->bound);
    if (e->params) {
        /* the children go first: the block comes back whole in main memory */
        if (e->n_param_nodes) starpu_data_unpartition(e->params, STARPU_MAIN_RAM);
        starpu_data_unregister(e->params);
    }
    if (e->tables) starpu_data_unregister(e->tables);
    if (e->state) starpu_data_unregister(e->state);
    np_backend_free(e->nccl); /* no task uses it any more */
    np_trace_free(e->trace);
    np_sg_prio_free(e->cp);
    np_sg_linker_free(e->link);
    np_trace_free(e->merged);
    if (e->compute_ctx) starpu_sched_ctx_delete(e->compute_ctx);
    if (e->idle_hook >= 0) starpu_idle_hook_deregister(e->idle_hook);
#ifdef NP_HAVE_CUDA
    if (e->dev.ncuda) starpu_cublas_shutdown();
#endif
    starpu_shutdown();
    free(e);
}

/* What the engine cannot run: a rank count MPI disagrees with, an unknown scheduling
 * policy (STARPU_SCHED named when it is the one). */
static np_status check_request(const np_config *cfg, np_comm *comm, np_error *err) {
    if (np_comm_size(comm) != cfg->ranks)
        return np_err(err, NP_STATUS_INTERNAL, "config says %d ranks but MPI has %d", cfg->ranks,
                      np_comm_size(comm));
    if (!sched_known(cfg->sched)) {
        char names[2048];
        sched_list(names, sizeof names);
        const char *env = getenv("STARPU_SCHED");
        return np_err(err, NP_STATUS_BAD_INPUT, "%s: unknown StarPU policy '%s' (known: %s)",
                      env && !strcmp(env, cfg->sched) ? "STARPU_SCHED" : "sched", cfg->sched,
                      names);
    }
    return NP_OK;
}

/* StarPU started with the workers the placement and the devices plan: CPU workers bound
 * to the rank's cores (or unbound when the ranks cannot split them), CUDA workers per
 * --gpus; --quiet silences StarPU's own notices too. */
static np_status start_starpu(const np_config *cfg, np_devices *dev, np_error *err) {
    np_layer_codelets_init(); /* every kind registered by now has its codelets */
    np_placement pl;
    np_status st = np_placement_plan(cfg, &pl, err);
    if (st) return st;
    if (cfg->explain_placement) { /* each rank says where its workers and driver run */
        char line[512];
        np_placement_describe(&pl, cfg, line, sizeof line);
        fprintf(stderr, "nestpipe: placement: %s\n", line);
    }
    if ((st = np_devices_plan(cfg, dev, err))) return st;
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.sched_policy_name = cfg->sched;
    conf.nopencl = 0;
    if (pl.workers) conf.ncpus = pl.workers;
    if (pl.bind) {
        conf.use_explicit_workers_bindid = 1;
        for (int w = 0; w < pl.workers; w++)
            conf.workers_bindid[w] = (unsigned)pl.bind_pu[w];
    }
    np_devices_conf(dev, pl.workers, &conf);
    /* unbound (more ranks than the cores can split): StarPU has no conf field for it */
    int nobind = !pl.bind && pl.workers && !getenv("STARPU_WORKERS_NOBIND");
    if (nobind) setenv("STARPU_WORKERS_NOBIND", "1", 1);
    int silent = cfg->quiet && !getenv("STARPU_SILENT");
    if (silent) setenv("STARPU_SILENT", "1", 1);
    int rc = starpu_init(&conf);
    if (nobind) unsetenv("STARPU_WORKERS_NOBIND");
    if (rc)
        return np_err(err, NP_STATUS_INTERNAL,
                      "StarPU failed to start (%s); check STARPU_* environment variables",
                      rc == -ENODEV ? "no worker available" : strerror(-rc));
    return NP_OK;
}

/* The engine's settings from the config, the pipeline policy, the idle hook, and the
 * communication worker with the compute context of every other worker (several ranks). */
static void set_up(np_sp_engine *e, const np_config *cfg, np_model_t *m, np_comm *comm) {
#ifdef NP_HAVE_CUDA
    if (e->dev.ncuda) {
        /* the driver's own CUDA calls (cuBLAS's main handle, NCCL's setup) on the rank's
         * first device, not device 0 of every rank */
        np_cuda_use_device(e->dev.nccl_dev >= 0 ? e->dev.nccl_dev : e->dev.first);
        starpu_cublas_init(); /* a cuBLAS handle per CUDA worker, on its stream */
    }
#endif
    const char *spin = getenv("NP_IDLE_SPIN");
    e->idle_hook = spin && !strcmp(spin, "1") ? -1 : starpu_idle_hook_register(idle_yield, NULL);
    e->cfg = *cfg;
    e->m = m;
    e->comm = np_comm_is_mpi(comm) ? comm : NULL;
    e->R = cfg->ranks;
    e->nb = cfg->batch / cfg->ranks;
    e->C = cfg->chunks;
    e->W = np_config_windows(cfg);
    e->cluster = cfg->cluster;
    e->pol = np_pipeline_policy_of(np_config_pipeline(cfg), e->W);
    np_step_cursor_init(&e->cur);
    e->comm_worker = -1;
    int nw = (int)starpu_worker_get_count();
    int last_cpu = -1; /* collectives are CPU codelets: the last CPU worker runs them */
    for (int w = 0; w < nw; w++)
        if (starpu_worker_get_type(w) == STARPU_CPU_WORKER) last_cpu = w;
    if (e->R > 1 && nw >= 2 && last_cpu >= 0 && starpu_cpu_worker_get_count() >= 2) {
        /* the compute context keeps every other worker, the CUDA ones included */
        int ids[STARPU_NMAXWORKERS], n = 0;
        for (int w = 0; w < nw; w++)
            if (w != last_cpu) ids[n++] = w;
        e->comm_worker = last_cpu;
        e->compute_ctx = starpu_sched_ctx_create(ids, n, "compute",
                                                 STARPU_SCHED_CTX_POLICY_NAME, cfg->sched, 0);
    }
}

/* What the ranks set up together: NCCL's communicator, the split row exchange's agreement,
 * the trace's common time origin (collectives: every rank calls this). */
static np_status set_up_collective(np_sp_engine *e, np_error *err) {
    const np_config *cfg = &e->cfg;
    /* the hosts of the key, row and gradient All2Alls (collective: first) */
    np_status st = np_comm_set_topology(e->comm, cfg->a2a, cfg->ranks_per_host, err);
    /* --comm nccl: the rank's communicator on the GPU of its CUDA worker (collective) */
    if (!st && cfg->comm == NP_COMM_NCCL)
        st = e->dev.ncuda ? np_backend_nccl_create(e->comm, e->dev.nccl_dev, &e->nccl, err)
                          : np_err(err, NP_STATUS_BAD_INPUT,
                                   "comm: nccl needs this rank's CUDA worker, but StarPU started "
                                   "none (STARPU_NCUDA=0?)");
    /* the split row exchange (docs/pipeline.md "The batch boundary"): dbp on MPI across
     * ranks, where a batch's compute leaves the wire idle; not under fwp, whose windows keep
     * it busy (bench/results/2026-12-01-zen3-fwp.md: dbp 1.12x, nestpipe 0.94x and 0.97x at
     * W = 4 and 8). The key split-rows turns it off or on (for nestpipe too); every rank
     * must agree, as for any collective, so one rank's "off" wins */
    if (!st && e->pol.sync && e->comm && e->R > 1 && !e->nccl) {
        int64_t off = cfg->split_rows < 0 ? e->pol.overlap_windows : !cfg->split_rows;
        if (np_comm_allreduce_i64(e->comm, NP_CHAN_CTL, &off, 1))
            st = np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI failed agreeing on split-rows",
                        cfg->rank);
        e->pol.split_rows = !off;
    }
    if (st || !cfg->trace[0]) return st;
    /* one time origin for all ranks: everyone leaves this barrier at about the same time */
    if (np_comm_barrier(e->comm, NP_CHAN_CTL))
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI barrier failed", cfg->rank);
    e->t0_us = starpu_timing_now();
    if ((st = np_trace_create(&e->trace, err))) return st;
    starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
    for (unsigned w = 0; w < starpu_worker_get_count(); w++) {
        char name[64];
        starpu_worker_get_name((int)w, name, sizeof name);
        np_trace_set_worker_name(e->trace, (int)w, name);
    }
    /* the row after the workers: the driver's own work (np_engine_trace_data) */
    np_trace_set_worker_name(e->trace, (int)starpu_worker_get_count(), "driver");
    for (int v = 0; v < e->m->graph->n; v++) /* layer tasks carry their node id */
        np_trace_set_node_name(e->trace, v, e->m->graph->node[v].name);
    /* the run's facts, which `trace report` and `nestpipe tune` read back */
    char n[32];
    np_trace_set_info(e->trace, "sched", cfg->sched);
    np_trace_set_info(e->trace, "sched_from", cfg->sched_from[0] ? cfg->sched_from : "default");
    np_trace_set_info(e->trace, "pipeline", np_pipeline_name(np_config_pipeline(cfg)));
    snprintf(n, sizeof n, "%d", e->W);
    np_trace_set_info(e->trace, "windows", n);
    /* the driver's wait (runtime/engine/schedule.c): for the step's loss with a look-ahead, for
     * every task without one (sequential, fwp): a replay follows it */
    snprintf(n, sizeof n, "%d", e->pol.ahead);
    np_trace_set_info(e->trace, "lookahead", n);
    snprintf(n, sizeof n, "%d", cfg->chunks);
    np_trace_set_info(e->trace, "chunks", n);
    snprintf(n, sizeof n, "%d", cfg->ranks);
    np_trace_set_info(e->trace, "ranks", n);
    /* the data channel's All2Alls: flat, or in two levels over hosts of G ranks */
    int per_host = 1, levels = np_comm_a2a_levels(e->comm, &per_host);
    np_trace_set_info(e->trace, "a2a", levels == 2 ? "hier" : "flat");
    snprintf(n, sizeof n, "%d", per_host);
    np_trace_set_info(e->trace, "a2a_host_ranks", n);
    snprintf(n, sizeof n, "%u", starpu_worker_get_count());
    np_trace_set_info(e->trace, "workers", n);
    static const char *const data[] = {"synthetic", "criteo", "bin", "movielens"};
    np_trace_set_info(e->trace, "data",
                      (unsigned)cfg->data < sizeof data / sizeof *data ? data[cfg->data] : "?");
    /* what a replay at another scale needs (docs/scale.md "What a projection is calibrated
     * from"): the shape, the link the run had, the machine, the build */
    snprintf(n, sizeof n, "%ld", cfg->batch);
    np_trace_set_info(e->trace, "batch", n);
    snprintf(n, sizeof n, "%d", cfg->dim);
    np_trace_set_info(e->trace, "dim", n);
    snprintf(n, sizeof n, "%d", cfg->tables);
    np_trace_set_info(e->trace, "tables", n);
    np_trace_set_info(e->trace, "model", cfg->model_file[0] ? cfg->model_file
                                         : cfg->model == NP_MODEL_DCNV2 ? "dcnv2"
                                         : cfg->model == NP_MODEL_HSTU  ? "hstu"
                                                                        : "dlrm");
    static const char *const shards[] = {"row", "table", "spread"};
    np_trace_set_info(e->trace, "shard", shards[cfg->shard]);
    const char *link = getenv("NP_LINK_GBIT"); /* runtime/comm/mpi.c checked it */
    if (link && cfg->ranks > 1) np_trace_set_info(e->trace, "link_gbit", link);
    const char *link_us = getenv("NP_LINK_US"); /* the same */
    if (link_us && cfg->ranks > 1) np_trace_set_info(e->trace, "link_us", link_us);
    snprintf(n, sizeof n, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    np_trace_set_info(e->trace, "cores", n);
    np_trace_set_info(e->trace, "version", NP_LIB_VERSION);
    return NP_OK;
}

/* The model's memory as handles: the dense parameters (partitioned by node), this rank's
 * table shard and its Adagrad state. */
static np_status register_model(np_sp_engine *e, np_error *err) {
    const np_model_t *m = e->m;
    size_t total_rows = (size_t)m->row_base[m->T];
    if (total_rows > UINT32_MAX)
        return np_err(err, NP_STATUS_UNSUPPORTED, "rows: %zu rows in all exceed 2^32", total_rows);
    starpu_vector_data_register(&e->params, STARPU_MAIN_RAM, (uintptr_t)m->dense,
                                (uint32_t)m->n_dense, sizeof(float));
    partition_params(e);
    starpu_vector_data_register(&e->tables, STARPU_MAIN_RAM, (uintptr_t)m->table_mem,
                                (uint32_t)total_rows, (size_t)m->d * sizeof(float));
    if (m->state_mem)
        starpu_vector_data_register(&e->state, STARPU_MAIN_RAM, (uintptr_t)m->state_mem,
                                    (uint32_t)total_rows, sizeof(float));
    return NP_OK;
}

/* The buffers whose size the batch fixes: input slots, the route sets' counts, the comm
 * token, each node's dense gradients (local, summed, all-gather staging). */
static np_status register_batch_buffers(np_sp_engine *e, np_error *err) {
    const np_config *cfg = &e->cfg;
    int T = e->m->T;
    size_t nb = (size_t)e->nb;
    np_status st = NP_OK;
    for (int k = 0; k < NP_SLOTS && !st; k++) {
        np_slot *sl = &e->slot[k];
        st = np_buf_reg(&sl->dense, nb * (size_t)np_config_dense(cfg), sizeof(float),
                        "batch dense", err);
        if (!st) st = np_buf_reg(&sl->label, nb, sizeof(float), "batch labels", err);
        if (!st)
            st = np_buf_reg(&sl->offsets, (size_t)T * (nb + 1), sizeof(uint32_t), "batch offsets",
                            err);
    }
    for (int k = 0; k < NP_RSETS && !st; k++)
        st = np_buf_reg(&e->rset[k].meta, NP_META_SIZE((size_t)T, (size_t)e->W, (size_t)e->R),
                        sizeof(int64_t), "batch counts", err);
    if (!st) st = np_buf_reg(&e->token, 1, sizeof(int64_t), "comm token", err);
    const np_graph_t *g = e->m->graph;
    np_step_shape shape;
    np_engine_shape(e, &shape);
    for (int v = 0; v < g->n && !st; v++) {
        size_t n = g->node[v].pn;
        if (!n) continue;
        st = np_buf_reg(&e->glocal[v], n, sizeof(float), "dense grads", err);
        if (!st) st = np_buf_reg(&e->gdense[v], n, sizeof(float), "summed dense grads", err);
        e->fixed_bytes += 2 * n * sizeof(float);
        if (st || !np_sg_bucket_first(&shape, v)) continue;
        /* a bucket's staging, named by its first layer: the collectives' and, for several
         * layers, the packed gradients and their packed sums (np_xchg_allreduce_room) */
        size_t floats = 0;
        int k = 1;
        for (int u = np_sg_bucket(&shape, v, &floats); u < v; u++)
            k += g->node[u].pn > 0;
        size_t room = np_xchg_allreduce_room(floats, e->R, k);
        st = np_buf_reg(&e->gall[v], room, sizeof(float), "all-reduce staging", err);
        e->fixed_bytes += room * sizeof(float);
    }
    size_t nd = (size_t)np_config_dense(cfg);
    e->fixed_bytes += NP_SLOTS * (nb * nd + nb + (size_t)T * (nb + 1)) * sizeof(float) +
                      NP_RSETS * NP_META_SIZE((size_t)T, (size_t)e->W, (size_t)e->R) *
                          sizeof(int64_t);
    return st;
}

/* The W x C chunks of a batch with their buffers (window w: samples [nb w/W, nb (w+1)/W),
 * as route splits them), each slot's dense rows and labels planned as the chunks' parts,
 * and room for a first guess at the key count. */
static np_status register_chunks(np_sp_engine *e, np_error *err) {
    const np_config *cfg = &e->cfg;
    size_t nb = (size_t)e->nb;
    e->ch = calloc((size_t)e->W * (size_t)e->C, sizeof *e->ch);
    e->Rin = calloc((size_t)e->W, sizeof *e->Rin);
    e->grows = calloc((size_t)e->W, sizeof *e->grows);
    if (!e->ch || !e->Rin || !e->grows)
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory (chunks)");
    np_status st = NP_OK;
    for (int w = 0; w < e->W; w++) {
        size_t w0 = nb * (size_t)w / (size_t)e->W, wn = nb * (size_t)(w + 1) / (size_t)e->W - w0;
        for (int c = 0; c < e->C; c++) {
            np_chunk *k = &e->ch[w * e->C + c];
            k->w = w;
            k->row0 = (long)(w0 + wn * (size_t)c / (size_t)e->C);
            k->n = (long)(w0 + wn * (size_t)(c + 1) / (size_t)e->C) - k->row0;
            if ((st = np_chunk_register(e, k, err))) return st;
        }
    }
    int K = e->W * e->C;
    for (int c = 0; c < K; c++) {
        e->part_dense[c] = (uint32_t)e->ch[c].n * (uint32_t)np_config_dense(cfg);
        e->part_label[c] = (uint32_t)e->ch[c].n;
    }
    for (int k = 0; k < NP_SLOTS; k++) {
        np_slot *sl = &e->slot[k];
        struct starpu_data_filter fd = {.filter_func = starpu_vector_filter_list,
                                        .nchildren = (unsigned)K,
                                        .filter_arg_ptr = e->part_dense};
        struct starpu_data_filter fl = fd;
        fl.filter_arg_ptr = e->part_label;
        starpu_data_partition_plan(sl->dense.h, &fd, sl->dense_part);
        starpu_data_partition_plan(sl->label.h, &fl, sl->label_part);
        sl->planned = 1;
    }
    /* a first guess at the key count: hot keys per bag (at least one) for every table, and
     * a sequence's longest history with its negatives for table 0 */
    size_t per_bag = (size_t)(cfg->hot > 1 ? cfg->hot + cfg->hot / 2 : 1);
    size_t guess = nb * (size_t)e->m->T * per_bag;
    size_t seq = cfg->seq_len > 0 ? (size_t)cfg->seq_len + (size_t)(cfg->seq_negatives > 0 ? cfg->seq_negatives : 0) : 0;
    if (seq > per_bag) guess += nb * (seq - per_bag);
    /* the owner's side starts at what a rank sends on average (as much as it asks for);
     * make_room grows it to what it is sent */
    np_xchg_caps c = {.keys = guess,
                      .recv_keys = guess,
                      .recv = guess,
                      .stage = guess,
                      .win = (guess + (size_t)e->W - 1) / (size_t)e->W};
    if (!(e->owner_bound = calloc(2 * (size_t)e->R, sizeof *e->owner_bound)))
        return np_err(err, NP_STATUS_NO_MEMORY, "out of memory (owner bounds)");
    return np_engine_grow_nnz(e, &c, err);
}

uint64_t np_engine_buffer_bytes(const np_sp_engine *e) {
    return e->buffer_bytes + e->fixed_bytes;
}

np_status np_engine_create(const np_config *cfg, np_model_t *m, np_sp_engine **out, np_error *err) {
    *out = NULL;
    np_comm *comm = np_comm_world();
    np_devices dev;
    np_status st = check_request(cfg, comm, err);
    if (!st) st = start_starpu(cfg, &dev, err);
    if (st) return st;
    np_sp_engine *e = calloc(1, sizeof *e);
    if (!e || (st = np_devices_check(cfg, m, &dev, err))) {
        free(e);
        starpu_shutdown();
        return e ? st
                 : np_err(err, NP_STATUS_NO_MEMORY, "out of memory creating the StarPU engine");
    }
    e->dev = dev;
    set_up(e, cfg, m, comm);
    /* the collectives go first, whatever fails on this rank after them */
    if (!(st = set_up_collective(e, err)) && !(st = register_model(e, err)) &&
        !(st = register_batch_buffers(e, err)))
        st = register_chunks(e, err);
    if (st) {
        np_engine_free(e);
        return st;
    }
    *out = e;
    return NP_OK;
}

/* The codelets' arguments every task of batch `batch` shares. */
void np_engine_batch_args(np_sp_engine *e, long batch, np_batch_args *b) {
    const np_model_t *m = e->m;
    int adagrad = m->cfg.sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD;
    b->ctx = (np_task_ctx){.batch = batch,
                           .window = -1,
                           .node = -1,
                           .chunk = -1,
                           .rank = e->cfg.rank,
                           .trace = e->trace,
                           .sink = &e->sink,
                           .comm_worker = e->comm_worker,
                           .compute_ctx = e->compute_ctx,
                           .where = e->dev.where,
                           .gpus = e->dev.ncuda};
    b->xa = (np_cl_xchg_args){.shard = e->cfg.shard,
                              /* the NCCL exchanges move rows only (config_check refuses
                               * pooled there) */
                              .exchange = e->nccl ? NP_EXCHANGE_ROWS : e->cfg.exchange,
                              .seq = e->cfg.seq_len > 0,
                              .rows = m->rows,
                              .comm = e->comm,
                              .nb = e->nb,
                              .T = m->T,
                              .d = m->d,
                              .R = e->R,
                              .W = e->W,
                              .cap_recv = e->cap.recv,
                              .cap_stage = e->cap.stage,
                              .cap_recv_keys = e->cap.recv_keys,
                              .cap_win = e->cap.win,
                              .n = m->n_dense,
                              .be = e->nccl};
    b->wa = (np_cl_rows_args){.T = m->T, .d = m->d, .with_state = adagrad, .row_base = m->row_base};
    b->sa = (np_cl_sparse_args){
        .d = m->d, .adagrad = adagrad, .lr = (float)m->cfg.lr, .eps = (float)m->cfg.adagrad_eps};
    b->da = (np_cl_dense_args){.n = m->n_dense, .lr = (float)m->cfg.lr};
    b->ya = (np_cl_sync_args){.T = m->T, .d = m->d, .with_state = adagrad};
}

int np_engine_lookahead(const np_sp_engine *e) {
    return e->pol.ahead;
}

np_pipeline np_engine_pipeline(const np_sp_engine *e) {
    return e->pol.mode;
}

np_status np_engine_drop_lookahead(np_sp_engine *e, int n, np_error *err) {
    if (e->step || e->pending)
        return np_err(err, NP_STATUS_INTERNAL, "the look-ahead can go only before the first step");
    /* every rank the same way: the fewest and the most batches any rank was given */
    int64_t most = n, least = -(int64_t)n;
    if (e->comm && (np_comm_allreduce_i64(e->comm, NP_CHAN_CTL, &most, 1) ||
                    np_comm_allreduce_i64(e->comm, NP_CHAN_CTL, &least, 1)))
        return np_err(err, NP_STATUS_INTERNAL, "rank %d: MPI failed agreeing on the look-ahead",
                      e->cfg.rank);
    least = -least;
    if (most < 2) {
        np_pipeline_policy_drop_lookahead(&e->pol);
        if (e->trace) np_trace_set_info(e->trace, "lookahead", "0");
    } else if (least < 2) { /* one rank can look ahead, another cannot: no schedule fits both */
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "rank %d: the first step was given %d batch%s here, but %lld to %lld on "
                      "the ranks; give every rank the same count (np_trainer_lookahead() + 1 "
                      "while the data lasts)",
                      e->cfg.rank, n, n == 1 ? "" : "es", (long long)least, (long long)most);
    }
    return NP_OK;
}

void np_engine_bytes(const np_sp_engine *e, uint64_t out[4]) {
    for (int i = 0; i < 4; i++)
        out[i] = __atomic_load_n(&e->sink.bytes[i], __ATOMIC_RELAXED);
}

uint64_t np_engine_synced_rows(const np_sp_engine *e) {
    return __atomic_load_n(&e->sink.synced, __ATOMIC_RELAXED);
}

void np_engine_segments(const np_sp_engine *e, uint64_t *segments, uint64_t *pooled) {
    *segments = __atomic_load_n(&e->sink.segments, __ATOMIC_RELAXED);
    *pooled = __atomic_load_n(&e->sink.pooled, __ATOMIC_RELAXED);
}

const np_trace *np_engine_trace(const np_sp_engine *e) {
    return e->merged;
}

double np_engine_clock_us(const np_sp_engine *e) {
    return e && e->trace ? starpu_timing_now() : 0;
}

void np_engine_trace_data(np_sp_engine *e, long batch, double start_us, double end_us) {
    np_engine_trace_driver(e, NP_NODE_DATA, "data", batch, start_us, end_us, 0);
}

void np_engine_trace_driver(np_sp_engine *e, np_node_kind kind, const char *name, long batch,
                            double start_us, double end_us, uint64_t bytes) {
    if (!e || !e->trace) return;
    np_trace_event ev = {.name = name,
                         .kind = kind,
                         .bytes = bytes,
                         .batch = batch,
                         .window = -1,
                         .node = -1,
                         .chunk = -1,
                         .rank = e->cfg.rank,
                         .worker = (int)starpu_worker_get_count(),
                         .start_us = start_us,
                         .end_us = end_us};
    np_trace_record(e->trace, &ev);
}
