/* `nestpipe compare A B [--rtol R] [--atol A]`: compares two NPPARAMS dumps tensor by
 * tensor with |a-b| <= atol + rtol*|b| (B is the reference). Prints the worst element per
 * tensor; exit 0 when all are within tolerance, 1 when not, 2 for unreadable files. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "params.h"
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
    np_params_file a, b;
    int la = np_params_open(&a, pa), lb = np_params_open(&b, pb), rc = 0;
    if (la || lb) {
        fprintf(stderr, "nestpipe: %s: not a readable NPPARAMS file\n", la ? pa : pb);
        np_params_close(&a);
        np_params_close(&b);
        return 2;
    }
    uint32_t na = a.count, nb = b.count;
    if (na != nb) {
        printf("tensor counts differ: %u vs %u\n", na, nb);
        rc = 1;
    }
    size_t bad_total = 0;
    for (uint32_t k = 0; k < na && k < nb && rc != 2; k++) {
        np_params_tensor ta, tb;
        const char *why_a = np_params_next(&a, &ta);
        const char *why_b = why_a ? NULL : np_params_next(&b, &tb);
        if (why_a || why_b) {
            fprintf(stderr, "nestpipe: compare: %s: tensor %u: %s\n", why_a ? pa : pb, k,
                    why_a ? why_a : why_b);
            rc = 2;
            break;
        }
        const char *name_a = ta.name, *name_b = tb.name;
        const float *xa = ta.data, *xb = tb.data;
        size_t ca = ta.count, cb = tb.count;
        /* names come from the files: no raw control bytes on the terminal */
        char show_a[1100], show_b[1100];
        np_escape(name_a, strlen(name_a), show_a, sizeof show_a);
        np_escape(name_b, strlen(name_b), show_b, sizeof show_b);
        if (strcmp(name_a, name_b) || ta.ndim != tb.ndim ||
            memcmp(ta.dims, tb.dims, ta.ndim * sizeof ta.dims[0])) {
            printf("%s (%zu) vs %s (%zu): names or shapes differ\n", show_a, ca, show_b, cb);
            rc = 1;
            continue;
        }
        double worst = 0, worst_abs = 0;
        size_t bad = 0, at = 0;
        for (size_t i = 0; i < ca; i++) {
            float va, vb;
            memcpy(&va, xa + i, 4);
            memcpy(&vb, xb + i, 4);
            double diff = fabs((double)va - vb), lim = atol + rtol * fabs((double)vb);
            if (!(diff <= lim)) bad++;
            if (diff / lim > worst || isnan(diff)) {
                worst = isnan(diff) ? INFINITY : diff / lim;
                worst_abs = diff;
                at = i;
            }
        }
        printf("%-18s %10zu elems  max |a-b| %.3g at %zu (%.3g of tolerance)%s\n", show_a, ca,
               worst_abs, at, worst, bad ? "  OUT OF TOLERANCE" : "");
        bad_total += bad;
    }
    if (rc == 0 && bad_total) rc = 1;
    printf("%s: %zu elements out of tolerance (rtol %g, atol %g)\n", rc ? "DIFFER" : "MATCH",
           bad_total, rtol, atol);
    np_params_close(&a);
    np_params_close(&b);
    return rc;
}
