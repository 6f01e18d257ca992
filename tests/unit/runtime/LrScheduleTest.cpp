// lr_at (backends/common/harness/LrSchedule.h): warm-up, cosine and linear
// decay, the floor, past the decay, and a resumed run's steps.
#include "backends/common/harness/LrSchedule.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace autoddl::rt::harness;

namespace {

/// lr 0.6 to min 0.06, 2 steps of warm-up, the decay over steps 2..6.
LrSchedule schedule(LrDecay decay) {
  LrSchedule s;
  s.lr = 0.6;
  s.min_lr = 0.06;
  s.warmup = 2;
  s.decay_steps = 6;
  s.decay = decay;
  return s;
}

} // namespace

// No warm-up and no decay: exactly --lr every step (a run without the flags
// updates as before, bit for bit).
TEST(LrSchedule, ConstantWithoutTheFlags) {
  LrSchedule s;
  s.lr = 3e-4;
  s.min_lr = 3e-5;
  s.decay_steps = 10;
  for (int64_t step : {0, 1, 9, 10, 1000})
    EXPECT_EQ(lr_at(s, step), 3e-4) << step;
}

// nanoGPT's warm-up: lr (step+1) / warmup, so the warm-up's last step is at lr.
TEST(LrSchedule, WarmupIsLinearFromLrOverN) {
  LrSchedule s = schedule(LrDecay::None);
  s.warmup = 4;
  EXPECT_DOUBLE_EQ(lr_at(s, 0), 0.15);
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 0.30);
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 0.6);
  EXPECT_EQ(lr_at(s, 50), 0.6); // no decay: lr after the warm-up
}

// Cosine over r = (step - 2) / 4: min + (lr - min) (1 + cos(pi r)) / 2.
TEST(LrSchedule, CosineFromLrToTheFloor) {
  const LrSchedule s = schedule(LrDecay::Cosine);
  const double half = 0.54 / 2, c = std::cos(M_PI / 4);
  EXPECT_DOUBLE_EQ(lr_at(s, 0), 0.3);
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 0.6);
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 0.6); // r = 0
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 0.06 + half * (1 + c));
  EXPECT_DOUBLE_EQ(lr_at(s, 4), 0.06 + half); // r = 1/2
  EXPECT_DOUBLE_EQ(lr_at(s, 5), 0.06 + half * (1 - c));
  // At and past decay_steps: the floor.
  for (int64_t step : {6, 7, 1000000})
    EXPECT_EQ(lr_at(s, step), 0.06) << step;
}

// Linear: lr - (lr - min) r.
TEST(LrSchedule, LinearFromLrToTheFloor) {
  const LrSchedule s = schedule(LrDecay::Linear);
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 0.6);
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 0.6 - 0.54 / 4);
  EXPECT_DOUBLE_EQ(lr_at(s, 4), 0.6 - 0.54 / 2);
  EXPECT_DOUBLE_EQ(lr_at(s, 5), 0.6 - 0.54 * 3 / 4);
  EXPECT_EQ(lr_at(s, 6), 0.06);
  EXPECT_EQ(lr_at(s, 99), 0.06);
}

// The rate never goes below the floor nor above lr, on any step.
TEST(LrSchedule, StaysBetweenTheFloorAndLr) {
  for (LrDecay d : {LrDecay::Cosine, LrDecay::Linear}) {
    LrSchedule s = schedule(d);
    s.warmup = 0;
    s.decay_steps = 1000;
    for (int64_t step = 0; step < 1100; ++step) {
      EXPECT_GE(lr_at(s, step), 0.06) << step;
      EXPECT_LE(lr_at(s, step), 0.6) << step;
    }
  }
}

// A decay ending before the warm-up does (the default decay_steps, --steps,
// below --warmup): the warm-up runs, then the floor.
TEST(LrSchedule, DecayEndingInTheWarmup) {
  LrSchedule s = schedule(LrDecay::Cosine);
  s.warmup = 4;
  s.decay_steps = 3;
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 0.45);
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 0.6);
  EXPECT_EQ(lr_at(s, 4), 0.06);
}

// --lr 0 (an evaluation run) is 0 at every step, warm-up and decay included
// (--min-lr defaults to 0.1 x 0; above --lr it is refused).
TEST(LrSchedule, ZeroLrStaysZero) {
  for (LrDecay d : {LrDecay::None, LrDecay::Cosine, LrDecay::Linear}) {
    LrSchedule s = schedule(d);
    s.lr = s.min_lr = 0;
    for (int64_t step = 0; step < 10; ++step)
      EXPECT_EQ(lr_at(s, step), 0.0) << step;
  }
}
