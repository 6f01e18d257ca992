//===- FuseSupport.h - matching helpers of the sbp-fuse-* passes ---------===//
//
// An imported graph spells one ONNX operator either as a model op (sbp.add,
// sbp.mul, sbp.bias_add when the shapes allow) or as sbp.primitive; these
// helpers let a pattern ask for "the Mul producing v" without caring which.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/dialect/SbpDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace autoddl::sbp::fuse {

/// The op defining `v` if it computes the ONNX operator `onnx` ("Add" also
/// matches sbp.add and sbp.bias_add, "Mul" sbp.mul, "MatMul" sbp.matmul
/// without transpose_b, "Softmax", "Reshape", "Transpose" their model ops),
/// else null.
mlir::Operation *producer(mlir::Value v, llvm::StringRef onnx);

/// The only user of `v` if it computes `onnx` (as producer() reads it).
mlir::Operation *soleUser(mlir::Value v, llvm::StringRef onnx);

/// The value of a single-element floating constant (sbp.constant), if `v` is
/// one.
std::optional<double> scalar(mlir::Value v);

/// Whether `v` is the scalar constant `c`, within 1e-4 relative.
bool isScalar(mlir::Value v, double c);

/// Of a two-input op, the operand that is not `v` (null if neither is).
mlir::Value other(mlir::Operation *op, mlir::Value v);

/// Of a two-input op, the operand beside the scalar constant `c` (null if
/// neither is `c`).
mlir::Value besideScalar(mlir::Operation *op, double c);

/// Whether `op` is a ReduceMean over only the last axis keeping it.
bool meansLastAxis(mlir::Operation *op);

/// The int64 values of a constant operand or an i64 array attribute.
std::optional<llvm::SmallVector<int64_t>> ints(mlir::Value v);

/// A primitive's integer (array) attribute `name`, if present.
std::optional<llvm::SmallVector<int64_t>> intsAttr(mlir::Operation *op,
                                                   llvm::StringRef name);

/// The transpose producing `v` if its permutation is `perm`, else null.
mlir::Operation *transposeOf(mlir::Value v, llvm::ArrayRef<int64_t> perm);

/// Of heads [B,H,T,D] made as transpose(0,2,1,3) of reshape([B,T,H,D]) of
/// x [B,T,H*D]: x, and H in `heads`; null if `v4` is not made so.
mlir::Value headSource(mlir::Value v4, int64_t &heads);

/// Applies a fusion pass's patterns to every op of `module` but the
/// parameters: primitives left unused are erased, an unused sbp.parameter never
/// is (the greedy driver over the whole module would drop it, changing the
/// parameter count).
mlir::LogicalResult applyFusion(mlir::ModuleOp module,
                                mlir::RewritePatternSet &&patterns);

/// The body every sbp-fuse-* pass shares: `Patterns` applied by applyFusion.
/// `GeneratedBase` is the pass's tablegen'd impl::<Name>PassBase; `Derived`
/// the pass itself (its friend create<Name>Pass makes a Derived):
///   struct FuseXPass : FusionPass<FuseXPass, impl::FuseXPassBase, P1, P2> {};
template <class Derived, template <class> class GeneratedBase,
          class... Patterns>
struct FusionPass : GeneratedBase<Derived> {
  void runOnOperation() override {
    mlir::RewritePatternSet patterns(&this->getContext());
    patterns.add<Patterns...>(&this->getContext());
    if (mlir::failed(applyFusion(this->getOperation(), std::move(patterns))))
      this->signalPassFailure();
  }
};

/// The rank and shape of a ranked tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);

} // namespace autoddl::sbp::fuse
