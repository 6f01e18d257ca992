//===- OpSemanticsAdapter.cpp - MLIR types/attributes <-> ir/ops values ---===//
#include "ir/dialect/OpSemanticsAdapter.h"

#include "ir/dialect/SbpConstants.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace autoddl::sbp {

Type toElementType(MLIRContext *context, ops::DType dtype) {
  Builder b(context);
  switch (dtype) {
  case ops::DType::F32:
    return b.getF32Type();
  case ops::DType::BF16:
    return b.getBF16Type();
  case ops::DType::F16:
    return b.getF16Type();
  case ops::DType::I32:
    return b.getI32Type();
  case ops::DType::I64:
    return b.getI64Type();
  case ops::DType::Bool:
    return b.getI1Type();
  }
  return {};
}

RankedTensorType toTensorType(MLIRContext *context,
                              const ops::ValueType &value) {
  return RankedTensorType::get(value.shape,
                               toElementType(context, value.dtype));
}

static std::optional<ops::DType> toDType(Type type) {
  if (type.isF32())
    return ops::DType::F32;
  if (type.isBF16())
    return ops::DType::BF16;
  if (type.isF16())
    return ops::DType::F16;
  if (type.isSignlessInteger(32))
    return ops::DType::I32;
  if (type.isSignlessInteger(64))
    return ops::DType::I64;
  if (type.isSignlessInteger(1))
    return ops::DType::Bool;
  return std::nullopt;
}

std::optional<ops::ValueType> toValueType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return std::nullopt;
  std::optional<ops::DType> dtype = toDType(tensor.getElementType());
  if (!dtype)
    return std::nullopt;
  return ops::ValueType{
      ops::Shape(tensor.getShape().begin(), tensor.getShape().end()), *dtype};
}

Attribute toAttribute(Builder &builder, const ops::AttrValue &value) {
  if (auto *i = std::get_if<int64_t>(&value))
    return builder.getI64IntegerAttr(*i);
  if (auto *f = std::get_if<double>(&value))
    return builder.getF64FloatAttr(*f);
  if (auto *b = std::get_if<bool>(&value))
    return builder.getBoolAttr(*b);
  if (auto *s = std::get_if<std::string>(&value))
    return builder.getStringAttr(*s);
  return builder.getDenseI64ArrayAttr(std::get<std::vector<int64_t>>(value));
}

std::optional<ops::AttrValue> toAttrValue(Attribute attr) {
  // BoolAttr is an IntegerAttr of type i1: test it first.
  if (auto b = dyn_cast<BoolAttr>(attr))
    return ops::AttrValue(b.getValue());
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return ops::AttrValue(int64_t(i.getInt()));
  if (auto f = dyn_cast<FloatAttr>(attr))
    return ops::AttrValue(f.getValueAsDouble());
  if (auto s = dyn_cast<StringAttr>(attr))
    return ops::AttrValue(s.str());
  if (auto a = dyn_cast<DenseI64ArrayAttr>(attr))
    return ops::AttrValue(
        std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end()));
  return std::nullopt;
}

StringRef getOpKind(Operation *op) {
  return op->getName().getStringRef().drop_front(kOpPrefix.size());
}

static std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// Inherent attributes only: discardable ones (sbp.sig, sbp.layer, ...) carry
/// a dialect prefix and are verified by the dialect.
static std::optional<ops::Attrs> collectAttrs(Operation *op,
                                              std::string *error) {
  ops::Attrs attrs;
  for (NamedAttribute named : op->getAttrs()) {
    if (named.getName().strref().contains('.'))
      continue;
    std::optional<ops::AttrValue> value = toAttrValue(named.getValue());
    if (!value) {
      if (error)
        *error = "expected attribute '" + named.getName().str() +
                 "' to be an i64, f64, bool, string or i64 array";
      return std::nullopt;
    }
    attrs.emplace(named.getName().str(), std::move(*value));
  }
  return attrs;
}

std::optional<ops::Attrs> getOpsAttrs(Operation *op, std::string *error) {
  std::optional<ops::Attrs> attrs = collectAttrs(op, error);
  if (!attrs)
    return std::nullopt;
  StringRef kind = getOpKind(op);
  return ops::withDefaults(std::string_view(kind.data(), kind.size()), *attrs);
}

std::string checkOpSemantics(Operation *op) {
  std::vector<ops::ValueType> operands;
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    std::optional<ops::ValueType> t = toValueType(operand.getType());
    if (!t)
      return "expected operand #" + std::to_string(i) +
             " to be a static tensor of f32, bf16, f16, i32 or i64, got " +
             typeString(operand.getType());
    operands.push_back(std::move(*t));
  }
  std::string error;
  std::optional<ops::Attrs> attrs = collectAttrs(op, &error);
  if (!attrs)
    return error;
  StringRef kind = getOpKind(op);
  // A parameter's type is what it declares; the shared rules infer nothing.
  if (kind == "parameter") {
    if (!toValueType(op->getResult(0).getType()))
      return "expected a static tensor of f32, bf16, f16, i32 or i64, got " +
             typeString(op->getResult(0).getType());
    return "";
  }
  ops::InferResult inferred = ops::inferResultTypes(
      std::string_view(kind.data(), kind.size()), operands, *attrs);
  if (!inferred.ok())
    return inferred.error;
  if (inferred.results.size() != op->getNumResults())
    return "expected " + std::to_string(inferred.results.size()) +
           " results, got " + std::to_string(op->getNumResults());
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    Type expected = toTensorType(op->getContext(), inferred.results[i]);
    if (expected != result.getType())
      return "expected result #" + std::to_string(i) + " of type " +
             typeString(expected) + ", got " + typeString(result.getType());
  }
  return "";
}

} // namespace autoddl::sbp
