/* Dense matrix products for the layers, on oneDNN: C = op(A) op(B) (+ bias) (ReLU), fp32,
 * row-major. oneDNN picks its kernel from the CPU's features at run time; the choice for a
 * shape is a pure function of (shape, CPU), so the reference trainer and the engine, which
 * call this with the same shapes, get the same bits. Every call runs on the calling thread
 * only (one OpenMP thread per caller: StarPU workers are the parallelism).
 * Not here: the layers' own arithmetic around the products (linear.c, cross.c). */
#ifndef NP_CODELETS_GEMM_H
#define NP_CODELETS_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "nestpipe/nestpipe.h"

enum {
    NP_GEMM_TA = 1,   /* A is stored (K, M): op(A) = A^T */
    NP_GEMM_TB = 2,   /* B is stored (N, K): op(B) = B^T */
    NP_GEMM_RELU = 4, /* C = max(C, 0) after the bias */
    NP_GEMM_BF16 = 8, /* A and B rounded to bf16 (nearest even), products summed in fp32 */
};

/* NP_GEMM_BF16 for NP_PRECISION_BF16, else 0. */
static inline unsigned np_gemm_precision(np_precision p) {
    return p == NP_PRECISION_BF16 ? (unsigned)NP_GEMM_BF16 : 0u;
}

/* 1 when this CPU runs bf16 products natively (avx512_bf16 or better, as oneDNN sees it);
 * else 0, with what it has in isa (e.g. "avx2"). */
int np_gemm_bf16_supported(const char **isa);

/* Rounds n floats to bf16, to nearest even (NaN stays NaN): the inputs of a bf16 product. */
void np_to_bf16(const float *x, uint16_t *y, size_t n);

/* C (M, N) = op(A) (M, K) * op(B) (K, N) [+ bias (N) on every row] [then ReLU], overwriting
 * C. Leading dimensions are those of the matrices as stored. bias may be NULL. M, N >= 1;
 * K = 0 gives the bias (or zeros). */
void np_gemm(unsigned flags, long M, long N, long K, const float *A, long lda, const float *B,
             long ldb, const float *bias, float *C, long ldc);

/* np_dense_kernels (nestpipe.h) is defined in gemm.c: what oneDNN runs here. */

#endif
