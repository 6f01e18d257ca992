//===- AttentionEmitter.cpp - attention -----------------------------------===//
//
// attention: packed or separate q/k/v, local heads, GQA; the CUDA program
// saves the log-sum-exp, the CPU program the probabilities.
// One function per op kind, registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpEmitters.h"

namespace autoddl::codegen::emit {

/// attention
void OpEmitters::emitAttention(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t D = attrOr(op, ops::attr::kHeadDim, 1);
  int64_t H = attrOr(op, ops::attr::kNumHeads, 1);
  int64_t G = attrOf(op, ops::attr::kNumKvHeads);
  if (p.mode == OpMode::HeadSplit) {
    H /= cx_.tp;
    G /= cx_.tp;
  }
  const bool causal = attrOf(op, ops::attr::kCausal);
  const int64_t B = ys[0], T = ys[1];
  const std::string base = cx_.names[size_t(r)];
  if (cx_.target.attentionSavesLse) // FlashAttention-style: the log-sum-exp,
                                    // not the probabilities
    members_.add(st, {base + "_lse", B * H * T,
                      shapeStr({B, H, T}) + " saved log-sum-exp", false, false,
                      true});
  else
    members_.add(st, {base + "_att", B * H * T * T,
                      shapeStr({B, H, T, T}) + " saved probabilities", false,
                      false});
  std::string views, gviews;
  if (op.operands.size() == 1) {
    views = fmt::format("attention_qkv_views({}, {}, {}, {})", x[0], H, G, D);
    gviews =
        fmt::format("attention_qkv_grad_views({}, {}, {}, {})", dx[0], H, G, D);
  } else {
    views = fmt::format("AttentionViews{{{}, {}, {}, {}, {}}}", x[0], x[1],
                        x[2], H * D, G * D);
    gviews = fmt::format("AttentionGradViews{{{}, {}, {}, {}, {}}}", dx[0],
                         dx[1], dx[2], H * D, G * D);
  }
  const char *causalS = causal ? "true" : "false";
  if (cx_.target.attentionSavesLse) {
    // Input gradients this attention alone writes are stored.
    bool store = true;
    for (size_t k = 0; k < op.operands.size(); ++k)
      store = store && cx_.storesGrad(i, op.operands[k], p.operands[k], dx[k]);
    if (store)
      storedGrads_.insert(dx.begin(), dx.end());
    F(fmt::format("attention_forward({}, a.{}_lse.data(), {}, {}, {}, {}, "
                  "{}, {}, {});",
                  y, base, views, B, T, H, G, D, causalS));
    BI(fmt::format("attention_backward({}, {}, {}, a.{}_lse.data(), {}, {}, "
                   "{}, {}, {}, {}, {}{});",
                   gviews, dy, y, base, views, B, T, H, G, D, causalS,
                   store ? ", false" : ""));
    return;
  }
  F(fmt::format("attention_forward({}, a.{}_att.data(), {}, {}, {}, {}, {}, "
                "{}, {});",
                y, base, views, B, T, H, G, D, causalS));
  BI(fmt::format("attention_backward({}, {}, a.{}_att.data(), {}, {}, {}, {}, "
                 "{}, {});",
                 gviews, dy, base, views, B, T, H, G, D));
}

} // namespace autoddl::codegen::emit
