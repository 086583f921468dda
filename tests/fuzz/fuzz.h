/* What every fuzz harness shares: the input as a file (the readers take paths), a small
 * model configuration, and quiet output. Each harness is a libFuzzer target
 * (LLVMFuzzerTestOneInput): built with NP_FUZZ=ON (clang), run by .ci/fuzz and
 * bench/fuzz.sh. */
#ifndef NP_TESTS_FUZZ_H
#define NP_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nestpipe/nestpipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A path of this process for `tag`: $TMPDIR/np_fuzz_<pid>_<tag> (/tmp without TMPDIR; the
 * scripts point TMPDIR at a scratch folder they remove). */
static inline const char *fuzz_path(const char *tag) {
    static char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/np_fuzz_%d_%s", dir && *dir ? dir : "/tmp", (int)getpid(),
             tag);
    return path;
}

/* The input written to fuzz_path(tag); its path. */
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *tag) {
    const char *path = fuzz_path(tag);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f)) abort();
    return path;
}

/* A small model that every reader can be pointed at: 26 tables (Criteo's), 13 dense
 * inputs, tiny layers. */
static inline void fuzz_config(np_config *c) {
    np_config_defaults(c);
    c->rows[0] = 64;
    c->dim = 4;
    c->bottom[1] = 8;
    c->bottom[2] = 4;
    c->top[0] = 8;
    c->batch = 16;
    c->eval_every = 3;
    c->eval_samples = 100;
    c->quiet = 1;
}

#endif
