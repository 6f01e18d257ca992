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

/// params and grads: the full padded flat buffers (size padded); m and v: this
/// rank's shard (padded / p floats); gshard: scratch of padded / p floats;
/// work: the act_t working copy (n = padded floats, or null).
inline void zero_adamw_step(float *params, float *grads, float *m, float *v,
                            float *gshard, int64_t padded, const AdamWConfig &c,
                            int64_t t, const Comm &dp, act_t *work, int64_t n) {
  const ZeroShard s = zero_shard(padded, dp.size, dp.rank);
  reduce_scatter_flat(gshard, grads, s.size, dp);
  adamw_step(params + s.offset, gshard, m, v, s.size, c, t, nullptr);
  // The all-gather reads this rank's shard from its place in params: NCCL
  // allows the in-place form (send buffer = recvbuff + rank * count).
  all_gather_flat(params, params + s.offset, s.size, dp);
  if (work)
    cast_to_act(work, params, n);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_ZERO_H
