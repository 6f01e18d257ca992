// A tiny JSON value, reader and writer, so that the runtime needs no JSON
// library: enough for the safetensors header, metrics.json and Chrome traces.
// Objects keep their keys in insertion order.
#ifndef AUTODDL_BACKENDS_COMMON_MINIJSON_H
#define AUTODDL_BACKENDS_COMMON_MINIJSON_H

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace autoddl::rt {

struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  bool integral =
      false; // number was written without fraction/exponent and fits int64
  int64_t integer = 0; // exact value when integral
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;

  Json() = default;
  static Json null() { return Json(); }
  static Json of(bool b);
  static Json of(double d);
  static Json of(int64_t i);
  static Json of(std::string s);
  static Json arr() {
    Json j;
    j.kind = Kind::Array;
    return j;
  }
  static Json obj() {
    Json j;
    j.kind = Kind::Object;
    return j;
  }

  /// Appends to an array; sets (or replaces) a key of an object. Both return
  /// *this.
  Json &push(Json v);
  Json &set(const std::string &key, Json v);
  /// The member `key` of an object, or nullptr.
  const Json *find(std::string_view key) const;

  /// Compact JSON text; numbers in shortest round-trip form for doubles
  /// ("%.17g" trimmed to what reads back equal), integers exactly; non-finite
  /// numbers are written as null.
  std::string dump() const;
};

/// Parses `text`. Throws std::runtime_error("WHAT: line L, column C: cause") on
/// malformed input.
Json json_parse(std::string_view text, const std::string &what);

/// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

/// Compact JSON text (no white space outside strings) laid out one member or
/// element a line, two spaces an indent level, `"key": value`, `{}` and `[]`
/// when empty, a line break at the end: the layout of nlohmann's dump(2), in
/// which the importer keeps a model's config.json. A generated program holds
/// the config compact (one source line) and saves it beside checkpoints so.
std::string json_indented(std::string_view compact);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_MINIJSON_H
