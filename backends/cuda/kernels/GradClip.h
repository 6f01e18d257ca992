// Global-norm gradient clipping on the device (torch.nn.utils.clip_grad_norm_,
// --grad-clip): the squares of the gradients a rank counts summed in a fixed
// order, the caller's sum over the ranks, and every gradient a rank steps
// scaled by clip_factor, the norm and the factor never leaving the device (no
// host synchronisation: the step's end reads the norm).
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_GRADCLIP_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_GRADCLIP_H

#include "backends/cuda/Runtime.h"

#include <functional>
#include <vector>

namespace autoddl::rt {

/// The gradient ranges of a program's clipping, fixed after setup (the
/// buffers never move). add() them, then clip() each step.
class GradClip {
public:
  GradClip() = default;
  GradClip(const GradClip &) = delete;
  GradClip &operator=(const GradClip &) = delete;
  ~GradClip();

  /// grads[n] is scaled by clip(); its squares are summed when `counted`.
  void add(float *grads, int64_t n, bool counted);
  /// On compute_stream(): s = the sum over the counted ranges of g^2 (double;
  /// chunk by chunk of kChunk floats in add() order, each chunk by one block
  /// in a fixed tree: the same bits on any device), `sum_ranks(s)` (the
  /// caller's all-reduce of the device scalar over the ranks, enqueued on
  /// compute_stream()), then every range times clip_factor(sqrt(s),
  /// max_norm), read on the device. The first call uploads the table
  /// (synchronous).
  void clip(float max_norm, const std::function<void(double *)> &sum_ranks);
  /// sqrt(s) of the last clip(): valid once compute_stream() has been
  /// synchronised after it.
  double last_norm() const;

  /// A range on the device: floats [ptr, ptr + n), handled by blocks
  /// [first_block, first_block + ceil(n / kChunk)).
  struct Range {
    float *ptr;
    int64_t n, first_block;
    int counted;
  };
  static constexpr int64_t kChunk = 8192; // floats per block

private:
  std::vector<Range> ranges_;
  DeviceBuffer<Range> table_;
  DeviceBuffer<double> partial_; // a block's sum, then the total at [blocks]
  double *host_sum_ = nullptr;   // pinned: the total, copied each step
  int64_t blocks_ = 0;
  bool sealed_ = false;
};

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_GRADCLIP_H
