// The generated graph's features as the planner computes them
// (cost_model/GraphFeatures.h) against spmmFeatures of the graph the program
// generates (backends/common/CommunityGraph.h), block of rows and transpose
// cut as graph_shard and csr_to_device cut them.
#include "cost_model/GraphFeatures.h"

#include "backends/common/CommunityGraph.h"

#include <gtest/gtest.h>

#include <vector>

namespace autoddl::cost {
namespace {

struct Case {
  int64_t nodes, nnz, classes, dp, rank;
};

/// spmmFeatures of rank `rank`'s rows of the generated graph, and of their
/// transpose.
AdjacencyFeatures exact(const Case &c) {
  const rt::PlantedGraph g = rt::community_graph(
      kDefaultGraphSeed, c.nodes, c.nnz, 1, c.classes, 0, 0);
  const int64_t rows = c.nodes / c.dp, r0 = c.rank * rows;
  std::vector<int32_t> ptr(size_t(rows + 1)), tPtr(size_t(c.nodes + 1), 0);
  for (int64_t i = 0; i <= rows; ++i)
    ptr[size_t(i)] = g.row_ptr[size_t(r0 + i)] - g.row_ptr[size_t(r0)];
  const int32_t *col = g.col_idx.data() + g.row_ptr[size_t(r0)];
  std::vector<int32_t> tCol(size_t(ptr.back()));
  for (int32_t e = 0; e < ptr.back(); ++e)
    ++tPtr[size_t(col[e]) + 1];
  for (int64_t j = 0; j < c.nodes; ++j)
    tPtr[size_t(j + 1)] += tPtr[size_t(j)];
  std::vector<int32_t> next(tPtr.begin(), tPtr.end() - 1);
  for (int64_t i = 0; i < rows; ++i)
    for (int32_t e = ptr[size_t(i)]; e < ptr[size_t(i + 1)]; ++e)
      tCol[size_t(next[size_t(col[e])]++)] = int32_t(i);
  return {sparse::spmmFeatures(rows, c.nodes, ptr.data(), col),
          sparse::spmmFeatures(c.nodes, rows, tPtr.data(), tCol.data())};
}

void expectClose(const sparse::SpmmFeatures &est,
                 const sparse::SpmmFeatures &ex, const char *what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(est.rows, ex.rows);
  EXPECT_EQ(est.cols, ex.cols);
  // The largest degree is read from the generator's stream; only the
  // estimate of its length C (a hub of degree d moves by d |dC| / C) or a
  // hub left untracked would move it.
  EXPECT_NEAR(double(est.maxDegree), double(ex.maxDegree),
              0.005 * double(ex.maxDegree) + 1);
  // A block's entries: its hubs' exact, the other rows' expected share (a
  // block of 1/8 of the rows strays by under 1 %).
  EXPECT_NEAR(double(est.nnz), double(ex.nnz), 0.01 * double(ex.nnz));
  EXPECT_NEAR(est.degreeSkew, ex.degreeSkew, 0.01 * ex.degreeSkew);
  // Fill: E[vectors] of windows of independent random rows, exact but for
  // the binning of like degrees and the spread of one graph's windows.
  EXPECT_NEAR(est.windowFill, ex.windowFill, 0.01 * ex.windowFill);
  // The decider sees the same graph: the same pick for every query.
  for (bool sddmm : {false, true})
    for (bool half : {false, true})
      for (int64_t width : {16, 32, 64, 256}) {
        sparse::SpmmQuery q;
        q.sddmm = sddmm;
        q.halfData = half;
        q.width = width;
        EXPECT_EQ(sparse::decideVariant(est, q), sparse::decideVariant(ex, q))
            << (sddmm ? "sddmm" : "spmm") << " width " << width;
      }
}

TEST(GraphFeatures, MatchTheGeneratedGraph) {
  const Case cases[] = {
      {2708, 13264, 7, 1, 0},       // Cora-sized: skew 11.4, fill 1.01
      {50000, 2500000, 41, 1, 0},   // 41 communities, mean degree 50
      {2000, 200000, 4, 1, 0},      // dense: fill 1.23, near hybrid's 1.25
      {5000, 2000000, 3, 1, 0},     // denser: fill 1.36, skew 2.7
      {2000, 200000, 4, 2, 1},      // dp 2, the second rank's rows
      {100000, 600000, 10, 8, 5},   // dp 8: A^T's rows hold 1/8 each
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(testing::Message() << c.nodes << " nodes, nnz " << c.nnz
                                    << ", dp " << c.dp << " rank " << c.rank);
    const int64_t rows = c.nodes / c.dp;
    const AdjacencyFeatures est =
        communityGraphFeatures(c.nodes, c.nnz, c.classes, rows, c.rank * rows);
    const AdjacencyFeatures ex = exact(c);
    expectClose(est.a, ex.a, "A");
    expectClose(est.at, ex.at, "A^T");
  }
}

TEST(GraphFeatures, ExpectedLargestDegreeWithoutTheStream) {
  // Past kMostScannedCandidates the largest degree is the law's expected
  // maximum of the hubs' (normal) degrees, not this graph's: within a few of
  // the maximum's spreads (a few %: 55 for 56 on Cora-sized, 672 for 673 on
  // ogbn-arxiv-like, 3544 for 3508 on Reddit-like); the rest is the same.
  for (const Case &c : {Case{2708, 13264, 7, 1, 0},
                        Case{50000, 2500000, 41, 1, 0},
                        Case{100000, 600000, 10, 8, 5}}) {
    const int64_t rows = c.nodes / c.dp;
    const AdjacencyFeatures law =
        communityGraphFeatures(c.nodes, c.nnz, c.classes, rows, c.rank * rows,
                               kDefaultGraphSeed, 0);
    const AdjacencyFeatures read =
        communityGraphFeatures(c.nodes, c.nnz, c.classes, rows, c.rank * rows);
    for (auto [l, r] : {std::pair{law.a, read.a}, std::pair{law.at, read.at}}) {
      EXPECT_NEAR(double(l.maxDegree), double(r.maxDegree),
                  0.05 * double(r.maxDegree) + 2);
      EXPECT_NEAR(l.windowFill, r.windowFill, 0.002 * r.windowFill);
      EXPECT_NEAR(double(l.nnz), double(r.nnz), 0.05 * double(r.nnz));
    }
  }
}

TEST(GraphFeatures, SelfLoopsOnlyAndMemo) {
  // nnz = nodes: no edge, every row its self loop (skew 1, fill 1).
  const AdjacencyFeatures f = communityGraphFeatures(50, 50, 3, 50);
  EXPECT_EQ(f.a.nnz, 50);
  EXPECT_EQ(f.a.maxDegree, 1);
  EXPECT_DOUBLE_EQ(f.a.degreeSkew, 1.0);
  EXPECT_EQ(f.a.naturalVectors, 50);
  // A second call is the memoised result.
  const AdjacencyFeatures g = communityGraphFeatures(50, 50, 3, 50);
  EXPECT_EQ(g.a.naturalVectors, f.a.naturalVectors);
  // Nothing to say of an empty or malformed graph.
  EXPECT_EQ(communityGraphFeatures(0, 0, 1, 1).a.nnz, 0);
  EXPECT_EQ(communityGraphFeatures(10, 5, 1, 10).a.nnz, 0);
}

} // namespace
} // namespace autoddl::cost
