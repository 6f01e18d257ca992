//===- HandWorkedTest.cpp - unequal times and transfers, worked on paper
//---===//
//
// Cases no closed form covers: unequal per-stage times and p2p > 0. Each
// comment lists every instruction's [start, end) as worked by hand from the
// rules in Simulator.h: start = max(device free, inputs' end + p2p when the
// input comes from another device).
//
//===----------------------------------------------------------------------===//
#include "tests/unit/pipeline/PipelineTestUtil.h"

namespace autoddl::pipeline {
namespace {

using testing::config;
using testing::makeSchedule;
using testing::run;

constexpr double kEps = 1e-12;

StageTimes times(std::vector<double> fwd, std::vector<double> bwd,
                 std::vector<double> wgrad, double p2p) {
  StageTimes t;
  t.forward = std::move(fwd);
  t.backward = std::move(bwd);
  t.weightGradient = std::move(wgrad);
  t.p2p = p2p;
  return t;
}

void expectIntervals(const std::vector<Interval> &got,
                     const std::vector<Interval> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].start, want[i].start, kEps) << "interval " << i;
    EXPECT_NEAR(got[i].end, want[i].end, kEps) << "interval " << i;
  }
}

void expectSpans(const SimulationResult &r, int device,
                 const std::vector<Interval> &want) {
  std::vector<Interval> got;
  for (const ExecutedInstruction &e : r.timeline)
    if (e.device == device)
      got.push_back({e.start, e.end});
  expectIntervals(got, want);
}

TEST(HandWorked, GPipeTwoStagesUnequalWithTransfers) {
  // p=2, m=2, f = (1, 2), b = (2, 3), p2p = 0.5.
  // dev0 F0 [0,1]   F1 [1,2]
  // dev1 F0 [1.5,3.5] (dev0 F0 ends 1, +0.5)   F1 [3.5,5.5] (input at 2.5)
  // dev1 B0 [5.5,8.5]  B1 [8.5,11.5]
  // dev0 B0 [9,11] (dev1 B0 ends 8.5, +0.5)   B1 [12,14] (11.5 + 0.5)
  SimulationResult r = run(config(ScheduleKind::GPipe, 2, 2),
                           times({1, 2}, {2, 3}, {0, 0}, 0.5));
  EXPECT_NEAR(r.makespan, 14, kEps);
  expectSpans(r, 0, {{0, 1}, {1, 2}, {9, 11}, {12, 14}});
  expectSpans(r, 1, {{1.5, 3.5}, {3.5, 5.5}, {5.5, 8.5}, {8.5, 11.5}});
  // dev0 busy 6, idle 8 = [2,9) + [11,12); dev1 busy 10, idle 4.
  expectIntervals(r.devices[0].idleIntervals, {{2, 9}, {11, 12}});
  expectIntervals(r.devices[1].idleIntervals, {{0, 1.5}, {11.5, 14}});
  EXPECT_NEAR(r.devices[0].busy, 6, kEps);
  EXPECT_NEAR(r.devices[1].idle, 4, kEps);
  // (8 + 4) / (2 x 14)
  EXPECT_NEAR(r.bubbleFraction, 12.0 / 28.0, kEps);
  EXPECT_EQ(r.devices[0].peakActivations, 2);
  EXPECT_EQ(r.devices[1].peakActivations, 2);
}

