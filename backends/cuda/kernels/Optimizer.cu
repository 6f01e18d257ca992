// SGD and AdamW (Optimizer.h): one pass over the fp32 state per step that
// also writes the act_t working copy. The arithmetic uses round-to-nearest
// intrinsics (no fused multiply-add) in the CPU's order of operations, so the
// fp32 master weights match backends/cpu/Optimizer.h bit for bit on the same
// inputs (up to sqrt/division, which are correctly rounded on both).
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Optimizer.h"

#include <cmath>

namespace autoddl::rt {
namespace {
using namespace detail;

struct AdamWScalars {
  float decay, oneMinusB1, b2, oneMinusB2, stepSize, bc2Sqrt, eps;
};

template <int V>
__global__ void adamw_kernel(float *params, const float *grads, float *m,
                             float *v, act_t *work, int64_t n, AdamWScalars c) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  auto step = [&](float &p, float g, float &mi, float &vi) {
    p = __fmul_rn(p, c.decay);
    mi = __fadd_rn(mi, __fmul_rn(__fsub_rn(g, mi), c.oneMinusB1));
    vi = __fadd_rn(__fmul_rn(vi, c.b2),
                   __fmul_rn(__fmul_rn(c.oneMinusB2, g), g));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2Sqrt), c.eps);
    p = __fsub_rn(p, __fdiv_rn(__fmul_rn(c.stepSize, mi), denom));
  };
  for (int64_t k = tid; k < n / V; k += nth) {
    const int64_t j = k * V;
    float p[V], g[V], mm[V], vv[V];
    load_floats<float, V>(p, params + j);
    load_floats<float, V>(g, grads + j);
    load_floats<float, V>(mm, m + j);
    load_floats<float, V>(vv, v + j);
#pragma unroll
    for (int i = 0; i < V; ++i)
      step(p[i], g[i], mm[i], vv[i]);
    store_floats<float, V>(params + j, p);
    store_floats<float, V>(m + j, mm);
    store_floats<float, V>(v + j, vv);
    if (work)
      store_floats<act_t, V>(work + j, p);
  }
  for (int64_t j = (n / V) * V + tid; j < n; j += nth) {
    step(params[j], grads[j], m[j], v[j]);
    if (work)
      work[j] = from_float<act_t>(params[j]);
  }
}

template <int V>
__global__ void sgd_kernel(float *params, const float *grads, float *buf,
                           act_t *work, int64_t n, float lr, float momentum,
                           float wd, bool first) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  auto step = [&](float &p, float g, float *b) {
    g = __fadd_rn(g, __fmul_rn(wd, p));
    if (momentum != 0.0f) {
      *b = first ? g : __fadd_rn(__fmul_rn(momentum, *b), g);
      g = *b;
    }
    p = __fsub_rn(p, __fmul_rn(lr, g));
  };
  for (int64_t k = tid; k < n / V; k += nth) {
    const int64_t j = k * V;
    float p[V], g[V], b[V];
    load_floats<float, V>(p, params + j);
    load_floats<float, V>(g, grads + j);
    if (momentum != 0.0f)
      load_floats<float, V>(b, buf + j);
#pragma unroll
    for (int i = 0; i < V; ++i)
      step(p[i], g[i], b + i);
    store_floats<float, V>(params + j, p);
    if (momentum != 0.0f)
      store_floats<float, V>(buf + j, b);
    if (work)
      store_floats<act_t, V>(work + j, p);
  }
  for (int64_t j = (n / V) * V + tid; j < n; j += nth) {
    float b = momentum != 0.0f ? buf[j] : 0.0f;
    step(params[j], grads[j], &b);
    if (momentum != 0.0f)
      buf[j] = b;
    if (work)
      work[j] = from_float<act_t>(params[j]);
  }
}

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}
} // namespace

void adamw_step(float *params, const float *grads, float *m, float *v,
                int64_t n, const AdamWConfig &c, int64_t t, act_t *work) {
  if (n <= 0)
    return;
  // Scalars formed in double and rounded once, as backends/cpu/Optimizer.h.
  const double bc1 = 1.0 - std::pow(c.beta1, double(t));
  const double bc2 = 1.0 - std::pow(c.beta2, double(t));
  const AdamWScalars s{float(1.0 - c.lr * c.weight_decay),
                       float(1.0 - c.beta1),
                       float(c.beta2),
                       float(1.0 - c.beta2),
                       float(c.lr / bc1),
                       float(std::sqrt(bc2)),
                       float(c.eps)};
  const bool vec = aligned16(params) && aligned16(grads) && aligned16(m) &&
                   aligned16(v) && (!work || pack4_aligned(params, work));
  // A thread a pack of W (one more for the tail past the last whole pack).
  with_pack<4>(vec, [&](auto w) {
    constexpr int W = decltype(w)::value;
    adamw_kernel<W>
        <<<grid_for(n / W + (W > 1), 256), 256, 0, compute_stream()>>>(
            params, grads, m, v, work, n, s);
  });
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void sgd_step(float *params, const float *grads, float *momentum_buf, int64_t n,
              float lr, float momentum, float weight_decay, int64_t step,
              act_t *work) {
  if (n <= 0)
    return;
  const bool vec = aligned16(params) && aligned16(grads) &&
                   (momentum == 0.0f || aligned16(momentum_buf)) &&
                   (!work || pack4_aligned(params, work));
  with_pack<4>(vec, [&](auto w) {
    constexpr int W = decltype(w)::value;
    sgd_kernel<W><<<grid_for(n / W + (W > 1), 256), 256, 0, compute_stream()>>>(
        params, grads, momentum_buf, work, n, lr, momentum, weight_decay,
        step == 1);
  });
  AUTODDL_CUDA_CHECK_LAUNCH();
}

double grad_norm_squared(const float *grads, int64_t n) {
  return detail::sum_floats(grads, n, true);
}

} // namespace autoddl::rt
