// The CUDA program's adjacency bytes as the planner prices them
// (planner/AdjacencyMemory.h; docs/sparse-kernels.md "Memory").
#include "planner/AdjacencyMemory.h"

#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"

#include <gtest/gtest.h>

namespace autoddl::planner {
namespace {

/// A 16 x 16 adjacency with 64 entries (4 a row) whose windows share no
/// column (fill 1), both formats built in the hybrid variant for 8-wide
/// SpMMs, one 8-wide product through the scratch.
AdjacencyUse small(double fill = 1) {
  AdjacencyUse u;
  u.rows = u.cols = 16;
  u.nnz = 64;
  u.nodes = 16;
  u.graphNnz = 64;
  sparse::SpmmFeatures f;
  f.windowFill = fill;
  u.a = {true, false, 16, 16, 8, f};
  u.at = {true, false, 16, 16, 8, f};
  u.scratchElems = {16 * 8};
  return u;
}

TEST(AdjacencyMemory, HybridPartsByHand) {
  const AdjacencyBytes b = adjacencyBytes(small());
  // Per format: 2 windows, every entry on CUDA cores (fill 1 sends no window
  // to tensor cores), 64 value slots; work 8 units, parts of 16 blocks: one
  // part per window plus ceil(8 / 16) = 3 parts (16 B each), no split window.
  // W8 arrays: 3 * 16 + 64 * (4 + 2) entries + 4 * 17 row pointers + 32 * 2
  // slot rows = 564 B.
  EXPECT_DOUBLE_EQ(b.formats, 2 * 564.0);
  EXPECT_DOUBLE_EQ(b.positions, 2 * 4 * 64.0); // int32: 64 slots fit
  EXPECT_DOUBLE_EQ(b.values, 2 * 2 * 64.0);
  EXPECT_DOUBLE_EQ(b.workspace, 0.0);
  EXPECT_DOUBLE_EQ(b.rowPtr, 4 * 17.0);
  EXPECT_DOUBLE_EQ(b.scratch, 2 * 128.0); // one 16 x 8 bf16 product
  // Staging: 4 * 17 row pointers, (4 + 2) B an entry.
  EXPECT_DOUBLE_EQ(b.staging, 68 + 6 * 64.0);
  // Builder, on top of the arrays: the larger of the second order's sort
  // (56 B an entry, per column 32 B, per row 44 B: 4800 B, less the 564 B
  // of arrays not yet made) and the end (20 B an entry, the clustering keys,
  // per window 40 B, per CUDA-core entry 36 B: 4880 B).
  const double keys = 32 * 16 + 44 * 16;
  EXPECT_DOUBLE_EQ(b.build, 20 * 64 + keys + 40 * 2 + 36 * 64.0);
  // The peak is A^T's build: A held (564 + 256 + 128), A^T's staging, arrays
  // and builder scratch, with the row pointers.
  EXPECT_DOUBLE_EQ(b.peak, 68 + (564 + 256 + 128) + 452 + 564 + 4880.0);
}

TEST(AdjacencyMemory, AllTensorCoresAndFp32) {
  AdjacencyUse u = small();
  u.a.tensorCores = true;
  const AdjacencyBytes tc = adjacencyBytes(u);
  // A in all-tc: 64 vectors (fill 1) in 64 / 8 + 7/16 * 2 = 8.875 blocks
  // (a window's last block part-filled, 7/16 of one empty on average), 568
  // slots; each block 8 column ids, a mask, 64 bf16 values (168 B); 3 parts;
  // no CUDA-core entries.
  const double a = 3 * 16 + 8.875 * 168 + 68 + 64;
  EXPECT_DOUBLE_EQ(tc.formats, a + 564);
  EXPECT_DOUBLE_EQ(tc.values, 2 * 568 + 2 * 64.0);
  // The --fp32 build sends every window to CUDA cores whatever the variant:
  // 4-byte values.
  u.actBytes = 4;
  const AdjacencyBytes f32 = adjacencyBytes(u);
  EXPECT_DOUBLE_EQ(f32.formats, 2 * (3 * 16 + 64 * 8 + 68 + 64.0));
  EXPECT_DOUBLE_EQ(f32.values, 2 * 4 * 64.0);
}

TEST(AdjacencyMemory, FillSetsTheTensorCoreWindows) {
  // Fill 2 (two entries a vector): all-tc holds 32 vectors in 4 + 7/8
  // blocks; hybrid sends every window to tensor cores too (2 >= 1.25).
  AdjacencyUse u = small(2);
  u.a.tensorCores = true;
  const AdjacencyBytes b = adjacencyBytes(u);
  const double perFormat = 3 * 16 + 4.875 * 168 + 68 + 64;
  EXPECT_DOUBLE_EQ(b.formats, 2 * perFormat);
  EXPECT_DOUBLE_EQ(b.values, 2 * 2 * 64 * 4.875);
  // Fill 1.2: hybrid keeps every window on CUDA cores.
  EXPECT_DOUBLE_EQ(adjacencyBytes(small(1.2)).formats, 2 * 564.0);
}

TEST(AdjacencyMemory, UsesReadFromTheModel) {
  import::ImportOptions io;
  const cost::Cluster c = cost::loadCluster("dgx-h100-ndr");
  {
    // gcn: A at the first layer's forward (16 wide), A^T at the second
    // layer's backward (7 wide, then 16); the scratch grows 7 -> 16 wide.
    const ModelGraph g = import::importModel("gcn-cora", io);
    const AdjacencyUse u = adjacencyUse(g, 1, 1, 2, c, cost::Precision::BF16);
    EXPECT_EQ(u.rows, 2708);
    EXPECT_EQ(u.nnz, 13264);
    EXPECT_EQ(u.classes, 7);
    EXPECT_TRUE(u.a.built && u.at.built);
    EXPECT_EQ(u.a.spmmWidth, 16);
    EXPECT_EQ(u.at.spmmWidth, 16);
    EXPECT_EQ(u.scratchElems, (std::vector<int64_t>{2708 * 7, 2708 * 16}));
    EXPECT_FALSE(u.means);
    // The generated graph's features (cost::communityGraphFeatures; its
    // largest degree, 56, read from the generator's stream): degree skew 56
    // / (13264 / 2708) = 11.43, above the SpMM tree's 7.15, so all tensor
    // cores; fill about 1.01 (GraphFeaturesTest checks both).
    EXPECT_EQ(u.a.features.maxDegree, 56);
    EXPECT_NEAR(u.a.features.degreeSkew, 11.43, 0.01);
    EXPECT_NEAR(u.a.features.windowFill, 1.01, 0.01);
    EXPECT_TRUE(u.a.tensorCores && u.at.tensorCores);
    // dp 2: a rank's rows of A and half the entries; A^T has every node's
    // row.
    const AdjacencyUse h = adjacencyUse(g, 1, 2, 2, c, cost::Precision::BF16);
    EXPECT_EQ(h.rows, 1354);
    EXPECT_EQ(h.nnz, 6632);
    EXPECT_EQ(h.at.rows, 2708);
  }
  {
    // A dense generated graph (2000 nodes, 200,000 entries, 4 communities):
    // its largest degree is 322 (GraphFeaturesTest: read from the stream),
    // skew 322 / 100 = 3.2, under the SpMM tree's 7.15: both formats hybrid,
    // as the program decides them; fill 1.23, under hybrid's 1.25: every
    // window on CUDA cores (n entries of 4 + 2 B in the W8 arrays).
    const ModelGraph g = import::importModelText(
        R"({"template": "gcn", "config": {"num_nodes": 2000, "nnz": 200000,
            "in_features": 16, "hidden_sizes": [16], "num_classes": 4}})",
        "dense.json", "dense", io);
    int adj = -1;
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (g.tensors[t].role == TensorRole::Input && g.tensors[t].sparse)
        adj = int(t);
    const AdjacencyUse u = adjacencyUse(g, adj, 1, 2, c, cost::Precision::BF16);
    EXPECT_EQ(u.classes, 4);
    EXPECT_EQ(u.a.features.maxDegree, 322);
    EXPECT_NEAR(u.a.features.windowFill, 1.229, 0.001);
    EXPECT_FALSE(u.a.tensorCores);
    EXPECT_FALSE(u.at.tensorCores);
    EXPECT_DOUBLE_EQ(adjacencyBytes(u).values, 2 * 2 * 200000.0);
  }
  {
    // sage: the mean builds both formats in the forward and keeps 1 / deg(i)
    // in both layouts.
    const ModelGraph g = import::importModel("sage-cora", io);
    EXPECT_TRUE(adjacencyUse(g, 1, 1, 2, c, cost::Precision::BF16).means);
  }
}

} // namespace
} // namespace autoddl::planner
