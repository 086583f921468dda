/* --metrics-json: a run's summary (np_train_result) and its config as one JSON object,
 * built with jansson (np_train_write_metrics, nestpipe/train.h). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/config_impl.h"
#include "nestpipe/train.h"

/* JSON has no NaN: an undefined figure (e.g. AUC of a one-class eval set) becomes null. */
static json_t *num(double x) {
    return isfinite(x) ? json_real(x) : json_null();
}

/* Name i of a NULL-ended table (runtime/core/config_values.c), "?" past its end. */
static const char *name_at(const char *const *names, int i) {
    for (int k = 0; names[k]; k++)
        if (k == i) return names[k];
    return "?";
}

/* A config key's value as JSON, typed by the key table: a number, a boolean, a string (null
 * when unset) or an array of integers. */
static json_t *key_value(const np_config *cfg, const np_config_key *k) {
    char v[NP_PATH_MAX + 64];
    if (np_config_get(cfg, k->name, v, sizeof v)) return json_null();
    switch (k->type) {
    case NP_KEY_INT: {
        if (!strcmp(v, "auto")) return json_string(v);
        if (v[0] != '-' && strtoull(v, NULL, 10) > (unsigned long long)LLONG_MAX)
            return json_string(v); /* a seed past 2^63: JSON integers are signed 64-bit */
        return json_integer(strtoll(v, NULL, 10));
    }
    case NP_KEY_REAL:
        return json_real(strtod(v, NULL));
    case NP_KEY_BOOL:
        return json_boolean(v[0] == '1');
    case NP_KEY_LIST: {
        json_t *a = json_array();
        for (char *p = v; *p;) {
            json_array_append_new(a, json_integer(strtoll(p, &p, 10)));
            if (*p) p++; /* '-' or ',' */
        }
        return a;
    }
    case NP_KEY_TEXT:
        break;
    }
    return v[0] ? json_string(v) : json_null();
}

