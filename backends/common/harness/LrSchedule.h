//===- LrSchedule.h - the learning rate of each step ----------------------===//
//
// --warmup, --lr-decay, --decay-steps, --min-lr (Options.h): nanoGPT's
// schedule (karpathy/nanoGPT:train.py get_lr), a function of the global step
// alone, so a resumed run continues it. Both backends' optimizers (AdamW,
// SGD, K-FAC's SGD and LAMB rules) take lr_at(step) each step (ProgramRun.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_LRSCHEDULE_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_LRSCHEDULE_H

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace autoddl::rt::harness {

enum class LrDecay { None, Cosine, Linear };

struct LrSchedule {
  double lr = 1e-3;        // the peak (--lr)
  double min_lr = 0;       // the floor the decay ends at (--min-lr)
  int64_t warmup = 0;      // steps of linear warm-up (--warmup)
  int64_t decay_steps = 0; // the step the decay reaches min_lr at
  LrDecay decay = LrDecay::None;
};

/// The learning rate of step `step` (0-based, global: a resumed run's first
/// step is the checkpoint's). Warm-up: lr (step+1)/warmup for step < warmup,
/// so step warmup-1 is the first at lr (nanoGPT's). Then lr (decay none), or
/// from lr at step `warmup` down to min_lr at step decay_steps (cosine:
/// min + (lr - min) (1 + cos(pi r)) / 2; linear: lr - (lr - min) r, with r
/// the fraction of [warmup, decay_steps] done), min_lr from then on (at once
/// when decay_steps <= warmup). Without warm-up and decay it is lr exactly;
/// lr 0 gives 0 at every step (min_lr <= lr, Options.cpp).
inline double lr_at(const LrSchedule &s, int64_t step) {
  if (step < s.warmup)
    return s.lr * double(step + 1) / double(s.warmup);
  if (s.decay == LrDecay::None)
    return s.lr;
  if (step >= s.decay_steps)
    return s.min_lr;
  // Here warmup <= step < decay_steps.
  const double r = double(step - s.warmup) / double(s.decay_steps - s.warmup);
  const double pi = 3.14159265358979323846;
  const double v =
      s.decay == LrDecay::Linear
          ? s.lr - (s.lr - s.min_lr) * r
          : s.min_lr + (s.lr - s.min_lr) * 0.5 * (1.0 + std::cos(pi * r));
  // Rounding may put v an ulp outside [min_lr, lr] (cosine at r = 0).
  return std::clamp(v, s.min_lr, s.lr);
}

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_LRSCHEDULE_H
