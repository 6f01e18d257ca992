// What PrimitiveCheck.cpp and PrimitiveCheckConv.cpp share: the run's
// random source and failure count, the NCHW <-> NHWC transpose, and the conv
// checks' entry point.
#pragma once

#include "backends/common/OnnxPrimitive.h"

#include <random>
#include <vector>

namespace pcheck {
extern std::mt19937 gRng;
extern int gFailures;
/// v [N, C, S] (NCHW, S = H * W) as [N, S, C] (NHWC), or back (`back`).
std::vector<float> toNhwc(const std::vector<float> &v,
                          const autoddl::onnx_kernels::Dims &nchw,
                          bool back = false);
/// conv2d through each path (PrimitiveCheckConv.cpp).
void checkConvPaths();
} // namespace pcheck