np_status np_train_write_metrics(const char *path, const np_config *cfg,
                                 const np_train_result *r, np_error *err) {
    json_t *o = json_object();
    json_object_set_new(o, "steps", json_integer(r->steps));
    json_object_set_new(o, "global_batch", json_integer(r->global_batch));
    json_object_set_new(o, "samples_per_s", num(r->samples_per_s));
    json_object_set_new(o, "train_seconds", num(r->seconds));
    json_object_set_new(o, "data_seconds", num(r->data_seconds));
    json_object_set_new(o, "samples_per_s_compute", num(r->samples_per_s_compute));
    json_object_set_new(o, "train_loss", num(r->train_loss));
    json_object_set_new(o, "train_loss_first", num(r->train_loss_first));
    json_object_set_new(o, "eval_samples", json_integer(r->eval.n));
    json_object_set_new(o, "eval_logloss", num(r->eval.logloss));
    json_object_set_new(o, "eval_auc", num(r->eval.auc));
    json_object_set_new(o, "eval_hr10", num(r->eval.hr10));
    json_object_set_new(o, "eval_ndcg10", num(r->eval.ndcg10));
    /* the config keys, from the key table: every one under "config", and the ones with a
     * metric name also at the top; then the values the run resolved (auto, the policy) */
    json_t *config = json_object();
    for (int i = 0; np_config_key_at(i); i++) {
        const np_config_key *k = np_config_key_at(i);
        json_object_set_new(config, k->name, key_value(cfg, k));
        if (k->metric) json_object_set_new(o, k->metric, key_value(cfg, k));
    }
    json_object_set_new(o, "config", config);
    json_object_set_new(o, "pipeline",
                        json_string(cfg->engine == NP_ENGINE_REFERENCE ||
                                            (unsigned)r->pipeline > NP_PIPELINE_NESTPIPE
                                        ? "none"
                                        : name_at(np_cfg_pipeline_names, r->pipeline)));
    json_object_set_new(o, "sched",
                        cfg->engine == NP_ENGINE_REFERENCE ? json_null() : json_string(cfg->sched));
    /* where the policy came from: "default", "--sched", "FILE:LINE", "STARPU_SCHED[, over
     * POLICY from ORIGIN]"; a path of other bytes than UTF-8 is not a JSON string */
    json_t *from = NULL;
    if (cfg->engine != NP_ENGINE_REFERENCE) {
        from = json_string(cfg->sched_from[0] ? cfg->sched_from : "default");
        if (!from) from = json_string("(not UTF-8)");
    }
    json_object_set_new(o, "sched_from", from ? from : json_null());
    json_object_set_new(o, "windows", json_integer(np_config_windows(cfg)));
    json_object_set_new(o, "ranks", json_integer(cfg->ranks));
    json_t *bytes = json_object();
    static const char *kinds[] = {"keys", "rows", "grads", "allreduce"};
    for (int k = 0; k < 4; k++)
        json_object_set_new(bytes, kinds[k], json_integer((json_int_t)r->bytes[k]));
    json_object_set_new(o, "bytes_exchanged", bytes);
    /* how the embedding exchange went (key "exchange"): its remote (window, table, owner)
     * segments and the share of them sent pooled */
    json_object_set_new(o, "exchange_segments", json_integer((json_int_t)r->xchg_segments));
    json_object_set_new(o, "exchange_pooled_share",
                        num(r->xchg_segments ? (double)r->xchg_pooled / (double)r->xchg_segments
                                             : 0));
    json_object_set_new(o, "table_bytes_rank0", json_integer(r->table_bytes_rank0));
    json_object_set_new(o, "rows_synced", json_integer((json_int_t)r->rows_synced));
    json_object_set_new(o, "rows_synced_per_step",
                        num(r->steps ? (double)r->rows_synced / (double)r->steps : 0));
    json_object_set_new(o, "table_bytes_max_rank", json_integer(r->table_bytes_max));
    json_object_set_new(o, "buffer_bytes_rank0", json_integer(r->buffer_bytes_rank0));
    json_object_set_new(o, "buffer_bytes_max_rank", json_integer(r->buffer_bytes_max));
    json_object_set_new(o, "peak_rss_bytes_rank0", json_integer(r->peak_rss_rank0));
    json_object_set_new(o, "peak_rss_bytes_max_rank", json_integer(r->peak_rss_max));
    json_object_set_new(o, "data", json_string(name_at(np_cfg_data_names, cfg->data)));
    json_object_set_new(o, "skipped_lines", json_integer(r->skipped_lines));
    json_object_set_new(o, "data_ended", json_boolean(r->data_ended));
    /* the layers' own flop counts: dense GFLOP/s = this x samples/s / 1e9 */
    json_object_set_new(o, "dense_flop_per_sample",
                        json_real(r->dense_flop_fwd + r->dense_flop_bwd));
    json_object_set_new(o, "dense_flop_per_sample_fwd", json_real(r->dense_flop_fwd));
    json_object_set_new(o, "dense_kernels", json_string(np_dense_kernels()));
    json_object_set_new(o, "placement", r->placement[0] ? json_string(r->placement) : json_null());
    json_object_set_new(o, "resumed_step", json_integer(r->resumed_step));
    json_object_set_new(o, "resume_seconds", json_real(r->resume_seconds));
    json_object_set_new(o, "resume_mb_per_s",
                        r->resume_seconds > 0 ? json_real(r->resume_bytes / 1e6 / r->resume_seconds)
                                              : json_null());
    json_object_set_new(o, "checkpoints", json_integer(r->ckpt_count));
    json_object_set_new(o, "checkpoint_seconds", json_real(r->ckpt_seconds));
    json_object_set_new(o, "checkpoint_mb", json_real(r->ckpt_bytes / 1e6));
    json_object_set_new(o, "checkpoint_mb_per_s",
                        r->ckpt_seconds > 0 ? json_real(r->ckpt_bytes / 1e6 / r->ckpt_seconds)
                                            : json_null());
    if (r->traced) { /* the overlap figures of `nestpipe trace report`, overall */
        const np_trace_summary *t = &r->trace;
        json_t *tj = json_object();
        json_object_set_new(tj, "step_us", num(t->step_us));
        json_object_set_new(tj, "exchange_us", num(t->exchange_us));
        json_object_set_new(tj, "exchange_exposed_us", num(t->exchange_exposed_us));
        json_object_set_new(tj, "exchange_exposed_ratio", num(t->exchange_exposed_ratio));
        json_object_set_new(tj, "lookup_us", num(t->lookup_us));
        json_object_set_new(tj, "lookup_exposed_us", num(t->lookup_exposed_us));
        json_object_set_new(tj, "idle_us", num(t->idle_us));
        json_object_set_new(tj, "collective_us", num(t->collective_us));
        json_object_set_new(tj, "peer_wait_us", num(t->peer_wait_us));
        const np_trace_kind_time *sync = np_trace_summary_kind(t, "sync");
        json_object_set_new(tj, "sync_us_per_step",
                            num(r->steps && sync ? sync->total_us / (double)r->steps : 0));
        json_t *kinds = json_object();
        for (int k = 0; k < t->n_kinds; k++) {
            json_t *kj = json_object();
            json_object_set_new(kj, "total_us", num(t->kind[k].total_us));
            json_object_set_new(kj, "exposed_us", num(t->kind[k].exposed_us));
            json_object_set_new(kinds, t->kind[k].kind, kj);
        }
        json_object_set_new(tj, "kinds", kinds);
        json_object_set_new(o, "trace", tj);
    }
    /* through a unique temporary, fsync and rename: a full disk or a crash leaves the old
     * file (or none), never a cut one */
    np_outfile out;
    np_status st = np_outfile_open(&out, path, "metrics-json", err);
    if (!st) {
        int failed = json_dumpf(o, out.f, JSON_INDENT(2) | JSON_SORT_KEYS) != 0 ||
                     fputc('\n', out.f) == EOF;
        st = np_outfile_commit(&out, failed, err);
    }
    json_decref(o);
    return st;
}
