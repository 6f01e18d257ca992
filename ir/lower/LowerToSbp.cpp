//===- LowerToSbp.cpp - ModelGraph -> sbp dialect module ------------------===//
//
// A mechanical translation: inputs become the function's arguments, each
// parameter tensor one sbp.parameter, each OpDef the registered op "sbp."+kind
// with its attributes converted (docs/ir.md "Conventions"), located by a
// NameLoc of its name. The dialect's verifier (and through it the shared shape
// rules) then checks the result, and its diagnostics are the error.
//
//===----------------------------------------------------------------------===//
#include "ir/lower/LowerToSbp.h"
#include "ir/lower/BuildSbpModule.h"

#include "ir/dialect/OpSemanticsAdapter.h"
#include "ir/dialect/SbpDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace autoddl {
namespace {

/// The elements of a Constant tensor as the dense attribute of `type`, or null
/// when their count is not the shape's.
DenseElementsAttr constantValue(const TensorDef &t, RankedTensorType type) {
  if (int64_t(t.values.size()) != type.getNumElements())
    return nullptr;
  if (t.dtype == ops::DType::Bool) {
    SmallVector<bool> bits;
    for (double v : t.values)
      bits.push_back(v != 0);
    return DenseElementsAttr::get(type, bits);
  }
  // f32 (masks and tables, up to T² elements) without an APFloat each.
  if (t.dtype == ops::DType::F32) {
    std::vector<float> fs(t.values.begin(), t.values.end());
    return DenseElementsAttr::get(type, ArrayRef<float>(fs));
  }
  if (auto ft = dyn_cast<FloatType>(type.getElementType())) {
    SmallVector<APFloat> fs;
    for (double v : t.values) {
      APFloat f(v);
      bool lost = false;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      fs.push_back(f);
    }
    return DenseElementsAttr::get(type, fs);
  }
  unsigned width = type.getElementType().getIntOrFloatBitWidth();
  SmallVector<APInt> is;
  for (double v : t.values) {
    // Saturated: a Slice's "to the end" is INT64_MAX, 2^63 as a double.
    int64_t i = v >= 0x1p63 ? INT64_MAX : v <= -0x1p63 ? INT64_MIN : int64_t(v);
    is.push_back(APInt(width, i, /*isSigned=*/true));
  }
  return DenseElementsAttr::get(type, is);
}

} // namespace