TEST(HandWorked, OneFOneBHeavyLastStage) {
  // p=3, m=2, f = (1,1,2), b = (2,2,4), p2p = 0 (a loss stage twice as slow).
  // Orders: dev0 F0 F1 B0 B1; dev1 F0 F1 B0 B1 (w=1, steady F1 B0);
  //         dev2 F0 B0 F1 B1.
  // dev0 F0 [0,1] F1 [1,2]; dev1 F0 [1,2] F1 [2,3];
  // dev2 F0 [2,4] B0 [4,8] F1 [8,10] B1 [10,14];
  // dev1 B0 [8,10] B1 [14,16]; dev0 B0 [10,12] B1 [16,18].
  SimulationResult r = run(config(ScheduleKind::OneFOneB, 3, 2),
                           times({1, 1, 2}, {2, 2, 4}, {0, 0, 0}, 0));
  EXPECT_NEAR(r.makespan, 18, kEps);
  expectSpans(r, 2, {{2, 4}, {4, 8}, {8, 10}, {10, 14}});
  expectSpans(r, 1, {{1, 2}, {2, 3}, {8, 10}, {14, 16}});
  expectSpans(r, 0, {{0, 1}, {1, 2}, {10, 12}, {16, 18}});
  expectIntervals(r.devices[0].idleIntervals, {{2, 10}, {12, 16}});
  expectIntervals(r.devices[1].idleIntervals,
                  {{0, 1}, {3, 8}, {10, 14}, {16, 18}});
  expectIntervals(r.devices[2].idleIntervals, {{0, 2}, {14, 18}});
  // Idle 12 + 12 + 6 = 30 over 3 x 18.
  EXPECT_NEAR(r.bubbleFraction, 30.0 / 54.0, kEps);
  EXPECT_EQ(r.devices[0].peakActivations, 2);
  EXPECT_EQ(r.devices[1].peakActivations, 2);
  EXPECT_EQ(r.devices[2].peakActivations, 1);
}

TEST(HandWorked, ZeroBubbleH1TwoStagesWithTransfers) {
  // p=2, m=2, f=1, bwd=3 with wgrad=1 (B=2, W=1), p2p=1.
  // Orders: dev0 F0 F1 B0 W0 B1 W1 (lag 0); dev1 F0 B0 F1 B1 W0 W1 (lag 1).
  // dev0 F0 [0,1] F1 [1,2]
  // dev1 F0 [2,3] (1 + 1) B0 [3,5] F1 [5,6] (input at 3, device busy to 5)
  //      B1 [6,8] W0 [8,9] W1 [9,10]
  // dev0 B0 [6,8] (5 + 1) W0 [8,9] B1 [9,11] (8 + 1) W1 [11,12]
  SimulationResult r = run(config(ScheduleKind::ZeroBubbleH1, 2, 2),
                           times({1, 1}, {3, 3}, {1, 1}, 1));
  EXPECT_NEAR(r.makespan, 12, kEps);
  expectSpans(r, 0, {{0, 1}, {1, 2}, {6, 8}, {8, 9}, {9, 11}, {11, 12}});
  expectSpans(r, 1, {{2, 3}, {3, 5}, {5, 6}, {6, 8}, {8, 9}, {9, 10}});
  expectIntervals(r.devices[0].idleIntervals, {{2, 6}});
  expectIntervals(r.devices[1].idleIntervals, {{0, 2}, {10, 12}});
  EXPECT_NEAR(r.bubbleFraction, 8.0 / 24.0, kEps);
  // Activations are held until W: dev0 holds F0, F1 before W0 frees one.
  EXPECT_EQ(r.devices[0].peakActivations, 2);
  EXPECT_EQ(r.devices[1].peakActivations, 2);
}

