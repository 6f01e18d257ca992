//===- EmbeddedFiles.h - files compiled into the binary ---------*- C++ -*-===//
//
// Tables CMake writes at build time, one row per file: the runtime sources
// generated projects carry (codegen/EmbedRuntime.cmake), the calibration
// probe's (the same script, driver/ProbeFiles.cpp) and the built-in models
// (ir/import/EmbedModels.cmake).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>

namespace autoddl {

/// One embedded file: its name (a source's path relative to the source root,
/// a built-in model's name) and its text.
struct EmbeddedFile {
  const char *name;
  const char *text;
};

namespace codegen {
extern const EmbeddedFile kRuntimeFiles[];
extern const size_t kNumRuntimeFiles;
extern const EmbeddedFile kProbeFiles[];
extern const size_t kNumProbeFiles;
} // namespace codegen

namespace import {
extern const EmbeddedFile kBuiltinModels[];
extern const size_t kNumBuiltinModels;
} // namespace import

} // namespace autoddl
