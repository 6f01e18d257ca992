// The ZeRO-sharded AdamW step on the device, over NCCL (the layout:
// backends/common/Zero.h), then the act_t working copy refreshed.
#ifndef AUTODDL_BACKENDS_CUDA_ZERO_H
#define AUTODDL_BACKENDS_CUDA_ZERO_H

#include "backends/common/Zero.h"
#include "backends/cuda/Comm.h"
#include "backends/cuda/kernels/Optimizer.h"
#include "backends/cuda/kernels/Reduce.h"

#include <cstdint>

namespace autoddl::rt {

/// ZeRO's gradient half: grads (the full padded flat buffer, this rank's
/// partial gradient) reduce-scattered over `dp`; gshard (padded / p floats)
/// gets this rank's shard of the sum.
inline void zero_reduce_gradient(float *gshard, const float *grads,
                                 int64_t padded, const Comm &dp) {
  reduce_scatter_flat(gshard, grads, zero_shard(padded, dp.size, dp.rank).size,
                      dp);
}

/// ZeRO's update half: AdamW on the owned shard of params (the full padded
/// flat buffer) from gshard; m and v: this rank's shard of the state; then the
/// params all-gathered and `work`, the act_t working copy (n = padded
/// floats, or null), refreshed.
inline void zero_adamw_update(float *params, const float *gshard, float *m,
                              float *v, int64_t padded, const AdamWConfig &c,
                              int64_t t, const Comm &dp, act_t *work,
                              int64_t n) {
  const ZeroShard s = zero_shard(padded, dp.size, dp.rank);
  adamw_step(params + s.offset, gshard, m, v, s.size, c, t, nullptr);
  // The all-gather reads this rank's shard from its place in params: NCCL
  // allows the in-place form (send buffer = recvbuff + rank * count).
  all_gather_flat(params, params + s.offset, s.size, dp);
  if (work)
    cast_to_act(work, params, n);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_ZERO_H
