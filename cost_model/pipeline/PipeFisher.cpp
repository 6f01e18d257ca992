//===- PipeFisher.cpp - K-FAC work packed into pipeline bubbles ----------===//
//
// The greedy of pipe-fisher's auto_schedule.py (pipelines.md §4.4) over the
// simulator's idle intervals (KfacFilling::Items; Fluid's walk is in
// PipeFisherFluid.cpp); the header says what is modelled.
//
//===----------------------------------------------------------------------===//
#include "cost_model/pipeline/PipeFisher.h"
#include "cost_model/pipeline/PipeFisherFluid.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

namespace autoddl::pipeline {

std::string_view kfacItemName(KfacItemKind kind) {
  switch (kind) {
  case KfacItemKind::CurvatureA:
    return "curv_A";
  case KfacItemKind::CurvatureG:
    return "curv_G";
  case KfacItemKind::ReduceA:
    return "reduce_A";
  case KfacItemKind::ReduceG:
    return "reduce_G";
  case KfacItemKind::InvertA:
    return "inv_A";
  case KfacItemKind::InvertG:
    return "inv_G";
  case KfacItemKind::Precondition:
    return "precond";
  }
  return "?";
}

std::string_view kfacFillingName(KfacFilling filling) {
  return filling == KfacFilling::Fluid ? "fluid" : "items";
}

std::optional<KfacFilling> parseKfacFilling(std::string_view name) {
  for (KfacFilling f : {KfacFilling::Items, KfacFilling::Fluid})
    if (name == kfacFillingName(f))
      return f;
  return std::nullopt;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using Item = detail::KfacItem;

struct DevicePacker {
  const PipeFisherInput &in;
  const std::vector<Interval> &gaps;
  double makespan;
  double period; // absolute time of step k starts at k * period
  std::vector<Item> items;
  std::vector<PlacedItem> placed;

  bool depsDone(const Item &item, double absNow) const {
    for (int d : item.deps)
      if (items[d].doneAt > absNow + 1e-12 * (1 + std::abs(absNow)))
        return false;
    return true;
  }

  void place(Item &item, int step, double start, bool forced) {
    item.placed = true;
    item.doneAt = step * period + start + item.duration;
    placed.push_back({item.kind,
                      item.layer,
                      item.microbatch,
                      step,
                      start,
                      start + item.duration,
                      forced,
                      {}});
  }

  /// Fills the bubbles of one step; true if something was placed.
  bool fillStep(int step) {
    // The unplaced items in priority order, and the shortest of them: a gap
    // narrower than that takes nothing (the planner packs every candidate, so
    // placed items are not rescanned).
    std::vector<int> pending;
    double shortest = kInf;
    for (size_t i = 0; i < items.size(); ++i)
      if (!items[i].placed) {
        pending.push_back(static_cast<int>(i));
        shortest = std::min(shortest, items[i].duration);
      }
    bool any = false;
    for (const Interval &gap : gaps) {
      double cursor = gap.start;
      bool added = true;
      while (added && !pending.empty() &&
             shortest * (1 + in.margin) <=
                 gap.end - cursor + 1e-12 * (1 + gap.end)) {
        added = false;
        for (int i : pending) {
          Item &item = items[i];
          if (item.placed)
            continue;
          const double need = item.duration * (1 + in.margin);
          if (need > gap.end - cursor + 1e-12 * (1 + gap.end))
            continue;
          if (step == 0 && item.ready > cursor + 1e-12 * (1 + cursor))
            continue;
          if (!depsDone(item, step * period + cursor))
            continue;
          place(item, step, cursor, false);
          cursor += item.duration;
          added = any = true;
        }
        if (added) {
          pending.erase(std::remove_if(pending.begin(), pending.end(),
                                       [&](int i) { return items[i].placed; }),
                        pending.end());
          shortest = kInf;
          for (int i : pending)
            shortest = std::min(shortest, items[i].duration);
        }
      }
    }
    return any;
  }

  /// Appends every remaining item after the makespan of `step`, in priority
  /// order as their dependencies allow. Returns the appended time.
  double force(int step) {
    double cursor = makespan;
    bool progress = true;
    while (progress) {
      progress = false;
      for (Item &item : items) {
        if (item.placed)
          continue;
        if (!depsDone(item, step * period + cursor))
          continue;
        place(item, step, cursor, true);
        cursor += item.duration;
        progress = true;
      }
    }
    return cursor - makespan;
  }
};

bool finiteNonNegative(double v) { return std::isfinite(v) && v >= 0; }

} // namespace

OrError<PipeFisherResult> packKfac(const Schedule &schedule,
                                   const SimulationResult &sim,
                                   const PipeFisherInput &input) {
  using R = OrError<PipeFisherResult>;
  const int devices = schedule.numDevices();
  if (static_cast<int>(sim.devices.size()) != devices)
    return R::failure("simulation does not belong to the schedule");
  if (!finiteNonNegative(input.margin))
    return R::failure("margin must be a finite number >= 0");
  if (input.refreshSteps < 0 || input.refreshSteps > input.maxSteps)
    return R::failure("a pinned refresh interval must be 1.." +
                      std::to_string(input.maxSteps) + " steps, got " +
                      std::to_string(input.refreshSteps));
  const std::vector<int> &pins = input.deviceRefreshSteps;
  if (!pins.empty() && static_cast<int>(pins.size()) != devices)
    return R::failure("pinned refresh intervals: expected one per pipeline "
                      "device (" +
                      std::to_string(devices) + "), got " +
                      std::to_string(pins.size()));
  for (size_t d = 0; d < pins.size(); ++d)
    if (pins[d] < 1 || pins[d] > input.maxSteps)
      return R::failure("a pinned refresh interval must be 1.." +
                        std::to_string(input.maxSteps) + " steps, got " +
                        std::to_string(pins[d]) + " for device " +
                        std::to_string(d));
  // 0: K_d set by the bubbles.
  auto pinOf = [&](int d) {
    return pins.empty() ? input.refreshSteps : pins[static_cast<size_t>(d)];
  };
  // Which layers each device holds; their micro-batches' forward / backward
  // end times on that device.
  std::vector<std::vector<int>> layersOf(devices);
  // Devices holding copies of a layer, as a union-find forest over devices
  // (a device's root is the group's lowest device).
  std::vector<int> group(static_cast<size_t>(devices));
  for (int d = 0; d < devices; ++d)
    group[static_cast<size_t>(d)] = d;
  auto root = [&](int d) {
    while (group[static_cast<size_t>(d)] != d)
      d = group[static_cast<size_t>(d)];
    return d;
  };
  std::map<std::string, int> holder; // layer name -> first device holding it
  double totalWork = 0;
  // Fluid packing models the filling thread, which runs only a rank's local
  // items: a collective (a reduction over dp replicas or Chimera's mirrored
  // copies, a curvature gathered over tp) runs whole on the rank's own thread
  // (docs/kfac.md "Thread filling"), so such a packing is of whole items.
  bool fluid = input.filling == KfacFilling::Fluid;
  for (size_t l = 0; l < input.layers.size(); ++l) {
    const KfacLayerWork &w = input.layers[l];
    for (double v : {w.curvature[0], w.curvature[1], w.reduce[0], w.reduce[1],
                     w.invert[0], w.invert[1], w.precondition, w.savedBytes[0],
                     w.savedBytes[1], w.factorBytes[0], w.factorBytes[1]})
      if (!finiteNonNegative(v))
        return R::failure("k-fac layer '" + w.name +
                          "': times and sizes must be finite and >= 0");
    if (w.stage < 0 || w.stage >= schedule.modelStages() ||
        (w.direction == Direction::Up &&
         schedule.config.kind != ScheduleKind::Chimera))
      return R::failure("k-fac layer '" + w.name + "' is on stage " +
                        std::to_string(w.stage) +
                        ", which the schedule does not run");
    const int dev = schedule.deviceOf(w.stage, w.direction);
    layersOf[dev].push_back(static_cast<int>(l));
    // Copies of one layer on several devices share one K (their reduction).
    auto [first, isNew] = holder.try_emplace(w.name, dev);
    if (!isNew || w.reduce[0] > 0 || w.reduce[1] > 0 || w.collectiveCurvature)
      fluid = false;
    if (!isNew) {
      const int a = root(first->second), b = root(dev);
      if (a != b) {
        if (pinOf(a) != pinOf(b))
          return R::failure(
              "k-fac layer '" + w.name + "' is on devices " +
              std::to_string(first->second) + " and " + std::to_string(dev) +
              ", pinned to different refresh intervals (" +
              std::to_string(pinOf(first->second)) + " and " +
              std::to_string(pinOf(dev)) + "): copies of a layer share one K");
        group[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
      }
    }
    totalWork += w.curvature[0] + w.curvature[1] + w.reduce[0] + w.reduce[1] +
                 w.invert[0] + w.invert[1];
  }
  // Forward (A) / backward (G) end per (device, stage, direction, mb).
  std::map<std::tuple<int, int, int, int>, std::array<double, 2>> inputs;
  for (const ExecutedInstruction &x : sim.timeline) {
    if (x.op.kind == OpKind::WeightGradient)
      continue; // G needs dY, which B has
    auto key =
        std::make_tuple(x.device, x.op.stage, static_cast<int>(x.op.direction),
                        x.op.microbatch);
    auto &slot =
        inputs.try_emplace(key, std::array<double, 2>{-1, -1}).first->second;
    slot[x.op.kind == OpKind::Forward ? 0 : 1] = x.end;
  }

  PipeFisherResult result;
  result.filling = fluid ? KfacFilling::Fluid : KfacFilling::Items;
  result.devices.resize(devices);
  const double period = 2 * sim.makespan + 2 * totalWork + 1;
  double maxPrecondition = 0;
  std::vector<DevicePacker> packers;
  packers.reserve(devices);
  for (int d = 0; d < devices; ++d) {
    packers.push_back(
        {input, sim.devices[d].idleIntervals, sim.makespan, period, {}, {}});
    DevicePacker &pk = packers.back();
    DeviceFill &fill = result.devices[d];
    // Build the items in priority order: kind, then layer, then micro-batch.
    // curvature[f][layer position] -> item indices; reduce / invert likewise.
    std::vector<std::array<std::vector<int>, 2>> curv(layersOf[d].size());
    std::vector<std::array<int, 2>> reduce(layersOf[d].size(), {-1, -1});
    for (int f = 0; f < 2; ++f) {
      for (size_t i = 0; i < layersOf[d].size(); ++i) {
        const int l = layersOf[d][i];
        const KfacLayerWork &w = input.layers[l];
        if (w.curvature[f] <= 0)
          continue;
        // Keys sort by (device, stage, direction, micro-batch): this layer's
        // micro-batches are one run.
        const int dir = static_cast<int>(w.direction);
        for (auto it = inputs.lower_bound({d, w.stage, dir, -1});
             it != inputs.end() && std::get<0>(it->first) == d &&
             std::get<1>(it->first) == w.stage && std::get<2>(it->first) == dir;
             ++it) {
          const int mb = std::get<3>(it->first);
          const std::array<double, 2> &ends = it->second;
          pk.items.push_back(
              {f == 0 ? KfacItemKind::CurvatureA : KfacItemKind::CurvatureG,
               l,
               mb,
               w.curvature[f],
               ends[f],
               {}});
          curv[i][f].push_back(static_cast<int>(pk.items.size()) - 1);
        }
      }
    }
    for (int f = 0; f < 2; ++f)
      for (size_t i = 0; i < layersOf[d].size(); ++i) {
        const int l = layersOf[d][i];
        if (input.layers[l].reduce[f] <= 0)
          continue;
        pk.items.push_back(
            {f == 0 ? KfacItemKind::ReduceA : KfacItemKind::ReduceG, l, -1,
             input.layers[l].reduce[f], 0, curv[i][f]});
        reduce[i][f] = static_cast<int>(pk.items.size()) - 1;
      }
    for (int f = 0; f < 2; ++f)
      for (size_t i = 0; i < layersOf[d].size(); ++i) {
        const int l = layersOf[d][i];
        if (input.layers[l].invert[f] <= 0)
          continue;
        std::vector<int> deps =
            reduce[i][f] >= 0 ? std::vector<int>{reduce[i][f]} : curv[i][f];
        pk.items.push_back(
            {f == 0 ? KfacItemKind::InvertA : KfacItemKind::InvertG, l, -1,
             input.layers[l].invert[f], 0, std::move(deps)});
      }
    for (const Item &item : pk.items)
      fill.kfacWork += item.duration;
    for (int l : layersOf[d]) {
      fill.precondition += input.layers[l].precondition;
      // The factors, the inverses in use and the next refresh's pending ones
      // (installed at step s+K: docs/kfac.md "Refresh cycle").
      fill.factorBytes +=
          3 * (input.layers[l].factorBytes[0] + input.layers[l].factorBytes[1]);
    }
    maxPrecondition = std::max(maxPrecondition, fill.precondition);

    if (fluid) {
      // The reductions and inversions are queued after the device's last
      // instruction of the refresh step.
      double queuedAt = 0;
      for (const ExecutedInstruction &x : sim.timeline)
        if (x.device == d)
          queuedAt = std::max(queuedAt, x.end);
      auto walk = detail::packFluid(pk.items, sim.devices[d].idleIntervals,
                                    sim.makespan, period, queuedAt,
                                    input.margin, pinOf(d), input.maxSteps, d);
      if (!walk)
        return R::failure(walk.error());
      fill.steps = walk->steps;
      fill.forced = walk->forced;
      pk.placed = std::move(walk->placed);
    } else {
      // Steps of bubbles until everything is placed or a step places nothing.
      int lastPlacing = 0;
      for (int step = 0;; ++step) {
        bool all = std::all_of(pk.items.begin(), pk.items.end(),
                               [](const Item &i) { return i.placed; });
        if (all)
          break;
        // A pinned K_d: the rest after the last step that placed something.
        if (pinOf(d) > 0 && step == pinOf(d)) {
          fill.forced = pk.force(lastPlacing);
          break;
        }
        if (step >= input.maxSteps)
          return R::failure(detail::tooManySteps(d, input.maxSteps));
        if (pk.fillStep(step)) {
          lastPlacing = step;
          continue;
        }
        fill.forced = pk.force(lastPlacing);
        break;
      }
      fill.steps = lastPlacing + 1;
    }
    fill.refreshSteps = pinOf(d) > 0 ? pinOf(d) : fill.steps;
    // Peak of saved a / g: held from its producer's end in step 0 until its
    // curvature item ends; frees sort before allocations at equal times.
    std::vector<std::pair<double, double>> events;
    for (const Item &item : pk.items) {
      if (item.kind != KfacItemKind::CurvatureA &&
          item.kind != KfacItemKind::CurvatureG)
        continue;
      const double bytes =
          input.layers[item.layer]
              .savedBytes[item.kind == KfacItemKind::CurvatureA ? 0 : 1];
      events.push_back({item.ready, bytes});
      events.push_back({item.doneAt, -bytes});
    }
    std::sort(events.begin(), events.end());
    double held = 0;
    for (const auto &[when, bytes] : events) {
      held += bytes;
      fill.peakSavedBytes = std::max(fill.peakSavedBytes, held);
    }
    fill.items = std::move(pk.placed);
  }

  // Mirrored devices refresh together: each takes its group's largest K_d
  // (pins were checked equal within a group above).
  std::vector<int> groupK(static_cast<size_t>(devices), 1);
  for (int d = 0; d < devices; ++d) {
    int &k = groupK[static_cast<size_t>(root(d))];
    k = std::max(k, result.devices[d].refreshSteps);
  }
  double maxForcedPerStep = 0;
  for (int d = 0; d < devices; ++d) {
    DeviceFill &fill = result.devices[d];
    fill.refreshSteps = groupK[static_cast<size_t>(root(d))];
    result.refreshSteps = std::max(result.refreshSteps, fill.refreshSteps);
    maxForcedPerStep =
        std::max(maxForcedPerStep, fill.forced / fill.refreshSteps);
  }
  // Preconditioning at every step's end, after a forced tail; the step end is
  // shared, so utilisation divides by the slowest device's (amortised) step.
  result.stepTime = sim.makespan + maxPrecondition + maxForcedPerStep;
  double busy = 0, filledPerStep = 0;
  for (int d = 0; d < devices; ++d) {
    DeviceFill &fill = result.devices[d];
    const int K = fill.refreshSteps;
    const double b = sim.devices[d].busy;
    fill.utilisationBefore = sim.makespan > 0 ? b / sim.makespan : 0;
    const double work = K * b + fill.kfacWork + K * fill.precondition;
    const double cycle = K * result.stepTime;
    fill.utilisationAfter = cycle > 0 ? work / cycle : 0;
    busy += b;
    filledPerStep += work / K;
    for (int step = 0; step < K; ++step) {
      double t = sim.makespan + (step == fill.steps - 1 ? fill.forced : 0);
      for (int l : layersOf[d]) {
        const double p = input.layers[l].precondition;
        if (p <= 0)
          continue;
        fill.items.push_back(
            {KfacItemKind::Precondition, l, -1, step, t, t + p, false, {}});
        t += p;
      }
    }
    std::stable_sort(fill.items.begin(), fill.items.end(),
                     [](const PlacedItem &a, const PlacedItem &b) {
                       return a.step != b.step ? a.step < b.step
                                               : a.start < b.start;
                     });
    for (const PlacedItem &item : fill.items)
      if (item.forced)
        result.unfitted.push_back(
            "stage " + std::to_string(d) + ": " +
            std::string(kfacItemName(item.kind)) + " " +
            input.layers[item.layer].name +
            (item.microbatch >= 0 ? " mb " + std::to_string(item.microbatch)
                                  : ""));
  }
  result.utilisationBefore =
      sim.makespan > 0 ? busy / (devices * sim.makespan) : 0;
  result.utilisationAfter =
      result.stepTime > 0 ? filledPerStep / (devices * result.stepTime) : 0;
  return result;
}

} // namespace autoddl::pipeline
