//===- FuseLinear.cpp - sbp-fuse-linear -----------------------------------===//
//
// Exporters write a linear layer over [B,T,K] as reshape [B·T,K], a 2-D
// GEMM, reshape back (GPT-2's Conv1D: addmm); the model ops take the 3-D
// input directly, as the Hugging Face path emits them. This pass also drops
// the reshapes to the shape a value already has (an export's view(-1, T) of
// [B,T] ids).
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/transforms/FuseSupport.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace autoddl::sbp {

#define GEN_PASS_DEF_FUSELINEARPASS
#include "ir/dialect/Passes.h.inc"

namespace {

using namespace fuse;

struct IdentityReshape : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    if (op->getOperand(0).getType() != op->getResult(0).getType())
      return failure();
    rewriter.replaceOp(op, op->getOperand(0));
    return success();
  }
};

/// reshape(linear(reshape(x, [B·T,K])), [B,T,N]) -> linear(x) [B,T,N].
struct FlattenedLinear : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp back,
                                PatternRewriter &rewriter) const override {
    auto lin = back->getOperand(0).getDefiningOp<LinearOp>();
    auto flat = lin ? lin->getOperand(0).getDefiningOp<ReshapeOp>() : nullptr;
    if (!flat || !lin->getResult(0).hasOneUse())
      return failure();
    Value x = flat->getOperand(0);
    ArrayRef<int64_t> xs = shapeOf(x), fs = shapeOf(flat->getResult(0)),
                      os = shapeOf(back->getResult(0)),
                      ls = shapeOf(lin->getResult(0));
    if (xs.size() < 3 || fs.size() != 2 || ls.size() != 2 ||
        os.size() != xs.size() || fs[1] != xs.back() || os.back() != ls[1] ||
        !std::equal(xs.begin(), xs.end() - 1, os.begin()))
      return failure();
    IRMapping map;
    map.map(flat->getResult(0), x);
    rewriter.setInsertionPoint(back);
    Operation *fused = rewriter.clone(*lin, map);
    fused->setLoc(back->getLoc());
    fused->getResult(0).setType(back->getResult(0).getType());
    rewriter.replaceOp(back, fused->getResults());
    return success();
  }
};

struct FuseLinearPass : FusionPass<FuseLinearPass, impl::FuseLinearPassBase,
                                   IdentityReshape, FlattenedLinear> {};

} // namespace

} // namespace autoddl::sbp
