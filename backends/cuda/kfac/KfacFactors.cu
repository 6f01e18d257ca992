// K-FAC factors on the GPU (Kfac.h): the fp32-accumulating cuBLASLt GEMM the
// K-FAC sources share, factor accumulation (whole and gathered over tensor
// parallelism), the factor all-reduce, and the helpers of KfacInternal.cuh.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/LtPlan.h"
#include "backends/cuda/kernels/TiledGemm.cuh"
#include "backends/cuda/kfac/Kfac.h"
#include "backends/cuda/kfac/KfacInternal.cuh"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace autoddl::rt {
namespace kfac_detail {
namespace {

/// A plan's identity: the column-major problem cuBLASLt sees (row-major
/// C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, operands swapped).
struct Key {
  int64_t m, n, k, lda, ldb, ldc;
  int32_t opA, opB, type, ctype, align, tf32;
};
using Plan = detail::LtPlan;

detail::LtPlanCache<Key, Plan> &plans() {
  static auto *cache = new detail::LtPlanCache<Key, Plan>();
  return *cache;
}

Plan build(const Key &key) {
  Plan p;
  AUTODDL_CUBLAS_CHECK(cublasLtMatmulDescCreate(
      &p.desc, key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
      CUDA_R_32F));
  const cublasOperation_t opA = cublasOperation_t(key.opA),
                          opB = cublasOperation_t(key.opB);
  detail::lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, opA);
  detail::lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, opB);
  const cudaDataType_t type = cudaDataType_t(key.type);
  p.a = detail::lt_op_layout(type, opA, key.m, key.k, key.lda);
  p.b = detail::lt_op_layout(type, opB, key.k, key.n, key.ldb);
  p.c = detail::lt_layout(cudaDataType_t(key.ctype), key.m, key.n, key.ldc);
  cublasLtMatmulPreference_t pref = detail::lt_preference(key.align);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  AUTODDL_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(
      cublaslt(), p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  p.found = found > 0;
  p.algo = result.algo;
  return p;
}

constexpr int kTile = detail::kTiledGemmTile;

/// The tiled GEMM for shapes cuBLASLt has no algorithm for (row-major, the
/// arguments of gemm()).
template <class T, class TC>
__global__ void gemm_tiled_kernel(bool transA, bool transB, int64_t M,
                                  int64_t N, int64_t K, float alpha, const T *A,
                                  int64_t lda, const T *B, int64_t ldb,
                                  float beta, TC *C, int64_t ldc) {
  const int64_t i = int64_t(blockIdx.y) * kTile + threadIdx.y;
  const int64_t j = int64_t(blockIdx.x) * kTile + threadIdx.x;
  const float acc =
      detail::tiled_gemm_sum(transA, transB, M, N, K, A, lda, B, ldb);
  if (i < M && j < N) {
    TC *c = C + i * ldc + j;
    *c = detail::from_float<TC>(
        alpha * acc + (beta != 0.0f ? beta * detail::to_float(*c) : 0.0f));
  }
}

template <class T>
void launch_tiled(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                  float alpha, const void *A, int64_t lda, const void *B,
                  int64_t ldb, float beta, void *C, int64_t ldc,
                  cudaDataType_t ctype) {
  const dim3 grid(unsigned((N + kTile - 1) / kTile),
                  unsigned((M + kTile - 1) / kTile));
  const dim3 block(kTile, kTile);
  const auto *a = static_cast<const T *>(A);
  const auto *b = static_cast<const T *>(B);
  if (ctype == CUDA_R_32F)
    gemm_tiled_kernel<T, float><<<grid, block, 0, compute_stream()>>>(
        transA, transB, M, N, K, alpha, a, lda, b, ldb, beta,
        static_cast<float *>(C), ldc);
  else
    gemm_tiled_kernel<T, __nv_bfloat16><<<grid, block, 0, compute_stream()>>>(
        transA, transB, M, N, K, alpha, a, lda, b, ldb, beta,
        static_cast<__nv_bfloat16 *>(C), ldc);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// gemm() and gemm_into(): C of `ctype`, K > 0.
void run_gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
              float alpha, const void *A, int64_t lda, const void *B,
              int64_t ldb, cudaDataType_t type, float beta, void *C,
              int64_t ldc, cudaDataType_t ctype, bool tf32) {
  Key key;
  detail::lt_key_problem(key, transA, transB, M, N, K, lda, ldb, ldc);
  key.type = type;
  key.ctype = ctype;
  key.tf32 = tf32 && type == CUDA_R_32F;
  key.align = std::min(
      detail::lt_alignment_of(A),
      std::min(detail::lt_alignment_of(B), detail::lt_alignment_of(C)));
  const Plan plan = plans().get(key, build);
  if (!plan.found) {
    if (type == CUDA_R_32F)
      launch_tiled<float>(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta,
                          C, ldc, ctype);
    else
      launch_tiled<__nv_bfloat16>(transA, transB, M, N, K, alpha, A, lda, B,
                                  ldb, beta, C, ldc, ctype);
    return;
  }
  AUTODDL_CUBLAS_CHECK(
      cublasLtMatmul(cublaslt(), plan.desc, &alpha, B, plan.a, A, plan.b, &beta,
                     C, plan.c, C, plan.c, &plan.algo, cublaslt_workspace(),
                     size_t(kCublasLtWorkspaceBytes), compute_stream()));
}

__global__ void scale_kernel(float *x, int64_t n, float s) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    x[i] *= s;
}

