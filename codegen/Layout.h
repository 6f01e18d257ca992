//===- Layout.h - what the generated CPU program runs, op by op ----------===//
//
// The plan states an SBP signature per op (planner/Plan.h OpChoice); the CPU
// program executes a subset of them exactly and everything else replicated over
// the tensor-parallel axis, which is always correct:
//   linear   "column"/"vocab" (weight split on its output features, result
//            S(last)), "row" (weight split on its input features, result P,
//            all-reduced at once);
//   embedding "vocab" (table S(0), result P all-reduced), "hidden" (table
//   S(1));
//   attention, heads split when its q/k/v arrive split so or the plan says
//   heads (converted to it; a packed qkv per q/k/v segment);
//   rotary by heads likewise;
//   "batch"/"sequence" (split rows): linear, bias_add, embedding, positional,
//   rotary, norms, elementwise ops, conv2d, pool2d, flatten, attention (batch
//   only), cross_entropy and squared_error run on each rank's rows, their
//   parameters whole and their gradients summed over tp
//   (ModelLayout::tpPartialGrads); inputs are sliced, positions offset by
//   the rank's part of the sequence;
//   elementwise ops, bias_add, rotary, spmm follow a split input; sddmm of
//   two inputs split on K sums its partial dot products (all-reduce);
//   edge_softmax is replicated;
//   cross_entropy on vocab-split logits is Megatron's vocab-parallel loss.
// Tensors carry one tp layout (B or S(d)); a consumer needing another gets a
// converted copy (all-gather, local slice, or all-to-all between two splits).
// Every activation is split over dp on its batch dimension by construction
// (each dp rank runs its micro-batches).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"
#include "planner/Plan.h"

#include <set>
#include <string>
#include <vector>

namespace autoddl::codegen {

/// A tensor-parallel layout: replicated, or split on dimension `dim`. With
/// `segments` > 1 the dimension is `segments` equal parts (a packed q|k|v)
/// each split over tp: rank r holds part r of every segment, in order, so a
/// rank's packed qkv holds whole heads of q, k and v (Megatron's fused QKV).
struct TpLayout {
  int dim = -1; // -1: B
  int segments = 1;
  bool split() const { return dim >= 0; }
  bool operator==(const TpLayout &o) const {
    return dim == o.dim && segments == o.segments;
  }
  bool operator!=(const TpLayout &o) const { return !(*this == o); }
  std::string str() const {
    if (dim < 0)
      return "B";
    return "S(" + std::to_string(dim) + ")" +
           (segments > 1 ? " per " + std::to_string(segments) + " segments"
                         : "");
  }
};

/// How one op runs.
enum class OpMode {
  Replicated,
  Column,     // linear: w split on output features; result S(last)
  Row,        // linear: w split on input features; result P -> all-reduce
  VocabTable, // embedding: table S(0); result P -> all-reduce
  HeadSplit,  // attention / rotary on local heads
  Local,      // elementwise, bias_add, spmm, sddmm on split operands
  VocabLoss,  // cross_entropy on S(last) logits
};

struct OpPlan {
  OpMode mode = OpMode::Replicated;
  std::vector<TpLayout> operands; // layout each operand is consumed in
  TpLayout result;
  int stage = 0;         // model stage
  std::string signature; // the plan's signature name ("" when not stated)
};

struct ModelLayout {
  int tp = 1;
  std::vector<TpLayout> tensors; // per ModelGraph tensor (params included)
  std::vector<OpPlan> ops;       // per ModelGraph op
  int numStages = 1;
  /// Parameters read whole by ops on split rows (a norm's scale and shift
  /// under Megatron's sequence parallelism, every weight when tp splits the
  /// batch): each tp rank's gradient is its rows' part, summed over tp before
  /// the optimizer step. Every reader of such a parameter runs on split rows.
  std::set<int> tpPartialGrads;
};

/// Chooses the execution of every op. Throws UserError for an op kind the
/// generated programs do not run, naming `backend` ("cpu", "cuda").
ModelLayout chooseLayout(const planner::Plan &plan, const ModelGraph &g,
                         const std::string &backend = "cpu");

/// Local (per tp rank) shape of a tensor of full shape `shape` under `l`: the
/// split dimension ceil(size / tp), the extent a padded vocabulary's shorter
/// last parts are stored in.
std::vector<int64_t> localShape(const std::vector<int64_t> &shape, TpLayout l,
                                int tp);

} // namespace autoddl::codegen
