/* `nestpipe predict`: scores every record of a data file with a trained model (a
 * --dump-params file), one probability per line in record order, and reports the log loss
 * and AUC against the file's labels. The model's shape comes from the same flags or config
 * file that trained it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *predict_help =
    "usage: nestpipe predict --params FILE --data criteo:PATH|bin:PATH --out FILE|-\n"
    "                        [--config FILE] [model flags]\n"
    "\n"
    "Scores every record of the data with the model in --params (a --dump-params file):\n"
    "one predicted click probability per line, in record order, to --out (- for stdout),\n"
    "then prints the records' log loss and AUC against their labels to stderr. The model\n"
    "flags (--model, --tables, --rows, --dim, --bottom, --top, ... or the --config of the\n"
    "training run) must give the shape the model was trained with; another shape is\n"
    "refused, naming the first tensor that differs. The scores equal those of the training\n"
    "run's evaluation on the same records (train --eval-data), bit for bit.\n";

static int usage_error_predict(const char *what) {
    fprintf(stderr, "nestpipe: predict %s (see nestpipe predict --help)\n", what);
    return EXIT_BAD_INPUT;
}

int np_cmd_predict(np_dist_t *dist, int argc, char **argv) {
    const char *params = NULL, *out = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) return 1;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(predict_help, stdout);
            free(rest);
            return 0;
        }
        const char **slot = !strcmp(argv[i], "--params") ? &params
                            : !strcmp(argv[i], "--out")  ? &out
                                                         : NULL;
        if (!strncmp(argv[i], "--params=", 9) || !strncmp(argv[i], "--out=", 6)) {
            const char *eq = strchr(argv[i], '=');
            *(argv[i][2] == 'p' ? &params : &out) = eq + 1;
            continue;
        }
        if (!slot) {
            rest[n++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "nestpipe: predict: %s needs a value\n", argv[i]);
            free(rest);
            return EXIT_BAD_INPUT;
        }
        *slot = argv[++i];
    }
    np_config cfg;
    np_config_defaults(&cfg);
    cfg.ranks = np_dist_size(dist);
    int help = 0, print = 0;
    int rc = np_cli_parse_train_args(n, rest, &cfg, &help, &print);
    free(rest);
    if (rc) return rc;
    if (help || print) return usage_error_predict("--help and --print-config belong to train");
    if (!params || !out || cfg.data == NP_DATA_SYNTHETIC)
        return usage_error_predict(!params ? "needs --params FILE (a --dump-params file)"
                                   : !out  ? "needs --out FILE (or - for stdout)"
                                           : "needs --data criteo:PATH or bin:PATH");
    np_error err = {{0}};
    if (cfg.ranks > 1)
        return np_cli_fail(np_error_set(&err, NP_STATUS_BAD_INPUT,
                                        "predict runs in one process; run it without mpirun"),
                           &err);
    cfg.engine = NP_ENGINE_REFERENCE; /* the cross-field checks of a one-process model */
    cfg.trace[0] = 0;
    np_status st = np_config_check(&cfg, &err);
    if (st) return np_cli_fail(st, &err);

    np_model_t *model = NULL;
    np_source_t *src = NULL;
    np_outfile o = {0};
    np_eval_result res;
    int to_stdout = !strcmp(out, "-");
    cfg.init_params[0] = 0; /* the model comes from --params, not the training's start */
    if (!to_stdout && ((st = np_output_not_input(out, "predict --out", cfg.data_path, "--data",
                                                 &err)) ||
                       (st = np_output_not_input(out, "predict --out", params, "--params", &err)) ||
                       (st = np_output_not_input(out, "predict --out", cfg.model_file,
                                                 "--model-file", &err))))
        return np_cli_fail(st, &err);
    if (!to_stdout && (rc = np_cli_not_a_config(out, "predict --out"))) return rc;
    if ((st = np_model_create(&cfg, &model, &err)) || (st = np_model_load(model, params, &err)) ||
        (st = np_source_open(&cfg, NP_SPLIT_ALL, &src, &err)))
        goto done;
    /* a file goes through a unique temporary and a rename: a failed run leaves no half file */
    if (!to_stdout && (st = np_outfile_open(&o, out, "predict --out", &err))) goto done;
    st = np_predict(model, src, to_stdout ? stdout : o.f, &res, &err);
    if (to_stdout) {
        if (!st && (fflush(stdout) || ferror(stdout)))
            st = np_error_set(&err, NP_STATUS_IO, "predict: cannot write the scores to stdout");
    } else if (st) {
        np_outfile_discard(&o);
    } else {
        st = np_outfile_commit(&o, 0, &err);
    }
    if (st) goto done;
    /* nine digits: the figures train's --log-json gives its evaluation */
    fprintf(stderr, "predict: %ld records  logloss %.9g  auc %.9g\n", res.n, res.logloss,
            res.auc);
done:
    /* np_model_load speaks of train's flag ("init-params PATH: ...", "init-params: cannot
     * open ...") */
    if (st && !strncmp(err.msg, "init-params", 11) && (err.msg[11] == ' ' || err.msg[11] == ':')) {
        char msg[sizeof err.msg];
        memcpy(msg, err.msg, sizeof msg);
        np_error_set(&err, st, "predict --params%.480s", msg + 11);
    }
    np_outfile_discard(&o);
    np_source_free(src);
    np_model_free(model);
    return st ? np_cli_fail(st, &err) : 0;
}
