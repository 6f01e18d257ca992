//===- ValidateMemory.cpp - predicted vs measured peak memory -------------===//
#include "tools/autoddl/ValidateMemory.h"

#include "support/JsonFile.h"
#include "support/UserError.h"

#include <fmt/format.h>

#include <cmath>

namespace autoddl::cli {

using nlohmann::json;

namespace {

std::vector<double> perRank(const json &metrics, const char *key,
                            const std::string &origin) {
  std::vector<double> out;
  const json *field = optionalMetric(metrics, key, origin, &json::is_array,
                                     "an array (per rank)");
  if (!field)
    return out;
  const json &a = *field;
  const json::json_pointer at = json::json_pointer("/") / key;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number() || a[i].get<double>() < 0)
      throw UserError(jsonPlace(origin, at / i) +
                      "expected a non-negative number of bytes");
    out.push_back(a[i].get<double>());
  }
  return out;
}

} // namespace

const json *optionalMetric(const json &metrics, const char *key,
                           const std::string &origin,
                           bool (json::*is)() const noexcept,
                           const char *what) {
  if (!metrics.contains(key))
    return nullptr;
  const json &v = metrics.at(key);
  if (!(v.*is)())
    throw UserError(jsonPlace(origin, json::json_pointer("/") / key) +
                    "expected " + what);
  return &v;
}

namespace {

std::optional<double> rel(double predicted, double measured) {
  if (!(measured > 0))
    return std::nullopt;
  return (predicted - measured) / measured;
}

std::string gib(std::optional<double> bytes) {
  return bytes ? fmt::format("{:.2f}", *bytes / double(1 << 30))
               : std::string("-");
}

std::string pct(std::optional<double> e) {
  return e ? fmt::format("{:+.1f}%", *e * 100) : std::string("-");
}

json numOrNull(std::optional<double> x) { return x ? json(*x) : json(nullptr); }

} // namespace

std::vector<MemoryRow> memoryRows(const planner::Plan &plan,
                                  const json &metrics,
                                  const std::string &origin) {
  std::vector<MemoryRow> rows;
  const std::vector<double> peak =
      perRank(metrics, "peak_memory_bytes", origin);
  const std::vector<double> used =
      perRank(metrics, "peak_device_used_bytes", origin);
  if (peak.empty() || plan.predicted.peakAllocated <= 0)
    return rows;
  const planner::Knobs &k = plan.knobs;
  const int ranks = k.pp * k.dp * k.tp;
  if (static_cast<int>(peak.size()) != ranks)
    throw UserError(
        jsonPlace(origin, json::json_pointer("/peak_memory_bytes")) +
        fmt::format("{} ranks, the plan has {}", peak.size(), ranks));
  for (int r = 0; r < ranks; ++r) {
    MemoryRow row;
    row.rank = r;
    row.device = r / (k.dp * k.tp); // pp is the outermost mesh axis
    const planner::DeviceTimes &d = plan.devices.at(size_t(row.device));
    row.predicted = d.memoryParts.allocated() + d.kfacBytes;
    row.measured = peak[size_t(r)];
    row.error = rel(row.predicted, row.measured);
    if (size_t(r) < used.size() && used[size_t(r)] > 0) {
      row.predictedUsed = d.memory;
      row.measuredUsed = used[size_t(r)];
      row.usedError = rel(*row.predictedUsed, *row.measuredUsed);
    }
    rows.push_back(row);
  }
  return rows;
}

std::optional<double> worstMemoryError(const std::vector<MemoryRow> &rows) {
  std::optional<double> worst;
  for (const MemoryRow &r : rows)
    if (r.error && (!worst || std::fabs(*r.error) > std::fabs(*worst)))
      worst = r.error;
  return worst;
}

std::string memoryText(const std::vector<MemoryRow> &rows, double tolerance) {
  if (rows.empty())
    return "\nmemory: (the run reports no peak_memory_bytes, or the plan "
           "predates the modelled allocation: plan it again)\n";
  std::string s =
      fmt::format("\n{:<6} {:>6} {:>12} {:>12} {:>8} {:>12} {:>12} {:>8}\n",
                  "rank", "device", "pred GiB", "meas GiB", "error",
                  "pred used", "meas used", "error");
  for (const MemoryRow &r : rows)
    s += fmt::format("{:<6} {:>6} {:>12} {:>12} {:>8} {:>12} {:>12} {:>8}\n",
                     r.rank, r.device, gib(r.predicted), gib(r.measured),
                     pct(r.error), gib(r.predictedUsed), gib(r.measuredUsed),
                     pct(r.usedError));
  s += "(pred/meas: bytes the program's buffers hold at the peak, "
       "peak_memory_bytes; used: the device's use at that peak, "
       "cudaMemGetInfo, against the prediction with estimated overheads)\n";
  const std::optional<double> worst = worstMemoryError(rows);
  if (worst)
    s += fmt::format("memory within {:.0f}%: {} (worst {})\n", tolerance * 100,
                     std::fabs(*worst) <= tolerance ? "yes" : "no", pct(worst));
  return s;
}

json memoryJson(const std::vector<MemoryRow> &rows, double tolerance) {
  json ranks = json::array();
  for (const MemoryRow &r : rows)
    ranks.push_back({{"rank", r.rank},
                     {"device", r.device},
                     {"predicted_bytes", r.predicted},
                     {"measured_bytes", r.measured},
                     {"error", numOrNull(r.error)},
                     {"predicted_used_bytes", numOrNull(r.predictedUsed)},
                     {"measured_used_bytes", numOrNull(r.measuredUsed)},
                     {"used_error", numOrNull(r.usedError)}});
  const std::optional<double> worst = worstMemoryError(rows);
  return {{"ranks", ranks},
          {"worst_error", numOrNull(worst)},
          {"tolerance", tolerance},
          {"within_tolerance",
           worst ? json(std::fabs(*worst) <= tolerance) : json(nullptr)}};
}

} // namespace autoddl::cli
