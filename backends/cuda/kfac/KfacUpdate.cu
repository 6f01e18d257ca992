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

/// out[Rn,Cn] = L[r0:r0+Rn, :] M[nL,nR] R[:, c0:c0+Cn] for symmetric L, R
/// (fp32), in the cheaper order (the CPU runtime's block_sandwich).
void block_sandwich(float *out, const float *L, int64_t nL, int64_t r0,
                    int64_t Rn, const float *M, int64_t nR, const float *R,
                    int64_t c0, int64_t Cn) {
  const double leftFirst = double(Rn) * nL * nR + double(Rn) * nR * Cn;
  const double rightFirst = double(nL) * nR * Cn + double(Rn) * nL * Cn;
  if (leftFirst <= rightFirst) {
    auto *t = static_cast<float *>(
        workspace(kProduct, Rn * nR * int64_t(sizeof(float))));
    gemm(false, false, Rn, nR, nL, 1.0f, L + r0 * nL, nL, M, nR, CUDA_R_32F,
         0.0f, t, nR, kPreconditionTf32);
    gemm(false, false, Rn, Cn, nR, 1.0f, t, nR, R + c0, nR, CUDA_R_32F, 0.0f,
         out, Cn, kPreconditionTf32);
  } else {
    auto *t = static_cast<float *>(
        workspace(kProduct, nL * Cn * int64_t(sizeof(float))));
    gemm(false, false, nL, Cn, nR, 1.0f, M, nR, R + c0, nR, CUDA_R_32F, 0.0f, t,
         Cn, kPreconditionTf32);
    gemm(false, false, Rn, Cn, nL, 1.0f, L + r0 * nL, nL, t, Cn, CUDA_R_32F,
         0.0f, out, Cn, kPreconditionTf32);
  }
}

void precondition_block(float *dW_out, const float *dW, float *db_out,
                        const float *db, const KfacLayer &l,
                        bool transpose_weight, int64_t o0, int64_t Ol,
                        int64_t k0, int64_t Kl) {
  if (transpose_weight)
    block_sandwich(dW_out, l.G_inv.data(), l.out, o0, Ol, dW, l.in,
                   l.A_inv.data(), k0, Kl);
  else
    block_sandwich(dW_out, l.A_inv.data(), l.in, k0, Kl, dW, l.out,
                   l.G_inv.data(), o0, Ol);
  if (db_out)
    gemm(false, false, Ol, 1, l.out, 1.0f, l.G_inv.data() + o0 * l.out, l.out,
         db, 1, CUDA_R_32F, 0.0f, db_out, 1, kPreconditionTf32);
}

void copy_floats(float *dst, const float *src, int64_t n) {
  AUTODDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(n) * sizeof(float),
                                     cudaMemcpyDeviceToDevice,
                                     compute_stream()));
}

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

void kfac_precondition(float *dW_out, const float *dW, float *db_out,
                       const float *db, const KfacLayer &l,
                       bool transpose_weight) {
  kfac_precondition_split(dW_out, dW, db_out, db, l, transpose_weight,
                          KfacSplit::None, nullptr);
}

void kfac_precondition_split(float *dW_out, const float *dW_shard,
                             float *db_out, const float *db_shard,
                             const KfacLayer &l, bool transpose_weight,
                             KfacSplit split, ncclComm_t tp) {
  const int p = comm_ranks(tp);
  const KfacBlock blk =
      kfac_split_block(l.in, l.out, split, p, p == 1 ? 0 : comm_rank_of(tp));
  const int64_t o0 = blk.o0, Ol = blk.Ol, k0 = blk.k0, Kl = blk.Kl;
  if (!l.has_inverse()) { // first-order: the shard as it is
    copy_floats(dW_out, dW_shard, Ol * Kl);
    if (db_out)
      copy_floats(db_out, db_shard, Ol);
    return;
  }
  if (p == 1 || split == KfacSplit::None) {
    precondition_block(dW_out, dW_shard, db_out, db_shard, l, transpose_weight,
                       o0, Ol, k0, Kl);
    return;
  }
  // All-gather: block q of `all` is rank q's shard. Split along the stored
  // rows it is the whole gradient already; along the columns each block is
  // copied to its column range.
  const bool rows = (split == KfacSplit::Out) == transpose_weight;
  const int64_t R = transpose_weight ? Ol : Kl, C = transpose_weight ? Kl : Ol;
  const int64_t n = R * C;
  auto *all = static_cast<float *>(
      workspace(kGather, 2 * n * p * int64_t(sizeof(float))));
  AUTODDL_KFAC_NCCL_CHECK(ncclAllGather(dW_shard, all, size_t(n), ncclFloat32,
                                        tp, compute_stream()));
  const float *full = all;
  if (!rows) {
    float *packed = all + n * p;
    for (int q = 0; q < p; ++q)
      AUTODDL_CUDA_CHECK(cudaMemcpy2DAsync(
          packed + q * C, size_t(C * p) * sizeof(float), all + q * n,
          size_t(C) * sizeof(float), size_t(C) * sizeof(float), size_t(R),
          cudaMemcpyDeviceToDevice, compute_stream()));
    full = packed;
  }
  const float *db = db_shard;
  if (db_out && split == KfacSplit::Out) {
    auto *dbFull =
        static_cast<float *>(workspace(kBias, l.out * int64_t(sizeof(float))));
    AUTODDL_KFAC_NCCL_CHECK(ncclAllGather(db_shard, dbFull, size_t(Ol),
                                          ncclFloat32, tp, compute_stream()));
    db = dbFull;
  }
  precondition_block(dW_out, full, db_out, db, l, transpose_weight, o0, Ol, k0,
                     Kl);
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
