//===- CollectivesTest.cpp - α-β collective formulas (docs/cost-model.md §2)
#include "cost_model/Collectives.h"
#include "tests/unit/cost_model/ToyCluster.h"

#include <gtest/gtest.h>

#include <cmath>

namespace autoddl::cost {
namespace {

using test::toyCluster;

constexpr double us = 1e-6;

constexpr double S = 800e6; // the worked cases' message, bytes

/// `op` on S bytes over `group` of the toy cluster.
CollectiveCost priced(Collective op, GroupPlacement group) {
  return collectiveCost(toyCluster(), op, S, group);
}

/// Algorithm `a`'s estimate among c's candidates; a failure (and NaN times)
/// when the cost model did not price it.
CollectiveEstimate candidate(const CollectiveCost &c, Algorithm a) {
  for (const CollectiveEstimate &e : c.candidates)
    if (e.algorithm == a)
      return e;
  ADD_FAILURE() << "no candidate for algorithm " << int(a);
  CollectiveEstimate none;
  none.time = none.latency = std::nan("");
  return none;
}

TEST(BusBandwidth, FactorsOfNcclTests) {
  // nccl-tests doc/PERFORMANCE.md: all_reduce 2(n-1)/n, all_gather and
  // reduce_scatter (n-1)/n, all_to_all (n-1)/n; send_recv 1.
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::AllReduce, 8), 14.0 / 8);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::AllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::ReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::AllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::SendRecv, 2), 1.0);
}

TEST(Collectives, RingAllReduceInsideANode) {
  CollectiveCost r = priced(Collective::AllReduce, {8, 1});
  CollectiveEstimate ring = candidate(r, Algorithm::Ring);
  // Ring: overhead + 2(n-1) steps * α1 = 10 + 14 * 1 = 24 us, plus
  // 2(n-1)/n * S / B1 = 1.75 * 800e6 / 100e9 = 14 ms.
  EXPECT_NEAR(ring.latency, 24 * us, 1e-12);
  EXPECT_NEAR(ring.time, 24 * us + 14e-3, 1e-12);
  // Inside one node the ring is the best (tree moves 2S instead of 1.75S).
  EXPECT_EQ(r.best.algorithm, Algorithm::Ring);
  // busbw = S/t * 2(n-1)/n: below B1 = 100 GB/s only by the 24 us latency
  // share.
  EXPECT_NEAR(r.best.busbw, S / (24 * us + 14e-3) * 1.75, 1);
  EXPECT_LT(r.best.busbw, 100e9);
}

TEST(Collectives, RingAllReduceAcrossNodesUsesTheNodesNics) {
  CollectiveCost r = priced(Collective::AllReduce, {8, 2});
  CollectiveEstimate ring = candidate(r, Algorithm::Ring);
  // n = 16: 30 steps, 2(N-1) = 2 of them cross nodes (NCCL tuning.cc):
  // 10 + 28 * 1 + 2 * 5 = 48 us. Bandwidth: the ring crosses each node boundary
  // once per channel, so min(B1 = 100, 8 NICs * 10 = 80) GB/s: 2 * 15/16 *
  // 800e6 / 80e9 = 18.75 ms.
  EXPECT_NEAR(ring.latency, 48 * us, 1e-12);
  EXPECT_NEAR(ring.time, 48 * us + 18.75e-3, 1e-12);
}

TEST(Collectives, TreeAllReduce) {
  CollectiveCost r = priced(Collective::AllReduce, {8, 4});
  CollectiveEstimate tree = candidate(r, Algorithm::Tree);
  // Chain of g = 8 inside the node, double binary tree over N = 4 nodes:
  // 10 + 2 * ((8-1) * 1 + log2(4) * 5) = 10 + 2 * 17 = 44 us. Bandwidth: the
  // pipelined tree sends S up and S down, 2S / min(100, 80) GB/s = 20 ms.
  EXPECT_NEAR(tree.latency, 44 * us, 1e-12);
  EXPECT_NEAR(tree.time, 44 * us + 20e-3, 1e-12);
}

