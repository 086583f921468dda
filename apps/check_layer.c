/* `nestpipe check-layer`: a layer kind's gradients against finite differences of its own
 * forward, and its kernel contract (np_layer_gradcheck), for built-in kinds and plugins.
 * Not here: the check itself (runtime/model/gradcheck.c). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nestpipe/layer.h"

#include "cli.h"

#define MAX_PLUGINS 32

static const char *help =
    "usage: nestpipe check-layer --kind K --in W1[,W2...] [--hp NAME=VALUE[,NAME=VALUE...]]\n"
    "                            [--plugin LIB.so]... [--rows N] [--tol X] [--seed S] [--no-cuda]\n"
    "       nestpipe check-layer --all [--plugin LIB.so]... [--rows N] [--tol X] [--seed S]\n"
    "       nestpipe check-layer --list [--plugin LIB.so]...\n"
    "\n"
    "Checks a layer kind on N random samples: its backward against central finite\n"
    "differences of its own forward for every element of every input and parameter\n"
    "(error |analytic - numeric| / max(|numeric|, 0.01)), and the kernel contract (forward\n"
    "gives the same bits twice and ignores what scratch held, backward overwrites din and\n"
    "dparam, takes din = NULL, and neither writes into its inputs or parameters). In the\n"
    "CUDA flavour with a GPU it also compares the CUDA slots with the CPU kernels.\n"
    "\n"
    "  --kind K          the layer kind (built-in, or registered by a --plugin)\n"
    "  --in W1,W2        the width of each input, floats per sample\n"
    "  --hp NAME=VALUE   hyper-parameters by the kind's names (--list) or slots i<k>, f<k>;\n"
    "                    repeatable\n"
    "  --plugin LIB.so   load a plugin first (repeatable)\n"
    "  --rows N          samples (default 4)\n"
    "  --tol X           the largest error that passes (default 0.01)\n"
    "  --seed S          seed of inputs, parameters and R (default 1)\n"
    "  --no-cuda         skip the CUDA comparison\n"
    "  --all             every registered kind at sample shapes (plugin kinds at 4-wide inputs)\n"
    "  --list            every registered kind: inputs, hyper-parameters, what it computes\n"
    "\n"
    "Exit 0 when every check passes, 1 when one fails, 2 for bad input.\n";

/* Shapes --all checks, by kind: inputs, hyper-parameters (--hp syntax), rows (0: --rows). */
typedef struct sample {
    const char *kind, *in, *hp;
    long rows;
} sample;
static const sample samples[] = {
    {"linear", "5", "out=4", 0},
    {"linear", "6", "out=3,relu=1", 0},
    {"linear", "7", "out=1,relu=1", 0},
    {"dot", "3", "", 0},
    {"dot", "3,6", "", 0},
    {"dot", "4,8,4", "", 17}, /* 16 rows and more: the blocked kernels, and a tail */
    {"concat", "5", "", 0},
    {"concat", "3,4,2", "", 0},
    {"cross", "6,6", "rank=0", 0},
    {"cross", "6,6", "rank=2", 0},
    {"slice", "7", "from=2,to=5", 0},
    {"slice", "5", "from=1", 0},
    {"hstu", "12", "len=3,heads=2,buckets=4", 0},
    {"nextitem", "12,12,15", "len=4", 0},
};

/* "nestpipe: check-layer: ..." on stderr; returns the bad-input exit code. */
static int bad(const char *fmt, ...) NP_FORMAT_PRINTF(1, 2);
static int bad(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "nestpipe: check-layer: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_BAD_INPUT;
}

/* "W1,W2,...": n widths >= 1. */
static int parse_widths(const char *s, int *w, int *n) {
    *n = 0;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > INT_MAX || (*end && *end != ',') ||
            *n == NP_LAYER_MAX_IN)
            return -1;
        w[(*n)++] = (int)v;
        if (!*end) return 0;
        p = end + 1;
    }
}

