// The graph a graph model (gcn, gat, sage) trains on: either generated with the
// model's own node count and stored entries (a degree-corrected stochastic
// block model: power-law degrees, planted communities) or read from a user's
// files (UserGraph.h). docs/runtime.md "Community graph".
//
// Generation is part of the plan-invariance contract (DESIGN §6): the graph is
// a pure function of (seed, nodes, nnz, features, classes), independent of the
// number of threads, so every rank of every plan builds the same one and keeps
// its rows.
#ifndef AUTODDL_BACKENDS_COMMON_COMMUNITYGRAPH_H
#define AUTODDL_BACKENDS_COMMON_COMMUNITYGRAPH_H

#include <cstdint>
#include <vector>

namespace autoddl::rt {

/// A graph with one label per node and features for a block of rows. The
/// adjacency is GCN-normalised, D^-1/2 (A + I) D^-1/2 (Kipf & Welling), as
/// CSR with sorted columns, self loops included. The even nodes are the
/// training nodes (their labels are in the loss), the odd ones held out
/// (their accuracy measures generalisation).
struct PlantedGraph {
  int64_t nodes = 0, features = 0, classes = 0;
  std::vector<int32_t> row_ptr; // nodes + 1
  std::vector<int32_t> col_idx; // nnz (self loops included)
  std::vector<float> values;    // nnz, normalised weights
  std::vector<int32_t> labels;  // [nodes]
  // Features of nodes [x_node0, x_node0 + x.size() / features): the rows a
  // rank trains (all of them on one rank).
  int64_t x_node0 = 0;
  std::vector<float> x;
  int64_t nnz() const { return int64_t(col_idx.size()); }
};

/// Whether node i is a training node (else held out).
constexpr bool planted_graph_trains(int64_t i) { return i % 2 == 0; }
/// The number of training nodes of a graph of `nodes` nodes.
constexpr int64_t planted_graph_training_nodes(int64_t nodes) {
  return (nodes + 1) / 2;
}
/// Labels for the loss (training nodes; -1, outside the loss, for held-out
/// ones) or, with `heldout`, for the held-out accuracy (the reverse).
std::vector<int32_t> planted_graph_split_labels(const PlantedGraph &g,
                                                bool heldout);

/// Fraction of a generated graph's edges drawn inside one community (the rest
/// join two nodes drawn independently, so a few of those fall inside too).
constexpr double kCommunityEdgeFraction = 0.7;
/// Rank exponent of the degrees: the node of weight rank k (from 0) in its
/// community has expected degree proportional to (k + k0)^-kDegreeExponent,
/// a degree distribution with tail P(d) ~ d^-(1 + 1/kDegreeExponent).
constexpr double kDegreeExponent = 0.6;
/// Features are mu[label] * kFeatureSignal / sqrt(features) + N(0, 1): the
/// distance between two class means is about kFeatureSignal * sqrt(2) noise
/// deviations whatever the width, so features alone classify a node only
/// roughly and its neighbours' help.
constexpr double kFeatureSignal = 2.0;

/// The generated graph with `nodes` nodes and `nnz` stored entries (self loops
/// included; one fewer when nnz - nodes is odd, as a symmetric adjacency has
/// an even number of off-diagonal entries). Node i's label (community) is
/// uniform over `classes`, keyed by i. Each undirected edge is a candidate e
/// of a Philox stream: with probability kCommunityEdgeFraction both ends are
/// in one community (picked by size), else each end's community is picked by
/// size independently; inside a community the end is drawn from a power law
/// over the community's members in a seeded order. The first (nnz - nodes) / 2
/// distinct pairs of the stream (no self pairs) are the edges, so the count is
/// exact. O(nnz) time and memory on `threads` threads (0: the hardware's); the
/// result does not depend on the thread count. Features are generated for rows
/// [x_node0, x_node0 + x_rows) only (community_features). Throws
/// std::invalid_argument when nnz is below nodes, above nodes^2, beyond 32-bit
/// CSR offsets, or too dense for distinct pairs to be drawn.
PlantedGraph community_graph(uint64_t seed, int64_t nodes, int64_t nnz,
                             int64_t features, int64_t classes, int64_t x_node0,
                             int64_t x_rows, int64_t threads = 0);

/// x[i - node0][f] = mu[labels[i]][f] * kFeatureSignal / sqrt(features) +
/// N(0, 1) for nodes i in [node0, node0 + rows), mu[c] a fixed N(0, 1) vector
/// per community keyed by (seed, c, f) and the noise by (seed, i, f).
std::vector<float> community_features(uint64_t seed,
                                      const std::vector<int32_t> &labels,
                                      int64_t features, int64_t node0,
                                      int64_t rows, int64_t threads = 0);

/// Fills g.row_ptr's degrees into GCN weights: values[e] of entry (i, j) =
/// 1 / sqrt(deg(i) deg(j)), deg the stored entries of a row (self loop
/// included). Shared by the generated graph and a user's.
void gcn_normalise(PlantedGraph &g, int64_t threads = 0);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_COMMUNITYGRAPH_H
