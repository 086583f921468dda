/* `nestpipe export P OUT.npz`: an NPPARAMS dump as a NumPy archive (numpy.load opens it):
 * one .npy member per tensor, named after it, float32 little-endian, C order, with its
 * shape. The archive is built with libzip in memory (members stored, as numpy.savez does)
 * and written through np_outfile: a unique temporary, fsync, rename. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "cli.h"

/* The .npy header (format 1.0) of a float32 C-order array of this shape: magic, version,
 * header length, and the dict padded with spaces to a multiple of 64 bytes, ending in a
 * newline. Returns its length, or 0 when it does not fit. */
static size_t npy_header(const np_params_tensor *t, char *out, size_t cap) {
    char shape[256] = "";
    size_t at = 0;
    for (int i = 0; i < t->ndim && at < sizeof shape; i++)
        at += (size_t)snprintf(shape + at, sizeof shape - at, "%llu,%s",
                               (unsigned long long)t->dims[i], i + 1 < t->ndim ? " " : "");
    if (t->ndim > 1 && at < sizeof shape) shape[--at] = 0; /* (a, b) but (a,) for one dim */
    char dict[400];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }",
                     shape);
    if (n < 0 || (size_t)n >= sizeof dict) return 0;
    size_t total = 10 + (size_t)n + 1; /* magic 6, version 2, length 2, dict, newline */
    total = (total + 63) / 64 * 64;
    if (total > cap || total - 10 > 65535) return 0;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)((total - 10) & 0xff);
    out[9] = (char)((total - 10) >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', total - 10 - (size_t)n - 1);
    out[total - 1] = '\n';
    return total;
}

/* A .npy member as a libzip source: its header, then the tensor's floats. */
typedef struct npy_member {
    char *head; /* owned */
    size_t head_len;
    float *data; /* owned */
    size_t data_len, at;
    zip_error_t error;
} npy_member;

static zip_int64_t member_fn(void *ud, void *out, zip_uint64_t len, zip_source_cmd_t cmd) {
    npy_member *m = ud;
    switch (cmd) {
    case ZIP_SOURCE_OPEN:
        m->at = 0;
        return 0;
    case ZIP_SOURCE_READ: {
        size_t total = m->head_len + m->data_len, n = 0;
        while (n < len && m->at < total) {
            const char *from = m->at < m->head_len ? m->head + m->at
                                                   : (const char *)m->data + (m->at - m->head_len);
            size_t left = m->at < m->head_len ? m->head_len - m->at : total - m->at;
            size_t k = left < len - n ? left : (size_t)(len - n);
            memcpy((char *)out + n, from, k);
            n += k;
            m->at += k;
        }
        return (zip_int64_t)n;
    }
    case ZIP_SOURCE_CLOSE:
        return 0;
    case ZIP_SOURCE_STAT: {
        zip_stat_t *st = out;
        zip_stat_init(st);
        st->size = m->head_len + m->data_len;
        st->valid |= ZIP_STAT_SIZE;
        return sizeof *st;
    }
    case ZIP_SOURCE_ERROR:
        return zip_error_to_data(&m->error, out, len);
    case ZIP_SOURCE_FREE:
        zip_error_fini(&m->error);
        free(m->head);
        free(m->data);
        free(m);
        return 0;
    case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE,
                                              ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE,
                                              -1);
    default:
        return -1;
    }
}

static int usage(const char *what) {
    fprintf(stderr, "nestpipe: export %s (see nestpipe export --help)\n", what);
    return EXIT_BAD_INPUT;
}

