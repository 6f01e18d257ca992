//===- LowerToSbpTest.cpp - ModelGraph -> sbp module ----------------------===//
#include "ir/lower/LowerToSbp.h"

#include "ir/dialect/SbpDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace autoddl;

namespace {

/// A two-layer classifier: x [4,8] -> linear(16) -> relu -> linear(3) ->
/// cross-entropy against i32 targets [4].
ModelGraph tinyClassifier() {
  ModelGraph g;
  g.name = "tiny";
  g.family = "mlp";
  auto tensor = [&](std::string name, ops::Shape shape, TensorRole role,
                    ops::DType dtype = ops::DType::F32) {
    TensorDef t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.role = role;
    t.dtype = dtype;
    if (role == TensorRole::Parameter) {
      t.init = "normal";
      t.initStd = 0.02;
    }
    g.tensors.push_back(t);
    return int(g.tensors.size()) - 1;
  };
  int x = tensor("x", {4, 8}, TensorRole::Input);
  int targets = tensor("targets", {4}, TensorRole::Input, ops::DType::I32);
  int w1 = tensor("fc1.weight", {16, 8}, TensorRole::Parameter);
  int w2 = tensor("fc2.weight", {3, 16}, TensorRole::Parameter);
  int h = tensor("h", {4, 16}, TensorRole::Activation);
  int a = tensor("a", {4, 16}, TensorRole::Activation);
  int logits = tensor("logits", {4, 3}, TensorRole::Activation);
  int loss = tensor("loss", {}, TensorRole::Activation);
  g.ops.push_back({"linear", "fc1", {x, w1}, {h}, {}, 0});
  g.ops.push_back({"relu", "act", {h}, {a}, {}, 0});
  g.ops.push_back({"linear", "fc2", {a, w2}, {logits}, {}, 1});
  g.ops.push_back({"cross_entropy", "loss", {logits, targets}, {loss}, {}, -1});
  g.loss = loss;
  return g;
}

TEST(LowerToSbpTest, LowersOneOpPerOpDefAndVerifies) {
  LowerResult lowered = lowerToSbpText(tinyClassifier());
  ASSERT_TRUE(lowered.ok()) << lowered.error;

  // The text parses back and verifies: what the CLI writes, autoddl-opt reads.
  mlir::MLIRContext context;
  context.loadDialect<sbp::SbpDialect, mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(lowered.text, &context);
  ASSERT_TRUE(module) << lowered.text;

  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  // Names survive the text as locations (docs/ir.md: a NameLoc per op).
  EXPECT_NE(lowered.text.find("sbp.relu"), std::string::npos);
  EXPECT_NE(lowered.text.find("loc(\"act\")"), std::string::npos);
  EXPECT_NE(lowered.text.find("loc(\"targets\")"), std::string::npos);
  EXPECT_EQ(function.getSymName(), "tiny");
  // Inputs are the arguments (x, targets), in tensor order.
  ASSERT_EQ(function.getNumArguments(), 2u);
  mlir::Builder b(&context);
  EXPECT_EQ(function.getArgumentTypes()[1],
            mlir::RankedTensorType::get({4}, b.getI32Type()));

  // Two parameters, then the four OpDefs in order.
  std::vector<std::string> names;
  for (mlir::Operation &op : function.getBody().front())
    names.push_back(op.getName().getStringRef().str());
  std::vector<std::string> expected = {
      "sbp.parameter", "sbp.parameter",     "sbp.linear", "sbp.relu",
      "sbp.linear",    "sbp.cross_entropy", "func.return"};
  EXPECT_EQ(names, expected);

  // OpDef.layer becomes sbp.layer; ops outside blocks carry none.
  auto ops = function.getBody().front().getOperations().begin();
  std::advance(ops, 4);
  EXPECT_EQ(ops->getAttrOfType<mlir::IntegerAttr>(sbp::kLayerAttr).getInt(), 1);
  std::advance(ops, 1);
  EXPECT_FALSE(ops->hasAttr(sbp::kLayerAttr));
  // A normal-initialised parameter keeps its std.
  auto w1 = *function.getOps<sbp::ParameterOp>().begin();
  EXPECT_EQ(w1.getName(), "fc1.weight");
  EXPECT_DOUBLE_EQ(w1.getInitStd()->convertToDouble(), 0.02);
}

TEST(LowerToSbpTest, ReportsShapeErrorsWithTheOpName) {
  ModelGraph g = tinyClassifier();
  // fc2 declared [3,16] becomes [3,15]: K no longer matches the activation.
  g.tensors[3].shape = {3, 15};
  LowerResult lowered = lowerToSbpText(g);
  ASSERT_FALSE(lowered.ok());
  EXPECT_NE(lowered.error.find("op 'fc2'"), std::string::npos) << lowered.error;
}

TEST(LowerToSbpTest, RejectsUnknownKindsAndUseBeforeDefinition) {
  ModelGraph unknown = tinyClassifier();
  unknown.ops[1].kind = "tanh";
  EXPECT_NE(lowerToSbpText(unknown).error.find(
                "expected an op kind of docs/ir.md, got 'tanh'"),
            std::string::npos);

  ModelGraph reordered = tinyClassifier();
  std::swap(reordered.ops[0], reordered.ops[1]);
  EXPECT_NE(lowerToSbpText(reordered).error.find(
                "op 'act': expected operand tensor #4 to be defined"),
            std::string::npos);
}

} // namespace
