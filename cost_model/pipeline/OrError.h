//===- OrError.h - a value or a one-line error, without exceptions -------===//
//
// The pipeline library is plain C++ that MLIR-based planner code links, so it
// is built exception-free: operations that can fail on bad input return
// OrError<T>, which holds either the value or a message (lower-case, no
// trailing period, says what was expected and what was got). Edge code turns
// the message into a UserError; core code into a diagnostic.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace autoddl::pipeline {

template <typename T> class OrError {
public:
  OrError(T value) : value_(std::move(value)) {}

  static OrError failure(std::string message) {
    OrError result;
    result.error_ = std::move(message);
    return result;
  }

  explicit operator bool() const { return value_.has_value(); }
  const T &operator*() const & {
    assert(value_ && "OrError holds an error");
    return *value_;
  }
  T &&operator*() && {
    assert(value_ && "OrError holds an error");
    return std::move(*value_);
  }
  const T *operator->() const { return &**this; }
  /// The message; empty when a value is held.
  const std::string &error() const { return error_; }

private:
  OrError() = default;
  std::optional<T> value_;
  std::string error_;
};

} // namespace autoddl::pipeline