/* "NAME=VALUE,NAME=VALUE" into hp by kind's names. */
static np_status parse_hp(const char *kind, const char *list, np_layer_hp *hp, np_error *err) {
    char item[128];
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        if (!eq || eq == p || len >= sizeof item)
            return np_error_set(err, NP_STATUS_BAD_INPUT,
                                "check-layer: --hp '%.*s': expected NAME=VALUE", (int)len, p);
        memcpy(item, p, len);
        item[len] = 0;
        item[eq - p] = 0;
        np_error e = {{0}};
        if (np_layer_hp_set(kind, hp, item, item + (eq - p) + 1, &e))
            return np_error_set(err, NP_STATUS_BAD_INPUT, "check-layer: --hp: %s", e.msg);
        p += len;
        if (*p) p++;
    }
    return NP_OK;
}

/* "out=3 relu=1": the slots set, by name */
static void describe_hp(const np_layer_def *d, const np_layer_hp *hp, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < NP_LAYER_MAX_HP && at < n; i++) {
            const char *nm = r ? d->hp_real[i] : d->hp_int[i];
            char slot[8];
            if (r ? hp->f[i] == 0 : hp->i[i] == 0) continue;
            if (!nm) snprintf(slot, sizeof slot, "%c%d", r ? 'f' : 'i', i), nm = slot;
            at += r ? (size_t)snprintf(buf + at, n - at, "%s%s=%g", at ? " " : "", nm, hp->f[i])
                    : (size_t)snprintf(buf + at, n - at, "%s%s=%d", at ? " " : "", nm, hp->i[i]);
        }
}

/* One check and its report; returns 0 (passed), 1 (failed) or an exit code for an error.
 * verdict: 1 prints the final PASS/FAIL line, 0 an indented one (--all). */
static int check_one(const char *kind, const np_layer_hp *hp, int n_in, const int *w,
                     const np_gradcheck_opts *o, int verdict) {
    const np_layer_def *d = np_layer_find(kind);
    np_gradcheck_result res;
    np_error err = {{0}};
    np_status st = np_layer_gradcheck(kind, hp, n_in, w, o, &res, &err);
    if (st) {
        np_error e2;
        np_error_set(&e2, st, "check-layer: %s", err.msg);
        return np_cli_fail(st, &e2);
    }
    char hps[160], ins[96] = "";
    describe_hp(d, hp, hps, sizeof hps);
    for (int k = 0, at = 0; k < n_in && at < (int)sizeof ins; k++)
        at += snprintf(ins + at, sizeof ins - (size_t)at, "%s%d", k ? "," : "", w[k]);
    double tol = o->tol > 0 ? o->tol : 1e-2;
    long rows = o->rows > 0 ? o->rows : 4;
    printf("%s%s%s%s, in %s, %ld rows: out %d, saved %d, scratch %d\n", kind, hps[0] ? " (" : "",
           hps, hps[0] ? ")" : "", ins, rows, res.shape.out, res.shape.saved, res.shape.scratch);
    const char *worst = NULL;
    double worst_v = -1;
    for (int t = 0; t < res.n; t++) {
        const np_gradcheck_tensor *g = &res.t[t];
        char dims[48];
        if (t < n_in)
            snprintf(dims, sizeof dims, "(%ld, %d)", rows, w[t]);
        else {
            const np_param_shape *p = &res.shape.param[t - n_in];
            if (p->ndim == 2)
                snprintf(dims, sizeof dims, "(%lld, %lld)", (long long)p->dims[0],
                         (long long)p->dims[1]);
            else
                snprintf(dims, sizeof dims, "(%lld)", (long long)p->dims[0]);
        }
        printf("  %-8s %-10s worst %.2e at %ld (analytic %.7g, numeric %.7g)%s\n", g->name, dims,
               g->worst, g->worst_at, g->analytic, g->numeric,
               g->worst > tol ? "  <- over the tolerance" : "");
        if (g->worst > tol && g->worst > worst_v) worst = g->name, worst_v = g->worst;
    }
    printf("  contract: %s\n", res.contract[0] ? res.contract : "held");
    if (res.cuda_checked)
        printf("  cuda: worst difference from the CPU kernels %.2e at %s%s\n", res.cuda_worst,
               res.cuda_where, res.cuda_worst > tol ? "  <- over the tolerance" : "");
    else
        printf("  cuda: skipped (%s)\n", res.cuda_skipped);
    char why[320] = "";
    if (worst)
        snprintf(why, sizeof why, ": %s worst %.2e > tol %g", worst, worst_v, tol);
    else if (res.contract[0])
        snprintf(why, sizeof why, ": the kernel contract broke");
    else if (!res.passed)
        snprintf(why, sizeof why, ": the CUDA slots differ at %s", res.cuda_where);
    printf("%s%s%s\n", verdict ? "" : "  -> ", res.passed ? "PASS" : "FAIL", why);
    return !res.passed;
}

