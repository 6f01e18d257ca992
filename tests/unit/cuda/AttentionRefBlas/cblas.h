// A reference row-major cblas_sgemm for machines without a CBLAS (the GPU
// machine that runs AttentionCheck outside the main build): put this folder
// on the include path instead of the system's cblas.h. Only what
// backends/cpu/kernels/Linear.h calls: row-major, no conjugates. Plain loops
// in an order that keeps the innermost access contiguous; float accumulation
// like a real BLAS.
#ifndef AUTODDL_TESTS_UNIT_CUDA_ATTENTIONREFBLAS_CBLAS_H
#define AUTODDL_TESTS_UNIT_CUDA_ATTENTIONREFBLAS_CBLAS_H

#include <cstdlib>

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };

inline void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta,
                        CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb,
                        float beta, float *C, int ldc) {
  if (order != CblasRowMajor)
    std::abort();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
  const bool transA = ta == CblasTrans, transB = tb == CblasTrans;
  for (int i = 0; i < M; ++i) {
    float *c = C + i * ldc;
    if (!transB) {
      for (int p = 0; p < K; ++p) {
        const float a = alpha * (transA ? A[p * lda + i] : A[i * lda + p]);
        const float *b = B + p * ldb;
        for (int j = 0; j < N; ++j)
          c[j] += a * b[j];
      }
    } else {
      for (int j = 0; j < N; ++j) {
        const float *b = B + j * ldb;
        float s = 0.f;
        for (int p = 0; p < K; ++p)
          s += (transA ? A[p * lda + i] : A[i * lda + p]) * b[p];
        c[j] += alpha * s;
      }
    }
  }
}

#endif // AUTODDL_TESTS_UNIT_CUDA_ATTENTIONREFBLAS_CBLAS_H
