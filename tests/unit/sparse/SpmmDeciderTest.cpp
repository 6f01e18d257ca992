// The W8 variant decider (backends/cuda/sparse/SpmmDecider.h): features of
// hand-counted small matrices and the fitted tree's picks on them.
#include "backends/cuda/sparse/SpmmDecider.h"

#include <gtest/gtest.h>

#include <iterator>
#include <vector>

namespace autoddl::sparse {
namespace {

struct Csr {
  int64_t rows = 0, cols = 0;
  std::vector<int32_t> rowPtr{0}, colIdx;
  void row(std::vector<int32_t> cs) {
    colIdx.insert(colIdx.end(), cs.begin(), cs.end());
    rowPtr.push_back(int32_t(colIdx.size()));
    ++rows;
  }
  SpmmFeatures features() const {
    return spmmFeatures(rows, cols, rowPtr.data(), colIdx.data());
  }
};

Csr identity(int n) {
  Csr a;
  a.cols = n;
  for (int i = 0; i < n; ++i)
    a.row({i});
  return a;
}

// Row 0 holds columns 1..15, rows 1..15 column 0 (a symmetric star).
Csr star() {
  Csr a;
  a.cols = 16;
  std::vector<int32_t> leaves;
  for (int32_t c = 1; c < 16; ++c)
    leaves.push_back(c);
  a.row(leaves);
  for (int i = 1; i < 16; ++i)
    a.row({0});
  return a;
}

TEST(SpmmDecider, FeaturesOfHandCountedMatrices) {
  SpmmFeatures f = identity(16).features();
  EXPECT_EQ(f.nnz, 16);
  EXPECT_EQ(f.maxDegree, 1);
  EXPECT_DOUBLE_EQ(f.degreeSkew, 1.0);
  EXPECT_EQ(f.naturalVectors, 16); // every entry its own column in its window
  EXPECT_DOUBLE_EQ(f.windowFill, 1.0);

  // Window 0: row 0's 15 columns and column 0 of rows 1..7: 16 vectors;
  // window 1: column 0 of rows 8..15: one vector of 8.
  f = star().features();
  EXPECT_EQ(f.nnz, 30);
  EXPECT_EQ(f.maxDegree, 15);
  EXPECT_DOUBLE_EQ(f.meanDegree, 30.0 / 16);
  EXPECT_DOUBLE_EQ(f.degreeSkew, 8.0);
  EXPECT_EQ(f.naturalVectors, 17);
  EXPECT_DOUBLE_EQ(f.windowFill, 30.0 / 17);

  // 8 rows x columns {0, 1, 2, 3} of 5, then an empty row: the last
  // (partial) window has no vector.
  Csr dense;
  dense.cols = 5;
  for (int i = 0; i < 8; ++i)
    dense.row({0, 1, 2, 3});
  dense.row({});
  f = dense.features();
  EXPECT_EQ(f.rows, 9);
  EXPECT_EQ(f.naturalVectors, 4);
  EXPECT_DOUBLE_EQ(f.windowFill, 8.0);
  EXPECT_DOUBLE_EQ(f.degreeSkew, 4.0 / (32.0 / 9));

  Csr empty;
  empty.cols = 3;
  empty.row({});
  f = empty.features();
  EXPECT_EQ(f.nnz, 0);
  EXPECT_EQ(f.naturalVectors, 0);
  EXPECT_EQ(f.degreeSkew, 0.0);
  EXPECT_EQ(f.windowFill, 0.0);
}

SpmmQuery query(bool sddmm, int64_t width, bool half = true) {
  SpmmQuery q;
  q.sddmm = sddmm;
  q.width = width;
  q.halfData = half;
  return q;
}

TEST(SpmmDecider, PicksOfTheFittedTree) {
  // SpMM: a regular matrix (skew 1) keeps its sparse windows on CUDA cores;
  // a skewed one (max / mean 8 > 7.15) goes all tensor cores, every width.
  for (int64_t n : {32, 256})
    for (bool half : {false, true}) {
      EXPECT_EQ(decideVariant(identity(64).features(), query(false, n, half)),
                SpmmVariant::Hybrid);
      EXPECT_EQ(decideVariant(star().features(), query(false, n, half)),
                SpmmVariant::TensorCore);
    }
  // SDDMM: tensor cores only at narrow K on windows of fill > 1.27.
  EXPECT_EQ(decideVariant(star().features(), query(true, 32)),
            SpmmVariant::TensorCore); // fill 1.76
  EXPECT_EQ(decideVariant(star().features(), query(true, 64)),
            SpmmVariant::Hybrid);
  EXPECT_EQ(decideVariant(identity(64).features(), query(true, 32)),
            SpmmVariant::Hybrid); // fill 1

  // What the planner assumes of a model's graph: power-law, no reuse.
  const SpmmFeatures p = powerLawFeatures(232965, 232965, 114848857);
  EXPECT_DOUBLE_EQ(p.degreeSkew, kPowerLawDegreeSkew);
  EXPECT_EQ(decideVariant(p, query(false, 256)), SpmmVariant::TensorCore);
  EXPECT_EQ(decideVariant(p, query(true, 32)), SpmmVariant::Hybrid);
}

TEST(SpmmDecider, TreesAreWellFormed) {
  auto check = [](const DeciderNode *nodes, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      const DeciderNode &n = nodes[i];
      ASSERT_GE(n.feature, -1);
      ASSERT_LE(n.feature, 5);
      if (n.feature >= 0) { // children after their parent: no cycle
        EXPECT_GT(n.left, int(i));
        EXPECT_GT(n.right, int(i));
        EXPECT_LT(size_t(n.left), count);
        EXPECT_LT(size_t(n.right), count);
      }
    }
  };
  check(kSpmmTree, std::size(kSpmmTree));
  check(kSddmmTree, std::size(kSddmmTree));
}

TEST(SpmmDecider, VariantOverride) {
  bool forced = true;
  SpmmVariant v = SpmmVariant::TensorCore;
  std::string err;
  EXPECT_TRUE(variantOverride(nullptr, forced, v, err));
  EXPECT_FALSE(forced);
  EXPECT_TRUE(variantOverride("auto", forced, v, err));
  EXPECT_FALSE(forced);
  EXPECT_TRUE(variantOverride("hybrid", forced, v, err));
  EXPECT_TRUE(forced);
  EXPECT_EQ(v, SpmmVariant::Hybrid);
  EXPECT_TRUE(variantOverride("tc", forced, v, err));
  EXPECT_EQ(v, SpmmVariant::TensorCore);
  EXPECT_FALSE(variantOverride("all-tc", forced, v, err));
  EXPECT_EQ(err, "AUTODDL_SPMM_VARIANT: expected hybrid, tc or auto, got "
                 "\"all-tc\"");
  EXPECT_STREQ(variantName(SpmmVariant::TensorCore), "all-tc");
  EXPECT_EQ(variantFillThreshold(SpmmVariant::Hybrid), kHybridFillThreshold);
}

} // namespace
} // namespace autoddl::sparse
