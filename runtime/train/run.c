/* np_train_run: a whole training job, the step loop and what follows it. Each step reads
 * ahead (runtime/train/reader.c), submits, waits, and agrees with the other ranks on its outcome
 * and on a stop signal; then progress, --log-json, a checkpoint and an evaluation when
 * due. After the last step: the totals over ranks, the model gathered on rank 0, its
 * evaluation, the dump and the metrics. Not here: the set-up (runtime/train/setup.c). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/train/run_impl.h"

/* Fault injection for the MPI tests: NP_TEST_KILL_RANK / NP_TEST_KILL_STEP make that rank
 * die (SIGKILL) before that step, as a crashed node would; NP_TEST_FAIL_RANK /
 * NP_TEST_FAIL_STEP make its step fail with an error instead, and NP_TEST_STALL_RANK /
 * NP_TEST_STALL_STEP make its driver sleep there for an hour, as a hung node would (for
 * the --rank-timeout watchdog). Returns 1 for a failure. */
static int maybe_die(const np_config *cfg, long step) {
    const char *r = getenv("NP_TEST_KILL_RANK"), *s = getenv("NP_TEST_KILL_STEP");
    if (r && s && atoi(r) == cfg->rank && atol(s) == step) raise(SIGKILL);
    r = getenv("NP_TEST_STALL_RANK");
    s = getenv("NP_TEST_STALL_STEP");
    if (r && s && atoi(r) == cfg->rank && atol(s) == step) sleep(3600);
    r = getenv("NP_TEST_FAIL_RANK");
    s = getenv("NP_TEST_FAIL_STEP");
    return r && s && atoi(r) == cfg->rank && atol(s) == step;
}

/* The losses a checkpoint keeps (the window train_loss averages), oldest first. */
static void keep_losses(np_ckpt_state *cs, const double *losses, long window, long steps) {
    long n = steps < window ? steps : window;
    if (n > NP_CKPT_LOSSES) n = NP_CKPT_LOSSES;
    cs->n_losses = (int)n;
    for (long i = 0; i < n; i++)
        cs->losses[i] = losses[(steps - n + i) % window];
}

/* A checkpoint after step s's update, before the next step's submits write the model:
 * taken at a step boundary, so the pipeline continues afterwards as if none was taken
 * (the later batches' read-only stages overlap the write). */
static np_status checkpoint(np_run *u, long s, np_error *err) {
    np_train_result *r = u->r;
    np_ckpt_stats cst;
    u->cs->step = r->steps;
    u->cs->data = u->rd.pos[s % NP_RING];
    u->cs->loss_first = r->train_loss_first;
    keep_losses(u->cs, u->losses, u->window, r->steps);
    np_status st = np_ckpt_save(u->dist, &u->cfg, u->tr, u->model, u->cs, &cst, err);
    if (st) return st;
    r->ckpt_count++;
    r->ckpt_seconds += cst.seconds;
    r->ckpt_bytes += cst.bytes;
    if (u->lead && !u->cfg.quiet) {
        if (u->tty) fputc('\n', stderr);
        printf("checkpoint step %ld: %.1f MB in %.3f s (%.0f MB/s) -> %s\n", r->steps,
               cst.bytes / 1e6, cst.seconds, cst.seconds > 0 ? cst.bytes / 1e6 / cst.seconds : 0,
               cst.path);
        fflush(stdout);
    }
    return NP_OK;
}

/* --eval-interval: the model after the step just waited for, held (no update writes it)
 * while rank 0 evaluates it on a fresh eval source: gathered first when there are several
 * ranks (collective). Every rank waits for rank 0's evaluation: none is stalled. */
