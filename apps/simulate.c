/* `nestpipe simulate`: the projection of a traced run to N ranks (docs/scale.md). For each
 * N: the bytes every rank would send every other (np_route_stats_compute over the same
 * data at N ranks, the per-rank batch held), each collective's wire time on the platform
 * by the alpha-beta model and, where built with it, by SimGrid, then the replay of the
 * graph trace with those wire times (np_replay). One process, no MPI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "nestpipe/scale.h"
#include "nestpipe/stepgraph.h"
#include "nestpipe/trace.h"
#include "simgrid.h"

static const char *help =
    "usage: nestpipe simulate [--graph RUN.json] [--compute ONE.json] --ranks N[,N...]\n"
    "                         [platform flags] [output flags] [train flags]\n"
    "\n"
    "Projects a traced run, or the step graph of the train flags' run, to N ranks: the\n"
    "steady-state step time, samples/s, exposed exchange and efficiency per N. Every figure\n"
    "is a projection (docs/scale.md).\n"
    "  --graph FILE        a --trace of the run to project (2 ranks or more: its graph has\n"
    "                      the communication worker and the all-reduces); the train flags\n"
    "                      must be that run's (its data and model; --batch its global batch)\n"
    "                      Without it: the step graph the train flags' run submits at 2\n"
    "                      ranks (--batch the global batch of 2), 16 steps, scheduled on\n"
    "                      --workers compute lanes and a communication lane\n"
    "  --compute FILE      compute durations from this --trace of a one-rank run (no two\n"
    "                      ranks sharing cores); default: the graph's own (without --graph:\n"
    "                      each node's cost from the shape, a rough model)\n"
    "  --workers W         without --graph: compute workers a rank [2]\n"
    "  --ranks LIST        rank counts, e.g. 16,128,1536 (the per-rank batch is held)\n"
    "  --link-gbit G       each rank's NIC, Gbit/s [the graph's link_gbit fact, else 100]\n"
    "  --latency-us L      per message between ranks [5]\n"
    "  --host-ranks G      ranks a host: two tiers (G ranks on --intra-gbit links, their\n"
    "                      host's uplink of G x the NIC into a fabric oversubscribed\n"
    "                      --oversub times) [1: flat]\n"
    "  --intra-gbit G      [2400]   --intra-latency-us L [1]   --oversub X [1]\n"
    "  --a2a ALGO          direct | pairwise | bruck | hier: an All2All's latency steps;\n"
    "                      hier: the engine's --a2a hier over --host-ranks [direct]\n"
    "  --msg-us O          a message's own overhead at the sender [1]\n"
    "  --allreduce ALGO    direct | ring | rhd: the dense all-reduce's latency steps [direct]\n"
    "  --device-speed X    compute durations divided by X (a GPU's measured ratio) [1]\n"
    "  --collectives-from-graph   with --compute, the collectives' own part (MPI's software,\n"
    "                      the copies, the waits for peers) and the runtime's delays from\n"
    "                      the graph's run all the same\n"
    "  --cores-per-rank C  ranks share a machine's cores: a rank's compute workers get C\n"
    "                      cores (a check on a small machine: 2 cores, 4 ranks: 0.5) [none]\n"
    "  --model M           alpha-beta | simgrid | both [both when built with SimGrid]\n"
    "  --route-steps S     batches routed to measure the bytes at N [4]\n"
    "  --from-batch B      first steady-state batch of the replay [2]\n"
    "  --table FILE        write the table as Markdown\n"
    "  --json              the table as JSON lines on standard output instead\n"
    "  --svg FILE          efficiency against N, as an SVG line\n"
    "  --replay-trace FILE the replayed tasks at the last N, a trace for trace report/svg\n"
    "\n"
    "       nestpipe simulate --collective alltoall|allreduce --bytes B --ranks N[,N...]\n"
    "                         [platform flags]\n"
    "One collective alone: an All2All of B bytes a rank in equal blocks, or the dense\n"
    "all-reduce of B bytes as the engine runs it; its time by each model, in microseconds.\n";

static int bad(const char *msg, const char *arg) {
    fprintf(stderr, "nestpipe: simulate: %s%s (see nestpipe simulate --help)\n", msg, arg);
    return EXIT_BAD_INPUT;
}

static int number(const char *flag, const char *v, double lo, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < lo) {
        fprintf(stderr, "nestpipe: simulate: %s takes a number of %g or more, not '%s'\n", flag, lo, v);
        return EXIT_BAD_INPUT;
    }
    *out = x;
    return 0;
}

#define MAX_N 32
typedef struct sim {
    const char *graph, *compute, *table, *svg, *replay_trace, *model, *collective;
    double coll_bytes;
    int ranks[MAX_N], n_ranks;
    np_platform plat;
    double device_speed, route_steps, from_batch, cores_per_rank, workers;
    int link_given, json, coll_graph, workers_given;
} sim;

typedef struct row {
    int N;
    double wire_ab[NP_COLL_KINDS], wire_sg[NP_COLL_KINDS];
    np_replay_out ab, sg;
    int have_sg;
    double seconds;
} row;

static int parse(sim *s, int argc, char **argv, char **pass, int *n_pass) {
    s->plat = (np_platform){.nic_gbit = 100, .latency_us = 5, .host_ranks = 1, .intra_gbit = 2400,
                            .intra_latency_us = 1, .oversub = 1, .algo = NP_A2A_DIRECT, .msg_us = 1};
    s->device_speed = 1;
    s->route_steps = 4;
    s->from_batch = 2;
    s->workers = 2;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        static const char *with_value[] = {"--graph", "--compute", "--ranks", "--link-gbit", "--latency-us",
                                           "--host-ranks", "--intra-gbit", "--intra-latency-us",
                                           "--oversub", "--device-speed", "--model", "--route-steps",
                                           "--from-batch", "--table", "--svg", "--replay-trace",
                                           "--collective", "--bytes", "--a2a", "--msg-us",
                                           "--cores-per-rank", "--allreduce", "--workers", NULL};
        const char *eq = strchr(a, '=');
        size_t klen = eq ? (size_t)(eq - a) : strlen(a);
        int k = -1;
        for (int j = 0; with_value[j]; j++)
            if (strlen(with_value[j]) == klen && !strncmp(a, with_value[j], klen)) k = j;
        if (k < 0 && !strcmp(a, "--json")) {
            s->json = 1;
            continue;
        }
        if (k < 0 && !strcmp(a, "--collectives-from-graph")) {
            s->coll_graph = 1;
            continue;
        }
        if (k < 0) {
            pass[(*n_pass)++] = argv[i];
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) return bad("a value is missing after ", a);
        int rc = 0;
        double x = 0;
        switch (k) {
        case 0: s->graph = v; break;
        case 1: s->compute = v; break;
        case 2: {
            s->n_ranks = 0;
            for (const char *p = v; *p;) {
                char *end;
                long r = strtol(p, &end, 10);
                if (end == p || r < 1 || r > 65536 || s->n_ranks == MAX_N || (*end && *end != ','))
                    return bad("--ranks takes up to 32 counts from 1 to 65536 joined by ',', not ", v);
                s->ranks[s->n_ranks++] = (int)r;
                p = *end ? end + 1 : end;
            }
            break;
        }
        case 3: rc = number(a, v, 1e-6, &s->plat.nic_gbit); s->link_given = 1; break;
        case 4: rc = number(a, v, 0, &s->plat.latency_us); break;
        case 5: rc = number(a, v, 1, &x); s->plat.host_ranks = (int)x; break;
        case 6: rc = number(a, v, 1e-6, &s->plat.intra_gbit); break;
        case 7: rc = number(a, v, 0, &s->plat.intra_latency_us); break;
        case 8: rc = number(a, v, 1, &s->plat.oversub); break;
        case 9: rc = number(a, v, 1e-6, &s->device_speed); break;
        case 10: s->model = v; break;
        case 11: rc = number(a, v, 1, &s->route_steps); break;
        case 12: rc = number(a, v, 0, &s->from_batch); break;
        case 13: s->table = v; break;
        case 14: s->svg = v; break;
        case 15: s->replay_trace = v; break;
        case 16: s->collective = v; break;
        case 17: rc = number(a, v, 0, &s->coll_bytes); break;
        case 18:
            if (!strcmp(v, "direct")) s->plat.algo = NP_A2A_DIRECT;
            else if (!strcmp(v, "pairwise")) s->plat.algo = NP_A2A_PAIRWISE;
            else if (!strcmp(v, "bruck")) s->plat.algo = NP_A2A_BRUCK;
            else if (!strcmp(v, "hier")) s->plat.algo = NP_A2A_HIER;
            else return bad("--a2a takes direct, pairwise, bruck or hier, not ", v);
            break;
        case 19: rc = number(a, v, 0, &s->plat.msg_us); break;
        case 20: rc = number(a, v, 1e-3, &s->cores_per_rank); break;
        case 22:
            rc = number(a, v, 1, &s->workers);
            s->workers_given = 1;
            if (!rc && (s->workers > 4096 || s->workers != floor(s->workers)))
                return bad("--workers takes a whole number from 1 to 4096, not ", v);
            break;
        default:
            if (!strcmp(v, "direct")) s->plat.allreduce = NP_ALLREDUCE_DIRECT;
            else if (!strcmp(v, "ring")) s->plat.allreduce = NP_ALLREDUCE_RING;
            else if (!strcmp(v, "rhd")) s->plat.allreduce = NP_ALLREDUCE_RHD;
            else return bad("--allreduce takes direct, ring or rhd, not ", v);
            break;
        }
        if (rc) return rc;
    }
    if (s->collective && strcmp(s->collective, "alltoall") && strcmp(s->collective, "allreduce"))
        return bad("--collective takes alltoall or allreduce, not ", s->collective);
    if (!s->n_ranks) return bad("--ranks LIST is required", "");
    if (s->graph && s->workers_given)
        return bad("--workers is for the step graph without --graph (a trace has its own)", "");
    if (!s->model) s->model = np_sg_available() ? "both" : "alpha-beta";
    if (strcmp(s->model, "alpha-beta") && strcmp(s->model, "simgrid") && strcmp(s->model, "both"))
        return bad("--model takes alpha-beta, simgrid or both, not ", s->model);
    if (strcmp(s->model, "alpha-beta") && !np_sg_available())
        return bad("--model simgrid: SimGrid is not installed (Debian's libsimgrid3.32); use "
                   "--model alpha-beta", "");
    return 0;
}

/* A fact of the graph trace as a number; def when it has none. */
static double fact(const np_trace_t *t, const char *key, double def) {
    const char *v = np_trace_info(t, key);
    char *end;
    double x = v ? strtod(v, &end) : 0;
    return v && end != v && !*end ? x : def;
}

