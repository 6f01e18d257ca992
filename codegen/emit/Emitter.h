//===- Emitter.h - the train.cpp emitter, shared by its units --*- C++ -*-===//
//
// The emitter of a plan's training program (docs/codegen.md "The emitter's
// parts"). What every part reads is the EmitContext (EmitContext.h: the
// plan, graph, layouts, target and the fusion, padding and layer-table
// decisions, fixed before any code is emitted); the parts own what they
// write: KfacEmitter its layer table, Emitter the stage members, buckets
// and activation sets. Emitter's units, by job: stage layout
// (StageLayout.cpp), a stage's functions (Stage.cpp), the op emitters (one
// file per family, OpTable.cpp), gradient buckets (GradBuckets.cpp), the
// schedule (Schedule.cpp), identical layers as a loop (LayerLoop.cpp) and
// the program's assembly (ProgramAssembly.cpp). Internal to autoddl_codegen:
// callers use emitTrainProgram (CpuCodegen.h).
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

  /// Why `backend` does not run model `g` whatever the plan (an op kind, an
  /// op reading a parameter where the CUDA kernels take none, a model it does
  /// not feed), or "" (codegen::backendRefusal; OpTable.cpp).
  static std::string backendRefusal(const ModelGraph &g, Backend backend);

private:
  std::string stepGraphGlue() const;
  void emitOp(size_t i, std::vector<Step> &steps);
  std::string vocabPaddingText() const;
  std::string tpPartialGradsText() const;
  void emitStage(int stage, std::string &out);
  /// What a stage's code is emitted from (Stage.cpp, planStage).
  struct StagePlan {
    int stage;
    std::vector<Step> steps;
    std::vector<int> in, sendOut, inputs; // boundary in / out, model inputs
    StageLayers sl;
    StageRecompute rc;
    bool hasLoss;
  };
  StagePlan planStage(int stage);
  std::string stageStructText(const StagePlan &p);
  std::set<std::string> perSetGradients(const StagePlan &p);
  /// The per-set buffer the gradient of output t, sent to the next stage,
  /// is received into where the sets share gradients (Stage.cpp).
  std::string receivedGrad(int t) const {
    return "d_" + cx_.bufName(t, cx_.L.tensors[size_t(t)]) + "_received";
  }
  std::string stageForwardText(const StagePlan &p) const;
  std::string stageBackwardText(const StagePlan &p);
  std::string stageZeroGradsText(const StagePlan &p) const;
  std::string stageInstructionsText(const StagePlan &p) const;
  std::string stageSetsText(const StagePlan &p) const;
  StageTypes stageTypes_; // which stages share one template
  std::string header() const;
  std::string stagesCode(int stages);
  std::string constsText(const pipeline::Schedule &sched) const;
  std::string stepGlue(const pipeline::Schedule &sched);
  std::string paramListText() const;
  double collectiveBytes(const planner::CollectiveUse &c) const;
  std::string prelude() const;
  std::string specText() const;
  std::string programMain() const;
  std::string fp8Weights() const; // main()'s FP8 linears (fp8 plans)
  std::string params() const;

  // What every part reads (EmitContext.h; const: never written here).
  const EmitContext cx_;
  // The K-FAC layer table and its placement (KfacEmitter.h): written only by
  // the linears' emitter (emitLinear), read by the stages and the schedule.
  KfacEmitter kfac_{cx_};
  // Per stage: struct members.
  StageMembers members_;
  // A stage's tensors and converted copies as members (StageBuffers.h).
  StageBuffers buffers_{cx_, members_};
  // The layers as tables and loops (LayerLoops.h); reads the members.
  const LayerLoops layers_{cx_, members_};
  // Activation recomputation (Recompute.h): which stages have a scratch.
  Recomputation recompute_{cx_, members_};
  bool splitBackward_ = false; // zero-bubble: B and W apart
  bool shareGrads_ = false;    // the sets of a stage share inner gradients
  // The activation sets each stage allocates and the micro-batch each holds
  // (pipeline/ActivationSets.h), from the schedule and K-FAC's reads.
  pipeline::ActivationSets sets_;
  std::set<int> inputStages_; // stages with Stage<k>Inputs (a step graph's)
  int lossStage_ = -1;        // the stage with Stage<k>Results
  /// `stage<k>[...]`: micro-batch `mb`'s activation set of `stage`.
  std::string setOf(int stage, const std::string &mb) const {
    return fmt::format("stage{0}[size_t(kSetOf[{0}][{1}])]", stage, mb);
  }
  std::vector<uint64_t> deviceMask_; // per tensor: pipeline devices holding it
  // The gradient buckets (GradBuckets.h): cuda, no ZeRO, dp > 1 or
  // tp-partial.
  GradBuckets buckets_{cx_, layers_};
  // cuda: the activation gradient buffers ("a.d_...data()") one backward
  // call writes whole by storing (=): never zeroed (storesGrad).
  std::set<std::string> storedGrads_;
  // The op emitters (OpEmitters.h): add members, store gradients, fill
  // K-FAC's layer table.
  OpEmitters ops_{cx_, members_, storedGrads_, kfac_};
};

} // namespace autoddl::codegen::emit
