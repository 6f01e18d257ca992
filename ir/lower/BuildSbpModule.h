//===- BuildSbpModule.h - ModelGraph -> sbp ops, for the core (internal) --===//
//
// What lowerToSbpText prints, as a module for a caller that goes on working on
// it in MLIR (fuseImported runs the sbp-fuse-* passes over it), and the
// diagnostics text every lowering reports.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace autoddl {

/// Builds `func.func @<name>` of `graph` into `module` (docs/ir.md: inputs as
/// arguments, sbp.parameter and sbp.constant ops, one op per OpDef located by
/// its name, the loss returned). Returns a message on a malformed graph, ""
/// otherwise; the module is not verified yet.
std::string buildSbpModule(const ModelGraph &graph, mlir::ModuleOp module);

/// The verified module of `graph` in `context` (sbp and func dialects
/// loaded), or null with the lowering's or the verifier's message in `error`.
mlir::OwningOpRef<mlir::ModuleOp> lowerToSbpModule(const ModelGraph &graph,
                                                   mlir::MLIRContext &context,
                                                   std::string &error);

/// While alive, takes the diagnostics of `context` as text, one a line, each
/// after "op '<name>': " when located by a name (the ModelGraph op it came
/// from) and after its location otherwise.
class DiagnosticText {
public:
  explicit DiagnosticText(mlir::MLIRContext *context);
  /// The text, or `fallback` when no diagnostic came.
  std::string str(const std::string &fallback) const {
    return text.empty() ? fallback : text;
  }

private:
  std::string text;
  mlir::ScopedDiagnosticHandler handler;
};

} // namespace autoddl
