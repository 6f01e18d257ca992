//===- EnumNames.h - an enum's spellings in one table ---------------------===//
//
// An enum's names live in one table of {value, name}; printing and parsing
// both read it, so a new enumerator is spelt once and the two cannot drift.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace autoddl {

template <class E> struct EnumName {
  E value;
  std::string_view name;
};

/// The name of `value`; "?" for a value the table does not list.
template <class E, std::size_t N>
constexpr std::string_view nameOf(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E> &e : table)
    if (e.value == value)
      return e.name;
  return "?";
}

/// The value named `name`; nullopt for a name the table does not list.
template <class E, std::size_t N>
constexpr std::optional<E> parseName(const EnumName<E> (&table)[N],
                                     std::string_view name) {
  for (const EnumName<E> &e : table)
    if (e.name == name)
      return e.value;
  return std::nullopt;
}

/// "a, b, c": the table's names in order, for error messages.
template <class E, std::size_t N>
std::string joinNames(const EnumName<E> (&table)[N]) {
  std::string names;
  for (const EnumName<E> &e : table)
    names += std::string(names.empty() ? "" : ", ") + std::string(e.name);
  return names;
}

} // namespace autoddl
