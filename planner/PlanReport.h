//===- PlanReport.h - a plan for people: summary, tables, why, trace -----===//
//
// Edge code shared by `autoddl plan` (summary) and `autoddl inspect` (tables,
// --why, --trace). The summary speaks Megatron's vocabulary (tp/pp/dp,
// micro-batch, schedule) plus the S/B/P of each op of each layer kind.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/ChromeTrace.h"
#include "planner/Plan.h"

#include <string>

namespace autoddl::planner {

/// A few lines: the configuration, the prediction, the time breakdown.
std::string planSummary(const Plan &plan);
/// The per-op SBP table, the stage map, per-rank times and memory, collectives.
std::string planTables(const Plan &plan);
/// For each knob, the neighbouring choices with delta time, delta memory and
/// why they lost.
std::string planWhy(const Plan &plan);
/// The message printed when nothing fits.
std::string infeasibleReport(const Infeasible &inf);

/// The predicted step as a Chrome trace: one process per rank, threads
/// "compute" and "communication". Plans with more than `maxRanks` ranks show
/// one rank per pipeline stage (the others run the same timeline). Fails
/// (message) when the plan's times do not replay.
bool planTrace(const Plan &plan, int maxRanks, trace::ChromeTrace &out,
               std::string &error);

} // namespace autoddl::planner
