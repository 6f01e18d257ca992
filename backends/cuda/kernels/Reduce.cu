// Reductions to the host and precision casts (Reduce.h).
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Reduce.h"

#include <vector>

namespace autoddl::rt {
namespace detail {
namespace {
constexpr int kThreads = 256;

/// partial[block] = sum over this block's grid-stride elements, in double.
template <bool kSquare, int V>
__global__ void __launch_bounds__(kThreads)
    partial_sum_kernel(double *partial, const float *x, int64_t n) {
  __shared__ double scratch[32];
  double s = 0.0;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = tid; k < n / V; k += nth) {
    float f[V];
    load_floats<float, V>(f, x + k * V);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const double v = f[i];
      s += kSquare ? v * v : v;
    }
  }
  for (int64_t i = (n / V) * V + tid; i < n; i += nth) {
    const double v = x[i];
    s += kSquare ? v * v : v;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = s;
}

template <class Dst, class Src, int V>
__global__ void cast_kernel(Dst *dst, const Src *src, int64_t n) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = tid; k < n / V; k += nth) {
    float v[V];
    load_floats<Src, V>(v, src + k * V);
    store_floats<Dst, V>(dst + k * V, v);
  }
  for (int64_t j = (n / V) * V + tid; j < n; j += nth)
    dst[j] = from_float<Dst>(to_float(src[j]));
}
} // namespace

double sum_floats(const float *x, int64_t n, bool square) {
  if (n <= 0)
    return 0.0;
  // Enough blocks to keep the memory busy; the host adds their sums in order.
  const unsigned blocks =
      grid_for(n / 4 + 1, kThreads) < unsigned(sm_count() * 8)
          ? grid_for(n / 4 + 1, kThreads)
          : unsigned(sm_count() * 8);
  auto *partial = static_cast<double *>(
      scratch(0, int64_t(blocks) * int64_t(sizeof(double))));
  const bool vec = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  auto kernel =
      square
          ? (vec ? partial_sum_kernel<true, 4> : partial_sum_kernel<true, 1>)
          : (vec ? partial_sum_kernel<false, 4> : partial_sum_kernel<false, 1>);
  kernel<<<blocks, kThreads, 0, compute_stream()>>>(partial, x, n);
  AUTODDL_CUDA_CHECK_LAUNCH();
  std::vector<double> host(blocks);
  copy_to_host(host.data(), partial, int64_t(blocks) * int64_t(sizeof(double)));
  double s = 0.0;
  for (double v : host)
    s += v;
  return s;
}
} // namespace detail

double sum_to_host(const float *x, int64_t n) {
  return detail::sum_floats(x, n, false);
}

namespace {
// dst[n] = src[n] converted between fp32 and act_t, 4 elements a thread where
// both buffers are `aligned` for it (detail::pack4_aligned).
template <class Dst, class Src>
void cast_launch(Dst *dst, const Src *src, int64_t n, bool aligned) {
  if (n <= 0)
    return;
  if (aligned)
    detail::cast_kernel<Dst, Src, 4>
        <<<detail::grid_for(n / 4 + 1, 256), 256, 0, compute_stream()>>>(
            dst, src, n);
  else
    detail::cast_kernel<Dst, Src, 1>
        <<<detail::grid_for(n, 256), 256, 0, compute_stream()>>>(dst, src, n);
  AUTODDL_CUDA_CHECK_LAUNCH();
}
} // namespace

void cast_to_act(act_t *dst, const float *src, int64_t n) {
  cast_launch(dst, src, n, detail::pack4_aligned(src, dst));
}

void cast_to_float(float *dst, const act_t *src, int64_t n) {
  cast_launch(dst, src, n, detail::pack4_aligned(dst, src));
}

} // namespace autoddl::rt
