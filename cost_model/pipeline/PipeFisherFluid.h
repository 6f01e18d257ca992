//===- PipeFisherFluid.h - K-FAC items of one device, filled fluidly -----===//
//
// Internal to packKfac (PipeFisher.cpp): the item list both packings share
// and the fluid walk (KfacFilling::Fluid) over one device's gaps.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/OrError.h"
#include "cost_model/pipeline/PipeFisher.h"

#include <limits>
#include <string>
#include <vector>

namespace autoddl::pipeline::detail {

/// One schedulable item of one device. `deps` are indices into the device's
/// item list that must have completed; `ready` is when its input exists in
/// the first step (curvature: the end of its forward / backward).
struct KfacItem {
  KfacItemKind kind;
  int layer;
  int microbatch;
  double duration;
  double ready; // step 0 only; later steps have every input
  std::vector<int> deps;
  // Filled by the packer. doneAt is absolute: step * period + end.
  bool placed = false;
  double doneAt = std::numeric_limits<double>::infinity();
};

/// "the k-fac refresh on stage 1 needs more than 4096 steps": both packings'
/// error for a refresh longer than PipeFisherInput::maxSteps.
std::string tooManySteps(int device, int maxSteps);

struct FluidFill {
  std::vector<PlacedItem> placed; // queue order
  int steps = 1;                  // steps whose gaps ran a piece (>= 1)
  double forced = 0;              // the tail appended to step steps - 1
};

/// Runs `items` (priority order, as packKfac builds them) through one
/// device's filling thread: in queue order (the curvature in the order its
/// inputs are ready in step 0, then per layer reduce_A, reduce_G, inv_A,
/// inv_G, queued at `queuedAt`, the device's last instruction's end), the
/// head in the device's `gaps` of step 0, 1, ... once ready, split across
/// gaps, each item taking duration * (1 + margin) of idle time. `pin` > 0:
/// what the gaps of `pin` steps do not run is forced after the makespan of
/// step pin - 1 (a remainder without the margin). Sets each item's doneAt
/// (absolute: step * period + end). Fails when unpinned and the queue needs
/// more than maxSteps steps.
OrError<FluidFill> packFluid(std::vector<KfacItem> &items,
                             const std::vector<Interval> &gaps, double makespan,
                             double period, double queuedAt, double margin,
                             int pin, int maxSteps, int device);

} // namespace autoddl::pipeline::detail
