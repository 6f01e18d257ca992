// Softmax along the middle axis of a tensor viewed as [outer, L, inner] on the
// GPU. Conventions as backends/cpu/kernels/Softmax.h.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_SOFTMAX_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_SOFTMAX_H

#include "backends/cuda/Runtime.h"

namespace autoddl::rt {

/// out[outer,L,inner] = softmax of x over the middle axis (max-subtracted).
void softmax_forward(act_t *out, const act_t *x, int64_t outer, int64_t L,
                     int64_t inner);
/// dx += y (dout - sum_l dout y), from the forward output y.
void softmax_backward(act_t *dx, const act_t *y, const act_t *dout,
                      int64_t outer, int64_t L, int64_t inner);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_SOFTMAX_H
