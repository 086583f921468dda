/* Checks across keys (sizes that must agree, data layout vs model, what this build and this
 * machine can do), after every key is set. Not here: a single key's syntax (np_config_set)
 * or a model's own shape rules (the DLRM and DCN-v2 builders and each layer kind's shape
 * function, runtime/model/). */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/util.h"

/* What the rank count must divide: the batch, into pseudo-hosts. */
static np_status check_ranks(const np_config *c, np_error *err) {
    if (c->ranks > 1 && c->batch % c->ranks)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "batch: the global batch %ld is not divisible by %d ranks (each rank "
                      "takes batch/ranks samples); use a multiple of %d",
                      c->batch, c->ranks, c->ranks);
    if (c->ranks > 1 && c->ranks_per_host > 0 && c->ranks % c->ranks_per_host)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "ranks-per-host: pseudo-hosts of %d ranks do not divide %d ranks; use a "
                      "divisor of %d (or 0 for the real hosts)",
                      c->ranks_per_host, c->ranks, c->ranks);
    return NP_OK;
}

np_status np_config_check(const np_config *cfg, np_error *err) {
    const np_config *c = cfg;
    if (c->n_rows != 1 && c->n_rows != c->tables)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "rows: %d values given for %d tables; give one value or one per table",
                      c->n_rows, c->tables);
    /* a model file states every layer: the built-in models' size keys would be ignored */
    static const char *const builder_keys[] = {"model", "bottom", "top", "deep", "cross-layers",
                                               "cross-rank", "hstu-blocks", "hstu-heads"};
    for (size_t k = 0; c->model_file[0] && k < sizeof builder_keys / sizeof *builder_keys; k++)
        if (np_config_is_set(c, builder_keys[k]) == 1)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "%s: the model comes from model-file %s, whose nodes give every layer; "
                          "drop %s%s",
                          builder_keys[k], c->model_file, builder_keys[k],
                          !strcmp(builder_keys[k], "bottom")
                              ? " (dense-features sets the data's dense width)"
                              : "");
    if (c->seq_negatives > 0 && c->seq_len == 0)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "seq-negatives: %d negatives go before a sequence, and there is none: set "
                      "--seq-len",
                      c->seq_negatives);
    if (c->data == NP_DATA_MOVIELENS && c->seq_len < 2)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "data movielens:%s: its records are users' histories; set --seq-len L "
                      ">= 2 (table 0 a sequence of the last L movies)",
                      c->data_path);
    if (c->data == NP_DATA_MOVIELENS && np_config_is_set(c, "eval-every") == 1 &&
        c->eval_every != 2)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "eval-every: data movielens:%s holds out each user's last movie itself "
                      "(its records alternate: history, then history with the held-out movie); "
                      "leave eval-every unset",
                      c->data_path);
    if (c->eval_data == NP_DATA_MOVIELENS)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "eval-data movielens:%s: MovieLens holds its own evaluation records; use "
                      "data = movielens:PATH, which holds out each user's last movie",
                      c->eval_data_path);
    if (c->data == NP_DATA_CRITEO && (c->tables != 26 || np_config_dense(c) != 13))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "data criteo:%s: Criteo records have 13 dense and 26 categorical "
                      "features, but the model takes %d dense (dense-features, or the first "
                      "bottom size) and tables is %d",
                      c->data_path, np_config_dense(c), c->tables);
    if (c->checkpoint_every > 0 && !c->checkpoint_dir[0])
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "checkpoint-every: %ld steps, but no checkpoint-dir to write them to",
                      c->checkpoint_every);
    if (c->eval_data == NP_DATA_CRITEO && (c->tables != 26 || np_config_dense(c) != 13))
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "eval-data criteo:%s: Criteo records have 13 dense and 26 categorical "
                      "features, but the model takes %d dense (dense-features, or the first "
                      "bottom size) and tables is %d",
                      c->eval_data_path, np_config_dense(c), c->tables);
    if (c->ranks > 1 && c->engine != NP_ENGINE_STARPU)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "engine: the reference trainer runs in one process; run it without "
                      "mpirun or use --engine starpu with %d ranks",
                      c->ranks);
    if (c->comm == NP_COMM_NCCL) {
#ifndef NP_HAVE_CUDA
        return np_err(err, NP_STATUS_BAD_INPUT, "comm: nccl needs the CUDA flavour (docs/gpu.md)");
#else
        if (c->engine != NP_ENGINE_STARPU)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "comm: nccl moves the starpu engine's exchanges; the reference "
                          "trainer has none (use --engine starpu or --comm mpi)");
