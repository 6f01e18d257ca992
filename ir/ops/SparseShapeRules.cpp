//===- SparseShapeRules.cpp - shape rules of the graph ops ----------------===//
//
// Result types of spmm, sddmm, edge_softmax and GATConv's head_dot and
// gat_aggregate (a sparse operand of nnz stored entries), one function per op
// kind (declared in ShapeRule.h,
// dispatched to by the table in OpSemantics.cpp).
//
//===----------------------------------------------------------------------===//
#include "ir/ops/ShapeRule.h"

#include <cmath>

namespace autoddl::ops::detail {

namespace {

bool checkNnz(Rule &r, const Shape &adj) {
  int64_t nnz = r.i64("nnz");
  if (nnz < 0 || nnz > product(adj))
    return r.fail("expected nnz in [0, " +
                  std::to_string((int64_t)product(adj)) + "] for a " +
                  shapeStr(adj) + " sparse matrix, got " + std::to_string(nnz));
  return true;
}

} // namespace

Results inferSpmm(Rule &r) {
  const auto &adj = r.operands[0], &x = r.operands[1];
  if (!r.rankIs(0, "adj", 2) || !r.rankIs(1, "x", 2) || !r.floating(1, "x") ||
      !checkNnz(r, adj.shape) ||
      !r.dimEq("rows of x (columns of adj)", x.shape[0], adj.shape[1]))
    return {};
  // sum: adj's values times x; mean (sage): the mean of x over each row's
  // stored entries.
  const std::string &reduce = r.str("reduce");
  if (reduce != "sum" && reduce != "mean")
    return r.fail("expected reduce \"sum\" or \"mean\", got \"" + reduce +
                  "\""),
           Results{};
  return {{{adj.shape[0], x.shape[1]}, x.dtype}};
}

Results inferSddmm(Rule &r) {
  const auto &mask = r.operands[0], &x = r.operands[1], &y = r.operands[2];
  if (!r.rankIs(0, "mask", 2) || !r.rankIs(1, "x", 2) || !r.rankIs(2, "y", 2) ||
      !r.floating(1, "x") || !r.floating(2, "y") || !checkNnz(r, mask.shape) ||
      !r.dimEq("rows of x (rows of mask)", x.shape[0], mask.shape[0]) ||
      !r.dimEq("rows of y (columns of mask)", y.shape[0], mask.shape[1]) ||
      !r.dimEq("columns of y", y.shape[1], x.shape[1]))
    return {};
  return {{mask.shape, x.dtype}};
}

// A softmax over each row's stored entries of mask: scores has mask's shape
// (a sparse activation, e.g. sddmm's result, holding values at mask's stored
// entries only).
Results inferEdgeSoftmax(Rule &r) {
  const auto &mask = r.operands[0], &scores = r.operands[1];
  if (!r.rankIs(0, "mask", 2) || !r.rankIs(1, "scores", 2) ||
      !r.floating(1, "scores") || !checkNnz(r, mask.shape) ||
      !r.dimEq("rows of scores (rows of mask)", scores.shape[0],
               mask.shape[0]) ||
      !r.dimEq("columns of scores (columns of mask)", scores.shape[1],
               mask.shape[1]))
    return {};
  if (!std::isfinite(r.f64("scale")))
    return r.fail("expected a finite scale, got " +
                  std::to_string(r.f64("scale"))),
           Results{};
  return {scores};
}

// x [N,H*C] and att [H,C]: each node's dot product with att per head (GATConv's
// a_src·Wh_j and a_dst·Wh_i), [N,H].
Results inferHeadDot(Rule &r) {
  const auto &x = r.operands[0], &att = r.operands[1];
  if (!r.rankIs(0, "x", 2) || !r.rankIs(1, "att", 2) || !r.floating(0, "x") ||
      !r.floating(1, "att") ||
      !r.dimEq("columns of x (heads x channels of att)", x.shape[1],
               att.shape[0] * att.shape[1]))
    return {};
  return {{{x.shape[0], att.shape[0]}, x.dtype}};
}

// adj [N,M] (its pattern), s_dst [N,H], s_src [M,H], h [M,H*C] -> [N,H*C].
Results inferGatAggregate(Rule &r) {
  const auto &adj = r.operands[0], &dst = r.operands[1], &src = r.operands[2],
             &h = r.operands[3];
  if (!r.rankIs(0, "adj", 2) || !r.rankIs(1, "s_dst", 2) ||
      !r.rankIs(2, "s_src", 2) || !r.rankIs(3, "h", 2) ||
      !r.floating(1, "s_dst") || !r.floating(2, "s_src") ||
      !r.floating(3, "h") || !checkNnz(r, adj.shape) ||
      !r.dimEq("rows of s_dst (rows of adj)", dst.shape[0], adj.shape[0]) ||
      !r.dimEq("rows of s_src (columns of adj)", src.shape[0], adj.shape[1]) ||
      !r.dimEq("rows of h (columns of adj)", h.shape[0], adj.shape[1]) ||
      !r.dimEq("heads of s_src (heads of s_dst)", src.shape[1], dst.shape[1]))
    return {};
  if (dst.shape[1] <= 0 || h.shape[1] % dst.shape[1] != 0)
    return r.fail("expected h's " + std::to_string(h.shape[1]) +
                  " columns to be a multiple of the " +
                  std::to_string(dst.shape[1]) + " heads"),
           Results{};
  if (!std::isfinite(r.f64("negative_slope")))
    return r.fail("expected a finite negative_slope"), Results{};
  return {{{adj.shape[0], h.shape[1]}, h.dtype}};
}

} // namespace autoddl::ops::detail
