// The MPI helpers of backends/cpu/Collectives.h that the CUDA runtime shares
// with the CPU one (the NCCL collectives count their calls and bytes in
// comm_stats(); comm_size/comm_rank are inline in MpiCheck.h). The CPU
// collectives themselves are not part of the CUDA runtime: Comm.h has their
// device forms under the same names.
#include "backends/cpu/Collectives.h"
#include "backends/cpu/MpiCheck.h"

namespace autoddl::rt {

CommStats &comm_stats() {
  static CommStats stats;
  return stats;
}

void set_comm_trace(TraceRecorder *) {} // device events trace the CUDA program

} // namespace autoddl::rt
