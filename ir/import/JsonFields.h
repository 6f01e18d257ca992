//===- JsonFields.h - typed, located reads of one JSON object ------------===//
//
// Every importer reads JSON objects field by field through this class, so that
// each error names the file, the JSON pointer of the field and the cause
// ("gpt.json: at /config/num_heads: expected a positive integer, got -4").
// Strict objects (our own formats) also refuse fields nobody read; lenient ones
// (Hugging Face config.json) ignore them, as transformers does.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace autoddl::import {

using nlohmann::json;

/// The largest size (layers, heads, dims) any importer accepts: beyond it a
/// product of sizes could not describe a real model and could overflow int64.
constexpr int64_t kMaxLayers = 4096;

class JsonFields {
public:
  /// Throws UserError unless `value` is an object. `strict`: our own formats,
  /// where a null field is refused (see find()); nested objects inherit it.
  JsonFields(const json &value, json::json_pointer where, std::string origin,
             bool strict = false);

  /// From now on a null field is an error, in this object and those object()
  /// returns: our formats have no null (leaving a field out gives its
  /// default), so a null is a mistake, not a default.
  void refuseNulls() { strict = true; }
  bool refusesNulls() const { return strict; }

  /// "<origin>: at <pointer>: " for errors about this object or one field.
  std::string place() const;
  std::string place(const std::string &key) const;
  const json::json_pointer &pointer() const { return where; }
  const std::string &originName() const { return origin; }

  /// The field, or nullptr when it is absent or null (Hugging Face writes null
  /// for "use the default"; refuseNulls() objects throw on null). Marks it as
  /// read.
  const json *find(const std::string &key);
  bool has(const std::string &key) { return find(key) != nullptr; }

  /// Typed reads: absent or null → `fallback`; a wrong type or range →
  /// UserError.
  int64_t positive(const std::string &key, int64_t fallback);
  int64_t positive(const std::string &key); // required
  int64_t integer(const std::string &key, int64_t fallback, int64_t min,
                  int64_t max);
  double real(const std::string &key, double fallback);
  /// A number > 0 (epsilons, rope theta), or >= 0 (init std), else UserError.
  double positiveReal(const std::string &key, double fallback);
  double nonNegativeReal(const std::string &key, double fallback);
  bool flag(const std::string &key, bool fallback);
  std::string string(const std::string &key, const std::string &fallback);
  std::string string(const std::string &key); // required
  std::vector<int64_t>
  positiveList(const std::string &key); // required, non-empty

  /// A nested object (required).
  JsonFields object(const std::string &key);

  /// Strict objects: throws naming the first field that was never read.
  void rejectUnknown() const;

  /// Throws UserError "<place(key)>: <message>".
  [[noreturn]] void fail(const std::string &key,
                         const std::string &message) const;

private:
  /// find(), and a present field that is not `isType` fails with "expected
  /// <expected>, got ...".
  const json *findTyped(const std::string &key, bool (*isType)(const json &),
                        const char *expected);

  const json &value;
  json::json_pointer where;
  std::string origin;
  std::set<std::string> read;
  bool strict = false;
};

/// A JSON value as a positive int64; throws UserError with `place` otherwise.
int64_t positiveSize(const json &v, const std::string &place);

/// How a JSON value reads in a message: its type and a short rendering.
std::string describe(const json &v);

} // namespace autoddl::import
