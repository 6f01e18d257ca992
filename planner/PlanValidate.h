//===- PlanValidate.h - one validator of plans read back from plan.json ---===//
//
// Edge code: every command that reads a plan (inspect, codegen, run, verify,
// validate) gets it through readPlanFile, which calls validatePlan, so a
// hand-edited plan that cannot be run as written is refused once, in one place,
// with one line naming the file, the JSON pointer and the cause: a mesh whose
// sizes do not multiply to the cluster's GPU count, a stage map with gaps,
// overlaps or empty stages, micro-batches that do not make up the global
// batch, an SBP that is unknown or splits a dimension the tensor lacks, a
// non-positive or huge shape, a collective over no mesh axis, an unknown K-FAC
// item, a negative or non-finite time, size or memory, or a model file that
// changed since the plan was made (the plan records its sha256). The commands
// that load the model then check the plan against it (validateModelBytes,
// validatePlanForModel; codegen::validatedModelForPlan calls both), re-deriving
// what the plan claims. docs/plan-format.md "Reading a plan back" lists it all.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"
#include "planner/Plan.h"

#include <string>

namespace autoddl::planner {

/// Throws UserError ("<origin>: at /mesh: ...") on the first inconsistency.
void validatePlan(const Plan &plan, const std::string &origin);

/// Whether `model` (the plan's source or a --model override) has the bytes
/// the plan was made from (model.sha256, when recorded); checked before the
/// model is imported at the plan's shapes.
void validateModelBytes(const Plan &plan, const std::string &model,
                        const std::string &origin);

/// What the plan claims about its model, re-derived from the model it is run
/// with: `g`, imported from `model` (the plan's source or a --model override)
/// at the plan's micro-batch and sequence. The model's name, family,
/// parameter count and sequence; every tensor's name, role
/// and shape; every op's name and kind; K-FAC's layers being linears of the
/// model. Throws UserError ("<origin>: at /tensors/3/shape: ...").
void validatePlanForModel(const Plan &plan, const ModelGraph &g,
                          const std::string &model, const std::string &origin);

/// Whether `s` is one SBP of one mesh axis: "B", "P" or "S(<dim>)".
bool isSbpName(const std::string &s);

} // namespace autoddl::planner
