// Deterministic training data: token files, synthetic tokens, synthetic
// classification samples, and a planted-community graph.
//
// The data order is part of the plan-invariance contract (DESIGN §6,
// docs/runtime.md): which tokens form global sample b of step s depends only on
// the file (or the seed), never on the plan, so a rank that holds a shard of
// the batch reads exactly its rows of the single-rank batch.
#ifndef AUTODDL_BACKENDS_COMMON_DATA_H
#define AUTODDL_BACKENDS_COMMON_DATA_H

#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::rt {

/// A token stream read whole into memory. A file whose name ends in ".bin" is
/// flat little-endian uint16 token ids (the nanoGPT/llm.c convention, no
/// header); any other file is raw bytes, each byte one token (vocabulary 256).
///
/// Batches follow llm.c's loader: step s takes the B*T+1 tokens starting at
/// offset s*B*T, wrapping modulo the number of tokens at the end of the file;
/// sample b's inputs are tokens [b*T, b*T+T) of that chunk and its targets the
/// same shifted by one.
class TokenData {
public:
  /// Throws std::runtime_error ("FILE: cause") when the file is missing,
  /// unreadable, holds fewer than 2 tokens, has an odd byte count (.bin), or
  /// holds an id >= `vocab` (when vocab > 0).
  static TokenData open(const std::string &path, int64_t vocab = 0);
  /// Tokens given directly (tests, in-memory data).
  static TokenData fromTokens(std::vector<uint16_t> tokens);

  int64_t size() const { return int64_t(tokens_.size()); }
  /// Token at stream position `pos`, wrapping modulo size().
  int32_t at(int64_t pos) const { return tokens_[size_t(pos % size())]; }
  /// Global samples [b0, b0 + nb) of step `step` for batch size B and sequence
  /// length T: inputs and targets are [nb, T] (row-major int32).
  void batch(int64_t step, int64_t B, int64_t T, int64_t b0, int64_t nb,
             int32_t *inputs, int32_t *targets) const;
  /// Largest token id in the stream (for vocabulary checks).
  int32_t max_token() const;

private:
  std::vector<uint16_t> tokens_;
};

/// Synthetic tokens keyed by (seed, global sample index g = step*B + b), for
/// runs without data. Each sample is T+1 tokens of a learnable Markov chain:
/// the first is uniform over [0, V); each next one is (7*prev + 3) mod V with
/// probability 3/4 and uniform otherwise, so a model can go well below the
/// unigram entropy ln V. Inputs are tokens [0, T), targets [1, T+1).
void synthetic_tokens(uint64_t seed, int64_t step, int64_t B, int64_t T,
                      int64_t V, int64_t b0, int64_t nb, int32_t *inputs,
                      int32_t *targets);

/// A graph with planted communities (stochastic block model) for gcn, generated
/// from a seed. Node i belongs to community labels[i] (uniform over K, keyed by
/// i); each unordered pair {i, j} is an edge with probability p_in (same
/// community) or p_out (different), keyed by the pair. Features: x[i] = signal
/// * mu[labels[i]] + N(0, 1) noise, where mu[c] is a fixed N(0, 1) vector per
/// community, so features correlate with the community and accuracy means
/// something. The adjacency is returned GCN-normalised, D^-1/2 (A + I) D^-1/2
/// (Kipf & Welling), as CSR with sorted columns. The even nodes are the
/// training nodes (their labels are in the loss), the odd ones held out (their
/// accuracy measures generalisation); labels are independent of the index, so
/// the split is a uniform half, and every block of an even number of
/// consecutive nodes (a data-parallel rank's) holds as many of each.
struct PlantedGraph {
  int64_t nodes = 0, features = 0, classes = 0;
  std::vector<int32_t> row_ptr; // nodes + 1
  std::vector<int32_t> col_idx; // nnz (self loops included)
  std::vector<float> values;    // nnz, normalised weights
  std::vector<float> x;         // [nodes, features]
  std::vector<int32_t> labels;  // [nodes]
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
PlantedGraph planted_graph(uint64_t seed, int64_t nodes, int64_t features,
                           int64_t classes, double p_in, double p_out,
                           double signal = 1.0);

/// Synthetic classification samples (mlp, vgg), keyed by (seed, global sample
/// index g = step*B + b) like synthetic_tokens, so the data is plan-invariant.
/// Sample g's label is uniform over [0, K) (a Philox draw keyed by g); its F
/// features (an image's C*H*W values, row-major) are the label's prototype
/// plus Gaussian noise: x[f] = mu[label][f / kClassRun] + noise * N(0, 1),
/// where mu[c] is a fixed N(0, 1) vector per class keyed by (seed, c). The
/// prototype is constant over runs of kClassRun consecutive features (pieces of
/// an image row), local structure a convolution and pooling keep. A model can
/// learn the prototypes, so accuracy above 1/K means something. Writes samples
/// [b0, b0 + nb): x is [nb, F], labels [nb].
constexpr int64_t kClassRun = 8;
void synthetic_classes(uint64_t seed, int64_t step, int64_t B, int64_t F,
                       int64_t K, double noise, int64_t b0, int64_t nb,
                       float *x, int32_t *labels);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_DATA_H
