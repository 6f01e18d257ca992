// Deterministic training data (see Data.h).
#include "backends/common/Data.h"

#include "backends/common/FileIo.h"
#include "backends/common/Parallel.h" // for_chunks
#include "backends/common/Philox.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace autoddl::rt {

TokenData TokenData::open(const std::string &path, int64_t vocab) {
  require_regular_file(path, "data file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path + ": cannot open data file");
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  if (in.bad())
    throw std::runtime_error(path + ": read error");
  const bool isBin =
      path.size() >= 4 && path.compare(path.size() - 4, 4, ".bin") == 0;
  std::vector<uint16_t> tokens;
  if (isBin) {
    if (bytes.size() % 2 != 0)
      throw std::runtime_error(path + ": odd byte count " +
                               std::to_string(bytes.size()) +
                               " in a uint16 token file");
    tokens.resize(bytes.size() / 2);
    for (size_t i = 0; i < tokens.size(); ++i) // little-endian on any host
      tokens[i] = uint16_t(bytes[2 * i] | (bytes[2 * i + 1] << 8));
  } else {
    tokens.assign(bytes.begin(), bytes.end());
  }
  if (tokens.size() < 2)
    throw std::runtime_error(path + ": holds " + std::to_string(tokens.size()) +
                             " tokens, need at least 2");
  TokenData d = fromTokens(std::move(tokens));
  if (vocab > 0 && d.max_token() >= vocab)
    throw std::runtime_error(
        path + ": token id " + std::to_string(d.max_token()) +
        " is outside the model's vocabulary of " + std::to_string(vocab));
  return d;
}

TokenData TokenData::fromTokens(std::vector<uint16_t> tokens) {
  if (tokens.size() < 2)
    throw std::invalid_argument("token stream needs at least 2 tokens");
  TokenData d;
  d.tokens_ = std::move(tokens);
  return d;
}

int32_t TokenData::max_token() const {
  return *std::max_element(tokens_.begin(), tokens_.end());
}

void TokenData::batch(int64_t step, int64_t B, int64_t T, int64_t b0,
                      int64_t nb, int32_t *inputs, int32_t *targets) const {
  // chunk = tokens [s*B*T, s*B*T + B*T + 1) mod N; sample b = chunk[b*T, b*T +
  // T].
  const int64_t n = size();
  const int64_t start =
      int64_t((uint64_t(step) * uint64_t(B * T)) % uint64_t(n));
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = start + (b0 + b) * T + t;
      inputs[b * T + t] = at(pos % n);
      targets[b * T + t] = at((pos + 1) % n);
    }
}

void synthetic_tokens(uint64_t seed, int64_t step, int64_t B, int64_t T,
                      int64_t V, int64_t b0, int64_t nb, int32_t *inputs,
                      int32_t *targets) {
  const uint64_t stream = fnv1a64("data.synthetic");
  for (int64_t b = 0; b < nb; ++b) {
    const uint64_t g = uint64_t(step) * uint64_t(B) + uint64_t(b0 + b);
    int64_t prev = 0;
    for (int64_t t = 0; t <= T; ++t) {
      // one Philox block per (sample, position): index = g * (T+1) + t
      const PhiloxCounter w =
          philox_words(seed, stream, g * uint64_t(T + 1) + t);
      const int64_t uniform = int64_t(w[0] % uint32_t(V));
      const bool follow = t > 0 && (w[1] & 3u) != 0; // probability 3/4
      const int64_t tok = follow ? (7 * prev + 3) % V : uniform;
      if (t < T)
        inputs[b * T + t] = int32_t(tok);
      if (t > 0)
        targets[b * T + t - 1] = int32_t(tok);
      prev = tok;
    }
  }
}

void synthetic_classes(uint64_t seed, int64_t step, int64_t B, int64_t F,
                       int64_t K, double noise, int64_t b0, int64_t nb,
                       float *x, int32_t *labels, int threads) {
  // A Philox draw and a Box-Muller normal a feature: 50-75 ns each, so a
  // batch of 8 32x32x3 images takes 1.3-1.8 ms on one thread, longer than a
  // small classifier's step on a GPU (bench/onnx/class_samples_time.cpp).
  const ClassStreams streams = class_streams();
  auto sample = [&](int64_t b) {
    const uint64_t g = uint64_t(step) * uint64_t(B) + uint64_t(b0 + b);
    const int32_t label = class_label(seed, streams, g, K);
    labels[b] = label;
    double mu = 0;
    for (int64_t f = 0; f < F; ++f) {
      // The prototype is constant over runs of kClassRun features: drawn at
      // each run's start (a small classifier's step is otherwise this loop).
      if (f % kClassRun == 0)
        mu = class_prototype(seed, streams, label, F, f);
      x[b * F + f] = class_feature(mu, seed, streams, g, F, f, noise);
    }
  };
  // A thread's start and join cost tens of microseconds, about as much as
  // 1,000 features: each thread takes at least kClassFeaturesPerThread (on
  // an H100, 4 threads of 16 features each made a small MLP's step 1.9x
  // longer; 8 of 3072 halved tiny-vgg's,
  // bench/results/onnx/2026-12-07-h100-classifiers-threaded/).
  constexpr int64_t kClassFeaturesPerThread = 2048;
  for_chunks(
      nb,
      [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b)
          sample(b);
      },
      std::max<int64_t>(1, (kClassFeaturesPerThread + F - 1) /
                               std::max<int64_t>(1, F)),
      std::max(1, threads));
}

} // namespace autoddl::rt
