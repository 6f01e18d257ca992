//===- Fp8PlanTest.cpp - fp8 as a plan precision --------------------------===//
//
// The size rule the runtime runs and the pricing prices
// (backends/common/Fp8Rule.h), the FP8 peak of the cluster presets, which
// linears an fp8 plan hands to FP8 (ProgramDecisions.h fp8Linear), the
// planner's prices of fp8 plans against bf16 ones on real models, plan.json's
// "precision", and the CPU backend's refusal (Runnable.h).
//
//===----------------------------------------------------------------------===//
#include "backends/common/Fp8Rule.h"
#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"
#include "planner/Fp8Pricing.h"
#include "planner/PlanJson.h"
#include "planner/ProgramDecisions.h"
#include "planner/Runnable.h"
#include "planner/Search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

using namespace autoddl;
using namespace autoddl::planner;

namespace {

TEST(Fp8Rule, GptSizesAsDocumented) {
  using rt::fp8RunsLinear;
  // GPT-2 124M at 16k tokens: every block linear short of the bar.
  EXPECT_FALSE(fp8RunsLinear(16384, 768, 2304));
  EXPECT_FALSE(fp8RunsLinear(16384, 768, 3072));
  EXPECT_FALSE(fp8RunsLinear(16384, 3072, 768));
  EXPECT_FALSE(fp8RunsLinear(16384, 768, 768));
  // gpt2-medium: qkv, fc, proj yes; the attention projection no.
  EXPECT_TRUE(fp8RunsLinear(16384, 1024, 3072));
  EXPECT_TRUE(fp8RunsLinear(16384, 1024, 4096));
  EXPECT_FALSE(fp8RunsLinear(16384, 1024, 1024));
  // gpt2-xl at 8k tokens, a 7B layer at 1k tokens: all.
  EXPECT_TRUE(fp8RunsLinear(8192, 1600, 1600));
  EXPECT_TRUE(fp8RunsLinear(1024, 4096, 4096));
  // Not a multiple of 16 (cuBLASLt's FP8 alignment), however large.
  EXPECT_FALSE(fp8RunsLinear(8192, 4096, 50257));
  EXPECT_FALSE(fp8RunsLinear(8193, 4096, 4096));
  // N=2, K=3, O=5: NK 6, KO 15, NO 10. A micro-batch casts x and dY only;
  // W (2 bytes read, 1 written a layout) once a step.
  const rt::Fp8CastBytes b = rt::fp8CastBytes(2, 3, 5);
  EXPECT_DOUBLE_EQ(b.forward, 3 * 6);
  EXPECT_DOUBLE_EQ(b.inputGrad, 3 * 10);
  EXPECT_DOUBLE_EQ(b.weightGrad, 10 + 3 * 6); // dY^T from dY's one read
  EXPECT_DOUBLE_EQ(b.weightPerStep, 2 * 15 + 2 * 15);
  // The input gradient in bf16 (through a GELU): the forward's layout only.
  EXPECT_DOUBLE_EQ(rt::fp8CastBytes(2, 3, 5, false).weightPerStep, 3 * 15);
  // x^T, then dY in both layouts (the first rounded up to 256 bytes); no W.
  EXPECT_DOUBLE_EQ(rt::fp8Scratch(2, 3, 5), 256 + 10 + 6 + 512);
  // The copy: 256 bytes of 1/scale, each layout rounded up to 256 bytes.
  EXPECT_EQ(rt::fp8WeightCopyBytes(2, 3, 2), 256 + 2 * 256);
  EXPECT_EQ(rt::fp8WeightCopyBytes(1600, 6400, 1), 256 + 1600 * 6400);
}

TEST(Fp8Cluster, HopperPresetsHaveTheirFp8Peak) {
  // The H200 presets: the datasheet's dense figure, twice bf16's.
  for (const char *name : {"dgx-h200-ndr", "h200x2-nvlink"}) {
    const cost::Cluster c = cost::loadCluster(name);
    EXPECT_DOUBLE_EQ(c.peakFlops(cost::Precision::FP8), 1979e12) << name;
    EXPECT_DOUBLE_EQ(c.peakFlops(cost::Precision::FP8),
                     2 * c.peakFlops(cost::Precision::BF16))
        << name;
  }
  // The H100's, calibrated: its FP8 GEMMs ran 1.64x (median) the bf16 ones
  // (bench/results/cuda/2026-12-06-h100-fp8-mlp-calls/Fp8Bench.log).
  const cost::Cluster h100 = cost::loadCluster("dgx-h100-ndr");
  EXPECT_DOUBLE_EQ(h100.peakFlops(cost::Precision::FP8), 1623e12);
  EXPECT_NEAR(h100.peakFlops(cost::Precision::FP8) /
                  h100.peakFlops(cost::Precision::BF16),
              1.64, 0.005);
  // No FP8 on an A100: an fp8 price falls back to bf16, not fp32.
  const cost::Cluster a100 = cost::loadCluster("dgx-a100-hdr");
  EXPECT_DOUBLE_EQ(a100.peakFlops(cost::Precision::FP8), 312e12);
  cost::Precision p = cost::Precision::BF16;
  ASSERT_TRUE(cost::parsePrecision("fp8", p));
  EXPECT_EQ(p, cost::Precision::FP8);
  EXPECT_EQ(cost::precisionName(p), "fp8");
  EXPECT_EQ(cost::bulkPrecision(p), cost::Precision::BF16);
}

TEST(Fp8Decisions, TheBlockLinearsOnly) {
  import::ImportOptions io;
  io.batch = 1;
  const ModelGraph g = import::importModel("gpt2", io);
  int fp8 = 0, layers = 0;
  for (const OpDef &op : g.ops) {
    fp8 += fp8Linear(op);
    layers += op.kind == "attention";
    if (op.kind == "linear" && op.layer < 0) // the tied LM head
      EXPECT_FALSE(fp8Linear(op)) << op.name;
  }
  EXPECT_EQ(fp8, 4 * layers); // qkv, attention projection, fc, proj
}

// LLaMA's q, k, v read one normed x, gate and up another: the runtime casts
// x in the first forward of each run and x^T in the first weight-gradient
// call (the backward runs them in reverse: v, then up).
TEST(Fp8Decisions, SharedInputsOfLlama) {
  import::ImportOptions io;
  io.batch = 1;
  const ModelGraph g = import::importModel("llama-2-7b", io);
  std::map<std::string, std::pair<bool, bool>> shared;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == "linear" && g.ops[i].layer == 1) {
      const Fp8SharedInput s =
          fp8SharedInput(g, i, [](size_t) { return true; });
      shared[g.ops[i].name] = {s.x, s.xT};
    }
  const std::map<std::string, std::pair<bool, bool>> want = {
      {"layers.1.self_attn.q_proj", {false, true}},
      {"layers.1.self_attn.k_proj", {true, true}},
      {"layers.1.self_attn.v_proj", {true, false}},
      {"layers.1.self_attn.o_proj", {false, false}},
      {"layers.1.mlp.gate_proj", {false, true}},
      {"layers.1.mlp.up_proj", {true, false}},
      {"layers.1.mlp.down_proj", {false, false}}};
  EXPECT_EQ(shared, want);
  // k in bf16 (say, below the bar): v reads q's cast; q's x^T is its own.
  const Fp8SharedInput v = fp8SharedInput(
      g,
      size_t(std::find_if(g.ops.begin(), g.ops.end(),
                          [](const OpDef &op) {
                            return op.name == "layers.1.self_attn.v_proj";
                          }) -
             g.ops.begin()),
      [&](size_t j) { return g.ops[j].name != "layers.1.self_attn.k_proj"; });
  EXPECT_TRUE(v.x);
  // A shared cast is not paid: 3 bytes an x element (read bf16, write
  // E4M3) in the forward and in the weight gradient.
  const cost::Cluster c = cost::loadCluster("dgx-h100-ndr");
  const ops::ValueType x{{16384, 4096}, ops::DType::BF16},
      y{{16384, 4096}, ops::DType::BF16};
  const Fp8CastCost own = fp8CastCost(c, x, y, false, 2, {}),
                    both = fp8CastCost(c, x, y, false, 2, {true, true});
  const double cast = 3.0 * 16384 * 4096 / (c.hbmBandwidth * c.hbmEfficiency);
  EXPECT_NEAR(own.forward - both.forward, cast, 1e-12);
  EXPECT_NEAR(own.wgrad - both.wgrad, cast, 1e-12);
  EXPECT_NEAR(own.backward - both.backward, cast, 1e-12);
}

