/* MovieLens ratings.dat (data = movielens:PATH): users' histories through a source, with a
 * sequence of 5 and 2 negatives drawn per record. */
#include "fuzz_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    np_config c;
    fuzz_config(&c);
    c.tables = 1;
    c.seq_len = 5;
    c.seq_negatives = 2;
    fuzz_source_cfg(&c, NP_DATA_MOVIELENS, fuzz_file(data, size, "ratings.dat"));
    return 0;
}
