//===- ChromeTrace.cpp - Chrome trace-event JSON for Perfetto ------------===//
#include "cost_model/pipeline/ChromeTrace.h"

#include <nlohmann/json.hpp>

namespace autoddl::trace {

void ChromeTrace::nameProcess(int process, std::string name) {
  names_.push_back({process, -1, std::move(name)});
}

void ChromeTrace::nameThread(int process, int thread, std::string name) {
  names_.push_back({process, thread, std::move(name)});
}

std::string ChromeTrace::render() const {
  std::vector<nlohmann::json> lines;
  for (const RowName &row : names_) {
    nlohmann::json meta = {
        {"ph", "M"},
        {"pid", row.process},
        {"name", row.thread < 0 ? "process_name" : "thread_name"},
        {"args", {{"name", row.name}}}};
    if (row.thread >= 0) {
      meta["tid"] = row.thread;
      lines.push_back(meta);
      // Keep rows in thread order rather than by first event.
      lines.push_back({{"ph", "M"},
                       {"pid", row.process},
                       {"tid", row.thread},
                       {"name", "thread_sort_index"},
                       {"args", {{"sort_index", row.thread}}}});
    } else {
      lines.push_back(meta);
    }
  }
  for (const TraceEvent &event : events_) {
    nlohmann::json args = nlohmann::json::object();
    for (const auto &[key, value] : event.args)
      std::visit([&, &key = key](const auto &v) { args[key] = v; }, value);
    nlohmann::json line = {{"ph", "X"},           {"pid", event.process},
                           {"tid", event.thread}, {"name", event.name},
                           {"ts", event.startUs}, {"dur", event.durationUs},
                           {"args", args}};
    if (!event.category.empty())
      line["cat"] = event.category;
    lines.push_back(std::move(line));
  }
  std::string text = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  for (size_t i = 0; i < lines.size(); ++i) {
    text += lines[i].dump();
    text += i + 1 < lines.size() ? ",\n" : "\n";
  }
  text += "]}\n";
  return text;
}

} // namespace autoddl::trace
