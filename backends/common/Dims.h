// The shape of a dense row-major tensor and its element count: one
// definition for the runtime (Tensor.h's Shape), the ONNX primitives' kernels
// (OnnxKernels.h) and the op vocabulary's semantics (ir/ops/OpSemantics.h).
// Plain C++17 without exceptions (the compiler core includes it); codegen
// copies it with backends/common.
#ifndef AUTODDL_BACKENDS_COMMON_DIMS_H
#define AUTODDL_BACKENDS_COMMON_DIMS_H

#include <cstdint>
#include <vector>

namespace autoddl {

using Dims = std::vector<int64_t>;

/// The elements of a shape (1 for a scalar, {}; no overflow check: for
/// shapes already validated).
inline int64_t numel(const Dims &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

} // namespace autoddl

#endif // AUTODDL_BACKENDS_COMMON_DIMS_H
