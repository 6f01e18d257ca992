// Parameter initialisation on the GPU (Init.h).
#include "backends/common/Philox.h"
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Init.h"

#include <stdexcept>
#include <string>

namespace autoddl::rt {
namespace detail {
namespace {
constexpr int kThreads = 256;
constexpr int kMaxRank = 8;

/// A Slice in fixed arrays, passed by value to the kernel.
struct SliceDims {
  int rank;
  int64_t local[kMaxRank], offset[kMaxRank], full[kMaxRank];
};

__global__ void __launch_bounds__(kThreads)
    init_normal_kernel(float *out, int64_t n, SliceDims s, uint64_t seed,
                       uint64_t stream, double mean, double std) {
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += nth) {
    const uint64_t global =
        block_global_index(s.rank, s.local, s.offset, s.full, k);
    const double z = philox_normal(philox_words(seed, stream, global));
    // The host rounds the product and the sum separately: no fused
    // multiply-add here either.
    out[k] = float(__dadd_rn(mean, __dmul_rn(std, z)));
  }
}

__global__ void fill_kernel(float *out, int64_t n, float value) {
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += nth)
    out[k] = value;
}
} // namespace
} // namespace detail

void init_normal_on_device(float *out, const Slice &slice, uint64_t seed,
                           std::string_view name, float mean, float std) {
  const int64_t n = slice.numel();
  if (n <= 0)
    return;
  detail::SliceDims s{};
  if (slice.full.size() > size_t(detail::kMaxRank))
    throw std::invalid_argument("init_normal_on_device: rank " +
                                std::to_string(slice.full.size()) + " above " +
                                std::to_string(detail::kMaxRank));
  s.rank = int(slice.full.size());
  for (int d = 0; d < s.rank; ++d) {
    s.local[d] = slice.local[size_t(d)];
    s.offset[d] = slice.offset[size_t(d)];
    s.full[d] = slice.full[size_t(d)];
  }
  detail::init_normal_kernel<<<detail::grid_for(n, detail::kThreads),
                               detail::kThreads, 0, compute_stream()>>>(
      out, n, s, seed, fnv1a64(name), double(mean), double(std));
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void fill_on_device(float *out, int64_t n, float value) {
  if (n <= 0)
    return;
  detail::fill_kernel<<<detail::grid_for(n, detail::kThreads), detail::kThreads,
                        0, compute_stream()>>>(out, n, value);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
