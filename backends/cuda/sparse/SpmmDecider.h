// The W8 format variant of a sparse matrix, decided from the matrix itself
// (ParamSpMM's idea; issue 50 item 3, docs/sparse-kernels.md "The decider"):
// features computed in O(nnz + cols) from its CSR, then a small decision tree
// fitted offline on the benchmark suite (bench/spmm/fit_decider.py) and shipped
// as data (SpmmDeciderTree.h). Nothing is timed at run time.
//
// Plain header-only C++ (no CUDA): the CUDA runtime (kernels/Sparse.cu), the
// benchmark (bench/spmm, which records the features it fits from), the cost
// model (which prices the variant picked here) and the unit tests share it.
#ifndef AUTODDL_BACKENDS_CUDA_SPARSE_SPMMDECIDER_H
#define AUTODDL_BACKENDS_CUDA_SPARSE_SPMMDECIDER_H

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace autoddl::sparse {

/// The two W8 format variants (WindowFormat.h, PreprocessOptions::
/// fillThreshold): hybrid sends windows of fill < 1.25 to the CUDA cores,
/// tensor-core ("all-tc") sends every window to the tensor cores.
enum class SpmmVariant { Hybrid, TensorCore };

/// The fill threshold of the hybrid variant (the benchmark's default).
constexpr float kHybridFillThreshold = 1.25f;

inline const char *variantName(SpmmVariant v) {
  return v == SpmmVariant::Hybrid ? "hybrid" : "all-tc";
}
inline float variantFillThreshold(SpmmVariant v) {
  return v == SpmmVariant::Hybrid ? kHybridFillThreshold : 0.0f;
}

/// Features of one sparse matrix A (rows x cols; the rows are the windows' and
/// the output's, the columns index the gathered dense rows).
struct SpmmFeatures {
  int64_t rows = 0, cols = 0, nnz = 0;
  int64_t maxDegree = 0;      // stored entries of the longest row
  double meanDegree = 0;      // nnz / rows
  double degreeSkew = 0;      // maxDegree / meanDegree (1: regular; 0: empty)
  int64_t naturalVectors = 0; // distinct (window of rows 8w..8w+7, column)
  double windowFill = 0;      // nnz / naturalVectors, in [1, 8]
};

/// The features of a CSR matrix (rowPtr [rows + 1], colIdx [nnz], columns in
/// [0, cols), no duplicates within a row): one pass over the entries with a
/// per-column stamp of the last window that used it, O(nnz + cols) time and
/// O(cols) memory.
inline SpmmFeatures spmmFeatures(int64_t rows, int64_t cols,
                                 const int32_t *rowPtr, const int32_t *colIdx) {
  SpmmFeatures f;
  f.rows = rows;
  f.cols = cols;
  f.nnz = rows > 0 ? int64_t(rowPtr[rows]) - rowPtr[0] : 0;
  std::vector<int32_t> lastWindow(size_t(std::max<int64_t>(cols, 0)), -1);
  for (int64_t r = 0; r < rows; ++r) {
    f.maxDegree = std::max<int64_t>(f.maxDegree, rowPtr[r + 1] - rowPtr[r]);
    for (int32_t e = rowPtr[r]; e < rowPtr[r + 1]; ++e) {
      int32_t &w = lastWindow[size_t(colIdx[e])];
      if (w != int32_t(r / 8)) // the column's first entry in this window
        w = int32_t(r / 8), ++f.naturalVectors;
    }
  }
  if (rows > 0 && f.nnz > 0) {
    f.meanDegree = double(f.nnz) / double(rows);
    f.degreeSkew = double(f.maxDegree) / f.meanDegree;
    f.windowFill = double(f.nnz) / double(f.naturalVectors);
  }
  return f;
}

/// Features of a graph known by its nodes and stored entries alone: a
/// power-law graph with rows in random order, the degree skew of the suite's
/// smallest-skew power-law proxy (chunglu-reddit, max / mean 40.6) and no
/// window reuse (fill 1). The planner computes the generated graph's own
/// (cost_model/GraphFeatures.h); this is for a sparse op priced outside a
/// graph model's plan.
constexpr double kPowerLawDegreeSkew = 40.6;
inline SpmmFeatures powerLawFeatures(int64_t rows, int64_t cols, int64_t nnz) {
  SpmmFeatures f;
  f.rows = rows;
  f.cols = cols;
  f.nnz = nnz;
  f.naturalVectors = nnz;
  if (rows > 0 && nnz > 0) {
    f.meanDegree = double(nnz) / double(rows);
    f.degreeSkew = kPowerLawDegreeSkew;
    f.maxDegree = int64_t(f.meanDegree * f.degreeSkew);
    f.windowFill = 1.0;
  }
  return f;
}

/// One decision: the op, its data and its dense width beside the matrix's
/// features. x_l2: the dense operand (cols x width) over the GPU's L2 bytes.
struct SpmmQuery {
  bool sddmm = false;   // SDDMM (else SpMM)
  bool halfData = true; // fp16 / bf16 data (else fp32 on TF32)
  int64_t width = 0;    // N (SpMM) or K (SDDMM)
  int64_t l2Bytes = 0;  // 0: x_l2 is taken as 0
};

/// The value of decision-tree feature `index` (SpmmDeciderTree.h's order,
/// the fitting script's FEATURES).
inline double spmmTreeFeature(const SpmmFeatures &f, const SpmmQuery &q,
                              int index) {
  switch (index) {
  case 0: // half: 16-bit data
    return q.halfData ? 1.0 : 0.0;
  case 1: // width
    return double(q.width);
  case 2: // skew
    return f.degreeSkew;
  case 3: // fill
    return f.windowFill;
  case 4: // degree
    return f.meanDegree;
  case 5: // x_l2
    return q.l2Bytes > 0 ? double(f.cols) * double(q.width) *
                               (q.halfData ? 2.0 : 4.0) / double(q.l2Bytes)
                         : 0.0;
  default:
    return 0.0;
  }
}

} // namespace autoddl::sparse