/* The wire times at p of the keys (a batch), the rows and the gradients (a window's mean)
 * and the dense all-reduce (a batch's, bandwidth part) by the alpha-beta model and, when
 * asked, SimGrid. */
static int wire_times(const sim *s, const np_platform *p, const np_route_stats *rs, double floats,
                      row *r) {
    int N = p->ranks;
    size_t nn = (size_t)N * N;
    double *m = malloc(4 * nn * sizeof *m);
    if (!m) return bad("out of memory for the byte matrices at ", "N");
    double *keys = m, *rows = m + nn, *grads = m + 2 * nn, *ar = m + 3 * nn;
    double per = 1.0 / (double)rs->steps, perw = per / rs->windows, each = floats * 4 / N;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            keys[(size_t)i * N + j] = (double)rs->keys[(size_t)i * N + j] * per;
            rows[(size_t)i * N + j] = (double)rs->rows[(size_t)i * N + j] * perw;
            grads[(size_t)i * N + j] = (double)rs->rows[(size_t)j * N + i] * perw;
            ar[(size_t)i * N + j] = i == j ? 0 : each;
        }
    double rounds = N > 1 ? np_alltoall_latency_us(p) : 0; /* the latency part alone */
    /* the keys go in two collectives: their counts (a fixed-size All2All, whose sizes need
     * no first round in two levels), then the keys */
    int g = p->host_ranks > 1 ? p->host_ranks : 1;
    double counts = rounds - (p->algo == NP_A2A_HIER && g > 1
                                  ? p->intra_latency_us + (g - 1) * p->msg_us
                                  : 0);
    r->wire_ab[NP_COLL_KEYS] = np_alltoall_us(p, keys) + counts;
    r->wire_ab[NP_COLL_ROWS] = np_alltoall_us(p, rows);
    r->wire_ab[NP_COLL_GRADS] = np_alltoall_us(p, grads);
    /* reduce-scatter then all-gather of n/N floats a pair, its bytes moved once whatever
     * --a2a says (the all-reduce's algorithm is --allreduce), the all-gather's across
     * hosts a slice a host under hier */
    double factor = np_alltoall_bytes_factor(p);
    r->wire_ab[NP_COLL_ALLREDUCE] = np_allreduce_bytes_us(p, each);
    int rc = 0;
    if (strcmp(s->model, "alpha-beta")) {
        const double *mats[4] = {keys, rows, grads, ar};
        char why[256];
        if (np_sg_alltoall_us(p, mats, 4, r->wire_sg, why, sizeof why)) {
            fprintf(stderr, "nestpipe: simulate: N=%d: %s\n", N, why);
            rc = 1;
        } else {
            r->have_sg = 1;
            r->wire_sg[NP_COLL_KEYS] += counts;
            r->wire_sg[NP_COLL_ALLREDUCE] = 2 * (r->wire_sg[NP_COLL_ALLREDUCE] - rounds) / factor;
        }
    }
    free(m);
    return rc;
}

