// The process-wide communication record (see CommStats.h).
#include "backends/host/CommStats.h"

namespace autoddl::rt {

CommStats &comm_stats() {
  static CommStats stats;
  return stats;
}

static TraceRecorder *gCommTrace = nullptr;
void set_comm_trace(TraceRecorder *recorder) { gCommTrace = recorder; }
TraceRecorder *comm_trace() { return gCommTrace; }

} // namespace autoddl::rt
