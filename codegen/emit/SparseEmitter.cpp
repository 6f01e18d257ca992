//===- SparseEmitter.cpp - graph ops --------------------------------------===//
//
// spmm (adjacency or activation values; sum or, sage's, mean over a row's
// entries), sddmm and edge_softmax of the graph models, and GATConv's
// head_dot and gat_aggregate.
// One function per op kind, registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpEmitters.h"

namespace autoddl::codegen::emit {

/// spmm
void OpEmitters::emitSpmm(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  if (!cx_.isInput(op.operands[0])) {
    // The adjacency's values are an activation (gat's attention): the
    // pattern is the sparse input it was computed on.
    const int64_t Fl = lastDim(ys);
    const std::string pattern =
        cx_.val(cx_.g.sparsePattern(op.operands[0]), TpLayout{});
    gatherNodes(1);
    F(fmt::format("spmm_values_forward({}, {}, {}, {}, {});", y, pattern, x[0],
                  x[1], Fl));
    if (p.mode != OpMode::Local) {
      BI(fmt::format("spmm_values_backward({}, {}, {}, {}, {}, {}, {});", dx[1],
                     dx[0], pattern, x[0], dy, x[1], Fl));
    } else { // x split on features: dvalues from this rank's is partial
      const std::string nnz = cx_.elems(op.operands[0], p.operands[0]);
      BI("{ // the values' gradient from this rank's features is a partial sum "
         "(P -> B)");
      if (cx_.target.scratchInStage) {
        const std::string part = cx_.names[size_t(r)] + "_dvalues_partial";
        members_.add(st, {part, 0, "[nnz] partial gradient of the values",
                          false, false, false, nnz});
        BI(fmt::format("  act_t *partial = a.{}.data();", part));
        BI(fmt::format("  zero(partial, {} * sizeof(act_t));", nnz));
      } else {
        BI(fmt::format("  std::vector<float> values_partial({});", nnz));
        BI("  float *partial = values_partial.data();");
      }
      BI(fmt::format("  spmm_values_backward({}, partial, {}, {}, {}, {}, {});",
                     dx[1], pattern, x[0], dy, x[1], Fl));
      BI(fmt::format("  all_reduce_forward(partial, {}, g.tp);", nnz));
      BI(fmt::format("  add_into({}, partial, {});", dx[0], nnz));
      BI("}");
    }
    return;
  }
  const int64_t Fl = lastDim(ys);
  gatherNodes(1);
  if (attrOf(op, ops::attr::kReduce) == "mean") {
    // sage: the mean over each row's stored entries (D^-1 A), whatever the
    // adjacency's own (GCN-normalised) values.
    F(fmt::format("spmm_mean_forward({}, {}, {}, {});", y, x[0], x[1], Fl));
    if (!cx_.isInput(op.operands[1]))
      BI(fmt::format("spmm_mean_backward({}, {}, {}, {});", dx[1], x[0], dy,
                     Fl));
    return;
  }
  F(fmt::format("spmm_forward({}, {}, {}, {});", y, x[0], x[1], Fl));
  if (!cx_.isInput(op.operands[1]))
    BI(fmt::format("spmm_backward({}, nullptr, {}, {}, {}, {});", dx[1], x[0],
                   dy, x[1], Fl));
}

/// sddmm
void OpEmitters::emitSddmm(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t K = lastDim(xs[1]);
  gatherNodes(2);
  F(fmt::format("sddmm_forward({}, {}, {}, {}, {});", y, x[0], x[1], x[2], K));
  if (p.mode == OpMode::Local) // x and y split on K: partial dot products
    F(fmt::format("all_reduce_forward({}, {}, g.tp); // P -> B", y,
                  cx_.elems(r, p.result)));
  if (!cx_.isInput(op.operands[1]) || !cx_.isInput(op.operands[2]))
    BI(fmt::format("sddmm_backward({}, {}, {}, {}, {}, {}, {});", dx[1], dx[2],
                   x[0], dy, x[1], x[2], K));
}

/// edge_softmax
void OpEmitters::emitEdgeSoftmax(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const std::string scale = fmtDouble(attrOf(op, ops::attr::kScale));
  F(fmt::format("edge_softmax_forward({}, {}, {}, {}f);", y, x[0], x[1],
                scale));
  if (!cx_.isInput(op.operands[1]))
    BI(fmt::format("edge_softmax_backward({}, {}, {}, {}, {}f);", dx[1], x[0],
                   y, dy, scale));
}

/// head_dot (GATConv's per-node terms a·Wh of each head)
void OpEmitters::emitHeadDot(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t H = xs[1][0], C = xs[1][1], N = xs[0][0];
  F(fmt::format("head_dot_forward({}, {}, {}, {}, {}, {});", y, x[0], x[1], N,
                H, C));
  BI(fmt::format("head_dot_backward({}, {}, {}, {}, {}, {}, {}, {});", dx[0],
                 dx[1], dy, x[0], x[1], N, H, C));
}

/// gat_aggregate (GATConv's attention and messages; the backward recomputes
/// the softmax from s_dst and s_src rather than keeping nnz·H weights)
void OpEmitters::emitGatAggregate(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t H = lastDim(xs[1]), HC = lastDim(xs[3]);
  const std::string slope = fmtDouble(attrOf(op, ops::attr::kNegativeSlope));
  gatherNodes(2); // s_src and h: every source node's rows
  gatherNodes(3);
  F(fmt::format("gat_aggregate_forward({}, {}, {}, {}, {}, {}, {}, {}f);", y,
                x[0], x[1], x[2], x[3], H, HC / H, slope));
  BI(fmt::format("gat_aggregate_backward({}, {}, {}, {}, {}, {}, {}, {}, {}, "
                 "{}, {}f);",
                 dx[1], dx[2], dx[3], x[0], x[1], x[2], x[3], dy, H, HC / H,
                 slope));
}

} // namespace autoddl::codegen::emit
