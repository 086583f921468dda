/* Config files: INI `key = value` lines through libinih, each value set with
 * np_config_set, errors naming file:line; lines read by a reader that refuses what inih
 * would silently split. Not here: what the keys mean (config_keys.c). */
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "runtime/core/util.h"

typedef struct line_reader line_reader;

typedef struct load_ctx {
    np_config *cfg;
    const char *path;
    np_error first; /* message of the first failing line, without its line number */
    int failed;
    const line_reader *lr; /* the line being read */
    struct seen {          /* each key once: the line that gave it */
        char name[48];
        int line;
    } seen[128];
    int n_seen;
} load_ctx;

static int line_no_of(const line_reader *lr);

static int ini_handler_fn(void *user, const char *section, const char *name, const char *value) {
    load_ctx *ctx = user;
    if (ctx->failed) return 0;
    if (section[0] && strcmp(section, "nestpipe")) {
        np_err(&ctx->first, NP_STATUS_BAD_INPUT,
               "unknown section [%s] (keys go at the top or under [nestpipe])",
               np_escape(section, strlen(section), (char[128]){0}, 128));
        ctx->failed = 1;
        return 0;
    }
    /* an inline comment: '#' or ';' after whitespace ends the value (inih itself strips only
     * ';'), so `steps = 2 # two steps` reads 2 */
    char v[NP_PATH_MAX + 64];
    snprintf(v, sizeof v, "%s", value);
    for (char *p = v; *p; p++)
        if ((*p == '#' || *p == ';') && p > v && (p[-1] == ' ' || p[-1] == '\t')) {
            *p = 0;
            break;
        }
    for (size_t n = strlen(v); n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t');)
        v[--n] = 0;
    /* a key given twice: which one was meant is not for the reader to guess */
    int line = line_no_of(ctx->lr);
    for (int i = 0; i < ctx->n_seen; i++)
        if (!strcmp(ctx->seen[i].name, name)) {
            np_err(&ctx->first, NP_STATUS_BAD_INPUT,
                   "%s given again (first at line %d); give each key once", ctx->seen[i].name,
                   ctx->seen[i].line);
            ctx->failed = 1;
            return 0;
        }
    if (ctx->n_seen < (int)(sizeof ctx->seen / sizeof *ctx->seen) &&
        strlen(name) < sizeof ctx->seen[0].name) {
        snprintf(ctx->seen[ctx->n_seen].name, sizeof ctx->seen[0].name, "%s", name);
        ctx->seen[ctx->n_seen++].line = line;
    }
    np_error e;
    if (np_config_set(ctx->cfg, name, v, "", &e) != NP_OK) {
        /* drop the empty "where" prefix ": " that np_config_set put in front */
        snprintf(ctx->first.msg, sizeof ctx->first.msg, "%s", e.msg + 2);
        ctx->failed = 1;
        return 0;
    }
    if (!strcmp(name, "sched")) /* the policy's origin, reported with it */
        snprintf(ctx->cfg->sched_from, sizeof ctx->cfg->sched_from, "%s:%d", ctx->path, line);
    return 1;
}

/* libinih reads lines of at most its INI_MAX_LINE bytes (200 in Debian's build, which
 * cannot be changed from here) and parses the rest of a longer line as a line of its own:
 * the tail of a long comment became a setting. So lines come through this reader, which
 * sees the library's buffer size and stops at the first line that does not fit; it never
 * holds more than that buffer (a file without line breaks, /dev/zero, is refused at once
 * and the rest of its line only counted, up to TOO_LONG_COUNT bytes). It also stops at a
 * NUL byte (not a text file: UTF-16, a binary), drops a CR before the newline, and drops
 * the indentation of a line (libinih would read an indented line as the continuation of
 * the key above it: "lr = 0.1" then "  steps = 2" set lr to "steps = 2"). */
#define TOO_LONG_COUNT (1 << 20)
struct line_reader {
    FILE *f;
    int line_no;  /* of the last line read */
    int too_long; /* line_no's length (TOO_LONG_COUNT: at least that), when it did not fit */
    int max_len;  /* the longest line that fits, without its newline */
    int nul;      /* line_no holds a NUL byte */
    int failed;   /* a read error (errno in err_no) */
    int err_no;
};

static int line_no_of(const line_reader *lr) {
    return lr->line_no;
}

static char *read_line(char *str, int num, void *stream) {
    line_reader *r = stream;
    size_t len = 0, cap = (size_t)num - 2; /* the text; a newline and the NUL must fit */
    int c, last = -1, lead = 1;
    size_t seen = 0; /* bytes of the line, indentation too */
    errno = 0;
    while ((c = getc(r->f)) != EOF && c != '\n') {
        if (++seen >= TOO_LONG_COUNT) { /* a line without end (of spaces, too) */
            len = TOO_LONG_COUNT;
            break;
        }
        if (lead && (c == ' ' || c == '\t')) continue; /* the indentation */
        lead = 0;
        if (c == 0) { /* not text: stop here */
            r->nul = 1;
            break;
        }
        if (len < cap) str[len] = (char)c;
        last = c;
        len++;
    }
    if (c == EOF && ferror(r->f)) {
        r->failed = 1;
        r->err_no = errno;
        return NULL;
    }
    if (c == EOF && len == 0 && lead && !r->nul) return NULL; /* the end */
    r->line_no++;
    if (r->nul) return NULL;
    if (last == '\r' && len < TOO_LONG_COUNT) len--; /* CRLF */
    if (len > cap) {
        r->too_long = (int)len;
        r->max_len = (int)cap;
        return NULL;
    }
    str[len] = '\n';
    str[len + 1] = 0;
    return str;
}

np_status np_config_load(np_config *cfg, const char *path, np_error *err) {
    np_config c = *cfg;
    line_reader lr = {.f = fopen(path, "r")};
    load_ctx ctx = {.cfg = &c, .path = path, .lr = &lr};
    if (!lr.f)
        return np_err(err, NP_STATUS_IO, "cannot open config file %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(lr.f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(lr.f);
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "config file %s is a folder; give the path of an INI file", path);
    }
    int rc = ini_parse_stream(read_line, &lr, ini_handler_fn, &ctx);
    fclose(lr.f);
    if (rc == -2) return np_err(err, NP_STATUS_NO_MEMORY, "out of memory reading %s", path);
    if (rc > 0) {
        if (ctx.failed)
            return np_err(err, NP_STATUS_BAD_INPUT, "%s:%d: %s", path, rc, ctx.first.msg);
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s:%d: syntax error: expected 'key = value', '[nestpipe]' or a comment",
                      path, rc);
    }
    if (lr.failed)
        return np_err(err, NP_STATUS_IO, "%s:%d: cannot read: %s", path, lr.line_no + 1,
                      strerror(lr.err_no));
    if (lr.nul)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s:%d: a NUL byte: not a text file (a config file is INI text, UTF-8)",
                      path, lr.line_no);
    if (lr.too_long)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "%s:%d: line of %s%d bytes; config lines may have at most %d (split the "
                      "line or shorten the comment)",
                      path, lr.line_no, lr.too_long >= TOO_LONG_COUNT ? "more than " : "",
                      lr.too_long, lr.max_len);
    *cfg = c;
    return NP_OK;
}
