//===- FuseAttention.cpp - sbp-fuse-attention -----------------------------===//
//
// The attention of an export, written out as head reshapes, Q·Kᵀ, a scale,
// a causal mask, a softmax and a product with V, becomes one sbp.attention
// (docs/ir.md), as the Hugging Face path emits it. The pattern is anchored at
// the reshape that merges the heads back into [B,T,H*D] and walks up; any
// step that is not the expected one leaves the graph as it is.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/transforms/FuseSupport.h"

#include <algorithm>

#include "llvm/Support/Debug.h"

#include <cmath>

#define DEBUG_TYPE "sbp-fuse-attention"

using namespace mlir;

namespace autoddl::sbp {

#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "ir/dialect/Passes.h.inc"

namespace {

using namespace fuse;

/// headSource() through a grouped-query expansion: reshape [B,G*R,T,D] of
/// Expand [B,G,R,T,D] of Unsqueeze(axis 2) of [B,G,T,D] (Hugging Face's
/// repeat_kv). `heads` is G, the kv heads.
Value kvSource(Value v4, int64_t &heads) {
  if (Operation *r = producer(v4, "Reshape"))
    if (Operation *e = producer(r->getOperand(0), "Expand"))
      if (Operation *u = producer(e->getOperand(0), "Unsqueeze")) {
        ArrayRef<int64_t> wide = shapeOf(e->getResult(0));
        if (wide.size() == 5 && shapeOf(u->getResult(0)).size() == 5 &&
            shapeOf(u->getResult(0))[2] == 1 &&
            shapeOf(v4)[1] == wide[1] * wide[2])
          v4 = u->getOperand(0);
      }
  return headSource(v4, heads);
}

/// Whether `c` is a dense constant `Attr` over [.., T, T] whose every element
/// passes `ok(element, on or below the diagonal)`.
template <class Attr, class Element, class Ok>
bool isCausalConstant(Value c, Ok ok) {
  auto k = c ? c.getDefiningOp<ConstantOp>() : nullptr;
  auto dense = k ? dyn_cast<Attr>(k.getValue()) : nullptr;
  ArrayRef<int64_t> s = dense ? shapeOf(c) : ArrayRef<int64_t>{};
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
    return false;
  int64_t t = s.back(), idx = 0;
  for (const Element &v : dense.template getValues<Element>()) {
    int64_t i = (idx / t) % t, j = idx % t;
    if (!ok(v, j <= i))
      return false;
    ++idx;
  }
  return true;
}

/// Whether `c` is a causal mask over its last two dims [T,T]: 0 on and below
/// the diagonal, at most -1e4 (or -inf) above it.
bool isCausalAdditive(Value c) {
  return isCausalConstant<DenseFPElementsAttr, APFloat>(
      c, [](const APFloat &v, bool kept) {
        double d = v.convertToDouble();
        return kept ? d == 0 : d <= -1e4;
      });
}

/// Whether `c` is a lower-triangular boolean [.., T, T] constant.
bool isCausalCondition(Value c) {
  return isCausalConstant<DenseIntElementsAttr, APInt>(
      c, [](const APInt &v, bool kept) { return v.isZero() != kept; });
}

/// `v` without a Mul by a scalar constant (torch's SDPA export scales Q and
/// Kᵀ each by √scale); the factor goes into `scale`.
Value peelScale(Value v, double &scale) {
  if (Operation *m = producer(v, "Mul"))
    for (int i = 0; i < 2; ++i)
      if (std::optional<double> c = scalar(m->getOperand(i))) {
        scale *= *c;
        return m->getOperand(1 - i);
      }
  return v;
}

/// Kᵀ [B,H,D,T] as torch's SDPA export writes it: reshape [B,H,D,T] of
/// transpose(0,2,1) of reshape [B*H,T,D] of K [B,H,T,D]; K, else null.
Value mergedHeadsTranspose(Value kt) {
  Operation *back = producer(kt, "Reshape");
  Operation *t = back ? transposeOf(back->getOperand(0), {0, 2, 1}) : nullptr;
  Operation *merge = t ? producer(t->getOperand(0), "Reshape") : nullptr;
  if (!merge)
    return nullptr;
  Value k = merge->getOperand(0);
  ArrayRef<int64_t> k4 = shapeOf(k), m3 = shapeOf(merge->getResult(0)),
                    out = shapeOf(kt);
  if (k4.size() != 4 || m3.size() != 3 || out.size() != 4 ||
      m3[0] != k4[0] * k4[1] || m3[1] != k4[2] || m3[2] != k4[3] ||
      out[0] != k4[0] || out[1] != k4[1] || out[2] != k4[3] || out[3] != k4[2])
    return nullptr;
  return k;
}

/// The softmax `p` without torch's guard Where(IsNaN(p), 0, p) (rows with
/// every score masked give 0, not NaN; a causal row always keeps its
/// diagonal, so the guard never fires there).
Value peelNanGuard(Value v) {
  Operation *w = producer(v, "Where");
  if (!w || w->getNumOperands() != 3 || !isScalar(w->getOperand(1), 0.0))
    return v;
  Operation *isNan = producer(w->getOperand(0), "IsNaN");
  if (!isNan || isNan->getOperand(0) != w->getOperand(2))
    return v;
  return w->getOperand(2);
}

struct DecomposedAttention : RewritePattern {
  DecomposedAttention(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *root,
                                PatternRewriter &rewriter) const override {
    if (root->getNumResults() != 1 ||
        producer(root->getResult(0), "Reshape") != root)
      return failure();
    Operation *merge = transposeOf(root->getOperand(0), {0, 2, 1, 3});
    Operation *pv = merge ? producer(merge->getOperand(0), "MatMul") : nullptr;
    Operation *sm =
        pv ? producer(peelNanGuard(pv->getOperand(0)), "Softmax") : nullptr;
    if (!sm)
      return failure();
    std::optional<SmallVector<int64_t>> axis = intsAttr(sm, "axis");
    if (axis && (*axis)[0] != -1 && (*axis)[0] != 3)
      return failure();
    // Peel the scale and the mask, in either order.
    Value s = sm->getOperand(0);
    double scale = 1;
    bool causal = false;
    for (int step = 0; step < 3; ++step) {
      Operation *op;
      if ((op = producer(s, "Mul"))) {
        std::optional<double> c;
        for (int i = 0; i < 2 && !c; ++i)
          if ((c = scalar(op->getOperand(i))))
            s = op->getOperand(1 - i);
        if (!c)
          return failure();
        scale *= *c;
      } else if ((op = producer(s, "Div"))) {
        std::optional<double> c = scalar(op->getOperand(1));
        if (!c || *c == 0)
          return failure();
        scale /= *c;
        s = op->getOperand(0);
      } else if ((op = producer(s, "Add")) && !causal) {
        if (isCausalAdditive(op->getOperand(1)))
          s = op->getOperand(0);
        else if (isCausalAdditive(op->getOperand(0)))
          s = op->getOperand(1);
        else
          return failure();
        causal = true;
      } else if ((op = producer(s, "Where")) && !causal) {
        std::optional<double> low = scalar(op->getOperand(2));
        if (op->getNumOperands() != 3 ||
            !isCausalCondition(op->getOperand(0)) || !low || !(*low <= -1e4))
          return failure();
        s = op->getOperand(1);
        causal = true;
      } else {
        break;
      }
    }
    // Q·Kᵀ
    Value q4, k4;
    int64_t heads = 0, kvHeads = 0;
    Value k;
    if (auto mm = s.getDefiningOp<MatmulOp>();
        mm && mm.getTransposeB().value_or(false)) {
      q4 = mm.getA();
      k = kvSource(mm.getB(), kvHeads);
    } else if (Operation *qk = producer(s, "MatMul")) {
      q4 = peelScale(qk->getOperand(0), scale);
      Value kT = peelScale(qk->getOperand(1), scale);
      if (Operation *kt = transposeOf(kT, {0, 1, 3, 2}))
        k = kvSource(kt->getOperand(0), kvHeads);
      else if (Value k4 = mergedHeadsTranspose(kT))
        k = kvSource(k4, kvHeads);
      // transpose(0,2,3,1) of the [B,T,G,D] reshape: heads and Kᵀ at once.
      else if (Operation *kt = transposeOf(kT, {0, 2, 3, 1}))
        if (Operation *r = producer(kt->getOperand(0), "Reshape")) {
          Value x = r->getOperand(0);
          ArrayRef<int64_t> split = shapeOf(r->getResult(0));
          if (split.size() == 4 && shapeOf(x).size() == 3 &&
              shapeOf(x)[2] == split[2] * split[3]) {
            k = x;
            kvHeads = split[2];
          }
        }
    }
    Value q = q4 ? headSource(q4, heads) : nullptr;
    int64_t vHeads = 0;
    Value v = kvSource(pv->getOperand(1), vHeads);
    if (!q || !k || !v || vHeads != kvHeads || kvHeads == 0 ||
        heads % kvHeads != 0)
      return failure();
    int64_t d = shapeOf(q4)[3];
    if (std::fabs(scale * std::sqrt((double)d) - 1) > 1e-4 ||
        root->getResult(0).getType() != q.getType() ||
        shapeOf(k) != shapeOf(v) || shapeOf(k)[2] != kvHeads * d)
      return failure();
    LLVM_DEBUG(llvm::dbgs() << "attention at " << root->getLoc() << "\n");
    rewriter.setInsertionPoint(root);
    auto attention = rewriter.create<AttentionOp>(
        root->getLoc(), TypeRange{q.getType()}, ValueRange{q, k, v},
        ArrayRef<NamedAttribute>{
            rewriter.getNamedAttr("num_heads",
                                  rewriter.getI64IntegerAttr(heads)),
            rewriter.getNamedAttr("head_dim", rewriter.getI64IntegerAttr(d)),
            rewriter.getNamedAttr("num_kv_heads",
                                  rewriter.getI64IntegerAttr(kvHeads)),
            rewriter.getNamedAttr("causal", rewriter.getBoolAttr(causal))});
    rewriter.replaceOp(root, attention->getResults());
    return success();
  }
};

/// The source and [start, end) of a Slice primitive along the last axis
/// (step 1) of a constant range; null source if `v` is not one.
Value lastAxisSlice(Value v, int64_t &start, int64_t &end) {
  auto p = v.getDefiningOp<PrimitiveOp>();
  if (!p || p.getOpType() != "Slice" || p.getInputs().size() < 4 ||
      p.getInputs().size() > 5)
    return nullptr;
  Value src = p.getInputs()[0];
  auto st = ints(p.getInputs()[1]), en = ints(p.getInputs()[2]),
       ax = ints(p.getInputs()[3]);
  std::optional<SmallVector<int64_t>> steps;
  if (p.getInputs().size() == 5)
    steps = ints(p.getInputs()[4]);
  const int64_t rank = int64_t(shapeOf(src).size());
  if (!st || !en || !ax || st->size() != 1 || en->size() != 1 ||
      ax->size() != 1 || ((*ax)[0] != rank - 1 && (*ax)[0] != -1) ||
      (p.getInputs().size() == 5 &&
       (!steps || *steps != SmallVector<int64_t>{1})))
    return nullptr;
  start = (*st)[0];
  end = std::min((*en)[0], shapeOf(src).back());
  return src;
}

/// attention(q, k, v) whose q, k and v are the thirds [0,C), [C,2C), [2C,3C)
/// of one value's last axis (GPT-2's fused c_attn, split by the export) ->
/// attention(qkv), the one-operand form the Hugging Face path emits.
struct PackedQkvAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op->getNumOperands() != 3)
      return failure();
    Value src;
    const int64_t c = shapeOf(op->getOperand(0)).back();
    for (int i = 0; i < 3; ++i) {
      int64_t start = 0, end = 0;
      Value s = lastAxisSlice(op->getOperand(i), start, end);
      if (!s || (src && s != src) || start != i * c || end != (i + 1) * c)
        return failure();
      src = s;
    }
    if (shapeOf(src).back() != 3 * c)
      return failure();
    rewriter.setInsertionPoint(op);
    auto packed = rewriter.create<AttentionOp>(
        op->getLoc(), op->getResultTypes(), ValueRange{src}, op->getAttrs());
    rewriter.replaceOp(op, packed->getResults());
    return success();
  }
};

struct FuseAttentionPass
    : FusionPass<FuseAttentionPass, impl::FuseAttentionPassBase,
                 DecomposedAttention, PackedQkvAttention> {};

} // namespace

} // namespace autoddl::sbp
