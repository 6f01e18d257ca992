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
#include "planner/KfacJson.h"
#include "planner/PlanJson.h"
#include "planner/Search.h"
#include "tests/unit/ThrownMessage.h"

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

/// Two pipeline stages under `schedule`, the other knobs free.
FixedKnobs twoStages(pipeline::ScheduleKind schedule) {
  FixedKnobs fix;
  fix.pp = 2;
  fix.schedule = schedule;
  return fix;
}

Plan planOf(const Graphs &m, const std::string &optimizer, FixedKnobs fix,
            const cost::Cluster &c = twoGpus(),
            pipeline::KfacFilling filling = pipeline::KfacFilling::Items) {
  PlannerOptions o;
  o.globalBatch = 8;
  o.fixed = fix;
  o.explain = false;
  o.optimizer = optimizer;
  o.kfacFilling = filling;
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
  const FixedKnobs fix = twoStages(pipeline::ScheduleKind::OneFOneB);
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
  // 1F1B: layers of stage s are on device s and take its K_d; K is the
  // largest K_d and each item lies within its device's refresh.
  int largest = 0;
  for (const KfacDevicePlan &d : k.devices) {
    EXPECT_GE(d.refreshSteps, d.steps);
    largest = std::max(largest, d.refreshSteps);
  }
  EXPECT_EQ(k.refreshSteps, largest);
  for (const KfacLayerPlan &l : k.layers)
    EXPECT_EQ(l.refreshSteps, k.devices.at(l.stage).refreshSteps) << l.name;
  for (const KfacDevicePlan &d : k.devices)
    for (const KfacItemPlacement &it : d.items) {
      EXPECT_LT(it.step, d.refreshSteps);
      if (!it.forced && it.item != "precond") {
        EXPECT_LE(it.end, k.firstOrderStepTime + 1e-12);
      }
    }
  EXPECT_GE(k.utilisationAfter, k.utilisationBefore);
}

// gpu.kfac_time_scale (kept as the op time scales of kinds "kfac:<item>")
// multiplies each item's price: the same pinned configuration priced with
// curvature x0.5, inversion x2, bf16 preconditioning x3 (this bf16 plan on
// H200s preconditions in bf16, so the fp32 preconditioning's x7 is not
// applied).
TEST(Kfac, ClusterTimeScalesMultiplyItemPrices) {
  Graphs m = load("tiny-gpt");
  FixedKnobs fix = twoStages(pipeline::ScheduleKind::OneFOneB);
  fix.dp = 1;
  fix.tp = 1;
  fix.microbatch = 1;
  cost::Cluster scaled = twoGpus();
  scaled.opTimeScales.push_back({"kfac:curvature", 0.5, 0.5});
  scaled.opTimeScales.push_back({"kfac:inversion", 2, 2});
  scaled.opTimeScales.push_back({"kfac:precondition_bf16", 3, 3});
  scaled.opTimeScales.push_back({"kfac:precondition", 7, 7});
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
  const FixedKnobs fix = twoStages(pipeline::ScheduleKind::Chimera);
  Plan p = planOf(m, "kfac", fix);
  ASSERT_TRUE(p.kfac.has_value());
  // Chimera: both copies of every layer, the up one named "up".
  int up = 0;
  for (const KfacLayerPlan &l : p.kfac->layers)
    up += l.direction == "up";
  EXPECT_EQ(2 * up, static_cast<int>(p.kfac->layers.size()));
  // The two copies of a layer (on mirrored devices) share one K.
  for (const KfacLayerPlan &a : p.kfac->layers)
    for (const KfacLayerPlan &b : p.kfac->layers)
      if (a.name == b.name) {
        EXPECT_EQ(a.refreshSteps, b.refreshSteps) << a.name;
      }
  const auto doc = planToJson(p);
  Plan back = planFromJson(nlohmann::json::parse(doc.dump()), "plan.json");
  const auto again = planToJson(back);
  EXPECT_EQ(again["optimizer"], "kfac");
  EXPECT_EQ(again["kfac"].dump(), doc["kfac"].dump());
  // K stored once, per device (a layer's is its device's).
  ASSERT_FALSE(doc["kfac"]["layers"][0].contains("refresh_steps"));
  ASSERT_TRUE(doc["kfac"]["devices"][0].contains("refresh_steps"));
  EXPECT_EQ(again["pipeline_ranks"].dump(), doc["pipeline_ranks"].dump());
  EXPECT_EQ(back.predicted.peakMemory, p.predicted.peakMemory);
  const auto firstOrder = planToJson(planOf(m, "adamw", fix));
  EXPECT_FALSE(firstOrder.contains("optimizer"));
  EXPECT_FALSE(firstOrder.contains("kfac"));
}

