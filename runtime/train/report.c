/* What a training run prints and logs (rank 0): progress lines on a terminal or every
 * "log-every" steps, the --log-json lines, the closing summary; and the SIGINT/SIGTERM
 * handlers that turn a signal into a clean stop after the step in flight.
 * Not here: when any of it happens (runtime/train/run.c). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>

#include "runtime/train/run_impl.h"

double np_run_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t np_run_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (int64_t)ru.ru_maxrss * 1024; /* Linux: kilobytes */
}

void np_run_progress(const np_run *u, long step, double loss, double sps, double elapsed,
                     int final) {
    const np_config *cfg = &u->cfg;
    if (cfg->quiet) return;
    long total = u->total_steps;
    /* step/total (~total: from a TSV's size; none for --steps 0 on synthetic data), the
     * epoch on file data of several passes, the loss (at the end: the summary's
     * train_loss), samples/s, and the time left, or at the end the time taken */
    char tot[32] = "", eta[48] = "", ep[48] = "";
    if (total > 0) snprintf(tot, sizeof tot, "/%s%ld", u->total_est ? "~" : "", total);
    if (cfg->epochs > 1 && u->per_pass > 0) {
        /* the step that ends a pass still belongs to it */
        uint64_t done = (uint64_t)step * (uint64_t)cfg->batch;
        long e = done ? (long)((done - 1) / u->per_pass) + 1 : 1;
        snprintf(ep, sizeof ep, "  epoch %ld/%d", e < cfg->epochs ? e : cfg->epochs, cfg->epochs);
    }
    if (final)
        snprintf(eta, sizeof eta, "  took %.1fs", elapsed);
    else if (total > step && step > 0 && sps > 0) /* from the rate: a resumed run started late */
        snprintf(eta, sizeof eta, "  ETA %.0fs", (double)(total - step) * (double)cfg->batch / sps);
    if (u->tty) {
        fprintf(stderr, "\rstep %ld%s%s  %s %.5f  %.0f samples/s%s   ", step, tot, ep,
                final ? "train_loss" : "loss", loss, sps, eta);
        if (final) fputc('\n', stderr);
        fflush(stderr);
    } else if (final || step % cfg->log_every == 0) {
        printf("step %ld%s%s  %s %.5f  samples/s %.0f%s\n", step, tot, ep,
               final ? "train_loss" : "loss", loss, sps, eta);
        fflush(stdout);
    }
}

/* A number for a JSON line: JSON has no NaN or infinity. */
static void json_num(FILE *f, const char *key, double x) {
    if (isfinite(x))
        fprintf(f, ", \"%s\": %.9g", key, x);
    else
        fprintf(f, ", \"%s\": null", key);
}

void np_run_eval_figures(const np_eval_result *ev, const char *prefix, char *buf, size_t n) {
    if (!isnan(ev->hr10))
        snprintf(buf, n, "%sloss %.5f  %shr@10 %.4f  %sndcg@10 %.4f", prefix, ev->logloss, prefix,
                 ev->hr10, prefix, ev->ndcg10);
    else
        snprintf(buf, n, "%slogloss %.5f  %sauc %.4f", prefix, ev->logloss, prefix, ev->auc);
}

int np_run_log_line(FILE *f, long step, double loss, double sps, double seconds,
                    const np_eval_result *ev) {
    fprintf(f, "{\"step\": %ld", step);
    if (!ev || !isnan(seconds)) { /* an evaluation during training has only its figures */
        json_num(f, ev ? "train_loss" : "loss", loss);
        json_num(f, "samples_per_s", sps);
        json_num(f, "seconds", seconds);
    }
    if (ev) {
        fprintf(f, ", \"eval_samples\": %ld", ev->n);
        json_num(f, "eval_logloss", ev->logloss);
        json_num(f, "eval_auc", ev->auc);
        if (!isnan(ev->hr10)) {
            json_num(f, "eval_hr10", ev->hr10);
            json_num(f, "eval_ndcg10", ev->ndcg10);
        }
    }
    fputs("}\n", f);
    return fflush(f) || ferror(f) ? -1 : 0; /* flushed: `tail -f` follows the run */
}

void np_run_print_done(const np_run *u) {
    const np_config *cfg = &u->cfg;
    const np_train_result *r = u->r;
    if (cfg->quiet) return;
    char sched[sizeof cfg->sched + sizeof cfg->sched_from + 24] = "";
    if (cfg->engine == NP_ENGINE_STARPU) /* the policy that ran, and where it came from */
        snprintf(sched, sizeof sched, "  sched %s (%s)", cfg->sched,
                 cfg->sched_from[0] ? cfg->sched_from : "default");
    char ev[96];
    np_run_eval_figures(&r->eval, "eval_", ev, sizeof ev);
    printf("done: steps %ld  samples/s %.0f  train_loss %.5f (first %.5f)  %s  (eval %ld "
           "samples)%s\n",
           r->steps, r->samples_per_s, r->train_loss, r->train_loss_first, ev, r->eval.n, sched);
    if (r->skipped_lines) printf("skipped %ld malformed lines (--skip-bad-lines)\n", r->skipped_lines);
    if (r->pipeline == NP_PIPELINE_DBP) {
        long ran = r->steps - u->s0 > 0 ? r->steps - u->s0 : 1;
        printf("dual-buffer sync: %.1f rows per step%s\n", (double)r->rows_synced / (double)ran,
               r->traced ? "" : " (sync time: run with --trace)");
        const np_trace_kind_time *sync = np_trace_summary_kind(&r->trace, "sync");
        if (r->traced && sync)
            printf("sync time %.3f ms per step\n", sync->total_us / 1e3 / (double)r->steps);
    }
}

/* The signal number; a second signal kills at once (SA_RESETHAND). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) {
    stop_signal = sig;
}

void np_run_catch_signals(np_run *u) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    stop_signal = 0;
    sigaction(SIGINT, &sa, &u->old_int);
    sigaction(SIGTERM, &sa, &u->old_term);
    u->caught = 1;
}

void np_run_restore_signals(np_run *u) {
    if (!u->caught) return;
    sigaction(SIGINT, &u->old_int, NULL);
    sigaction(SIGTERM, &u->old_term, NULL);
    u->caught = 0;
}

int np_run_stop_signal(void) {
    return stop_signal;
}
