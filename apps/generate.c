/* `nestpipe generate`: writes the synthetic data of a config to a binary data file, so that
 * a run can read its batches instead of generating them (a benchmark that leaves data
 * generation out, or another framework fed the very same records). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *generate_help =
    "usage: nestpipe generate OUT.bin --samples N [--config FILE] [data and model flags]\n"
    "\n"
    "Writes records 0..N-1 of the synthetic data the same flags would train on (--seed,\n"
    "--tables, --rows, --zipf, --hot, --groups, and the dense feature count, the first\n"
    "--bottom width) to OUT.bin in nestpipe's binary format, held-out records included, in\n"
    "order. `nestpipe train --data bin:OUT.bin` with the same flags then trains on the very\n"
    "batches --data synthetic gives, and holds out the same records, bit for bit, for as\n"
    "long as the file lasts. The file is written beside OUT.bin and renamed at the end: a\n"
    "failed run leaves no file.\n";

static int usage_error_generate(const char *what, const char *arg) {
    fprintf(stderr, "nestpipe: generate %s%s%s (see nestpipe generate --help)\n", what,
            arg ? " " : "", arg ? arg : "");
    return EXIT_BAD_INPUT;
}

int np_cmd_generate(np_dist_t *dist, int argc, char **argv) {
    const char *out = argc > 0 && argv[0][0] != '-' ? argv[0] : NULL, *samples = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) return 1;
    int n = 0, rc = 0;
    for (int i = out ? 1 : 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(generate_help, stdout);
            free(rest);
            return 0;
        }
        if (!strncmp(a, "--samples=", 10))
            samples = a + 10;
        else if (strcmp(a, "--samples"))
            rest[n++] = argv[i]; /* train's flags */
        else if (i + 1 >= argc)
            rc = usage_error_generate("--samples needs a value", NULL);
        else
            samples = argv[++i];
    }
    if (!out) {
        free(rest);
        return usage_error_generate("needs OUT.bin, the file to write, first", NULL);
    }
    np_config cfg;
    np_config_defaults(&cfg);
    cfg.ranks = np_dist_size(dist);
    int help = 0, print = 0;
    if (!rc) rc = np_cli_parse_train_args(n, rest, &cfg, &help, &print);
    free(rest);
    if (rc) return rc;
    if (help || print) return usage_error_generate("takes no --print-config", NULL);
    if (!samples) return usage_error_generate("needs --samples N, the records to write", NULL);
    if ((rc = np_cli_not_a_config(out, "generate: the output"))) return rc;
    char *end = NULL;
    errno = 0;
    long count = strtol(samples, &end, 10);
    if (errno || end == samples || *end || count < 1)
        return usage_error_generate("--samples: need a whole number >= 1, got", samples);
    np_error err = {{0}};
    if (cfg.data != NP_DATA_SYNTHETIC)
        return np_cli_fail(np_error_set(&err, NP_STATUS_BAD_INPUT,
                                        "generate writes synthetic data; drop --data"),
                           &err);
    if (cfg.ranks > 1)
        return np_cli_fail(np_error_set(&err, NP_STATUS_BAD_INPUT,
                                        "generate runs in one process; run it without mpirun"),
                           &err);
    /* only the data's rules apply (np_generate_synthetic checks them): a model too big for
     * this machine, or --steps 0, is no reason to refuse its data */
    np_status st = np_generate_synthetic(&cfg, count, out, &err);
    if (st) return np_cli_fail(st, &err);
    printf("generated %ld records to %s\n", count, out);
    return 0;
}
