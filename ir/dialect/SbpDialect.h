//===- SbpDialect.h - the sbp dialect: attributes, interface, ops --------===//
//
// The one header to include for the dialect. Order matters: the plain layout
// values come first because the generated interface uses them; the native trait
// comes before the ops that carry it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/dialect/SbpConstants.h"
#include "ir/dialect/SbpParallel.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/dialect/SbpDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/dialect/SbpAttrs.h.inc"

#include "ir/dialect/SbpInterfaces.h.inc"

namespace autoddl::sbp {
/// Checks an op of the model vocabulary against ir/ops/OpSemantics.h
/// (Verifiers.cpp).
mlir::LogicalResult verifyOpSemantics(mlir::Operation *op);

namespace OpTrait {
template <typename ConcreteType>
class OpSemanticsVerified
    : public mlir::OpTrait::TraitBase<ConcreteType, OpSemanticsVerified> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyOpSemantics(op);
  }
};
} // namespace OpTrait
} // namespace autoddl::sbp

#define GET_OP_CLASSES
#include "ir/dialect/SbpOps.h.inc"
