//===- ValidateMemory.h - `autoddl validate`: predicted vs measured peak
//---===//
//
// Per rank of a run: the plan's predicted peak of what the program's
// allocation wrapper counts (pipeline_ranks[].memory.allocated of the rank's
// pipeline device) against metrics.json peak_memory_bytes, and the predicted
// total with the estimated overheads against peak_device_used_bytes
// (cudaMemGetInfo at the counted peak) where the run reports it
// (docs/cost-model.md §5.3, docs/calibrate.md "Validate").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "planner/Plan.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace autoddl::cli {

struct MemoryRow {
  int rank = 0, device = 0;
  double predicted = 0, measured = 0; // allocated bytes
  std::optional<double> predictedUsed, measuredUsed;
  std::optional<double> error, usedError; // (pred - meas) / meas
};

/// metrics.json's field `key` if present (else null); one that fails `is`
/// throws UserError "<origin>: at /<key>: expected <what>".
const nlohmann::json *optionalMetric(const nlohmann::json &metrics,
                                     const char *key, const std::string &origin,
                                     bool (nlohmann::json::*is)()
                                         const noexcept,
                                     const char *what);

/// One row per rank of metrics.json's peak_memory_bytes; bad input (not an
/// array of non-negative numbers, a rank count that is not the plan's)
/// throws UserError naming the place. Empty when the plan predates the
/// modelled allocation (no pipeline_ranks[].memory.allocated).
std::vector<MemoryRow> memoryRows(const planner::Plan &plan,
                                  const nlohmann::json &metrics,
                                  const std::string &origin);

/// The largest |error| over the rows (nullopt: none measured).
std::optional<double> worstMemoryError(const std::vector<MemoryRow> &rows);

/// The text table and its JSON form.
std::string memoryText(const std::vector<MemoryRow> &rows, double tolerance);
nlohmann::json memoryJson(const std::vector<MemoryRow> &rows, double tolerance);

} // namespace autoddl::cli
