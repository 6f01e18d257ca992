//===- NormEmitter.cpp - layernorm and rmsnorm ----------------------------===//
//
// layernorm and rmsnorm, whole or on split rows.
// One function per op kind, registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpEmitters.h"

namespace autoddl::codegen::emit {

/// layernorm, rmsnorm
void OpEmitters::emitNorm(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t C = lastDim(ys), N = n / C;
  const std::string eps = fmtDouble(attrOf(op, ops::attr::kEpsilon));
  const std::string base = cx_.names[size_t(r)];
  members_.add(st, {base + "_rstd", N, "[N] saved 1/std", false, false, true});
  if (k == "layernorm") {
    members_.add(st, {base + "_mean", N, "[N] saved mean", false, false, true});
    const std::string beta = op.operands.size() > 2 ? x[2] : "nullptr";
    const std::string dbeta = op.operands.size() > 2 ? dx[2] : "nullptr";
    F(fmt::format("layernorm_forward({}, a.{}_mean.data(), a.{}_rstd.data(), "
                  "{}, {}, {}, {}, {}, {}f);",
                  y, base, base, x[0], x[1], beta, N, C, eps));
    BI(fmt::format("layernorm_backward({}, {}, {}, {}, {}, {}, "
                   "a.{}_mean.data(), a.{}_rstd.data(), {}, {});",
                   dx[0], dx[1], dbeta, dy, x[0], x[1], base, base, N, C));
  } else {
    F(fmt::format("rmsnorm_forward({}, a.{}_rstd.data(), {}, {}, {}, {}, {}f);",
                  y, base, x[0], x[1], N, C, eps));
    BI(fmt::format("rmsnorm_backward({}, {}, {}, {}, {}, a.{}_rstd.data(), {}, "
                   "{});",
                   dx[0], dx[1], dy, x[0], x[1], base, N, C));
  }
}

} // namespace autoddl::codegen::emit
