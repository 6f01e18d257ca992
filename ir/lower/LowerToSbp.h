//===- LowerToSbp.h - ModelGraph -> sbp dialect module -------------------===//
//
// Plain C++ interface (no MLIR types) so that edge code (CLI, importers) can lower
// and print without including MLIR headers. Implemented in a core (no-exception)
// library.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"

#include <string>

namespace autoddl {

struct LowerResult {
  std::string text;   // the module in MLIR's textual form; verified
  std::string error;  // non-empty on failure: the verifier's diagnostics
  bool ok() const { return error.empty(); }
};

/// Builds a module holding `func.func @<name>` whose body is one sbp op per OpDef
/// (parameters as sbp.parameter ops, inputs as function arguments, the loss as the
/// returned value), verifies it, and prints it.
LowerResult lowerToSbpText(const ModelGraph &graph);

} // namespace autoddl
