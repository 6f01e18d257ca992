//===- OpEmitters.cpp - one op's forward and backward lines
//-----------------===//
//
// Per op kind, the kernel calls of its forward and its backward halves.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"

namespace autoddl::codegen::emit {

/// Emits op i (with the conversions its operands need) into `steps`.
void Emitter::emitOp(size_t i, std::vector<Step> &steps) {
  const OpDef &op = g_.ops[i];
  const OpPlan &p = L_.ops[i];
  const int st = p.stage;
  std::vector<std::string> x(op.operands.size()), dx(op.operands.size());
  std::vector<std::vector<int64_t>> xs(op.operands.size());
  for (size_t k = 0; k < op.operands.size(); ++k) {
    const int t = op.operands[k];
    x[k] = ensureLayout(st, t, p.operands[k], steps);
    dx[k] = grad(t, p.operands[k]);
    xs[k] = local(t, p.operands[k]);
  }
  const int r = op.results[0];
  // A fused GELU's output gradient is never formed (planGeluFusion); a
  // linear whose GEMM writes its sum with a residual (planResidualFusion)
  // has neither output nor gradient buffer.
  if (!addOfLinear_.count(i))
    addTensor(st, r, p.result, !fusedGelus_.count(i));
  const std::vector<int64_t> ys = local(r, p.result);
  const std::string y = full(r).empty() ? "" : val(r, p.result);
  std::string dy = full(r).empty() ? "" : grad(r, p.result);
  const int64_t n = numel(ys);
  Step s;
  // The comment line: name, kind, mode, operand and result shapes.
  std::string operands;
  for (size_t k = 0; k < op.operands.size(); ++k)
    operands += (k ? ", " : "") + shapeStr(xs[k]) +
                (p.operands[k].split() ? " " + p.operands[k].str() : "");
  const char *modeName[] = {"",
                            " (column-parallel)",
                            " (row-parallel)",
                            " (vocab-parallel table)",
                            " (local heads)",
                            " (on local shards)",
                            " (vocab-parallel)"};
  s.fwd.push_back(fmt::format("  // {}: {}{}({}) -> {}{}", op.name, op.kind,
                              modeName[int(p.mode)], operands, shapeStr(ys),
                              p.result.split() ? " " + p.result.str() : ""));
  s.bwdInput.push_back(fmt::format("  // {}: {} backward", op.name, op.kind));
  auto F = [&](std::string line) { s.fwd.push_back("  " + line); };
  auto BI = [&](std::string line) { s.bwdInput.push_back("  " + line); };
  auto BW = [&](std::string line) { s.bwdWeight.push_back("  " + line); };
  const std::string &k = op.kind;
  static const std::set<std::string> imageOps = {"conv2d", "pool2d", "flatten",
                                                 "reshape", "transpose"};
  if (cuda_ && imageOps.count(k))
    throw UserError("codegen: op " + op.name + " (" + k +
                    ") is not supported by the cuda backend yet (use "
                    "--backend cpu)");
  if (cuda_) {
    // The CUDA kernels take parameters (act_t working copy, fp32 gradient)
    // only where a layer has weights; elsewhere a parameter operand would
    // need an activation-typed gradient.
    static const std::set<std::string> weighted = {"embedding", "positional",
                                                   "linear",    "bias_add",
                                                   "layernorm", "rmsnorm"};
    for (int t : op.operands)
      if (isParam(t) && !weighted.count(k))
        throw UserError("codegen: op " + op.name + " (" + k +
                        ") takes the parameter " + g_.tensors[size_t(t)].name +
                        " as an operand; the cuda backend runs " + k +
                        " on activations only (use --backend cpu)");
  }
  auto lastDim = [](const std::vector<int64_t> &v) { return v.back(); };
  // The first position of an op run on a sequence split (T positions a rank).
  auto sequenceOffset = [&](const OpPlan &p, int64_t T) {
    return p.mode == OpMode::Local && p.operands[0].dim == 1
               ? fmt::format("g.rtp * {}", T)
               : std::string("0");
  };
  // spmm's x and sddmm's y: every node's rows, when dp splits the nodes.
  auto gatherNodes = [&](size_t k) {
    const std::string all = allNodes(st, op.operands[k], p.operands[k], steps);
    if (all == x[k])
      return;
    x[k] = all;
    dx[k] = isInput(op.operands[k]) ? "nullptr" : "a.d_" + all.substr(2);
  };

  if (k == "embedding") {
    const int64_t N = numel(xs[0]), C = xs[1][1], V = full(op.operands[1])[0];
    if (p.mode == OpMode::VocabTable) {
      const int64_t Vl = xs[1][0];
      F(fmt::format("embedding_forward({}, {}, {}, {}, {}, g.rtp * {}, {});", y,
                    x[0], x[1], N, C, Vl, Vl));
      F(fmt::format("all_reduce_forward({}, {}, g.tp); // P -> B", y, N * C));
      BI(fmt::format("embedding_backward({}, {}, {}, {}, {}, g.rtp * {}, {});",
                     dx[1], dy, x[0], N, C, Vl, Vl));
    } else {
      F(fmt::format("embedding_forward({}, {}, {}, {}, {}, 0, {});", y, x[0],
                    x[1], N, C, V));
      BI(fmt::format("embedding_backward({}, {}, {}, {}, {}, 0, {});", dx[1],
                     dy, x[0], N, C, V));
    }
  } else if (k == "positional") {
    const int64_t B = xs[0][0], T = xs[0][1], C = xs[0][2];
    const std::string t0 = sequenceOffset(p, T);
    F(fmt::format("positional_forward({}, {}, {}, {}, {}, {}, {});", y, x[0],
                  x[1], B, T, C, t0));
    BI(fmt::format("positional_backward({}, {}, {}, {}, {}, {}, {});", dx[0],
                   dx[1], dy, B, T, C, t0));
  } else if (k == "rotary") {
    const int64_t B = xs[0][0], T = xs[0][1],
                  D = attrOr<int64_t>(op, "head_dim", 1),
                  H = lastDim(xs[0]) / D;
    const std::string theta = fmtDouble(attrOr<double>(op, "theta", 10000.0));
    const std::string t0 = sequenceOffset(p, T);
    F(fmt::format("rotary_forward({}, {}, {}, {}, {}, {}, {}, {});", y, x[0], B,
                  T, H, D, theta, t0));
    BI(fmt::format("rotary_backward({}, {}, {}, {}, {}, {}, {}, {});", dx[0],
                   dy, B, T, H, D, theta, t0));
  } else if (k == "linear") {
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
          x[0], x[1], b, N, K, O, twS, add.name);
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
                          g_.ops[gi].name);
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
        F(fmt::format("bias_add_forward({}, {}, {}, {}, {});", y, y, b, rows,
                      O));
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
      BW(fmt::format(
          "linear_backward(nullptr, {}, nullptr, {}, {}, {}, {}, {}, "
          "{}, {});",
          dx[1], dy, x[0], x[1], N, K, O, twS));
      if (b != "nullptr") // on split rows: partial over tp
        BW(fmt::format("bias_add_backward(nullptr, {}, {}, {}, {});", db,
                       dyRows, rows, O));
    } else {
      if (geluOfFc1_.count(i)) {
        const size_t gi = geluOfFc1_.at(i);
        F(fmt::format("linear_gelu_forward({}, {}, {}, {}, {}, {}, {}, {}, "
                      "{}); // and {}",
                      val(g_.ops[gi].results[0], L_.ops[gi].result), y, x[0],
                      x[1], b, N, K, O, twS, g_.ops[gi].name));
      } else if (!residualForward.empty()) {
        F(residualForward);
      } else {
        F(fmt::format("linear_forward({}, {}, {}, {}, {}, {}, {}, {});", y,
                      x[0], x[1], b, N, K, O, twS));
      }
      if (needDx && p.mode == OpMode::Column &&
          gathersPartialGrads(op.operands[0])) {
        BI("// column-parallel: dx from this rank's output features is a "
           "partial sum, added as it is (the all-gather's backward "
           "reduce-scatters it)");
        BI(fmt::format("linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                       "{}, {}, {});",
                       dx[0], dy, x[0], x[1], N, K, O, twS));
      } else if (needDx && p.mode == OpMode::Column && cuda_) {
        const std::string part = names_[size_t(r)] + "_dx_partial";
        addMember(st,
                  {part, N * K, shapeStr({N, K}) + " partial input gradient",
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
        BI(fmt::format(
            "  linear_backward(partial.data(), nullptr, nullptr, {}, "
            "{}, {}, {}, {}, {}, {});",
            dy, x[0], x[1], N, K, O, twS));
        BI(fmt::format("  all_reduce_forward(partial.data(), {}, g.tp);",
                       N * K));
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
    }
  } else if (k == "matmul") {
    const bool tb = attrOr<bool>(op, "transpose_b", false);
    const auto &a = xs[0];
    const int64_t M = a[a.size() - 2], K = a.back(), N = ys.back(),
                  Bt = numel(a) / (M * K);
    const char *tbS = tb ? "true" : "false";
    F(fmt::format("matmul_forward({}, {}, {}, {}, {}, {}, {}, {});", y, x[0],
                  x[1], Bt, M, K, N, tbS));
    BI(fmt::format("matmul_backward({}, {}, {}, {}, {}, {}, {}, {}, {}, {});",
                   dx[0], dx[1], dy, x[0], x[1], Bt, M, K, N, tbS));
  } else if (k == "bias_add") {
    const int64_t O = lastDim(ys), N = n / O;
    F(fmt::format("bias_add_forward({}, {}, {}, {}, {});", y, x[0], x[1], N,
                  O));
    BI(fmt::format("bias_add_backward({}, {}, {}, {}, {});", dx[0], dx[1], dy,
                   N, O));
  } else if (k == "add" && linearOperandOfAdd_.count(i)) {
    const size_t lk = linearOperandOfAdd_.at(i);
    F("// in the GEMM of its linear operand (linear_residual_forward)");
    BI("// the linear operand's gradient is this sum's (its backward reads "
       "it)");
    if (!isInput(op.operands[1 - lk]))
      BI(fmt::format("add_into({}, {}, {});", dx[1 - lk], dy, n));
  } else if (k == "add") {
    F(fmt::format("add_forward({}, {}, {}, {});", y, x[0], x[1], n));
    BI(fmt::format("add_backward({}, {}, {}, {});", dx[0], dx[1], dy, n));
  } else if (k == "mul") {
    F(fmt::format("mul_forward({}, {}, {}, {});", y, x[0], x[1], n));
    BI(fmt::format("mul_backward({}, {}, {}, {}, {}, {});", dx[0], dx[1], dy,
                   x[0], x[1], n));
  } else if (k == "gelu" && fusedGelus_.count(i)) {
    F("// in the GEMM epilogue of its producer (linear_gelu_forward)");
    BI("// in the input-gradient GEMM of its consumer (linear_backward_dgelu)");
  } else if (k == "gelu") {
    const char *tanhS = attrOr<std::string>(op, "approximate", "tanh") == "none"
                            ? "false"
                            : "true";
    F(fmt::format("gelu_forward({}, {}, {}, {});", y, x[0], n, tanhS));
    BI(fmt::format("gelu_backward({}, {}, {}, {}, {});", dx[0], x[0], dy, n,
                   tanhS));
  } else if (k == "relu" || k == "silu") {
    F(fmt::format("{}_forward({}, {}, {});", k, y, x[0], n));
    BI(fmt::format("{}_backward({}, {}, {}, {});", k, dx[0], x[0], dy, n));
  } else if (k == "swiglu") {
    F(fmt::format("swiglu_forward({}, {}, {}, {});", y, x[0], x[1], n));
    BI(fmt::format("swiglu_backward({}, {}, {}, {}, {}, {});", dx[0], dx[1],
                   x[0], x[1], dy, n));
  } else if (k == "layernorm" || k == "rmsnorm") {
    const int64_t C = lastDim(ys), N = n / C;
    const std::string eps = fmtDouble(attrOr<double>(op, "epsilon", 1e-5));
    const std::string base = names_[size_t(r)];
    addMember(st, {base + "_rstd", N, "[N] saved 1/std", false, false, true});
    if (k == "layernorm") {
      addMember(st, {base + "_mean", N, "[N] saved mean", false, false, true});
      const std::string beta = op.operands.size() > 2 ? x[2] : "nullptr";
      const std::string dbeta = op.operands.size() > 2 ? dx[2] : "nullptr";
      F(fmt::format("layernorm_forward({}, a.{}_mean.data(), a.{}_rstd.data(), "
                    "{}, {}, {}, {}, {}, {}f);",
                    y, base, base, x[0], x[1], beta, N, C, eps));
      BI(fmt::format("layernorm_backward({}, {}, {}, {}, {}, {}, "
                     "a.{}_mean.data(), a.{}_rstd.data(), {}, {});",
                     dx[0], dx[1], dbeta, dy, x[0], x[1], base, base, N, C));
    } else {
      F(fmt::format(
          "rmsnorm_forward({}, a.{}_rstd.data(), {}, {}, {}, {}, {}f);", y,
          base, x[0], x[1], N, C, eps));
      BI(fmt::format(
          "rmsnorm_backward({}, {}, {}, {}, {}, a.{}_rstd.data(), {}, "
          "{});",
          dx[0], dx[1], dy, x[0], x[1], base, N, C));
    }
  } else if (k == "softmax") {
    int64_t axis = attrOr<int64_t>(op, "axis", -1);
    if (axis < 0)
      axis += int64_t(ys.size());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= ys[size_t(d)];
    for (size_t d = size_t(axis) + 1; d < ys.size(); ++d)
      inner *= ys[d];
    const int64_t Ln = ys[size_t(axis)];
    F(fmt::format("softmax_forward({}, {}, {}, {}, {});", y, x[0], outer, Ln,
                  inner));
    BI(fmt::format("softmax_backward({}, {}, {}, {}, {}, {});", dx[0], y, dy,
                   outer, Ln, inner));
  } else if (k == "attention") {
    const int64_t D = attrOr<int64_t>(op, "head_dim", 1);
    int64_t H = attrOr<int64_t>(op, "num_heads", 1);
    int64_t G = attrOr<int64_t>(op, "num_kv_heads", H);
    if (p.mode == OpMode::HeadSplit) {
      H /= tp_;
      G /= tp_;
    }
    const bool causal = attrOr<bool>(op, "causal", true);
    const int64_t B = ys[0], T = ys[1];
    const std::string base = names_[size_t(r)];
    if (cuda_) // FlashAttention-style: the log-sum-exp, not the probabilities
      addMember(st, {base + "_lse", B * H * T,
                     shapeStr({B, H, T}) + " saved log-sum-exp", false, false,
                     true});
    else
      addMember(st, {base + "_att", B * H * T * T,
                     shapeStr({B, H, T, T}) + " saved probabilities", false,
                     false});
    std::string views, gviews;
    if (op.operands.size() == 1) {
      views = fmt::format("attention_qkv_views({}, {}, {}, {})", x[0], H, G, D);
      gviews = fmt::format("attention_qkv_grad_views({}, {}, {}, {})", dx[0], H,
                           G, D);
    } else {
      views = fmt::format("AttentionViews{{{}, {}, {}, {}, {}}}", x[0], x[1],
                          x[2], H * D, G * D);
      gviews = fmt::format("AttentionGradViews{{{}, {}, {}, {}, {}}}", dx[0],
                           dx[1], dx[2], H * D, G * D);
    }
    const char *causalS = causal ? "true" : "false";
    if (cuda_) {
      // Input gradients this attention alone writes are stored.
      bool store = true;
      for (size_t k = 0; k < op.operands.size(); ++k)
        store = store && storesGrad(i, op.operands[k], p.operands[k], dx[k]);
      if (store)
        storedGrads_.insert(dx.begin(), dx.end());
      F(fmt::format("attention_forward({}, a.{}_lse.data(), {}, {}, {}, {}, "
                    "{}, {}, {});",
                    y, base, views, B, T, H, G, D, causalS));
      BI(fmt::format("attention_backward({}, {}, {}, a.{}_lse.data(), {}, {}, "
                     "{}, {}, {}, {}, {}{});",
                     gviews, dy, y, base, views, B, T, H, G, D, causalS,
                     store ? ", false" : ""));
      profileScopes(s, k);
      steps.push_back(std::move(s));
      return;
    }
    F(fmt::format("attention_forward({}, a.{}_att.data(), {}, {}, {}, {}, {}, "
                  "{}, {});",
                  y, base, views, B, T, H, G, D, causalS));
    BI(fmt::format(
        "attention_backward({}, {}, a.{}_att.data(), {}, {}, {}, {}, "
        "{}, {});",
        gviews, dy, base, views, B, T, H, G, D));
  } else if (k == "cross_entropy") {
    const int64_t V = lastDim(xs[0]), N = numel(xs[0]) / V,
                  Vf = full(op.operands[0]).back();
    // A vocabulary tp does not divide: every rank's logits are V = ceil(Vf /
    // tp) columns from column g.rtp * V, of which the last rank's tail is
    // padding (Layout.cpp paddedVocab); the kernels read the real ones.
    const bool uneven = p.mode == OpMode::VocabLoss && Vf % tp_ != 0;
    const std::string cols =
        uneven ? fmt::format("std::min<int64_t>({}, {} - g.rtp * {})", V, Vf, V)
               : std::to_string(V);
    auto pad = padCols_.find(op.operands[0]);
    // The row stride of padded logits (an extra kernel argument).
    const std::string ld = pad != padCols_.end()
                               ? fmt::format(", {}", pad->second)
                           : uneven ? fmt::format(", {}", V)
                                    : std::string();
    // On split rows (batch or sequence) each tp rank holds N of the
    // micro-batch's tp * N positions.
    lossRowsSplit_ = p.mode == OpMode::Local;
    lossCount_ = lossRowsSplit_ ? N * tp_ : N;
    // cuda: dlogits this loss alone writes are stored (=), never zeroed.
    const bool storeDx = storesGrad(i, op.operands[0], p.operands[0], dx[0]);
    if (storeDx)
      storedGrads_.insert(dx[0]);
    const std::string ldStore =
        storeDx ? (ld.empty() ? std::string(", 0") : ld) + ", false" : ld;
    addMember(st, {"losses", N, "[N] per-position loss", false, false, true});
    if (p.mode == OpMode::VocabLoss) {
      addMember(st, {"loss_max", N, "[N] row max over the vocabulary", false,
                     false, true});
      addMember(st, {"loss_sums", 2 * N, "[2N] sum-exp and target logit", false,
                     false, true});
      if (ld.empty()) {
        F(fmt::format("crossentropy_vocab_parallel_forward(a.losses.data(), "
                      "a.loss_max.data(), a.loss_sums.data(), {}, {}, {}, {}, "
                      "g.rtp * {}, g.tp);",
                      x[0], x[1], N, V, V));
      } else { // the three steps of the forward, with the row stride
        F(fmt::format("crossentropy_vocab_parallel_max(a.loss_max.data(), {}, "
                      "{}, {}{});",
                      x[0], N, cols, ld));
        F(fmt::format("all_reduce_max(a.loss_max.data(), {}, g.tp);", N));
        F(fmt::format("crossentropy_vocab_parallel_sums(a.loss_sums.data(), "
                      "{}, {}, a.loss_max.data(), {}, {}, g.rtp * {}{});",
                      x[0], x[1], N, cols, V, ld));
        F(fmt::format("all_reduce_forward(a.loss_sums.data(), {}, g.tp);",
                      2 * N));
        F(fmt::format("crossentropy_vocab_parallel_loss(a.losses.data(), "
                      "a.loss_max.data(), a.loss_sums.data(), {}, {});",
                      x[1], N));
      }
      BI(fmt::format("crossentropy_vocab_parallel_backward({}, {}, {}, "
                     "a.loss_max.data(), a.loss_sums.data(), {}, {}, g.rtp * "
                     "{}, kLossScale{});",
                     dx[0], x[0], x[1], N, cols, V, ldStore));
    } else {
      addMember(st,
                {"loss_lse", N, "[N] saved log-sum-exp", false, false, true});
      F(fmt::format("crossentropy_forward(a.losses.data(), a.loss_lse.data(), "
                    "{}, {}, {}, {}{});",
                    x[0], x[1], N, V, ld));
      BI(fmt::format("crossentropy_backward({}, {}, a.loss_lse.data(), {}, {}, "
                     "{}, kLossScale{});",
                     dx[0], x[0], x[1], N, V, ldStore));
    }
    if (!cuda_) { // cuda: summed on the device at the end of the step
      F("a.loss_sum = 0;");
      F(fmt::format("for (int64_t i = 0; i < {}; ++i)", N));
      F("  a.loss_sum += a.losses[size_t(i)];");
    }
    if (reportsAccuracy() && p.mode == OpMode::VocabLoss) {
      // Gathered: tp * V columns a row, the padding (uneven) at the end.
      const int64_t Vg = V * tp_;
      const std::string whole = names_[size_t(op.operands[0])] + "_whole";
      const std::string ldG = Vg != Vf ? fmt::format(", {}", Vg) : "";
      if (pad != padCols_.end())
        throw std::logic_error("codegen: the accuracy of padded logits");
      addMember(st, {whole, N * Vg,
                     shapeStr({N, Vg}) + " gathered logits (accuracy)", false,
                     false, !cuda_});
      F(fmt::format("all_gather_forward(a.{}.data(), {}, {}, 1, g.tp); // for "
                    "the accuracy",
                    whole, x[0], shapeInit({N, V})));
      F(fmt::format("a.correct = count_correct(a.{}.data(), {}, {}, {}{});",
                    whole, x[1], N, Vf, ldG));
      if (graphModel_)
        F(fmt::format("a.correct_heldout = count_correct(a.{}.data(), "
                      "graph_heldout_labels(), {}, {}{});",
                      whole, N, Vf, ldG));
    } else if (reportsAccuracy()) {
      F(fmt::format("a.correct = count_correct({}, {}, {}, {});", x[0], x[1], N,
                    V));
      if (graphModel_)
        F(fmt::format("a.correct_heldout = count_correct({}, "
                      "graph_heldout_labels(), {}, {});",
                      x[0], N, V));
    }
  } else if (k == "conv2d") {
    // Replicated over tp: every rank convolves its whole micro-batch.
    const auto &xsh = xs[0], &wsh = xs[1];
    const std::string shape = fmt::format(
        "Conv2dShape{{{}, {}, {}, {}, {}, {}, {}, {}, {}}}", xsh[0], xsh[1],
        xsh[2], xsh[3], wsh[0], wsh[2], wsh[3],
        attrOr<int64_t>(op, "stride", 1), attrOr<int64_t>(op, "padding", 0));
    const std::string b = op.operands.size() > 2 ? x[2] : "nullptr";
    const std::string db = op.operands.size() > 2 ? dx[2] : "nullptr";
    F(fmt::format("conv2d_forward({}, {}, {}, {}, {});", y, x[0], x[1], b,
                  shape));
    if (!isInput(op.operands[0]))
      BI(fmt::format("conv2d_backward({}, nullptr, nullptr, {}, {}, {}, {});",
                     dx[0], dy, x[0], x[1], shape));
    BW(fmt::format("conv2d_backward(nullptr, {}, {}, {}, {}, {}, {});", dx[1],
                   db, dy, x[0], x[1], shape));
  } else if (k == "pool2d") {
    const auto &a = xs[0];
    const char *isMax =
        attrOr<std::string>(op, "kind", "max") == "max" ? "true" : "false";
    const int64_t kernel = attrOr<int64_t>(op, "kernel", 2),
                  stride = attrOr<int64_t>(op, "stride", kernel);
    F(fmt::format("pool2d_forward({}, {}, {}, {}, {}, {}, {}, {});", y, x[0],
                  a[0] * a[1], a[2], a[3], kernel, stride, isMax));
    if (!isInput(op.operands[0]))
      BI(fmt::format("pool2d_backward({}, {}, {}, {}, {}, {}, {}, {}, {});",
                     dx[0], x[0], dy, a[0] * a[1], a[2], a[3], kernel, stride,
                     isMax));
  } else if (k == "flatten" || k == "reshape") {
    F(fmt::format("std::copy_n({}, {}, {}); // the same row-major elements",
                  x[0], n, y));
    if (!isInput(op.operands[0]))
      BI(fmt::format("add_into({}, {}, {});", dx[0], dy, n));
  } else if (k == "transpose") {
    const std::string perm =
        shapeInit(attrOr<std::vector<int64_t>>(op, "perm", {}));
    F(fmt::format("transpose_forward({}, {}, {}, {});", y, x[0],
                  shapeInit(xs[0]), perm));
    if (!isInput(op.operands[0]))
      BI(fmt::format("transpose_backward({}, {}, {}, {});", dx[0], dy,
                     shapeInit(xs[0]), perm));
  } else if (k == "spmm" && !isInput(op.operands[0])) {
    // The adjacency's values are an activation (gat's attention): the
    // pattern is the sparse input it was computed on.
    const int64_t Fl = lastDim(ys);
    const std::string pattern =
        val(g_.sparsePattern(op.operands[0]), TpLayout{});
    gatherNodes(1);
    F(fmt::format("spmm_values_forward({}, {}, {}, {}, {});", y, pattern, x[0],
                  x[1], Fl));
    if (p.mode != OpMode::Local) {
      BI(fmt::format("spmm_values_backward({}, {}, {}, {}, {}, {}, {});", dx[1],
                     dx[0], pattern, x[0], dy, x[1], Fl));
    } else { // x split on features: dvalues from this rank's is partial
      const std::string nnz = elems(op.operands[0], p.operands[0]);
      BI("{ // the values' gradient from this rank's features is a partial sum "
         "(P -> B)");
      if (cuda_) {
        const std::string part = names_[size_t(r)] + "_dvalues_partial";
        addMember(st, {part, 0, "[nnz] partial gradient of the values", false,
                       false, false, nnz});
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
  } else if (k == "spmm") {
    const int64_t Fl = lastDim(ys);
    gatherNodes(1);
    F(fmt::format("spmm_forward({}, {}, {}, {});", y, x[0], x[1], Fl));
    if (!isInput(op.operands[1]))
      BI(fmt::format("spmm_backward({}, nullptr, {}, {}, {}, {});", dx[1], x[0],
                     dy, x[1], Fl));
  } else if (k == "sddmm") {
    const int64_t K = lastDim(xs[1]);
    gatherNodes(2);
    F(fmt::format("sddmm_forward({}, {}, {}, {}, {});", y, x[0], x[1], x[2],
                  K));
    if (p.mode == OpMode::Local) // x and y split on K: partial dot products
      F(fmt::format("all_reduce_forward({}, {}, g.tp); // P -> B", y,
                    elems(r, p.result)));
    if (!isInput(op.operands[1]) || !isInput(op.operands[2]))
      BI(fmt::format("sddmm_backward({}, {}, {}, {}, {}, {}, {});", dx[1],
                     dx[2], x[0], dy, x[1], x[2], K));
  } else if (k == "edge_softmax") {
    const std::string scale = fmtDouble(attrOr<double>(op, "scale", 1.0));
    F(fmt::format("edge_softmax_forward({}, {}, {}, {}f);", y, x[0], x[1],
                  scale));
    if (!isInput(op.operands[1]))
      BI(fmt::format("edge_softmax_backward({}, {}, {}, {}, {}f);", dx[1], x[0],
                     y, dy, scale));
  }
  // Which half writes each parameter's gradient (for the gradient buckets).
  auto writes = [](const std::vector<std::string> &lines,
                   const std::string &g) {
    for (const auto &l : lines)
      if (l.find(g) != std::string::npos)
        return true;
    return false;
  };
  for (size_t k = 0; k < op.operands.size(); ++k) {
    if (!isParam(op.operands[k]))
      continue;
    if (writes(s.bwdWeight, dx[k]))
      s.paramsWeight.push_back(op.operands[k]);
    else if (writes(s.bwdInput, dx[k]))
      s.paramsInput.push_back(op.operands[k]);
  }
  if (cuda_)
    profileScopes(s, k);
  steps.push_back(std::move(s));
}

} // namespace autoddl::codegen::emit
