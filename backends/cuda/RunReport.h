// What a generated CUDA program reports (the CUDA form of
// backends/host/RunReport.h): metrics.json with per-rank peak DEVICE memory and
// the model FLOPs utilisation, and a Chrome trace whose F/B/W events are timed
// by CUDA events on compute_stream() (one process per rank, as on the CPU).
#ifndef AUTODDL_BACKENDS_CUDA_RUNREPORT_H
#define AUTODDL_BACKENDS_CUDA_RUNREPORT_H

#include "backends/common/Metrics.h"
#include "backends/common/Trace.h"
#include "backends/cuda/Runtime.h"

#include <mpi.h>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::rt {

/// Events timed on the device: begin() records a CUDA event on
/// compute_stream(), end() a second one; finish_step() (after the step's
/// work is done) turns the pairs into trace events placed on the host clock at
/// the step's start.
class GpuTrace {
public:
  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  /// Before the step's first kernel: the reference point of its events.
  void start_step();
  /// An event index to pass to end() (-1 when disabled).
  int begin();
  void end(const std::string &name, int tid, int begin_index);
  /// An anchor on the compute stream, for work timed on another stream
  /// against an event recorded right after it: its id (-1 when disabled).
  int mark();
  /// An event `start_ms` after mark `id` lasting `dur_ms` (added once the
  /// mark's step is resolved).
  void add_after_mark(const std::string &name, int tid, int id,
                      double start_ms, double dur_ms);
  /// Synchronizes with the device and resolves the step's events.
  void finish_step();
  /// The events as comma-separated JSON objects with "pid": pid.
  std::string events_json(int pid) const;

private:
  struct Pending {
    std::string name;
    int tid = 0, begin = 0, end = 0;
  };
  cudaEvent_t event(int index);
  void flush_after_marks();
  bool enabled_ = false;
  std::vector<cudaEvent_t> events_;
  int used_ = 0;
  double step_host_us_ = 0;
  std::vector<Pending> pending_;
  std::vector<TraceRecorder::Event> done_;
  // Marks: the step's (event index, id) until resolved, then each id's time
  // (negative while unresolved); events after an unresolved mark wait.
  std::vector<std::pair<int, int>> step_marks_;
  std::vector<double> mark_us_;
  struct AfterMark {
    TraceRecorder::Event event; // ts_us: after the mark
    int id = 0;
  };
  std::vector<AfterMark> after_marks_;
};

/// Fills m.peak_memory_bytes with every rank's peak_device_bytes() (rank
/// order of `comm`) and m.collectives with this rank's comm_stats(); rank 0
/// writes metrics.json to `path` atomically, with "mfu" = model_flops_per_step
/// / mean step seconds / (ranks * peak_flops_per_gpu) and
/// "model_flops_per_step" added. Collective.
void write_cuda_run_metrics(RunMetrics &m, double model_flops_per_step,
                            double peak_flops_per_gpu, const std::string &path,
                            MPI_Comm comm);

/// Gathers every rank's events and rank 0 writes one trace document.
void write_cuda_run_trace(const GpuTrace &trace, const std::string &path,
                          MPI_Comm comm);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_RUNREPORT_H
