/* `nestpipe check-layer`: a layer kind's gradients against finite differences of its own
 * forward (np_layer_gradcheck), for built-in kinds and plugins. */
#include <stdio.h>

#include "cli.h"

int np_cmd_check_layer(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "nestpipe: check-layer: not yet\n");
    return EXIT_BAD_INPUT;
}
