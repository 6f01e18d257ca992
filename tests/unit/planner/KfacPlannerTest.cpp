//===- KfacPlannerTest.cpp - plan --optimizer kfac (docs/pipefisher.md) --===//
//
// The K-FAC layer rule, that a kfac plan's step and memory contain its K-FAC
// work, that its placement respects the bubbles and the refresh interval, the
// plan.json round trip, and that the default optimizer's plans carry nothing
// of it.
//
//===----------------------------------------------------------------------===//
#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"
#include "planner/Kfac.h"
#include "planner/PlanJson.h"
#include "planner/Search.h"

#include <gtest/gtest.h>

#include <string>

using namespace autoddl;
using namespace autoddl::planner;

namespace {

struct Graphs {
  ModelGraph g1, g2;
};

Graphs load(const std::string &name) {
  import::ImportOptions o;
  o.batch = 1;
  Graphs m;
  m.g1 = import::importModel(name, o);
  o.batch = 2;
  m.g2 = import::importModel(name, o);
  return m;
}

cost::Cluster twoGpus() {
  cost::Cluster c = cost::loadCluster("h200x2-nvlink");
  return cost::withNodes(c, 1);
}

Plan planOf(const Graphs &m, const std::string &optimizer, FixedKnobs fix,
            const cost::Cluster &c = twoGpus()) {
  PlannerOptions o;
  o.globalBatch = 8;
  o.fixed = fix;
  o.explain = false;
  o.optimizer = optimizer;
  auto r = plan(m.g1, m.g2, c, o);
  EXPECT_TRUE(static_cast<bool>(r)) << r.error();
  const Plan *p = r ? std::get_if<Plan>(&*r) : nullptr;
  EXPECT_NE(p, nullptr);
  return p ? *p : Plan{};
}

// tiny-gpt: each of its 2 blocks has qkv, attention projection, fc, fc2; the
// lm_head computes the logits and stays first-order; no linear is wider
// than 8192.
TEST(Kfac, LayerRuleSkipsTheHead) {
  Graphs m = load("tiny-gpt");
  auto k = kfacModel(m.g1);
  ASSERT_TRUE(static_cast<bool>(k)) << k.error();
  EXPECT_EQ(k->linears.size(), 8u);
  EXPECT_EQ(k->headLinears, 1);
  EXPECT_EQ(k->wideLinears, 0);
  for (const KfacLinear &l : k->linears)
    EXPECT_GE(l.layer, 0) << l.name;
}

// GPT-3 175B: hidden 12288, so every linear is wider than the threshold and
// K-FAC has nothing to take: refused, naming why.
TEST(Kfac, EveryLayerTooWideIsRefused) {
  import::ImportOptions o;
  o.batch = 1;
  o.seq = 8;
  ModelGraph g = import::importModel("gpt3-175b", o);
  auto k = kfacModel(g);
  ASSERT_FALSE(static_cast<bool>(k));
  EXPECT_NE(k.error().find("wider than 8192"), std::string::npos) << k.error();
}

// A pinned 2-stage 1F1B tiny-gpt: the kfac plan's step is the first-order
// step of the same configuration plus at least the preconditioning; memory
// grows by the K-FAC state; items in bubbles lie inside the replayed step.
TEST(Kfac, PlanCountsItsWorkAndMemory) {
  Graphs m = load("tiny-gpt");
  FixedKnobs fix;
  fix.pp = 2;
  fix.schedule = pipeline::ScheduleKind::OneFOneB;
  Plan first = planOf(m, "adamw", fix);
  Plan kfac = planOf(m, "kfac", fix);
  EXPECT_FALSE(first.kfac.has_value());
  ASSERT_TRUE(kfac.kfac.has_value());
  const KfacPlan &k = *kfac.kfac;
  EXPECT_GE(k.refreshSteps, 1);
  double precondition = 0;
  for (const KfacDevicePlan &d : k.devices)
    precondition = std::max(precondition, d.precondition);
  EXPECT_GT(precondition, 0);
  EXPECT_GE(kfac.predicted.stepTime,
            k.firstOrderStepTime + precondition - 1e-12);
  EXPECT_GT(kfac.predicted.peakMemory, 0);
  double kfacBytes = 0;
  for (const DeviceTimes &d : kfac.devices)
    kfacBytes = std::max(kfacBytes, d.kfacBytes);
  EXPECT_GT(kfacBytes, 0);
  // The first-order plan is the same configuration here (all pinned that
  // matters), so memory differs by at least the smallest rank's K-FAC state.
  if (knobsToString(first.knobs) == knobsToString(kfac.knobs)) {
    EXPECT_NEAR(k.firstOrderStepTime, first.predicted.stepTime,
                1e-9 * first.predicted.stepTime);
    EXPECT_GT(kfac.predicted.peakMemory, first.predicted.peakMemory);
  }
  for (const KfacDevicePlan &d : k.devices)
    for (const KfacItemPlacement &it : d.items) {
      EXPECT_LT(it.step, k.refreshSteps);
      if (!it.forced && it.item != "precond") {
        EXPECT_LE(it.end, k.firstOrderStepTime + 1e-12);
      }
    }
  EXPECT_GE(k.utilisationAfter, k.utilisationBefore);
}

// gpu.kfac_time_scale (kept as the op time scales of kinds "kfac:<item>")
// multiplies each item's price: the same pinned configuration priced with
// curvature x0.5, inversion x2, precondition x3.
TEST(Kfac, ClusterTimeScalesMultiplyItemPrices) {
  Graphs m = load("tiny-gpt");
  FixedKnobs fix;
  fix.pp = 2;
  fix.dp = 1;
  fix.tp = 1;
  fix.microbatch = 1;
  fix.schedule = pipeline::ScheduleKind::OneFOneB;
  cost::Cluster scaled = twoGpus();
  scaled.opTimeScales.push_back({"kfac:curvature", 0.5, 0.5});
  scaled.opTimeScales.push_back({"kfac:inversion", 2, 2});
  scaled.opTimeScales.push_back({"kfac:precondition", 3, 3});
  Plan a = planOf(m, "kfac", fix), b = planOf(m, "kfac", fix, scaled);
  ASSERT_TRUE(a.kfac && b.kfac);
  ASSERT_EQ(a.kfac->layers.size(), b.kfac->layers.size());
  for (size_t i = 0; i < a.kfac->layers.size(); ++i) {
    const KfacLayerPlan &x = a.kfac->layers[i], &y = b.kfac->layers[i];
    for (int f = 0; f < 2; ++f) {
      EXPECT_DOUBLE_EQ(y.curvature[f], 0.5 * x.curvature[f]) << x.name;
      EXPECT_DOUBLE_EQ(y.invert[f], 2 * x.invert[f]) << x.name;
    }
    EXPECT_DOUBLE_EQ(y.precondition, 3 * x.precondition) << x.name;
  }
  // Forward and backward are untouched: the same first-order step.
  EXPECT_DOUBLE_EQ(a.kfac->firstOrderStepTime, b.kfac->firstOrderStepTime);
}

// plan.json keeps every kfac field: written, read, written again, the same
// kfac object and per-rank memory (K-FAC bytes included); a first-order
// plan's document has neither "optimizer" nor "kfac".
TEST(Kfac, PlanJsonRoundTrip) {
  Graphs m = load("tiny-gpt");
  FixedKnobs fix;
  fix.pp = 2;
  fix.schedule = pipeline::ScheduleKind::Chimera;
  Plan p = planOf(m, "kfac", fix);
  ASSERT_TRUE(p.kfac.has_value());
  // Chimera: both copies of every layer, the up one named "up".
  int up = 0;
  for (const KfacLayerPlan &l : p.kfac->layers)
    up += l.direction == "up";
  EXPECT_EQ(2 * up, static_cast<int>(p.kfac->layers.size()));
  const auto doc = planToJson(p);
  Plan back = planFromJson(nlohmann::json::parse(doc.dump()), "plan.json");
  const auto again = planToJson(back);
  EXPECT_EQ(again["optimizer"], "kfac");
  EXPECT_EQ(again["kfac"].dump(), doc["kfac"].dump());
  EXPECT_EQ(again["pipeline_ranks"].dump(), doc["pipeline_ranks"].dump());
  EXPECT_EQ(back.predicted.peakMemory, p.predicted.peakMemory);
  const auto firstOrder = planToJson(planOf(m, "adamw", fix));
  EXPECT_FALSE(firstOrder.contains("optimizer"));
  EXPECT_FALSE(firstOrder.contains("kfac"));
}

TEST(Kfac, DampingMustBePositive) {
  Graphs m = load("tiny-gpt");
  PlannerOptions o;
  o.globalBatch = 8;
  o.optimizer = "kfac";
  o.kfacDamping = 0;
  auto r = plan(m.g1, m.g2, twoGpus(), o);
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error(), "--kfac-damping must be a finite number > 0, got 0");
}

} // namespace
