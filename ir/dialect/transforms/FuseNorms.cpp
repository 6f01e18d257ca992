//===- FuseNorms.cpp - sbp-fuse-norms -------------------------------------===//
//
// LayerNorm and RMSNorm written as primitives become sbp.layernorm and
// sbp.rmsnorm. One pattern, anchored at the Sqrt (or Rsqrt) of
// mean(x²) + eps: x centred by its own mean makes it a LayerNorm, any other x
// an RMSNorm.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/transforms/FuseSupport.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "sbp-fuse-norms"

using namespace mlir;

namespace autoddl::sbp {

#define GEN_PASS_DEF_FUSENORMSPASS
#include "ir/dialect/Passes.h.inc"

namespace {

using namespace fuse;

/// The square's base: Pow(x, 2) or Mul(x, x).
Value squared(Value v) {
  if (Operation *p = producer(v, "Pow"))
    return isScalar(p->getOperand(1), 2.0) ? p->getOperand(0) : nullptr;
  if (Operation *m = producer(v, "Mul"))
    return m->getOperand(0) == m->getOperand(1) ? m->getOperand(0) : nullptr;
  return nullptr;
}

/// Of a Mul by a rank-1 value of the last dimension's size, that value.
Value scaleBy(Operation *op, Value x, StringRef onnx) {
  Value s = other(op, x);
  if (!s || shapeOf(s).size() != 1 || shapeOf(s)[0] != shapeOf(x).back() ||
      op->getResult(0).getType() != x.getType())
    return nullptr;
  if (onnx == "Add" && isa<BiasAddOp>(op) && op->getOperand(0) != x)
    return nullptr;
  return s;
}

struct DecomposedNorm : OpRewritePattern<PrimitiveOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PrimitiveOp root,
                                PatternRewriter &rewriter) const override {
    bool rsqrt = root.getOpType() == "Rsqrt";
    if ((!rsqrt && root.getOpType() != "Sqrt") || root.getInputs().size() != 1)
      return failure();
    // mean(x^2) + eps
    Operation *addEps = producer(root.getInputs()[0], "Add");
    std::optional<double> eps;
    Operation *mean = nullptr;
    for (int i = 0; addEps && i < 2 && !mean; ++i)
      if ((eps = scalar(addEps->getOperand(i))))
        mean = producer(addEps->getOperand(1 - i), "ReduceMean");
    if (!meansLastAxis(mean) || !(*eps > 0))
      return failure();
    Value x = squared(mean->getOperand(0));
    if (!x)
      return failure();
    // x / sqrt, x * (1 / sqrt) or x * rsqrt
    Value s = root.getResult();
    Operation *normed = nullptr;
    if (!rsqrt) {
      Operation *div = soleUser(s, "Div");
      if (div && div->getOperand(0) == x && div->getOperand(1) == s)
        normed = div;
      if (Operation *recip = soleUser(s, "Reciprocal"))
        s = recip->getResult(0), rsqrt = true;
    }
    if (rsqrt) {
      Operation *mul = soleUser(s, "Mul");
      if (other(mul, s) == x)
        normed = mul;
    }
    if (!normed || normed->getResult(0).getType() != x.getType())
      return failure();
    Value n = normed->getResult(0);
    Operation *scale = soleUser(n, "Mul");
    Value gamma = scale ? scaleBy(scale, n, "Mul") : nullptr;
    if (!gamma)
      return failure();
    // A LayerNorm's x is itself minus its mean.
    Operation *centre = producer(x, "Sub");
    Operation *mu =
        centre ? producer(centre->getOperand(1), "ReduceMean") : nullptr;
    NamedAttribute epsAttr =
        rewriter.getNamedAttr("epsilon", rewriter.getF64FloatAttr(*eps));
    if (meansLastAxis(mu) && mu->getOperand(0) == centre->getOperand(0)) {
      Value in = centre->getOperand(0);
      SmallVector<Value> operands = {in, gamma};
      Operation *last = scale;
      Operation *shift = soleUser(scale->getResult(0), "Add");
      if (Value beta =
              shift ? scaleBy(shift, scale->getResult(0), "Add") : nullptr) {
        operands.push_back(beta);
        last = shift;
      }
      rewriter.setInsertionPoint(last);
      auto ln = rewriter.create<LayernormOp>(last->getLoc(),
                                             TypeRange{in.getType()}, operands,
                                             ArrayRef<NamedAttribute>{epsAttr});
      LLVM_DEBUG(llvm::dbgs() << "layernorm at " << last->getLoc() << "\n");
      rewriter.replaceOp(last, ln->getResults());
      return success();
    }
    rewriter.setInsertionPoint(scale);
    auto rms = rewriter.create<RmsnormOp>(
        scale->getLoc(), TypeRange{x.getType()}, ValueRange{x, gamma},
        ArrayRef<NamedAttribute>{epsAttr});
    rewriter.replaceOp(scale, rms->getResults());
    return success();
  }
};

struct FuseNormsPass
    : FusionPass<FuseNormsPass, impl::FuseNormsPassBase, DecomposedNorm> {};

} // namespace

} // namespace autoddl::sbp