TEST(Collectives, HierarchicalAllReduceIsThreeCalls) {
  CollectiveCost r = priced(Collective::AllReduce, {8, 2});
  CollectiveEstimate h = candidate(r, Algorithm::Hierarchical);
  // reduce_scatter in the node: 10 + 7 * 1 us + 7/8 * S / 100e9 = 17 us + 7 ms.
  // all_reduce across 2 nodes on S/8 = 100e6, one GPU per node per group, 8
  // groups sharing 80 GB/s -> 10 GB/s each; ring: 10 + 2 * 5 us + 2 * 1/2 *
  // 100e6 / 10e9 = 20 us + 10 ms (tree: 20 us + 20 ms, so ring). all_gather in
  // the node: 17 us + 7 ms.
  EXPECT_NEAR(h.latency, (17 + 20 + 17) * us, 1e-12);
  EXPECT_NEAR(h.time, (17 + 20 + 17) * us + 24e-3, 1e-12);
}

TEST(Collectives, TreeWinsForTinyMultiNodeMessages) {
  Cluster c = toyCluster();
  // 1 KiB over 4 nodes x 8: latencies dominate. Ring: 10 + (62 - 6) * 1 + 6 * 5
  // = 96 us; tree: 44 us (above); hierarchical: 17 + 30 + 17 = 64 us (the
  // middle all_reduce over 4 nodes takes the tree: 10 + 2 * 2 * 5 = 30 us).
  CollectiveCost r = collectiveCost(c, Collective::AllReduce, 1024, {8, 4});
  EXPECT_EQ(r.best.algorithm, Algorithm::Tree);
  EXPECT_NEAR(candidate(r, Algorithm::Ring).latency, 96 * us, 1e-12);
  EXPECT_NEAR(candidate(r, Algorithm::Hierarchical).latency, 64 * us, 1e-12);
}

TEST(Collectives, RingWinsForBigMessagesWhenEveryGpuHasANic) {
  Cluster c = toyCluster();
  // 1 GB over 4 x 8: ring moves 2 * 31/32 * S at 80 GB/s = 24.2 ms;
  // hierarchical 1.75 * S / 100e9 (in-node RS + AG) + 2 * 3/4 * (S/8) / 10e9
  // = 17.5 + 18.75 ms.
  CollectiveCost r = collectiveCost(c, Collective::AllReduce, 1e9, {8, 4});
  EXPECT_EQ(r.best.algorithm, Algorithm::Ring);
}

TEST(Collectives, HierarchicalWinsForBigMessagesWhenNodesHaveOneNic) {
  Cluster c = toyCluster(4, /*nics=*/1);
  // One 10 GB/s NIC per node. Ring: min(100, 10) GB/s -> 2 * 31/32 * 1e9 / 10e9
  // = 193.75 ms. Hierarchical: in-node RS + AG 1.75e9/100e9 = 17.5 ms, across
  // nodes 8 groups share 10 GB/s (1.25 GB/s each): 2 * 3/4 * 125e6 / 1.25e9 =
  // 150 ms; 167.5 ms in all. Tree: 2S / 10e9 = 200 ms.
  CollectiveCost r = collectiveCost(c, Collective::AllReduce, 1e9, {8, 4});
  EXPECT_EQ(r.best.algorithm, Algorithm::Hierarchical);
  EXPECT_NEAR(r.best.time - r.best.latency, 167.5e-3, 1e-9);
  EXPECT_NEAR(candidate(r, Algorithm::Ring).time -
                  candidate(r, Algorithm::Ring).latency,
              193.75e-3, 1e-9);
}

TEST(Collectives, AllGatherAndReduceScatterRing) {
  Cluster c = toyCluster();
  // (n-1) steps and (n-1)/n * S: 10 + 7 * 1 us + 7/8 * 800e6 / 100e9 = 17 us +
  // 7 ms.
  for (Collective op : {Collective::AllGather, Collective::ReduceScatter}) {
    CollectiveCost r = collectiveCost(c, op, S, {8, 1});
    EXPECT_EQ(r.best.algorithm, Algorithm::Ring);
    EXPECT_NEAR(r.best.time, 17 * us + 7e-3, 1e-12);
    // busbw = algbw * 7/8 = (S / t) * 7/8.
    EXPECT_NEAR(r.best.busbw, S / (17 * us + 7e-3) * 7 / 8, 1);
  }
}

