//===- PlannerTest.cpp - the planner: collapse, signatures, search, memory ===//
//
// Real models (examples/models) on real cluster presets (examples/clusters); no
// stubs. The oracle-gap suite runs coordinate descent and the exact search on
// the same inputs and requires descent within 2% of the exact step time.
//
//===----------------------------------------------------------------------===//
#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"
#include "planner/Descent.h"
#include "planner/PlanJson.h"
#include "planner/PlanReport.h"
#include "planner/Pricing.h"
#include "planner/Runnable.h"
#include "planner/Search.h"
#include "tests/unit/ThrownMessage.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>

using namespace autoddl;
using namespace autoddl::planner;

namespace {

struct Model {
  ModelGraph g1, g2;
};

/// The same model at micro-batch 1 and 2, cached per (name, seq).
const Model &model(const std::string &name, int64_t seq = 0) {
  static std::map<std::pair<std::string, int64_t>, Model> cache;
  auto key = std::make_pair(name, seq);
  auto it = cache.find(key);
  if (it == cache.end()) {
    import::ImportOptions o;
    o.seq = seq;
    o.batch = 1;
    Model m;
    m.g1 = import::importModel(name, o);
    o.batch = 2;
    m.g2 = import::importModel(name, o);
    it = cache.emplace(key, std::move(m)).first;
  }
  return it->second;
}

/// The model's collapsed search graph (a failure recorded where it does not
/// build).
SearchGraph searchGraphOf(const Model &m) {
  SearchGraph sg;
  std::string err;
  EXPECT_TRUE(buildSearchGraph(m.g1, m.g2, sg, err)) << err;
  return sg;
}

cost::Cluster cluster(const std::string &preset, int gpus) {
  cost::Cluster c = cost::loadCluster(preset);
  if (gpus < c.gpusPerNode) {
    c.gpusPerNode = gpus;
    return cost::withNodes(c, 1);
  }
  return cost::withNodes(c, gpus / c.gpusPerNode);
}

PlanOutcome run(const std::string &name, const cost::Cluster &c, int64_t batch,
                SearchMode mode = SearchMode::CoordinateDescent,
                FixedKnobs fix = {}, int64_t seq = 0, bool explain = false) {
  PlannerOptions o;
  o.globalBatch = batch;
  o.mode = mode;
  o.fixed = fix;
  o.explain = explain;
  const Model &m = model(name, seq);
  auto r = plan(m.g1, m.g2, c, o);
  EXPECT_TRUE(static_cast<bool>(r)) << r.error();
  return *r;
}

/// Llama-2 13B's Megatron-style plan on 64 GPUs: tp 8, pp 2 (1F1B) of
/// micro-batch 1, full recomputation; dp and ZeRO left to the search.
FixedKnobs llamaPin() {
  FixedKnobs f;
  f.tp = 8;
  f.pp = 2;
  f.microbatch = 1;
  f.schedule = pipeline::ScheduleKind::OneFOneB;
  f.recompute = cost::Recompute::Full;
  return f;
}

/// A model's search graph priced on one mesh of an 8-GPU DGX A100: tp 4 (the
/// inner axis), dp 2, pp 1, 4 micro-batches of `microbatch` samples.
struct MeshOfEight {
  MeshOfEight(const std::string &name, int64_t globalBatch, int64_t microbatch)
      : m(model(name)), sg(searchGraphOf(m)), c(cluster("dgx-a100-hdr", 8)),
        o(withBatch(globalBatch)), ctx(sg, c, o, /*tp=*/4, /*dp=*/2, /*pp=*/1,
                                       microbatch, 4, AxisOrder::TensorInner) {}
  static PlannerOptions withBatch(int64_t globalBatch) {
    PlannerOptions o;
    o.globalBatch = globalBatch;
    return o;
  }
  const Model &m;
  SearchGraph sg;
  cost::Cluster c;
  PlannerOptions o;
  PricingContext ctx;
};

const Plan &asPlan(const PlanOutcome &o) {
  static Plan empty;
  if (const Plan *p = std::get_if<Plan>(&o))
    return *p;
  ADD_FAILURE() << "no plan: " << std::get<Infeasible>(o).message;
  return empty;
}

} // namespace

// --- collapsing -------------------------------------------------------------

