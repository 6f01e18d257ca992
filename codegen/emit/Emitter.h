//===- Emitter.h - the train.cpp emitter -----------------------*- C++ -*-===//
//
// The emitter of a plan's training program (docs/codegen.md "The emitter,
// by job"). Every part reads the EmitContext (EmitContext.h: the plan,
// graph, layouts, target and the decisions fixed before any code is
// emitted) and owns only the state it writes; each part's header says what
// it reads and writes. Emitter holds the parts and emits the stages
// (Stage.cpp), one op's call (OpTable.cpp) and the program around them
// (ProgramAssembly.cpp, Schedule.cpp). Internal to autoddl_codegen: callers
// use emitTrainProgram (CpuCodegen.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/EmitContext.h"
#include "codegen/emit/GradBuckets.h"
#include "codegen/emit/KfacEmitter.h"
#include "codegen/emit/LayerLoops.h"
#include "codegen/emit/OpEmitters.h"
#include "codegen/emit/Recompute.h"
#include "codegen/emit/ScheduleEmitter.h"
#include "codegen/emit/StageBuffers.h"
#include "codegen/emit/StageMembers.h"
#include "codegen/emit/StageTypes.h"

#include "cost_model/pipeline/ActivationSets.h"
#include "cost_model/pipeline/Schedule.h"
#include "support/UserError.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

namespace autoddl::codegen::emit {

/// Activations crossing into `stage` from earlier stages (Stage.cpp).
std::vector<int> boundaryTensors(const ModelGraph &g, const ModelLayout &L,
                                 int stage);

class Emitter {
public:
  Emitter(const planner::Plan &plan, const ModelGraph &g, Backend backend)
      : cx_(plan, g, backend) {}

  std::string emit();

private:
  // Stage.cpp: a stage's code, from what planStage gathers.
  struct StagePlan {
    int stage;
    std::vector<Step> steps;
    std::vector<int> in, sendOut, inputs; // boundary in / out, model inputs
    StageLayers sl;
    StageRecompute rc;
    bool hasLoss;
  };
  void emitStage(int stage, std::string &out);
  StagePlan planStage(int stage);
  std::string stageStructText(const StagePlan &p);
  std::set<std::string> perSetGradients(const StagePlan &p);
  /// The per-set buffer the gradient of output t, sent to the next stage,
  /// is received into where the sets share gradients.
  std::string receivedGrad(int t) const {
    return "d_" + cx_.bufName(t, cx_.L.tensors[size_t(t)]) + "_received";
  }
  /// `stage<k>[...]`: micro-batch `mb`'s activation set of `stage`.
  std::string setOf(int stage, const std::string &mb) const {
    return fmt::format("stage{0}[size_t(kSetOf[{0}][{1}])]", stage, mb);
  }
  std::string stageForwardText(const StagePlan &p) const;
  std::string stageBackwardText(const StagePlan &p);
  std::string stageZeroGradsText(const StagePlan &p) const;
  std::string stageInstructionsText(const StagePlan &p) const;
  std::string stageSetsText(const StagePlan &p) const;
  // OpTable.cpp: op i's operands in its plan's layouts, its emitter called.
  void emitOp(size_t i, std::vector<Step> &steps);
  // ProgramAssembly.cpp, Schedule.cpp, TrainProgram.cpp: the program around
  // the stages.
  std::string header() const;
  std::string stagesCode(int stages);
  std::string constsText(const pipeline::Schedule &sched) const;
  std::string stepGlue(const pipeline::Schedule &sched);
  std::string stepGraphGlue() const;
  std::string paramListText() const;
  double collectiveBytes(const planner::CollectiveUse &c) const;
  std::string prelude() const;
  std::string specText() const;
  std::string programMain() const;
  std::string buffersText() const;
  std::string fp8Weights() const; // main()'s FP8 linears (fp8 plans)
  std::string params() const;
  std::string vocabPaddingText() const;
  std::string tpPartialGradsText() const;

  // What every part reads (EmitContext.h; const: never written here).
  const EmitContext cx_;

  // The parts, each with the state it owns (its header says what it reads).
  StageMembers members_; // per stage: struct members
  // cuda: the activation gradient buffers ("a.d_...data()") one backward
  // call writes whole by storing (=): never zeroed (storesGrad).
  std::set<std::string> storedGrads_;
  // The K-FAC layer table and its placement: written only by the linears'
  // emitter, read by the stages and the schedule.
  KfacEmitter kfac_{cx_};
  StageBuffers buffers_{cx_, members_};    // tensors, converted copies
  const LayerLoops layers_{cx_, members_}; // layer tables and loops
  Recomputation recompute_{cx_, members_}; // which stages have a scratch
  GradBuckets buckets_{cx_, layers_};      // cuda, no ZeRO, dp > 1 or tp
  OpEmitters ops_{cx_, members_, storedGrads_, kfac_};

  // Emitter's own. From the schedule, before the stages (emit()):
  bool splitBackward_ = false;       // zero-bubble: B and W apart
  bool shareGrads_ = false;          // the sets of a stage share gradients
  std::vector<uint64_t> deviceMask_; // per tensor: pipeline devices holding it
  // Written while the stages are emitted, read by the program's assembly:
  std::set<int> inputStages_; // stages with Stage<k>Inputs (a step graph's)
  int lossStage_ = -1;        // the stage with Stage<k>Results
  StageTypes stageTypes_;     // which stages share one template
  // The activation sets each stage allocates and the micro-batch each holds
  // (pipeline/ActivationSets.h), from the schedule and K-FAC's reads.
  pipeline::ActivationSets sets_;
};

} // namespace autoddl::codegen::emit
