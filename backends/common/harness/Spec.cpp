//===- Spec.cpp - the running program's spec -----------------------------===//
#include "backends/common/harness/Spec.h"

namespace autoddl::rt::harness {

namespace {
ProgramSpec installed;
} // namespace

const ProgramSpec &program_spec() { return installed; }
void set_program_spec(const ProgramSpec &spec) { installed = spec; }

} // namespace autoddl::rt::harness
