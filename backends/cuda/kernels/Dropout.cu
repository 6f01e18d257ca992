// Dropout while training on the GPU (Dropout.h).
#include "backends/common/Philox.h"
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Dropout.h"

namespace autoddl::rt {
namespace detail {
namespace {
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    dropout_forward_kernel(act_t *out, const act_t *x, int64_t n, double ratio,
                           float scale, uint64_t seed, uint64_t stream,
                           int64_t first) {
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += nth) {
    if (!dropout_keep(seed, stream, uint64_t(first + i), ratio)) {
      out[i] = from_float<act_t>(-0.0f);
      continue;
    }
    // A kept element that is (or rounds to) zero is +0: only a dropped one
    // carries the sign bit.
    const float v = to_float(x[i]) * scale;
    out[i] = from_float<act_t>(v);
    if (to_float(out[i]) == 0.0f)
      out[i] = from_float<act_t>(0.0f);
  }
}

__global__ void __launch_bounds__(kThreads)
    dropout_backward_kernel(act_t *dx, const act_t *out, const act_t *dout,
                            int64_t n, float scale) {
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += nth) {
    const float y = to_float(out[i]);
    if (!(y == 0.0f && signbit(y)))
      dx[i] = from_float<act_t>(to_float(dx[i]) + to_float(dout[i]) * scale);
  }
}
} // namespace
} // namespace detail

void dropout_forward(act_t *out, const act_t *x, int64_t n, double ratio,
                     uint64_t seed, uint64_t stream, int64_t first) {
  if (n <= 0)
    return;
  detail::dropout_forward_kernel<<<detail::grid_for(n, detail::kThreads),
                                   detail::kThreads, 0, compute_stream()>>>(
      out, x, n, ratio, float(1.0 / (1.0 - ratio)), seed, stream, first);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void dropout_backward(act_t *dx, const act_t *out, const act_t *dout, int64_t n,
                      double ratio) {
  if (n <= 0 || !dx)
    return;
  detail::dropout_backward_kernel<<<detail::grid_for(n, detail::kThreads),
                                    detail::kThreads, 0, compute_stream()>>>(
      dx, out, dout, n, float(1.0 / (1.0 - ratio)));
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
