/* A test plugin: gc_gate.c's gate with its planted bias-gradient bug, as kind "pgate_bad"
 * (tests/test_check_layer.sh expects check-layer to fail on it and name "bias"). */
#define GC_BUGGY 1
#include "gc_gate.c"
