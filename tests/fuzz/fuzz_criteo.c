/* Criteo TSV: records through a source, stopping at the first bad line and skipping bad
 * lines (the file name picks: the harness writes the input twice). */
#include "fuzz_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_source(NP_DATA_CRITEO, fuzz_file(data, size, "data.tsv"));
    fuzz_source(NP_DATA_CRITEO, fuzz_file(data, size, "data.tsv.skips"));
    return 0;
}
