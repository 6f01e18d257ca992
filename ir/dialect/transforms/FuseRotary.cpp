//===- FuseRotary.cpp - sbp-fuse-rotary -----------------------------------===//
//
// Hugging Face Llama's apply_rotary_pos_emb as an exporter writes it,
// x·cos + rotate_half(x)·sin on the head view [B,H,T,D], becomes sbp.rotary
// on the [B,T,H*D] activation the heads were split from (docs/ir.md: pairs
// (i, i+D/2), as in Llama), followed by the same head view, so that
// sbp-fuse-attention then sees q and k as sbp.rotary results. The pattern is
// anchored at rotate_half's Concat.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/transforms/FuseSupport.h"

#include "llvm/Support/Debug.h"

#include <cmath>

#define DEBUG_TYPE "sbp-fuse-rotary"

using namespace mlir;

namespace autoddl::sbp {

#define GEN_PASS_DEF_FUSEROTARYPASS
#include "ir/dialect/Passes.h.inc"

namespace {

using namespace fuse;

/// Whether `slice` takes [from, to) of the last axis (size `d`) of `x`.
bool slicesLast(Operation *slice, Value x, int64_t from, int64_t to,
                int64_t d) {
  if (!slice || slice->getNumOperands() < 3 || slice->getOperand(0) != x)
    return false;
  auto starts = ints(slice->getOperand(1)), ends = ints(slice->getOperand(2));
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1)
    return false;
  if (slice->getNumOperands() > 3) {
    auto axes = ints(slice->getOperand(3));
    int64_t rank = shapeOf(x).size();
    if (!axes || axes->size() != 1 ||
        ((*axes)[0] != -1 && (*axes)[0] != rank - 1))
      return false;
  }
  if (slice->getNumOperands() > 4) {
    auto steps = ints(slice->getOperand(4));
    if (!steps || steps->size() != 1 || (*steps)[0] != 1)
      return false;
  }
  return (*starts)[0] == from && std::min((*ends)[0], d) == to;
}

/// A constant table [1..,T,D] (through an Unsqueeze), as doubles, or empty.
SmallVector<double> table(Value v, int64_t t, int64_t d) {
  if (Operation *u = producer(v, "Unsqueeze"))
    v = u->getOperand(0);
  auto c = v ? v.getDefiningOp<ConstantOp>() : nullptr;
  auto dense = c ? dyn_cast<DenseFPElementsAttr>(c.getValue()) : nullptr;
  if (!dense || dense.getNumElements() != t * d)
    return {};
  ArrayRef<int64_t> s = shapeOf(v);
  if (s.size() < 2 || s[s.size() - 2] != t || s.back() != d)
    return {};
  SmallVector<double> out;
  for (const APFloat &x : dense.getValues<APFloat>())
    out.push_back(x.convertToDouble());
  return out;
}

/// θ of Llama's cos/sin tables [T,D] (positions 0..T-1), if they are ones.
std::optional<double> ropeTheta(ArrayRef<double> cos, ArrayRef<double> sin,
                                int64_t t, int64_t d) {
  if (t < 2 || d < 4)
    return std::nullopt;
  // Position 1, pair 1 turns by θ^(-2/D); atan2 reads the angle best. θ
  // amplifies its f32 error by D/2, so it is kept to four significant
  // digits (the θs configs give: 1e4, 5e5, 1e6).
  double angle = std::atan2(sin[d + 1], cos[d + 1]);
  if (!(angle > 0 && angle < 1))
    return std::nullopt;
  double theta = std::exp(-std::log(angle) * d / 2);
  double unit = std::pow(10.0, std::floor(std::log10(theta)) - 3);
  theta = std::round(theta / unit) * unit;
  for (int64_t p = 0; p < t; ++p)
    for (int64_t j = 0; j < d; ++j) {
      double a = p * std::pow(theta, -2.0 * (j % (d / 2)) / d);
      if (std::fabs(cos[p * d + j] - std::cos(a)) > 1e-3 ||
          std::fabs(sin[p * d + j] - std::sin(a)) > 1e-3)
        return std::nullopt;
    }
  return theta;
}

struct RotateHalf : OpRewritePattern<PrimitiveOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PrimitiveOp concat,
                                PatternRewriter &rewriter) const override {
    if (concat.getOpType() != "Concat" || concat.getInputs().size() != 2)
      return failure();
    Operation *neg = producer(concat.getInputs()[0], "Neg");
    Operation *hi = neg ? producer(neg->getOperand(0), "Slice") : nullptr;
    Operation *lo = producer(concat.getInputs()[1], "Slice");
    Value x = hi ? hi->getOperand(0) : nullptr;
    if (!x || !lo || shapeOf(x).size() != 4 ||
        concat.getResult().getType() != x.getType())
      return failure();
    std::optional<SmallVector<int64_t>> axis = intsAttr(concat, "axis");
    ArrayRef<int64_t> shape = shapeOf(x);
    int64_t t = shape[2], d = shape[3];
    if (!axis || ((*axis)[0] != -1 && (*axis)[0] != 3) || d % 2 != 0 ||
        !slicesLast(hi, x, d / 2, d, d) || !slicesLast(lo, x, 0, d / 2, d))
      return failure();
    // x·cos + rotate_half(x)·sin
    Operation *bySin = soleUser(concat.getResult(), "Mul");
    Value sin = other(bySin, concat.getResult());
    Operation *root = bySin ? soleUser(bySin->getResult(0), "Add") : nullptr;
    Operation *byCos =
        root ? producer(other(root, bySin->getResult(0)), "Mul") : nullptr;
    Value cos = other(byCos, x);
    if (!cos || root->getResult(0).getType() != x.getType())
      return failure();
    SmallVector<double> c = table(cos, t, d), s = table(sin, t, d);
    std::optional<double> theta =
        c.empty() || s.empty() ? std::nullopt : ropeTheta(c, s, t, d);
    int64_t heads = 0;
    Value x0 = theta ? headSource(x, heads) : nullptr;
    if (!x0)
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "rotary theta " << *theta << " at "
                            << root->getLoc() << "\n");
    Location loc = root->getLoc();
    rewriter.setInsertionPoint(root);
    auto rotary = rewriter.create<RotaryOp>(
        loc, TypeRange{x0.getType()}, ValueRange{x0},
        ArrayRef<NamedAttribute>{
            rewriter.getNamedAttr("num_heads",
                                  rewriter.getI64IntegerAttr(heads)),
            rewriter.getNamedAttr("head_dim", rewriter.getI64IntegerAttr(d)),
            rewriter.getNamedAttr("theta", rewriter.getF64FloatAttr(*theta))});
    // The same head view as x's, now of the rotated activation.
    Operation *view = transposeOf(x, {0, 2, 1, 3});
    Operation *split = producer(view->getOperand(0), "Reshape");
    auto reshape = rewriter.create<ReshapeOp>(
        loc, split->getResult(0).getType(), rotary.getResult(),
        rewriter.getDenseI64ArrayAttr(shapeOf(split->getResult(0))));
    auto transpose = rewriter.create<TransposeOp>(
        loc, x.getType(), reshape.getResult(),
        rewriter.getDenseI64ArrayAttr({0, 2, 1, 3}));
    rewriter.replaceOp(root, transpose->getResults());
    return success();
  }
};

struct FuseRotaryPass
    : FusionPass<FuseRotaryPass, impl::FuseRotaryPassBase, RotateHalf> {};

} // namespace

} // namespace autoddl::sbp
