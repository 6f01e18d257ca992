//===- ValidationTest.cpp - bad configurations, times and schedules -------===//
#include "tests/unit/pipeline/PipelineTestUtil.h"

namespace autoddl::pipeline {
namespace {

using testing::config;
using testing::makeSchedule;

std::string configError(const ScheduleConfig &cfg) {
  OrError<Schedule> schedule = generateSchedule(cfg);
  EXPECT_FALSE(bool(schedule));
  return schedule.error();
}

TEST(ConfigValidation, RejectsImpossibleCombinations) {
  EXPECT_EQ(configError(config(ScheduleKind::OneFOneB, 0, 4)),
            "stages must be at least 1, got 0");
  EXPECT_EQ(configError(config(ScheduleKind::GPipe, 4, 0)),
            "micro-batches must be at least 1, got 0");
  EXPECT_EQ(configError(config(ScheduleKind::GPipe, 4, -3)),
            "micro-batches must be at least 1, got -3");
  EXPECT_EQ(configError(config(ScheduleKind::Chimera, 3, 6)),
            "chimera needs an even number of stages, got 3");
  EXPECT_NE(configError(config(ScheduleKind::Chimera, 4, 6))
                .find("multiple of stages"),
            std::string::npos);
  EXPECT_EQ(configError(config(ScheduleKind::Interleaved, 4, 8, 1)),
            "interleaved needs at least 2 chunks per device, got 1");
  EXPECT_NE(configError(config(ScheduleKind::Interleaved, 4, 6, 2))
                .find("Megatron's constraint"),
            std::string::npos);
  EXPECT_EQ(configError(config(ScheduleKind::OneFOneB, 4, 8, 2)),
            "chunks apply only to the interleaved schedule, got 2 chunks for "
            "1f1b");
  // 4096 x 4096 x 3 instructions is past the limit and must fail fast,
  // including when the product overflows int.
  EXPECT_NE(configError(config(ScheduleKind::ZeroBubbleH1, 4096, 4096))
                .find("too large"),
            std::string::npos);
  EXPECT_NE(configError(config(ScheduleKind::Interleaved, 65536, 65536, 65536))
                .find("too large"),
            std::string::npos);
}

TEST(ConfigValidation, AcceptsEdgeCases) {
  EXPECT_FALSE(checkScheduleConfig(config(ScheduleKind::OneFOneB, 1, 1)));
  EXPECT_FALSE(checkScheduleConfig(config(ScheduleKind::Chimera, 2, 2)));
  EXPECT_FALSE(checkScheduleConfig(config(ScheduleKind::Interleaved, 1, 3, 3)));
}

std::string simulateError(const Schedule &schedule, const StageTimes &times) {
  OrError<SimulationResult> result = simulate(schedule, times);
  EXPECT_FALSE(bool(result));
  return result.error();
}

TEST(TimeValidation, RejectsBadTimes) {
  Schedule s = makeSchedule(config(ScheduleKind::ZeroBubbleH1, 2, 2));
  StageTimes t = StageTimes::uniform(2, 1, 2, 1);
  t.forward = {1};
  EXPECT_EQ(simulateError(s, t),
            "forward times: expected one per stage (2), got 1");
  t = StageTimes::uniform(2, 1, 2, 1);
  t.backward[1] = -1;
  EXPECT_EQ(simulateError(s, t),
            "backward time of stage 1 must be a finite number >= 0, got -1");
  t = StageTimes::uniform(2, 1, 2, 3);
  EXPECT_EQ(simulateError(s, t), "weight-gradient time of stage 0 (3) exceeds "
                                 "the whole backward time (2)");
  t = StageTimes::uniform(2, 1, 2, 1, -0.5);
  EXPECT_EQ(simulateError(s, t),
            "p2p time must be a finite number >= 0, got -0.5");
}

// The simulator's error on a two-stage schedule of `kind` and m micro-batches
// whose device d lists its instructions i and i + 1 the other way round.
std::string swappedError(ScheduleKind kind, int m, int d, size_t i) {
  Schedule s = makeSchedule(config(kind, 2, m));
  std::swap(s.devices[size_t(d)][i], s.devices[size_t(d)][i + 1]);
  return simulateError(s, StageTimes::uniform(2, 1, 2));
}

TEST(ScheduleValidation, DetectsDeadlock) {
  // The last stage lists B0 before F0: B0 needs F0, queued behind it.
  EXPECT_EQ(swappedError(ScheduleKind::OneFOneB, 1, 1, 0),
            "schedule deadlocks: device 1 waits at instruction 0 (B0 of stage "
            "1) for F0 of stage 1 on device 1, queued behind it");
}

TEST(ScheduleValidation, DetectsCrossDeviceDeadlock) {
  // GPipe p=2, m=2 with device 0 listing B0 before F1: B0 needs device 1's
  // B0, which device 1 runs only after its F1, which needs device 0's F1,
  // queued behind B0: a cycle through both devices.
  EXPECT_EQ(swappedError(ScheduleKind::GPipe, 2, 0, 1),
            "schedule deadlocks: device 0 waits at instruction 1 (B0 "
            "of stage 0) for B0 of stage 1 on device 1; device 1 waits "
            "at instruction 1 (F1 of stage 1) for F1 of stage 0 on "
            "device 0");
}

TEST(ScheduleValidation, RejectsMisplacedDuplicateAndMissingWork) {
  Schedule base = makeSchedule(config(ScheduleKind::OneFOneB, 2, 2));
  StageTimes t = StageTimes::uniform(2, 1, 2);

  Schedule moved = base;
  moved.devices[0].push_back(moved.devices[1].back());
  moved.devices[1].pop_back();
  EXPECT_NE(simulateError(moved, t).find("belongs on device 1"),
            std::string::npos);

  Schedule twice = base;
  twice.devices[0].push_back(twice.devices[0].front());
  EXPECT_NE(simulateError(twice, t).find("appears twice"), std::string::npos);

  Schedule missing = base;
  missing.devices[1].erase(missing.devices[1].begin()); // dev1's F0
  EXPECT_NE(simulateError(missing, t)
                .find("depends on an instruction no "
                      "device runs"),
            std::string::npos);

  Schedule split = base;
  split.devices[0][2].kind = OpKind::Backward;
  EXPECT_NE(simulateError(split, t).find("without B/W split"),
            std::string::npos);
}

/// A schedule prepared once and simulated under many times gives what the
/// one-shot simulate gives, to the bit (the planner prices with the first).
TEST(PreparedSchedule, SimulatesAsTheOneShotSimulator) {
  for (auto c :
       {config(ScheduleKind::OneFOneB, 4, 8), config(ScheduleKind::GPipe, 3, 5),
        config(ScheduleKind::ZeroBubbleH1, 4, 6),
        config(ScheduleKind::Interleaved, 2, 4, 3),
        config(ScheduleKind::Chimera, 4, 8)}) {
    Schedule s = makeSchedule(c);
    auto prepared = prepareSchedule(s);
    ASSERT_TRUE(prepared) << prepared.error();
    for (int trial = 0; trial < 4; ++trial) {
      StageTimes t;
      for (int d = 0; d < c.stages; ++d) {
        t.forward.push_back(1.0 + 0.37 * ((d * 7 + trial * 3) % 5));
        t.backward.push_back(2.0 + 0.53 * ((d * 3 + trial) % 4));
        t.weightGradient.push_back(c.kind == ScheduleKind::ZeroBubbleH1
                                       ? 0.25 * t.backward.back()
                                       : 0);
      }
      t.p2p = 0.1 * trial;
      auto a = simulate(*prepared, t), b = simulate(s, t);
      ASSERT_TRUE(a && b);
      EXPECT_EQ(a->makespan, b->makespan);
      EXPECT_EQ(a->bubbleFraction, b->bubbleFraction);
      ASSERT_EQ(a->timeline.size(), b->timeline.size());
      for (size_t i = 0; i < a->timeline.size(); ++i)
        EXPECT_TRUE(a->timeline[i].start == b->timeline[i].start &&
                    a->timeline[i].end == b->timeline[i].end);
      // Without the timeline: the same ends and bubble, no timeline.
      auto lean = simulate(*prepared, t, /*timeline=*/false);
      ASSERT_TRUE(lean);
      EXPECT_TRUE(lean->timeline.empty());
      EXPECT_EQ(lean->bubbleFraction, b->bubbleFraction);
      for (int d = 0; d < c.stages; ++d) {
        double end = 0;
        for (const ExecutedInstruction &x : b->timeline)
          if (x.device == d)
            end = std::max(end, x.end);
        EXPECT_EQ(lean->devices[size_t(d)].end, end);
      }
    }
    StageTimes bad = StageTimes::uniform(c.stages, -1, 1, 0, 0);
    EXPECT_EQ(simulate(*prepared, bad).error(), simulate(s, bad).error());
  }
  Schedule broken = makeSchedule(config(ScheduleKind::OneFOneB, 2, 2));
  broken.devices[1].pop_back(); // a backward nobody runs
  EXPECT_FALSE(prepareSchedule(broken));
}

} // namespace
} // namespace autoddl::pipeline
