/* Checkpoints' internals shared by runtime/state/ckpt_*.c: the file format's constants, atomic
 * checksummed files (ckpt_file.c), the manifest and the config fingerprint
 * (ckpt_manifest.c), used by saving (ckpt_save.c) and loading (ckpt_load.c). Format:
 * docs/formats.md "Checkpoints". Private to the library. */
#ifndef NP_STATE_CKPT_IMPL_H
#define NP_STATE_CKPT_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <xxhash.h>

#include "runtime/core/util.h"
#include "runtime/model/model.h"
#include "nestpipe/checkpoint.h"

#define CK_VERSION 1
#define CK_SHARD_MAGIC "NPCKSHRD"
#define CK_DENSE_MAGIC "NPCKDENS"
#define CK_MANIFEST "manifest"
#define CK_PATH (NP_PATH_MAX + 96)
#define CK_BLOCK ((size_t)8 << 20) /* bytes per read or write call */

/* A file being written: a unique temporary in its final folder (mkstemp), hashed as it
 * goes, fsync'd and renamed by ck_commit; a reader sees the whole file or none. */
typedef struct ck_out {
    int fd;
    char tmp[CK_PATH], path[CK_PATH];
    XXH3_state_t *h;
    uint64_t bytes;
} ck_out;

/* A checkpoint file read front to back, hashed on the way. */
typedef struct ck_in {
    FILE *f;
    const char *path;
    XXH3_state_t *h;
    uint64_t bytes;
} ck_in;

/* A growing text (the fingerprint's, the manifest's); oom set once an allocation fails. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

/* A manifest as read back. */
typedef struct manifest {
    char path[CK_PATH]; /* the manifest file, for messages */
    char dir[CK_PATH];
    long step;
    int ranks;
    np_data_pos data;
    double loss_first;
    int n_losses;
    double *losses;
    char *text; /* the whole file, NUL-terminated */
    size_t len;
    char skipped[200]; /* the newest ckpt-<step> newer than this one and not whole, why */
} manifest;

/* ---- ckpt_file.c: files written whole or not at all, read back hashed */
/* snprintf that says when it cut (-1): paths here are bounded, a longer one is refused. */
int ck_fit(char *out, size_t n, const char *fmt, ...) NP_PRINTF(3, 4);
double ck_now(void);
/* Test hook (tests/test_ckpt.sh): NP_TEST_CKPT_KILL=STEP:PHASE kills the process there. */
void ck_test_kill(long step, const char *phase);
NP_NODISCARD np_status ck_open(ck_out *o, const char *dir, const char *name, np_error *err);
NP_NODISCARD np_status ck_write(ck_out *o, const void *p, size_t n, np_error *err);
/* Appends the trailer (the hash of everything before it) when `trailer`, then fsync and
 * rename; *hash and *bytes get the content's hash and the file's size. */
NP_NODISCARD np_status ck_commit(ck_out *o, int trailer, uint64_t *hash, uint64_t *bytes,
                                 long step, const char *phase, np_error *err);
void ck_abandon(ck_out *o); /* removes the temporary */
np_status ck_fsync_dir(const char *dir, np_error *err);
void ck_sb_printf(sbuf *b, const char *fmt, ...) NP_PRINTF(2, 3);
NP_NODISCARD np_status ck_in_open(ck_in *in, const char *path, np_error *err);
NP_NODISCARD np_status ck_read(ck_in *in, void *p, size_t n, np_error *err);
/* The trailer: the content's hash, which must also be `want` (the manifest's), then EOF. */
NP_NODISCARD np_status ck_finish(ck_in *in, uint64_t want, np_error *err);
void ck_in_close(ck_in *in);

/* ---- ckpt_manifest.c: the fingerprint of the arithmetic, the manifest */
/* The "config ..." lines that fix the bytes the run computes (m's graph among them), and
 * their hash. */
NP_NODISCARD np_status ck_fingerprint(const np_config *cfg, const np_model_t *m, uint64_t *fp,
                                      sbuf *text, np_error *err);
void ck_step_dir(char *out, size_t n, const char *base, long step); /* base/ckpt-<step> */
long ck_parse_step(const char *name); /* "ckpt-<digits>" -> its step, else -1 */
int ck_is_whole(const char *base, const char *name); /* the folder has a manifest */
/* files: 6 int64 per rank as ckpt_save.c gathers them (sizes and hashes) */
NP_NODISCARD np_status ck_write_manifest(const np_config *cfg, const char *dir,
                                         const np_ckpt_state *s, uint64_t fp, const sbuf *cfgtext,
                                         const int64_t *files, np_error *err);
/* The newest whole checkpoint under base, read and checked (its checksum, its version). */
NP_NODISCARD np_status ck_read_manifest(const char *base, manifest *mf, np_error *err);
const char *ck_mf_line(const manifest *mf, const char *key); /* "key ..." -> "...", or NULL */
/* Every "config" line of this run must be in the manifest with the same value. */
NP_NODISCARD np_status ck_check_config(const manifest *mf, const sbuf *mine, np_error *err);
/* The exchange form the checkpoint was written with (its "exchange" line; none, from 0.5:
 * rows) against this run's: the same, or rows on both sides (auto on one rank is rows). */
NP_NODISCARD np_status ck_check_exchange(const manifest *mf, const np_config *cfg, np_error *err);
/* The size and hash the manifest lists for file `name`, and its path, checked on disk. */
NP_NODISCARD np_status ck_mf_file(const manifest *mf, const char *name, uint64_t *size,
                                  uint64_t *hash, char *path, size_t pn, np_error *err);

#endif
