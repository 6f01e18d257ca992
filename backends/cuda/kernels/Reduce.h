// Reductions to the host and precision casts on the GPU.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_REDUCE_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_REDUCE_H

#include "backends/cuda/Runtime.h"

namespace autoddl::rt {

/// Sum of x[n] in double (per-block partial sums); synchronous: the step's
/// loss.
double sum_to_host(const float *x, int64_t n);
/// dst[n] = act_t(src) (round to nearest even).
void cast_to_act(act_t *dst, const float *src, int64_t n);
/// dst[n] = float(src).
void cast_to_float(float *dst, const act_t *src, int64_t n);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_REDUCE_H
