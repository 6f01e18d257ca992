//===- PlanValidateTest.cpp - the one validator of plans ------------===//
//
// Each inconsistency a hand-edited plan may carry is one line naming the file,
// the JSON place and the cause (issue 23).
//
//===----------------------------------------------------------------------===//
#include "planner/PlanValidate.h"
#include "ir/import/ModelImporter.h"
#include "planner/Sha256.h"
#include "support/UserError.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

namespace autoddl::planner {
namespace {

/// A consistent plan: 2 nodes x 2 GPUs as pp=2, dp=2, tp=1; 4 layers in two
/// stages; global batch 8 = micro-batch 2 x 2 micro-batches x dp 2.
Plan consistentPlan() {
  Plan p;
  p.layers = 4;
  p.seq = 16;
  p.nodes = 2;
  p.gpusPerNode = 2;
  p.globalBatch = 8;
  p.knobs.pp = 2;
  p.knobs.dp = 2;
  p.knobs.tp = 1;
  p.knobs.microbatch = 2;
  p.knobs.microbatches = 2;
  StageInfo first, second;
  first.stage = 0;
  first.firstLayer = 0;
  first.endLayer = 2;
  first.pre = true;
  second.stage = 1;
  second.device = 1;
  second.firstLayer = 2;
  second.endLayer = 4;
  second.post = true;
  p.stages = {first, second};
  OpChoice op;
  op.operands = {"S(0)", "B"};
  op.result = "P";
  op.signature = "row";
  op.candidates = {"column", "row"};
  p.ops = {op};
  TensorLayout x;
  x.name = "x";
  x.role = "activation";
  x.shape = {2, 16};
  x.dp = "S(0)";
  x.tp = "B";
  p.tensors = {x};
  p.devices.resize(2);
  p.parameters = 1000;
  p.simForward = p.simBackward = p.simWeightGradient = {1e-3, 1e-3};
  p.collectives = {{"stage boundary", "p2p", "send_recv", "pp"}};
  return p;
}

std::string errorOf(const Plan &p) {
  try {
    validatePlan(p, "plan.json");
  } catch (const UserError &e) {
    return e.what();
  }
  return "";
}

std::string errorAfter(const std::function<void(Plan &)> &edit) {
  Plan p = consistentPlan();
  edit(p);
  return errorOf(p);
}

TEST(PlanValidateTest, AConsistentPlanPasses) {
  EXPECT_EQ(errorOf(consistentPlan()), "");
}

TEST(PlanValidateTest, MeshMustMultiplyToTheGpuCount) {
  EXPECT_EQ(errorAfter([](Plan &p) { p.knobs.dp = 3; }),
            "plan.json: at /mesh: pp x dp x tp = 2 x 3 x 1 = 6, but the "
            "cluster has 4 GPUs");
}

TEST(PlanValidateTest, MicroBatchesMustMakeUpTheGlobalBatch) {
  EXPECT_EQ(errorAfter([](Plan &p) { p.knobs.microbatches = 3; }),
            "plan.json: at /microbatches: micro-batch 2 x 3 micro-batches x "
            "dp 2 does not make up the global batch 8");
  // Factors whose 64-bit product would wrap around are still caught.
  EXPECT_NE(errorAfter([](Plan &p) {
              p.knobs.microbatch = int64_t(1) << 62;
              p.knobs.microbatches = 4;
            }),
            "");
}

TEST(PlanValidateTest, StageMapsHaveNoGapsOrOverlaps) {
  EXPECT_EQ(errorAfter([](Plan &p) { p.stages[1].firstLayer = 3; }),
            "plan.json: at /stages/1/layers: layers 2..2 are in no stage");
  EXPECT_EQ(errorAfter([](Plan &p) { p.stages[1].firstLayer = 1; }),
            "plan.json: at /stages/1/layers: layers overlap the previous "
            "stage's (which ends at 2)");
  EXPECT_EQ(errorAfter([](Plan &p) { p.stages[1].stage = 0; }),
            "plan.json: at /stages/1/stage: stage 0 appears twice");
  EXPECT_EQ(errorAfter([](Plan &p) { p.stages[1].stage = 2; }),
            "plan.json: at /stages/1/stage: stage 1 is missing (stages must "
            "be numbered 0..1)");
  EXPECT_EQ(errorAfter([](Plan &p) { p.stages[1].endLayer = 3; }),
            "plan.json: at /stages/1/layers: the stages end at layer 3, the "
            "model has 4");
}

TEST(PlanValidateTest, UnknownSbpIsNamed) {
  EXPECT_EQ(errorAfter([](Plan &p) { p.ops[0].operands[1] = "S(-1)"; }),
            "plan.json: at /ops/0/operands/1: unknown SBP \"S(-1)\" (expected "
            "B, P or S(<dim>))");
  EXPECT_TRUE(isSbpName("S(12)"));
  EXPECT_FALSE(isSbpName("S()"));
  EXPECT_FALSE(isSbpName("R"));
}

TEST(PlanValidateTest, NegativeOrNonFiniteNumbersAreRefused) {
  EXPECT_EQ(errorAfter([](Plan &p) { p.devices[1].backward = -1; }),
            "plan.json: at /pipeline_ranks/1/backward_s: must not be "
            "negative, got -1.0");
  EXPECT_EQ(
      errorAfter([](Plan &p) { p.devices[0].memoryParts.activations = NAN; }),
      "plan.json: at /pipeline_ranks/0/memory/activations: expected a "
      "finite number");
  EXPECT_EQ(errorAfter([](Plan &p) { p.predicted.stepTime = INFINITY; }),
            "plan.json: at /predicted/step_time_s: expected a finite number");
}

TEST(PlanValidateTest, AChangedModelFileIsRefused) {
  std::string model = (std::filesystem::temp_directory_path() /
                       ("autoddl-pv-" + std::to_string(::getpid()) + ".json"))
                          .string();
  std::ofstream(model) << "{\"model_type\": \"gpt2\"}";
  Plan p = consistentPlan();
  p.modelSource = model;
  p.modelSha256 = sha256Hex("{\"model_type\": \"gpt2\"}");
  EXPECT_EQ(errorOf(p), "");
  std::ofstream(model) << "{\"model_type\": \"gpt2\", \"n_layer\": 2}";
  EXPECT_NE(errorOf(p).find("at /model/sha256: the model file " + model +
                            " has changed since the plan was made"),
            std::string::npos);
  std::filesystem::remove(model);
}

/// A plan's model part as the planner writes it for `g` (tp = `tp`).
Plan planFor(const ModelGraph &g, int tp) {
  Plan p;
  p.model = g.name;
  p.modelFamily = g.family;
  p.parameters = g.parameterCount();
  p.seq = g.seq;
  p.knobs.tp = tp;
  p.knobs.microbatch = g.batch;
  static const char *roles[] = {"input", "parameter", "activation"};
  for (const TensorDef &t : g.tensors)
    p.tensors.push_back({t.name, roles[static_cast<int>(t.role)],
                         std::vector<int64_t>(t.shape.begin(), t.shape.end()),
                         "B", "B", 0});
  return p;
}

std::string modelErrorOf(const Plan &p, const ModelGraph &g) {
  try {
    validatePlanForModel(p, g, "tiny-gpt", "plan.json");
  } catch (const UserError &e) {
    return e.what();
  }
  return "";
}

size_t tensorNamed(const Plan &p, const std::string &name) {
  for (size_t i = 0; i < p.tensors.size(); ++i)
    if (p.tensors[i].name == name)
      return i;
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

TEST(PlanValidateTest, TheModelsTensorsAreReDerived) {
  import::ImportOptions o;
  o.batch = 2;
  o.seq = 15; // odd: a sequence split over tp = 2 cannot divide it
  const ModelGraph g = import::importModel("tiny-gpt", o);
  EXPECT_EQ(modelErrorOf(planFor(g, 2), g), "");
  Plan p = planFor(g, 2);
  p.tensors[0].shape[1] = 16;
  EXPECT_EQ(modelErrorOf(p, g).find("plan.json: at /tensors/0/shape: the "
                                    "model's " +
                                    g.tensors[0].name + " is [2, 15]"),
            0u)
      << modelErrorOf(p, g);
  p = planFor(g, 2);
  p.parameters += 1;
  EXPECT_NE(modelErrorOf(p, g).find("at /model/parameters: the model "
                                    "tiny-gpt has "),
            std::string::npos);
  p = planFor(g, 2);
  p.tensors[3].name = "other";
  EXPECT_NE(modelErrorOf(p, g).find("at /tensors/3/name: expected the model's "
                                    "tensor"),
            std::string::npos);
  // The sbp dialect's rule: a split divides its dimension...
  p = planFor(g, 2);
  const size_t x = tensorNamed(p, "input_ids");
  p.tensors[x].tp = "S(1)";
  EXPECT_EQ(modelErrorOf(p, g),
            "plan.json: at /tensors/" + std::to_string(x) +
                "/sbp/tp: expected the size of dimension 1 to be divisible "
                "by 2 (split over mesh axes tp), got 15");
  // ...but for the vocabulary, which the programs pad (256 rows over 3).
  p = planFor(g, 3);
  p.tensors[tensorNamed(p, "transformer.wte.weight")].tp = "S(0)";
  EXPECT_EQ(modelErrorOf(p, g), "");
}

TEST(PlanValidateTest, SplitsBeyondTheRankAndUnknownItemsAreRefused) {
  EXPECT_EQ(errorAfter([](Plan &p) { p.tensors[0].tp = "S(9)"; }),
            "plan.json: at /tensors/0/sbp/tp: split dimension of S(9) is not "
            "below the tensor's rank 2");
  EXPECT_EQ(errorAfter([](Plan &p) { p.tensors[0].shape[0] = -2; }),
            "plan.json: at /tensors/0/shape/0: expected a positive size, got "
            "-2");
  EXPECT_EQ(errorAfter([](Plan &p) { p.stages.clear(); }),
            "plan.json: at /stages: expected at least one stage");
  EXPECT_NE(errorAfter([](Plan &p) {
              p.collectives.push_back({"x", "forward", "all_reduce", "ep"});
            }).find("at /collectives/1/axis: no mesh axis \"ep\""),
            std::string::npos);
}

} // namespace
} // namespace autoddl::planner
