// Chrome-trace event recorder (see Trace.h).
#include "backends/common/Trace.h"

#include "backends/common/MiniJson.h"

namespace autoddl::rt {

double TraceRecorder::now_us() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - origin_)
      .count();
}

void TraceRecorder::end(const std::string &name, int tid, double start_us) {
  if (!enabled_)
    return;
  events_.push_back({name, tid, start_us, now_us() - start_us});
}

std::string TraceRecorder::events_json(int pid) const {
  return trace_events_json(events_, pid);
}

std::string trace_events_json(const std::vector<TraceRecorder::Event> &events,
                              int pid) {
  std::string out;
  for (const TraceRecorder::Event &e : events) {
    Json j = Json::obj();
    j.set("name", Json::of(e.name));
    j.set("ph", Json::of(std::string("X")));
    j.set("pid", Json::of(int64_t(pid)));
    j.set("tid", Json::of(int64_t(e.tid)));
    j.set("ts", Json::of(e.ts_us));
    j.set("dur", Json::of(e.dur_us));
    out += (out.empty() ? "" : ",") + j.dump();
  }
  return out;
}

std::string trace_document(const std::vector<std::string> &fragments) {
  std::string out = "{\"traceEvents\":[";
  bool first = true;
  for (const std::string &f : fragments) {
    if (f.empty())
      continue;
    out += (first ? "" : ",") + f;
    first = false;
  }
  return out + "],\"displayTimeUnit\":\"ms\"}\n";
}

} // namespace autoddl::rt
