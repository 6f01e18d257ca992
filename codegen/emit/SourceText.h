//===- SourceText.h - input text as generated source ----------*- C++ -*-===//
//
// The one home for turning a string from the user's files (model, graph,
// node, tensor and parameter names, ONNX names and attributes, the model's
// config, the plan's model name) into text of a generated file
// (docs/generated-source-text.md): nothing such a string
// holds may become code. A string the program needs reaches it as a C++
// string literal (cStringLiteral); a comment carries only sanitised text
// (commentText); a C++ name derived from it is mangled and made unique
// (ident, IdentTable). Generated CMake files carry no input text.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace autoddl::codegen::emit {

/// `text` as a C++ string literal that reads back as the same bytes: every
/// byte outside printable ASCII, every quote, backslash and '?' (no
/// trigraphs) escaped as three octal digits or \" \\; a line break also
/// starts a new source line of the (concatenated) literal.
std::string cStringLiteral(std::string_view text);

/// `items` joined by ", " into lines of at most `width` characters (but for
/// an item longer than that), the first from column `start`, the others
/// starting with `indent`: a long table of numbers as a few source lines.
std::string wrapList(const std::vector<std::string> &items, size_t start,
                     const std::string &indent, size_t width = 100);

/// `text` for a comment: printable ASCII only, every other byte, a
/// backslash, the second '?' of "??" and the '/' of "*/" written as <hh>
/// (hex), so it ends no comment, splices no line and makes no trigraph;
/// longer than `maxBytes`, its head and "...(N bytes)". Never a line break.
std::string commentText(std::string_view text, size_t maxBytes = 64);

/// A C++ identifier for a name, not yet unique: runs of characters outside
/// [A-Za-z0-9] as one '_' ("h.0.attn.qkv" -> "h_0_attn_qkv"), none at
/// either end, "t_" before a leading digit (or for an empty result); past
/// 48 characters its head and a hash of the whole name.
std::string ident(std::string_view name);

/// Identifiers handed out uniquely in one C++ scope: a name already taken,
/// a C++ keyword or a name a standard header may define as a macro gets a
/// "_<k>" suffix (k = 2, 3, ...). `reserved` says which identifiers the
/// caller keeps for itself.
class IdentTable {
public:
  IdentTable() = default;
  explicit IdentTable(std::set<std::string> reserved)
      : taken_(std::move(reserved)) {}
  /// A unique identifier for `name`, `prefix` before its ident().
  std::string add(std::string_view name, const std::string &prefix = "");
  /// A unique identifier for `id`, already an identifier.
  std::string addIdent(const std::string &id);
  /// Whether `id` is free: not taken, not a keyword, no macro.
  bool free(const std::string &id) const;
  void take(const std::string &id) { taken_.insert(id); }

private:
  std::set<std::string> taken_;
};

} // namespace autoddl::codegen::emit