TEST(Collectives, HierarchicalAllGather) {
  CollectiveCost r = priced(Collective::AllGather, {8, 2});
  CollectiveEstimate h = candidate(r, Algorithm::Hierarchical);
  // Across nodes on S/8 = 100e6 at 10 GB/s per GPU: 10 + 5 us + 1/2 *
  // 100e6/10e9 = 15 us + 5 ms; then in the node on S: 17 us + 7 ms.
  EXPECT_NEAR(h.time, 32 * us + 12e-3, 1e-12);
  // Flat ring: 10 + 14 * 1 + 1 * 5 = 29 us, 15/16 * S / 80e9 = 9.375 ms:
  // cheaper.
  EXPECT_NEAR(candidate(r, Algorithm::Ring).time, 29 * us + 9.375e-3, 1e-12);
  EXPECT_EQ(r.best.algorithm, Algorithm::Ring);
}

TEST(Collectives, AllToAll) {
  Cluster c = toyCluster();
  // S: each rank's send buffer; S/n to each peer.
  // Inside a node: 10 + 7 * 1 us; (n-1)/n * S over NVLink: 7/8 * 800e6 / 100e9
  // = 7 ms.
  CollectiveCost in = collectiveCost(c, Collective::AllToAll, S, {8, 1});
  EXPECT_NEAR(in.best.time, 17 * us + 7e-3, 1e-12);
  // 2 nodes: per GPU 7/16 * S over NVLink (3.5 ms) while the node sends
  // 8 * 8/16 * S = 3.2 GB through 80 GB/s (40 ms): 40 ms; 10 + 7 + 8 * 5 = 57
  // us.
  CollectiveCost out = collectiveCost(c, Collective::AllToAll, S, {8, 2});
  EXPECT_NEAR(out.best.time, 57 * us + 40e-3, 1e-12);
}

TEST(Collectives, SendRecv) {
  Cluster c = toyCluster();
  double bytes = 100e6;
  // Same node: 10 + 1 us + 100e6 / 100e9 = 1 ms.
  EXPECT_NEAR(collectiveCost(c, Collective::SendRecv, bytes, {2, 1}).best.time,
              11 * us + 1e-3, 1e-12);
  // Across nodes: the GPU's share of the NICs, 80/8 = 10 GB/s: 15 us + 10 ms.
  EXPECT_NEAR(collectiveCost(c, Collective::SendRecv, bytes, {1, 2}).best.time,
              15 * us + 10e-3, 1e-12);
}

TEST(Collectives, SendRecvUsesThePointToPointBandwidth) {
  Cluster c = toyCluster();
  c.intraNode.p2pBandwidth = 200e9;
  // NCCL drives a peer with more channels than a ring step: 10 + 1 us +
  // 100e6 / 200e9 = 0.5 ms; rings keep the 100 GB/s.
  EXPECT_NEAR(collectiveCost(c, Collective::SendRecv, 100e6, {2, 1}).best.time,
              11 * us + 0.5e-3, 1e-12);
  EXPECT_NEAR(collectiveCost(c, Collective::AllGather, 800e6, {8, 1}).best.time,
              17 * us + 7e-3, 1e-12);
}

TEST(Collectives, OneRankMovesNothing) {
  Cluster c = toyCluster();
  CollectiveCost r = collectiveCost(c, Collective::AllReduce, 1e9, {1, 1});
  EXPECT_EQ(r.best.algorithm, Algorithm::None);
  EXPECT_EQ(r.best.time, 0);
}