TEST(SearchGraph, CollapsesIdenticalLayersExactly) {
  const Model &m = model("gpt2");
  SearchGraph sg = searchGraphOf(m);
  EXPECT_TRUE(sg.collapsed);
  // gpt2 has 12 identical blocks.
  EXPECT_EQ(sg.layers, 12);
  // Every model op is represented exactly once: the counts add up to the graph.
  int64_t ops = 0;
  for (const CollapsedOp &op : sg.ops)
    ops += op.count;
  EXPECT_EQ(ops, static_cast<int64_t>(m.g1.ops.size()));
  // The collapsed graph is one layer plus pre/post: far smaller than the model.
  EXPECT_LT(sg.ops.size() * 5, m.g1.ops.size());
  // Every model tensor with a consumer is one unit of some edge's weight.
  int64_t used = 0;
  std::vector<int> consumed(m.g1.tensors.size(), 0);
  for (const OpDef &op : m.g1.ops)
    for (int t : op.operands)
      consumed[t] = 1;
  for (int c : consumed)
    used += c;
  double weights = 0;
  for (const CollapsedEdge &e : sg.edges)
    weights += e.weight;
  EXPECT_EQ(weights, static_cast<double>(used));
  // Batch dims: input ids [B,T] scale along dim 0, parameters do not scale.
  for (size_t t = 0; t < m.g1.tensors.size(); ++t) {
    if (m.g1.tensors[t].role == TensorRole::Parameter) {
      EXPECT_EQ(sg.batchDim(t), -1) << m.g1.tensors[t].name;
    }
  }
}

// --- signatures and starts --------------------------------------------------

TEST(Signatures, MegatronStartIsColumnRowWithHeads) {
  MeshOfEight mesh("gpt2", /*globalBatch=*/8, /*microbatch=*/1);
  const Model &m = mesh.m;
  const SearchGraph &sg = mesh.sg;
  ASSERT_TRUE(mesh.ctx.valid()) << mesh.ctx.error();
  Assignment a = megatronStart(mesh.ctx);
  std::map<std::string, std::string> byName;
  for (size_t i = 0; i < sg.ops.size(); ++i)
    byName[m.g1.ops[sg.ops[i].op].name] = sg.ops[i].sigs[a[i]].name;
  // Megatron-LM's transformer layer (Shoeybi et al. 2019, Fig. 3): qkv and fc
  // column-parallel, attention by heads, projections row-parallel.
  EXPECT_EQ(byName["h.1.attn.qkv"], "column");
  EXPECT_EQ(byName["h.1.attn.core"], "heads");
  EXPECT_EQ(byName["h.1.attn.proj"], "row");
  EXPECT_EQ(byName["h.1.mlp.fc"], "column");
  EXPECT_EQ(byName["h.1.mlp.act"], "hidden");
  EXPECT_EQ(byName["h.1.mlp.proj"], "row");
  EXPECT_EQ(byName["h.1.ln_1"], "replicate");
}

TEST(Signatures, HeadSplitNeedsDivisibleHeads) {
  // tiny-gpt has 4 heads: tp=8 cannot split them, tp=2 can.
  const Model &m = model("tiny-gpt");
  SearchGraph sg = searchGraphOf(m);
  auto hasHeads = [&](int tp) {
    enumerateSignatures(sg, tp, 8);
    for (const CollapsedOp &op : sg.ops)
      if (m.g1.ops[op.op].kind == "attention")
        for (const Signature &s : op.sigs)
          if (s.name == "heads")
            return true;
    return false;
  };
  EXPECT_TRUE(hasHeads(2));
  EXPECT_FALSE(hasHeads(8));
}

TEST(Signatures, TensorModeOffersNoBatchOrSequenceSplit) {
  // --tp-mode tensor: the tp axis keeps only the splits generated programs run.
  const Model &m = model("gpt2");
  SearchGraph sg = searchGraphOf(m);
  auto count = [&](bool dataSplits) {
    enumerateSignatures(sg, 2, 8, dataSplits);
    int n = 0;
    for (const CollapsedOp &op : sg.ops)
      for (const Signature &s : op.sigs)
        n += s.name == "batch" || s.name == "sequence";
    return n;
  };
  EXPECT_GT(count(true), 0);
  EXPECT_EQ(count(false), 0);
  // The tensor splits stay, GPT-2's tied 50257-row table's included: the
  // programs split a parameter into exactly equal parts, or a vocabulary in
  // padded parts where the padding stays out of every other op (the table's
  // embedding, and the bias-free lm_head whose logits only the loss reads).
  auto sigsOf = [&](const std::string &name) {
    std::set<std::string> out;
    for (const CollapsedOp &op : sg.ops)
      if (m.g1.ops[op.op].name == name)
        for (const Signature &s : op.sigs)
          out.insert(s.name);
    return out;
  };
  EXPECT_TRUE(sigsOf("h.1.mlp.fc").count("column"));
  EXPECT_TRUE(sigsOf("h.1.attn.core").count("heads")); // packed, equal q/k/v
  EXPECT_TRUE(sigsOf("wte").count("vocab"));
  EXPECT_TRUE(sigsOf("lm_head").count("column"));
  // tp=5: 3072 MLP features with a bias do not divide (no padded split
  // there), the vocabulary still pads (10052 rows a rank, 10049 on the last).
  enumerateSignatures(sg, 5, 10, false);
  EXPECT_FALSE(sigsOf("h.1.mlp.fc").count("column"));
  EXPECT_TRUE(sigsOf("lm_head").count("column"));
  EXPECT_TRUE(sigsOf("wte").count("vocab"));
  enumerateSignatures(sg, 5, 10, true);
  EXPECT_TRUE(sigsOf("h.1.mlp.fc").count("column")); // any: the planner pads
}

