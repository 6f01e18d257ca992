//===- ElementwiseEmitter.cpp - elementwise ops ---------------------------===//
//
// add (and the residual add fused into a linear), mul, gelu (and the GELU
// fused into two linears), relu, silu and swiglu.
// One function per op kind, registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"

namespace autoddl::codegen::emit {

/// add
void Emitter::emitAdd(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  if (cx_.linearOperandOfAdd.count(i)) {
    const size_t lk = cx_.linearOperandOfAdd.at(i);
    F("// in the GEMM of its linear operand (linear_residual_forward)");
    BI("// the linear operand's gradient is this sum's (its backward reads "
       "it)");
    if (!cx_.isInput(op.operands[1 - lk]))
      BI(fmt::format("add_into({}, {}, {});", dx[1 - lk], dy, n));
    return;
  }
  F(fmt::format("add_forward({}, {}, {}, {});", y, x[0], x[1], n));
  BI(fmt::format("add_backward({}, {}, {}, {});", dx[0], dx[1], dy, n));
}

/// mul
void Emitter::emitMul(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  F(fmt::format("mul_forward({}, {}, {}, {});", y, x[0], x[1], n));
  BI(fmt::format("mul_backward({}, {}, {}, {}, {}, {});", dx[0], dx[1], dy,
                 x[0], x[1], n));
}

/// gelu
void Emitter::emitGelu(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  if (cx_.fusedGelus.count(i)) {
    F("// in the GEMM epilogue of its producer (linear_gelu_forward)");
    BI("// in the input-gradient GEMM of its consumer (linear_backward_dgelu)");
    return;
  }
  const char *tanhS = attrOr<std::string>(op, "approximate", "tanh") == "none"
                          ? "false"
                          : "true";
  F(fmt::format("gelu_forward({}, {}, {}, {});", y, x[0], n, tanhS));
  BI(fmt::format("gelu_backward({}, {}, {}, {}, {});", dx[0], x[0], dy, n,
                 tanhS));
}

/// relu, silu
void Emitter::emitReluSilu(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  F(fmt::format("{}_forward({}, {}, {});", k, y, x[0], n));
  BI(fmt::format("{}_backward({}, {}, {}, {});", k, dx[0], x[0], dy, n));
}

/// swiglu
void Emitter::emitSwiglu(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  F(fmt::format("swiglu_forward({}, {}, {}, {});", y, x[0], x[1], n));
  BI(fmt::format("swiglu_backward({}, {}, {}, {}, {}, {});", dx[0], dx[1], x[0],
                 x[1], dy, n));
}

} // namespace autoddl::codegen::emit
