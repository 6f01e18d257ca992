// The geometry of a conv2d, shared by the CPU kernels
// (backends/cpu/kernels/Conv.h) and the CUDA ones (backends/cuda/kernels/
// Conv.h), so codegen writes one Conv2dShape{...} for both. Output size
// H' = (H + 2p - kh) / s + 1 (same for W). x and y are NCHW, or with
// channelsLast (the CUDA program's choice, codegen/emit/ChannelsLast.cpp)
// stored NHWC; the weight stays OIHW either way (ONNX's, the checkpoint's).
#ifndef AUTODDL_BACKENDS_COMMON_CONVSHAPE_H
#define AUTODDL_BACKENDS_COMMON_CONVSHAPE_H

#include <cstdint>

namespace autoddl::rt {

struct Conv2dShape {
  int64_t B, Cin, H, W, Cout, kh, kw, stride, padding;
  bool channelsLast = false;
  int64_t Ho() const { return (H + 2 * padding - kh) / stride + 1; }
  int64_t Wo() const { return (W + 2 * padding - kw) / stride + 1; }
};

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_CONVSHAPE_H
