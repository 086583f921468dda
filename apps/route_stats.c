/* `nestpipe route-stats --ranks N [train flags]`: the bytes every rank would send every other
 * in the keys', rows' and gradients' exchanges of N ranks, from the training data and the
 * sharding alone (np_route_stats_compute; docs/scale.md "What N ranks would exchange"). A
 * single process, no MPI: N may be far more ranks than this machine runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "nestpipe/scale.h"

static const char *help =
    "usage: nestpipe route-stats --ranks N [--json] [--matrix FILE] [train flags]\n"
    "\n"
    "The bytes each of N ranks would send the others in the embedding exchanges of the\n"
    "first --steps global batches of the training data (--batch is the global batch, as\n"
    "for train at N ranks): the keys' All2All (the counts included), the rows and the\n"
    "gradients, to other ranks only, as the engine counts them (metrics bytes_exchanged);\n"
    "and the exchange buffers each rank would size for the first batch, at the engine's\n"
    "bounds and at its exact counts (docs/engine.md \"Memory and time per rank\").\n"
    "The train flags give the data, sharding, windows, clustering and exchange form.\n"
    "  --ranks N       ranks to route for (1 to 65536, as memory allows: 16 N x N bytes)\n"
    "  --json          one JSON object instead of the table\n"
    "  --matrix FILE   write the per-peer bytes as TSV: kind, from, to, bytes (a step's mean)\n";

static int bad(const char *msg, const char *arg) {
    fprintf(stderr, "nestpipe: route-stats: %s%s (see nestpipe route-stats --help)\n", msg, arg);
    return EXIT_BAD_INPUT;
}

static void print_table(const np_route_stats *s, const np_config *cfg) {
    int R = s->ranks;
    double per = 1.0 / (double)s->steps;
    printf("route-stats: %d ranks, %ld steps of %ld samples (%ld a rank), %d windows, "
           "sharding %s, exchange %s (bytes a step, to other ranks)\n",
           R, s->steps, cfg->batch, cfg->batch / R, s->windows,
           cfg->shard == NP_SHARD_ROW ? "row" : cfg->shard == NP_SHARD_TABLE ? "table" : "spread",
           cfg->exchange == NP_EXCHANGE_AUTO ? "auto" : cfg->exchange == NP_EXCHANGE_ROWS ? "rows" : "pooled");
    printf("%-8s %14s %14s %14s %14s\n", "rank", "keys sent", "rows sent", "grads sent", "rows recvd");
    uint64_t tk = 0, tr = 0, mx = 0;
    for (int r = 0; r < R; r++) {
        uint64_t k = np_route_stats_rank(s, s->keys, r, 0), rs = np_route_stats_rank(s, s->rows, r, 0),
                 g = np_route_stats_rank(s, s->rows, r, 1);
        tk += k;
        tr += rs;
        uint64_t load = rs > g ? rs : g;
        if (load > mx) mx = load;
        if (R <= 16 || r < 8 || r >= R - 4)
            printf("%-8d %14.0f %14.0f %14.0f %14.0f\n", r, k * per, rs * per, g * per, g * per);
        else if (r == 8)
            printf("%-8s\n", "...");
    }
    printf("%-8s %14.0f %14.0f %14.0f\n", "all", tk * per, tr * per, tr * per);
    if (tr) printf("row load: the busiest rank moves %.2fx the mean\n", (double)mx * R / (double)tr);
    printf("segments %llu to other ranks, %llu pooled\n", (unsigned long long)s->segments,
           (unsigned long long)s->pooled);
    /* the exchange buffers of the first batch (docs/engine.md "Memory per rank") */
    int big = 0;
    double ratio = 0;
    for (int r = 0; r < R; r++) {
        if (s->buffer_bytes[r] > s->buffer_bytes[big]) big = r;
        double x = s->buffer_exact[r] ? (double)s->buffer_bytes[r] / (double)s->buffer_exact[r] : 0;
        if (x > ratio) ratio = x;
    }
    printf("exchange buffers a rank sizes (first batch): largest %.3f MB (rank %d; %.3f MB at its "
           "exact counts), at most %.2fx the exact size on any rank; %.3f MB each when sized "
           "R x the largest batch (before 0.8)\n",
           (double)s->buffer_bytes[big] / 1e6, big, (double)s->buffer_exact[big] / 1e6, ratio,
           (double)s->buffer_before / 1e6);
}

