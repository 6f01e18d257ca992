// Chrome-trace event recorder (see Trace.h).
#include "backends/common/Trace.h"

#include "backends/common/MiniJson.h"

namespace autoddl::rt {

double TraceRecorder::now_us() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - origin_)
      .count();
}

namespace {
thread_local bool mutedThread = false;
} // namespace

void TraceRecorder::mute_this_thread() { mutedThread = true; }

void TraceRecorder::end(const std::string &name, int tid, double start_us) {
  if (!mutedThread)
    end_with_cpu(name, tid, start_us, -1);
}

void TraceRecorder::end_with_cpu(const std::string &name, int tid,
                                 double start_us, double cpu_us) {
  if (!enabled_)
    return;
  const double now = now_us();
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back({name, tid, start_us, now - start_us, cpu_us});
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
    if (e.cpu_us >= 0) {
      Json args = Json::obj();
      args.set("cpu_us", Json::of(e.cpu_us));
      j.set("args", args);
    }
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
