// What the CUDA kernel benches share (attention_bench.cu, conv_bench.cu):
// deterministic inputs and the timing, CUDA events around back-to-back calls.
#ifndef AUTODDL_BENCH_CUDA_BENCHTIMING_CUH
#define AUTODDL_BENCH_CUDA_BENCHTIMING_CUH

#include "backends/cuda/Runtime.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace autoddl::bench {

/// x[i] uniform in [-1, 1) from a hash of (i, seed). Not inline (a kernel
/// cannot be): include this header in one source of a binary.
__global__ void fill_uniform(rt::act_t *x, int64_t n, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = uint64_t(i) + seed * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x[i] = rt::act_t(float(z >> 40) / float(1 << 23) - 1.0f);
  }
}

inline void fill(rt::act_t *x, int64_t n, uint64_t seed) {
  fill_uniform<<<1024, 256, 0, rt::compute_stream()>>>(x, n, seed);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// How a call is timed: `warmup` calls, then `reps` groups of `iters` calls.
struct Timing {
  int warmup, iters, reps;
};

/// The median over the groups of a call's time (ms) on compute_stream().
template <class F> double median_ms(const Timing &t, F &&call) {
  cudaEvent_t start, stop;
  AUTODDL_CUDA_CHECK(cudaEventCreate(&start));
  AUTODDL_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < t.warmup; ++i)
    call();
  std::vector<double> ms;
  for (int r = 0; r < t.reps; ++r) {
    AUTODDL_CUDA_CHECK(cudaEventRecord(start, rt::compute_stream()));
    for (int i = 0; i < t.iters; ++i)
      call();
    AUTODDL_CUDA_CHECK(cudaEventRecord(stop, rt::compute_stream()));
    AUTODDL_CUDA_CHECK(cudaEventSynchronize(stop));
    float elapsed = 0;
    AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
    ms.push_back(double(elapsed) / t.iters);
  }
  std::sort(ms.begin(), ms.end());
  AUTODDL_CUDA_CHECK(cudaEventDestroy(start));
  AUTODDL_CUDA_CHECK(cudaEventDestroy(stop));
  return ms[ms.size() / 2];
}

} // namespace autoddl::bench

#endif // AUTODDL_BENCH_CUDA_BENCHTIMING_CUH
