//===- StageMembers.h - the buffers of the stage structs -------*- C++ -*-===//
//
// Per pipeline stage, the members of its struct Stage<k>: added by the op
// emitters and the layout conversions (once per name, in order), declared
// and zeroed by the stage's code (Stage.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace autoddl::codegen::emit {

/// A float buffer of a stage struct.
struct Member {
  std::string name;
  int64_t size = 0;
  std::string comment;
  bool i32 = false;
  bool grad = false; // a gradient buffer (zeroed before each backward)
  bool stat = false; // fp32 statistics (act_t activations otherwise, on cuda)
  // Set for a size known at run time only (a sparse activation: the graph's
  // stored entries): the expression replaces `size`.
  std::string sizeExpr = {};
};

class StageMembers {
public:
  /// Adds m to `stage`'s struct unless a member of its name is there.
  void add(int stage, const Member &m) {
    if (names_[stage].insert(m.name).second)
      list_[stage].push_back(m);
  }
  /// Stage st's members, in the order added (none yet: empty).
  const std::vector<Member> &of(int st) const {
    static const std::vector<Member> none;
    auto it = list_.find(st);
    return it == list_.end() ? none : it->second;
  }

private:
  std::map<int, std::vector<Member>> list_;
  std::map<int, std::set<std::string>> names_;
};

} // namespace autoddl::codegen::emit