__global__ void axpby_kernel(float *y, float a, const float *x, float b,
                             int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    y[i] = a * y[i] + b * x[i];
}

} // namespace

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const void *A, int64_t lda, const void *B, int64_t ldb,
          cudaDataType_t type, float beta, float *C, int64_t ldc, bool tf32) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) { // an empty sum: C = beta C
    if (beta != 1.0f)
      for (int64_t i = 0; i < M; ++i)
        scale_floats(C + i * ldc, N, beta);
    return;
  }
  run_gemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, type, beta, C, ldc,
           CUDA_R_32F, tf32);
}

void gemm_into(int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
               const void *B, int64_t ldb, cudaDataType_t type, void *C,
               int64_t ldc, cudaDataType_t ctype) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) { // an empty sum: C = 0
    const size_t elem = ctype == CUDA_R_32F ? 4 : 2;
    AUTODDL_CUDA_CHECK(cudaMemset2DAsync(C, size_t(ldc) * elem, 0,
                                         size_t(N) * elem, size_t(M),
                                         compute_stream()));
    return;
  }
  run_gemm(false, false, M, N, K, 1.0f, A, lda, B, ldb, type, 0.0f, C, ldc,
           ctype, false);
}

void nccl_fail(ncclResult_t r, const char *call, const char *file, int line) {
  cuda_fail(ncclGetErrorString(r), call, file, line);
}

int comm_ranks(ncclComm_t comm) {
  int n = 1;
  if (comm)
    AUTODDL_KFAC_NCCL_CHECK(ncclCommCount(comm, &n));
  return n;
}

int comm_rank_of(ncclComm_t comm) {
  int r = 0;
  if (comm)
    AUTODDL_KFAC_NCCL_CHECK(ncclCommUserRank(comm, &r));
  return r;
}

void *workspace(int slot, int64_t bytes) {
  // Never destroyed: nothing may free device memory after the runtime
  // unloads (as the kernels' scratch).
  static auto *slots = new DeviceBuffer<unsigned char>[kSlots];
  auto &b = slots[slot];
  if (b.size() < bytes) { // the old area may still be read by queued work
    AUTODDL_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
    b = DeviceBuffer<unsigned char>(bytes);
  }
  return b.data();
}

