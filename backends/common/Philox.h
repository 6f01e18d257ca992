// Philox-4x32-10, the counter-based random number generator of Salmon, Moraes,
// Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC'11), written
// from the paper's description: ten rounds of two 32x32->64 multiplies
// (constants M0, M1) whose high halves are xored with the other counter words
// and the round key; the key is bumped by the Weyl constants W0, W1 between
// rounds. Output is a pure function of (counter, key): any element of any
// stream can be computed in isolation, which is what makes parameter
// initialisation plan-invariant (docs/runtime.md).
#ifndef AUTODDL_BACKENDS_COMMON_PHILOX_H
#define AUTODDL_BACKENDS_COMMON_PHILOX_H

#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>

// The generator and the normal draw are also compiled for the GPU, where the
// CUDA program initialises its parameters (backends/cuda/kernels/Init.h).
#ifdef __CUDACC__
#define AUTODDL_HOST_DEVICE __host__ __device__
#else
#define AUTODDL_HOST_DEVICE
#endif

namespace autoddl::rt {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

AUTODDL_HOST_DEVICE inline PhiloxCounter philox4x32_10(PhiloxCounter c,
                                                       PhiloxKey k) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += W0;
      k[1] += W1;
    }
    uint64_t p0 = uint64_t(M0) * c[0];
    uint64_t p1 = uint64_t(M1) * c[2];
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

/// 64-bit FNV-1a of a name: how a parameter (or a data stream) picks its own
/// random stream.
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// The four 32-bit words for element `index` of stream `stream` under `seed`:
/// key = (seed lo, seed hi), counter = (index lo, index hi, stream lo, stream
/// hi).
AUTODDL_HOST_DEVICE inline PhiloxCounter
philox_words(uint64_t seed, uint64_t stream, uint64_t index) {
  return philox4x32_10({uint32_t(index), uint32_t(index >> 32),
                        uint32_t(stream), uint32_t(stream >> 32)},
                       {uint32_t(seed), uint32_t(seed >> 32)});
}

/// Uniform in [0, 1) from one word (exact in double).
AUTODDL_HOST_DEVICE inline double u32_to_unit(uint32_t x) {
  return x * (1.0 / 4294967296.0);
}

/// Dropout's decision for element `index` of stream `stream` under `seed`:
/// kept when its word of counter index / 4 is at least `ratio` of 2^32. Any
/// element's mask is a pure function of these, so a micro-batch split over dp
/// ranks or micro-batches, and the CPU and the GPU, drop the same elements.
AUTODDL_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t stream,
                                             uint64_t index, double ratio) {
  const PhiloxCounter w = philox_words(seed, stream, index / 4);
  return u32_to_unit(w[index % 4]) >= ratio;
}

/// The stream of one Dropout op (by name) at one training step.
inline uint64_t dropout_stream(std::string_view op, int64_t step) {
  return fnv1a64(op) ^ (uint64_t(step) * 0x9e3779b97f4a7c15ull);
}

/// One standard normal from the first two words by Box-Muller:
/// sqrt(-2 ln u1) cos(2 pi u2) with u1 in (0, 1] so the logarithm is finite.
AUTODDL_HOST_DEVICE inline double philox_normal(const PhiloxCounter &w) {
  const double u1 = (double(w[0]) + 1.0) * (1.0 / 4294967296.0);
  const double u2 = u32_to_unit(w[1]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

/// The counter a parameter element is drawn with is its row-major index in the
/// full tensor: this maps row-major position k of a block (sizes `local` at
/// `offset`, `rank` dimensions) to that index in a tensor of sizes `full`.
/// The host (Init.cpp, Slice) and the device (kernels/Init.cu) both use it.
AUTODDL_HOST_DEVICE inline uint64_t
block_global_index(int rank, const int64_t *local, const int64_t *offset,
                   const int64_t *full, int64_t k) {
  uint64_t global = 0, stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t c = k % local[d];
    k /= local[d];
    global += uint64_t(c + offset[d]) * stride;
    stride *= uint64_t(full[d]);
  }
  return global;
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_PHILOX_H
