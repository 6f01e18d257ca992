// The CUDA runtime's convolution scratch (backends/cuda/kernels/ConvCudnn.cu:
// detail::scratch slot 3, [KRSC filter copy | scratch output | engine
// workspace]) and the cap on a cuDNN engine's workspace: the one rule the
// runtime allocates by and the planner prices (planner/Pricing.cpp). The
// slot is grow-only and lives for the run, so a program holds the largest
// call's bytes (while it grows, detail::scratch holds the old buffer beside
// the new one for a moment: not priced). Header-only, plain C++17, so codegen
// copies it with backends/common.
#ifndef AUTODDL_BACKENDS_COMMON_CONVSCRATCH_H
#define AUTODDL_BACKENDS_COMMON_CONVSCRATCH_H

#include "backends/common/ConvShape.h"

#include <algorithm>
#include <cstdint>

namespace autoddl::rt {

enum class ConvDirection { Forward, DataGrad, FilterGrad };

/// Bytes of an activation element where cuDNN runs (the bf16 build only).
constexpr int64_t kConvActBytes = 2;

/// The least workspace cap: cuBLASLt's workspace (Runtime.h
/// kCublasLtWorkspaceBytes), so a small convolution may take what a GEMM may.
constexpr int64_t kConvWorkspaceFloorBytes = int64_t(32) << 20;

/// Each part of the scratch starts 256-byte aligned.
constexpr int64_t convScratchAligned(int64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

/// Whether forward and data gradient read a KRSC copy of the OIHW filter:
/// channels-last with more than one tap and input channel (a 1x1 filter or
/// one input channel is the same bytes in both layouts).
inline bool convFilterCopied(const Conv2dShape &s) {
  return s.channelsLast && s.kh * s.kw > 1 && s.Cin > 1;
}

/// Elements of what direction d writes: y, dx (x's shape) or dw.
inline int64_t convResultElements(const Conv2dShape &s, ConvDirection d) {
  switch (d) {
  case ConvDirection::Forward:
    return s.B * s.Cout * s.Ho() * s.Wo();
  case ConvDirection::DataGrad:
    return s.B * s.Cin * s.H * s.W;
  case ConvDirection::FilterGrad:
    break;
  }
  return s.Cout * s.Cin * s.kh * s.kw;
}

/// The most workspace an engine config of shape s may ask for: the larger of
/// its input and output in bf16, at least kConvWorkspaceFloorBytes. PyTorch's
/// cudnn.benchmark bounds it by the allocator's free memory, which a plan
/// cannot price; a fixed bound would be too much for a small network and
/// too little for a large one, while one proportional to the convolution's
/// own tensors scales with the activations the plan already holds and adds
/// at most one such tensor to the scratch. Whether it drops a candidate that
/// would have won is for a GPU to tell (not yet measured):
/// AUTODDL_CONV_WORKSPACE_CAP=none lifts it, AUTODDL_CONV_VERBOSE=1 prints
/// each candidate's workspace.
inline int64_t convWorkspaceCap(const Conv2dShape &s) {
  return std::max(
      {kConvWorkspaceFloorBytes,
       kConvActBytes * convResultElements(s, ConvDirection::Forward),
       kConvActBytes * convResultElements(s, ConvDirection::DataGrad)});
}

/// One call's scratch: the KRSC filter copy (forward, data gradient), a
/// scratch output of outputElementBytes an element (0: none; a result
/// written beside its destination and added, or a scratch the autotuning
/// times candidates on), and the engine workspace, in that order.
struct ConvScratchParts {
  int64_t copy = 0, output = 0, workspace = 0;
  int64_t total() const { return copy + output + workspace; }
};
inline ConvScratchParts convScratchParts(const Conv2dShape &s, ConvDirection d,
                                         int64_t outputElementBytes,
                                         int64_t workspace) {
  ConvScratchParts p;
  if (d != ConvDirection::FilterGrad && convFilterCopied(s))
    p.copy = convScratchAligned(kConvActBytes * s.Cout * s.Cin * s.kh * s.kw);
  p.output = convScratchAligned(outputElementBytes * convResultElements(s, d));
  p.workspace = workspace;
  return p;
}

/// The most one call of direction d takes: the copy, the widest scratch
/// output a variant of ConvCudnn.cu may use (the forward stores in place and
/// is timed there: none; dx in bf16; dw in fp32) and the capped workspace.
/// An upper bound unless no engine config of the shape fits the cap (the
/// runtime then keeps the heuristics' first, and says so under
/// AUTODDL_CONV_VERBOSE).
inline int64_t convScratchBound(const Conv2dShape &s, ConvDirection d) {
  const int64_t outputBytes = d == ConvDirection::Forward    ? 0
                              : d == ConvDirection::DataGrad ? kConvActBytes
                                                             : 4;
  return convScratchParts(s, d, outputBytes, convWorkspaceCap(s)).total();
}

/// The same over the directions a conv2d runs: all three, or without the
/// data gradient where its input has none (a model input).
inline int64_t convScratchBound(const Conv2dShape &s, bool dataGrad) {
  return std::max(
      {convScratchBound(s, ConvDirection::Forward),
       convScratchBound(s, ConvDirection::FilterGrad),
       dataGrad ? convScratchBound(s, ConvDirection::DataGrad) : int64_t(0)});
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_CONVSCRATCH_H
