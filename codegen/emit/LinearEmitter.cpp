//===- LinearEmitter.cpp - linear, matmul and bias ------------------------===//
//
// linear (column-, row- and vocab-parallel, sequence-split, the GEMM
// epilogue fusions), matmul and bias_add.
// One function per op kind, registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"

namespace autoddl::codegen::emit {

/// linear
void Emitter::emitLinear(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const bool tw = attrOr<bool>(op, "transpose_weight", false);
  const int64_t K = lastDim(xs[0]), N = numel(xs[0]) / K;
  // A row-parallel linear reduce-scattering into split rows (Layout.cpp):
  // its whole partial output, and in the backward its all-gathered output
  // gradient (which every GEMM of the backward reads), share one buffer.
  const bool scatters = p.mode == OpMode::Row && p.result.split();
  const std::string dyRows = dy;
  if (scatters) {
    const std::string whole = names_[size_t(r)] + "_whole";
    addMember(st, {whole, N * lastDim(ys),
                   shapeStr(local(r, TpLayout{})) +
                       " partial sum, then the gathered output gradient",
                   false, false});
    dy = "a." + whole + ".data()";
  }
  auto pad = padRows_.find(op.operands[1]);
  const int64_t O = pad != padRows_.end() ? pad->second : lastDim(ys);
  if (pad != padRows_.end())
    F(fmt::format("// the vocabulary padded: {} output features, the last "
                  "{} zero",
                  O, O - lastDim(ys)));
  const std::string b = op.operands.size() > 2 ? x[2] : "nullptr";
  const std::string db = op.operands.size() > 2 ? dx[2] : "nullptr";
  const char *twS = tw ? "true" : "false";
  const bool needDx = !isInput(op.operands[0]);
  // The sum's gradient is this linear's output's (planResidualFusion).
  std::string residualForward;
  if (addOfLinear_.count(i)) {
    const size_t ai = addOfLinear_.at(i), lk = linearOperandOfAdd_.at(ai);
    const OpDef &add = g_.ops[ai];
    const int res = add.operands[1 - lk], sum = add.results[0];
    dy = grad(sum, L_.ops[ai].result);
    residualForward = fmt::format(
        "linear_residual_forward({}, {}, {}, {}, {}, {}, {}, {}, {}); // and "
        "{}",
        val(sum, L_.ops[ai].result), val(res, L_.ops[ai].operands[1 - lk]),
        x[0], x[1], b, N, K, O, twS, commentText(add.name));
  }
  // The input gradient through a fused GELU (planGeluFusion): pre's
  // gradient, written whole by this GEMM.
  std::string dgelu;
  if (needDx && geluOfFc2_.count(i)) {
    const size_t gi = geluOfFc2_.at(i);
    const int pre = g_.ops[gi].operands[0];
    const TpLayout lp = L_.ops[gi].operands[0];
    dgelu = fmt::format("linear_backward_dgelu({}, {}, {}, {}, {}, {}, {}, "
                        "{}); // through {}",
                        grad(pre, lp), dy, x[1], val(pre, lp), N, K, O, twS,
                        commentText(g_.ops[gi].name));
    storedGrads_.insert(grad(pre, lp)); // its only writer, storing
  }
  // An input gradient this linear alone writes is stored (beta = 0); not
  // the column-parallel one, added from its all-reduced partial.
  const bool storeDx = needDx && dgelu.empty() && p.mode != OpMode::Column &&
                       storesGrad(i, op.operands[0], p.operands[0], dx[0]);
  const char *storeS = storeDx ? ", false" : "";
  if (storeDx)
    storedGrads_.insert(dx[0]);
  if (p.mode == OpMode::Row) {
    // The partial sum: all-reduced in place, or reduce-scattered from the
    // whole buffer onto the result's rows (`scatters`); then the bias.
    const int64_t rows = n / O;
    F(fmt::format("linear_forward({}, {}, {}, nullptr, {}, {}, {}, {});",
                  scatters ? dy : y, x[0], x[1], N, K, O, twS));
    if (scatters)
      F(fmt::format("reduce_scatter_forward({}, {}, {}, {}, g.tp); // P -> "
                    "{}",
                    y, dy, shapeInit(local(r, TpLayout{})), p.result.dim,
                    p.result.str()));
    else
      F(fmt::format("all_reduce_forward({}, {}, g.tp); // P -> B", y, N * O));
    if (b != "nullptr")
      F(fmt::format("bias_add_forward({}, {}, {}, {}, {});", y, y, b, rows, O));
    if (scatters) {
      BI("// the reduce-scatter's transpose: all-gather the output gradient");
      BI(fmt::format("all_gather_forward({}, {}, {}, {}, g.tp);", dy, dyRows,
                     shapeInit(ys), p.result.dim));
    } else {
      BI("// the all-reduce's transpose is the identity (B gradient)");
    }
    if (!dgelu.empty())
      BI(dgelu);
    else if (needDx)
      BI(fmt::format("linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                     "{}, {}, {}{});",
                     dx[0], dy, x[0], x[1], N, K, O, twS, storeS));
    BW(fmt::format("linear_backward(nullptr, {}, nullptr, {}, {}, {}, {}, {}, "
                   "{}, {});",
                   dx[1], dy, x[0], x[1], N, K, O, twS));
    if (b != "nullptr") // on split rows: partial over tp
      BW(fmt::format("bias_add_backward(nullptr, {}, {}, {}, {});", db, dyRows,
                     rows, O));
    emitKfacCurvature(c, dy, N, K, O, tw); // dy: the whole output gradient
  } else {
    if (geluOfFc1_.count(i)) {
      const size_t gi = geluOfFc1_.at(i);
      F(fmt::format("linear_gelu_forward({}, {}, {}, {}, {}, {}, {}, {}, "
                    "{}); // and {}",
                    val(g_.ops[gi].results[0], L_.ops[gi].result), y, x[0],
                    x[1], b, N, K, O, twS, commentText(g_.ops[gi].name)));
    } else if (!residualForward.empty()) {
      F(residualForward);
    } else {
      F(fmt::format("linear_forward({}, {}, {}, {}, {}, {}, {}, {});", y, x[0],
                    x[1], b, N, K, O, twS));
    }
    if (needDx && p.mode == OpMode::Column &&
        gathersPartialGrads(op.operands[0])) {
      BI("// column-parallel: dx from this rank's output features is a "
         "partial sum, added as it is (the all-gather's backward "
         "reduce-scatters it)");
      BI(fmt::format("linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                     "{}, {}, {});",
                     dx[0], dy, x[0], x[1], N, K, O, twS));
    } else if (needDx && p.mode == OpMode::Column && target_.scratchInStage) {
      const std::string part = names_[size_t(r)] + "_dx_partial";
      addMember(st, {part, N * K, shapeStr({N, K}) + " partial input gradient",
                     false, false});
      BI("{ // column-parallel: dx from this rank's output features is a "
         "partial sum (P -> B)");
      BI(fmt::format("  act_t *partial = a.{}.data();", part));
      BI(fmt::format("  zero(partial, {} * sizeof(act_t));", N * K));
      BI(fmt::format("  linear_backward(partial, nullptr, nullptr, {}, {}, "
                     "{}, {}, {}, {}, {});",
                     dy, x[0], x[1], N, K, O, twS));
      BI(fmt::format("  all_reduce_forward(partial, {}, g.tp);", N * K));
      BI(fmt::format("  add_into({}, partial, {});", dx[0], N * K));
      BI("}");
    } else if (needDx && p.mode == OpMode::Column) {
      BI("{ // column-parallel: dx from this rank's output features is a "
         "partial sum (P -> B)");
      BI(fmt::format("  std::vector<float> partial({});", N * K));
      BI(fmt::format("  linear_backward(partial.data(), nullptr, nullptr, {}, "
                     "{}, {}, {}, {}, {}, {});",
                     dy, x[0], x[1], N, K, O, twS));
      BI(fmt::format("  all_reduce_forward(partial.data(), {}, g.tp);", N * K));
      BI(fmt::format("  add_into({}, partial.data(), {});", dx[0], N * K));
      BI("}");
    } else if (!dgelu.empty()) {
      BI(dgelu);
    } else if (needDx) {
      BI(fmt::format("linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                     "{}, {}, {}{});",
                     dx[0], dy, x[0], x[1], N, K, O, twS, storeS));
    }
    BW(fmt::format("linear_backward(nullptr, {}, {}, {}, {}, {}, {}, {}, {}, "
                   "{});",
                   dx[1], db, dy, x[0], x[1], N, K, O, twS));
    emitKfacCurvature(c, dy, N, K, O, tw); // tp > 1: refused (checkKfac)
  }
}

/// matmul
void Emitter::emitMatmul(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const bool tb = attrOr<bool>(op, "transpose_b", false);
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
void Emitter::emitBiasAdd(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t O = lastDim(ys), N = n / O;
  F(fmt::format("bias_add_forward({}, {}, {}, {}, {});", y, x[0], x[1], N, O));
  BI(fmt::format("bias_add_backward({}, {}, {}, {}, {});", dx[0], dx[1], dy, N,
                 O));
}

} // namespace autoddl::codegen::emit
