// ZeRO-style sharded AdamW over a data-parallel group on the device (the CUDA
// form of backends/cpu/Zero.h, same layout: flat fp32 buffers padded to a
// multiple of the group size p, rank r owns the contiguous range
// [r*n/p, (r+1)*n/p)). A step: reduce-scatter the gradients (P -> S(0)), AdamW
// on the owned range, all-gather the updated fp32 parameters (S(0) -> B), then
// refresh the act_t working copy.
#ifndef AUTODDL_BACKENDS_CUDA_ZERO_H
#define AUTODDL_BACKENDS_CUDA_ZERO_H

#include "backends/cuda/Comm.h"
#include "backends/cuda/kernels/Optimizer.h"
#include "backends/cuda/kernels/Reduce.h"

#include <cstdint>

namespace autoddl::rt {

/// `n` rounded up to a multiple of `p`.
inline int64_t zero_padded_size(int64_t n, int64_t p) {
  return (n + p - 1) / p * p;
}

/// params and grads: the full padded flat buffers (size padded); m and v: this
/// rank's shard (padded / p floats); gshard: scratch of padded / p floats;
/// work: the act_t working copy (n = padded floats, or null).
inline void zero_adamw_step(float *params, float *grads, float *m, float *v,
                            float *gshard, int64_t padded, const AdamWConfig &c,
                            int64_t t, const Comm &dp, act_t *work, int64_t n) {
  const int64_t p = dp.size, r = dp.rank, shard = padded / p;
  reduce_scatter_flat(gshard, grads, shard, dp);
  adamw_step(params + r * shard, gshard, m, v, shard, c, t, nullptr);
  // The all-gather reads this rank's shard from its place in params: NCCL
  // allows the in-place form (send buffer = recvbuff + rank * count).
  all_gather_flat(params, params + r * shard, shard, dp);
  if (work)
    cast_to_act(work, params, n);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_ZERO_H
