//===- StageTypes.h - stages as instances of one template ------*- C++ -*-===//
//
// Stages whose code differs in numbers only, emitted once as a template
// over the stage (StageTypes.cpp), and the names their functions go by.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

namespace autoddl::codegen::emit {

/// Stages whose code differs in numbers only, as one template over the
/// stage S (StageTypes.cpp).
struct StageTypes {
  std::vector<int> typeOf;     // per stage: the stage whose names it shares
  std::vector<bool> templated; // per stage: runs an instance of a template
  std::string text;            // every stage's code
  /// Stage s's function `name`: "stage5_forward" or "stage1_forward<5>".
  std::string fn(int s, const std::string &name) const {
    const int r = typeOf[size_t(s)];
    return templated[size_t(s)] ? fmt::format("stage{}_{}<{}>", r, name, s)
                                : fmt::format("stage{}_{}", s, name);
  }
};

/// Folds `texts` (per stage, its code; `members`, its struct's member names)
/// where the stages marked eligible read the same but for numbers.
StageTypes foldStages(const std::vector<std::string> &texts,
                      const std::vector<std::set<std::string>> &members,
                      const std::vector<bool> &eligible);

} // namespace autoddl::codegen::emit
