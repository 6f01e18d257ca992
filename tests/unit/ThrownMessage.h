//===- ThrownMessage.h - the message of what a call throws, for tests ----===//
#pragma once

#include <exception>
#include <string>

namespace autoddl::testing {

/// The what() of the E that `f()` throws, or "" when it returns (an error
/// test then checks the message, and an empty one names the missing error).
template <class E = std::exception, class F> std::string thrownMessage(F &&f) {
  try {
    f();
  } catch (const E &e) {
    return e.what();
  }
  return "";
}

} // namespace autoddl::testing
