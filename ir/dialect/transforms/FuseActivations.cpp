//===- FuseActivations.cpp - sbp-fuse-activations -------------------------===//
//
// The GELUs, SiLUs and SwiGLUs an exporter writes as primitives become the
// model ops the Hugging Face path emits (docs/model-format.md "ONNX").
// Each pattern is anchored at the op only that form has (Erf, Tanh, Sigmoid,
// sbp.silu) and replaces the last op of the form; the primitives left unused
// are erased by the greedy driver.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/transforms/FuseSupport.h"

#include "llvm/Support/Debug.h"

#include <cmath>

#define DEBUG_TYPE "sbp-fuse-activations"

using namespace mlir;

namespace autoddl::sbp {

#define GEN_PASS_DEF_FUSEACTIVATIONSPASS
#include "ir/dialect/Passes.h.inc"

namespace {

using namespace fuse;

/// From 1 + f(x) (`onePlus`): the op computing x·(1 + f)·0.5 with the halving
/// on either side, or null.
Operation *halfProduct(Value onePlus, Value x) {
  Operation *mul = soleUser(onePlus, "Mul");
  Value o = other(mul, onePlus);
  if (!o)
    return nullptr;
  if (o == x) { // (x * (1 + f)) * 0.5
    Operation *half = soleUser(mul->getResult(0), "Mul");
    return besideScalar(half, 0.5) == mul->getResult(0) ? half : nullptr;
  }
  Operation *h = producer(o, "Mul"); // (x * 0.5) * (1 + f)
  return besideScalar(h, 0.5) == x ? mul : nullptr;
}

LogicalResult replaceWithGelu(PatternRewriter &rewriter, Operation *root,
                              Value x, StringRef approximate) {
  if (root->getResult(0).getType() != x.getType())
    return failure();
  rewriter.setInsertionPoint(root);
  auto gelu = rewriter.create<GeluOp>(
      root->getLoc(), TypeRange{x.getType()}, ValueRange{x},
      ArrayRef<NamedAttribute>{rewriter.getNamedAttr(
          "approximate", rewriter.getStringAttr(approximate))});
  rewriter.replaceOp(root, gelu->getResults());
  return success();
}

// 0.5 * x * (1 + erf(x / sqrt(2)))
struct ErfGelu : OpRewritePattern<PrimitiveOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PrimitiveOp erf,
                                PatternRewriter &rewriter) const override {
    if (erf.getOpType() != "Erf" || erf.getInputs().size() != 1)
      return failure();
    Value in = erf.getInputs()[0], x;
    if (Operation *d = producer(in, "Div"))
      if (isScalar(d->getOperand(1), std::sqrt(2.0)))
        x = d->getOperand(0);
    if (!x)
      x = besideScalar(producer(in, "Mul"), 1 / std::sqrt(2.0));
    Operation *add = soleUser(erf.getResult(), "Add");
    if (!x || besideScalar(add, 1.0) != erf.getResult())
      return failure();
    Operation *root = halfProduct(add->getResult(0), x);
    if (!root)
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "erf gelu at " << root->getLoc() << "\n");
    return replaceWithGelu(rewriter, root, x, "none");
  }
};

// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
struct TanhGelu : OpRewritePattern<PrimitiveOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PrimitiveOp tanh,
                                PatternRewriter &rewriter) const override {
    if (tanh.getOpType() != "Tanh" || tanh.getInputs().size() != 1)
      return failure();
    Value inner =
        besideScalar(producer(tanh.getInputs()[0], "Mul"), std::sqrt(2 / M_PI));
    Operation *sum = producer(inner, "Add");
    if (!sum)
      return failure();
    Value x;
    for (int i = 0; i < 2 && !x; ++i) {
      Value cube = besideScalar(producer(sum->getOperand(i), "Mul"), 0.044715);
      Operation *pow = producer(cube, "Pow");
      if (pow && isScalar(pow->getOperand(1), 3.0) &&
          pow->getOperand(0) == sum->getOperand(1 - i))
        x = pow->getOperand(0);
    }
    Operation *add = soleUser(tanh.getResult(), "Add");
    if (!x || besideScalar(add, 1.0) != tanh.getResult())
      return failure();
    Operation *root = halfProduct(add->getResult(0), x);
    if (!root)
      return failure();
    return replaceWithGelu(rewriter, root, x, "tanh");
  }
};

// x * sigmoid(x)
struct SigmoidSilu : OpRewritePattern<PrimitiveOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PrimitiveOp sigmoid,
                                PatternRewriter &rewriter) const override {
    if (sigmoid.getOpType() != "Sigmoid" || sigmoid.getInputs().size() != 1)
      return failure();
    Value x = sigmoid.getInputs()[0];
    Operation *mul = soleUser(sigmoid.getResult(), "Mul");
    if (other(mul, sigmoid.getResult()) != x ||
        mul->getResult(0).getType() != x.getType())
      return failure();
    rewriter.setInsertionPoint(mul);
    rewriter.replaceOpWithNewOp<SiluOp>(mul, x.getType(), x);
    return success();
  }
};

// silu(gate) * up, gate and up of one shape
struct SiluSwiglu : OpRewritePattern<SiluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SiluOp silu,
                                PatternRewriter &rewriter) const override {
    Operation *mul = soleUser(silu.getResult(), "Mul");
    Value up = other(mul, silu.getResult());
    Value gate = silu.getX();
    if (!up || up.getType() != gate.getType() ||
        mul->getResult(0).getType() != gate.getType())
      return failure();
    rewriter.setInsertionPoint(mul);
    rewriter.replaceOpWithNewOp<SwigluOp>(mul, gate.getType(), gate, up);
    return success();
  }
};

struct FuseActivationsPass
    : FusionPass<FuseActivationsPass, impl::FuseActivationsPassBase, ErfGelu,
                 TanhGelu, SigmoidSilu, SiluSwiglu> {};

} // namespace

} // namespace autoddl::sbp
