/* Checkpoint manifests: np_ckpt_load of a checkpoint folder whose manifest is the input
 * (the shard and dense files it names are absent or of a seed run: the manifest parser,
 * its checksum and the config and file checks are what the input reaches). */
#include <sys/stat.h>

#include "nestpipe/checkpoint.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static np_model_t *m;
    static np_config c;
    static char dir[512];
    np_error e;
    if (!m) {
        fuzz_config(&c);
        snprintf(dir, sizeof dir, "%s", fuzz_path("ckpt"));
        snprintf(c.resume, sizeof c.resume, "%s", dir);
        char sub[600];
        snprintf(sub, sizeof sub, "%s/ckpt-000000001", dir);
        mkdir(dir, 0700);
        mkdir(sub, 0700);
        if (np_model_create(&c, &m, &e) != NP_OK) abort();
    }
    char path[600];
    snprintf(path, sizeof path, "%s/ckpt-000000001/manifest", dir);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) abort();
    np_ckpt_state *s = malloc(sizeof *s);
    np_ckpt_stats st;
    if (!s) abort();
    (void)np_ckpt_load(&c, m, s, &st, &e);
    free(s);
    return 0;
}
