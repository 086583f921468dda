/* NPPARAMS dumps: np_model_load into a small model (--init-params, predict) and the reader
 * of `nestpipe compare` (the file against itself). */
#include "../../apps/compare.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static np_model_t *m;
    np_error e;
    if (!m) {
        np_config c;
        fuzz_config(&c);
        if (np_model_create(&c, &m, &e) != NP_OK) abort();
        if (!freopen("/dev/null", "w", stdout)) abort(); /* compare's report */
    }
    const char *path = fuzz_file(data, size, "model.params");
    (void)np_model_load(m, path, &e);
    char *argv[] = {(char *)path, (char *)path, NULL};
    (void)np_cmd_compare(2, argv);
    return 0;
}
