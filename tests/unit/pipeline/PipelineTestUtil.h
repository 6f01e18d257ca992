//===- PipelineTestUtil.h - shared helpers of the pipeline tests ---------===//
#pragma once

#include "cost_model/pipeline/Simulator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace autoddl::pipeline::testing {

inline ScheduleConfig config(ScheduleKind kind, int stages, int microbatches,
                             int chunks = 1) {
  ScheduleConfig result;
  result.kind = kind;
  result.stages = stages;
  result.microbatches = microbatches;
  result.chunks = chunks;
  return result;
}

inline Schedule makeSchedule(const ScheduleConfig &cfg) {
  OrError<Schedule> schedule = generateSchedule(cfg);
  EXPECT_TRUE(bool(schedule)) << schedule.error();
  return schedule ? *schedule : Schedule{};
}

inline SimulationResult run(const ScheduleConfig &cfg,
                            const StageTimes &times) {
  OrError<SimulationResult> result = simulate(makeSchedule(cfg), times);
  EXPECT_TRUE(bool(result)) << result.error();
  return result ? *result : SimulationResult{};
}

/// "F0 B0 W0 ..." for one device; lower case for the up pipeline, ":c" suffix
/// for a chunk other than 0.
inline std::string orderOf(const std::vector<Instruction> &ops) {
  std::string text;
  for (const Instruction &op : ops) {
    if (!text.empty())
      text += ' ';
    std::string letter(opKindLetter(op.kind));
    if (op.direction == Direction::Up)
      letter[0] = static_cast<char>(letter[0] - 'A' + 'a');
    text += letter + std::to_string(op.microbatch);
    if (op.chunk != 0)
      text += ":c" + std::to_string(op.chunk);
  }
  return text;
}

} // namespace autoddl::pipeline::testing
