/* What every `nestpipe` subcommand shares: the exit code of a status and the one-line
 * error report. */
#ifndef NP_APPS_CLI_H
#define NP_APPS_CLI_H

#include "nestpipe/dist.h"
#include "nestpipe/nestpipe.h"

#define EXIT_BAD_INPUT 2

/* Prints "nestpipe: <msg>" to stderr; returns 2 for bad input of any kind (bad value,
 * missing or malformed file, unsupported request), 1 for anything else. */
int np_cli_fail(np_status st, const np_error *err);
/* The exit code np_cli_fail returns for st, without printing. */
int np_cli_exit_code(np_status st);

/* `train`'s flags (and --config) into cfg, as `nestpipe train` reads them; sets *want_help
 * or *want_print for --help and --print-config. Returns 0 or an exit code (the error
 * printed). */
int np_cli_parse_train_args(int argc, char **argv, np_config *cfg, int *want_help,
                            int *want_print);

/* 0, or (the error printed) exit 2 when out is one of the --config files that
 * np_cli_parse_train_args read: "WHAT OUT is the same file as --config ...". */
int np_cli_not_a_config(const char *out, const char *what);

/* `nestpipe export` (apps/export.c). */
int np_cmd_export(int argc, char **argv);

/* `nestpipe generate` (apps/generate.c). */
int np_cmd_generate(np_dist_t *dist, int argc, char **argv);

/* `nestpipe check-layer` (apps/check_layer.c). */
int np_cmd_check_layer(int argc, char **argv);

/* `nestpipe tune` (apps/tune.c): runs train itself, so main calls it before MPI starts. */
int np_cmd_tune(int argc, char **argv);

/* `nestpipe predict` (apps/predict.c). */
int np_cmd_predict(np_dist_t *dist, int argc, char **argv);

/* 0, or (the error printed) exit 2 when N x N values of `per` bytes exceed this machine's
 * memory: "nestpipe: CMD: N ranks need X GiB for their byte matrices; ...". */
int np_cli_fits_matrices(const char *cmd, int N, double per);

/* `nestpipe route-stats` (apps/route_stats.c): one process, before MPI starts. */
int np_cmd_route_stats(int argc, char **argv);
/* `nestpipe graph` (apps/graph_cmd.c): one process, no StarPU, no MPI. */
int np_cmd_graph(int argc, char **argv);
/* `nestpipe simulate` (apps/simulate.c): one process, before MPI starts. */
int np_cmd_simulate(int argc, char **argv);

#endif
