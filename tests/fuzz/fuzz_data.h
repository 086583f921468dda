/* Data files: every record of a file through a source, for the train split (full batches),
 * the held-out split and the all split (partial last batches). */
#ifndef NP_TESTS_FUZZ_DATA_H
#define NP_TESTS_FUZZ_DATA_H

#include "fuzz.h"

/* The file at path read as kind with config c (fuzz_config's, adjusted by the caller). */
static inline void fuzz_source_cfg(np_config *cfg, np_data_kind kind, const char *path) {
    np_config c = *cfg;
    c.data = kind;
    snprintf(c.data_path, sizeof c.data_path, "%s", path);
    c.skip_bad_lines = kind == NP_DATA_CRITEO && path[strlen(path) - 1] == 's';
    static const np_split splits[] = {NP_SPLIT_TRAIN, NP_SPLIT_EVAL, NP_SPLIT_ALL};
    for (int k = 0; k < 3; k++) {
        np_source_t *src = NULL;
        np_error e;
        if (np_source_open(&c, splits[k], &src, &e) != NP_OK) continue;
        np_batch b = {0};
        for (int i = 0; i < 10000 && np_source_next_batch(src, 7, &b, &e) == NP_OK; i++)
            ;
        np_source_free(src);
        /* the train split as ranks read it: the last of 3 ranks' slices (a seek, skips) */
        if (k == 0 && np_source_open(&c, splits[k], &src, &e) == NP_OK) {
            for (int i = 0; i < 10000 && np_source_next_slice(src, 9, 6, 3, &b, &e) == NP_OK; i++)
                ;
            np_source_free(src);
        }
        np_batch_free(&b);
    }
}

static inline void fuzz_source(np_data_kind kind, const char *path) {
    np_config c;
    fuzz_config(&c);
    fuzz_source_cfg(&c, kind, path);
}

#endif