TEST(Signatures, TensorModeSplitsATiedTableForBothReadersOrNeither) {
  // A tied 32000-row table (tp divides it): --tp-mode tensor offers its split,
  // and prices readers that disagree (split for one, whole for the other) as
  // impossible, since the programs would run both replicated; the plan splits
  // it for both (vocab-parallel embedding, column-parallel lm_head).
  const std::string path = "tests/lit/codegen/tied_gpt_v32k.json";
  PlannerOptions o;
  o.globalBatch = 16;
  o.tpDataSplits = false;
  o.fixed.tp = 2;
  o.fixed.dp = 1;
  o.explain = true;
  const Model &m = model(path, 256);
  auto r = plan(m.g1, m.g2, cluster("h200x2-nvlink", 2), o);
  ASSERT_TRUE(static_cast<bool>(r)) << r.error();
  const Plan &p = asPlan(*r);
  std::map<std::string, std::string> sig;
  for (const OpChoice &op : p.ops)
    sig[op.op] = op.signature;
  EXPECT_EQ(sig["wte"], "vocab");
  EXPECT_EQ(sig["lm_head"], "column");
  // Changing one reader alone is not a plan.
  for (const Alternative &a : p.alternatives)
    if (a.knob == "sbp:wte" || a.knob == "sbp:lm_head")
      EXPECT_NE(a.reason.find("invalid"), std::string::npos)
          << a.knob << "=" << a.value << ": " << a.reason;
}

TEST(Signatures, RowLinearGradientTransposes) {
  // Row-parallel linear: x S(last), w S(in) -> P. Backward: dX stays S(last),
  // dW stays S(in) (no tp sync), and the bias gradient is the full sum of dY.
  const Model &m = model("gpt2");
  SearchGraph sg = searchGraphOf(m);
  enumerateSignatures(sg, 4, 1);
  bool found = false;
  for (const CollapsedOp &op : sg.ops) {
    if (m.g1.ops[op.op].name != "h.1.attn.proj")
      continue;
    for (const Signature &s : op.sigs)
      if (s.name == "row") {
        found = true;
        EXPECT_EQ(s.result, cost::Sbp::partial());
        EXPECT_EQ(s.operandGrads[0], s.operands[0]);
        EXPECT_EQ(s.operandGrads[1], s.operands[1]);
        EXPECT_EQ(s.operandGrads[2], cost::Sbp::broadcast());
      }
  }
  EXPECT_TRUE(found);
}

// --- the oracle
// ---------------------------------------------------------------

struct OracleCase {
  const char *model;
  const char *cluster;
  int gpus;
  int64_t batch;
  int64_t seq;
  int tp = 0; // pinned tensor-parallel degree (0: searched)
};

class OracleGap : public ::testing::TestWithParam<OracleCase> {};

TEST_P(OracleGap, DescentWithinTwoPercentOfExact) {
  const OracleCase &oc = GetParam();
  cost::Cluster c = cluster(oc.cluster, oc.gpus);
  FixedKnobs fix;
  if (oc.tp)
    fix.tp = oc.tp;
  Plan cd = asPlan(
      run(oc.model, c, oc.batch, SearchMode::CoordinateDescent, fix, oc.seq));
  Plan ex =
      asPlan(run(oc.model, c, oc.batch, SearchMode::Exhaustive, fix, oc.seq));
  ASSERT_GT(ex.predicted.stepTime, 0);
  RecordProperty("gap",
                 std::to_string(cd.predicted.stepTime / ex.predicted.stepTime));
  std::cout << oc.model << " on " << oc.gpus << "x " << oc.cluster
            << ": cd/exact step = "
            << cd.predicted.stepTime / ex.predicted.stepTime << "\n";
  // The acceptance bound of issue 4: descent within 2% of the exact search.
  EXPECT_LE(cd.predicted.stepTime, 1.02 * ex.predicted.stepTime)
      << "cd " << knobsToString(cd.knobs) << " vs exact "
      << knobsToString(ex.knobs);
  // Both respect memory.
  EXPECT_LE(cd.predicted.peakMemory, c.hbmBytes);
  EXPECT_LE(ex.predicted.peakMemory, c.hbmBytes);
}

