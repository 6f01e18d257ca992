// Parameter initialisation on the GPU: the values of backends/common/Init.h
// (Philox streams keyed by each element's index in the full tensor) computed
// where the parameter lives. On the host a 1.5B-parameter model took 94 s to
// initialise under mpirun, which binds a rank's threads to one core; here it
// takes milliseconds.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_INIT_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_INIT_H

#include "backends/common/Init.h"

#include <cstdint>
#include <string_view>

namespace autoddl::rt {

/// out[k] = mean + std * N(0, 1) for element k (row-major) of `slice`, the
/// same function of (seed, name, full index) as init_normal; double arithmetic
/// in the same order, so the floats agree with the host's except where the
/// device's log or cos rounds differently in the last bit of a double (1 ulp
/// of the float, about one element in 10^8). Slices of rank above 8 throw.
void init_normal_on_device(float *out, const Slice &slice, uint64_t seed,
                           std::string_view name, float mean, float std);
/// out[n] = value.
void fill_on_device(float *out, int64_t n, float value);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_INIT_H
