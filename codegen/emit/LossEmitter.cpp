//===- LossEmitter.cpp - the loss and the accuracy ------------------------===//
//
// cross_entropy (whole, on split rows, vocab-parallel) and squared_error
// (whole or on split rows), registered in OpTable.cpp, and the accuracy
// counts (LossEmitter.h).
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/LossEmitter.h"

namespace autoddl::codegen::emit {

/// cross_entropy
void LossEmitter::crossEntropy(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t V = lastDim(xs[0]), N = numel(xs[0]) / V,
                Vf = cx_.full(op.operands[0]).back();
  // A vocabulary tp does not divide: every rank's logits are V = ceil(Vf /
  // tp) columns from column g.rtp * V, of which the last rank's tail is
  // padding (Layout.cpp paddedVocab); the kernels read the real ones.
  const bool uneven = p.mode == OpMode::VocabLoss && Vf % cx_.tp != 0;
  const std::string cols =
      uneven ? fmt::format("std::min<int64_t>({}, {} - g.rtp * {})", V, Vf, V)
             : std::to_string(V);
  auto pad = cx_.padCols.find(op.operands[0]);
  // The row stride of padded logits (an extra kernel argument).
  const std::string ld = pad != cx_.padCols.end()
                             ? fmt::format(", {}", pad->second)
                         : uneven ? fmt::format(", {}", V)
                                  : std::string();
  // On split rows (batch or sequence) each tp rank holds N of the
  // micro-batch's tp * N positions.
  rowsSplit_ = p.mode == OpMode::Local;
  count_ = rowsSplit_ ? N * cx_.tp : N;
  // cuda: dlogits this loss alone writes are stored (=), never zeroed.
  const bool storeDx = cx_.storesGrad(i, op.operands[0], p.operands[0], dx[0]);
  if (storeDx)
    storedGrads_.insert(dx[0]);
  const std::string ldStore =
      storeDx ? (ld.empty() ? std::string(", 0") : ld) + ", false" : ld;
  members_.add(st, {"losses", N, "[N] per-position loss", false, false, true});
  if (p.mode == OpMode::VocabLoss) {
    members_.add(st, {"loss_max", N, "[N] row max over the vocabulary", false,
                      false, true});
    members_.add(st, {"loss_sums", 2 * N, "[2N] sum-exp and target logit",
                      false, false, true});
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
    members_.add(st,
                 {"loss_lse", N, "[N] saved log-sum-exp", false, false, true});
    F(fmt::format("crossentropy_forward(a.losses.data(), a.loss_lse.data(), "
                  "{}, {}, {}, {}{});",
                  x[0], x[1], N, V, ld));
    BI(fmt::format("crossentropy_backward({}, {}, a.loss_lse.data(), {}, {}, "
                   "{}, kLossScale{});",
                   dx[0], x[0], x[1], N, V, ldStore));
  }
  hostLossSum(c, N);
  if (cx_.reportsAccuracy() && p.mode == OpMode::VocabLoss) {
    // Gathered: tp * V columns a row, the padding (uneven) at the end.
    const int64_t Vg = V * cx_.tp;
    const std::string whole = cx_.names[size_t(op.operands[0])] + "_whole";
    const std::string ldG = Vg != Vf ? fmt::format(", {}", Vg) : "";
    if (pad != cx_.padCols.end())
      throw std::logic_error("codegen: the accuracy of padded logits");
    members_.add(st, {whole, N * Vg,
                      shapeStr({N, Vg}) + " gathered logits (accuracy)", false,
                      false, !cx_.target.actBuffers});
    F(fmt::format("all_gather_forward(a.{}.data(), {}, {}, 1, g.tp); // for "
                  "the accuracy",
                  whole, x[0], shapeInit({N, V})));
    F(countCorrect(false, fmt::format("a.{}.data(), {}, {}, {}{}", whole, x[1],
                                      N, Vf, ldG)));
    if (cx_.graphModel)
      F(countCorrect(true, fmt::format("a.{}.data(), graph_heldout_labels(), "
                                       "{}, {}{}",
                                       whole, N, Vf, ldG)));
  } else {
    rowsAccuracy(F, x[0], x[1], N, V);
  }
}

/// The accuracy of scores [N,V] whose rows are whole on this rank.
void LossEmitter::rowsAccuracy(const std::function<void(std::string)> &F,
                               const std::string &scores,
                               const std::string &labels, int64_t N,
                               int64_t V) const {
  if (!cx_.reportsAccuracy())
    return;
  F(countCorrect(false, fmt::format("{}, {}, {}, {}", scores, labels, N, V)));
  if (cx_.graphModel)
    F(countCorrect(
        true, fmt::format("{}, graph_heldout_labels(), {}, {}", scores, N, V)));
}

std::string LossEmitter::correctMembers(bool comment) const {
  if (cx_.target.lossSumOnDevice) // counted on the device, read after the step
    return fmt::format("  DeviceBuffer<unsigned long long> correct{{{}}};{}\n",
                       cx_.graphModel ? 2 : 1,
                       !comment ? ""
                       : cx_.graphModel
                           ? " // samples whose largest logit is the "
                             "label; the same over the held-out nodes"
                           : " // samples whose largest logit is the "
                             "label");
  std::string out = comment ? "  int64_t correct = 0; // samples whose largest "
                              "logit is the label\n"
                            : "  int64_t correct = 0;\n";
  if (cx_.graphModel)
    out += comment ? "  int64_t correct_heldout = 0; // the same over the "
                     "held-out nodes\n"
                   : "  int64_t correct_heldout = 0;\n";
  return out;
}

std::string LossEmitter::countCorrect(bool heldout,
                                      const std::string &args) const {
  if (cx_.target.lossSumOnDevice)
    return fmt::format("count_correct(a.correct.data(){}, {});",
                       heldout ? " + 1" : "", args);
  return fmt::format("a.correct{} = count_correct({});",
                     heldout ? "_heldout" : "", args);
}

std::string LossEmitter::correctCopy() const {
  if (cx_.target.lossSumOnDevice)
    return "  copy_on_device(r.correct.data(), a.correct.data(), "
           "a.correct.size() * int64_t(sizeof(unsigned long long)));\n";
  return cx_.graphModel
             ? "  r.correct = a.correct;\n  r.correct_heldout = "
               "a.correct_heldout;\n"
             : "  r.correct = a.correct;\n";
}

std::string LossEmitter::correctRead(bool heldout) const {
  if (cx_.target.lossSumOnDevice)
    return fmt::format("double(counter_to_host(a.correct.data(){}))",
                       heldout ? " + 1" : "");
  return heldout ? "double(a.correct_heldout)" : "double(a.correct)";
}

/// squared_error: scores [N,C] against the one-hot of labels [N], on whole or
/// split rows (Layout.cpp: never split on the classes). Averaged as
/// cross_entropy: per-row losses, summed over the global row count.
void LossEmitter::squaredError(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const int64_t C = lastDim(xs[0]), N = numel(xs[0]) / C;
  if (cx_.padCols.count(op.operands[0]))
    throw std::logic_error("codegen: squared_error on padded scores");
  rowsSplit_ = p.mode == OpMode::Local;
  count_ = rowsSplit_ ? N * cx_.tp : N;
  members_.add(st, {"losses", N, "[N] per-row loss", false, false, true});
  F(fmt::format("squared_error_forward(a.losses.data(), {}, {}, {}, {});", x[0],
                x[1], N, C));
  BI(fmt::format("squared_error_backward({}, {}, {}, {}, {}, kLossScale);",
                 dx[0], x[0], x[1], N, C));
  hostLossSum(c, N);
  rowsAccuracy(F, x[0], x[1], N, C);
}

void LossEmitter::hostLossSum(OpCall &c, int64_t N) const {
  if (cx_.target.lossSumOnDevice) // summed on the device at the step's end
    return;
  c.F("a.loss_sum = 0;");
  c.F(fmt::format("for (int64_t i = 0; i < {}; ++i)", N));
  c.F("  a.loss_sum += a.losses[size_t(i)];");
}

} // namespace autoddl::codegen::emit
