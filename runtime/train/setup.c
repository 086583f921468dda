/* A training run's set-up, everything before its first step: the outputs checked before any
 * work, the data sources, the model (or the caller's graph), a checkpoint to resume from,
 * the trainer and the watchdog; each step agreed by every rank before the next collective.
 * Not here: the steps (runtime/train/run.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/util.h"
#include "runtime/data/data.h"
#include "runtime/train/agree.h"
#include "runtime/train/run_impl.h"

/* np_trainer_open: np_trainer_create without its refusal of the run's own keys
 * (runtime/train/trainer.c) */
np_status np_trainer_open(const np_config *cfg, np_model_t *m, np_trainer_t **out, np_error *err);

void np_run_rank_prefix(const np_config *cfg, np_error *err) {
    if (cfg->ranks <= 1) return;
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    snprintf(err->msg, sizeof err->msg, "rank %d: %.480s", cfg->rank, msg);
}

static int exit_class(np_status st) { /* the command's exit code: 2 bad input, 1 other */
    return !st ? 0 : st == NP_STATUS_BAD_INPUT || st == NP_STATUS_IO || st == NP_STATUS_UNSUPPORTED
                         ? 2
                         : 1;
}

np_status np_run_agree(np_run *u, np_status st, np_error *err) {
    const np_config *cfg = &u->cfg;
    int code = exit_class(st);
    int64_t failed = st != NP_OK, worst = code;
    if (np_dist_sum_i64(u->dist, &failed, NULL) || np_dist_max_i64(u->dist, &worst, NULL)) {
        u->r->must_abort = 1;
        return np_error_set(err, NP_STATUS_INTERNAL,
                            "rank %d: MPI failed while the ranks agreed on set-up", cfg->rank);
    }
    if (!failed) return NP_OK;
    np_status worst_st = worst == 2 ? NP_STATUS_BAD_INPUT : NP_STATUS_INTERNAL;
    if (failed == cfg->ranks) { /* the same flags and files everywhere: rank 0 says it once */
        u->r->err_quiet = !u->lead;
        return code == worst ? st : worst_st;
    }
    if (st) { /* this rank is one of those that failed */
        np_run_rank_prefix(cfg, err);
        u->r->err_quiet = 0;
        return code == worst ? st : worst_st;
    }
    u->r->err_quiet = !u->lead;
    np_error_set(err, worst_st, "%lld of %d ranks failed to set up; stopping (see their messages)",
                 (long long)failed, cfg->ranks);
    return worst_st;
}

/* An output path, checked before the first step so that a typo does not cost a whole run:
 * its folder exists and is writable, the file, if there, is a writable file, and a file can
 * be created there (a probe, removed at once: /proc and /sys folders pass access()). */
