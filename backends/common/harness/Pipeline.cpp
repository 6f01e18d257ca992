//===- Pipeline.cpp - pipeline devices and message tags ------------------===//
#include "backends/common/harness/Pipeline.h"

#include "backends/common/harness/Spec.h"

namespace autoddl::rt::harness {

int device_of(int64_t stage, Direction dir) {
  const int64_t pp = program_spec().pp;
  return int(dir == kUp ? pp - 1 - stage : stage % pp);
}

bool device_runs_stage(int64_t device, int64_t stage) {
  return device_of(stage, kDown) == device ||
         (program_spec().chimera && device_of(stage, kUp) == device);
}

int tag(int64_t mb, int64_t boundary, TagKind kind, int64_t k) {
  const ProgramSpec &s = program_spec();
  return int(((mb * s.stages + boundary) * 2 + kind) * s.max_boundary + k);
}

} // namespace autoddl::rt::harness
