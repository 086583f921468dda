/* Model files: np_graph_from_file on arbitrary bytes, and a graph it accepts written back
 * with np_graph_write and read again (the round trip must give a graph too). */
#include "fuzz.h"
#include "nestpipe/layer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    np_config c;
    np_error e;
    fuzz_config(&c);
    np_graph_t *g = NULL;
    if (np_graph_from_file(&c, fuzz_file(data, size, "model.ini"), &g, &e) != NP_OK) return 0;
    FILE *f = fopen(fuzz_path("written.ini"), "w");
    if (!f) abort();
    np_status st = np_graph_write(g, f, &e);
    if (fclose(f)) abort();
    np_graph_t *h = NULL;
    /* a graph the reader made is one the writer can write and the reader read again */
    if (st == NP_OK && np_graph_from_file(&c, fuzz_path("written.ini"), &h, &e) != NP_OK) abort();
    if (h && np_graph_nodes(h) != np_graph_nodes(g)) abort();
    np_graph_free(h);
    np_graph_free(g);
    return 0;
}
