// GEMM-based layers: linear, matmul (batched), bias_add. GEMMs go through
// cblas_sgemm (OpenBLAS). Conventions: see Embedding.h (forward overwrites,
// backward accumulates, null grad = not needed).
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_LINEAR_H
#define AUTODDL_BACKENDS_CPU_KERNELS_LINEAR_H

#include <cblas.h>
#include <cstdint>

namespace autoddl::rt {

/// Row-major C[M,N] = alpha * op(A) op(B) + beta * C with leading dimensions;
/// op = transpose when the flag is set. A is [M,K] (or [K,M] transposed), B is
/// [K,N] (or [N,K] transposed).
inline void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                 float alpha, const float *A, int64_t lda, const float *B,
                 int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(M), int(N), int(K), alpha,
              A, int(lda), B, int(ldb), beta, C, int(ldc));
}

/// out[N,O] = x[N,O] + bias[O] broadcast over rows (out may alias x).
inline void bias_add_forward(float *out, const float *x, const float *bias,
                             int64_t N, int64_t O) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      out[n * O + o] = x[n * O + o] + bias[o];
}

/// dx[N,O] += dout; dbias[O] += column sums of dout[N,O].
inline void bias_add_backward(float *dx, float *dbias, const float *dout,
                              int64_t N, int64_t O) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      if (dx)
        dx[n * O + o] += dout[n * O + o];
      if (dbias)
        dbias[o] += dout[n * O + o];
    }
}

/// out[N,O] = x[N,K] W + bias[O] (bias may be null).
/// transpose_weight: w is [O,K] (torch Linear, out = x w^T); else w is [K,O]
/// (GPT-2 Conv1D). N is every leading dimension of x multiplied together; K or
/// O may be tensor-parallel shards.
inline void linear_forward(float *out, const float *x, const float *w,
                           const float *bias, int64_t N, int64_t K, int64_t O,
                           bool transpose_weight) {
  gemm(false, transpose_weight, N, O, K, 1.0f, x, K, w,
       transpose_weight ? K : O, 0.0f, out, O);
  if (bias)
    bias_add_forward(out, out, bias, N, O);
}

/// dx[N,K] += dout W^T; dw += x^T dout ([K,O]) or dout^T x ([O,K]); dbias[O] +=
/// sum_n dout.
inline void linear_backward(float *dx, float *dw, float *dbias,
                            const float *dout, const float *x, const float *w,
                            int64_t N, int64_t K, int64_t O,
                            bool transpose_weight) {
  if (dx) // [N,O] x ([O,K] as is, or [K,O] transposed)
    gemm(false, !transpose_weight, N, K, O, 1.0f, dout, O, w,
         transpose_weight ? K : O, 1.0f, dx, K);
  if (dw) {
    if (transpose_weight) // dw[O,K] += dout^T[O,N] x[N,K]
      gemm(true, false, O, K, N, 1.0f, dout, O, x, K, 1.0f, dw, K);
    else // dw[K,O] += x^T[K,N] dout[N,O]
      gemm(true, false, K, O, N, 1.0f, x, K, dout, O, 1.0f, dw, O);
  }
  if (dbias)
    bias_add_backward(nullptr, dbias, dout, N, O);
}

/// out[Bt,M,N] = a[Bt,M,K] b[Bt,K,N] (or b[Bt,N,K] with transpose_b: a b^T),
/// per batch.
inline void matmul_forward(float *out, const float *a, const float *b,
                           int64_t Bt, int64_t M, int64_t K, int64_t N,
                           bool transpose_b) {
  for (int64_t i = 0; i < Bt; ++i)
    gemm(false, transpose_b, M, N, K, 1.0f, a + i * M * K, K, b + i * K * N,
         transpose_b ? K : N, 0.0f, out + i * M * N, N);
}

/// da[Bt,M,K] += dout b^T (or dout b); db += a^T dout ([K,N]) or dout^T a
/// ([N,K]).
inline void matmul_backward(float *da, float *db, const float *dout,
                            const float *a, const float *b, int64_t Bt,
                            int64_t M, int64_t K, int64_t N, bool transpose_b) {
  for (int64_t i = 0; i < Bt; ++i) {
    const float *g = dout + i * M * N, *ai = a + i * M * K, *bi = b + i * K * N;
    if (da)
      gemm(false, !transpose_b, M, K, N, 1.0f, g, N, bi, transpose_b ? K : N,
           1.0f, da + i * M * K, K);
    if (db) {
      if (transpose_b) // db[N,K] += dout^T[N,M] a[M,K]
        gemm(true, false, N, K, M, 1.0f, g, N, ai, K, 1.0f, db + i * K * N, K);
      else // db[K,N] += a^T[K,M] dout[M,N]
        gemm(true, false, K, N, M, 1.0f, ai, K, g, N, 1.0f, db + i * K * N, N);
    }
  }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_LINEAR_H
