/* CPU kernels of the batch graph's ops (pooling, loss, optimizers, row copies, dedup,
 * clustering) and the ReLU the linear layer fuses: plain functions over raw float buffers.
 * The layer kinds' own kernels are in codelets/layers/ (codelets/layers/layers.h).
 * They know only their buffers (no model, no StarPU); the reference trainer calls them in
 * loops and the StarPU codelets wrap them. Shapes are row-major, in comments.
 * Backward kernels OVERWRITE their gradient outputs unless stated otherwise, so a caller
 * that splits a batch into chunks reduces the chunk results itself in a fixed order.
 * Other backends (CUDA later) that must match bit for bit follow the same operation order:
 * linear adds the bias after the product; Adagrad forms one step lr/(sqrt(state)+eps) per
 * row. */
#ifndef NP_CODELETS_KERNELS_H
#define NP_CODELETS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Clones of a hot loop for the vector units x86-64 CPUs have, picked at run time from the
 * CPU's features (GCC function multi-versioning); elsewhere one plain version. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define NP_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NP_TARGET_CLONES
#endif

/* ---- ReLU, in place allowed (y may equal x) */
void np_relu_fwd(const float *x, float *y, size_t n);
/* dx = dy where y > 0 else 0; dx may equal dy. */
void np_relu_bwd(const float *y, const float *dy, float *dx, size_t n);
/* In place over dy (B, out): dy = dy where y > 0 else 0, and db = the column sums of the
 * result, sample by sample: np_relu_bwd then np_linear_bwd's sums, in one pass. */
void np_relu_bwd_colsum(const float *y, float *dy, long B, int out, float *db);

/* ---- embedding bag, sum pooling
 * Bag i holds idx[off[i] .. off[i+1]) (off is absolute into idx); each idx is a row of
 * `rows`. out row i is written at out + i*out_stride (d floats); an empty bag gives 0. */
void np_embbag_fwd(const float *rows,                           /* (U, d) */
                   const uint32_t *off,                         /* (n+1) */
                   const int64_t *idx,                          /* (nnz) */
                   long n, int d, float *out, long out_stride); /* (n, out_stride) */

/* ACCUMULATES: drows[idx[k]] += dout[i] for every key k of bag i, in bag then key order. */
void np_embbag_bwd(const float *dout, long dout_stride, /* (n, dout_stride) */
                   const uint32_t *off, const int64_t *idx, long n, int d,
                   float *drows); /* (U, d) */
/* The same two skipping every key whose idx is negative: the engine's pooled exchange gives
 * one row for all of a bag's keys at one owner, read by the first of them
 * (docs/pipeline.md "Rows or pooled sums"). Apart, so the plain ones keep their loops. */
void np_embbag_fwd_skip(const float *rows, const uint32_t *off, const int64_t *idx, long n,
                        int d, float *out, long out_stride);
void np_embbag_bwd_skip(const float *dout, long dout_stride, const uint32_t *off,
                        const int64_t *idx, long n, int d, float *drows);

/* ---- sequences (seq-len): bag i's keys fill positions 0, 1, ... of its (L, d) block at
 * out + i*out_stride, one row each (0 + the row, as a one-key bag sums), zeros past the
 * bag's end; keys past L are not read (the data sources refuse such bags). A negative idx
 * reads as a zero row, as the skipping kernels do. */
void np_embseq_fwd(const float *rows, const uint32_t *off, const int64_t *idx, long n, int L,
                   int d, float *out, long out_stride);
/* ACCUMULATES: drows[idx[k]] += the gradient of key k's position, in bag then key order. */
void np_embseq_bwd(const float *dout, long dout_stride, const uint32_t *off, const int64_t *idx,
                   long n, int L, int d, float *drows);

/* ---- sigmoid + binary cross-entropy on logits
 * p[s] = sigmoid(z[s]) (p may be NULL). Returns the SUM over s of the stable BCE
 * max(z,0) - z*y + log1p(exp(-|z|)), accumulated in double. */
