// The ZeRO-sharded AdamW step on the CPU, over MPI (the layout:
// backends/common/Zero.h).
#ifndef AUTODDL_BACKENDS_CPU_ZERO_H
#define AUTODDL_BACKENDS_CPU_ZERO_H

#include "backends/common/Zero.h"
#include "backends/cpu/Collectives.h"
#include "backends/cpu/Optimizer.h"

#include <cstdint>
#include <mpi.h>
#include <vector>

namespace autoddl::rt {

/// One sharded AdamW step over `comm` (the data-parallel group). params and
/// grads are the full padded flat buffers (size padded, identical layout on
/// every rank; the padding stays zero); grads hold this rank's partial (P)
/// gradient and are left unspecified; m and v are this rank's shard of the
/// state (padded / p floats each). On return every rank holds the updated
/// params.
inline void zero_adamw_step(float *params, float *grads, float *m, float *v,
                            int64_t padded, const AdamWConfig &c, int64_t t,
                            MPI_Comm comm) {
  const ZeroShard s = zero_shard(padded, comm_size(comm), comm_rank(comm));
  std::vector<float> gshard(static_cast<size_t>(s.size));
  reduce_scatter_forward(gshard.data(), grads, {padded}, 0, comm);
  adamw_step(params + s.offset, gshard.data(), m, v, s.size, c, t);
  std::vector<float> mine(params + s.offset, params + s.offset + s.size);
  all_gather_forward(params, mine.data(), {s.size}, 0, comm);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_ZERO_H
