//===- PipeFisherFluid.cpp - K-FAC items on a preemptible filling thread -===//
//
// KfacFilling::Fluid (docs/pipefisher.md §3 "Fluid packing"): the CPU
// programs' filling thread runs at SCHED_IDLE whenever the rank's thread
// sleeps in a wait and is preempted the moment it wakes, in strict FIFO
// order (backends/cpu/harness/KfacRun.cpp worker_loop), so an item runs in as
// many gaps as it needs. The walk below is that thread over the simulator's
// gaps, the same every step.
//
//===----------------------------------------------------------------------===//
#include "cost_model/pipeline/PipeFisherFluid.h"

#include <algorithm>
#include <string>

namespace autoddl::pipeline::detail {

namespace {

bool isCurvature(KfacItemKind k) {
  return k == KfacItemKind::CurvatureA || k == KfacItemKind::CurvatureG;
}

/// The runtime's enqueue order: curvature as its forward / backward ends in
/// the refresh step (ties in priority order: A before G, layer, micro-batch,
/// the order `items` has), then, queued after the refresh step's last
/// instruction (KfacRun::end_schedule), per layer in layer-table order
/// reduce_A, reduce_G, inv_A, inv_G.
std::vector<int> queueOrder(const std::vector<KfacItem> &items) {
  std::vector<int> curvature, refresh;
  for (size_t i = 0; i < items.size(); ++i)
    (isCurvature(items[i].kind) ? curvature : refresh)
        .push_back(static_cast<int>(i));
  std::stable_sort(curvature.begin(), curvature.end(), [&](int a, int b) {
    return items[a].ready < items[b].ready;
  });
  std::stable_sort(refresh.begin(), refresh.end(), [&](int a, int b) {
    return items[a].layer != items[b].layer
               ? items[a].layer < items[b].layer
               : static_cast<int>(items[a].kind) <
                     static_cast<int>(items[b].kind);
  });
  curvature.insert(curvature.end(), refresh.begin(), refresh.end());
  return curvature;
}

} // namespace

std::string tooManySteps(int device, int maxSteps) {
  return "the k-fac refresh on stage " + std::to_string(device) +
         " needs more than " + std::to_string(maxSteps) + " steps";
}

OrError<FluidFill> packFluid(std::vector<KfacItem> &items,
                             const std::vector<Interval> &gaps, double makespan,
                             double period, double queuedAt, double margin,
                             int pin, int maxSteps, int device) {
  using R = OrError<FluidFill>;
  const double eps = 1e-12 * (1 + makespan);
  double idle = 0;
  for (const Interval &g : gaps)
    idle += std::max(0.0, g.end - g.start);
  // No idle at all: every item is forced at the end of step 0 (K_d = 1).
  const bool noIdle = idle <= eps;
  const int limit = pin > 0 ? pin : noIdle ? 1 : maxSteps;

  const std::vector<int> queue = queueOrder(items);
  std::vector<PlacedItem> placed(queue.size());
  std::vector<double> left(queue.size()); // idle time still needed
  // The thread's cursor: step, gap and time within the step.
  int step = 0, lastStep = 0;
  size_t gap = 0;
  double t = gaps.empty() ? 0 : gaps[0].start;
  bool exhausted = noIdle; // the gaps of `limit` steps are used up
  auto nextGap = [&] {
    if (++gap == gaps.size()) {
      gap = 0;
      ++step;
    }
    t = gaps[gap].start;
  };
  for (size_t q = 0; q < queue.size(); ++q) {
    KfacItem &item = items[static_cast<size_t>(queue[q])];
    PlacedItem &p = placed[q];
    p.kind = item.kind;
    p.layer = item.layer;
    p.microbatch = item.microbatch;
    // Absolute (step * period + time): its input in step 0, its queueing,
    // its dependencies (earlier in the queue, so done already).
    double ready = isCurvature(item.kind) ? item.ready : queuedAt;
    for (int d : item.deps)
      ready = std::max(ready, items[static_cast<size_t>(d)].doneAt);
    left[q] = item.duration * (1 + margin);
    while (!exhausted && (left[q] > eps || p.pieces.empty())) {
      if (step >= limit) {
        if (pin <= 0)
          return R::failure(tooManySteps(device, maxSteps));
        exhausted = true;
        break;
      }
      const Interval &g = gaps[gap];
      const double base = step * period;
      const double from = std::max(base + std::max(t, g.start), ready);
      if (from >= base + g.end - eps) { // not ready in this gap: it idles
        nextGap();
        continue;
      }
      const double run = std::min(left[q], base + g.end - from);
      p.pieces.push_back({step, from - base, from - base + run});
      left[q] -= run;
      t = from - base + run;
      lastStep = step;
      if (t >= g.end - eps)
        nextGap();
    }
    if (exhausted)
      continue;
    const ItemPiece &first = p.pieces.front(), &last = p.pieces.back();
    p.step = first.step;
    p.start = first.start;
    p.end = last.end + (last.step - first.step) * makespan;
    item.doneAt = last.step * period + last.end;
    item.placed = true;
  }
  FluidFill out;
  out.steps = lastStep + 1;
  // What the gaps did not run, after the pipeline of the last step, in queue
  // order; the thread's naps no longer apply (no margin).
  double cursor = makespan;
  for (size_t q = 0; q < queue.size(); ++q) {
    KfacItem &item = items[static_cast<size_t>(queue[q])];
    PlacedItem &p = placed[q];
    if (item.placed)
      continue;
    out.steps = limit;
    const double rest = left[q] / (1 + margin);
    p.pieces.push_back({limit - 1, cursor, cursor + rest});
    p.step = limit - 1;
    p.start = cursor;
    p.end = cursor + rest;
    p.forced = true;
    cursor += rest;
    item.doneAt = (limit - 1) * period + p.end;
    item.placed = true;
  }
  out.forced = cursor - makespan;
  out.placed = std::move(placed);
  return out;
}

} // namespace autoddl::pipeline::detail
