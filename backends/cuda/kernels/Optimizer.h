// Optimizers over flat fp32 device buffers: SGD (with momentum) and AdamW,
// PyTorch semantics and order of operations as backends/cpu/Optimizer.h. Each
// step also writes the act_t working copy of the parameters (`work`, when not
// null) in the same kernel, so no separate cast pass is needed. A ZeRO shard
// is a slice of the flat buffers.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_OPTIMIZER_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_OPTIMIZER_H

#include "backends/cuda/Runtime.h"

// clip_factor is also computed on the device (kernels/GradClip.cu), from the
// norm summed there (the same spelling as Philox.h's).
#ifdef __CUDACC__
#define AUTODDL_HOST_DEVICE __host__ __device__
#else
#define AUTODDL_HOST_DEVICE
#endif

namespace autoddl::rt {

/// Identical to the CPU AdamWConfig (backends/cpu/Optimizer.h).
struct AdamWConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

/// torch.optim.SGD on params[n] (momentum_buf may be null when momentum ==
/// 0); writes work[n] = act_t(params) after the step when work is not null.
void sgd_step(float *params, const float *grads, float *momentum_buf, int64_t n,
              float lr, float momentum, float weight_decay, int64_t step,
              act_t *work);

/// torch.optim.AdamW step t = 1, 2, ... (decoupled weight decay, bias
/// correction); writes work[n] = act_t(params) when work is not null.
void adamw_step(float *params, const float *grads, float *m, float *v,
                int64_t n, const AdamWConfig &c, int64_t t, act_t *work);

/// Sum of squares of grads[n] (fp32 squares, per-block double partial sums);
/// synchronous.
double grad_norm_squared(const float *grads, int64_t n);

/// The factor torch.nn.utils.clip_grad_norm_ multiplies gradients by: min(1,
/// max_norm / (norm + 1e-6)).
AUTODDL_HOST_DEVICE inline float clip_factor(double global_norm,
                                             float max_norm) {
  const double f = max_norm / (global_norm + 1e-6);
  return f < 1.0 ? float(f) : 1.0f;
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_OPTIMIZER_H
