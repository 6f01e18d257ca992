// The process-wide record of a rank's communication, kept by both backends'
// collectives (the CPU's MPI ones, backends/cpu/Collectives.h; the CUDA's
// NCCL ones, backends/cuda/Comm.h) and written into metrics.json
// (RunReport.h).
#ifndef AUTODDL_BACKENDS_HOST_COMMSTATS_H
#define AUTODDL_BACKENDS_HOST_COMMSTATS_H

#include "backends/common/Metrics.h"
#include "backends/common/Trace.h"

#include <cstdint>

namespace autoddl::rt {

/// Process-wide totals per collective kind ("all_reduce", "all_gather", ...).
CommStats &comm_stats();
/// One call of `kind` moving `bytes` of this rank's buffer, counted (its time
/// is the caller's to add, where it has one).
void comm_count(const char *kind, int64_t bytes);
/// CPU seconds of the calling thread so far (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds();
/// The calling thread's CPU seconds spent inside the CPU collectives so far
/// (MPI polls while it waits for a peer: CPU time that is not the rank's
/// work). Kept per thread: the step loop's thread reads its own.
double comm_cpu_seconds();
void comm_add_cpu_seconds(double seconds);
/// When set (not null), the CPU collectives also record a trace event per
/// call on tid 1 ("comm"); the CUDA program traces its communication by
/// device events instead and sets none.
void set_comm_trace(TraceRecorder *recorder);
/// The recorder set_comm_trace gave (null: none).
TraceRecorder *comm_trace();

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_HOST_COMMSTATS_H
