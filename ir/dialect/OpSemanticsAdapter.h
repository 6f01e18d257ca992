//===- OpSemanticsAdapter.h - MLIR types/attributes <-> ir/ops values -----===//
//
// The shared op rules (ir/ops/OpSemantics.h) speak plain C++: ops::ValueType
// and ops::Attrs. These adapters let one verifier serve every op of the
// vocabulary and let the lowering build ops from a ModelGraph.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/ops/OpSemantics.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

#include <optional>
#include <string>

namespace autoddl::sbp {

/// The element type of `dtype` in the IR (f32, bf16, f16, i32, i64).
mlir::Type toElementType(mlir::MLIRContext *context, ops::DType dtype);
/// A ranked tensor type of `value`'s shape and element type.
mlir::RankedTensorType toTensorType(mlir::MLIRContext *context,
                                    const ops::ValueType &value);
/// The value type of a ranked tensor of a supported element type, or nullopt.
std::optional<ops::ValueType> toValueType(mlir::Type type);

/// The IR attribute of an ops::AttrValue: I64Attr, F64Attr, BoolAttr, StrAttr
/// or DenseI64ArrayAttr (docs/ir.md "Conventions").
mlir::Attribute toAttribute(mlir::Builder &builder,
                            const ops::AttrValue &value);
/// The ops::AttrValue of one of those attributes, or nullopt for any other.
std::optional<ops::AttrValue> toAttrValue(mlir::Attribute attr);

/// The op's kind in the vocabulary ("linear" for sbp.linear).
llvm::StringRef getOpKind(mlir::Operation *op);

/// The op's inherent attributes as ops::Attrs, with the defaults of the shared
/// rules filled in (ops::withDefaults). Discardable attributes are skipped.
/// Fails with a message on an attribute of a kind the vocabulary lacks.
std::optional<ops::Attrs> getOpsAttrs(mlir::Operation *op,
                                      std::string *error = nullptr);

/// Checks `op` against the shared rules: converts its operand types and its
/// inherent attributes, infers result types and compares them with the op's.
/// Returns the lower-case message of the first problem, or "" when it holds.
std::string checkOpSemantics(mlir::Operation *op);

} // namespace autoddl::sbp
