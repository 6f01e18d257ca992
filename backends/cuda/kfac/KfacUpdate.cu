// Preconditioning and the first-order rules on the GPU (Kfac.h): GEMM
// sandwiches G^-1 dW A^-1 in bf16 (the inverses' bf16 copies) or fp32, whole
// or this rank's block of a tensor-parallel layer (gathered over NCCL);
// momentum SGD with decoupled weight decay, and LAMB and Adam grafting with
// device-side, fixed-order norms.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Reduce.h"
#include "backends/cuda/kfac/Kfac.h"
#include "backends/cuda/kfac/KfacInternal.cuh"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace autoddl::rt {
namespace {
using namespace kfac_detail;

/// dst[n] = bf16(src) (round to nearest even): Reduce.h's cast, act_t being
/// bf16 in the bf16 build; the fp32 build keeps no bf16 copies (KfacLayer).
void round_bf16(__nv_bfloat16 *dst, const float *src, int64_t n) {
#ifdef AUTODDL_FP32
  (void)dst, (void)src, (void)n;
  throw std::logic_error("bf16 preconditioning in the fp32 build");
#else
  cast_to_act(dst, src, n);
#endif
}

/// kfac_precondition_with's operations on device memory (the compute
/// stream's workspaces), gathering over NCCL on `tp`. T, the inverses' and
/// the intermediate's element type: float (fp32 GEMMs, TF32 operands in the
/// bf16 build) or __nv_bfloat16 (bf16 GEMMs with fp32 accumulation, an fp32
/// operand rounded to bf16 first).
template <class T> struct PreconditionOps {
  static constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  ncclComm_t tp;
  int ranks() const { return comm_ranks(tp); }
  int rank() const { return comm_rank_of(tp); }
  static const T *inverse(const KfacLayer &l, bool g) {
    if constexpr (kBf16)
      return g ? l.G_inv_bf16.data() : l.A_inv_bf16.data();
    else
      return g ? l.G_inv.data() : l.A_inv.data();
  }
  template <class TA, class TB, class TC>
  void gemm(int64_t M, int64_t N, int64_t K, const TA *A, int64_t lda,
            const TB *B, int64_t ldb, TC *C, int64_t ldc) {
    if constexpr (kBf16)
      gemm_into(M, N, K, rounded(A, M, K, lda), lda, rounded(B, K, N, ldb), ldb,
                CUDA_R_16BF, C, ldc,
                std::is_same_v<TC, float> ? CUDA_R_32F : CUDA_R_16BF);
    else
      kfac_detail::gemm(false, false, M, N, K, 1.0f, A, lda, B, ldb, CUDA_R_32F,
                        0.0f, C, ldc, kPreconditionTf32);
  }
  /// A bf16 operand as it is; an fp32 one (the gradient, at most one per
  /// GEMM) rounded into a workspace.
  static const __nv_bfloat16 *rounded(const __nv_bfloat16 *x, int64_t, int64_t,
                                      int64_t) {
    return x;
  }
  static const __nv_bfloat16 *rounded(const float *x, int64_t rows,
                                      int64_t cols, int64_t ld) {
    const int64_t n = (rows - 1) * ld + cols;
    auto *r = static_cast<__nv_bfloat16 *>(
        workspace(kCast, n * int64_t(sizeof(__nv_bfloat16))));
    round_bf16(r, x, n);
    return r;
  }
  T *scratch(int64_t n) {
    return static_cast<T *>(workspace(kProduct, n * int64_t(sizeof(T))));
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

/// Adam's bias-corrected update m^ / (sqrt(v^) + eps).
__device__ __forceinline__ float adam_update(const LambScalars &s, float m,
                                             float v) {
  return (m / s.bc1) / (sqrtf(v / s.bc2) + s.eps);
}

__device__ __forceinline__ float lamb_update(const LambScalars &s, float m,
                                             float v, float p) {
  return adam_update(s, m, v) + s.wd * p;
}

constexpr int kLambThreads = 256;

/// m, v updated from x (LAMB: the preconditioned gradient; Adam grafting:
/// the raw one); per block two sums of squares (double) into partial: LAMB's
/// p^2 and u^2, Adam grafting's u^2 and d^2 (none without a direction d:
/// partial null).
template <bool Lamb>
__global__ void moments_kernel(const float *p, const float *x, const float *d,
                               float *m, float *v, int64_t n, LambScalars s,
                               double *partial) {
  __shared__ double scratch[32];
  double a = 0, b = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float mi = s.b1 * m[i] + s.oneMinusB1 * x[i];
    const float vi = s.b2 * v[i] + s.oneMinusB2 * x[i] * x[i];
    m[i] = mi;
    v[i] = vi;
    if (Lamb) {
      const float u = lamb_update(s, mi, vi, p[i]);
      a += double(p[i]) * p[i];
      b += double(u) * u;
    } else if (d) {
      const float u = adam_update(s, mi, vi);
      a += double(u) * u;
      b += double(d[i]) * d[i];
    }
  }
  if (!partial)
    return; // uniform over the grid: no block reaches block_sum
  a = detail::block_sum(a, scratch);
  b = detail::block_sum(b, scratch);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = a;
    partial[2 * blockIdx.x + 1] = b;
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

/// p <- p (1 - lr wd) - lr (||u|| / ||d||) d with a direction d (sums: the
/// squared norms), else - lr u (AdamW).
__global__ void graft_apply_kernel(float *p, const float *d, const float *m,
                                   const float *v, int64_t n, LambScalars s,
                                   float lr, float decay, const double *sums,
                                   act_t *work) {
  const double dn = d ? sqrt(sums[1]) : 0.0;
  const float scale = d && dn > 0 ? float(sqrt(sums[0]) / dn) : 0.0f;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float step = d ? scale * d[i] : adam_update(s, m[i], v[i]);
    const float val = p[i] * decay - lr * step;
    p[i] = val;
    if (work)
      work[i] = detail::from_float<act_t>(val);
  }
}

/// LAMB's and Adam grafting's scalars for step t.
LambScalars lamb_scalars(const KfacConfig &c, int64_t t) {
  return {float(c.beta1),
          float(c.beta2),
          float(1.0 - c.beta1),
          float(1.0 - c.beta2),
          float(1.0 - std::pow(c.beta1, double(t))),
          float(1.0 - std::pow(c.beta2, double(t))),
          float(c.eps),
          float(c.weight_decay)};
}

/// Sums the two squared norms over the ranks holding a parameter's shards:
/// dp shards (ZeRO-1), then tp.
void sum_norms(double *sums, ncclComm_t shard_comm, ncclComm_t norm_comm) {
  for (ncclComm_t comm : {shard_comm, norm_comm})
    if (comm_ranks(comm) > 1)
      AUTODDL_KFAC_NCCL_CHECK(ncclAllReduce(sums, sums, 2, ncclFloat64, ncclSum,
                                            comm, compute_stream()));
}

} // namespace

bool kfac_precondition_bf16() {
#ifdef AUTODDL_FP32
  return false;
#else
  static const bool bf16 = [] {
    const char *v = std::getenv("AUTODDL_KFAC_PRECOND");
    return !(v && std::string(v) == "fp32");
  }();
  return bf16;
#endif
}

const char *kfac_precondition_name() {
#ifdef AUTODDL_FP32
  return "fp32";
#else
  return kfac_precondition_bf16() ? "bf16" : "tf32";
#endif
}

void kfac_inverses_installed(KfacLayer &l) {
  if (!l.precondition_bf16())
    return;
  if (l.a_valid)
    round_bf16(l.A_inv_bf16.data(), l.A_inv.data(), l.in * l.in);
  if (l.g_valid)
    round_bf16(l.G_inv_bf16.data(), l.G_inv.data(), l.out * l.out);
}

void kfac_precondition_split(float *dW_out, const float *dW_shard,
                             float *db_out, const float *db_shard,
                             const KfacLayer &l, bool transpose_weight,
                             KfacSplit split, ncclComm_t tp) {
  if (l.precondition_bf16()) {
    PreconditionOps<__nv_bfloat16> ops{tp};
    kfac_precondition_with(ops, dW_out, dW_shard, db_out, db_shard, l,
                           transpose_weight, split);
    return;
  }
  PreconditionOps<float> ops{tp};
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
  const LambScalars s = lamb_scalars(c, t);
  const unsigned blocks = detail::grid_for(n, kLambThreads);
  auto *partial = static_cast<double *>(
      workspace(kReduce, (2 * int64_t(blocks) + 2) * int64_t(sizeof(double))));
  double *sums = partial + 2 * blocks;
  moments_kernel<true><<<blocks, kLambThreads, 0, compute_stream()>>>(
      p, d, nullptr, m, v, n, s, partial);
  AUTODDL_CUDA_CHECK_LAUNCH();
  lamb_sum_kernel<<<1, 256, 0, compute_stream()>>>(partial, int(blocks), sums);
  AUTODDL_CUDA_CHECK_LAUNCH();
  sum_norms(sums, shard_comm, norm_comm);
  lamb_apply_kernel<<<blocks, kLambThreads, 0, compute_stream()>>>(
      p, m, v, n, s, c.lr, sums, work);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void kfac_adam_graft_step(float *p, const float *g, const float *d, float *m,
                          float *v, int64_t n, const KfacConfig &c, int64_t t,
                          ncclComm_t norm_comm, act_t *work,
                          ncclComm_t shard_comm) {
  const LambScalars s = lamb_scalars(c, t);
  const unsigned blocks = detail::grid_for(n, kLambThreads);
  double *partial = nullptr, *sums = nullptr;
  if (d) {
    partial = static_cast<double *>(workspace(
        kReduce, (2 * int64_t(blocks) + 2) * int64_t(sizeof(double))));
    sums = partial + 2 * blocks;
  }
  moments_kernel<false><<<blocks, kLambThreads, 0, compute_stream()>>>(
      nullptr, g, d, m, v, n, s, partial);
  AUTODDL_CUDA_CHECK_LAUNCH();
  if (d) {
    lamb_sum_kernel<<<1, 256, 0, compute_stream()>>>(partial, int(blocks),
                                                     sums);
    AUTODDL_CUDA_CHECK_LAUNCH();
    sum_norms(sums, shard_comm, norm_comm);
  }
  graft_apply_kernel<<<blocks, kLambThreads, 0, compute_stream()>>>(
      p, d, m, v, n, s, float(c.lr), float(1.0 - c.lr * c.weight_decay), sums,
      work);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
