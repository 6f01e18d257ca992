// The tiled GEMM that stands in where cuBLASLt has no algorithm for a shape
// (odd leading dimensions, alignments): one home for the forward's fallback
// (kernels/Linear.cu) and K-FAC's (kfac/KfacFactors.cu), each with its own
// epilogue. Not a public header.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_TILEDGEMM_CUH
#define AUTODDL_BACKENDS_CUDA_KERNELS_TILEDGEMM_CUH

#include "backends/cuda/kernels/Common.cuh"

namespace autoddl::rt::detail {

/// Tile edge: blocks of kTiledGemmTile x kTiledGemmTile threads.
constexpr int kTiledGemmTile = 16;

/// Thread (x, y) of block (bx, by): element (by * tile + y, bx * tile + x) of
/// op(A) op(B) in fp32, row-major, A [M,K] ([K,M] when transA), B [K,N]
/// ([N,K] when transB); 0 outside [M,N]. Every thread of the block calls it
/// (it synchronises the block).
template <class TA, class TB>
__device__ float tiled_gemm_sum(bool transA, bool transB, int64_t M, int64_t N,
                                int64_t K, const TA *A, int64_t lda,
                                const TB *B, int64_t ldb) {
  constexpr int kTile = kTiledGemmTile;
  __shared__ float as[kTile][kTile + 1], bs[kTile][kTile + 1];
  const int64_t i = int64_t(blockIdx.y) * kTile + threadIdx.y;
  const int64_t j = int64_t(blockIdx.x) * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int64_t p0 = 0; p0 < K; p0 += kTile) {
    const int64_t pa = p0 + threadIdx.x, pb = p0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] =
        i < M && pa < K ? to_float(transA ? A[pa * lda + i] : A[i * lda + pa])
                        : 0.0f;
    bs[threadIdx.y][threadIdx.x] =
        pb < K && j < N ? to_float(transB ? B[j * ldb + pb] : B[pb * ldb + j])
                        : 0.0f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kTile; ++q)
      acc += as[threadIdx.y][q] * bs[q][threadIdx.x];
    __syncthreads();
  }
  return acc;
}

} // namespace autoddl::rt::detail

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_TILEDGEMM_CUH
