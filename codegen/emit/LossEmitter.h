//===- LossEmitter.h - the loss and accuracy of train.cpp ------*- C++ -*-===//
//
// The losses (cross_entropy: whole, on split rows, vocab-parallel;
// squared_error) and the training accuracy that classifiers and graph
// models report (LossEmitter.cpp). It reads the EmitContext, adds the loss
// stage's members and the dlogits it stores, and owns what the program's
// assembly reads back: the loss's row count and split.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/EmitContext.h"
#include "codegen/emit/StageMembers.h"

#include <functional>
#include <set>
#include <string>

namespace autoddl::codegen::emit {

class LossEmitter {
public:
  /// `storedGrads`: the gradient buffers their one writer stores (=), never
  /// zeroed (EmitContext::storesGrad), shared with the other op emitters.
  LossEmitter(const EmitContext &cx, StageMembers &members,
              std::set<std::string> &storedGrads)
      : cx_(cx), members_(members), storedGrads_(storedGrads) {}

  /// The op emitters of cross_entropy and squared_error (OpTable.cpp).
  void crossEntropy(OpCall &c);
  void squaredError(OpCall &c);

  // The accuracy counts: the activation set's (`comment`) or the results'
  // members, a counting call's text ("a.correct" counting scores against
  // labels, or the held-out nodes' count), their copy from the activation
  // set `a` to the micro-batch's results `r`, and the host value of one after
  // the step.
  std::string correctMembers(bool comment) const;
  std::string countCorrect(bool heldout, const std::string &args) const;
  std::string correctCopy() const;
  std::string correctRead(bool heldout) const;

  /// The loss's rows a micro-batch on one rank (every tp rank's, where the
  /// rows are split), and whether every tp rank holds some of them.
  int64_t count() const { return count_; }
  bool rowsSplit() const { return rowsSplit_; }

private:
  void rowsAccuracy(const std::function<void(std::string)> &F,
                    const std::string &scores, const std::string &labels,
                    int64_t N, int64_t V) const;
  /// Sums the per-row losses on the host (a target without
  /// lossSumOnDevice).
  void hostLossSum(OpCall &c, int64_t N) const;

  const EmitContext &cx_;
  StageMembers &members_;
  std::set<std::string> &storedGrads_;
  int64_t count_ = 0;
  bool rowsSplit_ = false;
};

} // namespace autoddl::codegen::emit
