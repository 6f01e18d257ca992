//===- PlanJson.h - plan.json (docs/plan-format.md) ----------------------===//
//
// Edge code: writes a Plan as the versioned plan.json document and reads it
// back for `autoddl inspect` (throws autoddl::UserError naming the file and the
// JSON place on bad input). Keys are written in a fixed order so the same plan
// gives the same bytes; only "search"."wall_time_s" depends on the machine.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "planner/Plan.h"

#include <nlohmann/json.hpp>

#include <string>

namespace autoddl::planner {

constexpr int kPlanFormatVersion = 1;

nlohmann::ordered_json planToJson(const Plan &plan);
/// The document as text (2-space indent, trailing newline).
std::string planToText(const Plan &plan);

/// Reads a plan document; `origin` (the file name) prefixes messages.
Plan planFromJson(const nlohmann::json &doc, const std::string &origin);
Plan readPlanFile(const std::string &path);

} // namespace autoddl::planner
