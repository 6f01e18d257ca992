//===- ImageShapeRules.cpp - shape rules of the image ops -----------------===//
//
// Result types of conv2d, pool2d and the layout ops flatten, reshape and
// transpose, one function per op kind (declared in ShapeRule.h, dispatched to
// by the table in OpSemantics.cpp).
//
//===----------------------------------------------------------------------===//
#include "ir/ops/ShapeRule.h"

namespace autoddl::ops::detail {

namespace {

// Output size of a sliding window; 0 or less means the window does not fit.
int64_t windowOut(int64_t in, int64_t k, int64_t s, int64_t p) {
  Wide span = (Wide)in + 2 * (Wide)p - k;
  if (span < 0)
    return 0;
  return (int64_t)(span / s + 1);
}

} // namespace

Results inferConv2d(Rule &r) {
  const auto &x = r.operands[0], &w = r.operands[1];
  if (!r.rankIs(0, "x ([B,Cin,H,W])", 4) || !r.floating(0, "x") ||
      !r.rankIs(1, "weight ([Cout,Cin,kh,kw])", 4) ||
      !r.floating(1, "weight") || !r.positiveAttr("stride"))
    return {};
  int64_t p = r.i64("padding"), s = r.i64("stride");
  if (p < 0)
    return r.fail("expected non-negative padding, got " + std::to_string(p)),
           Results{};
  if (!r.dimEq("weight input channels", w.shape[1], x.shape[1]))
    return {};
  if (r.operands.size() == 3 &&
      (!r.rankIs(2, "bias", 1) ||
       !r.dimEq("bias size", r.operands[2].shape[0], w.shape[0])))
    return {};
  int64_t ho = windowOut(x.shape[2], w.shape[2], s, p);
  int64_t wo = windowOut(x.shape[3], w.shape[3], s, p);
  if (ho <= 0 || wo <= 0)
    return r.fail("expected kernel " + std::to_string(w.shape[2]) + "x" +
                  std::to_string(w.shape[3]) + " to fit input " +
                  std::to_string(x.shape[2]) + "x" +
                  std::to_string(x.shape[3]) + " with padding " +
                  std::to_string(p)),
           Results{};
  return {{{x.shape[0], w.shape[0], ho, wo}, x.dtype}};
}

Results inferPool2d(Rule &r) {
  const auto &x = r.operands[0];
  if (!r.rankIs(0, "x ([B,C,H,W])", 4) || !r.floating(0, "x") ||
      !r.positiveAttr("kernel") || !r.positiveAttr("stride"))
    return {};
  const std::string &kind = r.str("kind");
  if (kind != "max" && kind != "avg")
    return r.fail("expected kind \"max\" or \"avg\", got \"" + kind + "\""),
           Results{};
  int64_t k = r.i64("kernel"), s = r.i64("stride");
  int64_t ho = windowOut(x.shape[2], k, s, 0),
          wo = windowOut(x.shape[3], k, s, 0);
  if (ho <= 0 || wo <= 0)
    return r.fail("expected pooling window " + std::to_string(k) +
                  " to fit input " + std::to_string(x.shape[2]) + "x" +
                  std::to_string(x.shape[3])),
           Results{};
  return {{{x.shape[0], x.shape[1], ho, wo}, x.dtype}};
}

Results inferFlatten(Rule &r) {
  const auto &x = r.operands[0];
  int64_t rank = x.shape.size(), sd = r.i64("start_dim");
  if (sd < 0 || sd >= rank)
    return r.fail("expected start_dim in [0, " + std::to_string(rank) +
                  "), got " + std::to_string(sd)),
           Results{};
  Shape out(x.shape.begin(), x.shape.begin() + sd);
  out.push_back((int64_t)product(x.shape, sd));
  return {{out, x.dtype}};
}

Results inferReshape(Rule &r) {
  const auto &x = r.operands[0];
  Shape out = r.i64s("shape");
  int inferred = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1 && inferred < 0) {
      inferred = i;
      continue;
    }
    if (out[i] <= 0)
      return r.fail("expected positive sizes in shape (one may be -1), got " +
                    shapeStr(out)),
             Results{};
  }
  Wide known = 1;
  for (size_t i = 0; i < out.size(); ++i)
    if ((int)i != inferred) {
      known *= out[i];
      if (known > kInt64Max)
        return r.fail("size of shape " + shapeStr(out) + " overflows int64"),
               Results{};
    }
  Wide total = product(x.shape);
  if (inferred >= 0) {
    if (total % known != 0)
      return r.fail("cannot reshape " + shapeStr(x.shape) + " into " +
                    shapeStr(out)),
             Results{};
    out[inferred] = (int64_t)(total / known);
  } else if (known != total) {
    return r.fail("expected shape with " + std::to_string((int64_t)total) +
                  " elements (as x " + shapeStr(x.shape) + "), got " +
                  shapeStr(out)),
           Results{};
  }
  return {{out, x.dtype}};
}

Results inferTranspose(Rule &r) {
  const auto &x = r.operands[0];
  const Shape &perm = r.i64s("perm");
  Shape sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool isPerm = sorted.size() == x.shape.size();
  for (size_t i = 0; isPerm && i < sorted.size(); ++i)
    isPerm = sorted[i] == (int64_t)i;
  if (!isPerm)
    return r.fail("expected perm to be a permutation of 0.." +
                  std::to_string((int64_t)x.shape.size() - 1) + ", got " +
                  shapeStr(perm)),
           Results{};
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    out[i] = x.shape[perm[i]];
  return {{out, x.dtype}};
}

} // namespace autoddl::ops::detail