static np_status eval_now(np_run *u, np_error *err) {
    const np_config *cfg = &u->cfg;
    np_train_result *r = u->r;
    double te = np_run_now();
    np_eval_result ev;
    memset(&ev, 0, sizeof ev);
    np_model_t *full = NULL;
    np_source_t *src = NULL;
    np_dist_watchdog_progress(u->wd, -1, 1);
    np_trainer_hold(u->tr);
    np_status st = cfg->ranks > 1 ? np_dist_gather_model(u->dist, u->model, &full, err) : NP_OK;
    if (!st && u->lead && !(st = np_source_open(cfg, NP_SPLIT_EVAL, &src, err)))
        st = np_evaluate(full ? full : u->model, src, cfg, &ev, err);
    np_trainer_release(u->tr);
    np_source_free(src);
    np_model_free(full);
    np_dist_watchdog_progress(u->wd, -1, 0);
    if (st) return st;
    r->eval_seconds += np_run_now() - te;
    r->evals++;
    if (u->lead && !cfg->quiet) {
        if (u->tty) fputc('\n', stderr);
        char figs[96];
        np_run_eval_figures(&ev, "", figs, sizeof figs);
        printf("eval at step %ld: %s  (%ld samples, %.3f s)\n", r->steps, figs, ev.n,
               np_run_now() - te);
        fflush(stdout);
    }
    if (u->log && np_run_log_line(u->log, r->steps, NAN, NAN, NAN, &ev))
        return np_error_set(err, NP_STATUS_IO, "--log-json %s: write error: %s", cfg->log_json,
                            strerror(errno));
    return NP_OK;
}

/* Step s: read ahead, submit, wait, agree on the outcome and on a stop signal (*stop), and
 * account the loss. Returns NP_OK, or a failure with *how: NP_RUN_STEP (this rank's, or
 * NP_OK in st with err empty when another rank failed), NP_RUN_SETUP for a divergence (the
 * same loss on every rank). *ended: the data has no batch s. */
static np_status step(np_run *u, long s, int *stop, int *ended, np_run_fail *how,
                      np_error *err) {
    const np_config *cfg = &u->cfg;
    np_train_result *r = u->r;
    np_reader *rd = &u->rd;
    int ahead = np_trainer_lookahead(u->tr);
    *how = NP_RUN_STEP;
    *stop = *ended = 0;
    np_dist_watchdog_progress(u->wd, s, 0);
    int injected = maybe_die(cfg, s);
    if (np_reader_fill(rd, s + ahead)) {
        *err = rd->err;
        return rd->st;
    }
    if (s >= rd->loaded) {
        *ended = 1;
        *how = NP_RUN_OK;
        return NP_OK;
    }
    const np_batch *win[NP_RING];
    int nwin = 0;
    for (long k = s; k < rd->loaded && nwin <= ahead; k++)
        win[nwin++] = &rd->local[k % NP_RING];
    double loss = 0;
    /* submitting may wait for earlier steps' tasks, which wait for the other ranks */
    np_dist_watchdog_progress(u->wd, s, 1);
    np_status st = injected ? np_error_set(err, NP_STATUS_INTERNAL, "injected failure at step %ld",
                                           s + 1)
                            : np_trainer_submit(u->tr, win, nwin, err);
    /* read the batch the next step will want while this one trains (the prefetch stage's
     * data), in every mode: batch generation stays off the critical path */
    int read_failed = !st && np_reader_fill(rd, s + 1 + ahead);
    np_dist_watchdog_progress(u->wd, s, 1); /* the step's tasks need the other ranks */
    if (!st) st = np_trainer_wait(u->tr, &loss, err);
    if (read_failed) {
        if (!st) {
            st = rd->st; /* NP_OK when another rank's read failed */
            *err = rd->err;
        }
        return st;
    }
    /* the step's outcome, and whether any rank was asked to stop (the same step on every
     * rank): a failure (1000) outranks a signal number */
    int64_t outcome = st ? 1000 : np_run_stop_signal();
    np_dist_watchdog_progress(u->wd, -1, 1);
    int mpi_failed = np_dist_max_i64(u->dist, &outcome, NULL) != NP_OK;
    np_dist_watchdog_progress(u->wd, -1, 0);
    if (mpi_failed || outcome >= 1000) return st;
    *stop = (int)outcome;
    if (np_dist_sum_f64(u->dist, &loss, 1, NULL))
        return np_error_set(err, NP_STATUS_INTERNAL, "MPI failed summing the loss");
    if (!isfinite(loss)) {
        *how = NP_RUN_SETUP; /* the same loss on every rank */
        r->err_quiet = !u->lead;
        return np_error_set(err, NP_STATUS_BAD_INPUT,
                            "training diverged: loss is %g at step %ld; lower --lr (now %g)", loss,
                            s + 1, cfg->lr);
    }
    if (s == 0) r->train_loss_first = loss;
    u->losses[s % u->window] = loss;
    r->steps = s + 1;
    u->recent += loss;
    u->recent_n++;
    double el = np_run_now() - u->t0 - r->ckpt_seconds - r->eval_seconds;
    double sps = (double)(r->steps - u->s0) * (double)cfg->batch / el;
    if (u->log && np_run_log_line(u->log, r->steps, loss, sps, el, NULL))
        return np_error_set(err, NP_STATUS_IO, "--log-json %s: write error: %s", cfg->log_json,
                            strerror(errno));
    /* the last step's line is the final one, printed after the loop with train_loss */
    if (u->lead && (!u->tty ? (r->steps % cfg->log_every == 0 && r->steps != cfg->steps)
                            : (el - u->last_print > 0.2))) {
        np_run_progress(u, r->steps, u->recent / u->recent_n, sps, el, 0);
        u->last_print = el;
        u->recent = 0;
        u->recent_n = 0;
    }
    if (cfg->checkpoint_dir[0] &&
        (*stop || (cfg->checkpoint_every && r->steps % cfg->checkpoint_every == 0)) &&
        (st = checkpoint(u, s, err)))
        return st;
    /* the last step's evaluation is the run's own */
    if (cfg->eval_interval && r->steps % cfg->eval_interval == 0 && !*stop &&
        !(cfg->steps && r->steps == cfg->steps) && (st = eval_now(u, err)))
        return st;
    *how = NP_RUN_OK;
    return NP_OK;
}

