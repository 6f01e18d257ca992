// A classifier's synthetic samples drawn on the GPU: the values of
// backends/common/Data.h synthetic_classes (ClassSamples.h, the same Philox
// streams and double Box-Muller), computed where the model reads them. On the
// host, ResNet-50's 256 images a step (38.5M features at 50-75 ns each) took
// ~310 ms on 8 threads, six times PyTorch's whole step on an H100.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_SAMPLES_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_SAMPLES_H

#include "backends/cuda/Runtime.h"

#include <cstdint>

namespace autoddl::rt {

/// Samples [b0, b0 + nb) of global data batch `step` of B samples with F
/// features and K classes: x [nb, F] (act_t, rounded from the float the host
/// computes; the device's log or cos may round a double differently in its
/// last bit, 1 ulp of the float for about one value in 10^8) and labels [nb];
/// either may be null. channels_last = C > 0: each sample's F features are an
/// image [C, F / C] stored channels-last, [F / C, C] (feature c * F/C + p at
/// p * C + c), as the CUDA program's convolutions read it. On
/// compute_stream().
void synthetic_classes_on_device(act_t *x, int32_t *labels, uint64_t seed,
                                 int64_t step, int64_t B, int64_t F, int64_t K,
                                 double noise, int64_t b0, int64_t nb,
                                 int64_t channels_last = 0);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_SAMPLES_H
