//===- LinearEmitter.cpp - linear, matmul and bias ------------------------===//
//
// linear (column-, row- and vocab-parallel, sequence-split, the GEMM
// epilogue fusions), matmul and bias_add.
// One function per op kind, registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpEmitters.h"

#include <optional>

namespace autoddl::codegen::emit {

namespace {

/// What a linear's GEMM calls share, as the generated program names it.
struct LinearGemm {
  std::string y, x, w, b, dx, dw, db; // b, db: "nullptr" without a bias
  std::string dy;                     // the output gradient the GEMMs read
  int64_t N = 0, K = 0, O = 0;        // rows, input and output features
  const char *tw = "false";           // the weight stored [O, K]
  bool needDx = false;                // the input is not a model input
  std::string dgelu;      // the input gradient through a fused GELU, or ""
  const char *store = ""; // ", false": the input gradient stored (beta = 0)
};

/// The input gradient written by this GEMM alone (`g.dgelu` through a fused
/// GELU), none for a model input.
void emitPlainInputGradient(OpCall &c, const LinearGemm &g) {
  if (!g.dgelu.empty())
    c.BI(g.dgelu);
  else if (g.needDx)
    c.BI(fmt::format("linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                     "{}, {}, {}{});",
                     g.dx, g.dy, g.x, g.w, g.N, g.K, g.O, g.tw, g.store));
}

/// A row-parallel linear (its weight split on the input features): the
/// partial sum all-reduced in place, or reduce-scattered from the whole
/// buffer `g.dy` onto the result's rows `rowsOut` (`scatter`: the whole
/// output's shape); then the bias. Its backward reads the whole output
/// gradient: the B gradient as it is, or the rows' gradient `dyRows`
/// all-gathered into `g.dy` first.
void emitRowParallel(OpCall &c, const LinearGemm &g, const std::string &y,
                     const std::string &dyRows,
                     const std::optional<std::string> &scatter,
                     const TpLayout &rowsOut, const std::vector<int64_t> &ys) {
  const int64_t rows = c.n / g.O;
  c.F(fmt::format("linear_forward({}, {}, {}, nullptr, {}, {}, {}, {});",
                  scatter ? g.dy : y, g.x, g.w, g.N, g.K, g.O, g.tw));
  if (scatter)
    c.F(fmt::format("reduce_scatter_forward({}, {}, {}, {}, g.tp); // P -> "
                    "{}",
                    y, g.dy, *scatter, rowsOut.dim, rowsOut.str()));
  else
    c.F(fmt::format("all_reduce_forward({}, {}, g.tp); // P -> B", y,
                    g.N * g.O));
  if (g.b != "nullptr")
    c.F(fmt::format("bias_add_forward({}, {}, {}, {}, {});", y, y, g.b, rows,
                    g.O));
  if (scatter) {
    c.BI("// the reduce-scatter's transpose: all-gather the output gradient");
    c.BI(fmt::format("all_gather_forward({}, {}, {}, {}, g.tp);", g.dy, dyRows,
                     shapeInit(ys), rowsOut.dim));
  } else {
    c.BI("// the all-reduce's transpose is the identity (B gradient)");
  }
  emitPlainInputGradient(c, g);
  c.BW(fmt::format("linear_backward(nullptr, {}, nullptr, {}, {}, {}, {}, {}, "
                   "{}, {});",
                   g.dw, g.dy, g.x, g.w, g.N, g.K, g.O, g.tw));
  if (g.b != "nullptr") // on split rows: partial over tp
    c.BW(fmt::format("bias_add_backward(nullptr, {}, {}, {}, {});", g.db,
                     dyRows, rows, g.O));
}

/// How a column-parallel linear's input gradient (a partial sum over tp: this
/// rank's output features) reaches the input's gradient.
enum class ColumnDx {
  Added,        // added as it is (the input's all-gather reduce-scatters it)
  StageScratch, // all-reduced in a stage member, then added
  LocalVector,  // all-reduced in a local vector, then added
};

/// A column-parallel linear's input gradient, reduced as `how` says
/// (`scratch`: the stage member of StageScratch).
void emitColumnInputGradient(OpCall &c, const LinearGemm &g, ColumnDx how,
                             const std::string &scratch) {
  const int64_t NK = g.N * g.K;
  if (how == ColumnDx::Added) {
    c.BI("// column-parallel: dx from this rank's output features is a "
         "partial sum, added as it is (the all-gather's backward "
         "reduce-scatters it)");
    c.BI(fmt::format("linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                     "{}, {}, {});",
                     g.dx, g.dy, g.x, g.w, g.N, g.K, g.O, g.tw));
    return;
  }
  c.BI("{ // column-parallel: dx from this rank's output features is a "
       "partial sum (P -> B)");
  // The partial's buffer: the stage member, or a vector of its own.
  if (how == ColumnDx::StageScratch) {
    c.BI(fmt::format("  act_t *partial = a.{}.data();", scratch));
    c.BI(fmt::format("  zero(partial, {} * sizeof(act_t));", NK));
  } else {
    c.BI(fmt::format("  std::vector<float> partial({});", NK));
  }
  const char *partial =
      how == ColumnDx::StageScratch ? "partial" : "partial.data()";
  c.BI(fmt::format("  linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                   "{}, {}, {});",
                   partial, g.dy, g.x, g.w, g.N, g.K, g.O, g.tw));
  c.BI(fmt::format("  all_reduce_forward({}, {}, g.tp);", partial, NK));
  c.BI(fmt::format("  add_into({}, {}, {});", g.dx, partial, NK));
  c.BI("}");
}

} // namespace

