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
  double num(const json &j, const json::json_pointer &where,
             const char *key) const {
    const json &v = at(j, where, key);
    if (!v.is_number())
      fail(where / key, "expected a number");
    return v.get<double>();
  }
  int64_t integer(const json &j, const json::json_pointer &where,
                  const char *key) const {
    const json &v = at(j, where, key);
    if (!v.is_number_integer())
      fail(where / key, "expected an integer");
    return v.get<int64_t>();
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
    const json &v = at(j, where, key);
    if (!v.is_string())
      fail(where / key, "expected a string");
    return v.get<std::string>();
  }
  bool flag(const json &j, const json::json_pointer &where,
            const char *key) const {
    const json &v = at(j, where, key);
    if (!v.is_boolean())
      fail(where / key, "expected true or false");
    return v.get<bool>();
  }
  const json &array(const json &j, const json::json_pointer &where,
                    const char *key) const {
    const json &v = at(j, where, key);
    if (!v.is_array())
      fail(where / key, "expected an array");
    return v;
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

} // namespace autoddl::planner
