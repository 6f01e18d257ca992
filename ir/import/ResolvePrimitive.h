//===- ResolvePrimitive.h - a ModelGraph primitive as its kernels see it -===//
//
// An op of kind "primitive" (ModelGraph.h) resolved by the runtime's one
// table of what runs (backends/common/OnnxPrimitive.h): its ONNX attributes,
// the given operand and result shapes and the values of the constants it
// reads. fuseImported checks every primitive it keeps so on the graph's
// shapes (a form without a kernel refuses the model at import, naming the
// node); codegen resolves it again on the shapes a rank holds. Header-only:
// no exceptions, no MLIR.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"

#include "backends/common/OnnxPrimitive.h"

#include <string>
#include <variant>
#include <vector>

namespace autoddl {

/// What a primitive op of `g` gives its kernels besides shapes: the ONNX op
/// type, its attributes and, per operand, the values of a constant (empty
/// for any other operand).
struct PrimitiveInputs {
  std::string type;
  onnx_kernels::PrimitiveAttrs attrs;
  std::vector<std::vector<double>> consts;
};
inline PrimitiveInputs primitiveInputs(const ModelGraph &g, const OpDef &op) {
  PrimitiveInputs r;
  for (const auto &[name, value] : op.attrs) {
    if (auto *v = std::get_if<int64_t>(&value))
      r.attrs.ints[name] = *v;
    else if (auto *d = std::get_if<double>(&value))
      r.attrs.floats[name] = *d;
    else if (auto *l = std::get_if<std::vector<int64_t>>(&value))
      r.attrs.lists[name] = *l;
    else if (auto *s = std::get_if<std::string>(&value); s && name == "op_type")
      r.type = *s;
  }
  r.consts.resize(op.operands.size());
  for (size_t j = 0; j < op.operands.size(); ++j) {
    const TensorDef &t = g.tensors[size_t(op.operands[j])];
    if (t.role == TensorRole::Constant)
      r.consts[j] = t.values;
  }
  return r;
}

/// Resolves primitive `op` of `g` on operand shapes `in` and result shape
/// `out` into `p`; "" or why it does not run.
inline std::string resolvePrimitive(onnx_kernels::Primitive &p,
                                    const ModelGraph &g, const OpDef &op,
                                    const std::vector<ops::Shape> &in,
                                    const ops::Shape &out) {
  const PrimitiveInputs r = primitiveInputs(g, op);
  return onnx_kernels::makePrimitive(p, r.type, r.attrs, in, out, r.consts);
}

} // namespace autoddl