INSTANTIATE_TEST_SUITE_P(
    SmallModels, OracleGap,
    ::testing::Values(OracleCase{"tiny-gpt", "dgx-a100-hdr", 8, 64, 0},
                      OracleCase{"tiny-gpt", "h200x2-nvlink", 2, 16, 0},
                      OracleCase{"tiny-llama", "dgx-a100-hdr", 8, 32, 0},
                      OracleCase{"tiny-bert", "dgx-h100-ndr", 4, 32, 0},
                      OracleCase{"mlp-mnist", "dgx-a100-hdr", 8, 256, 0},
                      OracleCase{"gpt2", "dgx-a100-hdr", 16, 64, 512},
                      // One GPU per node: tensor parallelism over the network.
                      OracleCase{"gpt2", "piz-daint-p100", 8, 32, 256, 4},
                      OracleCase{"tiny-llama", "piz-daint-p100", 4, 16, 0, 2},
                      OracleCase{"tiny-bert", "dgx-a100-hdr", 8, 64, 0, 8}));

TEST(Oracle, ExhaustiveNeverAboveDescentObjective) {
  // On one mesh, the branch-and-bound minimum is <= every descent result.
  MeshOfEight mesh("tiny-llama", /*globalBatch=*/16, /*microbatch=*/2);
  PricingContext &ctx = mesh.ctx;
  ASSERT_TRUE(ctx.valid());
  Incidence inc(mesh.sg);
  for (Assignment start : {pureDataParallelStart(ctx), megatronStart(ctx),
                           Assignment(mesh.sg.ops.size(), 0)}) {
    DescentResult d = coordinateDescent(ctx, inc, start);
    auto exact = exhaustiveSearch(ctx, inc, d.objective, 50'000'000);
    ASSERT_TRUE(exact.has_value());
    EXPECT_LE(exact->objective, d.objective * (1 + 1e-9));
    // Descent's value is the objective of what it returns.
    EXPECT_DOUBLE_EQ(d.objective, ctx.objective(d.assignment));
  }
}

// --- determinism
// ----------------------------------------------------------------

TEST(Determinism, SamePlanByteForByteApartFromWallTime) {
  cost::Cluster c = cluster("dgx-a100-hdr", 32);
  auto text = [&] {
    Plan p = asPlan(run("gpt2-medium", c, 128, SearchMode::CoordinateDescent,
                        {}, 1024, /*explain=*/true));
    p.search.wallSeconds = 0;
    return planToText(p);
  };
  std::string a = text(), b = text();
  EXPECT_EQ(a, b);
  EXPECT_GT(a.size(), 1000u);
}

TEST(PlanJson, RoundTrips) {
  cost::Cluster c = cluster("dgx-a100-hdr", 16);
  Plan p =
      asPlan(run("gpt2", c, 64, SearchMode::CoordinateDescent, {}, 1024, true));
  Plan q = planFromJson(nlohmann::json::parse(planToText(p)), "plan.json");
  // Tensors too: the validator checks them against the model.
  EXPECT_EQ(planToText(p), planToText(q));
  trace::ChromeTrace t;
  std::string err;
  ASSERT_TRUE(planTrace(q, 64, t, err)) << err;
  // One compute event per F/B (and W) instruction per traced rank, at least.
  EXPECT_GT(t.events().size(), 2u * q.knobs.microbatches);
}

// --- memory safety
// ----------------------------------------------------------------

TEST(Memory, ReturnedPlansFitEveryRank) {
  struct Case {
    const char *model;
    int gpus;
    int64_t batch;
  } cases[] = {
      {"llama-2-7b", 8, 64}, {"gpt2-xl", 8, 64}, {"llama-2-13b", 16, 128}};
  for (const Case &k : cases) {
    cost::Cluster c = cluster("dgx-a100-hdr", k.gpus);
    Plan p = asPlan(run(k.model, c, k.batch));
    // With the stated margin: max(5 %, 1 GiB) below capacity.
    const double margin = std::max(0.05 * c.hbmBytes, double(1 << 30));
    EXPECT_DOUBLE_EQ(p.predicted.memoryMargin, margin);
    for (const DeviceTimes &d : p.devices)
      EXPECT_LE(d.memory + margin, c.hbmBytes) << k.model;
    EXPECT_LE(p.predicted.peakMemory + margin, c.hbmBytes) << k.model;
  }
}

