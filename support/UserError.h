//===- UserError.h - errors caused by what the user gave us --------------===//
//
// Thrown by edge code (JSON readers, CLI) for bad input; the CLI's main catches it,
// prints "autoddl: error: <what>" and exits 1. The message names the place
// ("model.json:3:14: ...") and the cause, lower-case, no trailing period.
// Core (MLIR) code never throws: it returns LogicalResult / FailureOr.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <stdexcept>
#include <string>

namespace autoddl {

struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

} // namespace autoddl
