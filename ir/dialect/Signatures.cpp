//===- Signatures.cpp - SbpOpInterface over the shared rule table ---------===//
//
// Every model op's SBP signatures come from the one table of rules,
// ir/ops/SbpRules.h, which the planner reads too (planner/SbpSignatures.cpp):
// this file only converts between the op and the table's plain values (operand
// shapes, attributes with their defaults, and AxisLayout to SbpParallel).
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/SbpDialect.h"

#include "ir/dialect/OpSemanticsAdapter.h"
#include "ir/ops/SbpRules.h"

using namespace mlir;

namespace autoddl::sbp {
namespace {

SbpParallel toParallel(const ops::AxisLayout &layout) {
  if (layout.isSplit())
    return SbpParallel::split(layout.dim);
  return layout.isPartial() ? SbpParallel::partial() : SbpParallel::broadcast();
}

/// The table's view of `op`: its kind, operand shapes (a parameter's own
/// shape, having no operands) and attributes with the shared defaults (none
/// when an attribute is of a kind the vocabulary lacks: the op verifier
/// reports that).
struct TableQuery {
  std::string kind;
  std::vector<ops::Shape> operands;
  ops::Attrs attrs;

  explicit TableQuery(Operation *op) : kind(getOpKind(op).str()) {
    auto shapeOf = [](Value v) {
      ArrayRef<int64_t> s = cast<RankedTensorType>(v.getType()).getShape();
      return ops::Shape(s.begin(), s.end());
    };
    if (op->getNumOperands() == 0 && op->getNumResults() == 1)
      operands.push_back(shapeOf(op->getResult(0)));
    for (Value v : op->getOperands())
      operands.push_back(shapeOf(v));
    attrs = getOpsAttrs(op).value_or(ops::withDefaults(kind, {}));
  }
};

} // namespace

SmallVector<SbpSignature> tableSignatures(Operation *op) {
  TableQuery q(op);
  SmallVector<SbpSignature> rows;
  for (const ops::SbpRule &rule : ops::sbpRules(q.kind, q.operands, q.attrs)) {
    SbpSignature row;
    for (const ops::AxisLayout &l : rule.operands)
      row.inputs.push_back(toParallel(l));
    row.outputs.push_back(toParallel(rule.result));
    rows.push_back(row);
  }
  return rows;
}

int64_t tableSplitGranule(Operation *op, unsigned valueIndex, int64_t dim) {
  TableQuery q(op);
  return ops::sbpSplitGranule(q.kind, q.operands, q.attrs, valueIndex, dim);
}

/// The dual signature, except that the operand without a gradient (integer
/// ids, targets) keeps its forward layout, so that the backward implies no
/// communication for it.
SbpSignature tableBackwardSignature(Operation *op,
                                    const SbpSignature &forward) {
  SbpSignature backward = dualSignature(forward);
  const int k = ops::gradientFreeOperand(getOpKind(op).str());
  if (k >= 0 && unsigned(k) < forward.inputs.size())
    backward.outputs[unsigned(k)] = forward.inputs[unsigned(k)];
  return backward;
}

} // namespace autoddl::sbp