static void list_kinds(void) {
    for (int i = 0; np_layer_kind_at(i); i++) {
        const np_layer_def *d = np_layer_find(np_layer_kind_at(i));
        char ins[16], hps[256] = "";
        if (d->min_in == d->max_in)
            snprintf(ins, sizeof ins, "%d", d->min_in);
        else
            snprintf(ins, sizeof ins, "%d-%d", d->min_in, d->max_in);
        for (int r = 0, at = 0; r < 2; r++)
            for (int k = 0; k < NP_LAYER_MAX_HP && at < (int)sizeof hps; k++) {
                const char *nm = r ? d->hp_real[k] : d->hp_int[k];
                if (nm)
                    at += snprintf(hps + at, sizeof hps - (size_t)at, "%s%s%s", at ? ", " : "", nm,
                                   r ? " (real)" : "");
            }
        printf("%-12s inputs %-5s hp %-20s %s\n", d->kind, ins, hps[0] ? hps : "-",
               d->help ? d->help : "");
    }
}

/* Every registered kind at its samples; a kind without one at min_in inputs of width 4 and
 * no hyper-parameters, noted and skipped when its shape function refuses that. */
static int check_all(const np_gradcheck_opts *o) {
    int checks = 0, failed = 0, skipped = 0;
    for (int i = 0; np_layer_kind_at(i); i++) {
        const char *kind = np_layer_kind_at(i);
        int had = 0;
        for (size_t s = 0; s < sizeof samples / sizeof *samples; s++) {
            if (strcmp(samples[s].kind, kind)) continue;
            had = 1;
            np_layer_hp hp = {0};
            int w[NP_LAYER_MAX_IN], n_in;
            np_error err = {{0}};
            np_gradcheck_opts os = *o;
            if (!o->rows && samples[s].rows) os.rows = samples[s].rows;
            if (parse_widths(samples[s].in, w, &n_in) || parse_hp(kind, samples[s].hp, &hp, &err)) {
                printf("%s: the sample --in %s --hp %s does not fit the kind: %s\n  -> FAIL\n",
                       kind, samples[s].in, samples[s].hp, err.msg);
                failed++, checks++;
                continue;
            }
            int rc = check_one(kind, &hp, n_in, w, &os, 0);
            if (rc > 1) printf("  -> FAIL (the check did not run)\n");
            failed += rc != 0;
            checks++;
        }
        if (had) continue;
        const np_layer_def *d = np_layer_find(kind);
        int w[NP_LAYER_MAX_IN];
        for (int k = 0; k < d->min_in; k++)
            w[k] = 4;
        np_gradcheck_result res;
        np_error err = {{0}};
        np_layer_hp hp = {0};
        np_gradcheck_opts probe = *o;
        probe.rows = 1;
        probe.no_cuda = 1;
        if (np_layer_gradcheck(kind, &hp, d->min_in, w, &probe, &res, &err)) {
            printf("%s: skipped: no sample shape for it here, and %s (check it with --kind %s "
                   "--in ... --hp ...)\n",
                   kind, err.msg, kind);
            skipped++;
            continue;
        }
        failed += check_one(kind, &hp, d->min_in, w, o, 0) != 0;
        checks++;
    }
    if (failed)
        printf("FAIL (%d of %d checks failed, %d kinds skipped)\n", failed, checks, skipped);
    else
        printf("PASS (%d checks, %d kinds skipped)\n", checks, skipped);
    return failed ? 1 : 0;
}

