// Deterministic training data: token files, synthetic tokens and synthetic
// classification samples (a graph model's graph: CommunityGraph.h).
//
// The data order is part of the plan-invariance contract (DESIGN §6,
// docs/runtime.md): which tokens form global sample b of step s depends only on
// the file (or the seed), never on the plan, so a rank that holds a shard of
// the batch reads exactly its rows of the single-rank batch.
#ifndef AUTODDL_BACKENDS_COMMON_DATA_H
#define AUTODDL_BACKENDS_COMMON_DATA_H

#include "backends/common/ClassSamples.h"   // the samples' values
#include "backends/common/CommunityGraph.h" // graph models' data

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

/// Synthetic classification samples (mlp, vgg), keyed by (seed, global sample
/// index g = step*B + b) like synthetic_tokens, so the data is plan-invariant.
/// Sample g's label is uniform over [0, K) (a Philox draw keyed by g); its F
/// features (an image's C*H*W values, row-major) are the label's prototype
/// plus Gaussian noise: x[f] = mu[label][f / kClassRun] + noise * N(0, 1),
/// where mu[c] is a fixed N(0, 1) vector per class keyed by (seed, c). The
/// prototype is constant over runs of kClassRun consecutive features (pieces of
/// an image row), local structure a convolution and pooling keep. A model can
/// learn the prototypes, so accuracy above 1/K means something. Writes samples
/// [b0, b0 + nb): x is [nb, F], labels [nb]. `threads` > 1 splits the samples
/// over that many threads (the same values: each is keyed by its index). The
/// values: ClassSamples.h (the CUDA programs draw them on the GPU).
void synthetic_classes(uint64_t seed, int64_t step, int64_t B, int64_t F,
                       int64_t K, double noise, int64_t b0, int64_t nb,
                       float *x, int32_t *labels, int threads = 1);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_DATA_H
