/* Shared error reporting of the `nestpipe` subcommands (apps/cli.h). */
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "cli.h"

int np_cli_exit_code(np_status st) {
    if (!st) return 0;
    return (st == NP_STATUS_BAD_INPUT || st == NP_STATUS_IO || st == NP_STATUS_UNSUPPORTED)
               ? EXIT_BAD_INPUT
               : 1;
}

/* Each line of the message with the command's name (the ranks' agreement gives one line
 * per key that differs). */
int np_cli_fail(np_status st, const np_error *err) {
    const char *m = err->msg[0] ? err->msg : np_status_name(st);
    for (const char *nl; (nl = strchr(m, '\n')); m = nl + 1)
        fprintf(stderr, "nestpipe: %.*s\n", (int)(nl - m), m);
    fprintf(stderr, "nestpipe: %s\n", m);
    return np_cli_exit_code(st);
}

int np_cli_fits_matrices(const char *cmd, int N, double per) {
    double need = (double)N * N * per;
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0 || need <= (double)pages * size) return 0;
    fprintf(stderr, "nestpipe: %s: %d ranks need %.1f GiB for their byte matrices; this machine "
                    "has %.1f GiB\n", cmd, N, need / 1073741824.0, (double)pages * size / 1073741824.0);
    return EXIT_BAD_INPUT;
}
