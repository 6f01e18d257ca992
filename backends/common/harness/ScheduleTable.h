//===- ScheduleTable.h - a pipeline device's schedule as a table ---------===//
//
// The generated programs hold each pipeline device's schedule as data: a
// table of instructions (a stage's forward or backward of a micro-batch, a
// micro-batch taking its activation set, and the K-FAC items the plan placed
// in the device's list by instruction slot, DESIGN.md §5b), which
// run_instructions walks on the host. The work itself stays the generated
// stage functions', reached through a table of them per model stage; the
// K-FAC calls are the backend's (its KfacRun.h), passed in as KfacSteps. The
// walk issues exactly the calls an unrolled list would, in its order, so a
// CUDA step graph captures the same launches at the same addresses.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_SCHEDULETABLE_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_SCHEDULETABLE_H

#include "backends/common/harness/Pipeline.h"

#include <cstddef>
#include <cstdint>

namespace autoddl::rt::harness {

/// What one entry of a device's table runs. The K-FAC kinds name their
/// factor: A (the layer's input) or G (its output gradient).
enum Work : uint8_t {
  kF,       // forward of (stage, micro-batch)
  kB,       // backward of (stage, micro-batch), both halves
  kBI,      // its input-gradient half (zero-bubble schedules)
  kBW,      // its weight-gradient half
  kReuse,   // micro-batch takes its set: the sends of the set's last holder
            // (`mb` here) are done
  kCurvA,   // K-FAC curvature of (layer, micro-batch), accumulated now
  kCurvG,   //
  kSaveA,   // its operand kept for a later step of the refresh cycle
  kSaveG,   //
  kSavedA,  // the kept operand accumulated
  kSavedG,  //
  kReduceA, // the layer's factor reduced over its replicas
  kReduceG, //
  kInvertA, // the layer's factor inverted
  kInvertG, //
};

/// One instruction. K-FAC entries run in step `phase` of the device's
/// refresh cycle only (0: the refresh step, when kfac_due()).
struct Instruction {
  Work work;
  int16_t stage = -1; // model stage (-1: none)
  int16_t mb = -1;    // micro-batch (kReuse: the set's previous holder)
  Direction dir = kDown;
  int16_t layer = -1; // K-FAC layer (the program's layer table row)
  int8_t phase = 0;
};

/// One model stage's generated functions (null where the stage has none:
/// backward halves outside zero-bubble schedules, K-FAC on a stage without
/// K-FAC layers).
struct StageFunctions {
  void (*forward)(int64_t step, int mb, Direction dir);
  void (*backward)(int64_t step, int mb, Direction dir);
  void (*backward_input)(int64_t step, int mb, Direction dir);
  void (*backward_weight)(int64_t step, int mb, Direction dir);
  void (*reuse)(int prev, Direction dir);
  // A K-FAC layer's operand of micro-batch mb: accumulated into factor A or
  // G now, or with `save` kept for a later step of the refresh cycle.
  void (*kfac)(int mb, int layer, bool g, bool save);
  // Its activation sets (and what it keeps apart from them) allocated, or
  // freed (the CUDA program's, before its context goes).
  void (*allocate)();
  void (*free)();
};

/// The backend's K-FAC calls (its KfacRun.h).
struct KfacSteps {
  bool (*due)();
  int64_t (*phase)();
  void (*saved)(int layer, int mb, bool g);
  void (*reduce)(int layer, bool g);
  void (*invert)(int layer, bool g);
  // Before a set is taken again on a refresh step: a filling thread's queued
  // reads of the sets copied (CPU; the CUDA program reads in stream order).
  void (*release)();
};

/// A device's table.
struct InstructionList {
  const Instruction *begin;
  size_t size;
};

/// Runs one step of a device's table: `stages` indexed by model stage,
/// `kfac` null for a first-order program (whose tables hold no K-FAC entry).
inline void run_instructions(InstructionList list, const StageFunctions *stages,
                             const KfacSteps *kfac, int64_t step) {
  for (size_t i = 0; i < list.size; ++i) {
    const Instruction &in = list.begin[i];
    const StageFunctions *s = in.stage >= 0 ? &stages[in.stage] : nullptr;
    if (in.work >= kCurvA &&
        (in.phase == 0 ? !kfac->due() : kfac->phase() != in.phase))
      continue;
    const bool g = in.work >= kCurvA && (in.work - kCurvA) % 2 == 1;
    switch (in.work) {
    case kF:
      s->forward(step, in.mb, in.dir);
      break;
    case kB:
      s->backward(step, in.mb, in.dir);
      break;
    case kBI:
      s->backward_input(step, in.mb, in.dir);
      break;
    case kBW:
      s->backward_weight(step, in.mb, in.dir);
      break;
    case kReuse:
      if (kfac && kfac->due())
        kfac->release();
      s->reuse(in.mb, in.dir);
      break;
    case kCurvA:
    case kCurvG:
    case kSaveA:
    case kSaveG:
      s->kfac(in.mb, in.layer, g, in.work >= kSaveA);
      break;
    case kSavedA:
    case kSavedG:
      kfac->saved(in.layer, in.mb, g);
      break;
    case kReduceA:
    case kReduceG:
      kfac->reduce(in.layer, g);
      break;
    case kInvertA:
    case kInvertG:
      kfac->invert(in.layer, g);
      break;
    }
  }
}

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_SCHEDULETABLE_H
