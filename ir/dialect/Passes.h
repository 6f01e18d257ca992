//===- Passes.h - the sbp passes ------------------------------------------===//
#pragma once

#include "ir/dialect/SbpDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace autoddl::sbp {

#define GEN_PASS_DECL
#include "ir/dialect/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ir/dialect/Passes.h.inc"

} // namespace autoddl::sbp
