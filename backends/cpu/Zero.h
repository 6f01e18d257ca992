// The ZeRO-sharded AdamW step on the CPU, over MPI (the layout:
// backends/common/Zero.h).
#ifndef AUTODDL_BACKENDS_CPU_ZERO_H
#define AUTODDL_BACKENDS_CPU_ZERO_H

#include "backends/common/Zero.h"
#include "backends/cpu/Collectives.h"
#include "backends/cpu/Optimizer.h"

#include <algorithm>
#include <cstdint>
#include <mpi.h>
#include <vector>

namespace autoddl::rt {

/// ZeRO's gradient half over `comm` (the data-parallel group): grads, the
/// full padded flat buffer (identical layout on every rank; the padding stays
/// zero) holding this rank's partial (P) gradient, is reduce-scattered; this
/// rank's shard of the sum is left in place, grads[offset, offset + padded /
/// p) (zero_shard), the rest unspecified.
inline void zero_reduce_gradient(float *grads, int64_t padded, MPI_Comm comm) {
  const ZeroShard s = zero_shard(padded, comm_size(comm), comm_rank(comm));
  std::vector<float> gshard(static_cast<size_t>(s.size));
  reduce_scatter_forward(gshard.data(), grads, {padded}, 0, comm);
  std::copy(gshard.begin(), gshard.end(), grads + s.offset);
}

/// ZeRO's update half: AdamW on this rank's shard (grads in place, as
/// zero_reduce_gradient leaves it; m and v are the shard's state, padded / p
/// floats each), then the params all-gathered: every rank holds the updated
/// params.
inline void zero_adamw_update(float *params, const float *grads, float *m,
                              float *v, int64_t padded, const AdamWConfig &c,
                              int64_t t, MPI_Comm comm) {
  const ZeroShard s = zero_shard(padded, comm_size(comm), comm_rank(comm));
  adamw_step(params + s.offset, grads + s.offset, m, v, s.size, c, t);
  std::vector<float> mine(params + s.offset, params + s.offset + s.size);
  all_gather_forward(params, mine.data(), {s.size}, 0, comm);
}

/// One sharded AdamW step: both halves (grads left unspecified).
inline void zero_adamw_step(float *params, float *grads, float *m, float *v,
                            int64_t padded, const AdamWConfig &c, int64_t t,
                            MPI_Comm comm) {
  zero_reduce_gradient(grads, padded, comm);
  zero_adamw_update(params, grads, m, v, padded, c, t, comm);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_ZERO_H