#define GRAPH_STEPS 16 /* the step graph's, without --graph */

/* Without --graph: the step graph cfg's run would submit at 2 ranks as one rank's trace
 * (the replay runs it at each N; docs/scale.md "A graph without a trace"). */
static np_status graph_of(const np_config *cfg, int workers, np_trace_t **out, np_error *err) {
    np_config c = *cfg;
    c.ranks = 2; /* the caller checked the batch splits in two */
    np_step_graph_t *g;
    np_status st = np_step_graph_create(&c, GRAPH_STEPS, &g, err);
    if (st) return st;
    st = np_step_graph_trace(g, workers, out, err);
    np_step_graph_free(g);
    return st;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void print_row(FILE *f, int md, const row *r, long local_batch,
                      const char *model, const np_replay_out *o, const np_replay_out *ob) {
    double sps = o->step_us > 0 ? (double)local_batch * r->N / (o->step_us / 1e6) : 0;
    double eff = o->step_us > 0 ? ob->step_us / o->step_us : NAN;
    if (md == 2)
        fprintf(f, "{\"N\": %d, \"model\": \"%s\", \"step_us\": %.3f, \"samples_s\": %.1f, "
                   "\"exchange_us\": %.3f, \"exchange_exposed_us\": %.3f, \"lookup_exposed_us\": %.3f, "
                   "\"efficiency\": %.6f, \"seconds\": %.2f}\n",
                r->N, model, o->step_us, sps, o->exchange_us, o->exchange_exposed_us,
                o->lookup_exposed_us, eff, r->seconds);
    else if (md)
        fprintf(f, "| %d | %s | %.3f | %.0f | %.3f | %.3f | %.1f%% | %.1f |\n", r->N, model,
                o->step_us / 1e3, sps, o->exchange_us / 1e3, o->exchange_exposed_us / 1e3,
                100 * eff, r->seconds);
    else
        fprintf(f, "%6d  %-10s %10.3f %12.0f %10.3f %10.3f %8.1f%%\n", r->N, model, o->step_us / 1e3,
                sps, o->exchange_us / 1e3, o->exchange_exposed_us / 1e3, 100 * eff);
}

static void print_table(FILE *f, int md, const sim *s, const row *rows, int n, long local_batch) {
    if (md == 1)
        fprintf(f, "| N | model | step ms | samples/s | exchange ms | exposed ms | efficiency | seconds |\n"
                   "|---|---|---|---|---|---|---|---|\n");
    else if (!md)
        fprintf(f, "%6s  %-10s %10s %12s %10s %10s %9s\n", "N", "model", "step ms", "samples/s",
                "exchange", "exposed", "eff");
    for (int i = 0; i < n; i++) {
        if (strcmp(s->model, "simgrid"))
            print_row(f, md, &rows[i], local_batch, "alpha-beta", &rows[i].ab, &rows[0].ab);
        if (rows[i].have_sg && rows[0].have_sg)
            print_row(f, md, &rows[i], local_batch, "simgrid", &rows[i].sg, &rows[0].sg);
    }
}

/* Efficiency against N, one line per model, as a small self-contained SVG. */
static int write_svg(const char *path, const sim *s, const row *rows, int n) {
    np_error err = {{0}};
    np_outfile f;
    np_status st = np_outfile_open(&f, path, "--svg", &err);
    if (st) return np_cli_fail(st, &err);
    const double W = 640, H = 400, L = 60, R = 20, T = 40, B = 50;
    double lx0 = log2(rows[0].N), lx1 = log2(rows[n - 1].N);
    if (lx1 <= lx0) lx1 = lx0 + 1;
    fprintf(f.f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                 "<text x=\"%g\" y=\"20\">Projected scaling efficiency against N (weak scaling, "
                 "%.0f Gbit/s%s) - a projection</text>\n",
            W, H, L, s->plat.nic_gbit, s->plat.host_ranks > 1 ? ", two tiers" : "");
    for (int p = 0; p <= 10; p += 2) {
        double y = T + (H - T - B) * (1 - p / 10.0);
        fprintf(f.f, "<line x1=\"%g\" x2=\"%g\" y1=\"%g\" y2=\"%g\" stroke=\"#ddd\"/><text x=\"%g\" y=\"%g\" text-anchor=\"end\">%d%%</text>\n",
                L, W - R, y, y, L - 6, y + 4, p * 10);
    }
    for (int i = 0; i < n; i++) {
        double x = L + (W - L - R) * (log2(rows[i].N) - lx0) / (lx1 - lx0);
        fprintf(f.f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%d</text>\n", x, H - B + 18, rows[i].N);
    }
    fprintf(f.f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">ranks (log scale)</text>\n", (L + W - R) / 2, H - 12);
    const char *colour[2] = {"#1f77b4", "#d62728"};
    for (int m = 0; m < 2; m++) {
        if (m == 0 && !strcmp(s->model, "simgrid")) continue;
        if (m == 1 && !(rows[0].have_sg)) continue;
        fprintf(f.f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colour[m]);
        for (int i = 0; i < n; i++) {
            const np_replay_out *o = m ? &rows[i].sg : &rows[i].ab, *o0 = m ? &rows[0].sg : &rows[0].ab;
            double eff = o->step_us > 0 ? o0->step_us / o->step_us : 0;
            if (eff > 1) eff = 1;
            double x = L + (W - L - R) * (log2(rows[i].N) - lx0) / (lx1 - lx0), y = T + (H - T - B) * (1 - eff);
            fprintf(f.f, "%g,%g ", x, y);
        }
        fprintf(f.f, "\"/>\n<text x=\"%g\" y=\"%g\" fill=\"%s\">%s</text>\n", W - R - 120, T + 16 + 16 * m,
                colour[m], m ? "SimGrid" : "alpha-beta");
    }
    fprintf(f.f, "</svg>\n");
    st = np_outfile_commit(&f, ferror(f.f), &err);
    return st ? np_cli_fail(st, &err) : 0;
}

/* --collective: one collective alone at each N, by each model. */
static int one_collective(const sim *s) {
    printf("%-10s %6s %14s %14s %14s\n", "collective", "N", "bytes a rank", "alpha-beta us",
           strcmp(s->model, "alpha-beta") ? "simgrid us" : "");
    for (int i = 0; i < s->n_ranks; i++) {
        np_platform p = s->plat;
        p.ranks = s->ranks[i];
        np_error err = {{0}};
        np_status st = np_platform_check(&p, &err);
        if (st) return np_cli_fail(st, &err);
        int N = p.ranks, ar = !strcmp(s->collective, "allreduce");
        int frc = np_cli_fits_matrices("simulate", N, 8);
        if (frc) return frc;
        size_t nn = (size_t)N * N;
        double *m = malloc(nn * sizeof *m);
        if (!m) return bad("out of memory for the byte matrix", "");
        /* the engine's all-reduce: an all-gather of everything at 2 ranks, else a
         * reduce-scatter and an all-gather of 1/N each */
        double each = N < 2 ? 0 : ar ? (N == 2 ? s->coll_bytes : s->coll_bytes / N) : s->coll_bytes / (N - 1);
        int times = ar && N > 2 ? 2 : 1;
        for (size_t k = 0; k < nn; k++)
            m[k] = k % ((size_t)N + 1) ? each : 0;
        /* an all-reduce: its bytes as the exchanges above, its latency by --allreduce */
        double lat = np_alltoall_latency_us(&p), ar_lat = np_allreduce_latency_us(&p);
        double bf = np_alltoall_bytes_factor(&p); /* an all-reduce's bytes move once */
        double ab = ar ? np_allreduce_bytes_us(&p, N < 2 ? 0 : s->coll_bytes / N) + ar_lat
                       : np_alltoall_us(&p, m),
               sg = NAN;
        if (strcmp(s->model, "alpha-beta")) {
            char why[256];
            const double *mats[1] = {m};
            if (np_sg_alltoall_us(&p, mats, 1, &sg, why, sizeof why)) {
                free(m);
                fprintf(stderr, "nestpipe: simulate: N=%d: %s\n", N, why);
                return 1;
            }
            if (ar) sg = times * (sg - lat) / bf + ar_lat;
        }
        free(m);
        printf("%-10s %6d %14.0f %14.1f %14.1f\n", s->collective, N, s->coll_bytes, ab, sg);
    }
    return 0;
}

int np_cmd_simulate(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            return 0;
        }
    static sim s;
    memset(&s, 0, sizeof s);
    char **pass = calloc((size_t)argc + 1, sizeof *pass);
    int n_pass = 0;
    if (!pass) return bad("out of memory", "");
    int rc = parse(&s, argc, argv, pass, &n_pass);
    np_config cfg;
    np_config_defaults(&cfg);
    int want_help = 0, want_print = 0;
    if (!rc) rc = np_cli_parse_train_args(n_pass, pass, &cfg, &want_help, &want_print);
    free(pass);
    if (rc) return rc;
    if (s.collective) return one_collective(&s);
    for (const char *out[3] = {s.table, s.svg, s.replay_trace}, **o = out; o < out + 3; o++)
        if (*o && (rc = np_cli_not_a_config(*o, "output"))) return rc;
    np_error err = {{0}};
    np_trace_t *graph = NULL, *compute = NULL;
    if (!s.graph && cfg.batch % 2)
        return bad("without --graph, --batch is the global batch of the step graph's 2 ranks: "
                   "give an even one", "");
    np_status st = s.graph ? np_trace_read_chrome(s.graph, &graph, &err)
                           : graph_of(&cfg, (int)s.workers, &graph, &err);
    const char *from = s.graph ? s.graph : "the step graph";
    if (!st && s.compute) st = np_trace_read_chrome(s.compute, &compute, &err);
    if (st) {
        np_trace_free(graph);
        return np_cli_fail(st, &err);
    }
    double gr = fact(graph, "ranks", 1);
    int graph_ranks = gr >= 1 && gr <= 65536 ? (int)gr : 0;
    if (!graph_ranks) {
        fprintf(stderr, "nestpipe: simulate: %s says it ran %s ranks: not a trace nestpipe wrote\n",
                from, np_trace_info(graph, "ranks"));
        rc = EXIT_BAD_INPUT;
        graph_ranks = 1;
    }
    cfg.ranks = graph_ranks; /* the windows and the batch split of the graph's run */
    double graph_link = fact(graph, "link_gbit", 0);
    if (!s.link_given && graph_link > 0) s.plat.nic_gbit = graph_link;
    /* the flags must describe the graph's run */
    const char *gw = np_trace_info(graph, "windows"), *gp = np_trace_info(graph, "pipeline");
    char v[64];
    if (!rc && gw && (np_config_get(&cfg, "windows", v, sizeof v), 1) &&
        np_config_windows(&cfg) != atoi(gw)) {
        fprintf(stderr, "nestpipe: simulate: %s ran %s windows, the flags give %d: give the run's flags\n",
                from, gw, np_config_windows(&cfg));
        rc = EXIT_BAD_INPUT;
    }
    if (!rc && gp && np_config_get(&cfg, "pipeline", v, sizeof v) == 0 && strcmp(v, "auto") && strcmp(v, gp)) {
        fprintf(stderr, "nestpipe: simulate: %s ran pipeline %s, the flags give %s: give the run's flags\n",
                from, gp, v);
        rc = EXIT_BAD_INPUT;
    }
    if (!rc && cfg.batch % graph_ranks) rc = bad("--batch is not divisible by the graph's ranks", "");
    long local_batch = cfg.batch / (graph_ranks > 0 ? graph_ranks : 1);
    double floats = np_replay_dense_floats(graph, 0, (long)s.from_batch);
    if (!rc && graph_ranks < 2)
        fprintf(stderr, "nestpipe: simulate: warning: %s is a one-rank run: its graph has no "
                        "communication worker and no all-reduce (trace a run of 2 ranks)\n", from);
    row rows[MAX_N];
    memset(rows, 0, sizeof rows);
    if (!rc && !s.json) {
        printf("projection of %s (%d ranks, %ld samples a rank, pipeline %s, %s windows) on %s, "
               "NIC %g Gbit/s, latency %g us%s\n",
               from, graph_ranks, local_batch, gp ? gp : "?", gw ? gw : "?",
               s.plat.host_ranks > 1 ? "two tiers" : "a flat fabric", s.plat.nic_gbit,
               s.plat.latency_us, s.compute ? ", compute from the one-rank run" : "");
    }
    for (int i = 0; !rc && i < s.n_ranks; i++) /* the byte matrices must fit */
        rc = np_cli_fits_matrices("simulate", s.ranks[i], 16 + 32 + 8);
    for (int i = 0; !rc && i < s.n_ranks; i++) {
        double t0 = now_s();
        row *r = &rows[i];
        r->N = s.ranks[i];
        np_platform p = s.plat;
        p.ranks = r->N;
        if ((st = np_platform_check(&p, &err))) {
            rc = np_cli_fail(st, &err);
            break;
        }
        np_config at = cfg;
        at.batch = local_batch * r->N;
        np_route_stats rs;
        if ((st = np_route_stats_compute(&at, r->N, (long)s.route_steps, &rs, &err))) {
            rc = np_cli_fail(st, &err);
            break;
        }
        rc = wire_times(&s, &p, &rs, floats, r);
        np_route_stats_free(&rs);
        if (rc) break;
        for (int m = 0; m < 2 && !rc; m++) {
            if (m == 1 && !r->have_sg) continue;
            np_replay_cfg c = {.graph = graph, .compute = compute, .device_speed = s.device_speed,
                               .from_batch = (long)s.from_batch,
                               /* the step graph's later batches are its look-ahead's */
                               .to_batch = s.graph ? -1 : GRAPH_STEPS - 1,
                               /* its starts are a schedule, not a run's: no delays */
                               .no_gaps = !s.graph,
                               .graph_link_gbit = s.compute && !s.coll_graph ? 0 : graph_link,
                               .collectives_from_graph = s.coll_graph};
            memcpy(c.wire_us, m ? r->wire_sg : r->wire_ab, sizeof c.wire_us);
            c.allreduce_latency_us = np_allreduce_latency_us(&p);
            c.cores_per_rank = s.cores_per_rank;
            np_replay_out *o = m ? &r->sg : &r->ab;
            if ((st = np_replay(&c, o, &err))) rc = np_cli_fail(st, &err);
            if (!rc && o->unordered && m == 0)
                fprintf(stderr, "nestpipe: simulate: warning: N=%d: %ld tasks ran before their "
                                "step's submit call in the replay (the trace's order broke the "
                                "driver's)\n", r->N, o->unordered);
            if (!rc && (i + 1 < s.n_ranks || !s.replay_trace || (m == 0 && r->have_sg))) {
                np_trace_free(o->trace);
                o->trace = NULL;
            }
        }
        r->seconds = now_s() - t0;
        fprintf(stderr, "nestpipe: simulate: N=%d done in %.1f s\n", r->N, r->seconds);
    }
    if (!rc) print_table(stdout, s.json ? 2 : 0, &s, rows, s.n_ranks, local_batch);
    if (!rc && s.table) {
        np_outfile f;
        if ((st = np_outfile_open(&f, s.table, "--table", &err))) {
            rc = np_cli_fail(st, &err);
        } else {
            print_table(f.f, 1, &s, rows, s.n_ranks, local_batch);
            if ((st = np_outfile_commit(&f, ferror(f.f), &err))) rc = np_cli_fail(st, &err);
        }
    }
    if (!rc && s.svg) rc = write_svg(s.svg, &s, rows, s.n_ranks);
    const row *last = &rows[s.n_ranks - 1];
    np_trace_t *rt = last->sg.trace ? last->sg.trace : last->ab.trace;
    if (!rc && s.replay_trace && rt && (st = np_trace_write_file(rt, s.replay_trace, &err)))
        rc = np_cli_fail(st, &err);
    for (int i = 0; i < s.n_ranks; i++) {
        np_trace_free(rows[i].ab.trace);
        np_trace_free(rows[i].sg.trace);
    }
    np_trace_free(graph);
    np_trace_free(compute);
    return rc;
}
