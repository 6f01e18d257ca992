//===- Schedule.h - per-device instruction lists of a pipeline schedule --===//
//
// A pipeline schedule is, for every device (pipeline rank), the ordered list of
// compute instructions it runs in one training step: forward F, backward B,
// and, for schedules that split the backward (zero bubble), the input-gradient
// part B and the weight-gradient part W. The lists are the contract between the
// simulator (Simulator.h), which executes them with their data dependencies,
// and the code generator, which emits one program per rank that walks its list;
// a planner may insert further work between instructions (PipeFisher fills the
// idle intervals). Generation rules follow docs/pipeline-simulator.md §2,
// derived from Megatron-LM, pipe-fisher and the zero-bubble paper (see the
// cited files there).
//
// Plain C++, no exceptions: bad configurations come back as an error message.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/OrError.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autoddl::pipeline {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, Chimera, ZeroBubbleH1 };

/// The CLI spelling: "gpipe", "1f1b", "interleaved", "chimera", "zb-h1".
std::string_view scheduleName(ScheduleKind kind);
/// Inverse of scheduleName; nullopt for an unknown name.
std::optional<ScheduleKind> parseScheduleName(std::string_view name);
/// "gpipe, 1f1b, interleaved, chimera, zb-h1", for error messages.
std::string validScheduleNames();

enum class OpKind {
  Forward,        // F: forward of one micro-batch through one stage
  Backward,       // B: input-gradient half of a split backward (dX = dY W)
  WeightGradient, // W: weight-gradient half of a split backward (dW += dY^T X)
  FullBackward, // B and W fused, as GPipe / 1F1B / interleaved / Chimera run it
};

/// "F", "B", "W" (a full backward prints as "B" as well).
std::string_view opKindLetter(OpKind kind);

/// Chimera runs two pipelines over the same devices in opposite directions.
/// Every other schedule uses Down only: pipeline stage k runs on device k (mod
/// p).
enum class Direction { Down, Up };

struct Instruction {
  OpKind kind = OpKind::Forward;
  /// Micro-batch index in [0, microbatches). Chimera numbers the down
  /// pipeline's micro-batches 0..m/2-1 and the up pipeline's m/2..m-1.
  int microbatch = 0;
  /// Model chunk on this device, 0..v-1 (interleaved); 0 otherwise.
  int chunk = 0;
  /// Position in its pipeline, 0 = first (takes the input), modelStages()-1 =
  /// last (computes the loss). Interleaved: chunk * p + device.
  int stage = 0;
  Direction direction = Direction::Down;

  bool operator==(const Instruction &other) const {
    return kind == other.kind && microbatch == other.microbatch &&
           chunk == other.chunk && stage == other.stage &&
           direction == other.direction;
  }
};

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int stages = 1;       // p: pipeline devices
  int microbatches = 1; // m: micro-batches per step (Chimera: both pipelines)
  int chunks = 1;       // v: model chunks per device (interleaved only)
};

struct Schedule {
  ScheduleConfig config;
  /// devices[d] = the instructions device d runs, in order.
  std::vector<std::vector<Instruction>> devices;

  int numDevices() const { return config.stages; }
  /// Stages of one pipeline: p * v for interleaved, p otherwise.
  int modelStages() const { return config.stages * config.chunks; }
  /// Whether the backward is split into B and W (zero bubble).
  bool splitsBackward() const {
    return config.kind == ScheduleKind::ZeroBubbleH1;
  }
  /// The device that runs `stage` of the pipeline going in `direction`.
  int deviceOf(int stage, Direction direction) const;
};

/// Upper bound on instructions per step, so that absurd inputs fail fast
/// instead of exhausting memory.
constexpr long long kMaxInstructions = 5'000'000;

/// Checks the combination (positive counts, chunks only for interleaved with
/// v >= 2 and m % p == 0, Chimera with even p and m % p == 0, size limit).
/// Returns the error message, or nullopt when the configuration is valid.
std::optional<std::string> checkScheduleConfig(const ScheduleConfig &config);

/// Builds the per-device instruction lists; fails with checkScheduleConfig's
/// message.
OrError<Schedule> generateSchedule(const ScheduleConfig &config);

} // namespace autoddl::pipeline
