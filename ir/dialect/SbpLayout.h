//===- SbpLayout.h - layouts of values, signatures over a mesh ------------===//
//
// Bridges the typed attributes and the plain values of SbpParallel.h, finds the
// layout a value is produced and read in, and builds nd signatures from 1-D
// ones (OneFlow: the nd signatures of an op are the per-mesh-axis products of
// its 1-D signatures, filtered by the tensor shapes).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/dialect/SbpDialect.h"

namespace autoddl::sbp {

/// #sbp.split<d>, #sbp.broadcast or #sbp.partial<r>.
mlir::Attribute toAttr(mlir::MLIRContext *context, const SbpParallel &layout);
/// The plain value of a (verified) mesh-axis layout attribute.
SbpParallel fromAttr(mlir::Attribute attr);

/// The layout `value` is produced in: its producer's sbp.sig result entry, or a
/// function argument's sbp.nd. Null when it has none.
NdSbpAttr getProducedLayout(mlir::Value value);
/// The layout `user` reads its operand #index in (from its sbp.sig), or null.
NdSbpAttr getReadLayout(mlir::Operation *user, unsigned index);

/// The op's 1-D signatures: its table followed by all-broadcast, without
/// duplicates, in table order.
llvm::SmallVector<SbpSignature> getValidSignatures1D(SbpOpInterface op);

/// The 1-D signature `sig` induces on one mesh axis.
SbpSignature projectSignature(SignatureAttr sig, unsigned axis);
/// The nd signature whose mesh axis i takes `perAxis[i]`.
SignatureAttr buildSignature(mlir::MLIRContext *context,
                             mlir::FlatSymbolRefAttr mesh,
                             llvm::ArrayRef<SbpSignature> perAxis);
/// Whether every layout of the nd signature fits its value (checkLayoutFits,
/// with the op's split granules).
bool signatureFits(SbpOpInterface op, SignatureAttr sig, MeshOp mesh);

/// Every valid nd signature of `op` on `mesh`: the product over mesh axes of
/// the 1-D signatures, keeping those whose splits divide the shapes. Ordered
/// lexicographically by the 1-D signatures' positions, first axis outermost.
/// Assumes `op` passes its own verifier.
llvm::SmallVector<SignatureAttr> enumerateNdSignatures(SbpOpInterface op,
                                                       MeshOp mesh);

/// The backward nd signature of `forward`: per axis, the op's
/// getBackwardSignature of the projected 1-D signature.
SignatureAttr getBackwardSignature(SbpOpInterface op, SignatureAttr forward);

} // namespace autoddl::sbp
