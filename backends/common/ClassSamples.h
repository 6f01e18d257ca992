// The values of the synthetic classification samples (Data.h
// synthetic_classes, docs/runtime.md "Classification samples"), as functions
// of (seed, global sample index, feature) that the host (Data.cpp) and the
// GPU (backends/cuda/kernels/Samples.cu) both call: one formula, so a CUDA
// program's samples are the CPU program's. Plain C++17 / CUDA, no state.
#ifndef AUTODDL_BACKENDS_COMMON_CLASSSAMPLES_H
#define AUTODDL_BACKENDS_COMMON_CLASSSAMPLES_H

#include "backends/common/Philox.h"

#include <cstdint>

namespace autoddl::rt {

/// A class prototype is constant over runs of kClassRun consecutive features.
constexpr int64_t kClassRun = 8;

/// The Philox streams of a sample's label, its class's prototype and its noise.
struct ClassStreams {
  uint64_t label, mu, x;
};
inline ClassStreams class_streams() {
  return {fnv1a64("data.class.label"), fnv1a64("data.class.mu"),
          fnv1a64("data.class.x")};
}

/// Global sample g's label, uniform over [0, K).
AUTODDL_HOST_DEVICE inline int32_t class_label(uint64_t seed,
                                               const ClassStreams &s,
                                               uint64_t g, int64_t K) {
  return int32_t(philox_words(seed, s.label, g)[0] % uint32_t(K));
}

/// Feature f's prototype value of class `label` (F features a sample).
AUTODDL_HOST_DEVICE inline double class_prototype(uint64_t seed,
                                                  const ClassStreams &s,
                                                  int32_t label, int64_t F,
                                                  int64_t f) {
  return philox_normal(philox_words(
      seed, s.mu, uint64_t(label) * uint64_t(F) + uint64_t(f / kClassRun)));
}

/// Feature f of global sample g: its prototype value mu plus noise * N(0, 1).
AUTODDL_HOST_DEVICE inline float class_feature(double mu, uint64_t seed,
                                               const ClassStreams &s,
                                               uint64_t g, int64_t F,
                                               int64_t f, double noise) {
  return float(mu + noise * philox_normal(philox_words(
                                seed, s.x, g * uint64_t(F) + uint64_t(f))));
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_CLASSSAMPLES_H