TEST(Collectives, BiggerMessagesNeverCostLess) {
  Cluster c = toyCluster();
  for (Collective op : {Collective::AllReduce, Collective::AllGather,
                        Collective::ReduceScatter, Collective::AllToAll}) {
    double prev = 0;
    for (double S = 1024; S < 4e9; S *= 4) {
      double t = collectiveCost(c, op, S, {8, 4}).best.time;
      EXPECT_GE(t, prev) << collectiveName(op) << " at " << S;
      prev = t;
    }
  }
}

TEST(Placement, ContiguousGroups) {
  Cluster c = toyCluster();
  GroupPlacement p;
  std::string err;
  ASSERT_TRUE(contiguousGroup(c, 4, p, err));
  EXPECT_EQ(p.gpusPerNode, 4);
  EXPECT_EQ(p.nodes, 1);
  ASSERT_TRUE(contiguousGroup(c, 32, p, err));
  EXPECT_EQ(p.gpusPerNode, 8);
  EXPECT_EQ(p.nodes, 4);
  EXPECT_FALSE(contiguousGroup(c, 12, p, err)); // 12 does not fill nodes of 8
  EXPECT_NE(err.find("do not fill whole nodes"), std::string::npos);
  EXPECT_FALSE(contiguousGroup(c, 64, p, err)); // needs 8 nodes, cluster has 4
  EXPECT_NE(err.find("--nodes"), std::string::npos);
}

TEST(Placement, MeshAxesOnTheHierarchy) {
  Cluster c = toyCluster();
  GroupPlacement p;
  std::string err;
  struct Case {
    std::vector<int64_t> mesh;
    int axis, gpusPerNode, nodes;
  };
  for (const Case &k : std::vector<Case>{
           // [4, 8]: the inner axis (stride 1, size 8) fills a node; the
           // outer (stride 8) takes one GPU of each of 4 nodes.
           {{4, 8}, 1, 8, 1},
           {{4, 8}, 0, 1, 4},
           // [8, 4]: the outer axis has stride 4: 8/4 = 2 of its members per
           // node, 4 nodes.
           {{8, 4}, 0, 2, 4},
           // [2, 16]: the inner axis (16 > 8) spans 2 nodes of 8.
           {{2, 16}, 1, 8, 2}}) {
    ASSERT_TRUE(placeMeshAxis(c, k.mesh, k.axis, p, err)) << err;
    EXPECT_EQ(p.gpusPerNode, k.gpusPerNode) << k.mesh[0] << "x" << k.mesh[1];
    EXPECT_EQ(p.nodes, k.nodes) << k.mesh[0] << "x" << k.mesh[1];
  }
  // [2, 6] on nodes of 8: the outer axis has stride 6, so its group {0, 6}..{5,
  // 11} straddles nodes 0 and 1 unevenly.
  Cluster big = withNodes(c, 2);
  EXPECT_FALSE(placeMeshAxis(big, {2, 6}, 0, p, err));
  EXPECT_NE(err.find("straddles"), std::string::npos);
  // A mesh larger than the cluster.
  EXPECT_FALSE(placeMeshAxis(c, {8, 8}, 0, p, err));
}

TEST(ClusterValidation, RejectsImpossibleValues) {
  EXPECT_EQ(validateCluster(toyCluster()), "");
  Cluster c = toyCluster();
  c.intraNode.bandwidth = 0;
  EXPECT_NE(validateCluster(c).find("intra-node bandwidth"), std::string::npos);
  c = toyCluster();
  c.interNode.latency = -1;
  EXPECT_NE(validateCluster(c).find("inter-node latency"), std::string::npos);
  c = toyCluster();
  c.nicsPerNode = 0;
  EXPECT_NE(validateCluster(c).find("nic"), std::string::npos);
  c = withNodes(toyCluster(), 2000000); // 16 million GPUs
  EXPECT_NE(validateCluster(c).find("more than 10000000 gpus"),
            std::string::npos);
  c = toyCluster();
  c.hbmEfficiency = 1.5;
  EXPECT_NE(validateCluster(c).find("memory efficiency"), std::string::npos);
}

} // namespace
} // namespace autoddl::cost
