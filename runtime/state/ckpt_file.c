/* Checkpoint files written whole or not at all: a unique temporary in the final folder,
 * hashed as it is written, fsync'd and renamed (a reader sees the whole file or none); and
 * read back front to back, hashed, against the hash the manifest lists.
 * Not here: what goes in them (ckpt_save.c, ckpt_manifest.c). */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/state/ckpt_impl.h"

/* snprintf that says when it cut: paths here are bounded, a longer one is refused. */
int ck_fit(char *out, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

double ck_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Test hook (tests/test_ckpt.sh): NP_TEST_CKPT_KILL=STEP:PHASE makes this process die by
 * SIGKILL inside checkpoint STEP's write, as a crashed node would: PHASE "shard" when its
 * shard is written but not yet renamed, "manifest" when the manifest is written but not
 * yet renamed. Never set in production; a library never exits otherwise. */
void ck_test_kill(long step, const char *phase) {
    const char *v = getenv("NP_TEST_CKPT_KILL");
    char want[64];
    snprintf(want, sizeof want, "%ld:%s", step, phase);
    if (v && !strcmp(v, want)) raise(SIGKILL);
}

void ck_abandon(ck_out *o) {
    if (o->fd >= 0) {
        close(o->fd);
        unlink(o->tmp);
    }
    o->fd = -1;
    XXH3_freeState(o->h);
    o->h = NULL;
}

np_status ck_open(ck_out *o, const char *dir, const char *name, np_error *err) {
    o->fd = -1;
    o->bytes = 0;
    o->h = XXH3_createState();
    snprintf(o->path, sizeof o->path, "%s/%s", dir, name);
    snprintf(o->tmp, sizeof o->tmp, "%s/.%s.tmp-XXXXXX", dir, name);
    if (!o->h || XXH3_64bits_reset(o->h) != XXH_OK) {
        ck_abandon(o);
        return np_err(err, NP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    }
    o->fd = mkstemp(o->tmp);
    if (o->fd < 0) {
        int e = errno;
        ck_abandon(o);
        return np_err(err, NP_STATUS_IO, "checkpoint %s: cannot create a file in %s: %s", o->path,
                      dir, strerror(e));
    }
    (void)fchmod(o->fd, 0644); /* mkstemp's 0600 would hide it from the job's other users */
    return NP_OK;
}

static np_status ck_raw(ck_out *o, const void *p, size_t n, np_error *err) {
    const char *c = p;
    while (n) {
        ssize_t k = write(o->fd, c, n < CK_BLOCK ? n : CK_BLOCK);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return np_err(err, NP_STATUS_IO, "checkpoint %s: write failed: %s", o->path,
                          k < 0 ? strerror(errno) : "no progress");
        c += k;
        n -= (size_t)k;
        o->bytes += (uint64_t)k;
    }
    return NP_OK;
}

np_status ck_write(ck_out *o, const void *p, size_t n, np_error *err) {
    const char *c = p;
    for (size_t at = 0; at < n; at += CK_BLOCK) { /* hash a block while it is in cache */
        size_t k = n - at < CK_BLOCK ? n - at : CK_BLOCK;
        XXH3_64bits_update(o->h, c + at, k);
        np_status st = ck_raw(o, c + at, k, err);
        if (st) return st;
    }
    return NP_OK;
}

/* Appends the trailer (the hash of everything before it) when `trailer`, then fsync and
 * rename. *hash gets the content's hash, *bytes the file's size. `step` and `phase` name the
 * moment for the test hook. */
np_status ck_commit(ck_out *o, int trailer, uint64_t *hash, uint64_t *bytes, long step,
                           const char *phase, np_error *err) {
    uint64_t h = XXH3_64bits_digest(o->h);
    unsigned char t[8];
    np_le_put64(t, h);
    np_status st = trailer ? ck_raw(o, t, 8, err) : NP_OK;
    if (!st && fsync(o->fd))
        st = np_err(err, NP_STATUS_IO, "checkpoint %s: fsync failed: %s", o->path, strerror(errno));
    if (!st) ck_test_kill(step, phase);
    if (!st) {
        int e = close(o->fd) ? errno : 0;
        o->fd = -1;
        if (e || rename(o->tmp, o->path)) {
            e = e ? e : errno;
            unlink(o->tmp);
            st = np_err(err, NP_STATUS_IO, "checkpoint %s: cannot finish the file: %s", o->path,
                        strerror(e));
        }
    }
    if (!st) {
        *hash = h;
        *bytes = o->bytes;
    }
    ck_abandon(o);
    return st;
}

np_status ck_fsync_dir(const char *dir, np_error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd)) {
        int e = errno;
        if (fd >= 0) close(fd);
        return np_err(err, NP_STATUS_IO, "checkpoint: cannot fsync the folder %s: %s", dir,
                      strerror(e));
    }
    close(fd);
    return NP_OK;
}

void ck_sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)k;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

np_status ck_read(ck_in *in, void *p, size_t n, np_error *err) {
    if (fread(p, 1, n, in->f) != n)
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: ends early (truncated)", in->path);
    XXH3_64bits_update(in->h, p, n);
    in->bytes += n;
    return NP_OK;
}

/* The trailer: the content's hash, which must also be the manifest's, then the end. */
np_status ck_finish(ck_in *in, uint64_t want, np_error *err) {
    unsigned char t[8];
    uint64_t got = XXH3_64bits_digest(in->h);
    if (fread(t, 1, 8, in->f) != 8)
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: ends early (truncated)", in->path);
    in->bytes += 8;
    if (got != want || np_le_get64(t) != want)
        return np_err(err, NP_STATUS_BAD_INPUT,
                      "checkpoint %s: checksum %016" PRIx64 ", but the manifest says %016" PRIx64
                      ": the file is corrupted",
                      in->path, got, want);
    if (fgetc(in->f) != EOF)
        return np_err(err, NP_STATUS_BAD_INPUT, "checkpoint %s: bytes after the end", in->path);
    return NP_OK;
}

np_status ck_in_open(ck_in *in, const char *path, np_error *err) {
    in->path = path;
    in->bytes = 0;
    in->h = XXH3_createState();
    in->f = fopen(path, "rb");
    if (!in->h || !in->f || XXH3_64bits_reset(in->h) != XXH_OK) {
        int e = errno;
        if (in->f) fclose(in->f);
        XXH3_freeState(in->h);
        in->f = NULL;
        in->h = NULL;
        return np_err(err, NP_STATUS_IO, "checkpoint %s: cannot open: %s", path, strerror(e));
    }
    return NP_OK;
}

void ck_in_close(ck_in *in) {
    if (in->f) fclose(in->f);
    XXH3_freeState(in->h);
    in->f = NULL;
    in->h = NULL;
}
