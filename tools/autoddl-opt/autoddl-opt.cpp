//===- autoddl-opt.cpp - mlir-opt for the sbp dialect ---------------------===//
//
// Parses, verifies, transforms and prints sbp modules:
//   autoddl-opt model.mlir --sbp-assign-data-parallel --sbp-insert-boxing
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/SbpDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<autoddl::sbp::SbpDialect, mlir::func::FuncDialect>();
  autoddl::sbp::registerSbpPasses();
  // Generic cleanups (-canonicalize, -cse, -symbol-dce) to use alongside.
  mlir::registerTransformsPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "autoddl-opt: the sbp dialect and its passes\n", registry));
}
