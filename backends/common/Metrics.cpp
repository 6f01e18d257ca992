// Timing, peak memory and metrics.json (see Metrics.h).
#include "backends/common/Metrics.h"

#include "backends/common/FileIo.h"
#include "backends/common/MiniJson.h"

#include <fstream>
#include <sstream>
#include <utility>

namespace autoddl::rt {

int64_t peak_resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream ss(line.substr(6));
      int64_t kib = 0;
      ss >> kib;
      return kib * 1024;
    }
  return 0;
}

std::string metrics_json(const RunMetrics &m) {
  Json j = Json::obj();
  Json loss = Json::arr(), steps = Json::arr(), mem = Json::arr();
  for (double l : m.loss)
    loss.push(Json::of(l));
  for (double s : m.step_seconds)
    steps.push(Json::of(s));
  for (int64_t b : m.peak_memory_bytes)
    mem.push(Json::of(b));
  double total = 0;
  size_t first = m.step_seconds.size() >= 2 ? 1 : 0, counted = 0;
  for (size_t i = first; i < m.step_seconds.size(); ++i, ++counted)
    total += m.step_seconds[i];
  const double mean = counted ? total / double(counted) : 0;
  j.set("loss", std::move(loss));
  for (const auto &[name, list] :
       {std::pair{"lr", &m.lr}, std::pair{"grad_norm", &m.grad_norm}}) {
    if (list->empty())
      continue; // not recorded by this run
    Json values = Json::arr();
    for (double x : *list)
      values.push(Json::of(x));
    j.set(name, std::move(values));
  }
  j.set("step_seconds", std::move(steps));
  j.set("mean_step_seconds", Json::of(mean));
  j.set(m.items_name + "_per_second",
        Json::of(mean > 0 ? m.items_per_step / mean : 0.0));
  j.set("peak_memory_bytes", std::move(mem));
  if (!m.peak_device_used_bytes.empty()) {
    Json used = Json::arr();
    for (int64_t b : m.peak_device_used_bytes)
      used.push(Json::of(b));
    j.set("peak_device_used_bytes", std::move(used));
  }
  if (m.predicted_peak_bytes > 0)
    j.set("predicted_peak_bytes", Json::of(m.predicted_peak_bytes));
  Json coll = Json::obj();
  for (const auto &[kind, stat] : m.collectives) {
    Json s = Json::obj();
    s.set("calls", Json::of(stat.calls));
    s.set("bytes", Json::of(stat.bytes));
    s.set("seconds", Json::of(stat.seconds));
    coll.set(kind, std::move(s));
  }
  j.set("collectives", std::move(coll));
  if (!m.checkpoints.empty()) {
    Json saves = Json::arr();
    for (const CheckpointTiming &c : m.checkpoints) {
      Json o = Json::obj();
      o.set("step", Json::of(c.step));
      o.set("mode", Json::of(std::string(c.async ? "async" : "sync")));
      o.set("stall_seconds", Json::of(c.stall_seconds));
      o.set("waited_seconds", Json::of(c.waited_seconds));
      o.set("write_seconds", Json::of(c.write_seconds));
      saves.push(std::move(o));
    }
    j.set("checkpoints", std::move(saves));
  }
  Json info = Json::obj();
  for (const auto &[k, v] : m.info)
    info.set(k, Json::of(v));
  j.set("info", std::move(info));
  return j.dump() + "\n";
}

void write_metrics_json(const std::string &path, const RunMetrics &m) {
  write_file_atomically(path, metrics_json(m));
}

} // namespace autoddl::rt
