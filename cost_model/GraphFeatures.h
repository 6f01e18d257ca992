//===- GraphFeatures.h - the generated graph's sparse features --------===//
//
// The features the CUDA program's variant decider reads
// (backends/cuda/sparse/SpmmDecider.h) of the graph a graph model trains when
// it is given no graph files: backends/common/CommunityGraph.h's, a pure
// function of (seed, nodes, nnz, classes). The planner prices the variant the
// decider will pick and the format's bytes from them
// (docs/sparse-kernels.md "The decider", "Memory").
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_COST_MODEL_GRAPHFEATURES_H
#define AUTODDL_COST_MODEL_GRAPHFEATURES_H

#include "backends/cuda/sparse/SpmmDecider.h"

#include <cstdint>

namespace autoddl::cost {

/// The programs' default --seed (backends/common/harness/Options.h): the plan
/// cannot know a seed given at run time, nor a user's graph files.
constexpr uint64_t kDefaultGraphSeed = 1234;

/// One dp rank's adjacency: A (its `rows` rows of the graph, all nodes as
/// columns) and A^T (all nodes as rows, its rows as columns), the two
/// matrices the program builds formats of (Sparse.cu, csr_to_device).
struct AdjacencyFeatures {
  sparse::SpmmFeatures a, at;
};

/// The most candidates communityGraphFeatures reads the largest degree from
/// (~3.5 s on 2 threads): a larger graph takes the law's expected maximum.
constexpr uint64_t kMostScannedCandidates = uint64_t(1) << 28;

/// The features of rows [node0, node0 + rows) of the generated graph of
/// `nodes` nodes, `nnz` stored entries and `classes` communities (sage's
/// mean, D^-1 A, has A's pattern: the same features). The mean degree and
/// the window fill are expected from the degree law (nodes are labelled and
/// ordered by hashes of their index, so every block of rows is alike); the
/// largest degree is read from the generator's candidate stream for the few
/// nodes that can hold it (the decider splits on the skew, and a maximum's
/// spread is wider than the margins it meets), one Philox block a candidate
/// (~0.8 s for 61 M on 2 threads, the host's), not by generating the
/// graph. A graph of more than `mostScanned` candidates, or a block of rows
/// holding none of those nodes, takes the law's expected maximum instead.
/// GraphFeatures.cpp says why the estimate holds and
/// tests/unit/cost_model/GraphFeaturesTest.cpp bounds its error. Results are
/// memoised (a plan prices many candidates of one graph).
AdjacencyFeatures
communityGraphFeatures(int64_t nodes, int64_t nnz, int64_t classes,
                       int64_t rows, int64_t node0 = 0,
                       uint64_t seed = kDefaultGraphSeed,
                       uint64_t mostScanned = kMostScannedCandidates);

} // namespace autoddl::cost

#endif // AUTODDL_COST_MODEL_GRAPHFEATURES_H
