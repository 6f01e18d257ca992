//===- OpSemantics.cpp - result-type inference of each op -----------------===//
//
// inferResultTypes: the checks every op shares (operand count, required
// attributes and their types, positive sizes, int64 element counts and
// FLOPs), then the shape rule of the op kind's row of the one table
// (OpKinds.cpp). The rules live by family in DenseShapeRules.cpp,
// ImageShapeRules.cpp and SparseShapeRules.cpp.
//
// Built without exceptions (the MLIR dialect links it): errors are returned as
// lower-case messages, arithmetic on sizes is checked for int64 overflow.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpKinds.h"

namespace autoddl::ops {

using namespace detail;

InferResult inferResultTypes(std::string_view kind,
                             const std::vector<ValueType> &operands,
                             const Attrs &attrs) {
  InferResult res;
  const OpInfo *info = lookupOp(kind);
  if (!info) {
    res.error = "unknown op kind '" + std::string(kind) + "'";
    return res;
  }
  int n = operands.size();
  if (n < info->minOperands ||
      (info->maxOperands >= 0 && n > info->maxOperands)) {
    std::string want = std::to_string(info->minOperands);
    if (info->maxOperands != info->minOperands)
      want += info->maxOperands < 0
                  ? " or more"
                  : " to " + std::to_string(info->maxOperands);
    res.error = "expected " + want + " operands, got " + std::to_string(n);
    return res;
  }
  for (std::string_view name : info->requiredAttrs)
    if (!attrs.count(std::string(name))) {
      res.error = "missing required attribute '" + std::string(name) + "'";
      return res;
    }
  Attrs full = withDefaults(kind, attrs);
  for (const auto &[name, value] : full) {
    std::optional<AttrKind> want = attrKind(kind, name);
    if (!want)
      continue; // not ours (e.g. sbp.layer); the dialect checks those
    if (value.index() != static_cast<size_t>(*want)) {
      res.error = "expected attribute '" + name + "' of type " +
                  std::string(attrKindName(*want));
      return res;
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int64_t d : operands[i].shape)
      if (d <= 0) {
        res.error = "expected positive sizes, got " +
                    shapeStr(operands[i].shape) + " for operand #" +
                    std::to_string(i);
        return res;
      }
    if (product(operands[i].shape) > kInt64Max) {
      res.error = "element count of " + shapeStr(operands[i].shape) +
                  " (operand #" + std::to_string(i) + ") overflows int64";
      return res;
    }
  }
  Rule r(operands, full);
  Results results = findOpKind(kind)->infer(r);
  if (!r.error.empty()) {
    res.error = r.error;
    return res;
  }
  for (const ValueType &v : results)
    if (product(v.shape) > kInt64Max) {
      res.error =
          "element count of result " + shapeStr(v.shape) + " overflows int64";
      return res;
    }
  if (wideFlops(kind, operands, results, full) > kInt64Max) {
    res.error = "forward FLOPs overflow int64";
    return res;
  }
  res.results = std::move(results);
  return res;
}

} // namespace autoddl::ops