double np_sigmoid_bce_fwd(const float *z, const float *y, float *p, long B);
/* dz[s] = (sigmoid(z[s]) - y[s]) * scale; scale = 1/G for a mean over the global batch. */
void np_sigmoid_bce_bwd(const float *z, const float *y, float scale, float *dz, long B);

/* The run's loss (np_config_loss): the BCE above, or with output != 0 the output itself
 * (each sample's loss, from a loss kind): the sum of z in sample order, in double (p[s] = z[s]
 * when p is given), and dz[s] = scale. */
double np_loss_fwd(int output, const float *z, const float *y, float *p, long B);
void np_loss_bwd(int output, const float *z, const float *y, float scale, float *dz, long B);

/* ---- optimizers */
/* w -= lr * g, elementwise. */
void np_sgd_dense(float *w, const float *g, size_t n, float lr);
/* 1 when every x[i] (n) is finite: the updates check what they wrote, so divergence stops
 * the run at the step and tensor where it happened (one pass over data just written). */
int np_all_finite(const float *x, size_t n);
/* Row-wise SGD on U gathered rows. */
void np_sparse_sgd(float *rows, const float *g, long U, int d, float lr); /* (U,d), (U,d) */
/* Row-wise Adagrad: state[u] += mean_j g[u,j]^2; rows[u,:] -= lr*g[u,:]/(sqrt(state[u])+eps). */
void np_sparse_rowwise_adagrad(float *rows,    /* (U, d) */
                               float *state,   /* (U) */
                               const float *g, /* (U, d) */
                               long U, int d, float lr, float eps);

/* ---- fixed-order reduction: out = in[0] + in[1] + ... + in[k-1], elementwise, k >= 1 */
void np_sum_ordered(const float *const *in, int k, size_t count, float *out);

/* ---- gather / scatter of table rows */
/* out[u, :] = table[idx[u], :] */
void np_rows_gather(const float *table, const int64_t *idx, long U, int d, float *out);
/* table[idx[u], :] = in[u, :]; with a repeated index the last copy wins. */
void np_rows_scatter(const float *in, const int64_t *idx, long U, int d, float *table);

/* ---- key dedup (route)
 * uniq gets the sorted distinct values of keys[0..n) and *n_uniq their count; pos[k] gets
 * the index in uniq of keys[k]. uniq and pos have room for n values. Scratch (32 bytes a
 * key) is allocated inside. Returns 0, or -1 if that allocation fails. */
#if defined(__GNUC__)
__attribute__((warn_unused_result))
#endif
int np_keys_dedup(const int64_t *keys, size_t n, int64_t *uniq, size_t *n_uniq, int64_t *pos);

/* ---- key-centric sample clustering (codelets/kernels/cluster.c; docs/pipeline.md)
 * Splits the n samples of a table-major CSR batch (off (T, n+1), keys) into W windows of
 * n/W or n/W+1 samples: bounds (W+1) gets each window's range in perm (n), which lists
 * the samples window after window (each in batch order). by_keys = 0: contiguous windows
 * in batch order; 1: samples sharing keys placed together. 1 <= W <= 64. Returns 0, or -1
 * on bad arguments or no memory. */
int np_cluster_windows(const uint32_t *off, const int64_t *keys, long n, int T, int W, int by_keys,
                       long *perm, long *bounds);
/* Writes the batch with its samples in perm order (sample j of the output is sample
 * perm[j] of the input): dense (n, nd), labels (n), offsets (T, n+1) table-major and keys.
 * Output offsets start where the input's do; the output must not alias the input. */
void np_permute_samples(long n, int nd, int T, const long *perm, const float *dense,
                        const float *label, const uint32_t *off, const int64_t *keys,
                        float *dense_o, float *label_o, uint32_t *off_o, int64_t *keys_o);
/* Sum over the windows of the distinct (table, key) pairs each window holds: the rows the
 * windows' exchanges move. -1 when out of memory. */
long np_window_volume(const uint32_t *off, const int64_t *keys, long n, int T, int W,
                      const long *perm, const long *bounds);

#endif
