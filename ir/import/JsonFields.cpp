//===- JsonFields.cpp -----------------------------------------------------===//
#include "ir/import/JsonFields.h"

#include "support/JsonFile.h"
#include "support/UserError.h"

#include <cmath>

namespace autoddl::import {

std::string describe(const json &v) {
  std::string text = v.dump();
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  switch (v.type()) {
  case json::value_t::string:
    return "string " + text;
  case json::value_t::boolean:
    return "boolean " + text;
  case json::value_t::object:
    return "an object";
  case json::value_t::array:
    return "an array";
  case json::value_t::null:
    return "null";
  default:
    return text;
  }
}

namespace {

// Reads an integer that fits in int64, or explains why the value is not one.
int64_t asInt64(const json &v, const std::string &place, const char *what) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw UserError(place + what + ", got " + v.dump() +
                      " (overflows int64)");
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer())
    return v.get<int64_t>();
  if (v.is_number_float() && std::fabs(v.get<double>()) >= 9.2e18)
    throw UserError(place + what + ", got " + v.dump() + " (overflows int64)");
  throw UserError(place + what + ", got " + describe(v));
}

} // namespace

int64_t positiveSize(const json &v, const std::string &place) {
  int64_t n = asInt64(v, place, "expected a positive integer");
  if (n <= 0)
    throw UserError(place + "expected a positive integer, got " +
                    std::to_string(n));
  return n;
}

JsonFields::JsonFields(const json &value, json::json_pointer where,
                       std::string origin, bool strict)
    : value(value), where(std::move(where)), origin(std::move(origin)),
      strict(strict) {
  if (!value.is_object())
    throw UserError(place() + "expected an object, got " + describe(value));
}

std::string JsonFields::place() const { return jsonPlace(origin, where); }

std::string JsonFields::place(const std::string &key) const {
  return jsonPlace(origin, where / key);
}

void JsonFields::fail(const std::string &key,
                      const std::string &message) const {
  throw UserError(place(key) + message);
}

const json *JsonFields::find(const std::string &key) {
  read.insert(key);
  auto it = value.find(key);
  if (it != value.end() && it->is_null() && strict)
    fail(key, "expected a value, got null (leave the field out for its "
              "default)");
  if (it == value.end() || it->is_null())
    return nullptr;
  return &*it;
}

int64_t JsonFields::positive(const std::string &key, int64_t fallback) {
  const json *v = find(key);
  return v ? positiveSize(*v, place(key)) : fallback;
}

int64_t JsonFields::positive(const std::string &key) {
  const json *v = find(key);
  if (!v)
    fail(key, "missing required field");
  return positiveSize(*v, place(key));
}

int64_t JsonFields::integer(const std::string &key, int64_t fallback,
                            int64_t min, int64_t max) {
  const json *v = find(key);
  if (!v)
    return fallback;
  int64_t n = asInt64(*v, place(key), "expected an integer");
  if (n < min || n > max)
    fail(key, "expected an integer in [" + std::to_string(min) + ", " +
                  std::to_string(max) + "], got " + std::to_string(n));
  return n;
}

const json *JsonFields::findTyped(const std::string &key,
                                  bool (*isType)(const json &),
                                  const char *expected) {
  const json *v = find(key);
  if (v && !isType(*v))
    fail(key, std::string("expected ") + expected + ", got " + describe(*v));
  return v;
}

double JsonFields::real(const std::string &key, double fallback) {
  const json *v = findTyped(
      key, [](const json &j) { return j.is_number(); }, "a number");
  if (!v)
    return fallback;
  double d = v->get<double>();
  if (!std::isfinite(d))
    fail(key, "expected a finite number, got " + v->dump());
  return d;
}

double JsonFields::positiveReal(const std::string &key, double fallback) {
  double d = real(key, fallback);
  if (!(d > 0))
    fail(key, "expected a positive number, got " + std::to_string(d));
  return d;
}

double JsonFields::nonNegativeReal(const std::string &key, double fallback) {
  double d = real(key, fallback);
  if (d < 0)
    fail(key, "expected a non-negative number, got " + std::to_string(d));
  return d;
}

bool JsonFields::flag(const std::string &key, bool fallback) {
  const json *v = findTyped(
      key, [](const json &j) { return j.is_boolean(); }, "true or false");
  return v ? v->get<bool>() : fallback;
}

std::string JsonFields::string(const std::string &key,
                               const std::string &fallback) {
  const json *v = findTyped(
      key, [](const json &j) { return j.is_string(); }, "a string");
  return v ? v->get<std::string>() : fallback;
}

std::string JsonFields::string(const std::string &key) {
  if (!find(key))
    fail(key, "missing required field");
  return string(key, "");
}

std::vector<int64_t> JsonFields::positiveList(const std::string &key) {
  const json *v = find(key);
  if (!v)
    fail(key, "missing required field");
  if (!v->is_array() || v->empty())
    fail(key, "expected a non-empty array of positive integers, got " +
                  describe(*v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i)
    out.push_back(positiveSize((*v)[i], jsonPlace(origin, where / key / i)));
  return out;
}

JsonFields JsonFields::object(const std::string &key) {
  const json *v = find(key);
  if (!v)
    fail(key, "missing required field");
  return JsonFields(*v, where / key, origin, strict);
}

void JsonFields::rejectUnknown() const {
  for (auto it = value.begin(); it != value.end(); ++it)
    if (!read.count(it.key()))
      throw UserError(place(it.key()) + "unknown field '" + it.key() + "'");
}

} // namespace autoddl::import