std::string buildSbpModule(const ModelGraph &graph, ModuleOp module) {
  MLIRContext *context = module.getContext();
  OpBuilder builder(context);
  builder.setInsertionPointToEnd(module.getBody());
  auto nameLoc = [&](const std::string &name) {
    return NameLoc::get(builder.getStringAttr(name));
  };
  auto typeOf = [&](int tensor) {
    const TensorDef &t = graph.tensors[tensor];
    return sbp::toTensorType(context, ops::ValueType{t.shape, t.dtype});
  };
  if (graph.loss < 0 || graph.loss >= int(graph.tensors.size()))
    return "expected the model's loss to be one of its tensors, got index " +
           std::to_string(graph.loss);

  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  SmallVector<int> argTensors;
  for (auto [index, tensor] : llvm::enumerate(graph.tensors)) {
    if (tensor.role != TensorRole::Input)
      continue;
    argTypes.push_back(typeOf(index));
    argLocs.push_back(nameLoc(tensor.name));
    argTensors.push_back(index);
  }
  auto function = builder.create<func::FuncOp>(
      nameLoc(graph.name), graph.name.empty() ? "model" : graph.name,
      builder.getFunctionType(argTypes, {typeOf(graph.loss)}));
  Block *body = function.addEntryBlock();
  for (auto [i, loc] : llvm::enumerate(argLocs))
    body->getArgument(i).setLoc(loc);
  builder.setInsertionPointToStart(body);

  std::vector<Value> values(graph.tensors.size());
  for (auto [i, tensor] : llvm::enumerate(argTensors))
    values[tensor] = body->getArgument(i);

  for (auto [index, tensor] : llvm::enumerate(graph.tensors)) {
    if (tensor.role != TensorRole::Parameter)
      continue;
    SmallVector<NamedAttribute> attrs = {
        builder.getNamedAttr("name", builder.getStringAttr(tensor.name)),
        builder.getNamedAttr("init", builder.getStringAttr(tensor.init))};
    if (tensor.init == "normal")
      attrs.push_back(builder.getNamedAttr(
          "init_std", builder.getF64FloatAttr(tensor.initStd)));
    OperationState state(nameLoc(tensor.name), "sbp.parameter");
    state.addTypes(typeOf(index));
    state.addAttributes(attrs);
    values[index] = builder.create(state)->getResult(0);
  }

  // Constants that an op reads, each once, before the ops (as the reader
  // found them: initializers and Constant nodes).
  std::vector<bool> used(graph.tensors.size());
  for (const OpDef &def : graph.ops)
    for (int operand : def.operands)
      if (operand >= 0 && operand < int(used.size()))
        used[operand] = true;
  for (auto [index, tensor] : llvm::enumerate(graph.tensors)) {
    if (tensor.role != TensorRole::Constant || !used[index])
      continue;
    RankedTensorType type = typeOf(index);
    DenseElementsAttr value = constantValue(tensor, type);
    if (!value)
      return "constant '" + tensor.name + "': expected " +
             std::to_string(type.getNumElements()) + " values, got " +
             std::to_string(tensor.values.size());
    values[index] =
        builder.create<sbp::ConstantOp>(nameLoc(tensor.name), type, value)
            .getResult();
  }

  for (const OpDef &def : graph.ops) {
    std::string opName = (sbp::kOpPrefix + def.kind).str();
    if (!RegisteredOperationName::lookup(opName, context))
      return "op '" + def.name + "': expected an op kind of docs/ir.md, got '" +
             def.kind + "'";
    OperationState state(nameLoc(def.name), opName);
    for (int operand : def.operands) {
      if (operand < 0 || operand >= int(values.size()) || !values[operand])
        return "op '" + def.name + "': expected operand tensor #" +
               std::to_string(operand) + " to be defined before its use";
      state.addOperands(values[operand]);
    }
    for (int result : def.results) {
      if (result < 0 || result >= int(values.size()))
        return "op '" + def.name + "': expected result tensor #" +
               std::to_string(result) + " to exist";
      state.addTypes(typeOf(result));
    }
    for (const auto &[name, value] : def.attrs)
      state.addAttribute(name, sbp::toAttribute(builder, value));
    if (def.layer >= 0)
      state.addAttribute(sbp::kLayerAttr, builder.getI64IntegerAttr(def.layer));
    Operation *op = builder.create(state);
    for (auto [i, result] : llvm::enumerate(def.results))
      values[result] = op->getResult(i);
  }
  if (!values[graph.loss])
    return "expected the loss tensor '" + graph.tensors[graph.loss].name +
           "' to be produced by an op";
  builder.create<func::ReturnOp>(nameLoc(graph.name), values[graph.loss]);
  return "";
}

DiagnosticText::DiagnosticText(MLIRContext *context)
    : handler(context, [this](Diagnostic &diag) {
        llvm::raw_string_ostream os(text);
        if (!text.empty())
          os << "\n";
        if (auto named = dyn_cast<NameLoc>(diag.getLocation()))
          os << "op '" << named.getName().strref() << "': ";
        else
          os << diag.getLocation() << ": ";
        os << diag;
        return success();
      }) {}

OwningOpRef<ModuleOp> lowerToSbpModule(const ModelGraph &graph,
                                       MLIRContext &context,
                                       std::string &error) {
  DiagnosticText diagnostics(&context);
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(NameLoc::get(StringAttr::get(&context, graph.name)));
  error = buildSbpModule(graph, *module);
  if (!error.empty())
    return nullptr;
  if (failed(verify(*module))) {
    error = diagnostics.str("the module failed to verify");
    return nullptr;
  }
  return module;
}

LowerResult lowerToSbpText(const ModelGraph &graph) {
  MLIRContext context;
  context.loadDialect<sbp::SbpDialect, func::FuncDialect>();
  LowerResult result;
  OwningOpRef<ModuleOp> module = lowerToSbpModule(graph, context, result.error);
  if (!module)
    return result;
  // Locations inline, so the text keeps every op's and input's name:
  // `sbp.linear ... loc("h.0.attn.qkv")`.
  llvm::raw_string_ostream os(result.text);
  module->print(os, OpPrintingFlags().enableDebugInfo(/*enable=*/true,
                                                      /*prettyForm=*/false));
  return result;
}

} // namespace autoddl