/* A sum over ranks of a counter (the same on every rank afterwards). */
static int sum_u64(np_dist_t *d, uint64_t *v) {
    int64_t x = (int64_t)*v;
    if (np_dist_sum_i64(d, &x, NULL)) return -1;
    *v = (uint64_t)x;
    return 0;
}

/* After the last step: the totals over ranks, the final progress line, the model gathered
 * on rank 0 (the last collective); then rank 0 alone evaluates, logs, prints, dumps and
 * writes the metrics (*how = NP_RUN_LOCAL for its own failures). */
static np_status finish(np_run *u, np_run_fail *how, np_error *err) {
    np_config *cfg = &u->cfg;
    np_train_result *r = u->r;
    np_status st;
    *how = NP_RUN_STEP;
    if ((st = np_trainer_finish(u->tr, err)) || np_run_outcome(u->dist, u->wd, 0)) return st;
    /* training time: checkpoints and evaluations during training apart */
    r->seconds = np_run_now() - u->t0 - r->ckpt_seconds - r->eval_seconds;
    double n = (double)(r->steps - u->s0) * (double)cfg->batch; /* samples this run trained */
    r->samples_per_s = r->seconds > 0 ? n / r->seconds : 0;
    r->samples_per_s_compute = r->seconds > r->data_seconds ? n / (r->seconds - r->data_seconds)
                                                             : 0;
    np_trainer_bytes(u->tr, r->bytes);
    r->rows_synced = np_trainer_synced_rows(u->tr);
    if (sum_u64(u->dist, &r->rows_synced)) return NP_OK;
    np_trainer_exchange_segments(u->tr, &r->xchg_segments, &r->xchg_pooled);
    if (sum_u64(u->dist, &r->xchg_segments) || sum_u64(u->dist, &r->xchg_pooled)) return NP_OK;
    for (int k = 0; k < 4; k++)
        if (sum_u64(u->dist, &r->bytes[k])) return NP_OK;
    int64_t tb = (int64_t)np_model_table_bytes(u->model);
    r->dense_flop_fwd = np_model_dense_flops(u->model, 0);
    r->dense_flop_bwd = np_model_dense_flops(u->model, 1);
    r->table_bytes_rank0 = tb;
    if (np_dist_max_i64(u->dist, &tb, NULL)) return NP_OK;
    r->table_bytes_max = tb;
    int64_t bb = (int64_t)np_trainer_buffer_bytes(u->tr), rss = np_run_peak_rss();
    r->buffer_bytes_rank0 = bb;
    r->peak_rss_rank0 = rss;
    if (np_dist_max_i64(u->dist, &bb, NULL) || np_dist_max_i64(u->dist, &rss, NULL)) return NP_OK;
    r->buffer_bytes_max = bb;
    r->peak_rss_max = rss;
    if (r->steps > 0) {
        long k = r->steps < u->window ? r->steps : u->window;
        double sum = 0;
        for (long i = 0; i < k; i++)
            sum += u->losses[i];
        r->train_loss = sum / k;
        if (u->lead) np_run_progress(u, r->steps, r->train_loss, r->samples_per_s, r->seconds, 1);
    }
    /* fewer steps than asked is worth a warning even under --quiet (metrics: data_ended);
     * --steps 0 asks for exactly this: the last progress line has said so */
    if (r->data_ended && u->lead && cfg->steps)
        fprintf(stderr, "nestpipe: warning: the training data ended after %ld steps of %ld "
                        "samples (before --steps)\n",
                r->steps, cfg->batch);
    if (r->steps == 0) {
        *how = NP_RUN_SETUP;
        r->err_quiet = !u->lead;
        return np_error_set(err, NP_STATUS_BAD_INPUT,
                            "data: not one full batch of %ld training samples in the data",
                            cfg->batch);
    }
    /* the logical model on rank 0: the single-process layout, whatever the rank count */
    if (cfg->ranks > 1 && (st = np_dist_gather_model(u->dist, u->model, &u->full, err))) return st;
    /* the last collective: rank 0 evaluates and writes alone from here */
    np_dist_watchdog_stop(u->wd);
    u->wd = NULL;
    *how = NP_RUN_LOCAL;
    if (!u->lead) return NP_OK;
    const np_trace_t *trace = np_trainer_trace(u->tr);
    if (trace) { /* a traced run reports its overlap figures too */
        if ((st = np_trace_summarize(trace, &r->trace, err))) return st;
        r->traced = 1;
    }
    const np_model_t *logical = u->full ? u->full : u->model;
    if ((st = np_evaluate(logical, u->eval, cfg, &r->eval, err))) return st;
    if (u->log) {
        int bad = np_run_log_line(u->log, r->steps, r->train_loss, r->samples_per_s, r->seconds,
                                  &r->eval);
        bad |= fclose(u->log);
        u->log = NULL;
        if (bad)
            return np_error_set(err, NP_STATUS_IO, "--log-json %s: write error: %s",
                                cfg->log_json, strerror(errno));
    }
    r->skipped_lines = np_source_skipped(u->train) + np_source_skipped(u->eval);
    np_run_print_done(u);
    if (cfg->dump_params[0] && (st = np_model_dump(logical, cfg->dump_params, err))) return st;
    if (cfg->metrics_json[0] && (st = np_train_write_metrics(cfg->metrics_json, cfg, r, err)))
        return st;
    *how = NP_RUN_OK;
    return NP_OK;
}

