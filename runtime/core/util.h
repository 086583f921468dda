/* Small shared helpers: error formatting, checked allocation, counter-based RNG.
 * Private to the library (not installed); no StarPU, MPI or model knowledge here. */
#ifndef NP_CORE_UTIL_H
#define NP_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nestpipe/nestpipe.h"

#if defined(__GNUC__)
#define NP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define NP_PRINTF(a, b)
#endif

/* Formats a message into err (if non-NULL) and returns status, so callers can write
 * `return np_err(err, NP_STATUS_BAD_INPUT, "%s:%ld: ...", path, line);`. */
#define np_err np_error_set /* the public np_error_set (nestpipe.h), by its library name */

/* malloc/calloc that fill err on failure (naming what was being allocated) and return NULL.
 * Sizes are checked for overflow (n * size). Free with free(). */
void *np_alloc(size_t n, size_t size, const char *what, np_error *err);
void *np_zalloc(size_t n, size_t size, const char *what, np_error *err);
/* Grows *p to hold at least n elements of size; keeps contents. *cap in elements. */
np_status np_grow(void **p, size_t *cap, size_t n, size_t size, const char *what, np_error *err);

/* The folder of path into dir (cap bytes): "." for a bare name, "/" for one at the root
 * (runtime/core/outfile.c). Returns the name within it. */
const char *np_path_folder(const char *path, char *dir, size_t cap);

/* np_outfile_* (output files written whole or not at all) and np_escape are public
 * (nestpipe.h): the command writes its metrics and quotes file content with them too. */

/* ---- little-endian fields of nestpipe's file headers (binary data, checkpoints) */
static inline uint32_t np_le_get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t np_le_get64(const unsigned char *p) {
    return (uint64_t)np_le_get32(p) | (uint64_t)np_le_get32(p + 4) << 32;
}
static inline void np_le_put32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}
static inline void np_le_put64(unsigned char *p, uint64_t v) {
    for (int k = 0; k < 8; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}
/* 1 on a little-endian host: the floats in nestpipe's files are written in host order. */
static inline int np_host_is_little_endian(void) {
    const uint32_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

/* ---- counter-based RNG (docs/formats.md "Random numbers")
 * Every random value is a pure function of (seed, stream, counter), so any sample or
 * parameter element can be produced independently of the others: on any rank, in any
 * order, for any batch split. The mixer is the splitmix64 finaliser. */
static inline uint64_t np_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline uint64_t np_rng_u64(uint64_t seed, uint64_t stream, uint64_t counter) {
    uint64_t h = np_mix64(seed + 0x9E3779B97F4A7C15ULL * (stream + 1));
    return np_mix64(h ^ np_mix64(counter + 0x632BE59BD9B4E019ULL));
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double np_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
    return (double)(np_rng_u64(seed, stream, counter) >> 11) * 0x1.0p-53;
}

/* Standard normal by Box-Muller over counters 2c and 2c+1. */
double np_rng_normal(uint64_t seed, uint64_t stream, uint64_t counter);

/* Streams in use; new users take new numbers, never reuse one. */
enum {
    NP_STREAM_PARAM = 0x100,             /* + tensor index: parameter init */
    NP_STREAM_SYN_DENSE = 0x10000,       /* synthetic data: dense features */
    NP_STREAM_SYN_COUNT,                 /* synthetic data: keys per bag */
    NP_STREAM_SYN_KEY,                   /* synthetic data: key draws */
    NP_STREAM_SYN_LABEL,                 /* synthetic data: label coin */
    NP_STREAM_SYN_GROUP,                 /* synthetic data: latent group of a sample */
    NP_STREAM_SYN_GROUP_SHIFT = 0x18000, /* + table: a group's key shift in that table */
    NP_STREAM_TEACHER = 0x20000,         /* + table index: hidden teacher key weights */
    NP_STREAM_TEACHER_DENSE = NP_STREAM_TEACHER + NP_MAX_TABLES, /* teacher dense weights */
    NP_STREAM_GRADCHECK = 0x40000, /* + input k: the gradient check's inputs; + 8 its R */
    NP_STREAM_SEQ_NEG = 0x50000,   /* a sequence's negative items (seeded by its history) */
    NP_STREAM_SEQ_CHAIN,           /* synthetic sequences: the cluster chain's moves */
    NP_STREAM_SEQ_ITEM,            /* synthetic sequences: the item within a cluster */
};

#endif