Plan planOf(const char *model, int64_t batch, int64_t microbatch,
            cost::Precision precision) {
  import::ImportOptions io;
  io.batch = 1;
  const ModelGraph g1 = import::importModel(model, io);
  io.batch = 2;
  const ModelGraph g2 = import::importModel(model, io);
  cost::Cluster c = cost::loadCluster("dgx-h100-ndr");
  c.gpusPerNode = 1;
  c = cost::withNodes(c, 1);
  PlannerOptions o;
  o.globalBatch = batch;
  o.fixed.microbatch = microbatch;
  o.explain = false;
  o.precision = precision;
  auto r = plan(g1, g2, c, o);
  EXPECT_TRUE(static_cast<bool>(r)) << r.error();
  const Plan *p = r ? std::get_if<Plan>(&*r) : nullptr;
  EXPECT_NE(p, nullptr);
  return p ? *p : Plan{};
}

TEST(Fp8Plan, LargeModelFasterSmallModelUnchanged) {
  const Plan xl16 = planOf("gpt2-xl", 16, 8, cost::Precision::BF16);
  const Plan xl8 = planOf("gpt2-xl", 16, 8, cost::Precision::FP8);
  EXPECT_EQ(xl8.precision, cost::Precision::FP8);
  // Every block linear in FP8 (with its casts): faster, by less than the
  // GEMMs' 2x (attention, norms, the head stay bf16).
  const double speedup = xl16.predicted.stepTime / xl8.predicted.stepTime;
  EXPECT_GT(speedup, 1.05);
  EXPECT_LT(speedup, 1.6);
  // The casts' scratch is counted; the MFU stays against the bf16 peak.
  EXPECT_GT(xl8.predicted.peakAllocated, xl16.predicted.peakAllocated);
  EXPECT_DOUBLE_EQ(xl8.peakFlops, xl16.peakFlops);
  // GPT-2 124M: no block linear passes the rule: priced as bf16.
  const Plan s16 = planOf("gpt2", 16, 16, cost::Precision::BF16);
  const Plan s8 = planOf("gpt2", 16, 16, cost::Precision::FP8);
  EXPECT_DOUBLE_EQ(s8.predicted.stepTime, s16.predicted.stepTime);
}

