/* nestpipe binary data (nestpipe convert): records through a source. */
#include "fuzz_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_source(NP_DATA_BIN, fuzz_file(data, size, "data.bin"));
    return 0;
}