/// linear
void OpEmitters::emitLinear(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const bool tw = attrOf(op, ops::attr::kTransposeWeight);
  LinearGemm g;
  g.K = lastDim(xs[0]);
  g.N = numel(xs[0]) / g.K;
  g.x = x[0];
  g.w = x[1];
  g.dx = dx[0];
  g.dw = dx[1];
  g.tw = tw ? "true" : "false";
  // A row-parallel linear reduce-scattering into split rows (Layout.cpp):
  // its whole partial output, and in the backward its all-gathered output
  // gradient (which every GEMM of the backward reads), share one buffer.
  const bool scatters = p.mode == OpMode::Row && p.result.split();
  const std::string dyRows = dy;
  if (scatters) {
    const std::string whole = cx_.names[size_t(r)] + "_whole";
    members_.add(st, {whole, g.N * lastDim(ys),
                      shapeStr(cx_.local(r, TpLayout{})) +
                          " partial sum, then the gathered output gradient",
                      false, false});
    dy = "a." + whole + ".data()";
  }
  auto pad = cx_.padRows.find(op.operands[1]);
  g.O = pad != cx_.padRows.end() ? pad->second : lastDim(ys);
  if (pad != cx_.padRows.end())
    F(fmt::format("// the vocabulary padded: {} output features, the last "
                  "{} zero",
                  g.O, g.O - lastDim(ys)));
  g.b = op.operands.size() > 2 ? x[2] : "nullptr";
  g.db = op.operands.size() > 2 ? dx[2] : "nullptr";
  g.needDx = !cx_.isInput(op.operands[0]);
  // The sum's gradient is this linear's output's (planResidualFusion).
  std::string residualForward;
  if (cx_.addOfLinear.count(i)) {
    const size_t ai = cx_.addOfLinear.at(i), lk = cx_.linearOperandOfAdd.at(ai);
    const OpDef &add = cx_.g.ops[ai];
    const int res = add.operands[1 - lk], sum = add.results[0];
    dy = cx_.grad(sum, cx_.L.ops[ai].result);
    residualForward = fmt::format(
        "linear_residual_forward({}, {}, {}, {}, {}, {}, {}, {}, {}); // and "
        "{}",
        cx_.val(sum, cx_.L.ops[ai].result),
        cx_.val(res, cx_.L.ops[ai].operands[1 - lk]), g.x, g.w, g.b, g.N, g.K,
        g.O, g.tw, commentText(add.name));
  }
  g.dy = dy;
  // The input gradient through a fused GELU (planGeluFusion): pre's
  // gradient, written whole by this GEMM.
  if (g.needDx && cx_.geluOfFc2.count(i)) {
    const size_t gi = cx_.geluOfFc2.at(i);
    const int pre = cx_.g.ops[gi].operands[0];
    const TpLayout lp = cx_.L.ops[gi].operands[0];
    g.dgelu = fmt::format("linear_backward_dgelu({}, {}, {}, {}, {}, {}, {}, "
                          "{}); // through {}",
                          cx_.grad(pre, lp), g.dy, g.w, cx_.val(pre, lp), g.N,
                          g.K, g.O, g.tw, commentText(cx_.g.ops[gi].name));
    storedGrads_.insert(cx_.grad(pre, lp)); // its only writer, storing
  }
  // An input gradient this linear alone writes is stored (beta = 0); not
  // the column-parallel one, added from its all-reduced partial.
  const bool storeDx = g.needDx && g.dgelu.empty() &&
                       p.mode != OpMode::Column &&
                       cx_.storesGrad(i, op.operands[0], p.operands[0], dx[0]);
  g.store = storeDx ? ", false" : "";
  if (storeDx)
    storedGrads_.insert(dx[0]);
  if (p.mode == OpMode::Row) {
    std::optional<std::string> scatter;
    if (scatters)
      scatter = shapeInit(cx_.local(r, TpLayout{}));
    emitRowParallel(c, g, y, dyRows, scatter, p.result, ys);
  } else {
    if (cx_.geluOfFc1.count(i)) {
      const size_t gi = cx_.geluOfFc1.at(i);
      F(fmt::format("linear_gelu_forward({}, {}, {}, {}, {}, {}, {}, {}, "
                    "{}); // and {}",
                    cx_.val(cx_.g.ops[gi].results[0], cx_.L.ops[gi].result), y,
                    g.x, g.w, g.b, g.N, g.K, g.O, g.tw,
                    commentText(cx_.g.ops[gi].name)));
    } else if (!residualForward.empty()) {
      F(residualForward);
    } else {
      F(fmt::format("linear_forward({}, {}, {}, {}, {}, {}, {}, {});", y, g.x,
                    g.w, g.b, g.N, g.K, g.O, g.tw));
    }
    if (g.needDx && p.mode == OpMode::Column) {
      const ColumnDx how = cx_.gathersPartialGrads(op.operands[0])
                               ? ColumnDx::Added
                           : cx_.target.scratchInStage ? ColumnDx::StageScratch
                                                       : ColumnDx::LocalVector;
      const std::string scratch = cx_.names[size_t(r)] + "_dx_partial";
      if (how == ColumnDx::StageScratch)
        members_.add(st, {scratch, g.N * g.K,
                          shapeStr({g.N, g.K}) + " partial input gradient",
                          false, false});
      emitColumnInputGradient(c, g, how, scratch);
    } else {
      emitPlainInputGradient(c, g);
    }
    BW(fmt::format("linear_backward(nullptr, {}, {}, {}, {}, {}, {}, {}, {}, "
                   "{});",
                   g.dw, g.db, g.dy, g.x, g.w, g.N, g.K, g.O, g.tw));
  }
  // dy: the whole output gradient (tp > 1 column-parallel: refused by
  // KfacEmitter).
  kfac_.record(c, g.dy, g.N, g.K, g.O, tw);
}