static np_status check_output(const char *flag, const char *path, np_error *err) {
    if (!path[0]) return NP_OK;
    char what[40];
    snprintf(what, sizeof what, "--%s", flag);
    struct stat sb;
    /* a device or FIFO is written in place: its folder (/dev) is not written */
    if (!stat(path, &sb) && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
        return np_outfile_probe(path, what, err);
    char dir[NP_PATH_MAX];
    np_path_folder(path, dir, sizeof dir);
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
        return np_error_set(err, NP_STATUS_IO, "--%s %s: the folder %s does not exist", flag,
                            path, dir);
    if (access(dir, W_OK))
        return np_error_set(err, NP_STATUS_IO, "--%s %s: the folder %s is not writable", flag,
                            path, dir);
    if (!stat(path, &sb)) {
        if (S_ISDIR(sb.st_mode))
            return np_error_set(err, NP_STATUS_IO, "--%s %s: is a folder, not a file", flag, path);
        if (access(path, W_OK))
            return np_error_set(err, NP_STATUS_IO, "--%s %s: the file is not writable", flag,
                                path);
    }
    return np_outfile_probe(path, what, err);
}

/* --checkpoint-dir: a writable folder, or one rank 0 can create (its parent exists). */
static np_status check_ckpt_dir(const char *path, np_error *err) {
    struct stat sb;
    if (!path[0]) return NP_OK;
    if (!stat(path, &sb)) {
        if (!S_ISDIR(sb.st_mode))
            return np_error_set(err, NP_STATUS_IO, "--checkpoint-dir %s: not a folder", path);
        if (access(path, W_OK))
            return np_error_set(err, NP_STATUS_IO,
                                "--checkpoint-dir %s: the folder is not writable", path);
        /* a probe of what a checkpoint makes first: a folder in it */
        char probe[NP_PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/.np-probe-XXXXXX", path);
        if (!mkdtemp(probe))
            return np_error_set(err, NP_STATUS_IO,
                                "--checkpoint-dir %s: cannot create a folder in it: %s", path,
                                strerror(errno));
        rmdir(probe);
        return NP_OK;
    }
    np_status st = check_output("checkpoint-dir", path, err); /* its parent's checks */
    /* a probe: rank 0 makes the folder at the first checkpoint; a folder of another name
     * beside it, so that nothing another process makes meanwhile is touched */
    char probe[NP_PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s.np-probe-XXXXXX", path);
    if (!st && !mkdtemp(probe))
        st = np_error_set(err, NP_STATUS_IO, "--checkpoint-dir %s: cannot create a folder there: %s",
                          path, strerror(errno));
    if (!st) rmdir(probe);
    return st;
}

/* Rank 0 writes the outputs: it checks them (every rank stops if one is bad). */
static np_status check_outputs(const np_run *u, np_error *err) {
    const np_config *c = &u->cfg;
    const char *outputs[4][2] = {{"metrics-json", c->metrics_json},
                                 {"dump-params", c->dump_params},
                                 {"trace", c->trace},
                                 {"log-json", c->log_json}};
    /* the files it reads: none may be an output (it would be replaced), nor two outputs one
     * file (the last written would win) */
    const char *inputs[4][2] = {{"--data", c->data != NP_DATA_SYNTHETIC ? c->data_path : ""},
                                {"--eval-data",
                                 c->eval_data != NP_DATA_SYNTHETIC ? c->eval_data_path : ""},
                                {"--init-params", c->resume[0] ? "" : c->init_params},
                                {"--model-file", c->model_file}};
    np_status st = NP_OK;
    char what[40];
    for (int k = 0; k < 4 && !st && u->lead; k++) {
        snprintf(what, sizeof what, "--%s", outputs[k][0]);
        for (int i = 0; i < 4 && !st; i++)
            st = np_output_not_input(outputs[k][1], what, inputs[i][1], inputs[i][0], err);
        for (int j = 0; j < k && !st; j++) {
            char other[40];
            snprintf(other, sizeof other, "--%s", outputs[j][0]);
            st = np_output_not_input(outputs[k][1], what, outputs[j][1], other, err);
        }
        if (!st) st = check_output(outputs[k][0], outputs[k][1], err);
    }
    if (!st && u->lead) st = check_ckpt_dir(c->checkpoint_dir, err);
    return st;
}

/* Sources, log, model: files and memory may fail on one rank only (a file missing on one
 * host); the caller agrees on the outcome before the trainer, whose creation is collective.
 * The model loads "init-params" itself (np_model_create_graph). */
static np_status open_inputs(np_run *u, const np_graph_t *graph, np_error *err) {
    np_config *cfg = &u->cfg;
    np_status st = NP_OK;
    /* a resumed run adds to the log of the run it continues */
    if (u->lead && cfg->log_json[0] && !(u->log = fopen(cfg->log_json, cfg->resume[0] ? "a" : "w")))
        st = np_error_set(err, NP_STATUS_IO, "--log-json %s: cannot create it: %s", cfg->log_json,
                          strerror(errno));
    if (!st) st = np_source_open(cfg, NP_SPLIT_TRAIN, &u->train, err);
    /* the progress line's total: --steps, or what the file's passes hold */
    u->total_steps = cfg->steps;
    if (!st && cfg->data != NP_DATA_SYNTHETIC) {
        u->per_pass = np_source_records_per_pass(u->train, &u->total_est);
        if (!cfg->steps) u->total_steps = (long)(u->per_pass * (uint64_t)cfg->epochs / (uint64_t)cfg->batch);
    }
    if (!st && u->lead) st = np_source_open(cfg, NP_SPLIT_EVAL, &u->eval, err);
    if (!st)
        st = graph ? np_model_create_graph(cfg, graph, &u->model, err)
                   : np_model_create(cfg, &u->model, err);
    return st;
}

/* --resume: every rank loads what it owns now (resharding when the rank count changed) and
 * moves its source there; a rank that fails says why, and all stop alike. */
static np_status resume(np_run *u, np_run_fail *how, np_error *err) {
    np_config *cfg = &u->cfg;
    np_train_result *r = u->r;
    np_ckpt_stats ls;
    np_status st = np_ckpt_load(cfg, u->model, u->cs, &ls, err);
    if (!st) st = np_source_seek(u->train, cfg->batch, &u->cs->data, err);
    int64_t v = st ? 1 : 0, hi = u->cs->step, lo = -u->cs->step;
    *how = NP_RUN_SETUP;
    if (np_dist_max_i64(u->dist, &v, NULL) || v) {
        if (st) {
            np_run_rank_prefix(cfg, err);
            return st;
        }
        r->err_quiet = 1; /* the rank that failed says why */
        return np_error_set(err, NP_STATUS_BAD_INPUT, "another rank failed to resume");
    }
    if (np_dist_max_i64(u->dist, &hi, NULL) || np_dist_max_i64(u->dist, &lo, NULL) || hi != -lo) {
        r->err_quiet = !u->lead;
        return np_error_set(err, NP_STATUS_BAD_INPUT,
                            "resume %s: the ranks found different newest checkpoints (steps %lld "
                            "and %lld); is a run still writing there?",
                            cfg->resume, (long long)-lo, (long long)hi);
    }
    if (cfg->steps && u->cs->step > cfg->steps) {
        r->err_quiet = !u->lead;
        return np_error_set(err, NP_STATUS_BAD_INPUT,
                            "resume %s: the newest checkpoint is at step %ld, past --steps %ld "
                            "(steps count from the start of the run it continues)",
                            cfg->resume, u->cs->step, cfg->steps);
    }
    if (u->lead && ls.skipped[0])
        fprintf(stderr, "nestpipe: warning: resume %s: passed over %s, newer than %s\n",
                cfg->resume, ls.skipped, ls.path);
    u->s0 = u->cs->step;
    r->steps = u->s0;
    r->train_loss_first = u->cs->loss_first;
    for (int i = 0; i < u->cs->n_losses; i++) {
        long k = u->s0 - u->cs->n_losses + i;
        if (k >= u->s0 - u->window) u->losses[k % u->window] = u->cs->losses[i];
    }
    r->resumed_step = u->s0;
    r->resume_seconds = ls.seconds;
    r->resume_bytes = ls.bytes;
    if (u->lead && !cfg->quiet)
        printf("resumed from %s: step %ld, %.1f MB read in %.3f s (%.0f MB/s)\n", ls.path, u->s0,
               ls.bytes / 1e6, ls.seconds, ls.seconds > 0 ? ls.bytes / 1e6 / ls.seconds : 0);
    return NP_OK;
}

np_status np_run_setup(np_run *u, const np_graph_t *graph, np_run_fail *how, np_error *err) {
    np_config *cfg = &u->cfg;
    np_train_result *r = u->r;
    *how = NP_RUN_SETUP;
    /* the same configuration on every rank before anything else (a rank given other flags,
     * another config file or another model file): every rank stops alike, rank 0 says why */
    np_status st = np_config_agree(u->dist, cfg, graph, err);
    if (st) {
        r->err_quiet = !u->lead;
        return st;
    }
    st = np_config_check(cfg, err);
    if (!st) st = check_outputs(u, err);
    if ((st = np_run_agree(u, st, err))) return st;
    /* where the workers and the driver run: first, since the driver's binding decides where
     * the tables are first touched (the engine prints it with "explain-placement") */
    if (cfg->engine == NP_ENGINE_STARPU)
        st = np_placement_explain(cfg, 1, r->placement, sizeof r->placement, err);
    /* --eval-data: every record of that file is evaluated, and every training record trains
     * (the sources do so; the config says so too, for the metrics and checkpoints) */
    if (cfg->eval_data != NP_DATA_SYNTHETIC) cfg->eval_every = 0;
    if (!st) st = open_inputs(u, graph, err);
    if ((st = np_run_agree(u, st, err))) return st;

    *how = NP_RUN_STEP; /* from here a rank's own failure stops the whole job */
    u->window = cfg->steps / 10 > 1 ? cfg->steps / 10 : 1;
    u->losses = calloc((size_t)u->window, sizeof *u->losses);
    u->cs = calloc(1, sizeof *u->cs);
    if (!u->losses || !u->cs) return np_error_set(err, NP_STATUS_NO_MEMORY, "out of memory");
    if (cfg->resume[0] && (st = resume(u, how, err))) return st;
    *how = NP_RUN_STEP;
    /* collective: a rank that fails inside it stops the whole job */
    if ((st = np_trainer_open(cfg, u->model, &u->tr, err))) return st;
    /* from here every step is collective: a rank that stalls the others is named */
    if ((st = np_dist_watchdog_start(u->dist, cfg->rank_timeout, &u->wd, err))) return st;
    r->pipeline = np_trainer_pipeline(u->tr);
    long local_n = cfg->batch / cfg->ranks;
    u->rd = (np_reader){.cfg = cfg,
                        .dist = u->dist,
                        .src = u->train,
                        .local = u->ring,
                        .lo = local_n * cfg->rank,
                        .local_n = local_n,
                        .r = r,
                        .tr = u->tr,
                        .loaded = u->s0,
                        .wd = u->wd};
    *how = NP_RUN_OK;
    return NP_OK;
}
