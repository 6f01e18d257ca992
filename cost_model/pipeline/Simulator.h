//===- Simulator.h - discrete-event execution of a pipeline schedule -----===//
//
// Executes the per-device instruction lists of a Schedule with their data
// dependencies and reports the makespan, each device's idle intervals (the
// bubbles, which PipeFisher fills), the bubble fraction and the peak number of
// in-flight activations. The model (docs/pipeline-simulator.md §3):
//   - a device runs its list in order, one instruction at a time;
//   - F(k, j) needs F(k-1, j); a backward of stage k needs the backward of
//   stage
//     k+1 and F(k, j); W(k, j) needs B(k, j) (same pipeline direction);
//   - a dependency produced on another device arrives p2p time units after it
//     ends (transfers overlap compute and never contend for links);
//   - an instruction starts when its device is free and its inputs have
//   arrived.
// Closed forms for equal times are what the tests check, not what this
// computes.
//
// Plain C++, no exceptions: bad costs or an inconsistent schedule come back as
// an error message.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/OrError.h"
#include "cost_model/pipeline/Schedule.h"

#include <optional>
#include <string>
#include <vector>

namespace autoddl::pipeline {

/// Per-stage times of one micro-batch, in any one time unit (the CLI uses ms).
/// Index s is pipeline stage s, i.e. device s; for interleaved, the v chunks of
/// device s together take these times (each chunk 1/v); for Chimera, stage s
/// runs on device s in the down pipeline and on device p-1-s in the up one.
struct StageTimes {
  std::vector<double> forward;
  std::vector<double> backward;       // the whole backward, B + W
  std::vector<double> weightGradient; // the W part of it (split schedules)
  double p2p = 0;                     // one activation / gradient transfer

  /// The same times on all `stages` stages.
  static StageTimes uniform(int stages, double forward, double backward,
                            double weightGradient = 0, double p2p = 0);
};

/// Checks lengths (one entry per stage), finiteness, non-negativity and
/// weightGradient <= backward. Returns the message, or nullopt when valid.
std::optional<std::string> checkStageTimes(const StageTimes &times, int stages);

/// Duration of `op` under `times` (see StageTimes for the mapping).
double instructionDuration(const Schedule &schedule, const StageTimes &times,
                           const Instruction &op);

struct Interval {
  double start = 0;
  double end = 0;
};

struct ExecutedInstruction {
  int device = 0;
  int index = 0; // position in the device's list
  Instruction op;
  double start = 0;
  double end = 0;
};

struct DeviceResult {
  double busy = 0;                     // sum of instruction durations
  double idle = 0;                     // makespan - busy
  std::vector<Interval> idleIntervals; // [start, end) gaps within [0, makespan)
  /// Peak of micro-batch activations held, in units of one micro-batch of one
  /// whole stage (an interleaved chunk holds 1/v). Held from the start of F to
  /// the end of the full backward, or of W when the backward is split (the
  /// weight gradient still needs the layer inputs).
  double peakActivations = 0;
  /// When the device's last instruction ends (0 for an empty list).
  double end = 0;
};

struct SimulationResult {
  double makespan = 0;
  /// Idle device-time over stages x makespan (0 when the makespan is 0).
  double bubbleFraction = 0;
  std::vector<DeviceResult> devices;
  /// Every instruction with its times, device by device in list order.
  std::vector<ExecutedInstruction> timeline;
};

/// Gaps shorter than this fraction of the makespan are not listed as idle
/// intervals (they are rounding, not bubbles); they still count in `idle`.
constexpr double kIdleIntervalTolerance = 1e-9;

/// A checked schedule with its dependencies resolved: what simulate() derives
/// from the lists alone, built once and run under many stage times (the
/// planner simulates thousands of candidates over a few schedules).
struct PreparedSchedule {
  struct Ref {
    int device = 0, index = 0;
  };
  const Schedule *schedule = nullptr; // must outlive this
  /// Per device, per instruction i: its inputs are deps[start[i] ..
  /// start[i+1]) and the devices waiting on it waiters[wstart[i] ..
  /// wstart[i+1]) (flat arrays, no allocation per instruction).
  std::vector<std::vector<int>> start, wstart;
  std::vector<std::vector<Ref>> deps;
  std::vector<std::vector<int>> waiters;
};

/// Checks the schedule (instructions in range, on the device that owns their
/// stage, each at most once, every dependency present) and resolves its
/// dependencies. Fails on a bad schedule.
OrError<PreparedSchedule> prepareSchedule(const Schedule &schedule);

/// Checks the times and simulates a prepared schedule. Fails on bad times or
/// when the lists deadlock. Without `timeline` the result's timeline stays
/// empty (the planner reads each device's end and the bubble alone; building
/// it is most of a long schedule's cost).
OrError<SimulationResult> simulate(const PreparedSchedule &prepared,
                                   const StageTimes &times,
                                   bool timeline = true);

/// Checks the schedule (instructions in range, on the device that owns their
/// stage, each at most once, every dependency present) and the times, then
/// simulates. Fails on bad input or when the lists deadlock.
OrError<SimulationResult> simulate(const Schedule &schedule,
                                   const StageTimes &times);

} // namespace autoddl::pipeline