// Per-stage recomputation count (Megatron's --recompute-num-layers): GPT-2
// 1.5B on one H200, one micro-batch of 16, 32 or 64 sequences of 1024,
// recompute=full. The programs keep one activation set (pp=1), so the count
// grows with the micro-batch; each plan recomputes the fewest layers that fit.
TEST(Memory, RecomputesOnlyTheLayersMemoryNeeds) {
  cost::Cluster c = cluster("h200-fitted", 1);
  const double limit =
      c.hbmBytes - std::max(0.05 * c.hbmBytes, double(1 << 30));
  auto full = [&](int64_t batch, cost::Recompute rc) {
    FixedKnobs f;
    f.microbatch = batch;
    f.recompute = rc;
    return asPlan(run("gpt2-xl", c, batch, SearchMode::CoordinateDescent, f,
                      1024));
  };
  Plan p16 = full(16, cost::Recompute::Full),
       p32 = full(32, cost::Recompute::Full),
       p64 = full(64, cost::Recompute::Full);
  ASSERT_EQ(p64.stages.size(), 1u);
  const int layers = p64.stages[0].endLayer - p64.stages[0].firstLayer;
  const int r16 = p16.stages[0].recomputeLayers,
            r32 = p32.stages[0].recomputeLayers,
            r64 = p64.stages[0].recomputeLayers;
  EXPECT_EQ(r16, 0); // fits without: nothing recomputed
  EXPECT_GT(r32, 0);
  EXPECT_GT(r64, r32);
  EXPECT_LT(r64, layers);
  for (const Plan *p : {&p16, &p32, &p64})
    EXPECT_LE(p->predicted.peakMemory, limit);
  // One layer fewer would not fit: the count is the smallest.
  const double perLayer =
      (p32.devices[0].memoryParts.activations -
       p64.devices[0].memoryParts.activations / 2) /
      double(r64 - r32) * 2; // bytes one recomputed layer saves at batch 64
  EXPECT_GT(p64.predicted.peakMemory + perLayer * 1.001, limit);
  // Time: r layers rerun their forward; none rerun = the plan without.
  Plan none16 = full(16, cost::Recompute::None);
  EXPECT_DOUBLE_EQ(p16.predicted.stepTime, none16.predicted.stepTime);
  // A layer's rerun at micro-batch 64 costs about twice its rerun at 32.
  EXPECT_NEAR(p64.devices[0].recompute / r64 / (p32.devices[0].recompute / r32),
              2.0, 0.1);
  // A fused attention stores no scores: selective saves and reruns nothing.
  Plan sel = full(16, cost::Recompute::Selective);
  EXPECT_EQ(sel.stages[0].recomputeLayers, 0);
  EXPECT_DOUBLE_EQ(sel.predicted.peakMemory, none16.predicted.peakMemory);
  EXPECT_DOUBLE_EQ(sel.predicted.stepTime, none16.predicted.stepTime);
  // plan.json carries the count; a plan without it recomputes every layer.
  nlohmann::json doc = nlohmann::json::parse(planToText(p64));
  EXPECT_EQ(doc["stages"][0]["recompute_layers"], r64);
  EXPECT_EQ(planFromJson(doc, "p.json").stages[0].recomputeLayers, r64);
  doc["stages"][0].erase("recompute_layers");
  EXPECT_EQ(planFromJson(doc, "p.json").stages[0].recomputeLayers, layers);
  doc["stages"][0]["recompute_layers"] = layers + 1;
  const std::string error =
      autoddl::testing::thrownMessage([&] { planFromJson(doc, "p.json"); });
  EXPECT_NE(error.find("/stages/0/recompute_layers"), std::string::npos)
      << "recompute_layers over the stage's layers: '" << error << "'";
}

TEST(Memory, NothingFitsIsReportedWithTheSmallestFootprint) {
  // GPT-3 175B: 175e9 parameters x 16 bytes (mixed-precision Adam, ZeRO §3)
  // = 2.8 TB of model state; 8 GPUs x 80 GB = 640 GB cannot hold it even fully
  // sharded, so no plan fits.
  cost::Cluster c = cluster("dgx-a100-hdr", 8);
  PlanOutcome o =
      run("gpt3-175b", c, 64, SearchMode::CoordinateDescent, {}, 2048);
  ASSERT_TRUE(std::holds_alternative<Infeasible>(o));
  const Infeasible &inf = std::get<Infeasible>(o);
  EXPECT_GT(inf.peakMemory, c.hbmBytes);
  EXPECT_FALSE(inf.dominant.empty());
  EXPECT_NE(inf.message.find("no plan fits"), std::string::npos);
}