#include "backends/cuda/sparse/SpmmDeciderTree.h"

namespace autoddl::sparse {

/// The fitted tree's pick. A matrix with no window below the hybrid threshold
/// has one variant only (both are the same format): hybrid.
inline SpmmVariant decideVariant(const SpmmFeatures &f, const SpmmQuery &q) {
  const DeciderNode *nodes = q.sddmm ? kSddmmTree : kSpmmTree;
  int i = 0;
  while (nodes[i].feature >= 0)
    i = spmmTreeFeature(f, q, nodes[i].feature) <= nodes[i].threshold
            ? nodes[i].left
            : nodes[i].right;
  return nodes[i].tensorCores ? SpmmVariant::TensorCore : SpmmVariant::Hybrid;
}

/// AUTODDL_SPMM_VARIANT: "hybrid" or "tc" force a variant (benchmarks, A/B
/// runs); unset, empty or "auto": the decider. Anything else is an error the
/// caller reports (returns false with `error` set).
inline bool variantOverride(const char *env, bool &forced, SpmmVariant &v,
                            std::string &error) {
  forced = false;
  if (!env || !*env || !std::strcmp(env, "auto"))
    return true;
  if (!std::strcmp(env, "hybrid") || !std::strcmp(env, "tc")) {
    forced = true;
    v = env[0] == 'h' ? SpmmVariant::Hybrid : SpmmVariant::TensorCore;
    return true;
  }
  error = std::string("AUTODDL_SPMM_VARIANT: expected hybrid, tc or auto, "
                      "got \"") +
          env + "\"";
  return false;
}

} // namespace autoddl::sparse

#endif // AUTODDL_BACKENDS_CUDA_SPARSE_SPMMDECIDER_H
