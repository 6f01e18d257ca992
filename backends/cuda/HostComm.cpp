// The MPI helpers of backends/cpu/Collectives.h that the CUDA runtime shares
// with the CPU one (the checkpoint writer uses comm_size/comm_rank; the NCCL
// collectives count their calls and bytes in comm_stats()). The CPU
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

int comm_size(MPI_Comm comm) {
  int s = 0;
  mpiCheck(MPI_Comm_size(comm, &s));
  return s;
}

int comm_rank(MPI_Comm comm) {
  int r = 0;
  mpiCheck(MPI_Comm_rank(comm, &r));
  return r;
}

} // namespace autoddl::rt
