// Normalisations over the last dimension on the GPU: layernorm and rmsnorm.
// One warp per row, fp32 statistics; the parameter gradients (fp32) are summed
// per block over rows and then added across blocks by a second kernel.
// Conventions as backends/cpu/kernels/Norm.h.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_NORM_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_NORM_H

#include "backends/cuda/Runtime.h"

namespace autoddl::rt {

/// out[N,C] = (x - mean) * rstd * gamma[C] + beta[C] (beta may be null);
/// saves mean[N], rstd[N] (biased variance, as torch LayerNorm).
void layernorm_forward(act_t *out, float *mean, float *rstd, const act_t *x,
                       const act_t *gamma, const act_t *beta, int64_t N,
                       int64_t C, float eps);
/// dx[N,C] += rstd (g - mean(g) - xhat mean(g xhat)), g = dout * gamma;
/// dgamma[C] += sum_n dout * xhat; dbeta[C] += sum_n dout.
void layernorm_backward(act_t *dx, float *dgamma, float *dbeta,
                        const act_t *dout, const act_t *x, const act_t *gamma,
                        const float *mean, const float *rstd, int64_t N,
                        int64_t C);

/// out[N,C] = x * rstd * gamma[C], rstd = 1 / sqrt(mean(x^2) + eps); saves
/// rstd[N].
void rmsnorm_forward(act_t *out, float *rstd, const act_t *x,
                     const act_t *gamma, int64_t N, int64_t C, float eps);
/// dx[N,C] += rstd (g - x rstd^2 mean(g x)), g = dout * gamma; dgamma[C] +=
/// sum_n dout x rstd.
void rmsnorm_backward(act_t *dx, float *dgamma, const act_t *dout,
                      const act_t *x, const act_t *gamma, const float *rstd,
                      int64_t N, int64_t C);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_NORM_H