/* Every rank learns whether rank 0's outputs (evaluation, log, dump, metrics) failed, so
 * that no rank goes on to a collective (a program's np_dist_model_read) that rank 0, gone
 * to its error path, will never join. */
static np_status agree_outputs(np_run *u, np_status st, np_error *err) {
    int64_t failed = st != NP_OK;
    if (u->cfg.ranks <= 1) return st;
    if (np_dist_max_i64(u->dist, &failed, NULL)) {
        u->r->must_abort = 1;
        return st ? st : np_error_set(err, NP_STATUS_INTERNAL, "MPI failed at the run's end");
    }
    if (st || !failed) return st;
    u->r->err_quiet = 1; /* rank 0 says why */
    return np_error_set(err, NP_STATUS_IO, "rank 0 failed to write the run's outputs");
}

/* The step loop: until "steps", the data's end or a stop signal. */
static np_status loop(np_run *u, np_run_fail *how, np_error *err) {
    const np_config *cfg = &u->cfg;
    np_train_result *r = u->r;
    np_run_catch_signals(u);
    u->tty = u->lead && isatty(fileno(stderr));
    u->t0 = np_run_now();
    if (u->lead && r->pipeline == NP_PIPELINE_ASYNC)
        fprintf(stderr, "nestpipe: warning: --pipeline async trains on stale embedding rows (no "
                        "dual-buffer sync): it is not synchronous training, only a baseline\n");
    for (long s = u->s0; cfg->steps == 0 || s < cfg->steps; s++) {
        int stop, ended;
        np_status st = step(u, s, &stop, &ended, how, err);
        if (st || *how != NP_RUN_OK) return st;
        if (ended) {
            r->data_ended = 1;
            break;
        }
        if (stop) {
            if (u->lead)
                fprintf(stderr, "nestpipe: %s: stopped after step %ld%s\n",
                        stop == SIGINT ? "SIGINT" : stop == SIGTERM ? "SIGTERM" : "signal",
                        r->steps,
                        cfg->checkpoint_dir[0] ? "; resume with --resume and the checkpoint folder"
                                               : " (no --checkpoint-dir: nothing saved)");
            r->stopped = stop;
            return NP_OK;
        }
    }
    return finish(u, how, err);
}

