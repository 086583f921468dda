/* What every `nestpipe` subcommand shares: the exit code of a status and the one-line
 * error report. */
#ifndef NP_APPS_CLI_H
#define NP_APPS_CLI_H

#include "nestpipe/nestpipe.h"

#define EXIT_BAD_INPUT 2

/* Prints "nestpipe: <msg>" to stderr; returns 2 for bad input of any kind (bad value,
 * missing or malformed file, unsupported request), 1 for anything else. */
int np_cli_fail(np_status st, const np_error *err);

#endif
