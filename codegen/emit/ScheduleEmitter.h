//===- ScheduleEmitter.h - the schedule as instruction tables --*- C++ -*-===//
//
// Each pipeline device's instruction list as the table the harness walks
// (backends/common/harness/ScheduleTable.h), with the activation sets each
// instruction takes and the K-FAC items placed before it (Schedule.cpp).
// It reads the context and what the stages' emission decided (their
// function names, the activation sets, whether the backward is split, K-FAC's
// placement) and writes nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/EmitContext.h"
#include "codegen/emit/KfacEmitter.h"
#include "codegen/emit/StageTypes.h"

#include "cost_model/pipeline/ActivationSets.h"
#include "cost_model/pipeline/Schedule.h"

#include <string>

namespace autoddl::codegen::emit {

class ScheduleEmitter {
public:
  ScheduleEmitter(const EmitContext &cx, const KfacEmitter &kfac,
                  const StageTypes &types, const pipeline::ActivationSets &sets,
                  bool splitBackward)
      : cx_(cx), kfac_(kfac), types_(types), sets_(sets),
        splitBackward_(splitBackward) {}

  /// kStageFunctions, the devices' instruction tables, run_schedule and, for
  /// K-FAC, its refresh cycle's tables.
  std::string text(const pipeline::Schedule &s) const;

private:
  using Placement = KfacEmitter::Placement;
  std::string stageFunctionsText(const pipeline::Schedule &s) const;
  std::string deviceTablesText(const pipeline::Schedule &s,
                               const Placement &kfacAt) const;
  std::string kfacCycleText(int p, const Placement &kfacAt) const;

  const EmitContext &cx_;
  const KfacEmitter &kfac_;
  const StageTypes &types_;
  const pipeline::ActivationSets &sets_;
  const bool splitBackward_; // zero-bubble: B and W apart
};

} // namespace autoddl::codegen::emit
