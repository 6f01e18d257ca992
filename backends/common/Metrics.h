// Timing, peak memory and the metrics.json a run writes (docs/runtime.md has
// the schema).
#ifndef AUTODDL_BACKENDS_COMMON_METRICS_H
#define AUTODDL_BACKENDS_COMMON_METRICS_H

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace autoddl::rt {

/// Wall-clock seconds since construction or the last reset() (steady clock).
class Timer {
public:
  Timer() { reset(); }
  void reset() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start_)
        .count();
  }

private:
  std::chrono::steady_clock::time_point start_;
};

/// Peak resident memory of this process in bytes (VmHWM of /proc/self/status; 0
/// if unavailable).
int64_t peak_resident_bytes();

/// Per-kind totals of the collectives a rank ran (the collectives record into
/// it).
struct CollectiveStat {
  int64_t calls = 0;
  int64_t bytes = 0; // bytes of this rank's buffer per call, summed
  double seconds = 0;
};
using CommStats = std::map<std::string, CollectiveStat>;

/// One checkpoint a run saved (rank 0's view): how long the training loop was
/// blocked by it (`stall`: waiting for the previous write, the snapshot, the
/// gather), the part of that spent waiting for the previous write, and how
/// long writing the folder took (from the snapshot to its rename; async: on
/// the writer thread while the next steps ran).
struct CheckpointTiming {
  int64_t step = 0;
  bool async = true;
  double stall_seconds = 0, waited_seconds = 0, write_seconds = 0;
};

/// What a run reports. `loss[s]` is the loss of step s, computed before that
/// step's update; `lr[s]` the learning rate of that update; `grad_norm[s]`
/// (under --grad-clip) the global gradient norm of that update before
/// clipping.
struct RunMetrics {
  std::vector<double> loss, lr, grad_norm;
  std::vector<double> step_seconds;
  double items_per_step = 0; // tokens (B*T) or samples per optimizer step
  std::string items_name = "tokens";      // "tokens" or "samples"
  std::vector<int64_t> peak_memory_bytes; // one entry per rank
  /// CUDA: device memory in use (cudaMemGetInfo: total - free) when the
  /// allocation wrapper reached its peak, per rank; empty on the CPU.
  std::vector<int64_t> peak_device_used_bytes;
  /// The plan's predicted peak of what peak_memory_bytes measures (CUDA: its
  /// peak_allocated_bytes; CPU: peak_host_memory_bytes); 0: not known.
  double predicted_peak_bytes = 0;
  std::vector<CheckpointTiming> checkpoints; // --save's, in order
  CommStats collectives; // this rank's (rank 0's when written)
  std::map<std::string, std::string> info; // free-form: plan name, backend, ...
};

/// The metrics.json text (schema in docs/runtime.md): "loss", "lr" and
/// "grad_norm" (when recorded), "step_seconds", "mean_step_seconds",
/// "<items>_per_second", "peak_memory_bytes", "peak_device_used_bytes" (CUDA),
/// "predicted_peak_bytes" (when known), "collectives" {kind: {"calls", "bytes",
/// "seconds"}}, "checkpoints" (when any: [{"step", "mode", "stall_seconds",
/// "waited_seconds", "write_seconds"}]) and "info". mean_step_seconds skips
/// step 0 (warm-up) when there are at least 2 steps.
std::string metrics_json(const RunMetrics &m);
/// Writes metrics_json(m) to `path` atomically.
void write_metrics_json(const std::string &path, const RunMetrics &m);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_METRICS_H
