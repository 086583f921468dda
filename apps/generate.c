/* `nestpipe generate`: writes the synthetic data of a config to a binary data file, so that
 * a run can read its batches instead of generating them (a benchmark that leaves data
 * generation out, or another framework fed the very same records), or to a Criteo TSV
 * sample to try the file commands on. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *generate_help =
    "usage: nestpipe generate OUT.bin --samples N [--config FILE] [data and model flags]\n"
    "       nestpipe generate OUT.txt --format tsv --samples N [flags]\n"
    "\n"
    "Writes records 0..N-1 of the synthetic data the same flags would train on (--seed,\n"
    "--tables, --rows, --zipf, --hot, --groups, and the dense feature count, the first\n"
    "--bottom width) to OUT.bin in nestpipe's binary format, held-out records included, in\n"
    "order. `nestpipe train --data bin:OUT.bin` with the same flags then trains on the very\n"
    "batches --data synthetic gives, and holds out the same records, bit for bit, for as\n"
    "long as the file lasts. The file is written beside OUT.bin and renamed at the end: a\n"
    "failed run leaves no file.\n"
    "\n"
    "--format tsv (the default for a name ending in .txt or .tsv) writes the first N\n"
    "training records instead as a Criteo TSV that `--data criteo:OUT.txt` reads: the\n"
    "label, 13 integers and 26 hex categories. Criteo's integers are counts, read as\n"
    "log(1 + v): a dense value x > 0 is written as round(e^x - 1) and x <= 0 as 0, so the\n"
    "dense features read back differ from the synthetic ones (most become 0); the labels\n"
    "and keys are the same. It needs Criteo's layout: 13 dense features (--bottom 13-...),\n"
    "26 tables and one key per bag (--hot 1), the defaults. A sample to try the commands on.\n"
    "--format bin forces the binary format.\n";

/* Records of cfg's synthetic training stream as Criteo TSV lines, `count` of them. */
static np_status write_tsv(const np_config *cfg, long count, const char *out, np_error *err) {
    if (np_config_dense(cfg) != 13 || cfg->tables != 26 || cfg->hot > 1 || cfg->seq_len > 0)
        return np_error_set(err, NP_STATUS_BAD_INPUT,
                            "generate --format tsv writes Criteo's layout (13 dense features, 26 "
                            "tables, one key per bag, no sequence); this config has %d, %d, hot "
                            "%d and seq-len %d: use --format bin",
                            np_config_dense(cfg), cfg->tables, cfg->hot, cfg->seq_len);
    np_source_t *src = NULL;
    np_batch b = {0};
    np_outfile o = {0};
    np_status st = np_source_open(cfg, NP_SPLIT_TRAIN, &src, err);
    if (!st) st = np_outfile_open(&o, out, "generate", err);
    int failed = 0;
    for (long done = 0; !st && !failed && done < count;) {
        long n = count - done < 4096 ? count - done : 4096;
        if ((st = np_source_next_batch(src, n, &b, err))) break;
        for (long r = 0; r < n && !failed; r++) {
            failed |= fprintf(o.f, "%d", b.label[r] > 0.5f) < 0;
            for (int j = 0; j < 13; j++) {
                double x = b.dense[(size_t)r * 13 + (size_t)j];
                failed |= fprintf(o.f, "\t%lld", x > 0 ? llround(expm1(x)) : 0LL) < 0;
            }
            for (int t = 0; t < 26; t++) {
                const uint32_t *off = b.offsets + (size_t)t * (size_t)(b.n + 1) + (size_t)r;
                if (off[1] > off[0])
                    failed |= fprintf(o.f, "\t%llx", (unsigned long long)b.keys[off[0]]) < 0;
                else
                    failed |= fputc('\t', o.f) == EOF; /* an empty bag: a missing value */
            }
            failed |= fputc('\n', o.f) == EOF;
        }
        done += n;
    }
    if (o.f) { /* on a read failure, its message, not the commit's */
        np_error scratch = {{0}};
        np_status cst = np_outfile_commit(&o, st || failed, st ? &scratch : err);
        if (!st) st = cst;
    }
    np_batch_free(&b);
    np_source_free(src);
    return st;
}

static int usage_error_generate(const char *what, const char *arg) {
    fprintf(stderr, "nestpipe: generate %s%s%s (see nestpipe generate --help)\n", what,
            arg ? " " : "", arg ? arg : "");
    return EXIT_BAD_INPUT;
}

int np_cmd_generate(np_dist_t *dist, int argc, char **argv) {
    const char *out = argc > 0 && argv[0][0] != '-' ? argv[0] : NULL, *samples = NULL,
               *format = NULL;
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
        else if (!strncmp(a, "--format=", 9))
            format = a + 9;
        else if (!strcmp(a, "--format") && i + 1 < argc)
            format = argv[++i];
        else if (!strcmp(a, "--format"))
            rc = usage_error_generate("--format needs a value: bin or tsv", NULL);
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
    size_t len = strlen(out);
    int tsv = format ? !strcmp(format, "tsv")
                     : len > 4 && (!strcmp(out + len - 4, ".txt") || !strcmp(out + len - 4, ".tsv"));
    if (format && strcmp(format, "tsv") && strcmp(format, "bin"))
        return usage_error_generate("--format: bin or tsv, got", format);
    np_status st = tsv ? write_tsv(&cfg, count, out, &err)
                       : np_generate_synthetic(&cfg, count, out, &err);
    if (st) return np_cli_fail(st, &err);
    printf("generated %ld records to %s\n", count, out);
    return 0;
}
