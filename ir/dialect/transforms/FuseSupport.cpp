//===- FuseSupport.cpp - matching helpers of the sbp-fuse-* passes -------===//
#include "ir/dialect/transforms/FuseSupport.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

using namespace mlir;

namespace autoddl::sbp::fuse {

Operation *producer(Value v, StringRef onnx) {
  Operation *op = v ? v.getDefiningOp() : nullptr;
  if (!op)
    return nullptr;
  if (auto p = dyn_cast<PrimitiveOp>(op))
    return p.getOpType() == onnx ? op : nullptr;
  if (onnx == "Add" && isa<AddOp, BiasAddOp>(op))
    return op;
  if (onnx == "Mul" && isa<MulOp>(op))
    return op;
  if (onnx == "Softmax" && isa<SoftmaxOp>(op))
    return op;
  if (onnx == "Reshape" && isa<ReshapeOp>(op))
    return op;
  if (onnx == "Transpose" && isa<TransposeOp>(op))
    return op;
  if (auto m = dyn_cast<MatmulOp>(op))
    return onnx == "MatMul" && !m.getTransposeB().value_or(false) ? op
                                                                  : nullptr;
  return nullptr;
}

Operation *soleUser(Value v, StringRef onnx) {
  if (!v || !v.hasOneUse())
    return nullptr;
  Operation *user = *v.getUsers().begin();
  for (Value r : user->getResults())
    if (producer(r, onnx) == user)
      return user;
  return nullptr;
}

std::optional<double> scalar(Value v) {
  auto c = v ? v.getDefiningOp<ConstantOp>() : nullptr;
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  APFloat value = *dense.getValues<APFloat>().begin();
  if (&value.getSemantics() != &APFloat::IEEEsingle())
    return value.convertToDouble();
  // An f32 constant is read as the shortest decimal that rounds to it, so an
  // epsilon of 1e-5f becomes the 1e-5 a config.json gives.
  char digits[32];
  auto end =
      std::to_chars(digits, digits + sizeof digits - 1, value.convertToFloat());
  *end.ptr = '\0';
  return std::strtod(digits, nullptr);
}

bool isScalar(Value v, double c) {
  std::optional<double> s = scalar(v);
  return s && std::fabs(*s - c) <= 1e-4 * std::fabs(c);
}

Value other(Operation *op, Value v) {
  if (!op || op->getNumOperands() != 2)
    return nullptr;
  return op->getOperand(0) == v   ? op->getOperand(1)
         : op->getOperand(1) == v ? op->getOperand(0)
                                  : nullptr;
}

Value besideScalar(Operation *op, double c) {
  if (!op || op->getNumOperands() != 2)
    return nullptr;
  for (int i = 0; i < 2; ++i)
    if (isScalar(op->getOperand(i), c))
      return op->getOperand(1 - i);
  return nullptr;
}

std::optional<SmallVector<int64_t>> ints(Value v) {
  auto c = v ? v.getDefiningOp<ConstantOp>() : nullptr;
  auto dense = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : nullptr;
  if (!dense)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const APInt &i : dense.getValues<APInt>())
    out.push_back(i.getSExtValue());
  return out;
}

std::optional<SmallVector<int64_t>> intsAttr(Operation *op, StringRef name) {
  Attribute a = op->getAttr(name);
  if (auto i = dyn_cast_or_null<IntegerAttr>(a))
    return SmallVector<int64_t>{i.getInt()};
  if (auto arr = dyn_cast_or_null<DenseI64ArrayAttr>(a))
    return SmallVector<int64_t>(arr.asArrayRef());
  return std::nullopt;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

LogicalResult applyFusion(ModuleOp module, RewritePatternSet &&patterns) {
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (!isa<ParameterOp, ModuleOp>(op) && op->getDialect() &&
        isa<SbpDialect>(op->getDialect()))
      ops.push_back(op);
  });
  GreedyRewriteConfig config;
  config.strictMode = GreedyRewriteStrictness::ExistingAndNewOps;
  return applyOpPatternsAndFold(ops, std::move(patterns), config);
}

bool meansLastAxis(Operation *op) {
  if (!op || !isa<PrimitiveOp>(op) ||
      cast<PrimitiveOp>(op).getOpType() != "ReduceMean")
    return false;
  // Opset 18 moved axes from an attribute to a second input.
  std::optional<SmallVector<int64_t>> axes =
      op->getNumOperands() > 1 ? ints(op->getOperand(1)) : intsAttr(op, "axes");
  std::optional<SmallVector<int64_t>> keep = intsAttr(op, "keepdims");
  int64_t rank = shapeOf(op->getOperand(0)).size();
  return axes && axes->size() == 1 &&
         ((*axes)[0] == -1 || (*axes)[0] == rank - 1) &&
         (!keep || (*keep)[0] == 1);
}

} // namespace autoddl::sbp::fuse
