/* `nestpipe compare`: tolerance diff of two --dump-params files (apps/compare.c). */
#ifndef NP_APPS_COMPARE_H
#define NP_APPS_COMPARE_H

int np_cmd_compare(int argc, char **argv);

#endif
