//===- ActivationSets.h - the activation buffers a schedule keeps alive ---===//
//
// A stage's activations (and their gradients) live in "sets", one micro-batch
// at a time. A set is taken when anything first writes into it for a
// micro-batch and given back once the micro-batch's last reader on that device
// is done: its forward, backward, weight-gradient half (ZB-H1) and any K-FAC
// read of its operands. This file assigns micro-batches to sets from the
// schedule's instruction lists, once, for both the code generator (which
// allocates that many sets per stage with fixed addresses and indexes them by
// the table) and the memory model (which counts the same sets): DESIGN.md §5b
// "Memory is what the table keeps alive".
//
// A pipeline receive is posted when the device first wants that message or
// any later one of the same sender (the CUDA Pipe posts, in the sender's
// order, every message up to the one wanted; backends/cuda/Comm.h): a set is
// taken at that post when it comes before the micro-batch's first
// instruction.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/OrError.h"
#include "cost_model/pipeline/Schedule.h"

#include <cstddef>
#include <vector>

namespace autoddl::pipeline {

/// A read of (stage, micro-batch)'s set on `device` placed before instruction
/// `slot` of the device's list (slot == list size: at the list's end), e.g.
/// a K-FAC curvature item reading the layer's saved operands.
struct SetRead {
  int device = 0, stage = 0, microbatch = 0;
  size_t slot = 0;
};

/// Before instruction `index` of its device, micro-batch `microbatch` takes
/// set `set` of `stage`, last used by micro-batch `previous` (-1: first use
/// in the step; its buffers hold nothing live).
struct SetTake {
  size_t index = 0;
  int stage = 0, microbatch = 0, set = 0, previous = -1;
};

struct ActivationSets {
  /// Per model stage: how many sets the stage allocates (the most any device
  /// running it holds at once; Chimera's two copies of a stage have the same).
  std::vector<int> count;
  /// Per model stage and micro-batch: its set; -1 where the stage does not
  /// run the micro-batch (Chimera: the other direction's micro-batches run
  /// the same stage on the mirrored device, with their own entries).
  std::vector<std::vector<int>> setOf;
  /// Per device: its takes, in instruction order.
  std::vector<std::vector<SetTake>> takes;
};

/// Assigns micro-batches to sets: per device and stage, in the order of the
/// takes, the lowest set given back before the take (a set given back by
/// instruction i is free for a take at i + 1 or later; one read at slot s is
/// free for a take at s). Fails on a read naming an instruction slot or a
/// (device, stage, micro-batch) the schedule does not have.
OrError<ActivationSets>
assignActivationSets(const Schedule &schedule,
                     const std::vector<SetRead> &reads = {});

/// assignActivationSets(...).count alone, without the table: per model stage,
/// the most sets any device running it holds at once (a set given back at
/// position g is free for a take at t > g, so the lowest-free assignment in
/// take order uses exactly the largest number of lifetimes overlapping one
/// position). For the planner, which prices hundreds of schedules of up to
/// millions of instructions and reads only the counts.
OrError<std::vector<int>>
countActivationSets(const Schedule &schedule,
                    const std::vector<SetRead> &reads = {});

/// Whether a stage's sets share one copy of the gradients of the tensors
/// inside the stage (backends/common/harness/StageSets.h): a micro-batch's
/// backward runs whole on its device before another's starts, so each finds
/// them free, unless something reads them after it: ZB-H1's weight-gradient
/// half (`kind`), or a read of the sets after the backward (`laterReads`:
/// K-FAC's curvature). The gradients a stage sends or receives stay per set
/// (a transfer may still be in flight). The programs allocate, and the
/// memory model counts, by this answer.
bool setsShareGradients(ScheduleKind kind, bool laterReads);

} // namespace autoddl::pipeline