void scale_floats(float *x, int64_t n, float s) {
  if (n == 0)
    return;
  scale_kernel<<<detail::grid_for(n, 256), 256, 0, compute_stream()>>>(x, n, s);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace kfac_detail

using namespace kfac_detail;

// The dimensions are checked before any buffer is sized (in is the first
// member).
KfacLayer::KfacLayer(int64_t in_, int64_t out_, bool bf16)
    : in((kfac_check_layer(in_, out_), in_)), out(out_), A(in_ * in_),
      G(out_ * out_), A_inv(in_ * in_), G_inv(out_ * out_), A_next(in_ * in_),
      G_next(out_ * out_) {
#ifndef AUTODDL_FP32 // the fp32 build preconditions in exact fp32
  if (bf16) {
    A_inv_bf16 = DeviceBuffer<__nv_bfloat16>(in_ * in_);
    G_inv_bf16 = DeviceBuffer<__nv_bfloat16>(out_ * out_);
  }
#else
  (void)bf16;
#endif
}

void kfac_accumulate(float *F, const act_t *X, int64_t S, int64_t d,
                     float scale) {
  // F[d,d] += scale X^T[d,S] X[S,d]
  gemm(true, false, d, d, S, scale, X, d, X, d, kActDataType, 1.0f, F, d);
}

void kfac_accumulate_gathered(float *F, const act_t *X_shard, int64_t S,
                              int64_t d_shard, float scale, ncclComm_t tp) {
  const int p = comm_ranks(tp);
  if (p == 1) {
    kfac_accumulate(F, X_shard, S, d_shard, scale);
    return;
  }
  // The gather leaves rank q's shard Y_q [S, d_shard] at block q; the factor's
  // block (q1, q2) is Y_q1^T Y_q2, written in place with F's leading dim.
  const int64_t n = S * d_shard, d = d_shard * p;
  auto *all =
      static_cast<act_t *>(workspace(kGather, n * p * int64_t(sizeof(act_t))));
  AUTODDL_KFAC_NCCL_CHECK(
      ncclAllGather(X_shard, all, size_t(n),
                    kActDataType == CUDA_R_32F ? ncclFloat32 : ncclBfloat16, tp,
                    compute_stream()));
  for (int q1 = 0; q1 < p; ++q1)
    for (int q2 = 0; q2 < p; ++q2)
      gemm(true, false, d_shard, d_shard, S, scale, all + q1 * n, d_shard,
           all + q2 * n, d_shard, kActDataType, 1.0f,
           F + q1 * d_shard * d + q2 * d_shard, d);
}

const act_t *kfac_select_rows(const act_t *X, int64_t d,
                              const KfacRowStride &r) {
  // One copy of the selected rows and one GEMM over them, rather than a GEMM
  // per sample: those would read and write the fp32 factor once each (for a
  // 3072-wide factor 38 MB a sample) and run at a short inner dimension.
  const int64_t n = r.rows() * d;
  auto *dst =
      static_cast<act_t *>(workspace(kStride, n * int64_t(sizeof(act_t))));
  if (n == 0)
    return dst;
  // The selected blocks are contiguous `block` rows each, `step` rows apart:
  // one 2-d copy at copy-engine speed (a memcpy node under capture), where
  // an elementwise kernel divided 64-bit indices per element: with it,
  // stride 2 took 17 % off the traced curvature, not half
  // (bench/results/pipefisher/2026-12-07-h100-kfac-clip-1500/).
  const size_t row = size_t(d) * sizeof(act_t);
  const size_t width = size_t(r.block) * row, pitch = size_t(r.step) * row;
  // A pitch over cudaDevAttrMaxPitch (commonly 2^31 - 1 bytes) is refused
  // (cudaErrorInvalidPitchValue), as for bf16 rows of 8,192 taken every
  // 131,072 rows (8,192 tokens a sample, stride 16): then one copy a block.
  int device = 0, maxPitch = 0;
  AUTODDL_CUDA_CHECK(cudaGetDevice(&device));
  AUTODDL_CUDA_CHECK(
      cudaDeviceGetAttribute(&maxPitch, cudaDevAttrMaxPitch, device));
  if (pitch <= size_t(maxPitch)) {
    AUTODDL_CUDA_CHECK(
        cudaMemcpy2DAsync(dst, width, X, pitch, width, size_t(r.count),
                          cudaMemcpyDeviceToDevice, compute_stream()));
    return dst;
  }
  for (int64_t b = 0; b < r.count; ++b)
    AUTODDL_CUDA_CHECK(
        cudaMemcpyAsync(reinterpret_cast<char *>(dst) + size_t(b) * width,
                        reinterpret_cast<const char *>(X) + size_t(b) * pitch,
                        width, cudaMemcpyDeviceToDevice, compute_stream()));
  return dst;
}

void kfac_factor_all_reduce_mean(float *F, int64_t n, ncclComm_t comm) {
  const int p = comm_ranks(comm);
  if (p == 1)
    return;
  AUTODDL_KFAC_NCCL_CHECK(ncclAllReduce(F, F, size_t(n), ncclFloat32, ncclSum,
                                        comm, compute_stream()));
  scale_floats(F, n, float(1.0 / p));
}

void kfac_axpby(float *y, float a, const float *x, float b, int64_t n) {
  if (n == 0)
    return;
  axpby_kernel<<<detail::grid_for(n, 256), 256, 0, compute_stream()>>>(y, a, x,
                                                                       b, n);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
