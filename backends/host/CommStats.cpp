// The process-wide communication record (see CommStats.h).
#include "backends/host/CommStats.h"

#include <ctime>

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

double thread_cpu_seconds() {
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0)
    return 0;
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

static thread_local double tCommCpu = 0;
double comm_cpu_seconds() { return tCommCpu; }
void comm_add_cpu_seconds(double seconds) { tCommCpu += seconds; }

static TraceRecorder *gCommTrace = nullptr;
void set_comm_trace(TraceRecorder *recorder) { gCommTrace = recorder; }
TraceRecorder *comm_trace() { return gCommTrace; }

} // namespace autoddl::rt
