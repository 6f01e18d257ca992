// Optimizers over flat fp32 buffers: SGD (with momentum) and AdamW, PyTorch
// semantics. A ZeRO shard of parameters, gradients and state is just a slice
// [begin, end) of the flat buffers, so a sharded optimizer calls the same
// function on its slice (docs/runtime.md).
#ifndef AUTODDL_BACKENDS_CPU_OPTIMIZER_H
#define AUTODDL_BACKENDS_CPU_OPTIMIZER_H

#include <cmath>
#include <cstdint>

namespace autoddl::rt {

/// torch.optim.SGD: g' = g + wd p; buf = momentum buf + g' (buf = g' on the
/// first step, step == 1); p -= lr buf. momentum_buf may be null when momentum
/// == 0.
inline void sgd_step(float *params, const float *grads, float *momentum_buf,
                     int64_t n, float lr, float momentum, float weight_decay,
                     int64_t step) {
  for (int64_t i = 0; i < n; ++i) {
    float g = grads[i] + weight_decay * params[i];
    if (momentum != 0.0f) {
      momentum_buf[i] = step == 1 ? g : momentum * momentum_buf[i] + g;
      g = momentum_buf[i];
    }
    params[i] -= lr * g;
  }
}

/// Hyperparameters in double, as PyTorch holds them (Python floats): scalars
/// such as 1 - beta2 are formed in double and rounded to fp32 once, as torch
/// does when it applies them to fp32 tensors.
struct AdamWConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

/// torch.optim.AdamW (decoupled weight decay, bias correction), step t = 1, 2,
/// ...:
///   p -= lr wd p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
///   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
/// in PyTorch's order of operations (its single-tensor, non-foreach path).
inline void adamw_step(float *params, const float *grads, float *m, float *v,
                       int64_t n, const AdamWConfig &c, int64_t t) {
  const double bc1 = 1.0 - std::pow(c.beta1, double(t));
  const double bc2 = 1.0 - std::pow(c.beta2, double(t));
  const float decay = float(1.0 - c.lr * c.weight_decay);
  const float oneMinusB1 = float(1.0 - c.beta1), b2 = float(c.beta2),
              oneMinusB2 = float(1.0 - c.beta2);
  const float stepSize = float(c.lr / bc1), bc2Sqrt = float(std::sqrt(bc2)),
              eps = float(c.eps);
  for (int64_t i = 0; i < n; ++i) {
    params[i] *= decay;
    m[i] += (grads[i] - m[i]) * oneMinusB1; // torch lerp_
    v[i] = v[i] * b2 + oneMinusB2 * grads[i] * grads[i];
    const float denom = std::sqrt(v[i]) / bc2Sqrt + eps;
    params[i] -= stepSize * m[i] / denom;
  }
}

/// Sum of squares of grads[n] in double (a rank's share of the global gradient
/// norm; the caller all-reduces it across the ranks holding distinct gradient
/// shards).
inline double grad_norm_squared(const float *grads, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += double(grads[i]) * grads[i];
  return s;
}

/// The factor torch.nn.utils.clip_grad_norm_ multiplies gradients by: min(1,
/// max_norm / (norm + 1e-6)).
inline float clip_factor(double global_norm, float max_norm) {
  const double f = max_norm / (global_norm + 1e-6);
  return f < 1.0 ? float(f) : 1.0f;
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_OPTIMIZER_H
