// Global-norm gradient clipping on the device (GradClip.h): a table of
// gradient ranges split into fixed chunks, one block a chunk, as ZeroSet's
// (Runtime.cu); squares in double as the CPU's grad_norm_squared.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/GradClip.h"
#include "backends/cuda/kernels/Optimizer.h" // clip_factor

#include <cmath>

namespace autoddl::rt {
namespace {
using detail::block_sum;

constexpr int kThreads = 256, kTotalThreads = 1024;

/// The range block b works on: the last with first_block <= b.
__device__ GradClip::Range range_of(const GradClip::Range *ranges,
                                    int64_t count, int64_t b) {
  int64_t lo = 0, hi = count - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (ranges[mid].first_block <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return ranges[lo];
}

/// partial[b] = the sum of g^2 over block b's chunk (0 where not counted).
__global__ void clip_partial_sums_kernel(const GradClip::Range *ranges,
                                         int64_t count, double *partial) {
  __shared__ double scratch[32];
  const int64_t b = blockIdx.x;
  const GradClip::Range r = range_of(ranges, count, b);
  const int64_t off = (b - r.first_block) * GradClip::kChunk;
  const int64_t end = min(r.n, off + GradClip::kChunk);
  double s = 0;
  if (r.counted)
    for (int64_t i = off + threadIdx.x; i < end; i += blockDim.x) {
      const double g = r.ptr[i];
      s += g * g;
    }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0)
    partial[b] = s;
}

/// partial[blocks] = the sum of partial[0, blocks), in a fixed order.
__global__ void clip_total_kernel(double *partial, int64_t blocks) {
  __shared__ double scratch[32];
  double s = 0;
  for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x)
    s += partial[b];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0)
    partial[blocks] = s;
}

/// Every range's chunk times clip_factor(sqrt(*sum), max_norm).
__global__ void clip_scale_kernel(const GradClip::Range *ranges, int64_t count,
                                  const double *sum, float max_norm) {
  const float f = clip_factor(sqrt(*sum), max_norm);
  if (f == 1.0f)
    return; // within the bound: the gradients as they are
  const int64_t b = blockIdx.x;
  const GradClip::Range r = range_of(ranges, count, b);
  const int64_t off = (b - r.first_block) * GradClip::kChunk;
  const int64_t end = min(r.n, off + GradClip::kChunk);
  for (int64_t i = off + threadIdx.x; i < end; i += blockDim.x)
    r.ptr[i] = __fmul_rn(r.ptr[i], f);
}
} // namespace

GradClip::~GradClip() {
  if (host_sum_)
    cudaFreeHost(host_sum_); // unchecked: may run as the process ends
}

void GradClip::add(float *grads, int64_t n, bool counted) {
  if (sealed_)
    cuda_fail("cudaErrorInvalidValue (GradClip::add after clip)",
              "GradClip::add", __FILE__, __LINE__);
  if (!grads || n <= 0)
    return;
  ranges_.push_back({grads, n, blocks_, counted ? 1 : 0});
  blocks_ += (n + kChunk - 1) / kChunk;
}

void GradClip::clip(float max_norm,
                    const std::function<void(double *)> &sum_ranks) {
  if (!sealed_) {
    sealed_ = true;
    if (!ranges_.empty()) {
      table_ = DeviceBuffer<Range>(int64_t(ranges_.size()));
      copy_to_device(table_.data(), ranges_.data(),
                     int64_t(ranges_.size() * sizeof(Range)));
    }
    partial_ = DeviceBuffer<double>(blocks_ + 1);
    AUTODDL_CUDA_CHECK(cudaMallocHost(&host_sum_, sizeof(double)));
    *host_sum_ = 0;
  }
  const int64_t count = int64_t(ranges_.size());
  if (blocks_ > 0) {
    clip_partial_sums_kernel<<<unsigned(blocks_), kThreads, 0,
                               compute_stream()>>>(table_.data(), count,
                                                   partial_.data());
    AUTODDL_CUDA_CHECK_LAUNCH();
  }
  // A rank with nothing counted still joins the sum, with 0.
  clip_total_kernel<<<1, kTotalThreads, 0, compute_stream()>>>(partial_.data(),
                                                               blocks_);
  AUTODDL_CUDA_CHECK_LAUNCH();
  double *total = partial_.data() + blocks_;
  sum_ranks(total);
  if (blocks_ > 0) {
    clip_scale_kernel<<<unsigned(blocks_), kThreads, 0, compute_stream()>>>(
        table_.data(), count, total, max_norm);
    AUTODDL_CUDA_CHECK_LAUNCH();
  }
  AUTODDL_CUDA_CHECK(cudaMemcpyAsync(host_sum_, total, sizeof(double),
                                     cudaMemcpyDeviceToHost, compute_stream()));
}

double GradClip::last_norm() const {
  return host_sum_ ? std::sqrt(*host_sum_) : 0.0;
}

} // namespace autoddl::rt
