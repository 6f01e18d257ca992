// Softmax over the middle axis of [outer, L, inner] (Softmax.h): one warp per
// (outer, inner) line, elements `inner` apart; the max and the sum of
// exponentials in one online pass, then one writing pass.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Softmax.h"

namespace autoddl::rt {
namespace {
using namespace detail;

constexpr int kWarps = 8;

__global__ void softmax_forward_kernel(act_t *out, const act_t *x,
                                       int64_t lines, int64_t L,
                                       int64_t inner) {
  const int lane = threadIdx.x & 31;
  const int64_t line = warp_row<kWarps>();
  if (line >= lines)
    return;
  const int64_t base = (line / inner) * L * inner + line % inner;
  MaxSum ms{-INFINITY, 0.0f};
  for (int64_t l = lane; l < L; l += 32)
    ms = max_sum_combine(ms, MaxSum{to_float(x[base + l * inner]), 1.0f});
  ms = warp_max_sum(ms);
  const float inv = 1.0f / ms.s;
  for (int64_t l = lane; l < L; l += 32) {
    const int64_t i = base + l * inner;
    out[i] = from_float<act_t>(expf(to_float(x[i]) - ms.m) * inv);
  }
}

__global__ void softmax_backward_kernel(act_t *dx, const act_t *y,
                                        const act_t *dout, int64_t lines,
                                        int64_t L, int64_t inner) {
  const int lane = threadIdx.x & 31;
  const int64_t line = warp_row<kWarps>();
  if (line >= lines)
    return;
  const int64_t base = (line / inner) * L * inner + line % inner;
  float dot = 0.0f;
  for (int64_t l = lane; l < L; l += 32) {
    const int64_t i = base + l * inner;
    dot += to_float(dout[i]) * to_float(y[i]);
  }
  dot = warp_sum(dot);
  for (int64_t l = lane; l < L; l += 32) {
    const int64_t i = base + l * inner;
    dx[i] = from_float<act_t>(to_float(dx[i]) +
                              to_float(y[i]) * (to_float(dout[i]) - dot));
  }
}
} // namespace

void softmax_forward(act_t *out, const act_t *x, int64_t outer, int64_t L,
                     int64_t inner) {
  const int64_t lines = outer * inner;
  if (lines == 0 || L == 0)
    return;
  softmax_forward_kernel<<<unsigned((lines + kWarps - 1) / kWarps), 32 * kWarps,
                           0, compute_stream()>>>(out, x, lines, L, inner);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void softmax_backward(act_t *dx, const act_t *y, const act_t *dout,
                      int64_t outer, int64_t L, int64_t inner) {
  const int64_t lines = outer * inner;
  if (lines == 0 || L == 0 || !dx)
    return;
  softmax_backward_kernel<<<unsigned((lines + kWarps - 1) / kWarps),
                            32 * kWarps, 0, compute_stream()>>>(
      dx, y, dout, lines, L, inner);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
