//===- SbpConstants.h - the names of the sbp dialect's discardable attributes
//===//
//
// Every attribute name the dialect reads or writes outside an op's own ODS
// arguments, written once. The dialect verifies each of them in
// SbpDialect::verifyOperationAttribute / verifyRegionArgAttribute.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"

namespace autoddl::sbp {

/// On any op: #sbp.sig, the layouts of its operands and results.
inline constexpr llvm::StringLiteral kSignatureAttr = "sbp.sig";
/// On a function argument: #sbp.nd, the layout the argument arrives in.
inline constexpr llvm::StringLiteral kArgLayoutAttr = "sbp.nd";
/// On any op: #sbp.placement, its pipeline stage and that stage's mesh.
inline constexpr llvm::StringLiteral kPlacementAttr = "sbp.placement";
/// On ops of a repeated block: i64, the block (transformer layer) index.
inline constexpr llvm::StringLiteral kLayerAttr = "sbp.layer";

/// On a cross_entropy: i64, the classes among its logits' columns, the rest a
/// padded vocabulary's zero columns, left out of the softmax and the loss
/// (ops::paddedVocabulary; written by the plan's lowering, ir/lower/LowerPlan).
inline constexpr llvm::StringLiteral kClassesAttr = "sbp.classes";

/// The dialect prefix of op names: "sbp." + kind gives the registered op.
inline constexpr llvm::StringLiteral kOpPrefix = "sbp.";

} // namespace autoddl::sbp
