//===- BoxingTest.cpp - SBP transitions (docs/cost-model.md §3) -----------===//
#include "cost_model/Boxing.h"
#include "tests/unit/cost_model/ToyCluster.h"

#include <gtest/gtest.h>

namespace autoddl::cost {
namespace {

using test::toyCluster;

const Sbp S0 = Sbp::split(0), S1 = Sbp::split(1), B = Sbp::broadcast(),
          P = Sbp::partial();

class BoxingTest : public ::testing::Test {
protected:
  Cluster cluster = toyCluster(2); // 2 nodes of 8
  MeshOnCluster mesh(std::vector<int64_t> shape) {
    MeshOnCluster m;
    std::string err;
    EXPECT_TRUE(placeMesh(cluster, shape, m, err)) << err;
    return m;
  }
  double coll(Collective op, double bytes, GroupPlacement g) {
    return collectiveCost(cluster, op, bytes, g).best.time;
  }
};

TEST_F(BoxingTest, OneDimensionalTableOfTransitions) {
  MeshOnCluster m = mesh({8});
  double T = 800e6;
  // P->B is an all_reduce of the whole tensor (each rank holds a partial T).
  BoxingCost pb = ndTransition(cluster, m, T, {P}, {B});
  ASSERT_TRUE(pb.possible);
  ASSERT_EQ(pb.steps.size(), 1u);
  EXPECT_EQ(pb.steps[0].collective, Collective::AllReduce);
  EXPECT_DOUBLE_EQ(pb.time, coll(Collective::AllReduce, T, {8, 1}));
  // S->B gathers T; P->S reduce-scatters T; S(0)->S(1) exchanges each rank's
  // T/8.
  EXPECT_DOUBLE_EQ(ndTransition(cluster, m, T, {S0}, {B}).time,
                   coll(Collective::AllGather, T, {8, 1}));
  EXPECT_DOUBLE_EQ(ndTransition(cluster, m, T, {P}, {S1}).time,
                   coll(Collective::ReduceScatter, T, {8, 1}));
  BoxingCost ss = ndTransition(cluster, m, T, {S0}, {S1});
  ASSERT_EQ(ss.steps.size(), 1u);
  EXPECT_EQ(ss.steps[0].collective, Collective::AllToAll);
  EXPECT_DOUBLE_EQ(ss.steps[0].bytes, T / 8);
  // B->S keeps a slice and B->P keeps one copy (zeros elsewhere): free.
  EXPECT_EQ(ndTransition(cluster, m, T, {B}, {S0}).time, 0);
  EXPECT_EQ(ndTransition(cluster, m, T, {B}, {P}).time, 0);
  // Same layout: nothing.
  EXPECT_TRUE(ndTransition(cluster, m, T, {S1}, {S1}).steps.empty());
  // S->P has no direct collective; the cheapest route gathers, then keeps one
  // copy.
  BoxingCost sp = ndTransition(cluster, m, T, {S0}, {P});
  ASSERT_TRUE(sp.possible);
  EXPECT_DOUBLE_EQ(sp.time, coll(Collective::AllGather, T, {8, 1}));
  EXPECT_FALSE(oneAxisTransition(cluster, m, T, {S0}, 0, P).possible);
}

TEST_F(BoxingTest, OtherAxesShrinkTheTensorOnlyWhenTheySplit) {
  MeshOnCluster m = mesh({2, 8});
  double T = 800e6;
  // (S0, P) -> (S0, B): axis 1 all-reduces the half axis 0 left: T/2, in the
  // node.
  BoxingCost a = ndTransition(cluster, m, T, {S0, P}, {S0, B});
  EXPECT_DOUBLE_EQ(a.steps.at(0).bytes, T / 2);
  EXPECT_DOUBLE_EQ(a.time, coll(Collective::AllReduce, T / 2, {8, 1}));
  // (B, P) -> (B, B): axis 0 is B, the whole T is reduced in each node.
  BoxingCost b = ndTransition(cluster, m, T, {B, P}, {B, B});
  EXPECT_DOUBLE_EQ(b.steps.at(0).bytes, T);
  // (P, S1) -> (B, S1): axis 0 (one GPU per node, 2 nodes) reduces T/8.
  BoxingCost c = ndTransition(cluster, m, T, {P, S1}, {B, S1});
  EXPECT_DOUBLE_EQ(c.steps.at(0).bytes, T / 8);
  EXPECT_DOUBLE_EQ(c.time, coll(Collective::AllReduce, T / 8, {1, 2}));
}

TEST_F(BoxingTest, NdTransitionTakesTheCheapestOrder) {
  MeshOnCluster m = mesh({2, 8}); // axis 0 across 2 nodes, axis 1 inside a node
  double T = 800e6;
  // (S0, S1) -> (B, B): gathering across nodes first moves T/8 over the
  // network, then T over NVLink; the other order moves T/2 over NVLink, then T
  // over the network (docs/cost-model.md §3.3).
  double networkFirst = coll(Collective::AllGather, T / 8, {1, 2}) +
                        coll(Collective::AllGather, T, {8, 1});
  double nvlinkFirst = coll(Collective::AllGather, T / 2, {8, 1}) +
                       coll(Collective::AllGather, T, {1, 2});
  ASSERT_LT(networkFirst, nvlinkFirst);
  BoxingCost r = ndTransition(cluster, m, T, {S0, S1}, {B, B});
  ASSERT_TRUE(r.possible);
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].axis, 0);
  EXPECT_EQ(r.steps[1].axis, 1);
  EXPECT_DOUBLE_EQ(r.time, networkFirst);
}

