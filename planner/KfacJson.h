//===- KfacJson.h - the "kfac" object of plan.json -----------------------===//
//
// Edge code: writes Plan::kfac (docs/plan-format.md "kfac") and reads it back,
// throwing autoddl::UserError naming the file and JSON place on bad input.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "planner/KfacPlan.h"

#include <nlohmann/json.hpp>

#include <string>

namespace autoddl::planner {

nlohmann::ordered_json kfacToJson(const KfacPlan &plan);
KfacPlan kfacFromJson(const nlohmann::json &j, const std::string &origin,
                      const nlohmann::json::json_pointer &where);

} // namespace autoddl::planner