// `--kfac-refresh 1,3` (PlannerOptions::kfacDeviceRefresh) reaches the
// packer: the search keeps only pp = 2, device 0 refreshes every step and
// device 1 every 3, its layers say so, K is 3 and pinned; plan.json keeps
// the per-device and per-layer K through a round trip.
TEST(Kfac, PerDevicePinReachesThePlanAndItsJson) {
  Graphs m = load("tiny-gpt");
  PlannerOptions o;
  o.globalBatch = 8;
  o.explain = false;
  o.optimizer = "kfac";
  o.fixed.schedule = pipeline::ScheduleKind::OneFOneB;
  o.kfacDeviceRefresh = {1, 3};
  auto r = plan(m.g1, m.g2, twoGpus(), o);
  ASSERT_TRUE(static_cast<bool>(r)) << r.error();
  const Plan *p = std::get_if<Plan>(&*r);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->knobs.pp, 2);
  ASSERT_TRUE(p->kfac.has_value());
  const KfacPlan &k = *p->kfac;
  ASSERT_EQ(k.devices.size(), 2u);
  EXPECT_EQ(k.devices[0].refreshSteps, 1);
  EXPECT_EQ(k.devices[1].refreshSteps, 3);
  EXPECT_EQ(k.refreshSteps, 3);
  EXPECT_TRUE(k.refreshPinned);
  for (const KfacLayerPlan &l : k.layers)
    EXPECT_EQ(l.refreshSteps, l.stage == 0 ? 1 : 3) << l.name;
  for (const KfacItemPlacement &it : k.devices[0].items)
    EXPECT_EQ(it.step, 0) << it.item;
  const auto doc = planToJson(*p);
  EXPECT_EQ(doc["kfac"]["refresh_steps"], 3);
  EXPECT_EQ(doc["kfac"]["devices"][0]["refresh_steps"], 1);
  EXPECT_EQ(doc["kfac"]["devices"][1]["refresh_steps"], 3);
  Plan back = planFromJson(nlohmann::json::parse(doc.dump()), "plan.json");
  ASSERT_TRUE(back.kfac.has_value());
  EXPECT_EQ(back.kfac->devices[0].refreshSteps, 1);
  EXPECT_EQ(back.kfac->layers.front().refreshSteps, 1);
  EXPECT_EQ(back.kfac->layers.back().refreshSteps, 3);
  EXPECT_EQ(planToJson(back)["kfac"].dump(), doc["kfac"].dump());

  // A list whose length no searched pp has is refused, naming the flag.
  o.kfacDeviceRefresh = {1, 2, 3};
  auto bad = plan(m.g1, m.g2, twoGpus(), o);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.error().rfind("--kfac-refresh lists 3 refresh intervals, "
                              "one per pipeline device, but no configuration "
                              "with pp=3 applies",
                              0),
            0u)
      << bad.error();
}

/// The message of the UserError planFromJson throws on `doc`, "" if none.
std::string readError(const nlohmann::json &doc) {
  return autoddl::testing::thrownMessage(
      [&] { planFromJson(doc, "plan.json"); });
}

/// Reading `doc` fails with a message containing `part`.
void expectReadError(const nlohmann::json &doc, const std::string &part) {
  const std::string error = readError(doc);
  EXPECT_NE(error.find(part), std::string::npos) << error;
}