/* Frees what the run holds: the trainer first, as it waits for tasks that read the ring. */
static void cleanup(np_run *u, np_model_t **keep) {
    np_dist_watchdog_stop(u->wd);
    np_run_restore_signals(u);
    if (u->log) fclose(u->log);
    free(u->losses);
    free(u->cs);
    np_trainer_free(u->tr);
    for (int k = 0; k < NP_RING; k++)
        np_batch_free(&u->ring[k]);
    np_model_free(u->full);
    if (keep)
        *keep = u->model;
    else
        np_model_free(u->model);
    np_source_free(u->train);
    np_source_free(u->eval);
    free(u);
}

np_status np_train_run(np_dist_t *dist, const np_config *cfg, const np_graph_t *graph,
                       np_model_t **model, np_train_result *res, np_error *err) {
    np_error own_err;
    if (!err) err = &own_err;
    if (model) *model = NULL;
    /* the result says whether the job must be aborted: a caller cannot go without it */
    if (!res || !cfg) return np_error_set(err, NP_STATUS_BAD_INPUT, "np_train_run: no %s given",
                                          !res ? "result (res)" : "config");
    memset(res, 0, sizeof *res);
    res->global_batch = cfg->batch;
    res->train_loss = res->train_loss_first = NAN;
    err->msg[0] = 0;
    np_run *u = calloc(1, sizeof *u);
    if (!u) {
        res->must_abort = np_dist_size(dist) > 1; /* the others wait in the first agreement */
        return np_error_set(err, NP_STATUS_NO_MEMORY, "out of memory starting a run");
    }
    u->cfg = *cfg;
    u->dist = dist;
    u->r = res;
    u->cfg.rank = np_dist_rank(dist);
    u->cfg.ranks = np_dist_size(dist);
    np_dist_host(dist, &u->cfg.local_rank, &u->cfg.local_ranks, &u->cfg.nodes);
    u->lead = u->cfg.rank == 0;
    if (!u->lead) u->cfg.quiet = 1;
    np_status st = NP_OK;
    /* StarPU lets STARPU_SCHED override the policy a program asks for (the help and docs say
     * so); check it like --sched and use it everywhere (the compute context too), so the
     * metrics name the policy that ran */
    int overrode = 0;
    if (u->cfg.engine == NP_ENGINE_STARPU) st = np_config_sched_env(&u->cfg, &overrode, err);
    if (overrode && u->lead) /* a policy given by flag or file that the environment replaced */
        fprintf(stderr, "nestpipe: warning: STARPU_SCHED=%s overrides sched %s from %s; unset "
                        "STARPU_SCHED to run %s\n",
                u->cfg.sched, cfg->sched, cfg->sched_from, cfg->sched);
    np_run_fail how = NP_RUN_SETUP;
    /* every rank agrees on the outcome so far, then on the configuration (np_run_setup) */
    if (!(st = np_run_agree(u, st, err))) st = np_run_setup(u, graph, &how, err);
    if (!st) st = loop(u, &how, err);
    if (how == NP_RUN_LOCAL || (how == NP_RUN_OK && !res->stopped && !st))
        st = agree_outputs(u, st, err);
    if (how == NP_RUN_STEP) {
        /* one rank failed mid-run: it says why, rank 0 that one did; the job stops */
        if (st) {
            np_run_rank_prefix(&u->cfg, err);
            res->err_quiet = 0;
        } else {
            st = np_error_set(err, NP_STATUS_INTERNAL,
                              "another rank failed; stopping (see its message)");
            res->err_quiet = !u->lead;
        }
        res->must_abort = u->cfg.ranks > 1;
        if (res->must_abort) {
            /* the others may be waiting in a collective: nothing more is safe to free */
            np_run_restore_signals(u);
            return st;
        }
    }
    cleanup(u, st ? NULL : model);
    return st;
}