// gpt2-xl's weight casts are once a step: with twice the micro-batches of
// 8 (global batch 32 against 16) an fp8 step adds twice the micro-batch
// work, not the weights' casts, so 2 step(16) - step(32), the per-step part
// (the optimizer), exceeds bf16's by exactly the casts of its 48 layers'
// weights: qkv [1600,4800], attention projection [1600,1600], fc
// [1600,6400] into both layouts (4 bytes an element), proj [6400,1600] into
// the forward's only (3: its input gradient runs in bf16 through the GELU),
// at the copy bandwidth. Charged per micro-batch again, the difference
// would be 0. The copies (1 byte an element a layout, 256 bytes of 1/scale)
// are in the fp8 plan's peak.
TEST(Fp8Plan, WeightsCastOnceAStep) {
  const double
      s16 = planOf("gpt2-xl", 16, 8, cost::Precision::FP8).predicted.stepTime,
      s32 = planOf("gpt2-xl", 32, 8, cost::Precision::FP8).predicted.stepTime,
      b16 = planOf("gpt2-xl", 16, 8, cost::Precision::BF16).predicted.stepTime,
      b32 = planOf("gpt2-xl", 32, 8, cost::Precision::BF16).predicted.stepTime;
  const double C = 1600, layers = 48;
  const double fourBytes = 3 * C * C + C * C + 4 * C * C,
               threeBytes = 4 * C * C;
  const cost::Cluster c = cost::loadCluster("dgx-h100-ndr");
  const double casts = layers * (4 * fourBytes + 3 * threeBytes) /
                       (c.hbmBandwidth * c.hbmEfficiency);
  EXPECT_NEAR((2 * s16 - s32) - (2 * b16 - b32), casts, 1e-3 * casts);
  const Plan f = planOf("gpt2-xl", 16, 8, cost::Precision::FP8),
             b = planOf("gpt2-xl", 16, 8, cost::Precision::BF16);
  // Both layouts of three weights, one of proj's; beside them at most the
  // largest call's scratch (fc's, 8192 tokens) over bf16's workspace.
  const double copies = layers * (2 * fourBytes + threeBytes + 4 * 256);
  const double more = f.devices[0].memoryParts.workspace -
                      b.devices[0].memoryParts.workspace - copies;
  EXPECT_GE(more, 0);
  EXPECT_LE(more, rt::fp8Scratch(8192, 1600, 6400));
}

TEST(Fp8Plan, JsonRecordsThePrecision) {
  const Plan p = planOf("gpt2", 16, 16, cost::Precision::FP8);
  const std::string text = planToText(p);
  EXPECT_NE(text.find("\"precision\": \"fp8\""), std::string::npos);
  const Plan q = planFromJson(nlohmann::json::parse(text), "plan.json");
  EXPECT_EQ(q.precision, cost::Precision::FP8);
  EXPECT_EQ(planToText(q), text);
  // A bf16 plan reads as before: no field.
  const Plan b = planOf("gpt2", 16, 16, cost::Precision::BF16);
  EXPECT_EQ(planToText(b).find("\"precision\""), std::string::npos);
  // A precision the programs do not run is refused.
  nlohmann::json bad = nlohmann::json::parse(text);
  bad["precision"] = "fp16";
  EXPECT_ANY_THROW(planFromJson(bad, "plan.json"));
}

TEST(Fp8Plan, TheCpuProgramsRefuseFp8) {
  using R = RunnableConfigurations;
  EXPECT_NE(R::precisionRefusal(cost::Precision::FP8, true), "");
  EXPECT_EQ(R::precisionRefusal(cost::Precision::FP8, false), "");
  EXPECT_EQ(R::precisionRefusal(cost::Precision::BF16, true), "");
}

} // namespace