/// matmul
void OpEmitters::emitMatmul(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const bool tb = attrOf(op, ops::attr::kTransposeB);
  const auto &a = xs[0];
  const int64_t M = a[a.size() - 2], K = a.back(), N = ys.back(),
                Bt = numel(a) / (M * K);
  const char *tbS = tb ? "true" : "false";
  F(fmt::format("matmul_forward({}, {}, {}, {}, {}, {}, {}, {});", y, x[0],
                x[1], Bt, M, K, N, tbS));
  BI(fmt::format("matmul_backward({}, {}, {}, {}, {}, {}, {}, {}, {}, {});",
                 dx[0], dx[1], dy, x[0], x[1], Bt, M, K, N, tbS));
}

/// bias_add
void OpEmitters::emitBiasAdd(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t O = lastDim(ys), N = n / O;
  // An input gradient this op alone writes is stored, not added (no zeroing).
  const bool store = cx_.storesGrad(i, op.operands[0], p.operands[0], dx[0]);
  if (store)
    storedGrads_.insert(dx[0]);
  const char *accumulate = store ? ", false" : "";
  if (auto it = cx_.reluOfBias.find(i); it != cx_.reluOfBias.end()) {
    // The ReLU after it runs here (planBiasReluFusion): its output written,
    // its output gradient taken to x and the bias.
    const size_t ri = it->second;
    const int out = cx_.g.ops[ri].results[0];
    const TpLayout lo = cx_.L.ops[ri].result;
    const std::string relu = cx_.val(out, lo), drelu = cx_.grad(out, lo);
    F(fmt::format("bias_relu_forward({}, {}, {}, {}, {}); // and {}", relu,
                  x[0], x[1], N, O, commentText(cx_.g.ops[ri].name)));
    BI(fmt::format("bias_relu_backward({}, {}, {}, {}, {}, {}{});", dx[0],
                   dx[1], drelu, relu, N, O, accumulate));
    return;
  }
  F(fmt::format("bias_add_forward({}, {}, {}, {}, {});", y, x[0], x[1], N, O));
  BI(fmt::format("bias_add_backward({}, {}, {}, {}, {}{});", dx[0], dx[1], dy,
                 N, O, accumulate));
}

} // namespace autoddl::codegen::emit
