//===- DenseShapeRules.cpp - shape rules of the dense ops -----------------===//
//
// Result types of embedding, positional, rotary, linear, matmul, bias_add,
// the elementwise ops, the norms, softmax, attention and the two losses, one
// function per op kind (declared in ShapeRule.h, dispatched to by the table
// in OpSemantics.cpp).
//
//===----------------------------------------------------------------------===//
#include "ir/ops/ShapeRule.h"

namespace autoddl::ops::detail {

namespace {

int64_t last(const Shape &s) { return s.back(); }

Shape withLast(Shape s, int64_t v) {
  s.back() = v;
  return s;
}

} // namespace

Results inferEmbedding(Rule &r) {
  const auto &ids = r.operands[0], &table = r.operands[1];
  if (!r.rankAtLeast(0, "ids", 1) || !r.integer(0, "ids") ||
      !r.rankIs(1, "table", 2) || !r.floating(1, "table"))
    return {};
  Shape out = ids.shape;
  out.push_back(table.shape[1]);
  return {{out, table.dtype}};
}

Results inferPositional(Rule &r) {
  const auto &x = r.operands[0], &table = r.operands[1];
  if (!r.rankAtLeast(0, "x", 2) || !r.floating(0, "x") ||
      !r.rankIs(1, "table", 2) || !r.floating(1, "table"))
    return {};
  int64_t t = x.shape[x.shape.size() - 2];
  if (table.shape[0] < t)
    return r.fail("expected positions table to hold at least " +
                  std::to_string(t) + " positions (the sequence length), got " +
                  std::to_string(table.shape[0])),
           Results{};
  if (!r.dimEq("table width", table.shape[1], last(x.shape)))
    return {};
  return {x};
}

Results inferRotary(Rule &r) {
  const auto &x = r.operands[0];
  if (!r.rankAtLeast(0, "x", 2) || !r.floating(0, "x") ||
      !r.positiveAttr("num_heads") || !r.positiveAttr("head_dim"))
    return {};
  if (r.i64("head_dim") % 2 != 0)
    return r.fail("expected an even head_dim for rotary, got " +
                  std::to_string(r.i64("head_dim"))),
           Results{};
  if (!(r.f64("theta") > 0))
    return r.fail("expected a positive theta, got " +
                  std::to_string(r.f64("theta"))),
           Results{};
  if ((Wide)r.i64("num_heads") * r.i64("head_dim") != last(x.shape))
    return r.fail("expected last dim of x to be num_heads*head_dim = " +
                  std::to_string(
                      (int64_t)((Wide)r.i64("num_heads") * r.i64("head_dim"))) +
                  ", got " + std::to_string(last(x.shape))),
           Results{};
  return {x};
}

Results inferLinear(Rule &r) {
  const auto &x = r.operands[0], &w = r.operands[1];
  if (!r.rankAtLeast(0, "x", 1) || !r.floating(0, "x") ||
      !r.rankIs(1, "weight", 2) || !r.floating(1, "weight"))
    return {};
  bool t = r.flag("transpose_weight");
  int64_t k = t ? w.shape[1] : w.shape[0];
  int64_t n = t ? w.shape[0] : w.shape[1];
  if (k != last(x.shape))
    return r.fail(
               "expected weight " + shapeStr(w.shape) +
               (t ? " ([N,K], transpose_weight)" : " ([K,N])") +
               " to match input features K = " + std::to_string(last(x.shape)) +
               ", got K = " + std::to_string(k)),
           Results{};
  if (r.operands.size() == 3) {
    if (!r.rankIs(2, "bias", 1) || !r.floating(2, "bias") ||
        !r.dimEq("bias size", r.operands[2].shape[0], n))
      return {};
  }
  return {{withLast(x.shape, n), x.dtype}};
}

Results inferMatmul(Rule &r) {
  const auto &a = r.operands[0], &b = r.operands[1];
  if (!r.rankAtLeast(0, "a", 2) || !r.rankAtLeast(1, "b", 2) ||
      !r.floating(0, "a") || !r.floating(1, "b"))
    return {};
  if (a.shape.size() != b.shape.size())
    return r.fail("expected a and b of one rank, got " + shapeStr(a.shape) +
                  " and " + shapeStr(b.shape)),
           Results{};
  size_t n = a.shape.size();
  for (size_t i = 0; i + 2 < n; ++i)
    if (a.shape[i] != b.shape[i])
      return r.fail("expected equal batch dims, got " + shapeStr(a.shape) +
                    " and " + shapeStr(b.shape)),
             Results{};
  bool t = r.flag("transpose_b");
  int64_t kb = t ? b.shape[n - 1] : b.shape[n - 2];
  int64_t nb = t ? b.shape[n - 2] : b.shape[n - 1];
  if (kb != a.shape[n - 1])
    return r.fail("expected contracted dims to agree, got a " +
                  shapeStr(a.shape) + " and b " + shapeStr(b.shape) +
                  (t ? " (transpose_b)" : "")),
           Results{};
  return {{withLast(a.shape, nb), a.dtype}};
}

Results inferBiasAdd(Rule &r) {
  const auto &x = r.operands[0];
  if (!r.rankAtLeast(0, "x", 1) || !r.floating(0, "x") ||
      !r.rankIs(1, "bias", 1) || !r.floating(1, "bias") ||
      !r.dimEq("bias size", r.operands[1].shape[0], last(x.shape)))
    return {};
  return {x};
}

Results inferBinary(Rule &r) {
  if (!r.floating(0, "a") || !r.sameType(0, "a", 1, "b"))
    return {};
  return {r.operands[0]};
}

Results inferUnary(Rule &r) {
  if (!r.floating(0, "x"))
    return {};
  return {r.operands[0]};
}

Results inferGelu(Rule &r) {
  const std::string &a = r.str("approximate");
  if (a != "tanh" && a != "none")
    return r.fail("expected approximate to be \"tanh\" or \"none\", got \"" +
                  a + "\""),
           Results{};
  return inferUnary(r);
}

Results inferSwiglu(Rule &r) {
  if (!r.floating(0, "gate") || !r.sameType(0, "gate", 1, "up"))
    return {};
  return {r.operands[0]};
}

Results inferNorm(Rule &r) {
  const auto &x = r.operands[0];
  if (!r.rankAtLeast(0, "x", 1) || !r.floating(0, "x") ||
      !r.rankIs(1, "gamma", 1) ||
      !r.dimEq("gamma size", r.operands[1].shape[0], last(x.shape)))
    return {};
  if (r.operands.size() == 3 &&
      (!r.rankIs(2, "beta", 1) ||
       !r.dimEq("beta size", r.operands[2].shape[0], last(x.shape))))
    return {};
  if (!(r.f64("epsilon") > 0))
    return r.fail("expected a positive epsilon, got " +
                  std::to_string(r.f64("epsilon"))),
           Results{};
  return {x};
}

Results inferSoftmax(Rule &r) {
  const auto &x = r.operands[0];
  int64_t rank = x.shape.size(), axis = r.i64("axis");
  if (!r.rankAtLeast(0, "x", 1) || !r.floating(0, "x"))
    return {};
  if (axis < -rank || axis >= rank)
    return r.fail("expected axis in [" + std::to_string(-rank) + ", " +
                  std::to_string(rank) + "), got " + std::to_string(axis)),
           Results{};
  return {x};
}

Results inferAttention(Rule &r) {
  if (!r.positiveAttr("num_heads") || !r.positiveAttr("head_dim") ||
      !r.positiveAttr("num_kv_heads"))
    return {};
  int64_t h = r.i64("num_heads"), g = r.i64("num_kv_heads"),
          d = r.i64("head_dim");
  if (h % g != 0)
    return r.fail("expected num_kv_heads (" + std::to_string(g) +
                  ") to divide num_heads (" + std::to_string(h) + ")"),
           Results{};
  if (r.operands.size() == 2)
    return r.fail("expected 1 operand (fused qkv) or 3 (q, k, v), got 2"),
           Results{};
  static const char *names[] = {"q", "k", "v"};
  for (size_t i = 0; i < r.operands.size(); ++i)
    if (!r.rankIs(i, r.operands.size() == 1 ? "qkv" : names[i], 3) ||
        !r.floating(i, r.operands.size() == 1 ? "qkv" : names[i]))
      return {};
  const Shape &q = r.operands[0].shape;
  if (r.operands.size() == 1) {
    if ((Wide)(h + 2 * g) * d != q[2])
      return r.fail("expected fused qkv width (num_heads+2*num_kv_heads)*"
                    "head_dim = " +
                    std::to_string((int64_t)((Wide)(h + 2 * g) * d)) +
                    ", got " + std::to_string(q[2])),
             Results{};
  } else {
    if ((Wide)h * d != q[2])
      return r.fail("expected q width num_heads*head_dim = " +
                    std::to_string((int64_t)((Wide)h * d)) + ", got " +
                    std::to_string(q[2])),
             Results{};
    for (int i = 1; i < 3; ++i) {
      const Shape &s = r.operands[i].shape;
      if (s[0] != q[0] || s[1] != q[1] || (Wide)g * d != s[2])
        return r.fail(std::string("expected ") + names[i] + " of shape [" +
                      std::to_string(q[0]) + "," + std::to_string(q[1]) + "," +
                      std::to_string((int64_t)((Wide)g * d)) +
                      "] (num_kv_heads*head_dim), got " + shapeStr(s)),
               Results{};
    }
  }
  return {{{q[0], q[1], (int64_t)((Wide)h * d)}, r.operands[0].dtype}};
}

Results inferCrossEntropy(Rule &r) {
  const auto &logits = r.operands[0], &targets = r.operands[1];
  if (!r.rankAtLeast(0, "logits", 1) || !r.floating(0, "logits") ||
      !r.integer(1, "targets"))
    return {};
  Shape lead(logits.shape.begin(), logits.shape.end() - 1);
  if (targets.shape != lead)
    return r.fail("expected targets of shape " + shapeStr(lead) +
                  " (logits without the class dim), got " +
                  shapeStr(targets.shape)),
           Results{};
  return {{Shape{}, DType::F32}};
}

// scores [B,C] (rank 2 only: the one-hot of a class label), labels [B].
Results inferSquaredError(Rule &r) {
  const auto &scores = r.operands[0], &targets = r.operands[1];
  if (!r.floating(0, "scores") || !r.integer(1, "targets"))
    return {};
  if (scores.shape.size() != 2)
    return r.fail("expected scores [batch, classes], got " +
                  shapeStr(scores.shape)),
           Results{};
  if (targets.shape != Shape{scores.shape[0]})
    return r.fail("expected targets of shape " + shapeStr({scores.shape[0]}) +
                  " (one class label a row), got " + shapeStr(targets.shape)),
           Results{};
  return {{Shape{}, DType::F32}};
}

} // namespace autoddl::ops::detail
