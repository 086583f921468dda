/* Reading NPPARAMS dumps (docs/formats.md) tensor by tensor, for `compare` and `export`:
 * the file is read whole, and every size in it is checked before use. */
#ifndef NP_APPS_PARAMS_H
#define NP_APPS_PARAMS_H

#include <stddef.h>
#include <stdint.h>

typedef struct np_params_file {
    unsigned char *buf; /* the whole file */
    size_t len, pos;
    uint32_t count; /* tensors, from the header */
    const char *path;
} np_params_file;

typedef struct np_params_tensor {
    char name[256];
    uint32_t ndim;    /* <= 8 */
    uint64_t dims[8]; /* row-major */
    size_t count;     /* product of dims */
    const float *data; /* into the file's buffer: count floats, maybe unaligned */
} np_params_tensor;

/* Reads path; -2 when it cannot be opened or read (errno says why), -1 when it is not an
 * NPPARAMS file (pf->buf may be set: np_params_close it either way). */
int np_params_open(np_params_file *pf, const char *path);
/* The next tensor; NULL, or what is wrong with the file there. */
const char *np_params_next(np_params_file *pf, np_params_tensor *t);
void np_params_close(np_params_file *pf);

#endif
