//===- StageBuffers.h - a stage's tensors and their layouts ----*- C++ -*-===//
//
// A stage's activation buffers as struct members, and the tp layout
// conversions between them (StageLayout.cpp): each converted copy made once
// per stage, its conversion a step of its own. StageBuffers reads the
// context; it adds to the stage members and owns which copies exist.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/EmitContext.h"
#include "codegen/emit/StageMembers.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::codegen::emit {

/// Wraps each call of a CUDA step in an OpScope (StageLayout.cpp).
void profileScopes(Step &s, const std::string &kind);

class StageBuffers {
public:
  StageBuffers(const EmitContext &cx, StageMembers &members)
      : cx_(cx), members_(members) {}

  /// Tensor t's buffer in layout l (and its gradient's, `withGrad`; its
  /// gradient's alone without `withValue`) as members of `stage`; nothing
  /// for parameters, constants, the scalar loss.
  void addTensor(int stage, int t, TpLayout l, bool withGrad,
                 bool withValue = true);
  /// Makes tensor t available in layout `want` on `stage`, its conversion
  /// appended to `steps` once (a copy shared by every consumer); the value
  /// expression.
  std::string ensureLayout(int stage, int t, TpLayout want,
                           std::vector<Step> &steps);
  /// Tensor t (layout l; value and gradient expressions) as op `reader`
  /// reads it: itself, or where one of them runs channels-last and the
  /// other not, a transposed copy made once per stage (ChannelsLast.cpp);
  /// the value and gradient expressions to read.
  std::pair<std::string, std::string> ensureFormat(int stage, int t, TpLayout l,
                                                   size_t reader,
                                                   const std::string &value,
                                                   const std::string &grad,
                                                   std::vector<Step> &steps);
  /// Under a node split, every node's rows of t, gathered over dp once;
  /// otherwise t as it is.
  std::string allNodes(int stage, int t, TpLayout l, std::vector<Step> &steps);

private:
  const EmitContext &cx_;
  StageMembers &members_;
  std::map<std::pair<int, std::string>, bool> converted_;
};

} // namespace autoddl::codegen::emit
