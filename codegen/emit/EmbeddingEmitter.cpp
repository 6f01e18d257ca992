//===- EmbeddingEmitter.cpp - token and position embeddings ---------------===//
//
// embedding (whole, vocab-parallel or hidden-split tables), positional and
// rotary position embeddings.
// One function per op kind, registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpEmitters.h"

namespace autoddl::codegen::emit {

/// embedding
void OpEmitters::emitEmbedding(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t N = numel(xs[0]), C = xs[1][1], V = cx_.full(op.operands[1])[0];
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
    BI(fmt::format("embedding_backward({}, {}, {}, {}, {}, 0, {});", dx[1], dy,
                   x[0], N, C, V));
  }
}

/// positional
void OpEmitters::emitPositional(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t B = xs[0][0], T = xs[0][1], C = xs[0][2];
  const std::string t0 = sequenceOffset(p, T);
  F(fmt::format("positional_forward({}, {}, {}, {}, {}, {}, {});", y, x[0],
                x[1], B, T, C, t0));
  BI(fmt::format("positional_backward({}, {}, {}, {}, {}, {}, {});", dx[0],
                 dx[1], dy, B, T, C, t0));
}

/// rotary
void OpEmitters::emitRotary(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t B = xs[0][0], T = xs[0][1],
                D = attrOr(op, ops::attr::kHeadDim, 1), H = lastDim(xs[0]) / D;
  const std::string theta = fmtDouble(attrOf(op, ops::attr::kTheta));
  const std::string t0 = sequenceOffset(p, T);
  F(fmt::format("rotary_forward({}, {}, {}, {}, {}, {}, {}, {});", y, x[0], B,
                T, H, D, theta, t0));
  BI(fmt::format("rotary_backward({}, {}, {}, {}, {}, {}, {}, {});", dx[0], dy,
                 B, T, H, D, theta, t0));
}

} // namespace autoddl::codegen::emit
