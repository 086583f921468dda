/* `nestpipe compare A B [--rtol R] [--atol A]`: compares two NPPARAMS dumps tensor by
 * tensor with |a-b| <= atol + rtol*|b| (B is the reference). Prints the worst element per
 * tensor; exit 0 when all are within tolerance, 1 when not, 2 for unreadable files. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "nestpipe/nestpipe.h"

typedef struct dump {
    unsigned char *buf;
    size_t len;
    size_t pos;
    const char *path;
} dump;

static int load(dump *d, const char *path) {
    FILE *f = fopen(path, "rb");
    d->path = path;
    d->buf = NULL;
    d->pos = 16;
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    d->buf = malloc(n > 0 ? (size_t)n : 1);
    d->len = d->buf && n > 0 ? fread(d->buf, 1, (size_t)n, f) : 0;
    fclose(f);
    return d->len >= 16 && !memcmp(d->buf, "NPPARAMS", 8) ? 0 : -1;
}

static int rd(dump *d, void *out, size_t n) {
    if (d->pos + n > d->len) return -1;
    memcpy(out, d->buf + d->pos, n);
    d->pos += n;
    return 0;
}

/* Reads one tensor header; data pointer and element count out. Every size from the file is
 * checked before use: the element count must not overflow and its bytes must be in the
 * file. On failure returns what is wrong. */
static const char *next_tensor(dump *d, char *name, size_t name_cap, const float **data,
                               size_t *count) {
    uint32_t len, nd;
    if (rd(d, &len, 4)) return "the file ends before the tensor's name";
    if (len >= name_cap) return "a name longer than 255 bytes";
    if (rd(d, name, len)) return "the file ends in the tensor's name";
    name[len] = 0;
    if (rd(d, &nd, 4)) return "the file ends before the tensor's dims";
    if (nd > 8) return "more than 8 dims";
    size_t cnt = 1;
    for (uint32_t i = 0; i < nd; i++) {
        uint64_t dim;
        if (rd(d, &dim, 8)) return "the file ends in the tensor's dims";
        if (dim > SIZE_MAX || (dim && cnt > SIZE_MAX / dim)) return "dims whose product overflows";
        cnt *= (size_t)dim;
    }
    if (cnt > (d->len - d->pos) / 4) return "dims larger than the data left in the file";
    *data = (const float *)(d->buf + d->pos);
    *count = cnt;
    d->pos += cnt * 4;
    return NULL;
}

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
    dump a, b;
    int la = load(&a, pa), lb = load(&b, pb), rc = 0;
    if (la || lb) {
        fprintf(stderr, "nestpipe: %s: not a readable NPPARAMS file\n", la ? pa : pb);
        free(a.buf);
        free(b.buf);
        return 2;
    }
    uint32_t na, nb;
    memcpy(&na, a.buf + 12, 4);
    memcpy(&nb, b.buf + 12, 4);
    if (na != nb) {
        printf("tensor counts differ: %u vs %u\n", na, nb);
        rc = 1;
    }
    size_t bad_total = 0;
    for (uint32_t k = 0; k < na && k < nb && rc != 2; k++) {
        char name_a[256], name_b[256];
        const float *xa, *xb;
        size_t ca, cb;
        const char *why_a = next_tensor(&a, name_a, sizeof name_a, &xa, &ca);
        const char *why_b = why_a ? NULL : next_tensor(&b, name_b, sizeof name_b, &xb, &cb);
        if (why_a || why_b) {
            fprintf(stderr, "nestpipe: compare: %s: tensor %u: %s\n", why_a ? pa : pb, k,
                    why_a ? why_a : why_b);
            rc = 2;
            break;
        }
        /* names come from the files: no raw control bytes on the terminal */
        char show_a[1100], show_b[1100];
        np_escape(name_a, strlen(name_a), show_a, sizeof show_a);
        np_escape(name_b, strlen(name_b), show_b, sizeof show_b);
        if (strcmp(name_a, name_b) || ca != cb) {
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
    free(a.buf);
    free(b.buf);
    return rc;
}