int np_cmd_export(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs("usage: nestpipe export MODEL.params OUT.npz\n"
                  "\n"
                  "Writes a --dump-params file as a NumPy archive: numpy.load(OUT.npz)[name] is\n"
                  "each tensor (bottom.0.weight, ..., emb.0), float32 with its shape.\n",
                  stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) return usage("has no flags but --help");
        if (!in)
            in = argv[i];
        else if (!out)
            out = argv[i];
        else
            return usage("takes two arguments, MODEL.params and OUT.npz");
    }
    if (!in || !out) return usage("needs MODEL.params and OUT.npz");
    np_error err = {{0}};
    np_status st = NP_OK;
    np_params_reader *pf = NULL;
    zip_source_t *mem = NULL;
    zip_t *z = NULL;
    zip_error_t ze;
    zip_error_init(&ze);
    if ((st = np_output_not_input(out, "export: the output", in, "the dump", &err)) ||
        (st = np_params_open(in, "export", &pf, &err)))
        goto done;
    if (!(mem = zip_source_buffer_create(NULL, 0, 0, &ze)) ||
        !(z = zip_open_from_source(mem, ZIP_TRUNCATE, &ze))) {
        st = np_error_set(&err, NP_STATUS_NO_MEMORY, "export: cannot start the archive: %s",
                          zip_error_strerror(&ze));
        goto done;
    }
    zip_source_keep(mem); /* its bytes are read back after zip_close */
    /* every tensor is read (with every check of the reader) before anything is written */
    for (int more = 1;;) {
        np_params_tensor t;
        if ((st = np_params_next(pf, &t, &more, &err))) goto done;
        if (!more) break;
        char name[300], shown[300];
        snprintf(name, sizeof name, "%s.npy", t.name);
        size_t hl = 0;
        char *head = malloc(512);
        float *data = t.count <= SIZE_MAX / 4 ? malloc(t.count ? (size_t)t.count * 4 : 1) : NULL;
        if (!head || !data || !(hl = npy_header(&t, head, 512))) {
            free(head);
            free(data);
            st = np_error_set(&err, NP_STATUS_NO_MEMORY, "export: tensor %s: %s",
                              np_escape(t.name, strlen(t.name), shown, sizeof shown),
                              hl || !head || !data ? "out of memory" : "no .npy header fits");
            goto done;
        }
        if ((st = np_params_read(pf, data, t.count, &err))) {
            free(head);
            free(data);
            goto done;
        }
        /* one member: the header, then the floats */
        npy_member *m = calloc(1, sizeof *m);
        zip_source_t *src = NULL;
        zip_int64_t idx = -1;
        if (!m) {
            free(head);
            free(data);
        } else {
            *m = (npy_member){.head = head, .head_len = hl, .data = data,
                              .data_len = (size_t)t.count * 4};
            zip_error_init(&m->error);
            if (!(src = zip_source_function(z, member_fn, m))) member_fn(m, NULL, 0, ZIP_SOURCE_FREE);
        }
        if (src && (idx = zip_file_add(z, name, src, ZIP_FL_ENC_UTF_8)) < 0) zip_source_free(src);
        if (idx >= 0) zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
        if (!m) {
            st = np_error_set(&err, NP_STATUS_NO_MEMORY, "export: out of memory");
            goto done;
        }
        if (idx < 0) {
            st = np_error_set(&err, NP_STATUS_INTERNAL, "export: cannot add %s: %s",
                              np_escape(name, strlen(name), shown, sizeof shown),
                              zip_strerror(z));
            goto done;
        }
    }
    if (zip_close(z)) {
        st = np_error_set(&err, NP_STATUS_NO_MEMORY, "export: cannot finish the archive: %s",
                          zip_strerror(z));
        zip_discard(z);
        z = NULL;
        goto done;
    }
    z = NULL;
    zip_stat_t zs;
    np_outfile o = {0};
    if (zip_source_stat(mem, &zs) || zip_source_open(mem)) {
        st = np_error_set(&err, NP_STATUS_INTERNAL, "export: cannot read the archive back");
        goto done;
    }
    if ((st = np_outfile_open(&o, out, "export", &err))) {
        zip_source_close(mem);
        goto done;
    }
    char buf[1 << 16];
    zip_int64_t n;
    int failed = 0;
    while (!failed && (n = zip_source_read(mem, buf, sizeof buf)) > 0)
        failed = fwrite(buf, 1, (size_t)n, o.f) != (size_t)n;
    failed |= n < 0;
    zip_source_close(mem);
    if ((st = np_outfile_commit(&o, failed, &err))) goto done;
    printf("exported %u tensors to %s\n", np_params_count(pf), out);
done:
    if (z) zip_discard(z);
    if (mem) zip_source_free(mem);
    np_params_close(pf);
    return st ? np_cli_fail(st, &err) : 0;
}
