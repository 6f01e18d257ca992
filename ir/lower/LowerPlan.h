//===- LowerPlan.h - a plan's choices as an sbp module --------------------===//
//
// Plain C++ interface (no MLIR types), so the planner's edge code can write
// plan.mlir: the model lowered to the sbp dialect (LowerToSbp.h) with each op's
// chosen nd-SBP signature over one (dp, tp) mesh per pipeline stage
// (`sbp.sig`, `sbp.placement`), values that cross stages sent and received
// (`sbp.send` / `sbp.recv`), and the boxing collectives the choices imply
// inserted by the `sbp-insert-boxing` pass. The module is verified; its text
// parses with `autoddl-opt`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"
#include "ir/lower/LowerToSbp.h"

#include <string>
#include <vector>

namespace autoddl {

/// One model op's choice: layouts over the "dp" and the "tp" mesh axis, in the
/// compact spelling of docs/sbp-dialect.md ("B", "P", "S(1)"), for its
/// operands then its results; and its pipeline stage.
struct PlannedOpLayout {
  std::vector<std::string> dp, tp;
  int stage = 0;
};

struct PlannedModule {
  int64_t dp = 1, tp = 1;
  int stages = 1;
  int pipelineRanks = 1; // stage s runs on pipeline rank s mod pipelineRanks
  std::vector<PlannedOpLayout> ops; // per ModelGraph op, in graph order
};

/// `graph` holds the logical shapes of one micro-batch over all data-parallel
/// ranks. Where a planned 1-D signature is not one the op lists on an axis (the
/// planner reads a bias broadcast where the dialect wants it sliced or
/// partial), the op reads the listed signature with the same result and the
/// same activation operands, and boxing converts the parameter. A vocabulary
/// that tp splits but does not divide is padded as the programs pad it
/// (ops::paddedVocabulary), its losses told their classes (`sbp.classes`).
LowerResult lowerPlanToSbpText(const ModelGraph &graph,
                               const PlannedModule &plan);

} // namespace autoddl
