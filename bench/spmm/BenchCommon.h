// Shared pieces of the SpMM/SDDMM benchmark: checked CUDA calls and the
// counter-based random numbers that let host and device produce the same
// operands without copying them.
#ifndef AUTODDL_BENCH_SPMM_BENCHCOMMON_H
#define AUTODDL_BENCH_SPMM_BENCHCOMMON_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime_api.h>

#define CUDA_CHECK(expr)                                                       \
  do {                                                                         \
    cudaError_t err_ = (expr);                                                 \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,       \
                   cudaGetErrorString(err_));                                  \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

namespace autoddl::bench {

/// splitmix64 of (seed, index): a stateless generator, identical on host and
/// device.
__host__ __device__ inline uint64_t mixBits(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Uniform in [-1, 1), exactly representable in fp32 (24 random bits).
__host__ __device__ inline float uniformSym(uint64_t seed, uint64_t index) {
  return float(int64_t(mixBits(seed, index) >> 40) - (int64_t(1) << 23)) *
         (1.0f / float(1 << 23));
}

/// Uniform in [0, 1) with 53 random bits.
__host__ __device__ inline double uniform01(uint64_t seed, uint64_t index) {
  return double(mixBits(seed, index) >> 11) * (1.0 / 9007199254740992.0);
}

} // namespace autoddl::bench

#endif // AUTODDL_BENCH_SPMM_BENCHCOMMON_H