TEST(HandWorked, InterleavedTwoStagesTwoChunksWithTransfers) {
  // p=2, v=2, m=2, per-device f=2, b=4, so a chunk takes F=1, B=2; p2p=0.5.
  // m == p: all four chunk forwards first. Virtual stages: dev0 holds 0 and
  // 2, dev1 holds 1 and 3.
  // dev0 F(vs0,0) [0,1] F(vs0,1) [1,2]
  // dev1 F(vs1,0) [1.5,2.5] F(vs1,1) [2.5,3.5]
  // dev0 F(vs2,0) [3,4] (2.5 + .5) F(vs2,1) [4,5]
  // dev1 F(vs3,0) [4.5,5.5] F(vs3,1) [5.5,6.5] B(vs3,0) [6.5,8.5]
  //      B(vs3,1) [8.5,10.5]
  // dev0 B(vs2,0) [9,11] B(vs2,1) [11,13]
  // dev1 B(vs1,0) [11.5,13.5] B(vs1,1) [13.5,15.5]
  // dev0 B(vs0,0) [14,16] B(vs0,1) [16,18]
  SimulationResult r = run(config(ScheduleKind::Interleaved, 2, 2, 2),
                           times({2, 2}, {4, 4}, {0, 0}, 0.5));
  EXPECT_NEAR(r.makespan, 18, kEps);
  expectSpans(
      r, 0,
      {{0, 1}, {1, 2}, {3, 4}, {4, 5}, {9, 11}, {11, 13}, {14, 16}, {16, 18}});
  expectSpans(r, 1,
              {{1.5, 2.5},
               {2.5, 3.5},
               {4.5, 5.5},
               {5.5, 6.5},
               {6.5, 8.5},
               {8.5, 10.5},
               {11.5, 13.5},
               {13.5, 15.5}});
  expectIntervals(r.devices[0].idleIntervals, {{2, 3}, {5, 9}, {13, 14}});
  expectIntervals(r.devices[1].idleIntervals,
                  {{0, 1.5}, {3.5, 4.5}, {10.5, 11.5}, {15.5, 18}});
  EXPECT_NEAR(r.bubbleFraction, 12.0 / 36.0, kEps);
  // Four chunk activations of half a stage each.
  EXPECT_EQ(r.devices[0].peakActivations, 2);
}

TEST(HandWorked, ChimeraTwoStagesUnequalWithTransfers) {
  // p=2, m=2 (one micro-batch per direction), stage times f = (1, 2),
  // b = (2, 3), p2p = 0.5. Down: stage 0 on dev0, stage 1 on dev1; up:
  // stage 0 on dev1, stage 1 on dev0. Orders (a=1, b=0 on both workers):
  // dev0: F0(down s0) f1(up s1) b1(up s1) B0(down s0)
  // dev1: f1(up s0) F0(down s1) B0(down s1) b1(up s0)
  // dev0 F0 [0,1];  dev1 f1 [0,1]
  // dev0 f1 [1.5,3.5] (1 + .5, stage-1 forward 2); dev1 F0 [1.5,3.5]
  // dev0 b1 [3.5,6.5] (last up stage); dev1 B0 [3.5,6.5]
  // dev0 B0 [7,9] (6.5 + .5); dev1 b1 [7,9]
  SimulationResult r = run(config(ScheduleKind::Chimera, 2, 2),
                           times({1, 2}, {2, 3}, {0, 0}, 0.5));
  EXPECT_NEAR(r.makespan, 9, kEps);
  for (int d = 0; d < 2; ++d) {
    expectSpans(r, d, {{0, 1}, {1.5, 3.5}, {3.5, 6.5}, {7, 9}});
    expectIntervals(r.devices[d].idleIntervals, {{1, 1.5}, {6.5, 7}});
    EXPECT_EQ(r.devices[d].peakActivations, 2);
  }
  EXPECT_NEAR(r.bubbleFraction, 2.0 / 18.0, kEps);
}

TEST(HandWorked, ZeroDurationWeightGradientsLeaveNoGaps) {
  // ZB-H1 with wgrad = 0 is 1F1B with zero-length W marks: the makespan is
  // 1F1B's (m+p-1)(f+b) = (4+3-1) x 3 = 18 and no zero-length idle interval
  // is reported.
  SimulationResult r = run(config(ScheduleKind::ZeroBubbleH1, 3, 4),
                           StageTimes::uniform(3, 1, 2, 0));
  EXPECT_NEAR(r.makespan, 18, kEps);
  for (const DeviceResult &device : r.devices)
    for (const Interval &gap : device.idleIntervals)
      EXPECT_GT(gap.end - gap.start, 0);
}

} // namespace
} // namespace autoddl::pipeline
