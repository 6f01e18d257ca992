//===- Search.h - the planner: coordinate descent inside outer loops -----===//
//
// plan() searches (docs/planner.md):
//   outer loops   mesh factorisation tp x dp x pp and axis order, micro-batch
//   size
//                 (hence count), schedule (and interleaving depth), contiguous
//                 stage partition, activation recomputation, ZeRO stage;
//   inner search  per-op SBP signatures on the tp axis, by block coordinate
//   descent
//                 from several starts (pure data parallel, Megatron tensor
//                 parallel, the previous best) on the collapsed graph
//                 (SearchGraph.h), or exactly (branch and bound over every
//                 assignment) with SearchMode::Exhaustive;
//   pricing       Pricing.h per op/edge, the pipeline simulator for the step,
//                 bucketed gradient sync overlapped with the last backward, the
//                 optimizer step, memory per rank; a candidate over the
//                 device's memory is never returned.
// Deterministic: candidates are generated and visited in a fixed order, ties
// keep the earlier one, nothing iterates an unordered container.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/Cluster.h"
#include "cost_model/pipeline/OrError.h"
#include "ir/import/ModelGraph.h"
#include "planner/Plan.h"

#include <variant>

namespace autoddl::planner {

/// Either the plan or, when nothing fits in memory, what came closest.
using PlanOutcome = std::variant<Plan, Infeasible>;

/// `g1` and `g2` are the same model imported at micro-batch 1 and 2 (the
/// planner scales shapes to any micro-batch from them). Fails (message) on
/// inputs that admit no candidate at all (e.g. a pinned knob that does not
/// divide the GPUs).
pipeline::OrError<PlanOutcome> plan(const ModelGraph &g1, const ModelGraph &g2,
                                    const cost::Cluster &cluster,
                                    const PlannerOptions &options);

} // namespace autoddl::planner
