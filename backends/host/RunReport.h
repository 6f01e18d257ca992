// What rank 0 writes at the end of a run, gathered over MPI: per-rank peak
// memory into metrics.json and every rank's trace events into one Chrome trace
// (one process per rank).
#ifndef AUTODDL_BACKENDS_HOST_RUNREPORT_H
#define AUTODDL_BACKENDS_HOST_RUNREPORT_H

#include "backends/common/Metrics.h"
#include "backends/common/Trace.h"

#include <mpi.h>
#include <string>

namespace autoddl::rt {

/// Fills m.peak_memory_bytes (one entry per rank of `comm`, in rank order) and
/// m.collectives (this rank's comm_stats()), then rank 0 writes metrics.json to
/// `path` atomically. Collective.
void write_run_metrics(RunMetrics &m, const std::string &path, MPI_Comm comm);

/// The gathering part of write_run_metrics, for any memory counter: fills
/// m.peak_memory_bytes with every rank's `my_peak_bytes` and m.collectives
/// with this rank's comm_stats(). Collective.
void gather_run_metrics(RunMetrics &m, int64_t my_peak_bytes, MPI_Comm comm);

/// Gathers every rank's events (pid = rank in `comm`) and rank 0 writes one
/// trace document to `path` atomically. Collective.
void write_run_trace(const TraceRecorder &trace, const std::string &path,
                     MPI_Comm comm);

/// The same from this rank's events_json fragment (any recorder). Collective.
void write_trace_fragments(const std::string &mine, const std::string &path,
                           MPI_Comm comm);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_HOST_RUNREPORT_H
