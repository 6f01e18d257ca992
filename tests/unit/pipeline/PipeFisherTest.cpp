//===- PipeFisherTest.cpp - K-FAC items packed into bubbles, by hand -----===//
//
// Small cases worked by hand (cost_model/pipeline/PipeFisher.h): where each
// item lands, the refresh interval K, the forced tail, utilisation and the
// saved-tensor peak. Margin 0 unless said, so that the arithmetic is exact.
//
//===----------------------------------------------------------------------===//
#include "cost_model/pipeline/PipeFisher.h"
#include "tests/unit/pipeline/PipelineTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace autoddl::pipeline {
namespace {

using testing::config;
using testing::makeSchedule;

KfacLayerWork layer(std::string name, int stage, double curv, double inv,
                    double reduce = 0, double precond = 0.25,
                    Direction dir = Direction::Down) {
  KfacLayerWork w;
  w.name = std::move(name);
  w.stage = stage;
  w.direction = dir;
  w.curvature[0] = w.curvature[1] = curv;
  w.invert[0] = w.invert[1] = inv;
  w.reduce[0] = w.reduce[1] = reduce;
  w.precondition = precond;
  w.savedBytes[0] = 100; // a
  w.savedBytes[1] = 10;  // g
  w.factorBytes[0] = 4;
  w.factorBytes[1] = 8;
  return w;
}

/// "curv_A:0@0[2,2.5)" per item: kind, micro-batch (or layer name for
/// per-factor items), step and time span; '*' marks a forced item.
std::string describe(const PipeFisherInput &in, const DeviceFill &fill,
                     bool withPrecondition = false) {
  std::string text;
  for (const PlacedItem &p : fill.items) {
    if (p.kind == KfacItemKind::Precondition && !withPrecondition)
      continue;
    if (!text.empty())
      text += ' ';
    char span[64];
    std::snprintf(span, sizeof span, "[%g,%g)", p.start, p.end);
    text += std::string(kfacItemName(p.kind)) + ":" +
            (p.microbatch >= 0 ? std::to_string(p.microbatch)
                               : in.layers[p.layer].name) +
            "@" + std::to_string(p.step) + span + (p.forced ? "*" : "");
  }
  return text;
}

/// OneFOneBTwoStagesByHand's schedule and times: 1F1B over 2 stages, 2
/// micro-batches, forward 1 and backward 2 a stage.
Schedule handSchedule() {
  return makeSchedule(config(ScheduleKind::OneFOneB, 2, 2));
}
StageTimes handTimes() { return StageTimes::uniform(2, 1, 2); }

/// A K-FAC input that packs items into gaps they fill exactly (no margin).
PipeFisherInput noMargin() {
  PipeFisherInput in;
  in.margin = 0;
  return in;
}

/// OneFOneBTwoStagesByHand's input: one layer a stage (s0, s1), curvature 0.5
/// per factor and micro-batch, inversion 1, no margin.
PipeFisherInput handInput() {
  PipeFisherInput in = noMargin();
  in.layers = {layer("s0", 0, 0.5, 1), layer("s1", 1, 0.5, 1)};
  return in;
}

/// Each device's refresh interval K_d, and the plan's K.
void expectRefreshSteps(const PipeFisherResult &r,
                        const std::vector<int> &perDevice, int overall) {
  ASSERT_EQ(r.devices.size(), perDevice.size());
  for (size_t d = 0; d < perDevice.size(); ++d)
    EXPECT_EQ(r.devices[d].refreshSteps, perDevice[d]) << "device " << d;
  EXPECT_EQ(r.refreshSteps, overall);
}

/// The schedules the properties below hold on, each with 4 stages and 8
/// micro-batches (interleaved: 2 chunks a stage).
constexpr ScheduleKind kEverySchedule[] = {
    ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
    ScheduleKind::ZeroBubbleH1, ScheduleKind::Chimera};
constexpr int kStages = 4, kMicroBatches = 8;
Schedule everyScheduleCase(ScheduleKind kind) {
  return makeSchedule(config(kind, kStages, kMicroBatches,
                             kind == ScheduleKind::Interleaved ? 2 : 1));
}

/// One K-FAC layer per model stage of `s` (Chimera: and its up copy),
/// curvature 0.1, inversion 0.7 and no reduction (one holder each: every item
/// is the thread's).
PipeFisherInput layerPerStage(const Schedule &s, ScheduleKind kind) {
  PipeFisherInput in;
  for (int st = 0; st < s.modelStages(); ++st) {
    in.layers.push_back(layer("L" + std::to_string(st), st, 0.1, 0.7));
    if (kind == ScheduleKind::Chimera)
      in.layers.push_back(layer("U" + std::to_string(st), st, 0.1, 0.7, 0, 0.25,
                                Direction::Up));
  }
  return in;
}

/// packKfac's refusal of `in` ("" when it packs).
std::string packError(const Schedule &s, const SimulationResult &sim,
                      const PipeFisherInput &in) {
  OrError<PipeFisherResult> r = packKfac(s, sim, in);
  return r ? "" : r.error();
}

PipeFisherResult pack(const Schedule &schedule, const StageTimes &times,
                      const PipeFisherInput &in) {
  OrError<SimulationResult> sim = simulate(schedule, times);
  EXPECT_TRUE(bool(sim)) << sim.error();
  OrError<PipeFisherResult> r = packKfac(schedule, *sim, in);
  EXPECT_TRUE(bool(r)) << r.error();
  return r ? *r : PipeFisherResult{};
}

// 1F1B, p = 2, m = 2, f = 1, b = 2. The simulator's timeline:
//   device 0: F0 [0,1) F1 [1,2) B0 [4,6) B1 [7,9)   idle [2,4) [6,7)
//   device 1: F0 [1,2) B0 [2,4) F1 [4,5) B1 [5,7)   idle [0,1) [7,9)
// One layer per stage; curvature 0.5 per factor and micro-batch, inversion 1
// per factor, no reduction (one replica), precondition 0.25.
// An inversion waits for both factors (the damping π reads both traces).
// Device 0, step 0: gap [2,4): curv_A of mb 0 (ready at 1) and mb 1 (ready at
// 2) fill [2,3); inv_A waits for G. Gap [6,7): only curv_G of mb 0 is ready
// (B0 ended at 6); mb 1's ends at 9. Step 1 (every curvature ready): curv_G of
// mb 1 at [2,2.5), inv_A [2.5,3.5); inv_G, 1 long, next fits the gap [6,7).
// K = 2.
// Device 1, step 0: gap [0,1) has nothing ready; gap [7,9) takes all four
// curvature pieces in priority order (A before G), leaving no room for an
// inversion. Step 1: inv_A in [0,1), inv_G in [7,8). K = 2.
TEST(PipeFisher, OneFOneBTwoStagesByHand) {
  Schedule s = handSchedule();
  PipeFisherInput in = handInput();
  PipeFisherResult r = pack(s, handTimes(), in);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(describe(in, r.devices[0]),
            "curv_A:0@0[2,2.5) curv_A:1@0[2.5,3) curv_G:0@0[6,6.5) "
            "curv_G:1@1[2,2.5) inv_A:s0@1[2.5,3.5) inv_G:s0@1[6,7)");
  EXPECT_EQ(describe(in, r.devices[1]),
            "curv_A:0@0[7,7.5) curv_A:1@0[7.5,8) curv_G:0@0[8,8.5) "
            "curv_G:1@0[8.5,9) inv_A:s1@1[0,1) inv_G:s1@1[7,8)");
  EXPECT_EQ(r.refreshSteps, 2);
  EXPECT_TRUE(r.unfitted.empty());
  // Step = makespan 9 + precondition 0.25 (nothing forced).
  EXPECT_DOUBLE_EQ(r.stepTime, 9.25);
  // Before: busy 6 of 9. After, per refresh of K = 2 steps of 9.25: 2 x 6
  // F/B + 4 x 0.5 curvature + 2 x 1 inversion + 2 x 0.25 precondition = 16.5.
  for (const DeviceFill &d : r.devices) {
    EXPECT_NEAR(d.utilisationBefore, 6.0 / 9, 1e-12);
    EXPECT_NEAR(d.utilisationAfter, 16.5 / 18.5, 1e-12);
    EXPECT_DOUBLE_EQ(d.kfacWork, 4.0);
    // Factors, inverses in use and pending inverses.
    EXPECT_DOUBLE_EQ(d.factorBytes, 3 * (4 + 8));
  }
  EXPECT_NEAR(r.utilisationAfter, 16.5 / 18.5, 1e-12);
  // Device 0 holds a of mb 0 from 1 and of mb 1 from 2 until 2.5 / 3: 200
  // bytes at t = 2; the g tensors (10 each) come after those are freed.
  EXPECT_DOUBLE_EQ(r.devices[0].peakSavedBytes, 200);
  // Device 1: at t = 5 it holds a0, a1 (F ended at 2, 5) and g0 (4); all
  // four until 7, when g1 joins: 100 + 100 + 10 + 10.
  EXPECT_DOUBLE_EQ(r.devices[1].peakSavedBytes, 220);
  // Preconditioning closes every step of the refresh.
  EXPECT_NE(describe(in, r.devices[0], true).find("precond:s0@1[9,9.25)"),
            std::string::npos);
}

// Dependency order holds for every placed item: an inversion starts after
// its factor's reduction ends, a reduction after all of its curvature, and
// curvature of micro-batch j in step 0 after its forward / backward.
TEST(PipeFisher, DependenciesHoldOnEverySchedule) {
  for (ScheduleKind kind : kEverySchedule) {
    Schedule s = everyScheduleCase(kind);
    PipeFisherInput in = layerPerStage(s, kind);
    StageTimes times = StageTimes::uniform(kStages, 1, 2, 1);
    OrError<SimulationResult> sim = simulate(s, times);
    ASSERT_TRUE(bool(sim));
    PipeFisherResult r = *packKfac(s, *sim, in);
    const double period = 1e6; // larger than any step here
    for (const DeviceFill &fill : r.devices) {
      auto at = [&](const PlacedItem &p) { return p.step * period + p.start; };
      auto endAt = [&](const PlacedItem &p) { return p.step * period + p.end; };
      for (const PlacedItem &item : fill.items) {
        for (const PlacedItem &other : fill.items) {
          if (other.layer != item.layer)
            continue;
          const int f = (static_cast<int>(item.kind) % 2);
          const int g = (static_cast<int>(other.kind) % 2);
          const bool curvature = other.kind == KfacItemKind::CurvatureA ||
                                 other.kind == KfacItemKind::CurvatureG;
          if (f != g || item.kind == KfacItemKind::Precondition)
            continue;
          if ((item.kind == KfacItemKind::ReduceA ||
               item.kind == KfacItemKind::ReduceG) &&
              curvature) {
            EXPECT_LE(endAt(other), at(item) + 1e-9) << scheduleName(kind);
          }
          if ((item.kind == KfacItemKind::InvertA ||
               item.kind == KfacItemKind::InvertG) &&
              (other.kind == KfacItemKind::ReduceA ||
               other.kind == KfacItemKind::ReduceG)) {
            EXPECT_LE(endAt(other), at(item) + 1e-9) << scheduleName(kind);
          }
        }
        if (item.step != 0 || item.kind != KfacItemKind::CurvatureA)
          continue;
        for (const ExecutedInstruction &x : sim->timeline) {
          if (x.op.kind == OpKind::Forward &&
              x.op.microbatch == item.microbatch &&
              x.op.stage == in.layers[item.layer].stage &&
              x.op.direction == in.layers[item.layer].direction) {
            EXPECT_LE(x.end, item.start + 1e-9) << scheduleName(kind);
          }
        }
      }
      // Placed items never overlap one another or a pipeline instruction:
      // each bubble item lies inside one idle interval of its device.
      const size_t dev = &fill - r.devices.data();
      for (const PlacedItem &item : fill.items) {
        if (item.forced || item.kind == KfacItemKind::Precondition)
          continue;
        bool inside = false;
        for (const Interval &gap : sim->devices[dev].idleIntervals)
          inside |=
              gap.start <= item.start + 1e-9 && item.end <= gap.end + 1e-9;
        EXPECT_TRUE(inside) << scheduleName(kind) << " device " << dev;
      }
      for (size_t i = 1; i < fill.items.size(); ++i) {
        if (fill.items[i].step == fill.items[i - 1].step) {
          EXPECT_LE(fill.items[i - 1].end, fill.items[i].start + 1e-9);
        }
      }
    }
    // Every curvature piece was placed: 2 factors x the layer's micro-batches.
    size_t curvature = 0;
    for (const DeviceFill &fill : r.devices)
      for (const PlacedItem &item : fill.items)
        curvature += item.kind == KfacItemKind::CurvatureA ||
                     item.kind == KfacItemKind::CurvatureG;
    const size_t perLayer =
        kind == ScheduleKind::Chimera ? kMicroBatches / 2 : kMicroBatches;
    EXPECT_EQ(curvature, 2 * perLayer * in.layers.size()) << scheduleName(kind);
  }
}

// The same 1F1B case with inversions of 5, longer than any bubble (2 at
// most). Device 0: step 0 as before but inv_A does not fit [3,4); step 1
// places curv_G of mb 1 and inv_G (1 fits); step 2 would place nothing (inv_A
// fits no gap), so inv_A is forced after the makespan of step 1: [9,14).
// Device 1: step 0 all curvature in [7,9); step 1 inv_G in [0,1) (inv_A, first
// in priority, does not fit); inv_A forced at [9,14) of step 1. K = 2, the
// forced tail 5 is paid once per refresh: step = 9 + 0.25 + 5 / 2.
TEST(PipeFisher, SpillsToLaterStepsThenForcesWhatNeverFits) {
  Schedule s = handSchedule();
  PipeFisherInput in = noMargin();
  in.layers = {layer("s0", 0, 0.5, 5), layer("s1", 1, 0.5, 5)};
  in.layers[0].invert[1] = in.layers[1].invert[1] = 1;
  PipeFisherResult r = pack(s, handTimes(), in);
  EXPECT_EQ(describe(in, r.devices[0]),
            "curv_A:0@0[2,2.5) curv_A:1@0[2.5,3) curv_G:0@0[6,6.5) "
            "curv_G:1@1[2,2.5) inv_G:s0@1[2.5,3.5) inv_A:s0@1[9,14)*");
  EXPECT_EQ(describe(in, r.devices[1]),
            "curv_A:0@0[7,7.5) curv_A:1@0[7.5,8) curv_G:0@0[8,8.5) "
            "curv_G:1@0[8.5,9) inv_G:s1@1[0,1) inv_A:s1@1[9,14)*");
  EXPECT_EQ(r.refreshSteps, 2);
  EXPECT_DOUBLE_EQ(r.devices[0].forced, 5);
  EXPECT_DOUBLE_EQ(r.stepTime, 9 + 0.25 + 5.0 / 2);
  ASSERT_EQ(r.unfitted.size(), 2u);
  EXPECT_EQ(r.unfitted[0], "stage 0: inv_A s0");
  // Precondition of the refresh's last step runs after the forced tail.
  EXPECT_NE(describe(in, r.devices[0], true).find("precond:s0@1[14,14.25)"),
            std::string::npos);
}

// The hand case above with K pinned to 1 (`--kfac-refresh 1`): step 0 places
// what it placed there; what it left for step 1 (device 0: curv_G of mb 1,
// both inversions, 2.5; device 1: both inversions, 2) is forced after its
// makespan 9, in priority order, and K stays 1 although the bubbles would
// spread it over 2.
TEST(PipeFisher, PinnedRefreshForcesWhatItsStepsDoNotHold) {
  Schedule s = handSchedule();
  PipeFisherInput in = handInput();
  in.refreshSteps = 1;
  PipeFisherResult r = pack(s, handTimes(), in);
  EXPECT_EQ(r.refreshSteps, 1);
  EXPECT_EQ(describe(in, r.devices[0]),
            "curv_A:0@0[2,2.5) curv_A:1@0[2.5,3) curv_G:0@0[6,6.5) "
            "curv_G:1@0[9,9.5)* inv_A:s0@0[9.5,10.5)* inv_G:s0@0[10.5,11.5)*");
  EXPECT_EQ(describe(in, r.devices[1]),
            "curv_A:0@0[7,7.5) curv_A:1@0[7.5,8) curv_G:0@0[8,8.5) "
            "curv_G:1@0[8.5,9) inv_A:s1@0[9,10)* inv_G:s1@0[10,11)*");
  // makespan + precondition + the largest forced tail (device 0's 2.5) / K.
  EXPECT_DOUBLE_EQ(r.stepTime, 9 + 0.25 + 2.5);
  // A pin beyond maxSteps, or negative, is refused.
  in.refreshSteps = -1;
  OrError<SimulationResult> sim = simulate(s, handTimes());
  EXPECT_FALSE(bool(packKfac(s, *sim, in)));
}

// One stage: no bubble at all, so the whole refresh is forced (K = 1): the
// curvature where its operand is made (F0 ends at 1, B0 at 3, F1 at 4, B1 at
// 6; recorded there, priced in the tail), then the inversions at the step's
// end in priority order. p = 1, m = 2, f = 1, b = 2: makespan 6; tail
// 4 x 0.5 + 2 x 1 = 4.
TEST(PipeFisher, NothingFitsGoesToTheStepEnd) {
  Schedule s = makeSchedule(config(ScheduleKind::OneFOneB, 1, 2));
  PipeFisherInput in;
  in.layers = {layer("x", 0, 0.5, 1)};
  PipeFisherResult r = pack(s, StageTimes::uniform(1, 1, 2), in);
  EXPECT_EQ(r.refreshSteps, 1);
  EXPECT_EQ(describe(in, r.devices[0]),
            "curv_A:0@0[1,1.5)* curv_G:0@0[3,3.5)* curv_A:1@0[4,4.5)* "
            "curv_G:1@0[6,6.5)* inv_A:x@0[8,9)* inv_G:x@0[9,10)*");
  EXPECT_DOUBLE_EQ(r.stepTime, 6 + 0.25 + 4);
  EXPECT_EQ(r.unfitted.size(), 6u);
  EXPECT_DOUBLE_EQ(r.devices[0].utilisationBefore, 1.0);
  EXPECT_DOUBLE_EQ(r.devices[0].utilisationAfter, 1.0); // all work, no idle
}

// The margin: with pipe-fisher's 5 %, a 1-long inversion no longer fits a
// 1-long gap, so device 0's inv_A moves from [3,4) of step 0 to step 1.
TEST(PipeFisher, MarginKeepsExactFitsOut) {
  Schedule s = handSchedule();
  PipeFisherInput in;
  in.margin = 0.05;
  in.layers = {layer("s0", 0, 0.5, 1)};
  PipeFisherResult r = pack(s, handTimes(), in);
  EXPECT_EQ(describe(in, r.devices[0]).find("inv_A:s0@0"), std::string::npos);
  EXPECT_NE(describe(in, r.devices[0]).find("inv_A:s0@1[2.5,3.5)"),
            std::string::npos);
}

// Chimera, p = 2, m = 2, f = b = 1 (worker rule of docs/pipeline-simulator.md):
//   device 0: F0 [0,1) f1 [1,2) b1 [2,3) B0 [3,4)
//   device 1: f1 [0,1) F0 [1,2) B0 [2,3) b1 [3,4)
// (lower case: the up pipeline, micro-batch 1). No bubble, so everything is
// forced: the curvature where its operand is made, the rest at the step end. Stage 0's down copy is on device 0 and sees micro-batch 0
// only; its up copy is on device 1 and sees micro-batch 1 only; both reduce
// their factors with each other (the mirrored pipeline): 0.5 each, after the
// curvature and before the inversion. Tail per device for its two layers
// (stage 0 and 1 copies): 2 x (2 x 0.25 + 2 x 0.5 + 2 x 1) = 7.
TEST(PipeFisher, ChimeraCopiesSeeTheirOwnMicroBatchesAndReduce) {
  Schedule s = makeSchedule(config(ScheduleKind::Chimera, 2, 2));
  PipeFisherInput in = noMargin();
  in.layers = {layer("d0", 0, 0.25, 1, 0.5, 0), layer("d1", 1, 0.25, 1, 0.5, 0),
               layer("u0", 0, 0.25, 1, 0.5, 0, Direction::Up),
               layer("u1", 1, 0.25, 1, 0.5, 0, Direction::Up)};
  PipeFisherResult r = pack(s, StageTimes::uniform(2, 1, 1), in);
  EXPECT_EQ(describe(in, r.devices[0]),
            "curv_A:0@0[1,1.25)* curv_A:1@0[2,2.25)* curv_G:1@0[3,3.25)* "
            "curv_G:0@0[4,4.25)* reduce_A:d0@0[5,5.5)* reduce_A:u1@0[5.5,6)* "
            "reduce_G:d0@0[6,6.5)* reduce_G:u1@0[6.5,7)* inv_A:d0@0[7,8)* "
            "inv_A:u1@0[8,9)* inv_G:d0@0[9,10)* inv_G:u1@0[10,11)*");
  // Device 0 holds d0 (down, micro-batch 0) and u1 (up, micro-batch 1).
  for (const PlacedItem &p : r.devices[0].items) {
    if (p.microbatch >= 0) {
      EXPECT_EQ(p.microbatch, in.layers[p.layer].name == "d0" ? 0 : 1);
    }
  }
  EXPECT_EQ(r.refreshSteps, 1);
  EXPECT_DOUBLE_EQ(r.devices[1].forced, 7);
  EXPECT_DOUBLE_EQ(r.stepTime, 4 + 7);
}

// Chimera p = 4, m = 4, f = 1, b = 2: busy 12 and idle 4 per device
// (pipelines.md §3.2 table: makespan 16). Each device holds two layers (a
// stage's down copy and another stage's up copy), each seeing m/2 = 2
// micro-batches: 2 x (2 factors x 2 x 0.5 + 2 x 1) = 8 of K-FAC work per
// device, more than the 4 of idle in one step, so K >= 2; every item is at
// most 1 long and fits some gap, so nothing is forced.
TEST(PipeFisher, ChimeraSpreadsARefreshOverSteps) {
  Schedule s = makeSchedule(config(ScheduleKind::Chimera, 4, 4));
  PipeFisherInput in = noMargin();
  for (int st = 0; st < 4; ++st) {
    in.layers.push_back(layer("d" + std::to_string(st), st, 0.5, 1, 0, 0));
    in.layers.push_back(
        layer("u" + std::to_string(st), st, 0.5, 1, 0, 0, Direction::Up));
  }
  OrError<SimulationResult> sim = simulate(s, StageTimes::uniform(4, 1, 2));
  ASSERT_TRUE(bool(sim));
  EXPECT_DOUBLE_EQ(sim->makespan, 16);
  PipeFisherResult r = *packKfac(s, *sim, in);
  EXPECT_GE(r.refreshSteps, 2);
  EXPECT_TRUE(r.unfitted.empty());
  for (const DeviceFill &d : r.devices) {
    EXPECT_DOUBLE_EQ(d.kfacWork, 8);
    EXPECT_DOUBLE_EQ(d.utilisationBefore, 12.0 / 16);
    // Filled, over the device's own K_d: (K_d x 12 + 8) / (K_d x 16) > 12/16.
    EXPECT_NEAR(d.utilisationAfter,
                (d.refreshSteps * 12 + 8.0) / (d.refreshSteps * 16.0), 1e-12);
  }
}

/// Chimera p = 4: both copies of stage st's layer named "L<st>" (down on
/// device st, up on device 3 - st, so they reduce together), and two more
/// layers, X0 and X1, on stage 0 down (device 0 alone). Curvature 0.5,
/// inversion 1, no reduction or preconditioning.
std::vector<KfacLayerWork> mirroredChimeraLayers() {
  std::vector<KfacLayerWork> layers;
  for (int st = 0; st < 4; ++st) {
    layers.push_back(layer("L" + std::to_string(st), st, 0.5, 1, 0, 0));
    layers.push_back(
        layer("L" + std::to_string(st), st, 0.5, 1, 0, 0, Direction::Up));
  }
  layers.push_back(layer("X0", 0, 0.5, 1, 0, 0));
  layers.push_back(layer("X1", 0, 0.5, 1, 0, 0));
  return layers;
}

// The same Chimera case with the two copies of a stage named alike, as the
// planner names them ("L<stage>" down on device st, up on device 3 - st):
// they reduce together, so each pair of mirrored devices shares the larger of
// its two spans, and the result's K is the largest of all. Two more layers
// held by device 0 alone (down copies only) lengthen its span (4 steps) past
// device 3's (3), which then takes device 0's K; devices 1 and 2 keep 3.
TEST(PipeFisher, ChimeraMirroredDevicesShareTheirK) {
  Schedule s = makeSchedule(config(ScheduleKind::Chimera, 4, 4));
  PipeFisherInput in = noMargin();
  in.layers = mirroredChimeraLayers();
  OrError<SimulationResult> sim = simulate(s, StageTimes::uniform(4, 1, 2));
  ASSERT_TRUE(bool(sim));
  PipeFisherResult r = *packKfac(s, *sim, in);
  ASSERT_EQ(r.devices.size(), 4u);
  int largest = 0;
  for (int d = 0; d < 4; ++d) {
    const DeviceFill &f = r.devices[d], &mirror = r.devices[3 - d];
    EXPECT_EQ(f.refreshSteps, std::max(f.steps, mirror.steps)) << d;
    EXPECT_GE(f.refreshSteps, f.steps);
    largest = std::max(largest, f.refreshSteps);
    // Preconditioning closes each of the device's own K_d steps, no more.
    int preconditioned = 0;
    for (const PlacedItem &p : f.items)
      if (p.kind == KfacItemKind::Precondition)
        preconditioned = std::max(preconditioned, p.step + 1);
    EXPECT_LE(preconditioned, f.refreshSteps);
  }
  EXPECT_EQ(r.refreshSteps, largest);
  EXPECT_LT(r.devices[3].steps, r.devices[0].steps);
  EXPECT_EQ(r.devices[3].refreshSteps, r.devices[0].steps);
  // The middle pair keeps its own, shorter K.
  EXPECT_LT(r.devices[1].refreshSteps, r.refreshSteps);
  // Pinned alike they pack; pinned differently they are refused.
  in.deviceRefreshSteps = {2, 3, 3, 2};
  OrError<PipeFisherResult> pinned = packKfac(s, *sim, in);
  ASSERT_TRUE(bool(pinned)) << pinned.error();
  EXPECT_EQ(pinned->devices[0].refreshSteps, 2);
  EXPECT_EQ(pinned->devices[1].refreshSteps, 3);
  EXPECT_EQ(pinned->refreshSteps, 3);
  in.deviceRefreshSteps = {2, 3, 2, 2};
  EXPECT_EQ(packError(s, *sim, in),
            "k-fac layer 'L1' is on devices 1 and 2, pinned to different "
            "refresh intervals (3 and 2): copies of a layer share one K");
}

// Per-device K, worked by hand on OneFOneBTwoStagesByHand's timeline
// (device 0 idle [2,4) [6,7), device 1 idle [0,1) [7,9), makespan 9).
// Device 0's layer s0 has no G curvature (its G would be ready only at 9,
// after the last bubble) and curvature A 0.25, inversions 0.5 (inv_G has no
// dependency): step 0's gap [2,4) takes curv_A mb 0 [2,2.25) (ready at 1),
// mb 1 [2.25,2.5) (ready at 2), inv_A [2.5,3), inv_G [3,3.5): K_0 = 1.
// Device 1's layer s1 is the hand case's: K_1 = 2. So device 0 refreshes every
// step instead of idling through device 1's second one.
//   step = 9 + 0.25 (nothing forced);
//   device 0: (1 x 6 + 1.5 + 1 x 0.25) / (1 x 9.25) = 7.75 / 9.25;
//   device 1: (2 x 6 + 4 + 2 x 0.25) / (2 x 9.25) = 16.5 / 18.5;
//   overall: (7.75 / 1 + 16.5 / 2) / (2 x 9.25) = 16 / 18.5
// (one K = 2 for both would give device 0 14 / 18.5).
TEST(PipeFisher, EachDeviceRefreshesOnItsOwnK) {
  Schedule s = handSchedule();
  PipeFisherInput in = noMargin();
  in.layers = {layer("s0", 0, 0.25, 0.5), layer("s1", 1, 0.5, 1)};
  in.layers[0].curvature[1] = 0;
  PipeFisherResult r = pack(s, handTimes(), in);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(describe(in, r.devices[0]), "curv_A:0@0[2,2.25) "
                                        "curv_A:1@0[2.25,2.5) "
                                        "inv_A:s0@0[2.5,3) inv_G:s0@0[3,3.5)");
  EXPECT_EQ(r.devices[0].steps, 1);
  EXPECT_EQ(r.devices[1].steps, 2);
  expectRefreshSteps(r, {1, 2}, 2);
  EXPECT_DOUBLE_EQ(r.stepTime, 9.25);
  EXPECT_NEAR(r.devices[0].utilisationAfter, 7.75 / 9.25, 1e-12);
  EXPECT_NEAR(r.devices[1].utilisationAfter, 16.5 / 18.5, 1e-12);
  EXPECT_NEAR(r.utilisationAfter, 16 / 18.5, 1e-12);
  // Device 0's preconditioning closes its one step only.
  EXPECT_EQ(describe(in, r.devices[0], true).find("precond:s0@1"),
            std::string::npos);
  EXPECT_NE(describe(in, r.devices[0], true).find("precond:s0@0[9,9.25)"),
            std::string::npos);
}

// `--kfac-refresh 1,2` on the hand case (s0, s1: curvature 0.5, inversion 1):
// device 0 pinned to 1 forces what its step 1 held (curv_G mb 1, both
// inversions: 2.5, as in PinnedRefreshForcesWhatItsStepsDoNotHold); device 1
// keeps its 2 steps, nothing forced. The tail is paid every K_0 = 1 steps:
//   step = 9 + 0.25 + max(2.5 / 1, 0 / 2) = 11.75 (one K = 2: 10);
//   device 0: (6 + 4 + 0.25) / 11.75; device 1: (12 + 4 + 0.5) / (2 x 11.75).
TEST(PipeFisher, PerDevicePinForcesEachDeviceOnItsOwnK) {
  Schedule s = handSchedule();
  PipeFisherInput in = handInput();
  in.deviceRefreshSteps = {1, 2};
  in.refreshSteps = 5; // overridden by the per-device pin
  PipeFisherResult r = pack(s, handTimes(), in);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(describe(in, r.devices[0]),
            "curv_A:0@0[2,2.5) curv_A:1@0[2.5,3) curv_G:0@0[6,6.5) "
            "curv_G:1@0[9,9.5)* inv_A:s0@0[9.5,10.5)* inv_G:s0@0[10.5,11.5)*");
  expectRefreshSteps(r, {1, 2}, 2);
  EXPECT_DOUBLE_EQ(r.devices[0].forced, 2.5);
  EXPECT_DOUBLE_EQ(r.devices[1].forced, 0);
  EXPECT_DOUBLE_EQ(r.stepTime, 11.75);
  EXPECT_NEAR(r.devices[0].utilisationAfter, 10.25 / 11.75, 1e-12);
  EXPECT_NEAR(r.devices[1].utilisationAfter, 16.5 / 23.5, 1e-12);
  // A pin longer than the span (device 1 pinned to 3 needs 2) keeps K_d 3.
  in.deviceRefreshSteps = {1, 3};
  r = pack(s, handTimes(), in);
  EXPECT_EQ(r.devices[1].steps, 2);
  EXPECT_EQ(r.devices[1].refreshSteps, 3);
  EXPECT_EQ(r.refreshSteps, 3);
}

TEST(PipeFisher, RejectsABadPerDevicePin) {
  Schedule s = handSchedule();
  OrError<SimulationResult> sim = simulate(s, handTimes());
  ASSERT_TRUE(bool(sim));
  PipeFisherInput in;
  in.layers = {layer("s0", 0, 0.5, 1), layer("s1", 1, 0.5, 1)};
  in.deviceRefreshSteps = {2};
  EXPECT_EQ(packError(s, *sim, in),
            "pinned refresh intervals: expected one per pipeline "
            "device (2), got 1");
  in.deviceRefreshSteps = {2, 0};
  EXPECT_EQ(packError(s, *sim, in),
            "a pinned refresh interval must be 1..4096 steps, got 0 for "
            "device 1");
}

TEST(PipeFisher, RejectsBadInput) {
  Schedule s = handSchedule();
  OrError<SimulationResult> sim = simulate(s, handTimes());
  PipeFisherInput in;
  in.layers = {layer("x", 0, -1, 1)};
  EXPECT_FALSE(bool(packKfac(s, *sim, in)));
  in.layers = {layer("x", 2, 1, 1)};
  EXPECT_EQ(packError(s, *sim, in),
            "k-fac layer 'x' is on stage 2, which the schedule "
            "does not run");
  in.layers = {layer("x", 0, 1, 1, 0, 0, Direction::Up)};
  EXPECT_FALSE(bool(packKfac(s, *sim, in)));
  // OneFOneBTwoStagesByHand needs K = 2: a one-step limit refuses it, a
  // two-step limit takes it.
  in.margin = 0;
  in.layers = {layer("s0", 0, 0.5, 1), layer("s1", 1, 0.5, 1)};
  in.maxSteps = 1;
  EXPECT_EQ(packError(s, *sim, in),
            "the k-fac refresh on stage 0 needs more than 1 steps");
  in.maxSteps = 2;
  EXPECT_TRUE(bool(packKfac(s, *sim, in)));
}

// ---- Fluid packing (KfacFilling::Fluid): the CPU programs' filling thread.

/// "1[2.5,4) 1[6,7)": the pieces of the item `kind` of layer `name`.
std::string piecesOf(const PipeFisherInput &in, const DeviceFill &fill,
                     KfacItemKind kind, const std::string &name) {
  std::string text;
  for (const PlacedItem &p : fill.items) {
    if (p.kind != kind || in.layers[p.layer].name != name)
      continue;
    for (const ItemPiece &piece : p.pieces) {
      char span[64];
      std::snprintf(span, sizeof span, "%d[%g,%g)", piece.step, piece.start,
                    piece.end);
      text += (text.empty() ? "" : " ") + std::string(span);
    }
  }
  return text;
}

// OneFOneBTwoStagesByHand's timeline (device 0 idle [2,4) [6,7), makespan
// 9; its last instruction B1 ends at 9), one layer on stage 0 with
// inversions of 2.5, longer than any gap. Queue: curv_A mb 0 (ready 1), mb 1
// (2), curv_G mb 0 (6), mb 1 (9), then, queued at 9, inv_A, inv_G.
// Step 0: [2,4) runs both curv_A to 3, then idles: the head curv_G mb 0
// waits for B0 (6); [6,7) runs it to 6.5 and idles (mb 1's G is ready at 9).
// Step 1: curv_G mb 1 [2,2.5); inv_A [2.5,4) and [6,7) (1.5 + 1). Step 2:
// inv_G [2,4) and [6,6.5). K = 3, nothing forced:
//   step = 9 + 0.25; utilisation (3 x 6 + 7 + 3 x 0.25) / (3 x 9.25).
// Whole items (PipeFisher): no gap holds 2.5, so step 2 places nothing and
// both inversions are forced after step 1 (K = 2, step 9 + 0.25 + 5 / 2).
TEST(PipeFisherFluid, SplitsAnItemTooBigForAnyGapWhereItemsForceIt) {
  Schedule s = handSchedule();
  PipeFisherInput in = noMargin();
  in.layers = {layer("s0", 0, 0.5, 2.5)};
  in.filling = KfacFilling::Fluid;
  PipeFisherResult r = pack(s, handTimes(), in);
  EXPECT_EQ(r.filling, KfacFilling::Fluid);
  EXPECT_EQ(describe(in, r.devices[0]),
            "curv_A:0@0[2,2.5) curv_A:1@0[2.5,3) curv_G:0@0[6,6.5) "
            "curv_G:1@1[2,2.5) inv_A:s0@1[2.5,7) inv_G:s0@2[2,6.5)");
  EXPECT_EQ(piecesOf(in, r.devices[0], KfacItemKind::InvertA, "s0"),
            "1[2.5,4) 1[6,7)");
  EXPECT_EQ(piecesOf(in, r.devices[0], KfacItemKind::InvertG, "s0"),
            "2[2,4) 2[6,6.5)");
  EXPECT_EQ(r.devices[0].steps, 3);
  EXPECT_EQ(r.refreshSteps, 3);
  EXPECT_TRUE(r.unfitted.empty());
  EXPECT_DOUBLE_EQ(r.devices[0].forced, 0);
  EXPECT_DOUBLE_EQ(r.stepTime, 9.25);
  EXPECT_NEAR(r.devices[0].utilisationAfter, (18 + 7 + 0.75) / 27.75, 1e-12);
  // Unpinned, a queue longer than maxSteps is refused as in Items.
  in.maxSteps = 2;
  OrError<SimulationResult> sim = simulate(s, handTimes());
  EXPECT_EQ(packError(s, *sim, in),
            "the k-fac refresh on stage 0 needs more than 2 steps");
  in.maxSteps = 4096;

  in.filling = KfacFilling::Items;
  PipeFisherResult items = pack(s, handTimes(), in);
  EXPECT_EQ(items.refreshSteps, 2);
  EXPECT_DOUBLE_EQ(items.devices[0].forced, 5);
  EXPECT_DOUBLE_EQ(items.stepTime, 9 + 0.25 + 5.0 / 2);
  EXPECT_EQ(items.unfitted.size(), 2u);
}

// Strict FIFO, on the case above with inv_G 0.5: the thread does not pass
// its head. In step 0 the gap [2,4) idles from 3 while the head (curv_G mb
// 0) waits for its input, and in step 1 inv_G waits behind inv_A, which runs
// [2.5,4) and [6,7): inv_G takes [2,2.5) of step 2 (K = 3). Whole items put
// inv_G first, into [2.5,3) of step 1, and force inv_A (K = 2).
TEST(PipeFisherFluid, TheHeadOfTheQueueBlocksTheItemsBehindIt) {
  Schedule s = handSchedule();
  PipeFisherInput in = noMargin();
  in.layers = {layer("s0", 0, 0.5, 2.5)};
  in.layers[0].invert[1] = 0.5;
  in.filling = KfacFilling::Fluid;
  PipeFisherResult r = pack(s, handTimes(), in);
  EXPECT_EQ(describe(in, r.devices[0]),
            "curv_A:0@0[2,2.5) curv_A:1@0[2.5,3) curv_G:0@0[6,6.5) "
            "curv_G:1@1[2,2.5) inv_A:s0@1[2.5,7) inv_G:s0@2[2,2.5)");
  EXPECT_EQ(r.refreshSteps, 3);
  EXPECT_TRUE(r.unfitted.empty());
  in.filling = KfacFilling::Items;
  PipeFisherResult items = pack(s, handTimes(), in);
  EXPECT_EQ(describe(in, items.devices[0]),
            "curv_A:0@0[2,2.5) curv_A:1@0[2.5,3) curv_G:0@0[6,6.5) "
            "curv_G:1@1[2,2.5) inv_G:s0@1[2.5,3) inv_A:s0@1[9,11.5)*");
}

// Pinned K = 2 with margin 1 (every item takes twice its time in gaps):
// curvature 0.25 -> 0.5, inversions 1.5 -> 3. Steps 0 and 1 run as in the
// first fluid case; inv_A gets [2.5,4) and [6,7) of step 1, 2.5 of its 3, and
// then step 1's gaps are spent. Its remainder, 0.5 of gap time = 0.25 of
// work (no margin outside a gap), and all of inv_G (1.5) are forced after
// the makespan of step 1 = K - 1: forced 1.75; step 9 + 0.25 + 1.75 / 2.
TEST(PipeFisherFluid, PinnedKForcesTheRemainderAtItsLastStep) {
  Schedule s = handSchedule();
  PipeFisherInput in;
  in.margin = 1;
  in.refreshSteps = 2;
  in.layers = {layer("s0", 0, 0.25, 1.5)};
  in.filling = KfacFilling::Fluid;
  PipeFisherResult r = pack(s, handTimes(), in);
  EXPECT_EQ(describe(in, r.devices[0]),
            "curv_A:0@0[2,2.5) curv_A:1@0[2.5,3) curv_G:0@0[6,6.5) "
            "curv_G:1@1[2,2.5) inv_A:s0@1[9,9.25)* inv_G:s0@1[9.25,10.75)*");
  EXPECT_EQ(piecesOf(in, r.devices[0], KfacItemKind::InvertA, "s0"),
            "1[2.5,4) 1[6,7) 1[9,9.25)");
  EXPECT_EQ(r.devices[0].steps, 2);
  EXPECT_EQ(r.devices[0].refreshSteps, 2);
  EXPECT_DOUBLE_EQ(r.devices[0].forced, 1.75);
  EXPECT_DOUBLE_EQ(r.stepTime, 9 + 0.25 + 1.75 / 2);
  ASSERT_EQ(r.unfitted.size(), 2u);
  EXPECT_EQ(r.unfitted[0], "stage 0: inv_A s0");
  // The precondition of step 1 follows the forced tail.
  EXPECT_NE(describe(in, r.devices[0], true).find("precond:s0@1[10.75,11)"),
            std::string::npos);
  // Pinned to 1: everything after step 0's curvature is forced at its end.
  in.refreshSteps = 1;
  PipeFisherResult one = pack(s, handTimes(), in);
  EXPECT_EQ(describe(in, one.devices[0]),
            "curv_A:0@0[2,2.5) curv_A:1@0[2.5,3) curv_G:0@0[6,6.5) "
            "curv_G:1@0[9,9.25)* inv_A:s0@0[9.25,10.75)* "
            "inv_G:s0@0[10.75,12.25)*");
}

// Items that are collectives (Chimera's mirrored copies reduce over both
// devices; a reduction over dp replicas) run whole on the rank's own thread,
// not on the filling thread: a fluid request packs them as whole items, the
// same packing as Items, and says so.
TEST(PipeFisherFluid, CollectiveItemsFallBackToWholeItems) {
  Schedule s = makeSchedule(config(ScheduleKind::Chimera, 4, 4));
  PipeFisherInput in = noMargin();
  in.layers = mirroredChimeraLayers();
  PipeFisherResult items = pack(s, StageTimes::uniform(4, 1, 2), in);
  in.filling = KfacFilling::Fluid;
  PipeFisherResult fluid = pack(s, StageTimes::uniform(4, 1, 2), in);
  EXPECT_EQ(items.filling, KfacFilling::Items);
  EXPECT_EQ(fluid.filling, KfacFilling::Items);
  EXPECT_EQ(fluid.refreshSteps, items.refreshSteps);
  for (size_t d = 0; d < fluid.devices.size(); ++d) {
    EXPECT_EQ(fluid.devices[d].refreshSteps, items.devices[d].refreshSteps);
    EXPECT_EQ(fluid.devices[d].items.size(), items.devices[d].items.size());
  }
  // One pipeline with a reduction (dp replicas) falls back too; without it
  // the packing is fluid.
  Schedule one = makeSchedule(config(ScheduleKind::OneFOneB, 2, 4));
  PipeFisherInput dp;
  dp.filling = KfacFilling::Fluid;
  dp.layers = {layer("a", 0, 0.5, 2, 0.25), layer("b", 1, 0.5, 2)};
  EXPECT_EQ(pack(one, handTimes(), dp).filling, KfacFilling::Items);
  dp.layers[0].reduce[0] = dp.layers[0].reduce[1] = 0;
  EXPECT_EQ(pack(one, handTimes(), dp).filling, KfacFilling::Fluid);
}

// On every schedule: each fluid item runs, without margin loss, as pieces
// inside its device's gaps that add up to duration x (1 + margin); items run
// one after another (FIFO: a piece of the next never before the last of the
// one before); curvature A never before its forward; unpinned, nothing is
// forced. Fails if a piece leaves its gap, overlaps another or is lost.
TEST(PipeFisherFluid, PiecesStayInGapsInQueueOrderOnEverySchedule) {
  for (ScheduleKind kind : kEverySchedule) {
    Schedule s = everyScheduleCase(kind);
    PipeFisherInput in = layerPerStage(s, kind);
    in.filling = KfacFilling::Fluid;
    OrError<SimulationResult> sim =
        simulate(s, StageTimes::uniform(kStages, 1, 2, 1));
    ASSERT_TRUE(bool(sim));
    OrError<PipeFisherResult> r = packKfac(s, *sim, in);
    ASSERT_TRUE(bool(r)) << r.error();
    ASSERT_EQ(r->filling, KfacFilling::Fluid) << scheduleName(kind);
    EXPECT_TRUE(r->unfitted.empty()) << scheduleName(kind);
    const double period = 1e6; // larger than any step here
    for (size_t d = 0; d < r->devices.size(); ++d) {
      std::vector<const PlacedItem *> items;
      for (const PlacedItem &item : r->devices[d].items)
        if (item.kind != KfacItemKind::Precondition)
          items.push_back(&item);
      std::sort(items.begin(), items.end(), [&](auto *a, auto *b) {
        return a->pieces.front().step * period + a->pieces.front().start <
               b->pieces.front().step * period + b->pieces.front().start;
      });
      double previousEnd = -1;
      for (const PlacedItem *item : items) {
        const KfacLayerWork &w = in.layers[item->layer];
        const int f = static_cast<int>(item->kind) % 2;
        const double duration =
            item->kind <= KfacItemKind::CurvatureG ? w.curvature[f]
            : item->kind <= KfacItemKind::ReduceG  ? w.reduce[f]
                                                   : w.invert[f];
        double ran = 0;
        for (const ItemPiece &piece : item->pieces) {
          const double at = piece.step * period + piece.start;
          EXPECT_LE(previousEnd, at + 1e-9) << scheduleName(kind);
          previousEnd = piece.step * period + piece.end;
          ran += piece.end - piece.start;
          bool inside = false;
          for (const Interval &gap : sim->devices[d].idleIntervals)
            inside |=
                gap.start <= piece.start + 1e-9 && piece.end <= gap.end + 1e-9;
          EXPECT_TRUE(inside) << scheduleName(kind) << " device " << d;
        }
        EXPECT_NEAR(ran, duration * (1 + in.margin), 1e-9)
            << scheduleName(kind);
        if (item->kind != KfacItemKind::CurvatureA || item->step != 0)
          continue;
        for (const ExecutedInstruction &x : sim->timeline)
          if (x.op.kind == OpKind::Forward && x.device == int(d) &&
              x.op.microbatch == item->microbatch && x.op.stage == w.stage &&
              x.op.direction == w.direction) {
            EXPECT_LE(x.end, item->start + 1e-9) << scheduleName(kind);
          }
      }
    }
  }
}

} // namespace
} // namespace autoddl::pipeline
