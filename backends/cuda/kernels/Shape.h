// Layout ops on the GPU: transpose (a permuted copy, rank <= 8). Flatten and
// reshape are free. Conventions as backends/cpu/kernels/Shape.h.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_SHAPE_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_SHAPE_H

#include "backends/cuda/Runtime.h"

#include <vector>

namespace autoddl::rt {

/// The largest rank permute_copy accepts.
constexpr int kMaxPermuteRank = 8;

/// out = x permuted: out's dimension d is x's dimension perm[d]; shape is x's
/// shape. When accumulate, out += instead of out =.
void permute_copy(act_t *out, const act_t *x, const std::vector<int64_t> &shape,
                  const std::vector<int64_t> &perm, bool accumulate);
/// out = transpose(x, perm); x has shape `shape`.
void transpose_forward(act_t *out, const act_t *x,
                       const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &perm);
/// dx += transpose(dout, inverse perm); `shape` is x's shape.
void transpose_backward(act_t *dx, const act_t *dout,
                        const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &perm);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_SHAPE_H
