//===- SbpRules.h - each op's 1-D SBP signatures, the one table ----------===//
//
// The one registry of SBP signature rules (after Shardy's
// op_sharding_rule_registry, ../shared/STYLE.md lesson 12): for every op kind
// of the vocabulary, the combinations of layouts its operands and result may
// take along one mesh axis. Both consumers read it: the sbp dialect's
// SbpOpInterface (ir/dialect/Signatures.cpp converts the rows to SbpSignature)
// and the planner (planner/SbpSignatures.cpp picks the rows it searches over,
// by their label, and prices them).
//
// Plain C++17 like OpSemantics.h: no MLIR, no exceptions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/ops/OpSemantics.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace autoddl::ops {

/// A value's layout along one mesh axis: split on a dimension, broadcast
/// (whole on every device) or a partial sum (every partial value of the
/// vocabulary is a sum).
struct AxisLayout {
  enum class Kind { Split, Broadcast, Partial };
  Kind kind = Kind::Broadcast;
  int64_t dim = 0; // Split only

  static AxisLayout split(int64_t dim) { return {Kind::Split, dim}; }
  static AxisLayout broadcast() { return {}; }
  static AxisLayout partial() { return {Kind::Partial, 0}; }
  bool isSplit() const { return kind == Kind::Split; }
  bool isBroadcast() const { return kind == Kind::Broadcast; }
  bool isPartial() const { return kind == Kind::Partial; }
  friend bool operator==(const AxisLayout &a, const AxisLayout &b) {
    return a.kind == b.kind && (a.kind != Kind::Split || a.dim == b.dim);
  }
  friend bool operator!=(const AxisLayout &a, const AxisLayout &b) {
    return !(a == b);
  }
};

/// What a row does, in Megatron's vocabulary; the planner offers rows by
/// label (docs/planner.md "signatures").
enum class SbpRuleLabel {
  Rows,    // activations split along a dimension they share (batch, sequence)
           // with parameters whole, or a split moved through a reshape
  Hidden,  // every operand and the result split on the feature dimension
  Column,  // a weight's output columns (Megatron's column-parallel linear)
  Row,     // the contraction dimension on both sides: a partial result
  Heads,   // whole attention heads
  Vocab,   // a vocabulary's rows (embedding table) or logits' columns (loss)
  Partial, // partial sums in, a partial sum out (the op is linear)
};

/// One signature: a layout per operand present and the result's layout.
struct SbpRule {
  SbpRuleLabel label;
  std::vector<AxisLayout> operands;
  AxisLayout result;
};

/// The 1-D signatures of op `kind` with operands of shapes `operands` (the
/// operands present: an absent optional bias has no column) and attributes
/// `attrs` (withDefaults applied), in the order a planner should prefer
/// them when costs tie. All-broadcast is valid for every op and not listed.
/// A row is valid when every device, computing the op on the pieces it holds
/// (with the global offset of its slice where positions matter), produces its
/// piece of the result in the stated layout. Divisibility by a mesh axis is
/// the caller's to check. Assumes the operands passed inferResultTypes.
std::vector<SbpRule> sbpRules(std::string_view kind,
                              const std::vector<Shape> &operands,
                              const Attrs &attrs);

/// Splits of dimension `dim` of value `valueIndex` (operands, then the
/// result) must fall on multiples of this many elements: a head dimension
/// packed as H*D splits only at head boundaries (granule D).
int64_t sbpSplitGranule(std::string_view kind,
                        const std::vector<Shape> &operands, const Attrs &attrs,
                        unsigned valueIndex, int64_t dim);

/// Why a value of `shape` cannot take `layout` (one entry per mesh axis; the
/// axes' sizes and names), or "" if it can: each split dimension is below the
/// rank, and its size divisible by granule(dim) times the sizes of the axes
/// splitting it (a negative size, a dynamic one, is not checked). The one
/// rule of the sbp dialect's verifier (checkLayoutFits) and of the plan
/// validator (planner/PlanValidate.cpp).
std::string
layoutFitProblem(const Shape &shape, const std::vector<AxisLayout> &layout,
                 const std::vector<int64_t> &axisSizes,
                 const std::vector<std::string> &axisNames,
                 const std::function<int64_t(int64_t)> &granule = nullptr);

/// A vocabulary of `rows` split into `parts` (tensor parallelism) that
/// `parts` does not divide: the rows padded to parts x ceil(rows / parts),
/// each part ceil(rows / parts) rows, the last one's tail zero rows whose
/// logits the loss leaves out (Megatron pads its vocabulary alike). 0 when a
/// part would hold padding only (rows 5 over 4 parts). The one rule of the
/// planner's uneven vocabulary split (planner/ProgramDecisions.h), the
/// programs' layout and plan.mlir's padded vocabulary (ir/lower/LowerPlan.cpp).
int64_t paddedVocabulary(int64_t rows, int64_t parts);

/// The operand that has no gradient (integer ids of an embedding, targets of
/// a cross-entropy), or -1: its gradient entry keeps its forward layout.
int gradientFreeOperand(std::string_view kind);

} // namespace autoddl::ops
