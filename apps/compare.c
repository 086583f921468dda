/* `nestpipe compare A B [--rtol R] [--atol A]`: compares two NPPARAMS dumps tensor by
 * tensor with |a-b| <= atol + rtol*|b| (B is the reference). Prints the worst element per
 * tensor; exit 0 when all are within tolerance, 1 when not, 2 for a file that is not a whole,
 * valid dump (the checks of np_params_open: docs/formats.md), with no verdict. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "cli.h"
#include "nestpipe/nestpipe.h"

int np_cmd_compare(int argc, char **argv) {
    const char *pa = NULL, *pb = NULL;
    double rtol = 1e-4, atol = 1e-5;
    for (int i = 0; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs("usage: nestpipe compare A.params B.params [--rtol R] [--atol A]\n"
                  "\n"
                  "Compares two --dump-params files tensor by tensor: the same names and shapes,\n"
                  "and every element within |a - b| <= atol + rtol |b|. Prints the worst element\n"
                  "of each tensor. Exit 0: the same model within tolerance; 1: a difference; 2: a\n"
                  "bad file or flag.\n"
                  "\n"
                  "  --rtol R   relative tolerance [1e-4]\n"
                  "  --atol A   absolute tolerance [1e-5]\n",
                  stdout);
            return 0;
        }
        if ((!strcmp(argv[i], "--rtol") || !strcmp(argv[i], "--atol")) && i + 1 < argc) {
            double v = strtod(argv[i + 1], &end);
            if (*end || !(v >= 0)) {
                fprintf(stderr, "nestpipe: %s: bad value '%s', expected a number >= 0\n", argv[i],
                        argv[i + 1]);
                return 2;
            }
            if (argv[i][2] == 'r')
                rtol = v;
            else
                atol = v;
            i++;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "nestpipe: compare: unknown flag '%s'\n", argv[i]);
            return 2;
        } else if (!pa) {
            pa = argv[i];
        } else if (!pb) {
            pb = argv[i];
        } else {
            fprintf(stderr, "nestpipe: compare: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!pa || !pb) {
        fprintf(stderr,
                "nestpipe: usage: nestpipe compare A.params B.params [--rtol R] [--atol A]\n");
        return 2;
    }
    np_error err = {{0}};
    np_params_reader *a = NULL, *b = NULL;
    np_status st = np_params_open(pa, "compare", &a, &err);
    if (!st) st = np_params_open(pb, "compare", &b, &err);
    int differ = 0;
    size_t bad_total = 0;
    float *xa = NULL, *xb = NULL;
    /* tensor by tensor: both files are read whole, with every check of the reader, before a
     * verdict; a bad file is exit 2 with its error and no verdict */
    for (int more_a = 1, more_b = 1; !st && (more_a || more_b);) {
        np_params_tensor ta, tb;
        if (more_a && (st = np_params_next(a, &ta, &more_a, &err))) break;
        if (more_b && (st = np_params_next(b, &tb, &more_b, &err))) break;
        if (!more_a || !more_b) { /* the other one's rest is read through for its checks */
            differ |= more_a || more_b;
            continue;
        }
        char show_a[1100], show_b[1100];
        np_escape(ta.name, strlen(ta.name), show_a, sizeof show_a);
        np_escape(tb.name, strlen(tb.name), show_b, sizeof show_b);
        if (strcmp(ta.name, tb.name) || ta.ndim != tb.ndim ||
            memcmp(ta.dims, tb.dims, (size_t)ta.ndim * sizeof ta.dims[0])) {
            printf("%s (%" PRIu64 ") vs %s (%" PRIu64 "): names or shapes differ\n", show_a,
                   ta.count, show_b, tb.count);
            differ = 1;
            continue;
        }
        size_t n = ta.count <= SIZE_MAX / sizeof *xa ? (size_t)ta.count : 0;
        free(xa);
        free(xb);
        xa = n || !ta.count ? malloc(n ? n * sizeof *xa : 1) : NULL;
        xb = n || !ta.count ? malloc(n ? n * sizeof *xb : 1) : NULL;
        if (!xa || !xb) {
            st = np_error_set(&err, NP_STATUS_NO_MEMORY, "compare: %s: out of memory", show_a);
            break;
        }
        if ((st = np_params_read(a, xa, n, &err)) || (st = np_params_read(b, xb, n, &err))) break;
        double worst = 0, worst_abs = 0;
        size_t bad = 0, at = 0;
        for (size_t i = 0; i < n; i++) { /* values are finite: the reader refuses others */
            double diff = fabs((double)xa[i] - xb[i]), lim = atol + rtol * fabs((double)xb[i]);
            if (!(diff <= lim)) bad++;
            if (lim > 0 ? diff / lim > worst : diff > 0 && worst < INFINITY) {
                worst = lim > 0 ? diff / lim : INFINITY;
                worst_abs = diff;
                at = i;
            }
        }
        printf("%-18s %10zu elems  max |a-b| %.3g at %zu (%.3g of tolerance)%s\n", show_a, n,
               worst_abs, at, worst, bad ? "  OUT OF TOLERANCE" : "");
        bad_total += bad;
    }
    free(xa);
    free(xb);
    if (!st) {
        if (np_params_count(a) != np_params_count(b))
            printf("tensor counts differ: %" PRIu32 " vs %" PRIu32 "\n", np_params_count(a),
                   np_params_count(b));
        differ |= bad_total > 0;
        printf("%s: %zu elements out of tolerance (rtol %g, atol %g)\n",
               differ ? "DIFFER" : "MATCH", bad_total, rtol, atol);
    }
    np_params_close(a);
    np_params_close(b);
    return st ? np_cli_fail(st, &err) : differ;
}
