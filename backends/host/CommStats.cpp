// The process-wide communication record (see CommStats.h).
#include "backends/host/CommStats.h"

namespace autoddl::rt {

CommStats &comm_stats() {
  static CommStats stats;
  return stats;
}

void comm_count(const char *kind, int64_t bytes) {
  CollectiveStat &s = comm_stats()[kind];
  s.calls += 1;
  s.bytes += bytes;
}

static TraceRecorder *gCommTrace = nullptr;
void set_comm_trace(TraceRecorder *recorder) { gCommTrace = recorder; }
TraceRecorder *comm_trace() { return gCommTrace; }

} // namespace autoddl::rt
