// Dropout while training on the GPU (an ONNX export in train mode): the mask
// of backends/common/Philox.h dropout_keep, a pure function of the seed, the
// op's stream at the step and the element's global index, so the GPU drops
// exactly the elements the CPU program does (backends/common/OnnxKernels.h
// dropout_forward, the same conventions): a dropped element is written as -0,
// a kept zero as +0, and the backward reads the mask back from the result.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_DROPOUT_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_DROPOUT_H

#include "backends/cuda/Runtime.h"

#include <cstdint>

namespace autoddl::rt {

/// out[n] = x * keep / (1 - ratio); element i's mask is dropout_keep(seed,
/// stream, first + i, ratio).
void dropout_forward(act_t *out, const act_t *x, int64_t n, double ratio,
                     uint64_t seed, uint64_t stream, int64_t first);
/// dx[n] += dout * keep / (1 - ratio), keep read from the forward's out.
void dropout_backward(act_t *dx, const act_t *out, const act_t *dout, int64_t n,
                      double ratio);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_DROPOUT_H
