// ZeRO-style sharded optimizer state over a data-parallel group (Rajbhandari et
// al., SC'20, stage 1-2): parameters and gradients live in one flat fp32 buffer
// padded to a multiple of the group size p; rank r owns the contiguous range
// [r*n/p, (r+1)*n/p) of it (S(0) of the flat buffer). A step: reduce-scatter
// the gradients (P -> S(0)), AdamW on the owned range with the rank's m and v
// (n/p floats each), all-gather the updated parameters (S(0) -> B).
#ifndef AUTODDL_BACKENDS_CPU_ZERO_H
#define AUTODDL_BACKENDS_CPU_ZERO_H

#include "backends/cpu/Collectives.h"
#include "backends/cpu/Optimizer.h"

#include <cstdint>
#include <mpi.h>
#include <vector>

namespace autoddl::rt {

/// `n` rounded up to a multiple of `p`: the flat buffers' size, so every shard
/// is n/p floats.
inline int64_t zero_padded_size(int64_t n, int64_t p) {
  return (n + p - 1) / p * p;
}

/// One sharded AdamW step over `comm` (the data-parallel group). params and
/// grads are the full padded flat buffers (size padded, identical layout on
/// every rank; the padding stays zero); grads hold this rank's partial (P)
/// gradient and are left unspecified; m and v are this rank's shard of the
/// state (padded / p floats each). On return every rank holds the updated
/// params.
inline void zero_adamw_step(float *params, float *grads, float *m, float *v,
                            int64_t padded, const AdamWConfig &c, int64_t t,
                            MPI_Comm comm) {
  const int64_t p = comm_size(comm), r = comm_rank(comm), shard = padded / p;
  std::vector<float> gshard(static_cast<size_t>(shard));
  reduce_scatter_forward(gshard.data(), grads, {padded}, 0, comm);
  adamw_step(params + r * shard, gshard.data(), m, v, shard, c, t);
  std::vector<float> mine(params + r * shard, params + (r + 1) * shard);
  all_gather_forward(params, mine.data(), {shard}, 0, comm);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_ZERO_H