TEST(Memory, SearchPicksOnlyZeroStagesTheProgramsRun) {
  // GPT 18B (Megatron-LM's Table 1 row) on 256 A100s: the free search once
  // chose dp=256 with ZeRO-2, priced with gradients sharded 256 ways, which the
  // generated programs (ZeRO-1: full gradients) would not fit. The search
  // offers only the stages the programs run (Runnable.h), and a pinned zero=2
  // is refused naming why, not priced as a plan codegen then refuses.
  const std::string gpt18b = "bench/planner/models/gpt-18b.json";
  cost::Cluster c = cluster("dgx-a100-hdr", 256);
  Plan free = asPlan(
      run(gpt18b, c, 1024, SearchMode::CoordinateDescent, {}, 2048, true));
  EXPECT_LE(free.knobs.zero, kMaxGeneratedZero) << knobsToString(free.knobs);
  for (const Alternative &a : free.alternatives)
    EXPECT_FALSE(a.knob == "zero" && std::stoi(a.value) > kMaxGeneratedZero)
        << a.value;
  FixedKnobs f;
  f.dp = 32;
  f.tp = 8;
  f.zero = 2;
  PlannerOptions o;
  o.globalBatch = 1024;
  o.fixed = f;
  const Model &m = model(gpt18b, 2048);
  auto pinned = plan(m.g1, m.g2, c, o);
  ASSERT_FALSE(static_cast<bool>(pinned));
  EXPECT_NE(pinned.error().find("zero=2: the generated programs"),
            std::string::npos)
      << pinned.error();
}

// --- pinned knobs
// -----------------------------------------------------------------

TEST(Fix, PinnedKnobsAreHonouredAndFreeSearchIsNoWorse) {
  cost::Cluster c = cluster("dgx-a100-hdr", 64);
  Plan pinned = asPlan(run("llama-2-13b", c, 256, SearchMode::CoordinateDescent,
                           llamaPin(), 2048));
  EXPECT_EQ(pinned.knobs.tp, 8);
  EXPECT_EQ(pinned.knobs.pp, 2);
  EXPECT_EQ(pinned.knobs.dp, 4); // 64 / (8 x 2)
  EXPECT_EQ(pinned.knobs.microbatch, 1);
  EXPECT_EQ(pinned.knobs.recompute, cost::Recompute::Full);
  Plan free = asPlan(
      run("llama-2-13b", c, 256, SearchMode::CoordinateDescent, {}, 2048));
  EXPECT_LE(free.predicted.stepTime, pinned.predicted.stepTime * (1 + 1e-12));
}

TEST(Fix, ImpossiblePinFailsWithAMessage) {
  cost::Cluster c = cluster("dgx-a100-hdr", 16);
  PlannerOptions o;
  o.globalBatch = 64;
  o.fixed.tp = 3; // 16 GPUs are not divisible by 3
  const Model &m = model("gpt2");
  auto r = plan(m.g1, m.g2, c, o);
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(r.error().find("tp=3"), std::string::npos) << r.error();
}

// --- the prediction's own arithmetic
// -----------------------------------------------

TEST(Prediction, ThroughputIsModelFlopsOverStepTime) {
  cost::Cluster c = cluster("dgx-a100-hdr", 16);
  Plan p =
      asPlan(run("gpt2-large", c, 64, SearchMode::CoordinateDescent, {}, 1024));
  const Model &m = model("gpt2-large", 1024);
  // Model FLOPs = 3 x forward FLOPs per sample x global batch (forward +
  // backward = 3 forward, no recomputation counted).
  const double flops = 3.0 * m.g1.forwardFlopsPerSample() * 64;
  EXPECT_NEAR(p.predicted.modelFlopsPerStep, flops, flops * 1e-12);
  EXPECT_NEAR(p.predicted.tflopsPerGpu,
              flops / p.predicted.stepTime / 16 / 1e12, 1e-9);
  EXPECT_NEAR(p.predicted.mfu, p.predicted.tflopsPerGpu * 1e12 / 312e12, 1e-12);
  EXPECT_GE(p.predicted.bubbleFraction, 0);
  EXPECT_LT(p.predicted.bubbleFraction, 1);
  // 3 x fwd FLOPs cannot run faster than the GPUs' peak.
  EXPECT_LT(p.predicted.mfu, 1.0);
}

// --- models whose shapes do not scale with the batch
// --------------------------

