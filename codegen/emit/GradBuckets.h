//===- GradBuckets.h - data-parallel gradient buckets ----------*- C++ -*-===//
//
// The CUDA program's gradient buckets (GradBuckets.cpp): which parameters
// complete after which step of a stage's backward, and the runtime
// configuration (GradSync) that all-reduces them. GradBuckets reads the
// context and the parameter order; it owns the buckets.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/EmitContext.h"
#include "codegen/emit/LayerLoops.h"

#include "cost_model/pipeline/Schedule.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::codegen::emit {

/// A data-parallel gradient bucket of the cuda program: parameters whose
/// gradients are complete after one point of a stage's backward.
struct Bucket {
  int stage = 0;
  bool weightPart = false; // completes in the weight-gradient half (zb-h1)
  // Gradients partial over tp as well (ModelLayout::tpPartialGrads): summed
  // over the stage's dp x tp group in one all-reduce.
  bool tpPartial = false;
  std::vector<int> params;
};

class GradBuckets {
public:
  GradBuckets(const EmitContext &cx, const LayerLoops &layers)
      : cx_(cx), layers_(layers) {}

  /// Adds `stage`'s buckets (its backward's `steps`, the weight half apart
  /// where `splitBackward`; `deviceMask`, per tensor the pipeline devices
  /// holding it). Returns, per (step, weight half?), the buckets complete
  /// after that step's lines.
  std::map<std::pair<size_t, bool>, std::vector<int>>
  assign(int stage, const std::vector<Step> &steps, bool splitBackward,
         const std::vector<uint64_t> &deviceMask);
  /// kBuckets and configure_grad_sync().
  std::string configText(const pipeline::Schedule &s) const;

private:
  const EmitContext &cx_;
  const LayerLoops &layers_;
  std::vector<Bucket> buckets_;
};

} // namespace autoddl::codegen::emit
