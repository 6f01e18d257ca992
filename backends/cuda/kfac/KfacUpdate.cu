// Preconditioning and the first-order rules on the GPU (Kfac.h): fp32 GEMM
// sandwiches G^-1 dW A^-1 (whole or this rank's block of a tensor-parallel
// layer, gathered over NCCL), momentum SGD with decoupled weight decay, and
// LAMB with device-side, fixed-order norms.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kfac/Kfac.h"
#include "backends/cuda/kfac/KfacInternal.cuh"

#include <cmath>
#include <stdexcept>
#include <string>

namespace autoddl::rt {
namespace {
using namespace kfac_detail;

/// kfac_precondition_with's operations on device floats (fp32 GEMMs, the
/// compute stream's workspaces), gathering over NCCL on `tp`.
struct PreconditionOps {
  ncclComm_t tp;
  int ranks() const { return comm_ranks(tp); }
  int rank() const { return comm_rank_of(tp); }
  void gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
            const float *B, int64_t ldb, float *C, int64_t ldc) {
    kfac_detail::gemm(false, false, M, N, K, 1.0f, A, lda, B, ldb, CUDA_R_32F,
                      0.0f, C, ldc, kPreconditionTf32);
  }
  float *scratch(int64_t n) {
    return static_cast<float *>(
        workspace(kProduct, n * int64_t(sizeof(float))));
  }
  void copy(float *dst, const float *src, int64_t n) {
    AUTODDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(n) * sizeof(float),
                                       cudaMemcpyDeviceToDevice,
                                       compute_stream()));
  }
  /// Block q of `all` is rank q's shard. Stacked along the stored rows it is
  /// the whole gradient already; along the columns each block is copied to
  /// its column range.
  const float *gather(const float *shard, int64_t R, int64_t C, bool rows) {
    const int p = ranks();
    const int64_t n = R * C;
    auto *all = static_cast<float *>(
        workspace(kGather, 2 * n * p * int64_t(sizeof(float))));
    AUTODDL_KFAC_NCCL_CHECK(ncclAllGather(shard, all, size_t(n), ncclFloat32,
                                          tp, compute_stream()));
    if (rows)
      return all;
    float *packed = all + n * p;
    for (int q = 0; q < p; ++q)
      AUTODDL_CUDA_CHECK(cudaMemcpy2DAsync(
          packed + q * C, size_t(C * p) * sizeof(float), all + q * n,
          size_t(C) * sizeof(float), size_t(C) * sizeof(float), size_t(R),
          cudaMemcpyDeviceToDevice, compute_stream()));
    return packed;
  }
  const float *gather_bias(const float *shard, int64_t n) {
    auto *bias = static_cast<float *>(
        workspace(kBias, n * ranks() * int64_t(sizeof(float))));
    AUTODDL_KFAC_NCCL_CHECK(ncclAllGather(shard, bias, size_t(n), ncclFloat32,
                                          tp, compute_stream()));
    return bias;
  }
};

__global__ void sgd_kernel(float *p, const float *d, float *buf, int64_t n,
                           float decay, float lr, float mu, bool first,
                           act_t *work) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float g = d[i];
    if (mu != 0.0f) {
      g = first ? g : mu * buf[i] + g;
      buf[i] = g;
    }
    const float v = p[i] * decay - lr * g;
    p[i] = v;
    if (work)
      work[i] = detail::from_float<act_t>(v);
  }
}

struct LambScalars {
  float b1, b2, oneMinusB1, oneMinusB2, bc1, bc2, eps, wd;
};

__device__ __forceinline__ float lamb_update(const LambScalars &s, float m,
                                             float v, float p) {
  return (m / s.bc1) / (sqrtf(v / s.bc2) + s.eps) + s.wd * p;
}

constexpr int kLambThreads = 256;

