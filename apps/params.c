/* NPPARAMS reading for the commands (apps/params.h). */
#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int np_params_open(np_params_file *pf, const char *path) {
    memset(pf, 0, sizeof *pf);
    pf->path = path;
    pf->pos = 16;
    FILE *f = fopen(path, "rb");
    if (!f) return -2;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return -2;
    }
    pf->buf = malloc(n > 0 ? (size_t)n : 1);
    pf->len = pf->buf && n > 0 ? fread(pf->buf, 1, (size_t)n, f) : 0;
    int bad = !pf->buf || ferror(f);
    fclose(f);
    if (bad) return -2;
    if (pf->len < 16 || memcmp(pf->buf, "NPPARAMS", 8)) return -1;
    memcpy(&pf->count, pf->buf + 12, 4);
    return 0;
}

static int rd(np_params_file *pf, void *out, size_t n) {
    if (n > pf->len - pf->pos) return -1;
    memcpy(out, pf->buf + pf->pos, n);
    pf->pos += n;
    return 0;
}

const char *np_params_next(np_params_file *pf, np_params_tensor *t) {
    uint32_t len;
    if (rd(pf, &len, 4)) return "the file ends before the tensor's name";
    if (len >= sizeof t->name) return "a name longer than 255 bytes";
    if (rd(pf, t->name, len)) return "the file ends in the tensor's name";
    t->name[len] = 0;
    if (rd(pf, &t->ndim, 4)) return "the file ends before the tensor's dims";
    if (t->ndim > 8) return "more than 8 dims";
    size_t cnt = 1;
    for (uint32_t i = 0; i < t->ndim; i++) {
        uint64_t dim;
        if (rd(pf, &dim, 8)) return "the file ends in the tensor's dims";
        if (dim > SIZE_MAX || (dim && cnt > SIZE_MAX / dim)) return "dims whose product overflows";
        cnt *= (size_t)dim;
        t->dims[i] = dim;
    }
    if (cnt > (pf->len - pf->pos) / 4) return "dims larger than the data left in the file";
    t->data = (const float *)(void *)(pf->buf + pf->pos);
    t->count = cnt;
    pf->pos += cnt * 4;
    return NULL;
}

void np_params_close(np_params_file *pf) {
    free(pf->buf);
    pf->buf = NULL;
}
