/* Chrome trace JSON: read back, then the report (text and JSON), the SVG and the Paje
 * export, as `nestpipe trace` does. */
#include "nestpipe/trace.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    np_trace_t *t = NULL;
    np_error e;
    if (np_trace_read_chrome(fuzz_file(data, size, "trace.json"), &t, &e) != NP_OK) return 0;
    FILE *null = fopen("/dev/null", "w");
    if (!null) abort();
    (void)np_trace_print_report(t, null, NP_TRACE_REPORT_LAYERS, &e);
    (void)np_trace_print_report(t, null, NP_TRACE_REPORT_JSON | NP_TRACE_REPORT_LAYERS, &e);
    fclose(null);
    /* /dev/null is written in place (np_outfile): the pictures are made, without an fsync
     * per input */
    (void)np_trace_write_svg(t, "/dev/null", &e);
    (void)np_trace_write_paje(t, "/dev/null", &e);
    np_trace_t *part = NULL;
    if (np_trace_batches(t, 1, 2, &part, &e) == NP_OK) np_trace_free(part);
    np_trace_free(t);
    return 0;
}
