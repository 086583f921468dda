/* Model files: a graph from an INI-like file (docs/layers.md "Model files"). */
#include <stdio.h>

#include "core/util.h"
#include "model/graph.h"

np_status np_graph_from_file(const np_config *cfg, const char *path, np_graph_t **out,
                             np_error *err) {
    (void)cfg;
    *out = NULL;
    return np_err(err, NP_STATUS_UNSUPPORTED, "model-file %s: not yet", path);
}

np_status np_graph_write(const np_graph_t *g, FILE *f, np_error *err) {
    (void)g;
    (void)f;
    return np_err(err, NP_STATUS_UNSUPPORTED, "graph: cannot write yet");
}
