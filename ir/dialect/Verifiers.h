//===- Verifiers.h - every check of the sbp dialect, as small helpers -----===//
//
// All verification of the dialect lives in Verifiers.cpp: attribute
// constraints, layouts against tensor types and meshes, signatures against the
// op interface, collectives, send/recv. Messages are lower-case, without a
// trailing period, and say what was expected and what was got.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/dialect/SbpDialect.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace autoddl::sbp {

using EmitErrorFn = llvm::function_ref<mlir::InFlightDiagnostic()>;

//===- attributes on their own
//---------------------------------------------===//
mlir::LogicalResult verifySplitDim(EmitErrorFn emitError, int64_t dim);
mlir::LogicalResult verifyAxisLayouts(EmitErrorFn emitError,
                                      llvm::ArrayRef<mlir::Attribute> axes);
mlir::LogicalResult verifySameMesh(EmitErrorFn emitError,
                                   mlir::FlatSymbolRefAttr mesh,
                                   llvm::ArrayRef<NdSbpAttr> layouts);
mlir::LogicalResult verifyStage(EmitErrorFn emitError, int64_t stage);

//===- layouts in context
//--------------------------------------------------===//
/// Why `layout` cannot lay out a value of `type` on `mesh`, or nullopt if it
/// can: entry count equals the mesh rank; each split dim is below the rank and
/// its size divisible by granule(dim) times the sizes of the axes splitting it.
std::optional<std::string>
checkLayoutFits(NdSbpAttr layout, mlir::Type type, MeshOp mesh,
                llvm::function_ref<int64_t(int64_t dim)> granule = nullptr);

/// The mesh `symbol` names as seen from `from`, with an error if there is none.
mlir::FailureOr<MeshOp> resolveMesh(mlir::Operation *from,
                                    mlir::FlatSymbolRefAttr symbol);

//===- the dialect's hooks
//-------------------------------------------------===//
mlir::LogicalResult verifyDiscardableAttribute(mlir::Operation *op,
                                               mlir::NamedAttribute attr);
mlir::LogicalResult verifyArgumentAttribute(mlir::Operation *op,
                                            unsigned argIndex,
                                            mlir::NamedAttribute attr);

//===- ops ----------------------------------------------------------------===//
mlir::LogicalResult verifyMesh(MeshOp mesh);

/// A collective's check of one listed mesh axis: whether `in -> out` is the
/// change the op performs.
using AxisTransitionCheck =
    llvm::function_ref<bool(const SbpParallel &in, const SbpParallel &out)>;
/// Checks a collective: it carries sbp.sig on `mesh`, `meshAxes` are distinct
/// axes of the mesh, each listed axis changes as `check` accepts (described by
/// `expected`, e.g. "S(0) -> B"), and every other axis is unchanged.
mlir::LogicalResult verifyCollective(mlir::Operation *op,
                                     mlir::FlatSymbolRefAttr mesh,
                                     llvm::ArrayRef<int64_t> meshAxes,
                                     llvm::StringRef expected,
                                     AxisTransitionCheck check);
mlir::LogicalResult verifySend(SendOp op);
mlir::LogicalResult verifyRecv(RecvOp op);

//===- a whole module -----------------------------------------------------===//
/// mlir::verify(module), its ops' lookups in the module (their mesh, the
/// sbp.mesh count, a send's or recv's peers on its channel) answered from one
/// walk made first: linear in the module's size where a lone mlir::verify
/// scans the module per op (O(ops x (meshes + transfers)): seconds on a
/// 1,024-layer pipeline plan). The same diagnostics. The module must not
/// change during the call (verification does not change it).
mlir::LogicalResult verifyModule(mlir::ModuleOp module);

} // namespace autoddl::sbp
