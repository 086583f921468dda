/* Config files: np_config_load (INI through libinih and nestpipe's line reader) and the
 * cross-field checks, on arbitrary bytes. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    np_config c;
    np_error e;
    np_config_defaults(&c);
    if (np_config_load(&c, fuzz_file(data, size, "config.ini"), &e) == NP_OK)
        (void)np_config_check(&c, &e);
    return 0;
}
