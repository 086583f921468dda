/* Shared error reporting of the `nestpipe` subcommands (apps/cli.h). */
#include <stdio.h>

#include "cli.h"

int np_cli_exit_code(np_status st) {
    if (!st) return 0;
    return (st == NP_STATUS_BAD_INPUT || st == NP_STATUS_IO || st == NP_STATUS_UNSUPPORTED)
               ? EXIT_BAD_INPUT
               : 1;
}

int np_cli_fail(np_status st, const np_error *err) {
    fprintf(stderr, "nestpipe: %s\n", err->msg[0] ? err->msg : np_status_name(st));
    return np_cli_exit_code(st);
}
