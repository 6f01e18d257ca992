// Multi-head attention, causal or not, with grouped-query kv heads; q/k/v
// separate or one fused qkv tensor. Conventions: see Embedding.h. Per (batch,
// head) the work is three GEMMs on strided row views (cblas_sgemm with leading
// dimensions), so fused and separate layouts share one kernel.
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_ATTENTION_H
#define AUTODDL_BACKENDS_CPU_KERNELS_ATTENTION_H

#include "backends/common/AttentionViews.h"
#include "backends/cpu/kernels/Linear.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace autoddl::rt {

/// Where q, k, v live (backends/common/AttentionViews.h).
using AttentionViews = AttentionViewsOf<float>;
using AttentionGradViews = AttentionGradViewsOf<float>;

/// out[B,T,H*D] = softmax(q k^T / sqrt(D) (+ causal mask)) v for each head h,
/// using kv head g = h / (H/G) (G divides H); saves the probabilities
/// att[B,H,T,T] for backward (masked entries are exactly 0). H and G may be the
/// local heads of a head-split (tensor-parallel) rank.
inline void attention_forward(float *out, float *att, const AttentionViews &in,
                              int64_t B, int64_t T, int64_t H, int64_t G,
                              int64_t D, bool causal) {
  const float scale = float(1.0 / std::sqrt(double(D)));
  const int64_t group = H / G;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      const float *q = in.q + b * T * in.q_stride + h * D;
      const float *k = in.k + b * T * in.kv_stride + g * D;
      const float *v = in.v + b * T * in.kv_stride + g * D;
      float *p = att + (b * H + h) * T * T;
      gemm(false, true, T, T, D, scale, q, in.q_stride, k, in.kv_stride, 0.0f,
           p, T); // scores [T,T]
      for (int64_t t = 0; t < T; ++t) {
        float *row = p + t * T;
        const int64_t n = causal ? t + 1 : T; // keys 0..t when causal
        float mx = -INFINITY;
        for (int64_t s = 0; s < n; ++s)
          mx = std::fmax(mx, row[s]);
        double sum = 0;
        for (int64_t s = 0; s < n; ++s) {
          row[s] = std::exp(row[s] - mx);
          sum += row[s];
        }
        const float inv = float(1.0 / sum);
        for (int64_t s = 0; s < n; ++s)
          row[s] *= inv;
        for (int64_t s = n; s < T; ++s)
          row[s] = 0.0f;
      }
      gemm(false, false, T, D, T, 1.0f, p, T, v, in.kv_stride, 0.0f,
           out + b * T * H * D + h * D, H * D); // out_h [T,D] = P v
    }
}

/// Accumulates dq, dk, dv from dout[B,T,H*D] and the saved att[B,H,T,T]:
/// dv += P^T dout; dS = P (dP - rowsum(dP P)) with dP = dout v^T; dq += dS k /
/// sqrt(D); dk += dS^T q / sqrt(D). kv heads shared by a group of q heads sum
/// their contributions.
inline void attention_backward(const AttentionGradViews &grad,
                               const float *dout, const float *att,
                               const AttentionViews &in, int64_t B, int64_t T,
                               int64_t H, int64_t G, int64_t D) {
  const float scale = float(1.0 / std::sqrt(double(D)));
  const int64_t group = H / G;
  std::vector<float> dp(size_t(T * T)); // workspace [T,T]
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      const int64_t qOff = b * T * in.q_stride + h * D;
      const int64_t kvOff = b * T * in.kv_stride + g * D;
      const float *p = att + (b * H + h) * T * T;
      const float *go = dout + b * T * H * D + h * D;
      gemm(false, true, T, T, D, 1.0f, go, H * D, in.v + kvOff, in.kv_stride,
           0.0f, dp.data(), T); // dP = dout_h v^T
      const int64_t dqOff = b * T * grad.q_stride + h * D;
      const int64_t dkvOff = b * T * grad.kv_stride + g * D;
      if (grad.dv)
        gemm(true, false, T, D, T, 1.0f, p, T, go, H * D, 1.0f,
             grad.dv + dkvOff, grad.kv_stride);
      for (int64_t t = 0; t < T; ++t) {
        float *row = dp.data() + t * T;
        const float *prow = p + t * T;
        double dot = 0;
        for (int64_t s = 0; s < T; ++s)
          dot += double(row[s]) * prow[s];
        for (int64_t s = 0; s < T; ++s)
          row[s] = prow[s] * (row[s] - float(dot)); // dS (0 where masked)
      }
      if (grad.dq)
        gemm(false, false, T, D, T, scale, dp.data(), T, in.k + kvOff,
             in.kv_stride, 1.0f, grad.dq + dqOff, grad.q_stride);
      if (grad.dk)
        gemm(true, false, T, D, T, scale, dp.data(), T, in.q + qOff,
             in.q_stride, 1.0f, grad.dk + dkvOff, grad.kv_stride);
    }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_ATTENTION_H