// Plans written before per-device K have no kfac.layers[].refresh_steps or
// kfac.devices[].refresh_steps: they read as the plan's K. Bad values (0, more
// than kfac.refresh_steps) and an item outside its device's refresh are
// refused, naming the place.
TEST(Kfac, PlanJsonPerDeviceKDefaultsAndChecks) {
  Graphs m = load("tiny-gpt");
  const FixedKnobs fix = twoStages(pipeline::ScheduleKind::OneFOneB);
  const auto doc =
      nlohmann::json::parse(planToJson(planOf(m, "kfac", fix)).dump());
  const int K = doc["kfac"]["refresh_steps"];
  nlohmann::json old = doc;
  for (auto &l : old["kfac"]["layers"])
    l.erase("refresh_steps");
  for (auto &d : old["kfac"]["devices"])
    d.erase("refresh_steps");
  Plan back = planFromJson(old, "plan.json");
  ASSERT_TRUE(back.kfac.has_value());
  for (const KfacLayerPlan &l : back.kfac->layers)
    EXPECT_EQ(l.refreshSteps, K) << l.name;
  for (const KfacDevicePlan &d : back.kfac->devices)
    EXPECT_EQ(d.refreshSteps, K);

  nlohmann::json bad = doc;
  bad["kfac"]["layers"][1]["refresh_steps"] = 0;
  expectReadError(bad, "/kfac/layers/1/refresh_steps");
  expectReadError(bad, "got 0");
  bad = doc;
  bad["kfac"]["devices"][0]["refresh_steps"] = K + 1;
  expectReadError(bad, "/kfac/devices/0/refresh_steps");
  bad = doc;
  bad["kfac"]["devices"][0]["refresh_steps"] = "2";
  expectReadError(bad, "expected an integer");
  // Device 0 pinned to one step cannot hold an item of step 1.
  bad = doc;
  for (auto &l : bad["kfac"]["layers"])
    l["refresh_steps"] = 1;
  for (auto &d : bad["kfac"]["devices"])
    d["refresh_steps"] = d["steps"] = 1;
  bad["kfac"]["devices"][0]["items"][0]["step"] = 1;
  expectReadError(bad, "/kfac/devices/0/items/0/step");
  // A device's K below the steps its refresh spans.
  bad = doc;
  bad["kfac"]["devices"][0]["steps"] = 2;
  bad["kfac"]["devices"][0]["refresh_steps"] = 1;
  expectReadError(bad, "expected at least the device's steps (2)");
  // Two copies of one layer (Chimera's pipelines) on different K.
  ASSERT_GT(K, 1); // this plan's refresh spans steps: the checks below apply
  bad = doc;
  nlohmann::json copy = bad["kfac"]["layers"][0];
  copy["refresh_steps"] = int(copy.value("refresh_steps", K)) == 1 ? 2 : 1;
  bad["kfac"]["layers"].push_back(copy);
  const size_t n = bad["kfac"]["layers"].size() - 1;
  expectReadError(bad, "/kfac/layers/" + std::to_string(n));
  expectReadError(bad, "a copy of layer");
  // An item of a layer whose K is not its device's.
  bad = doc;
  const int layer = bad["kfac"]["devices"][0]["items"][0]["layer"];
  const int devK = bad["kfac"]["devices"][0].value("refresh_steps", K);
  bad["kfac"]["layers"][size_t(layer)]["refresh_steps"] = devK == 1 ? 2 : 1;
  expectReadError(bad, "/kfac/devices/0/items/0/layer");
}

