//===- LayerLoops.h - identical layers as tables and loops -----*- C++ -*-===//
//
// A model's repeated blocks as tables of parameters and of a stage's
// activation buffers, and the stage functions' lines with the layers after
// the first as loops (LayerLoop.cpp). LayerLoops reads the context and the
// stage members, and writes nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/EmitContext.h"
#include "codegen/emit/StageMembers.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::codegen::emit {

/// The ops of one layer on a stage: its steps and the stage members its
/// ops added (LayerLoop.cpp).
struct LayerSpan {
  int layer = -1;
  size_t stepBegin = 0, stepEnd = 0, memberBegin = 0, memberEnd = 0;
};

/// A stage's layers as a table a.layers[j] of struct Stage<k>Layer: its
/// members' names in that struct, and per flat member its layer and index.
struct StageLayers {
  std::vector<LayerSpan> spans;
  std::vector<std::string> canon;
  std::string group; // the layers' name in the model ("h")
  std::map<std::string, std::pair<int, size_t>> memberOf;
  bool folded() const { return !spans.empty(); }
  /// `text` with every "a.<member of a layer>" as "a.layers[j].<name>".
  std::string rename(const std::string &text) const;
};

/// Activation recomputation on a stage (Recompute.cpp): its first `layers`
/// layers keep only the members the rest of the stage reads, the others
/// (`scratch`, per member of Stage<k>Layer) live in one stage-wide scratch
/// layer: each such layer's forward and backward run between `before[j]`
/// and `after[j]` (the scratch swapped in and out), its backward after
/// `rerun[j]` (the scratch's gradients cleared, the forward of its rerun
/// steps again).
struct StageRecompute {
  size_t layers = 0;
  std::vector<bool> scratch;
  std::vector<std::string> before, rerun, after; // per layer, flat names
  bool any() const { return layers > 0; }
};

class LayerLoops {
public:
  LayerLoops(const EmitContext &cx, const StageMembers &members)
      : cx_(cx), members_(members) {}

  /// struct Params and param_specs(), the layer tables as loops; `mask`,
  /// per tensor, the pipeline devices holding it.
  std::string paramsText(const std::vector<uint64_t> &mask) const;
  /// The parameter tensors in the order of param_specs()'s rows.
  std::vector<int> paramOrder() const;
  /// The stage's layers as a table, or none where their members differ.
  StageLayers planStageLayers(int stage,
                              const std::vector<LayerSpan> &spans) const;
  /// A stage function's lines: the steps before the layers, the layers
  /// (foldLayers), the steps after; the backward last step first.
  std::string layerOrdered(const StageLayers &sl,
                           const std::vector<std::string> &stepText,
                           bool backward,
                           const StageRecompute *rc = nullptr) const;

private:
  std::string canonicalLayerText(const StageLayers &sl, size_t j,
                                 const std::string &text) const;
  /// The layers' forward or backward lines (stepText per step), the layers
  /// after the first as loops where their lines read the same.
  std::string foldLayers(const StageLayers &sl,
                         const std::vector<std::string> &stepText,
                         bool backward,
                         const StageRecompute *rc = nullptr) const;

  const EmitContext &cx_;
  const StageMembers &members_;
};

} // namespace autoddl::codegen::emit
