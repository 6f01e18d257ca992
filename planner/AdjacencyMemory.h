//===- AdjacencyMemory.h - a graph model's adjacency on the GPU --------===//
//
// The device bytes the generated CUDA program holds for one rank's adjacency
// (backends/cuda/kernels/Sparse.cu), at the moment of their peak: one home
// for the planner's knowledge of them (docs/sparse-kernels.md "Memory").
// bench/gnn/adjacency_memory.cpp prints them for a model.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_PLANNER_ADJACENCYMEMORY_H
#define AUTODDL_PLANNER_ADJACENCYMEMORY_H

#include "backends/cuda/sparse/SpmmDecider.h"
#include "cost_model/Cluster.h"
#include "ir/import/ModelGraph.h"

#include <cstdint>
#include <vector>

namespace autoddl::planner {

/// One W8 format the program builds (A, or A^T for the backward).
struct FormatUse {
  bool built = false;
  bool tensorCores = false; // the all-tc variant (else hybrid)
  int64_t rows = 0, cols = 0;
  /// The widest SpMM on it: its workspace (fp32 sums of split windows).
  int64_t spmmWidth = 0;
  /// The matrix's features, as the decider reads them (windowFill: how many
  /// entries its windows' 8x1 vectors hold).
  sparse::SpmmFeatures features;
};

/// What the program does with one rank's adjacency: its shape, the formats
/// its ops build (the first in forward order builds A, the first in backward
/// order A^T, in the variant the decider picks for that use) and the widths
/// of the products spmm_add computes through the scratch, in backward order.
struct AdjacencyUse {
  int64_t rows = 0, cols = 0, nnz = 0; // this rank's rows of A
  // The whole graph and its communities (the model's classes), for the
  // degree law of the generated graphs (backends/common/DegreeLaw.h).
  int64_t nodes = 0, graphNnz = 0, classes = 1;
  double actBytes = 2; // act_t: 2 (bf16); 4: the --fp32 build (all CUDA cores)
  int smCount = 132;   // the GPU's SMs: how finely the builder cuts work
  FormatUse a, at;
  std::vector<int64_t> scratchElems; // rows x width of each spmm_add
  bool means = false;                // sage's D^-1 A values in both layouts
};

/// Device bytes by allocation (Sparse.cu), and the peak they reach.
struct AdjacencyBytes {
  double rowPtr = 0;    // CSR row pointers, held from setup
  double formats = 0;   // the W8 arrays of A and A^T, held once built
  double positions = 0; // the CSR-entry -> value-slot maps
  double values = 0;    // each format's value scratch
  double means = 0;     // sage's mean values in both layouts
  double workspace = 0; // spmm's fp32 sums of split windows
  double scratch = 0;   // spmm_add's product (largest, as it grows)
  double staging = 0;   // a format's CSR on the device while it builds
  double build = 0;     // the W8 builder's scratch (sorts, scans)
  /// The most held at once: while A^T builds (A held), or in later steps.
  double peak = 0;
};

AdjacencyBytes adjacencyBytes(const AdjacencyUse &u);

/// How the CUDA program uses one dp rank's adjacency (g's sparse input
/// `adj`), read from the model's ops as Sparse.cu runs them: each use builds
/// or reads A or A^T, forward uses in op order, then backward uses in reverse
/// op order; a format's variant is the decider's pick for its first use on
/// the features of dp rank 0's block of the graph the program generates
/// (cost::communityGraphFeatures). A user's graph files, given to the program
/// at run time, are unknown to the plan: it prices the generated graph.
AdjacencyUse adjacencyUse(const ModelGraph &g, int adj, int dp, double actBytes,
                          const cost::Cluster &c, cost::Precision p);

} // namespace autoddl::planner

#endif // AUTODDL_PLANNER_ADJACENCYMEMORY_H
