//===- JsonReader.h - typed reads of plan.json with located errors -------===//
//
// Edge code (throws UserError): the one reader of plan.json's fields, for the
// plan (PlanJson.cpp) and its "kfac" object (KfacJson.cpp). Every error is
// one line, "file: at /pointer: what".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "support/JsonFile.h"
#include "support/UserError.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace autoddl::planner {

/// Typed access with "file: at /pointer: ..." errors.
struct Reader {
  using json = nlohmann::json;
  const std::string &origin;

  [[noreturn]] void fail(const json::json_pointer &where,
                         const std::string &what) const {
    throw UserError(jsonPlace(origin, where) + what);
  }
  const json &at(const json &j, const json::json_pointer &where,
                 const char *key) const {
    if (!j.is_object())
      fail(where, "expected an object");
    auto it = j.find(key);
    if (it == j.end())
      fail(where, std::string("missing field \"") + key + "\"");
    return *it;
  }
  /// The field `key`, which must pass `is` ("expected <what>" otherwise).
  const json &typed(const json &j, const json::json_pointer &where,
                    const char *key, bool (json::*is)() const noexcept,
                    const char *what) const {
    const json &v = at(j, where, key);
    if (!(v.*is)())
      fail(where / key, std::string("expected ") + what);
    return v;
  }
  double num(const json &j, const json::json_pointer &where,
             const char *key) const {
    return typed(j, where, key, &json::is_number, "a number").get<double>();
  }
  int64_t integer(const json &j, const json::json_pointer &where,
                  const char *key) const {
    return typed(j, where, key, &json::is_number_integer, "an integer")
        .get<int64_t>();
  }
  /// An integer field stored as an int: larger values are refused, not
  /// wrapped (pp = 2^32 + 2 must not read as 2).
  int int32(const json &j, const json::json_pointer &where,
            const char *key) const {
    const int64_t v = integer(j, where, key);
    if (v < INT32_MIN || v > INT32_MAX)
      fail(where / key,
           "expected an integer of at most 32 bits, got " + std::to_string(v));
    return static_cast<int>(v);
  }
  std::string str(const json &j, const json::json_pointer &where,
                  const char *key) const {
    return typed(j, where, key, &json::is_string, "a string")
        .get<std::string>();
  }
  bool flag(const json &j, const json::json_pointer &where,
            const char *key) const {
    return typed(j, where, key, &json::is_boolean, "true or false").get<bool>();
  }
  const json &array(const json &j, const json::json_pointer &where,
                    const char *key) const {
    return typed(j, where, key, &json::is_array, "an array");
  }
  /// Each element of the array `key`, read by `f(element, its pointer)`.
  template <class T, class F>
  std::vector<T> each(const json &j, const json::json_pointer &where,
                      const char *key, F f) const {
    const json &a = array(j, where, key);
    std::vector<T> out;
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(f(a[i], where / key / i));
    return out;
  }
  /// A member's field by the member's type (for readMembers).
  void read(const json &j, const json::json_pointer &where, const char *key,
            std::string &out) const {
    out = str(j, where, key);
  }
  void read(const json &j, const json::json_pointer &where, const char *key,
            double &out) const {
    out = num(j, where, key);
  }
  void read(const json &j, const json::json_pointer &where, const char *key,
            int64_t &out) const {
    out = integer(j, where, key);
  }
  void read(const json &j, const json::json_pointer &where, const char *key,
            bool &out) const {
    out = flag(j, where, key);
  }
  void read(const json &j, const json::json_pointer &where, const char *key,
            std::vector<std::string> &out) const {
    out = list<std::string>(j, where, key, &json::is_string, "a string");
  }
  /// An array of elements that each pass `is` (`what` names the type).
  template <class T>
  std::vector<T> list(const json &j, const json::json_pointer &where,
                      const char *key, bool (json::*is)() const noexcept,
                      const char *what) const {
    const json &a = array(j, where, key);
    std::vector<T> out;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!(a[i].*is)())
        fail(where / key / i, std::string("expected ") + what);
      out.push_back(a[i].get<T>());
    }
    return out;
  }
};

/// A field of a plan.json object and the member of T it is stored in: one
/// table per struct serves both its writer and its reader, so the two cannot
/// spell a key differently.
template <class T> struct Member {
  const char *key;
  std::variant<std::string T::*, double T::*, int64_t T::*, bool T::*,
               std::vector<std::string> T::*>
      member;
};

/// x's fields added to the object `j` in the table's order (J: the writer's
/// JSON type).
template <class J, class T, size_t N>
void writeMembers(J &j, const T &x, const Member<T> (&table)[N]) {
  for (const Member<T> &m : table)
    std::visit([&](auto p) { j[m.key] = x.*p; }, m.member);
}

/// The table's fields of the object `e` (at `where`) into x, every one
/// required.
template <class T, size_t N>
void readMembers(const Reader &r, const nlohmann::json &e,
                 const nlohmann::json::json_pointer &where,
                 const Member<T> (&table)[N], T &x) {
  for (const Member<T> &m : table)
    std::visit([&](auto p) { r.read(e, where, m.key, x.*p); }, m.member);
}

} // namespace autoddl::planner
