/* NPPARAMS dumps: the one reader (np_params_open) through each of its callers:
 * np_model_load into a small model (--init-params, predict), `nestpipe compare` (the file
 * against itself) and `nestpipe export` (to a scratch .npz). */
#include "../../apps/cli.h"
#include "../../apps/compare.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static np_model_t *m;
    np_error e;
    if (!m) {
        np_config c;
        fuzz_config(&c);
        if (np_model_create(&c, &m, &e) != NP_OK) abort();
        if (!freopen("/dev/null", "w", stdout)) abort(); /* compare's and export's reports */
    }
    const char *path = fuzz_file(data, size, "model.params");
    (void)np_model_load(m, path, &e);
    char *argv[] = {(char *)path, (char *)path, NULL};
    (void)np_cmd_compare(2, argv);
    char out[600];
    snprintf(out, sizeof out, "%s.npz", path);
    char *xargv[] = {(char *)path, out, NULL};
    (void)np_cmd_export(2, xargv);
    return 0;
}
