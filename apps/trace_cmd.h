/* `nestpipe trace`: reports, pictures and Paje files from a --trace file (apps/trace_cmd.c). */
#ifndef NP_APPS_TRACE_CMD_H
#define NP_APPS_TRACE_CMD_H

/* argv[0] is the subcommand (report, svg, paje); exit code 0, 1 or 2 as docs/cli.md. */
int np_cmd_trace(int argc, char **argv);

#endif
