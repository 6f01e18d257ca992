//===- ChromeTrace.h - Chrome trace-event JSON for Perfetto --------------===//
//
// A small writer of the Chrome trace-event format ({"traceEvents": [...]}) that
// chrome://tracing and ui.perfetto.dev open: complete ("X") events on
// (process, thread) rows plus the metadata events that name the rows. Generic
// on purpose: the pipeline simulator writes one process with a thread per
// stage; the planner's predicted trace one process per rank and a thread per
// stream. Edge code (uses nlohmann/json); times are in microseconds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace autoddl::trace {

using TraceArgValue = std::variant<std::int64_t, double, std::string>;

struct TraceEvent {
  int process = 0;
  int thread = 0;
  std::string name;
  std::string category;
  double startUs = 0;
  double durationUs = 0;
  std::vector<std::pair<std::string, TraceArgValue>> args;
};

class ChromeTrace {
public:
  void nameProcess(int process, std::string name);
  void nameThread(int process, int thread, std::string name);
  void add(TraceEvent event) { events_.push_back(std::move(event)); }
  const std::vector<TraceEvent> &events() const { return events_; }

  /// The JSON document, one event per line, metadata first.
  std::string render() const;

private:
  struct RowName {
    int process;
    int thread; // -1 for a process name
    std::string name;
  };
  std::vector<RowName> names_;
  std::vector<TraceEvent> events_;
};

} // namespace autoddl::trace