#endif
        if (c->exchange == NP_EXCHANGE_POOLED)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "exchange: pooled runs on the MPI exchanges; with comm nccl use "
                          "exchange rows or auto (which then exchanges rows)");
    }
    np_status st = check_ranks(c, err);
    if (st) return st;
    long local = c->batch / c->ranks;
    /* MPI counts are ints: a rank's keys go in one All2All (what it receives, make_room
     * checks once the ranks' batches are known) */
    if (c->data == NP_DATA_SYNTHETIC && c->ranks > 1) {
        double bag = c->hot <= 1 ? 1 : c->hot + c->hot / 2;
        double seq = c->seq_len > 0 ? (double)c->seq_len + c->seq_negatives : 0;
        double keys = (double)local * (c->tables * bag + seq);
        if (keys > INT_MAX)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "batch: a rank's %ld samples hold up to %.0f keys, past MPI's count "
                          "limit of 2^31 - 1 in one All2All; use a smaller --batch or more ranks",
                          local, keys);
    }
    int nwin = np_config_windows(c);
    if (c->engine == NP_ENGINE_STARPU && nwin == 1 && c->chunks > local)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "chunks: %d chunks of a local batch of %ld samples leave some empty; use "
                      "at most %ld",
                      c->chunks, local, local);
    if (c->engine == NP_ENGINE_STARPU && (long)nwin * c->chunks > local)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "chunks: %d windows of %d chunks of a local batch of %ld samples leave "
                      "some empty; use windows x chunks <= %ld",
                      nwin, c->chunks, local, local);
    if (c->engine == NP_ENGINE_STARPU && nwin * c->chunks > 64)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "chunks: %d windows of %d chunks make %d pieces; use windows x chunks "
                      "<= 64",
                      nwin, c->chunks, nwin * c->chunks);
    if (c->engine == NP_ENGINE_REFERENCE && c->pipeline != NP_PIPELINE_SEQUENTIAL &&
        c->pipeline != NP_PIPELINE_AUTO)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "pipeline: the reference trainer has no pipeline; use --engine starpu for "
                      "dbp, async, fwp or nestpipe");
    if (c->engine == NP_ENGINE_REFERENCE && c->gpus > 0)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "gpus: the reference trainer runs on the CPU only; use --engine starpu "
                      "for %d GPU%s",
                      c->gpus, c->gpus == 1 ? "" : "s");
    for (int k = 0; k < NP_PLACE_KINDS; k++)
        if (c->engine == NP_ENGINE_REFERENCE && c->place[k] == NP_ARCH_CUDA)
            return np_err(err, NP_STATUS_BAD_INPUT,
                          "place: the reference trainer runs on the CPU only; use --engine "
                          "starpu to place nodes on cuda");
    if (c->engine == NP_ENGINE_REFERENCE && c->trace[0])
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "trace: the reference engine runs no tasks to trace; use --engine starpu");
    if (c->data == NP_DATA_SYNTHETIC && c->epochs > 1)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "epochs: %d passes over synthetic data, which never ends; give --steps",
                      c->epochs);
    if (c->data == NP_DATA_SYNTHETIC && c->steps == 0)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "steps: 0 means 'until the data ends', but synthetic data never ends; "
                      "give a step count");
    /* memory: the tables (and Adagrad state) must fit in this machine's RAM */
    double bytes = 0;
    for (int t = 0; t < c->tables; t++) {
        double r = (double)np_config_rows(c, t);
        bytes += r * c->dim * 4.0;
        if (c->sparse_optim == NP_SPARSE_ROWWISE_ADAGRAD) bytes += r * 4.0;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes > (double)pages * (double)page * 0.9)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "rows/dim: the embedding tables need %.1f GiB but this machine has %.1f "
                      "GiB of memory; reduce rows or dim",
                      bytes / (1 << 30), (double)pages * page / (1 << 30));
    return NP_OK;
}