TEST(FixedShapes, GcnPlansItsWholeGraphAsOneMicroBatch) {
  // A gcn trains on the whole graph: the importer refuses --batch 2, so the
  // planner is given the one graph twice and finds no batch dimension.
  import::ImportOptions io;
  ModelGraph g = import::importModel("gcn-cora", io);
  cost::Cluster c = cluster("dgx-h100-ndr", 2);
  PlannerOptions o;
  o.globalBatch = 1;
  auto r = plan(g, g, c, o);
  ASSERT_TRUE(static_cast<bool>(r)) << r.error();
  const Plan &p = asPlan(*r);
  EXPECT_EQ(p.knobs.microbatch, 1);
  // One graph a step: dp, if any, splits its nodes (one micro-batch).
  EXPECT_EQ(p.knobs.dp * p.knobs.tp * p.knobs.pp, 2);
  EXPECT_EQ(p.knobs.microbatches, 1);
  // The one stage holds both (different) layers, so ops can be placed by layer.
  ASSERT_EQ(p.stages.size(), 1u);
  EXPECT_EQ(p.stages[0].firstLayer, 0);
  EXPECT_EQ(p.stages[0].endLayer, 2);
  // Model FLOPs per step: 3 x the forward FLOPs of the one graph.
  EXPECT_DOUBLE_EQ(p.predicted.modelFlopsPerStep,
                   3.0 * static_cast<double>(g.forwardFlopsPerSample()));
  // A pinned micro-batch of 2 graphs cannot be built.
  o.fixed.microbatch = 2;
  o.globalBatch = 2;
  auto bad = plan(g, g, c, o);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(bad.error().find("microbatch must be 1"), std::string::npos)
      << bad.error();
}

TEST(FixedShapes, GraphDataParallelismSplitsTheNodes) {
  // dp over a graph model's 2708 nodes: each rank computes its own rows, so
  // its compute is below the single rank's, and spmm's all-gather of the
  // features (and the reduce-scatter of their gradient) is priced.
  import::ImportOptions io;
  for (const char *name :
       {"gcn-cora", "gat-cora", "transformer_conv-cora", "sage-cora"}) {
    ModelGraph g = import::importModel(name, io);
    PlannerOptions o;
    o.globalBatch = 1;
    auto one = plan(g, g, cluster("dgx-h100-ndr", 1), o);
    ASSERT_TRUE(static_cast<bool>(one)) << one.error();
    o.fixed.dp = 2;
    o.fixed.tp = 1;
    auto r = plan(g, g, cluster("dgx-h100-ndr", 2), o);
    ASSERT_TRUE(static_cast<bool>(r)) << name << ": " << r.error();
    const Plan &p = asPlan(*r);
    EXPECT_EQ(p.knobs.dp, 2) << name;
    EXPECT_EQ(p.knobs.microbatch, 1) << name;
    EXPECT_EQ(p.knobs.microbatches, 1) << name;
    EXPECT_LT(p.predicted.compute, asPlan(*one).predicted.compute) << name;
    EXPECT_GT(p.predicted.tpComm, 0) << name; // the node gathers
    // The same model FLOPs: one graph a step.
    EXPECT_DOUBLE_EQ(p.predicted.modelFlopsPerStep,
                     asPlan(*one).predicted.modelFlopsPerStep);
    // dp must divide the nodes: 2708 = 4 x 677, not 3.
    o.fixed.dp = 3;
    auto bad = plan(g, g, cluster("dgx-h100-ndr", 3), o);
    ASSERT_FALSE(static_cast<bool>(bad));
    EXPECT_NE(bad.error().find("2708 nodes"), std::string::npos) << bad.error();
  }
}

TEST(FixedShapes, StaticBatchIsTheMicroBatch) {
  // An ONNX export with a static batch of 4 (ModelGraph::staticBatch): no
  // shape scales, every plan's micro-batch is the 4 samples, and the global
  // batch counts samples (so FLOPs stay per sample).
  import::ImportOptions io;
  io.batch = 4;
  ModelGraph g = import::importModel("tiny-mlp", io);
  g.staticBatch = 4;
  g.staticBatchInput = "features";
  PlannerOptions o;
  o.globalBatch = 16;
  auto r = plan(g, g, cluster("dgx-h100-ndr", 2), o);
  ASSERT_TRUE(static_cast<bool>(r)) << r.error();
  const Plan &p = asPlan(*r);
  EXPECT_EQ(p.knobs.microbatch, 4);
  EXPECT_EQ(p.knobs.microbatch * p.knobs.microbatches * p.knobs.dp, 16);
  EXPECT_DOUBLE_EQ(p.predicted.modelFlopsPerStep,
                   3.0 * 16 * static_cast<double>(g.forwardFlopsPerSample()));
  o.fixed.microbatch = 2;
  auto bad = plan(g, g, cluster("dgx-h100-ndr", 2), o);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(bad.error().find("input 'features' has a static batch of 4, so "
                             "microbatch must be 4"),
            std::string::npos)
      << bad.error();
}

// --- training stacks
// ------------------------------------------------------------

