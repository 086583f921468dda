/* `nestpipe graph [--format F] [--out FILE] [--step K] [--check] [train flags]`: the tasks
 * one training step submits, with their buffers and what each waits for, built from the
 * config alone (np_step_graph_create): no StarPU, no MPI, no data read. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "nestpipe/stepgraph.h"

static const char *help =
    "usage: nestpipe graph [--format text|dot|json|svg|png] [--out FILE] [--step K]\n"
    "                      [--ranks N] [--check] [train flags]\n"
    "\n"
    "The task graph one training step submits to StarPU, as the train flags would run it\n"
    "(--pipeline, --windows, --chunks, --model or --model-file and --plugin,\n"
    "--sparse-optim, --comm): each task's batch, window, chunk, layer and priority, and what\n"
    "it waits for, through which buffer and why (RAW, WAR, WAW), on this step's tasks or an\n"
    "earlier step's. Dual-buffer edges (the sync) and frozen-window edges (the comm token\n"
    "ordering a batch's exchanges) are marked (docs/pipeline.md \"The step graph\").\n"
    "  --format F   text (default), dot (Graphviz), json; svg or png through Graphviz's dot\n"
    "  --out FILE   write there instead of standard output (svg and png need it)\n"
    "  --ranks N    the graph of one of N ranks (default 1; all submit the same graph)\n"
    "  --step K     the step to show, 0 to 15 (default 5: the pipeline is full)\n"
    "  --check      check the pipeline's guarantees on steps 0 to 15 instead (fresh rows,\n"
    "               frozen windows, window overlap, fresh parameters, dense and batch\n"
    "               isolation); exit 1 on a violation\n"
    "The graph is the StarPU engine's on CPU workers (--gpus N > 0 on a CUDA build: with N\n"
    "CUDA workers, whose input copy reads the slot; --gpus all is drawn on CPU workers, as\n"
    "the GPUs a run finds are the machine's); the priorities are those the engine gives: the\n"
    "node kinds' with the window boost, or with --priorities critical-path each node's bottom\n"
    "level in the steady step's graph;\n"
    "--engine reference has no task graph.\n";

static int bad(const char *msg, const char *arg) {
    fprintf(stderr, "nestpipe: graph: %s%s (see nestpipe graph --help)\n", msg, arg);
    return EXIT_BAD_INPUT;
}

/* DOT through Graphviz's dot (a child writing into path's temporary) as svg or png. */
static int render(const np_step_graph_t *g, long step, const char *type, const char *path) {
    np_error err = {{0}};
    np_outfile o;
    np_status st = np_outfile_open(&o, path, "--out", &err);
    if (st) return np_cli_fail(st, &err);
    char t[8];
    snprintf(t, sizeof t, "-T%s", type);
    int fds[2];
    pid_t pid = -1;
    if (!pipe(fds)) {
        fflush(o.f);
        pid = fork();
        if (pid == 0) {
            dup2(fds[0], 0);
            dup2(fileno(o.f), 1);
            close(fds[0]);
            close(fds[1]);
            execlp("dot", "dot", t, (char *)NULL);
            _exit(127);
        }
        close(fds[0]);
        if (pid < 0) close(fds[1]);
    }
    if (pid < 0) {
        np_outfile_discard(&o);
        return bad("cannot start Graphviz's dot", "");
    }
    void (*was)(int) = signal(SIGPIPE, SIG_IGN); /* dot gone early: an error, not a kill */
    FILE *p = fdopen(fds[1], "w");
    st = p ? np_step_graph_write(g, step, NP_STEP_GRAPH_DOT, p, &err) : NP_STATUS_IO;
    int closed = p ? fclose(p) : close(fds[1]);
    signal(SIGPIPE, was);
    int status = 0, waited;
    while ((waited = (int)waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    int ran = waited >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (ran == 127) {
        np_outfile_discard(&o);
        return bad("--format svg and png need Graphviz's dot, which is not installed; use "
                   "--format dot, or install graphviz",
                   "");
    }
    if (st || closed || ran) {
        np_outfile_discard(&o);
        return bad("Graphviz's dot failed rendering the graph into ", path);
    }
    fseek(o.f, 0, SEEK_END); /* dot wrote through the same file */
    st = np_outfile_commit(&o, 0, &err);
    return st ? np_cli_fail(st, &err) : 0;
}

int np_cmd_graph(int argc, char **argv) {
    const char *format = "text", *out = NULL;
    long step = 5;
    int check = 0, n_pass = 0, ranks = 1;
    char **pass = calloc((size_t)argc + 1, sizeof *pass);
    if (!pass) return bad("out of memory", "");
    int rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            free(pass);
            return 0;
        }
        if (!strcmp(a, "--check")) {
            check = 1;
            continue;
        }
        const char *opts[] = {"--format", "--out", "--step", "--ranks"};
        int k = -1;
        size_t len = 0;
        for (int j = 0; j < 4 && k < 0; j++) {
            len = strlen(opts[j]);
            if (!strncmp(a, opts[j], len) && (a[len] == 0 || a[len] == '=')) k = j;
        }
        if (k < 0) {
            pass[n_pass++] = argv[i];
            continue;
        }
        const char *v = a[len] == '=' ? a + len + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            rc = bad("a value is missing after ", a);
        } else if (k == 0) {
            format = v;
        } else if (k == 1) {
            out = v;
        } else {
            char *end;
            long x = strtol(v, &end, 10);
            if (k == 2 && (end == v || *end || x < 0 || x > 15))
                rc = bad("--step takes 0 to 15, not ", v);
            else if (k == 3 && (end == v || *end || x < 1 || x > 65536))
                rc = bad("--ranks takes a count from 1 to 65536, not ", v);
            else if (k == 2)
                step = x;
            else
                ranks = (int)x;
        }
    }
    np_step_graph_format f = NP_STEP_GRAPH_TEXT;
    const char *render_as = NULL;
    if (!rc) {
        if (!strcmp(format, "dot"))
            f = NP_STEP_GRAPH_DOT;
        else if (!strcmp(format, "json"))
            f = NP_STEP_GRAPH_JSON;
        else if (!strcmp(format, "svg") || !strcmp(format, "png"))
            render_as = format;
        else if (strcmp(format, "text"))
            rc = bad("--format is text, dot, json, svg or png, not ", format);
        if (!rc && render_as && !out) rc = bad("--format ", "svg and png need --out FILE");
        if (!rc && check && (out || strcmp(format, "text")))
            rc = bad("--check prints a report; it takes no --format or --out", "");
    }
    np_config cfg;
    np_config_defaults(&cfg);
    int want_help = 0, want_print = 0;
    if (!rc) rc = np_cli_parse_train_args(n_pass, pass, &cfg, &want_help, &want_print);
    free(pass);
    if (rc) return rc;
    if (want_print) return bad("--print-config is train's", "");
    if (cfg.engine == NP_ENGINE_REFERENCE)
        return bad("--engine reference runs no task graph; the graph is the StarPU engine's", "");
    cfg.ranks = ranks; /* the graph of one of them: every rank submits the same */
    if (out && (rc = np_cli_not_a_config(out, "--out"))) return rc;
    np_error err = {{0}};
    np_step_graph_t *g;
    np_status st = np_step_graph_create(&cfg, 16, &g, &err);
    if (st) return np_cli_fail(st, &err);
    if (check) {
        char report[8192];
        int v = np_step_graph_check(g, report, sizeof report);
        fputs(report, stdout);
        np_step_graph_free(g);
        return v ? 1 : 0;
    }
    if (render_as) {
        rc = render(g, step, render_as, out);
    } else if (out) {
        np_outfile o;
        st = np_outfile_open(&o, out, "--out", &err);
        if (!st) {
            st = np_step_graph_write(g, step, f, o.f, &err);
            st = st ? (np_outfile_discard(&o), st) : np_outfile_commit(&o, 0, &err);
        }
        rc = st ? np_cli_fail(st, &err) : 0;
    } else {
        st = np_step_graph_write(g, step, f, stdout, &err);
        rc = st ? np_cli_fail(st, &err) : 0;
    }
    np_step_graph_free(g);
    return rc;
}