// `--kfac-fill fluid` (PlannerOptions::kfacFilling) reaches the packer and
// plan.json: kfac.fill is "fluid" and reads back; an Items plan says "items"
// and a plan without the key reads as items; another value is refused,
// naming the field. With inversions priced x4 (longer than most of
// tiny-gpt's gaps on two H200s), whole items leave gap ends unused that
// split items fill: Items needs K_d = 3, 4 and fluid 2, 3 on the same pinned
// pipeline (at x1 both give 2, 3).
TEST(Kfac, FluidFillingIsRecordedAndNeedsNoLongerK) {
  Graphs m = load("tiny-gpt");
  FixedKnobs fix = twoStages(pipeline::ScheduleKind::OneFOneB);
  fix.microbatch = 1;
  cost::Cluster c = twoGpus();
  c.opTimeScales.push_back({"kfac:inversion", 4, 4});
  Plan items = planOf(m, "kfac", fix, c);
  Plan fluid = planOf(m, "kfac", fix, c, pipeline::KfacFilling::Fluid);
  ASSERT_TRUE(items.kfac.has_value() && fluid.kfac.has_value());
  ASSERT_EQ(knobsToString(items.knobs), knobsToString(fluid.knobs));
  EXPECT_EQ(items.kfac->filling, pipeline::KfacFilling::Items);
  EXPECT_EQ(fluid.kfac->filling, pipeline::KfacFilling::Fluid);
  EXPECT_LT(fluid.kfac->refreshSteps, items.kfac->refreshSteps);
  for (size_t d = 0; d < fluid.kfac->devices.size(); ++d)
    EXPECT_LE(fluid.kfac->devices[d].refreshSteps,
              items.kfac->devices[d].refreshSteps)
        << d;
  const auto doc = planToJson(fluid);
  EXPECT_EQ(doc["kfac"]["fill"], "fluid");
  EXPECT_EQ(planToJson(items)["kfac"]["fill"], "items");
  // Items split over gaps keep their pieces; whole items have none.
  size_t split = 0;
  for (const KfacItemPlacement &it : fluid.kfac->devices[0].items)
    split += it.pieces.size() > 1;
  EXPECT_GT(split, 0u);
  for (const KfacDevicePlan &d : items.kfac->devices)
    for (const KfacItemPlacement &it : d.items)
      EXPECT_TRUE(it.pieces.empty()) << it.item;
  Plan back = planFromJson(nlohmann::json::parse(doc.dump()), "plan.json");
  ASSERT_TRUE(back.kfac.has_value());
  EXPECT_EQ(back.kfac->filling, pipeline::KfacFilling::Fluid);
  EXPECT_EQ(planToJson(back)["kfac"].dump(), doc["kfac"].dump());
  nlohmann::json old = doc;
  old["kfac"].erase("fill");
  EXPECT_EQ(planFromJson(old, "plan.json").kfac->filling,
            pipeline::KfacFilling::Items);
  nlohmann::json bad = doc;
  bad["kfac"]["fill"] = "thread";
  expectReadError(bad, "/kfac/fill");
  expectReadError(bad, "expected \"items\" or \"fluid\"");
  // A piece outside its device's refresh is refused, naming it.
  bad = doc;
  for (auto &it : bad["kfac"]["devices"][0]["items"])
    if (it.contains("pieces")) {
      it["pieces"][0][0] = 99;
      break;
    }
  expectReadError(bad, "/pieces/0: expected [step, start_s, end_s]");
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

// plan --kfac-factor-decay: F is the shortest interval whose factor steps'
// forced curvature stays within the overhead budget, at most the shortest K_d.
TEST(KfacFactorInterval, ShortestWithinTheBudget) {
  KfacPlan p;
  p.refreshSteps = 20;
  p.firstOrderStepTime = 1.0;
  auto device = [](int k, double curvature) {
    KfacDevicePlan d;
    d.refreshSteps = k;
    KfacItemPlacement curv, inv;
    curv.item = "curv_A";
    curv.forced = true;
    curv.start = 2.0;
    curv.end = 2.0 + curvature;
    inv.item = "inv_A"; // not curvature: the refresh's tail, priced by K_d
    inv.forced = true;
    inv.end = 5.0;
    curv.step = inv.step = 0;
    d.items = {curv, inv};
    return d;
  };
  // A bubble's curvature item (not forced) costs the factor steps nothing.
  KfacDevicePlan bubbles = device(10, 0.5);
  bubbles.items[0].forced = false;
  p.devices = {device(10, 0.12), device(20, 0.3), bubbles};
  chooseFactorInterval(p, 0.95, 0, 0.05);
  // ceil(0.12 / 0.05) = 3, ceil(0.3 / 0.05) = 6: the slower device's 6.
  EXPECT_EQ(p.factorEvery, 6);
  EXPECT_DOUBLE_EQ(p.factorDecay, 0.95);
  // max(0.12 (1/6 - 1/10), 0.3 (1/6 - 1/20)) = 0.035 s a step.
  EXPECT_NEAR(p.factorOverhead, 0.035, 1e-12);
  // Without a budget: the shortest K_d (the average over refreshes alone).
  chooseFactorInterval(p, 0.95, 0, 0);
  EXPECT_EQ(p.factorEvery, 10);
  // A budget too small for any F < K_d is capped at it.
  chooseFactorInterval(p, 0.95, 0, 0.001);
  EXPECT_EQ(p.factorEvery, 10);
  // Pinned: kept, but at most the shortest K_d.
  chooseFactorInterval(p, 0.9, 2, 0.05);
  EXPECT_EQ(p.factorEvery, 2);
  chooseFactorInterval(p, 0.9, 11, 0.05);
  EXPECT_EQ(p.factorEvery, 10);
  // plan.json's kfac object has the fields only with a decay (plans
  // without one are written as before).
  chooseFactorInterval(p, 0.9, 4, 0.05);
  const auto j = kfacToJson(p);
  EXPECT_EQ(j["factor_every"], 4);
  EXPECT_EQ(j["factor_decay"], 0.9);
  p.factorDecay = 0;
  EXPECT_FALSE(kfacToJson(p).contains("factor_every"));
}

// plan --kfac-factor-stride S: the curvature items read 1/S of a
// micro-batch's rows, so a stride-2 plan at micro-batch 2 prices each
// curvature item as a stride-1 plan at micro-batch 1 (the same rows read, the
// same d x d x rows GEMM); the plan records S (plan.json factor_stride, absent
// at 1), and a micro-batch S does not divide is no candidate.
TEST(KfacFactorStride, CurvaturePricedOnTheSelectedRows) {
  Graphs m = load("tiny-gpt");
  auto planned = [&](int microbatch, int stride) {
    PlannerOptions o;
    o.globalBatch = 8;
    o.fixed = twoStages(pipeline::ScheduleKind::OneFOneB);
    o.fixed.dp = 1;
    o.fixed.tp = 1;
    o.fixed.microbatch = microbatch;
    o.explain = false;
    o.optimizer = "kfac";
    o.kfacFactorStride = stride;
    return plan(m.g1, m.g2, twoGpus(), o);
  };
  auto strided = planned(2, 2), whole = planned(1, 1), full = planned(2, 1);
  ASSERT_TRUE(strided && whole && full);
  const Plan *s = std::get_if<Plan>(&*strided), *w = std::get_if<Plan>(&*whole),
             *f = std::get_if<Plan>(&*full);
  ASSERT_TRUE(s && w && f && s->kfac && w->kfac && f->kfac);
  ASSERT_EQ(s->kfac->layers.size(), w->kfac->layers.size());
  for (size_t i = 0; i < s->kfac->layers.size(); ++i)
    for (int c = 0; c < 2; ++c)
      EXPECT_DOUBLE_EQ(s->kfac->layers[i].curvature[c],
                       w->kfac->layers[i].curvature[c]);
  EXPECT_EQ(s->kfac->factorStride, 2);
  EXPECT_EQ(kfacToJson(*s->kfac)["factor_stride"], 2);
  EXPECT_FALSE(kfacToJson(*f->kfac).contains("factor_stride"));
  // Micro-batch 1 pinned: stride 2 leaves no candidate.
  auto none = planned(1, 2);
  EXPECT_TRUE(!none || std::get_if<Plan>(&*none) == nullptr);
}

/// GPT-2 124M's MLP input layer (768 -> 3072, 1024 rows a sample) alone on
/// one stage, as kfacWork prices it (cand points into it: not copied).
struct MlpInputLayer {
  KfacModel model;
  Knobs knobs;
  std::vector<StageInfo> stages = std::vector<StageInfo>(1);
  KfacCandidate cand;
  MlpInputLayer() {
    KfacLinear l;
    l.name = "h.0.mlp.fc";
    l.layer = 0;
    l.in = 768;
    l.out = 3072;
    l.rowsPerInstance = 1024;
    model.linears = {l};
    stages[0].endLayer = 1;
    cand.knobs = &knobs;
    cand.stages = &stages;
  }
  MlpInputLayer(const MlpInputLayer &) = delete;
  MlpInputLayer &operator=(const MlpInputLayer &) = delete;
};

// At GPT-2 124M's MLP sizes (768 -> 3072, 8 x 1024 rows a micro-batch on
// one H200) the curvature GEMMs are compute-bound, so stride 2 about halves
// each curvature item (2 rows d^2 FLOP, rows halved; 0.508 of it: the GEMM's
// efficiency at 4096 rows 1.5 % below 8192's) and leaves the others alone.
TEST(KfacFactorStride, CurvatureHalvesAtStrideTwo) {
  MlpInputLayer m;
  m.cand.rowsScale = 8;
  const cost::Cluster c = twoGpus();
  const pipeline::KfacLayerWork whole = kfacWork(m.model, c, m.cand).at(0);
  m.cand.factorStride = 2;
  const pipeline::KfacLayerWork half = kfacWork(m.model, c, m.cand).at(0);
  for (int f = 0; f < 2; ++f) {
    EXPECT_NEAR(half.curvature[f] / whole.curvature[f], 0.5, 0.02) << f;
    EXPECT_DOUBLE_EQ(half.invert[f], whole.invert[f]);
  }
  EXPECT_DOUBLE_EQ(half.precondition, whole.precondition);
}

// The preconditioning of GPT-2 124M's MLP input layer (768 -> 3072): in a
// bf16 plan on an H200 two bf16 GEMMs, 2 (out^2 in + out in^2) = 18.1 GFLOP
// at gemm_efficiency of the bf16 peak (compute-bound: their 43.6 MB take
// 10 us at 0.9 of 4.8 TB/s), plus the gradient's rounding (6 bytes an
// element, 14.2 MB: 3.3 us, so the 4.5 us launch floor); the bf16 copies of
// both inverses are 2 (in^2 + out^2) bytes. In an fp32 plan (and where bf16
// runs no faster than fp32: a CPU cluster) the fp32 GEMMs at the fp32 peak,
// one kernel's floor, and no copies.
TEST(KfacPrecondition, Bf16GemmsInBf16Plans) {
  MlpInputLayer m;
  const KfacModel &model = m.model;
  KfacCandidate &cand = m.cand;
  const cost::Cluster c = twoGpus();
  const double in = 768, out = 3072;
  const double flops = 2 * out * out * in + 2 * out * in * in;
  const pipeline::KfacLayerWork bf16 = kfacWork(model, c, cand).at(0);
  const double gemm =
      flops / (c.peakFlops(cost::Precision::BF16) * c.gemmEfficiency);
  EXPECT_NEAR(bf16.precondition, gemm + c.kernelLaunch, 1e-12);
  EXPECT_DOUBLE_EQ(bf16.inverseCopyBytes, 2 * (in * in + out * out));
  cand.precision = cost::Precision::FP32;
  const pipeline::KfacLayerWork fp32 = kfacWork(model, c, cand).at(0);
  EXPECT_NEAR(fp32.precondition,
              flops / (c.peakFlops(cost::Precision::FP32) * c.gemmEfficiency),
              1e-12);
  EXPECT_EQ(fp32.inverseCopyBytes, 0);
  // The fp32 peak is 1/14.8 of bf16's: 338 us against 27 us.
  EXPECT_GT(fp32.precondition, 10 * bf16.precondition);
  cost::Cluster flat = c; // every precision at the fp32 rate, as a CPU's
  flat.peak[static_cast<int>(cost::Precision::BF16)] =
      flat.peak[static_cast<int>(cost::Precision::FP32)];
  cand.precision = cost::Precision::BF16;
  const pipeline::KfacLayerWork cpu = kfacWork(model, flat, cand).at(0);
  EXPECT_DOUBLE_EQ(cpu.precondition, fp32.precondition);
  EXPECT_EQ(cpu.inverseCopyBytes, 0);
}
