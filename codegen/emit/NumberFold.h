//===- NumberFold.h - code that differs in numbers only, folded -*- C++ -*-===//
//
// Generated code repeats itself per stage, per layer and per bucket with only
// its numbers changed. These helpers find such repeats (the text cut into
// runs of digits and of the rest) and say each number that differs as an
// exact line a * x + c of the repeat's index x: the stages' templates
// (StageTypes.cpp) and loops over repeated blocks (foldBlocks).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cctype>
#include <map>
#include <string>
#include <vector>

namespace autoddl::codegen::emit {

inline bool identChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// `text` cut into runs of digits and runs of anything else, alternately.
struct Segments {
  std::vector<std::string> runs;
  std::vector<size_t> offset; // of each run in the text
  explicit Segments(const std::string &text);
  bool digits(size_t i) const {
    return std::isdigit(static_cast<unsigned char>(runs[i][0]));
  }
  /// The text with every digit run replaced by '#': equal for texts that
  /// differ in numbers only.
  std::string shape() const;
};

/// Where `members` (indices into `segs`, of one shape) cannot fold as one
/// group: the parts of two or more of them that share the value of one
/// number (one digit run), when every part `fits`; the first number that so
/// splits them, or none ({}). A layer's ln_1 / ln_2 blocks apart, stages of
/// 3 layers apart from those of 2.
template <class I, class Fits>
std::vector<std::vector<I>> splitByNumber(const std::vector<I> &members,
                                          const std::vector<Segments> &segs,
                                          Fits fits) {
  const Segments &s0 = segs[size_t(members.front())];
  for (size_t k = 0; k < s0.runs.size(); ++k) {
    if (!s0.digits(k))
      continue;
    std::map<std::string, std::vector<I>> parts;
    for (I m : members)
      parts[segs[size_t(m)].runs[k]].push_back(m);
    if (parts.size() < 2 || parts.size() == members.size())
      continue;
    std::vector<std::vector<I>> out;
    bool all = true;
    for (const auto &part : parts) {
      if (part.second.size() < 2)
        continue;
      all = all && fits(part.second);
      out.push_back(part.second);
    }
    if (all)
      return out;
  }
  return {};
}

/// v = a * x + c over the points (xs, values), exact, rendered with x named
/// `var` (in a comment as "{...}", else parenthesized unless bare); "" if
/// the values follow no such line.
std::string linearIn(const std::vector<int> &xs,
                     const std::vector<long> &values, const std::string &var,
                     bool comment);

/// `blocks` (statements, each line indented by `indent`), with each group of
/// two or more blocks of one shape whose differing numbers are all plain
/// numbers linear in the block's place i in the group (not inside an
/// identifier, a string or a float) run as one loop over i, at the place of
/// the group's first block; the others as they are. With `anyOrder` (the
/// blocks' effects do not depend on their order) the groups of one trip
/// count share one loop.
/// `asIs` (if given): per block, the text to emit where it is not folded.
std::string foldBlocks(const std::vector<std::string> &blocks,
                       const std::string &indent, bool anyOrder,
                       const std::vector<std::string> *asIs = nullptr);

/// `text` with each number that stands alone (not in an identifier, a
/// string, a float, a template argument or a loop index's offset `l - 1`)
/// as a mark ('\1', or '\2' in a comment), its value appended to `numbers`:
/// texts that differ in such numbers only then read the same.
std::string numbersOut(const std::string &text, std::vector<long> &numbers);

/// `marked` (numbersOut's text, the same for every repeat) with its k-th
/// mark as a number of the repeats `values[r][k]`, the repeat r being at
/// `xs[r]` of `var`: a number equal in all as it is, the others as an exact
/// line of `var` (linearIn; in a comment "*" where none fits); "" where one
/// outside a comment follows no line.
std::string numbersIn(const std::string &marked, const std::vector<int> &xs,
                      const std::vector<std::vector<long>> &values,
                      const std::string &var);

/// A name with its first all-digit dotted component (a layer's index) cut
/// out: "h.3.ln_1" -> {"h.", ".ln_1", 3}; without one, {name, "", -1}.
struct LayerName {
  std::string before, after;
  long index = -1;
};
LayerName splitLayerIndex(const std::string &name);

/// `lines` (each ending in a newline, indented by `indent`) with each run of
/// two or more consecutive windows of p lines that read the same but for
/// numbers linear in the window's place as one loop over `var`, in order:
/// the loop makes the same statements in the same order.
std::string foldRuns(const std::vector<std::string> &lines,
                     const std::string &indent, const std::string &var);

} // namespace autoddl::codegen::emit