TEST(Stack, Megatron2021IsSlowerAndTheFreeSearchStillNoWorse) {
  // The same pinned plan priced on both stacks: unfused attention streams the
  // T x T scores and the fp32 gradient all-reduce runs after the flush, so the
  // 2021 stack cannot be faster; and on that stack too the free search never
  // prices worse than the pinned plan (issue 4, "Judged by").
  cost::Cluster c = cluster("dgx-a100-hdr", 64);
  const Model &m = model("llama-2-13b", 2048);
  auto price = [&](const std::string &stack, bool pinned) {
    PlannerOptions o;
    o.globalBatch = 256;
    o.explain = false;
    EXPECT_TRUE(applyStack(stack, o));
    if (pinned) {
      o.fixed = llamaPin();
      o.fixed.zero = 0;
    }
    auto r = plan(m.g1, m.g2, c, o);
    EXPECT_TRUE(static_cast<bool>(r)) << r.error();
    return asPlan(*r);
  };
  Plan modern = price("modern", true), old = price("megatron-2021", true);
  EXPECT_EQ(old.stack, "megatron-2021");
  EXPECT_GT(old.predicted.stepTime, modern.predicted.stepTime);
  // The attention itself (recomputation excluded, which now differs by the
  // layers each stack's memory needs recomputed).
  auto attention = [](const Plan &p) {
    const auto &t = p.predicted.opKinds.at("attention");
    return t[0] + t[1];
  };
  EXPECT_GT(attention(old), attention(modern));
  // Exposed gradient sync: all of it on the 2021 stack, in fp32.
  EXPECT_GT(old.predicted.gradSync, modern.predicted.gradSync);
  Plan free = price("megatron-2021", false);
  EXPECT_LE(free.predicted.stepTime, old.predicted.stepTime * (1 + 1e-12));
  PlannerOptions o;
  EXPECT_FALSE(applyStack("megatron-2019", o));
}

// --- the padded vocabulary
// -----------------------------------------------------

TEST(Prediction, LmHeadIsPricedAtTheVocabularyThePaddedProgramRuns) {
  // The generated GPU program runs the lm_head GEMM with the vocabulary padded
  // to a multiple of 64 (docs/codegen.md); the calibrated H200 cluster measured
  // GEMMs on GPT-2's odd 50257 at 90-120 TFLOP/s against 560-780 aligned. So
  // GPT-2 with 50257 tokens must be priced like GPT-2 with 50304 (the lm_head
  // and every other GEMM identical; only the memory-bound embedding and loss
  // read 47 columns fewer), not like the slow unaligned GEMM.
  const std::string path = ::testing::TempDir() + "/gpt2-vocab-50304.json";
  {
    std::ofstream f(path);
    f << R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
             "n_positions": 1024, "vocab_size": 50304})";
  }
  cost::Cluster c = cluster("h200-calibrated", 1);
  FixedKnobs fix;
  fix.tp = 1;
  fix.pp = 1;
  fix.microbatch = 16;
  fix.recompute = cost::Recompute::None;
  fix.zero = 0;
  auto price = [&](const std::string &name) {
    PlannerOptions o;
    o.globalBatch = 16;
    o.fixed = fix;
    o.explain = false;
    const Model &m = model(name, 1024);
    auto r = plan(m.g1, m.g2, c, o);
    EXPECT_TRUE(static_cast<bool>(r)) << r.error();
    return asPlan(*r).predicted.stepTime;
  };
  const double odd = price("gpt2"), aligned = price(path);
  EXPECT_NEAR(odd, aligned, 0.01 * aligned);
}

TEST(Stages, TwoStagesGiveTheHeavyHeadFewerLayers) {
  // GPT-2 124M on two H200s (pp=2, 1F1B): the last stage also runs the lm_head
  // (an 8192 x 768 x 50304 GEMM forward and two backward) and the loss, the
  // first only the embedding lookup; the balanced partition hands the first
  // stage more of the 12 layers (with two stages it used to be 6 + 6 only).
  cost::Cluster c = cluster("h200-calibrated", 2);
  PlannerOptions o;
  o.globalBatch = 32;
  o.explain = false;
  o.fixed.tp = 1;
  o.fixed.pp = 2;
  o.fixed.dp = 1;
  o.fixed.microbatch = 8;
  o.fixed.schedule = pipeline::ScheduleKind::OneFOneB;
  o.fixed.recompute = cost::Recompute::None;
  o.fixed.zero = 0;
  const Model &m = model("gpt2", 1024);
  auto r = plan(m.g1, m.g2, c, o);
  ASSERT_TRUE(static_cast<bool>(r)) << r.error();
  const Plan &p = asPlan(*r);
  ASSERT_EQ(p.stages.size(), 2u);
  const int first = p.stages[0].endLayer - p.stages[0].firstLayer;
  const int last = p.stages[1].endLayer - p.stages[1].firstLayer;
  EXPECT_EQ(first + last, 12);
  EXPECT_GT(first, last);
}
