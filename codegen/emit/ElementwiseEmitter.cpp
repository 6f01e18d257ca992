//===- ElementwiseEmitter.cpp - elementwise ops ---------------------------===//
//
// add (and the residual add fused into a linear), mul, gelu (and the GELU
// fused into two linears), relu, silu, swiglu, and softmax.
// One function per op kind, registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpEmitters.h"

namespace autoddl::codegen::emit {

/// add
void OpEmitters::emitAdd(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  if (cx_.linearOperandOfAdd.count(i)) {
    const size_t lk = cx_.linearOperandOfAdd.at(i);
    F("// in the GEMM of its linear operand (linear_residual_forward)");
    BI("// the linear operand's gradient is this sum's (its backward reads "
       "it)");
    if (!cx_.isInput(op.operands[1 - lk]))
      BI(fmt::format("add_into({}, {}, {}{});", dx[1 - lk], dy, n,
                     storeFlags(c, {1 - lk})));
    return;
  }
  // The ReLU after it runs here (planProducerReluFusion): its output
  // written, its output gradient masked by it to both operands.
  const auto it = cx_.reluAfter.find(i);
  std::string out = y, relu;
  // A fused norm's operand reads its gradient from the other operand's
  // buffer (gradAlias): written once, there.
  std::string d0 = dx[0], d1 = dx[1];
  if (cx_.gradAlias.count(op.operands[0]))
    d0 = "nullptr";
  if (cx_.gradAlias.count(op.operands[1]))
    d1 = "nullptr";
  if (it != cx_.reluAfter.end()) {
    const int t = cx_.g.ops[it->second].results[0];
    const TpLayout lo = cx_.L.ops[it->second].result;
    out = cx_.val(t, lo);
    relu = commentText(cx_.g.ops[it->second].name);
    BI(fmt::format("add_relu_backward({}, {}, {}, {}, {}{});", d0, d1, out,
                   cx_.grad(t, lo), n, storeFlags(c, {0, 1})));
  } else {
    BI(fmt::format("add_backward({}, {}, {}, {}{});", d0, d1, dy, n,
                   storeFlags(c, {0, 1})));
  }
  // A batch norm operand runs here, the sum in its normalise pass
  // (planResidualNormFusion); its backward stays at its own step.
  if (auto nt = cx_.normOfAdd.find(i); nt != cx_.normOfAdd.end()) {
    const NormAtAdd &norm = normsAtAdds_.at(nt->second);
    const size_t k = op.operands[0] == cx_.g.ops[nt->second].results[0] ? 0 : 1;
    F(fmt::format("autoddl::rt::batchnorm_add_forward({}, {{{}}}, {}, {}, {}, "
                  "{}); // {}, then this add{}",
                  norm.name, norm.in, x[1 - k], out,
                  norm.moments.empty() ? "nullptr" : norm.moments,
                  relu.empty() ? "false" : "true",
                  commentText(cx_.g.ops[nt->second].name),
                  relu.empty() ? "" : " and " + relu));
    return;
  }
  if (relu.empty())
    F(fmt::format("add_forward({}, {}, {}, {});", y, x[0], x[1], n));
  else
    F(fmt::format("add_relu_forward({}, {}, {}, {}); // and {}", out, x[0],
                  x[1], n, relu));
}

/// mul
void OpEmitters::emitMul(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  F(fmt::format("mul_forward({}, {}, {}, {});", y, x[0], x[1], n));
  BI(fmt::format("mul_backward({}, {}, {}, {}, {}, {}{});", dx[0], dx[1], dy,
                 x[0], x[1], n, storeFlags(c, {0, 1})));
}

/// gelu
void OpEmitters::emitGelu(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  if (cx_.fusedGelus.count(i)) {
    F("// in the GEMM epilogue of its producer (linear_gelu_forward)");
    BI("// in the input-gradient GEMM of its consumer (linear_backward_dgelu)");
    return;
  }
  const char *tanhS =
      attrOf(op, ops::attr::kApproximate) == "none" ? "false" : "true";
  F(fmt::format("gelu_forward({}, {}, {}, {});", y, x[0], n, tanhS));
  BI(fmt::format("gelu_backward({}, {}, {}, {}, {}{});", dx[0], x[0], dy, n,
                 tanhS, storeFlags(c, {0})));
}

/// relu, silu
void OpEmitters::emitReluSilu(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  if (cx_.fusedRelus.count(i)) { // planBiasReluFusion
    F("// in the pass of its bias_add (bias_relu_forward)");
    BI("// in the pass of its bias_add (bias_relu_backward)");
    return;
  }
  if (cx_.relusInProducer.count(i)) { // planProducerReluFusion
    const bool add =
        cx_.g.ops[size_t(cx_.producer[size_t(op.operands[0])])].kind == "add";
    const char *call = add ? "add_relu" : "batchnorm_relu";
    F(fmt::format("// in the passes of its {} ({}_forward)",
                  add ? "add" : "batch norm", call));
    BI(fmt::format("// in the passes of its {} ({}_backward)",
                   add ? "add" : "batch norm", call));
    return;
  }
  F(fmt::format("{}_forward({}, {}, {});", k, y, x[0], n));
  BI(fmt::format("{}_backward({}, {}, {}, {}{});", k, dx[0], x[0], dy, n,
                 storeFlags(c, {0})));
}

/// swiglu
void OpEmitters::emitSwiglu(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  F(fmt::format("swiglu_forward({}, {}, {}, {});", y, x[0], x[1], n));
  BI(fmt::format("swiglu_backward({}, {}, {}, {}, {}, {}{});", dx[0], dx[1],
                 x[0], x[1], dy, n, storeFlags(c, {0, 1})));
}

/// softmax
void OpEmitters::emitSoftmax(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  int64_t axis = attrOf(op, ops::attr::kAxis);
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
}

} // namespace autoddl::codegen::emit
