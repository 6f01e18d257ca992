// A Chrome-trace (Perfetto-readable) event recorder: complete events ("ph":
// "X") with one process per rank and one thread per stream, the same layout as
// the predicted trace of `inspect --trace`.
#ifndef AUTODDL_BACKENDS_COMMON_TRACE_H
#define AUTODDL_BACKENDS_COMMON_TRACE_H

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace autoddl::rt {

class TraceRecorder {
public:
  struct Event {
    std::string name;
    int tid = 0;       // stream: 0 compute, 1 communication, ...
    double ts_us = 0;  // start, microseconds since the recorder's origin
    double dur_us = 0; // duration, microseconds
    /// CPU seconds the event's thread ran in it, microseconds; < 0: not
    /// measured (args.cpu_us in the JSON when measured). A thread that shares
    /// its core (the CPU K-FAC thread) is busy for this, not for dur_us.
    double cpu_us = -1;
  };

  /// Events are timed from `origin`; ranks that start their recorders after a
  /// barrier share it closely enough for a readable trace.
  TraceRecorder() : origin_(std::chrono::steady_clock::now()) {}

  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  /// Microseconds since the origin: take it before the work, pass it to end().
  double now_us() const;
  /// Records an event from `start_us` (a now_us() value) to now. Safe from
  /// several threads; ignored on a thread muted by mute_this_thread.
  void end(const std::string &name, int tid, double start_us);
  /// Records an event with its CPU time (Event::cpu_us; < 0: not measured).
  void end_with_cpu(const std::string &name, int tid, double start_us,
                    double cpu_us);
  /// The calling thread's end() calls are dropped from now on (a thread that
  /// records its work itself, with end_with_cpu).
  static void mute_this_thread();
  const std::vector<Event> &events() const { return events_; }

  /// This recorder's events as comma-separated JSON objects with "pid": pid (no
  /// brackets), so the fragments of several ranks can be joined into one
  /// document.
  std::string events_json(int pid) const;

private:
  std::chrono::steady_clock::time_point origin_;
  bool enabled_ = true;
  std::vector<Event> events_;
  std::mutex mutex_; // end() from a second thread
};

/// `events` as comma-separated JSON objects with "pid": pid (no brackets): one
/// rank's fragment of a trace document.
std::string trace_events_json(const std::vector<TraceRecorder::Event> &events,
                              int pid);

/// {"traceEvents": [f0, f1, ...], "displayTimeUnit": "ms"} from events_json
/// fragments.
std::string trace_document(const std::vector<std::string> &fragments);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_TRACE_H
