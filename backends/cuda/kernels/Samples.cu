// Synthetic classification samples on the GPU (Samples.h).
#include "backends/common/ClassSamples.h"
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Samples.h"

namespace autoddl::rt {
namespace {
using namespace detail;

constexpr int kThreads = 256;

__global__ void class_labels_kernel(int32_t *labels, uint64_t seed,
                                    ClassStreams s, uint64_t g0, int64_t nb,
                                    int64_t K) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b < nb)
    labels[b] = class_label(seed, s, g0 + uint64_t(b), K);
}

/// A thread a feature; the prototype value is recomputed per feature (the
/// host keeps it over a run of kClassRun): the same function, and the GPU
/// has the arithmetic to spare. C > 0: x stores each sample channels-last
/// (Samples.h); element e holds feature f = c * (F / C) + p.
__global__ void class_features_kernel(act_t *x, const int32_t *labels,
                                      uint64_t seed, ClassStreams s,
                                      uint64_t g0, int64_t nb, int64_t F,
                                      int64_t C, double noise) {
  const int64_t total = nb * F;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / F, at = e % F;
    const int64_t f = C > 0 ? at % C * (F / C) + at / C : at;
    const double mu = class_prototype(seed, s, labels[b], F, f);
    x[e] = from_float<act_t>(
        class_feature(mu, seed, s, g0 + uint64_t(b), F, f, noise));
  }
}

} // namespace

void synthetic_classes_on_device(act_t *x, int32_t *labels, uint64_t seed,
                                 int64_t step, int64_t B, int64_t F, int64_t K,
                                 double noise, int64_t b0, int64_t nb,
                                 int64_t channels_last) {
  if (nb <= 0 || (!x && !labels))
    return;
  // The features need the labels: a buffer of the run's when none is given.
  static auto *own = new DeviceBuffer<int32_t>(); // never destroyed: the
                                                  // context may go first
  if (!labels) {
    if (own->size() < nb)
      *own = DeviceBuffer<int32_t>(nb);
    labels = own->data();
  }
  const ClassStreams s = class_streams();
  const uint64_t g0 = uint64_t(step) * uint64_t(B) + uint64_t(b0);
  class_labels_kernel<<<unsigned((nb + kThreads - 1) / kThreads), kThreads, 0,
                        compute_stream()>>>(labels, seed, s, g0, nb, K);
  AUTODDL_CUDA_CHECK_LAUNCH();
  if (!x || F <= 0)
    return;
  class_features_kernel<<<grid_for(nb * F, kThreads), kThreads, 0,
                          compute_stream()>>>(x, labels, seed, s, g0, nb, F,
                                              channels_last, noise);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
