//===- CollapseTest.cpp - exact eliminations before the descent ----------===//
//
// Built-in models on real cluster presets. For each mesh: the eliminations
// leave fewer descent variables than collapsed ops; the reduced objective of
// any choice of the remaining ops equals the full objective with the
// eliminated ops recovered; the descent on the reduced problem is never worse
// than the plain descent from the same start; the exact search on the reduced
// problem finds the same minimum as the plain exhaustive oracle.
//
//===----------------------------------------------------------------------===//
#include "planner/Collapse.h"
#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"
#include "planner/Descent.h"
#include "planner/Pricing.h"

#include <gtest/gtest.h>

#include <iostream>

using namespace autoddl;
using namespace autoddl::planner;

namespace {

struct Case {
  const char *model;
  int64_t seq;
  const char *cluster;
  int gpus, tp, dp, pp;
  int64_t microbatch;
  bool scalesWithBatch = true; // false: gcn (whole graph)
};

class Collapse : public ::testing::TestWithParam<Case> {};

TEST_P(Collapse, FewerVariablesSameOrBetterCostOracleAgrees) {
  const Case &k = GetParam();
  import::ImportOptions io;
  io.seq = k.seq;
  ModelGraph g1 = import::importModel(k.model, io);
  ModelGraph g2 = g1;
  if (k.scalesWithBatch) {
    io.batch = 2;
    g2 = import::importModel(k.model, io);
  }
  SearchGraph sg;
  std::string err;
  ASSERT_TRUE(buildSearchGraph(g1, g2, sg, err)) << err;
  cost::Cluster c = cost::loadCluster(k.cluster);
  if (k.gpus < c.gpusPerNode) {
    c.gpusPerNode = k.gpus;
    c = cost::withNodes(c, 1);
  } else {
    c = cost::withNodes(c, k.gpus / c.gpusPerNode);
  }
  PlannerOptions o;
  o.globalBatch = k.microbatch * k.dp * 4;
  PricingContext ctx(sg, c, o, k.tp, k.dp, k.pp, k.microbatch, 4,
                     AxisOrder::TensorInner);
  ASSERT_TRUE(ctx.valid()) << ctx.error();
  Incidence inc(sg);
  // Both objectives: time only, and with the memory term the planner adds.
  for (double lambda : {0.0, 1.0}) {
    ctx.setMemoryWeight(lambda * ctx.referenceTime() / c.hbmBytes);
    ReducedProblem rp(ctx);
    ASSERT_TRUE(rp.ok());
    const size_t ops = sg.ops.size();
    std::cout << k.model << " tp=" << k.tp << ": " << rp.live().size()
              << " descent variables of " << ops << " ops\n";
    // Chains and leaves exist in every model (norms, biases, activations).
    EXPECT_LT(rp.live().size(), ops);
    EXPECT_EQ(rp.live().size() + rp.eliminated(), ops);

    const Assignment starts[] = {pureDataParallelStart(ctx), megatronStart(ctx),
                                 Assignment(ops, 0)};
    double bestPlain = 0, bestReduced = 0;
    for (size_t i = 0; i < 3; ++i) {
      const Assignment &start = starts[i];
      // Exactness of the fold: the reduced value of the start's live choices
      // is the full objective once the eliminated ops are recovered, and no
      // more than the full objective of the start itself (recovery picks the
      // best eliminated choices for those live ones).
      Assignment rec = start;
      rp.recover(rec);
      EXPECT_NEAR(rp.value(start), ctx.objective(rec),
                  1e-9 * ctx.objective(rec));
      EXPECT_LE(ctx.objective(rec), ctx.objective(start) * (1 + 1e-12));

      DescentResult plain = coordinateDescent(ctx, inc, start);
      DescentResult reduced = reducedDescent(ctx, rp, start);
      EXPECT_DOUBLE_EQ(reduced.objective, ctx.objective(reduced.assignment));
      bestPlain =
          i == 0 ? plain.objective : std::min(bestPlain, plain.objective);
      bestReduced =
          i == 0 ? reduced.objective : std::min(bestReduced, reduced.objective);
    }
    // Over the planner's starts, the collapsed search is the same or better.
    EXPECT_LE(bestReduced, bestPlain * (1 + 1e-9))
        << "collapsed " << bestReduced << " vs plain " << bestPlain;

    // The oracle: the exact minimum is the same with and without eliminations.
    auto exactPlain = exhaustiveSearch(ctx, inc, bestPlain, 2'000'000);
    auto exactReduced = reducedExhaustive(ctx, rp, bestReduced, 20'000'000);
    ASSERT_TRUE(exactReduced.has_value());
    EXPECT_LE(exactReduced->objective, bestReduced * (1 + 1e-9));
    if (exactPlain) {
      EXPECT_NEAR(exactReduced->objective, exactPlain->objective,
                  1e-9 * exactPlain->objective);
    } else {
      std::cout << "  (plain exhaustive search over its node limit; the "
                   "reduced one finished)\n";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    BuiltinModels, Collapse,
    ::testing::Values(Case{"tiny-gpt", 0, "dgx-a100-hdr", 8, 4, 2, 1, 2},
                      Case{"tiny-llama", 0, "dgx-a100-hdr", 8, 4, 2, 1, 1},
                      Case{"tiny-bert", 0, "dgx-h100-ndr", 4, 2, 2, 1, 2},
                      Case{"gpt2", 512, "dgx-a100-hdr", 16, 8, 2, 1, 1},
                      Case{"llama-2-7b", 2048, "dgx-h100-ndr", 16, 8, 2, 1, 1},
                      Case{"mlp-mnist", 0, "dgx-a100-hdr", 8, 2, 4, 1, 8},
                      Case{"vgg16", 0, "dgx-a100-hdr", 8, 2, 4, 1, 4},
                      Case{"gcn-cora", 0, "dgx-h100-ndr", 2, 2, 1, 1, 1,
                           false}));

} // namespace