TEST_F(BoxingTest, PartialOnBothAxesReducesInsideTheNodeFirst) {
  MeshOnCluster m = mesh({2, 8});
  double T = 800e6;
  // (P, P) -> (B, B): reduce-scatter in the node (T), all-reduce across nodes
  // on T/8, all-gather in the node: the hierarchical all-reduce spelled as
  // boxing steps; cheaper than all-reducing T across nodes then in the node.
  BoxingCost r = ndTransition(cluster, m, T, {P, P}, {B, B});
  ASSERT_TRUE(r.possible);
  double viaScatter = coll(Collective::ReduceScatter, T, {8, 1}) +
                      coll(Collective::AllReduce, T / 8, {1, 2}) +
                      coll(Collective::AllGather, T, {8, 1});
  double direct = coll(Collective::AllReduce, T, {1, 2}) +
                  coll(Collective::AllReduce, T, {8, 1});
  EXPECT_LT(viaScatter, direct);
  EXPECT_LE(r.time, viaScatter + 1e-15);
}

TEST_F(BoxingTest, SizeOneAxesAreFree) {
  MeshOnCluster m = mesh({1, 8});
  BoxingCost r = ndTransition(cluster, m, 1e6, {P, S0}, {B, S0});
  ASSERT_TRUE(r.possible);
  EXPECT_EQ(r.time, 0);
}

TEST(BoxingSearch, RefusesStateSpacesItCannotFinishQuickly) {
  Cluster c = toyCluster(32);
  MeshOnCluster m;
  std::string err;
  ASSERT_TRUE(placeMesh(c, {2, 2, 2, 2, 2, 2, 2, 2}, m, err)) << err;
  NdSbp from, to;
  for (int a = 0; a < 8; ++a) {
    from.push_back(Sbp::split(a));
    to.push_back(a % 2 ? Sbp::partial() : Sbp::broadcast());
  }
  // Per axis B, S(0), P and 8 split dims: 10 values, 10^8 states > 1e6.
  BoxingCost r = ndTransition(c, m, 1e9, from, to);
  EXPECT_FALSE(r.possible);
  EXPECT_TRUE(r.searchTooLarge);
}

TEST(SbpText, ParsesAndPrints) {
  Sbp s;
  ASSERT_TRUE(parseSbp("S(2)", s));
  EXPECT_EQ(s, Sbp::split(2));
  ASSERT_TRUE(parseSbp("S1", s));
  EXPECT_EQ(s, Sbp::split(1));
  ASSERT_TRUE(parseSbp("P", s));
  EXPECT_EQ(s, Sbp::partial());
  EXPECT_FALSE(parseSbp("X", s));
  EXPECT_FALSE(parseSbp("S()", s));
  EXPECT_EQ(ndSbpToString({Sbp::split(0), Sbp::broadcast(), Sbp::partial()}),
            "(S(0), B, P)");
}

} // namespace
} // namespace autoddl::cost
