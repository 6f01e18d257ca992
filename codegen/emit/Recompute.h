//===- Recompute.h - activation recomputation in train.cpp -----*- C++ -*-===//
//
// What a stage recomputes and the code that swaps its recomputed layers'
// buffers with a stage-wide scratch (Recompute.cpp). Recomputation reads
// the context and the stage members; it owns the set of stages given a
// scratch, which the stage sets and the header read.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/LayerLoops.h"

#include <set>
#include <string>
#include <vector>

namespace autoddl::codegen::emit {

class Recomputation {
public:
  Recomputation(const EmitContext &cx, const StageMembers &members)
      : cx_(cx), members_(members) {}

  /// What `stage` recomputes, and how; `outside` is the stage's text
  /// outside its steps that names members (its transfers).
  StageRecompute plan(int stage, const StageLayers &sl,
                      const std::vector<Step> &steps,
                      const std::string &outside) const;
  /// The declarations and functions of a stage's recomputation: the layer
  /// struct's constructor, the scratch, stage<k>_recompute_begin/_end; the
  /// stage has a scratch from now on.
  std::string text(int stage, const StageLayers &sl, const StageRecompute &rc);
  bool hasScratch(int stage) const { return scratch_.count(stage) > 0; }
  bool anyScratch() const { return !scratch_.empty(); }
  /// The header's account of what the program recomputes.
  std::string summary() const;

private:
  const EmitContext &cx_;
  const StageMembers &members_;
  std::set<int> scratch_; // stages with a recompute scratch layer
};

} // namespace autoddl::codegen::emit