/// m, v updated; per block the sums of p^2 and u^2 (double) into partial.
__global__ void lamb_moments_kernel(const float *p, const float *d, float *m,
                                    float *v, int64_t n, LambScalars s,
                                    double *partial) {
  __shared__ double scratch[32];
  double pp = 0, uu = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float mi = s.b1 * m[i] + s.oneMinusB1 * d[i];
    const float vi = s.b2 * v[i] + s.oneMinusB2 * d[i] * d[i];
    m[i] = mi;
    v[i] = vi;
    const float u = lamb_update(s, mi, vi, p[i]);
    pp += double(p[i]) * p[i];
    uu += double(u) * u;
  }
  pp = detail::block_sum(pp, scratch);
  uu = detail::block_sum(uu, scratch);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = pp;
    partial[2 * blockIdx.x + 1] = uu;
  }
}

/// sums[2] = the partials of `blocks` blocks, added in a fixed order.
__global__ void lamb_sum_kernel(const double *partial, int blocks,
                                double *sums) {
  __shared__ double scratch[32];
  double pp = 0, uu = 0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    pp += partial[2 * b];
    uu += partial[2 * b + 1];
  }
  pp = detail::block_sum(pp, scratch);
  uu = detail::block_sum(uu, scratch);
  if (threadIdx.x == 0) {
    sums[0] = pp;
    sums[1] = uu;
  }
}

__global__ void lamb_apply_kernel(float *p, const float *m, const float *v,
                                  int64_t n, LambScalars s, double lr,
                                  const double *sums, act_t *work) {
  const double pn = sqrt(sums[0]), un = sqrt(sums[1]);
  const float step = float(lr * (pn > 0 && un > 0 ? pn / un : 1.0));
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float val = p[i] - step * lamb_update(s, m[i], v[i], p[i]);
    p[i] = val;
    if (work)
      work[i] = detail::from_float<act_t>(val);
  }
}

} // namespace

void kfac_precondition_split(float *dW_out, const float *dW_shard,
                             float *db_out, const float *db_shard,
                             const KfacLayer &l, bool transpose_weight,
                             KfacSplit split, ncclComm_t tp) {
  PreconditionOps ops{tp};
  kfac_precondition_with(ops, dW_out, dW_shard, db_out, db_shard, l,
                         transpose_weight, split);
}

void kfac_sgd_step(float *p, const float *d, float *buf, int64_t n,
                   const KfacConfig &c, int64_t step, act_t *work) {
  if (n == 0)
    return;
  sgd_kernel<<<detail::grid_for(n, 256), 256, 0, compute_stream()>>>(
      p, d, buf, n, float(1.0 - c.lr * c.weight_decay), float(c.lr),
      float(c.momentum), step == 1, work);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void kfac_lamb_step(float *p, const float *d, float *m, float *v, int64_t n,
                    const KfacConfig &c, int64_t t, ncclComm_t norm_comm,
                    act_t *work, ncclComm_t shard_comm) {
  const LambScalars s{float(c.beta1),
                      float(c.beta2),
                      float(1.0 - c.beta1),
                      float(1.0 - c.beta2),
                      float(1.0 - std::pow(c.beta1, double(t))),
                      float(1.0 - std::pow(c.beta2, double(t))),
                      float(c.eps),
                      float(c.weight_decay)};
  const unsigned blocks = detail::grid_for(n, kLambThreads);
  auto *partial = static_cast<double *>(
      workspace(kReduce, (2 * int64_t(blocks) + 2) * int64_t(sizeof(double))));
  double *sums = partial + 2 * blocks;
  lamb_moments_kernel<<<blocks, kLambThreads, 0, compute_stream()>>>(
      p, d, m, v, n, s, partial);
  AUTODDL_CUDA_CHECK_LAUNCH();
  lamb_sum_kernel<<<1, 256, 0, compute_stream()>>>(partial, int(blocks), sums);
  AUTODDL_CUDA_CHECK_LAUNCH();
  for (ncclComm_t comm : {shard_comm, norm_comm}) // dp shards, then tp
    if (comm_ranks(comm) > 1)
      AUTODDL_KFAC_NCCL_CHECK(ncclAllReduce(sums, sums, 2, ncclFloat64, ncclSum,
                                            comm, compute_stream()));
  lamb_apply_kernel<<<blocks, kLambThreads, 0, compute_stream()>>>(
      p, m, v, n, s, c.lr, sums, work);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