static void print_json(const np_route_stats *s, const np_config *cfg) {
    int R = s->ranks;
    uint64_t tk = 0, tr = 0;
    for (int r = 0; r < R; r++) {
        tk += np_route_stats_rank(s, s->keys, r, 0);
        tr += np_route_stats_rank(s, s->rows, r, 0);
    }
    printf("{\"ranks\": %d, \"steps\": %ld, \"batch\": %ld, \"windows\": %d, \"dim\": %d,\n"
           " \"bytes_exchanged\": {\"keys\": %llu, \"rows\": %llu, \"grads\": %llu},\n"
           " \"segments\": %llu, \"pooled\": %llu,\n \"per_rank\": [",
           R, s->steps, cfg->batch, s->windows, s->dim, (unsigned long long)tk,
           (unsigned long long)tr, (unsigned long long)tr, (unsigned long long)s->segments,
           (unsigned long long)s->pooled);
    for (int r = 0; r < R; r++)
        printf("%s\n  {\"rank\": %d, \"keys_sent\": %llu, \"rows_sent\": %llu, \"grads_sent\": %llu, "
               "\"keys_received\": %llu, \"rows_received\": %llu, \"buffer_bytes\": %llu, "
               "\"buffer_bytes_exact\": %llu}",
               r ? "," : "", r, (unsigned long long)np_route_stats_rank(s, s->keys, r, 0),
               (unsigned long long)np_route_stats_rank(s, s->rows, r, 0),
               (unsigned long long)np_route_stats_rank(s, s->rows, r, 1),
               (unsigned long long)np_route_stats_rank(s, s->keys, r, 1),
               (unsigned long long)np_route_stats_rank(s, s->rows, r, 1),
               (unsigned long long)s->buffer_bytes[r], (unsigned long long)s->buffer_exact[r]);
    printf("],\n \"buffer_bytes_before\": %llu}\n", (unsigned long long)s->buffer_before);
}

static int write_matrix(const np_route_stats *s, const char *path) {
    np_error err = {{0}};
    np_outfile f;
    np_status st = np_outfile_open(&f, path, "--matrix", &err);
    if (st) return np_cli_fail(st, &err);
    int R = s->ranks, failed = fprintf(f.f, "kind\tfrom\tto\tbytes\n") < 0;
    for (int i = 0; i < R && !failed; i++)
        for (int j = 0; j < R && !failed; j++) {
            size_t ij = (size_t)i * R + j, ji = (size_t)j * R + i;
            double per = 1.0 / (double)s->steps;
            if (s->keys[ij]) failed |= fprintf(f.f, "keys\t%d\t%d\t%.1f\n", i, j, s->keys[ij] * per) < 0;
            if (s->rows[ij]) failed |= fprintf(f.f, "rows\t%d\t%d\t%.1f\n", i, j, s->rows[ij] * per) < 0;
            if (s->rows[ji]) failed |= fprintf(f.f, "grads\t%d\t%d\t%.1f\n", i, j, s->rows[ji] * per) < 0;
        }
    st = np_outfile_commit(&f, failed, &err);
    return st ? np_cli_fail(st, &err) : 0;
}

int np_cmd_route_stats(int argc, char **argv) {
    int ranks = 0, json = 0;
    const char *matrix = NULL;
    char **pass = calloc((size_t)argc + 1, sizeof *pass);
    int n_pass = 0;
    if (!pass) return bad("out of memory", "");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            free(pass);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--ranks") || !strncmp(a, "--ranks=", 8) || !strcmp(a, "--matrix") ||
                   !strncmp(a, "--matrix=", 9)) {
            const char *eq = strchr(a, '='), *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v) {
                free(pass);
                return bad("a value is missing after ", a);
            }
            if (a[2] == 'm') {
                matrix = v;
            } else {
                char *end;
                long n = strtol(v, &end, 10);
                if (end == v || *end || n < 1 || n > 65536) {
                    free(pass);
                    return bad("--ranks takes a count from 1 to 65536, not ", v);
                }
                ranks = (int)n;
            }
        } else {
            pass[n_pass++] = argv[i];
        }
    }
    if (!ranks) {
        free(pass);
        return bad("--ranks N is required", "");
    }
    np_config cfg;
    np_config_defaults(&cfg);
    int want_help = 0, want_print = 0;
    int rc = np_cli_parse_train_args(n_pass, pass, &cfg, &want_help, &want_print);
    free(pass);
    if (rc) return rc;
    if (want_print) return bad("--print-config is train's", "");
    if (cfg.steps < 1) return bad("--steps must be 1 or more here (the batches to route)", "");
    if (matrix && (rc = np_cli_not_a_config(matrix, "--matrix"))) return rc;
    if ((rc = np_cli_fits_matrices("route-stats", ranks, 16))) return rc;
    np_error err = {{0}};
    np_route_stats s;
    np_status st = np_route_stats_compute(&cfg, ranks, cfg.steps, &s, &err);
    if (st) return np_cli_fail(st, &err);
    if (json)
        print_json(&s, &cfg);
    else
        print_table(&s, &cfg);
    rc = matrix ? write_matrix(&s, matrix) : 0;
    np_route_stats_free(&s);
    return rc;
}
