//===- Pipeline.h - pipeline devices and message tags --------------------===//
//
// Which pipeline device runs a stage, and the tag of each message between
// stages, for the generated schedule code of both backends (it reads the
// running program's spec: set_program_spec).
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_PIPELINE_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_PIPELINE_H

#include <cstdint>

namespace autoddl::rt::harness {

/// Chimera's second pipeline runs up the devices.
enum Direction { kDown, kUp };

/// The pipeline device running `stage` in direction `dir`
/// (Schedule::deviceOf).
int device_of(int64_t stage, Direction dir);

/// Whether pipeline device `device` runs `stage` (in either direction).
bool device_runs_stage(int64_t device, int64_t stage);

enum TagKind { kActivation, kGradient };
/// A unique tag per (micro-batch, boundary, direction of data, tensor).
int tag(int64_t mb, int64_t boundary, TagKind kind, int64_t k);

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_PIPELINE_H
