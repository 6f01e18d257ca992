//===- BuiltinModelsTest.cpp - real models through the dialect ------------===//
//
// The importers, the lowering and the dialect agree: every built-in model
// (examples/models) lowers to IR that verifies, takes sbp-assign-data-parallel
// on a 2 x 2 mesh, and boxes.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/SbpDialect.h"
#include "ir/import/ModelImporter.h"
#include "ir/lower/LowerToSbp.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace autoddl;

namespace {

class BuiltinModelsTest : public ::testing::TestWithParam<std::string> {
protected:
  BuiltinModelsTest() {
    context.loadDialect<sbp::SbpDialect, func::FuncDialect>();
  }
  MLIRContext context;
};

/// Imports `name` with a batch of 4 (divisible by dp = 2) and, for sequence
/// models, a short sequence (the op count does not depend on it). The importer
/// refuses --seq for non-sequence models and both for explicit graphs, whose
/// shapes are fixed.
ModelGraph importSmall(const std::string &name) {
  for (import::ImportOptions options :
       {import::ImportOptions{4, 16, ""}, import::ImportOptions{4, 0, ""},
        import::ImportOptions{}}) {
    try {
      return import::importModel(name, options);
    } catch (const std::exception &) {
    }
  }
  ADD_FAILURE() << name << " imports with no options";
  return {};
}

/// Counts the ops of `T` in `module`.
template <typename... T> int count(ModuleOp module) {
  int n = 0;
  module.walk([&](Operation *op) { n += isa<T...>(op); });
  return n;
}

TEST_P(BuiltinModelsTest, LowersVerifiesAndTakesADataParallelPlan) {
  ModelGraph graph = importSmall(GetParam());
  LowerResult lowered = lowerToSbpText(graph);
  ASSERT_TRUE(lowered.ok()) << lowered.error;

  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(lowered.text, &context);
  ASSERT_TRUE(module);
  // One sbp op per OpDef plus one sbp.parameter per parameter tensor.
  int parameters = 0;
  for (const TensorDef &t : graph.tensors)
    parameters += t.role == TensorRole::Parameter;
  EXPECT_EQ(count<sbp::ParameterOp>(*module), parameters);

  OpBuilder builder(module->getBody(), module->getBody()->begin());
  builder.create<sbp::MeshOp>(module->getLoc(), "mesh",
                              builder.getStrArrayAttr({"dp", "tp"}),
                              builder.getDenseI64ArrayAttr({2, 2}), nullptr);
  PassManager pm(&context);
  pm.addPass(sbp::createAssignDataParallelPass());
  pm.addPass(sbp::createInsertBoxingPass());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  // Every model op got a signature, and the result still verifies.
  module->walk([&](sbp::SbpOpInterface op) {
    EXPECT_TRUE(op->hasAttr(sbp::kSignatureAttr))
        << op->getName().getStringRef().str();
  });
  EXPECT_TRUE(succeeded(verify(*module)));
  // Transformers are batch-parallel end to end: the batch split flows from
  // the token ids to the loss, so the forward needs no collective at all
  // (data parallelism communicates only gradients).
  if (graph.family == "gpt" || graph.family == "llama" ||
      graph.family == "bert") {
    EXPECT_EQ((count<sbp::AllReduceOp, sbp::AllGatherOp, sbp::ReduceScatterOp,
                     sbp::AllToAllOp, sbp::LocalRelayoutOp>(*module)),
              0);
  }
}

INSTANTIATE_TEST_SUITE_P(Builtins, BuiltinModelsTest,
                         ::testing::ValuesIn(import::builtinModelNames()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           std::string name = info.param;
                           for (char &c : name)
                             if (!isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return name;
                         });

} // namespace