int np_cmd_check_layer(int argc, char **argv) {
    const char *kind = NULL, *in = NULL, *hps[16], *plugins[MAX_PLUGINS];
    int n_hp = 0, n_plugins = 0, all = 0, list = 0;
    np_gradcheck_opts o = {0};
    for (int i = 0; i < argc; i++) {
        /* --flag value or --flag=value */
        char flag[32];
        const char *a = argv[i], *eq = strncmp(a, "--", 2) ? NULL : strchr(a, '='), *v = NULL;
        size_t fl = eq ? (size_t)(eq - a) : strlen(a);
        if (fl >= sizeof flag) fl = sizeof flag - 1;
        memcpy(flag, a, fl);
        flag[fl] = 0;
        static const char *const valued[] = {"--kind", "--in",  "--hp",  "--plugin",
                                             "--rows", "--tol", "--seed"};
        int takes = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++)
            takes |= !strcmp(flag, valued[k]);
        if (takes && eq)
            v = eq + 1;
        else if (takes && i + 1 < argc)
            v = argv[++i];
        else if (takes)
            return bad("%s needs a value", flag);
        else if (eq)
            return bad("unknown flag '%s' (see nestpipe check-layer --help)", a);
        char *end;
        errno = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "--all")) {
            all = 1;
        } else if (!strcmp(a, "--list")) {
            list = 1;
        } else if (!strcmp(a, "--no-cuda")) {
            o.no_cuda = 1;
        } else if (!strcmp(flag, "--kind")) {
            kind = v;
        } else if (!strcmp(flag, "--in")) {
            in = v;
        } else if (!strcmp(flag, "--hp")) {
            if (n_hp == (int)(sizeof hps / sizeof *hps)) return bad("more than 16 --hp");
            hps[n_hp++] = v;
        } else if (!strcmp(flag, "--plugin")) {
            if (n_plugins == MAX_PLUGINS) return bad("more than %d --plugin", MAX_PLUGINS);
            plugins[n_plugins++] = v;
        } else if (!strcmp(flag, "--rows")) {
            long r = strtol(v, &end, 10);
            if (end == v || *end || errno || r < 1 || r > 1000000)
                return bad("--rows '%s': expected an integer in [1, 1000000]", v);
            o.rows = r;
        } else if (!strcmp(flag, "--tol")) {
            double t = strtod(v, &end);
            if (end == v || *end || errno || !(t > 0) || !isfinite(t))
                return bad("--tol '%s': expected a number > 0", v);
            o.tol = t;
        } else if (!strcmp(flag, "--seed")) {
            unsigned long long sd = strtoull(v, &end, 10);
            if (end == v || *end || errno || v[0] == '-')
                return bad("--seed '%s': expected an integer >= 0", v);
            o.seed = (uint64_t)sd;
        } else if (a[0] == '-') {
            return bad("unknown flag '%s' (see nestpipe check-layer --help)", a);
        } else {
            return bad("unexpected argument '%s' (see nestpipe check-layer --help)", a);
        }
    }
    np_error err = {{0}};
    for (int p = 0; p < n_plugins; p++) {
        np_status st = np_plugin_load(plugins[p], &err);
        if (st) return np_cli_fail(st, &err);
    }
    if (list) {
        list_kinds();
        return 0;
    }
    if (all) {
        if (kind || in || n_hp)
            return bad("--all checks every kind at its own shapes: leave out --kind, --in and "
                       "--hp");
        return check_all(&o);
    }
    if (!kind || !in)
        return bad("--kind K and --in W1[,W2...] are needed (or --all, --list; see nestpipe "
                   "check-layer --help)");
    if (!np_layer_find(kind))
        return bad("unknown layer kind '%s' (--list names the registered kinds%s)", kind,
                   n_plugins ? "" : "; a plugin's kinds need --plugin");
    int w[NP_LAYER_MAX_IN], n_in;
    if (parse_widths(in, w, &n_in))
        return bad("--in '%s': expected the input widths as W1[,W2...], integers >= 1, at most "
                   "%d",
                   in, NP_LAYER_MAX_IN);
    np_layer_hp hp = {0};
    for (int h = 0; h < n_hp; h++) {
        np_status st = parse_hp(kind, hps[h], &hp, &err);
        if (st) return np_cli_fail(st, &err);
    }
    return check_one(kind, &hp, n_in, w, &o, 1);
}
