//===- PipeFisher.cpp - K-FAC work packed into pipeline bubbles ----------===//
//
// The greedy of pipe-fisher's auto_schedule.py (pipelines.md §4.4) over the
// simulator's idle intervals (KfacFilling::Items; Fluid's walk is in
// PipeFisherFluid.cpp); the header says what is modelled.
//
//===----------------------------------------------------------------------===//
#include "cost_model/pipeline/PipeFisher.h"
#include "cost_model/pipeline/PipeFisherFluid.h"

#include "support/EnumNames.h"
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

namespace autoddl::pipeline {

namespace {
constexpr EnumName<KfacItemKind> kKfacItemNames[] = {
    {KfacItemKind::CurvatureA, "curv_A"},
    {KfacItemKind::CurvatureG, "curv_G"},
    {KfacItemKind::ReduceA, "reduce_A"},
    {KfacItemKind::ReduceG, "reduce_G"},
    {KfacItemKind::InvertA, "inv_A"},
    {KfacItemKind::InvertG, "inv_G"},
    {KfacItemKind::Precondition, "precond"}};
constexpr EnumName<KfacFilling> kKfacFillingNames[] = {
    {KfacFilling::Items, "items"}, {KfacFilling::Fluid, "fluid"}};
} // namespace

std::string_view kfacItemName(KfacItemKind kind) {
  return nameOf(kKfacItemNames, kind);
}

std::string_view kfacFillingName(KfacFilling filling) {
  return nameOf(kKfacFillingNames, filling);
}

std::optional<KfacFilling> parseKfacFilling(std::string_view name) {
  return parseName(kKfacFillingNames, name);
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
  /// order as their dependencies allow. Returns the appended time. A forced
  /// curvature item runs where its operand is made, in the refresh step (the
  /// programs read it there, so no copy outlives it and the micro-batch's
  /// activations need not either); its time is appended all the same.
  double force(int step) {
    double cursor = makespan;
    bool progress = true;
    while (progress) {
      progress = false;
      for (Item &item : items) {
        if (item.placed)
          continue;
        if (item.kind == KfacItemKind::CurvatureA ||
            item.kind == KfacItemKind::CurvatureG) {
          place(item, 0, item.ready, true);
          cursor += item.duration;
          progress = true;
          continue;
        }
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

/// What packKfac checks before any layer: the simulation is the schedule's,
/// the margin and the pinned refresh intervals are in range.
std::optional<std::string> settingsProblem(const Schedule &schedule,
                                           const SimulationResult &sim,
                                           const PipeFisherInput &input) {
  const int devices = schedule.numDevices();
  if (static_cast<int>(sim.devices.size()) != devices)
    return "simulation does not belong to the schedule";
  if (!finiteNonNegative(input.margin))
    return "margin must be a finite number >= 0";
  if (input.refreshSteps < 0 || input.refreshSteps > input.maxSteps)
    return "a pinned refresh interval must be 1.." +
           std::to_string(input.maxSteps) + " steps, got " +
           std::to_string(input.refreshSteps);
  const std::vector<int> &pins = input.deviceRefreshSteps;
  if (!pins.empty() && static_cast<int>(pins.size()) != devices)
    return "pinned refresh intervals: expected one per pipeline "
           "device (" +
           std::to_string(devices) + "), got " + std::to_string(pins.size());
  for (size_t d = 0; d < pins.size(); ++d)
    if (pins[d] < 1 || pins[d] > input.maxSteps)
      return "a pinned refresh interval must be 1.." +
             std::to_string(input.maxSteps) + " steps, got " +
             std::to_string(pins[d]) + " for device " + std::to_string(d);
  return std::nullopt;
}

/// Forward (A) / backward (G) end per (device, stage, direction,
/// micro-batch): when a curvature item's input is ready in step 0.
using InputEnds =
    std::map<std::tuple<int, int, int, int>, std::array<double, 2>>;

InputEnds inputEnds(const SimulationResult &sim) {
  InputEnds ends;
  for (const ExecutedInstruction &x : sim.timeline) {
    if (x.op.kind == OpKind::WeightGradient)
      continue; // G needs dY, which B has
    auto key =
        std::make_tuple(x.device, x.op.stage, static_cast<int>(x.op.direction),
                        x.op.microbatch);
    auto &slot =
        ends.try_emplace(key, std::array<double, 2>{-1, -1}).first->second;
    slot[x.op.kind == OpKind::Forward ? 0 : 1] = x.end;
  }
  return ends;
}

/// One packKfac, in its order: the layers put on devices (assignLayers),
/// each device's items packed into its bubbles (packDevice), then the
/// refresh intervals and the step put together (finish).
class KfacPacking {
public:
  KfacPacking(const Schedule &schedule, const SimulationResult &sim,
              const PipeFisherInput &input)
      : schedule_(schedule), sim_(sim), in_(input),
        devices_(schedule.numDevices()), layersOf_(devices_),
        group_(static_cast<size_t>(devices_)), ends_(inputEnds(sim)),
        fluid_(input.filling == KfacFilling::Fluid) {
    for (int d = 0; d < devices_; ++d)
      group_[static_cast<size_t>(d)] = d;
  }

  std::optional<std::string> assignLayers();
  std::optional<std::string> packDevice(int d);
  PipeFisherResult finish();

private:
  /// Device d's pinned K_d; 0: set by its bubbles.
  int pinOf(int d) const {
    const std::vector<int> &pins = in_.deviceRefreshSteps;
    return pins.empty() ? in_.refreshSteps : pins[static_cast<size_t>(d)];
  }
  /// The lowest device of the group holding copies of d's layers.
  int root(int d) const {
    while (group_[static_cast<size_t>(d)] != d)
      d = group_[static_cast<size_t>(d)];
    return d;
  }
  std::vector<Item> buildItems(int d) const;
  std::optional<std::string> packWholeItems(int d, DevicePacker &pk,
                                            DeviceFill &fill);
  std::optional<std::string> packFluidly(int d, DevicePacker &pk,
                                         DeviceFill &fill);
  double peakSavedBytes(const std::vector<Item> &items) const;
  void shareGroupIntervals();
  void addPreconditioning(int d, DeviceFill &fill) const;

  const Schedule &schedule_;
  const SimulationResult &sim_;
  const PipeFisherInput &in_;
  const int devices_;
  /// Which layers each device holds.
  std::vector<std::vector<int>> layersOf_;
  /// Devices holding copies of a layer, as a union-find forest over devices
  /// (a device's root is the group's lowest device).
  std::vector<int> group_;
  const InputEnds ends_;
  /// Fluid packing models the filling thread, which runs only a rank's local
  /// items: a collective (a reduction over dp replicas or Chimera's mirrored
  /// copies, a curvature gathered over tp) runs whole on the rank's own
  /// thread (docs/kfac.md "Thread filling"), so such a packing is of whole
  /// items.
  bool fluid_;
  double totalWork_ = 0;
  double period_ = 0; // absolute time of step k starts at k * period_
  PipeFisherResult result_;
};

/// Puts each layer on the device running its stage, joins the devices
/// holding copies of one layer (which must be pinned alike), and decides the
/// filling; an error for a layer with a bad time or size or on a stage the
/// schedule does not run.
std::optional<std::string> KfacPacking::assignLayers() {
  std::map<std::string, int> holder; // layer name -> first device holding it
  for (size_t l = 0; l < in_.layers.size(); ++l) {
    const KfacLayerWork &w = in_.layers[l];
    for (double v :
         {w.curvature[0], w.curvature[1], w.reduce[0], w.reduce[1], w.invert[0],
          w.invert[1], w.precondition, w.savedBytes[0], w.savedBytes[1],
          w.factorBytes[0], w.factorBytes[1], w.inverseCopyBytes})
      if (!finiteNonNegative(v))
        return "k-fac layer '" + w.name +
               "': times and sizes must be finite and >= 0";
    if (w.stage < 0 || w.stage >= schedule_.modelStages() ||
        (w.direction == Direction::Up &&
         schedule_.config.kind != ScheduleKind::Chimera))
      return "k-fac layer '" + w.name + "' is on stage " +
             std::to_string(w.stage) + ", which the schedule does not run";
    const int dev = schedule_.deviceOf(w.stage, w.direction);
    layersOf_[dev].push_back(static_cast<int>(l));
    // Copies of one layer on several devices share one K (their reduction).
    auto [first, isNew] = holder.try_emplace(w.name, dev);
    if (!isNew || w.reduce[0] > 0 || w.reduce[1] > 0 || w.collectiveCurvature)
      fluid_ = false;
    if (!isNew) {
      const int a = root(first->second), b = root(dev);
      if (a != b) {
        if (pinOf(a) != pinOf(b))
          return "k-fac layer '" + w.name + "' is on devices " +
                 std::to_string(first->second) + " and " + std::to_string(dev) +
                 ", pinned to different refresh intervals (" +
                 std::to_string(pinOf(first->second)) + " and " +
                 std::to_string(pinOf(dev)) +
                 "): copies of a layer share one K";
        group_[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
      }
    }
    totalWork_ += w.curvature[0] + w.curvature[1] + w.reduce[0] + w.reduce[1] +
                  w.invert[0] + w.invert[1];
  }
  result_.filling = fluid_ ? KfacFilling::Fluid : KfacFilling::Items;
  result_.devices.resize(devices_);
  period_ = 2 * sim_.makespan + 2 * totalWork_ + 1;
  return std::nullopt;
}

/// Device d's items in priority order: kind, then layer, then micro-batch;
/// a reduction after its factor's curvature, an inversion after both
/// factors' reductions (or curvatures where there are none).
std::vector<Item> KfacPacking::buildItems(int d) const {
  std::vector<Item> items;
  const std::vector<int> &layers = layersOf_[d];
  // curvature[layer position][f] -> item indices; reduce likewise.
  std::vector<std::array<std::vector<int>, 2>> curv(layers.size());
  std::vector<std::array<int, 2>> reduce(layers.size(), {-1, -1});
  for (int f = 0; f < 2; ++f) {
    for (size_t i = 0; i < layers.size(); ++i) {
      const int l = layers[i];
      const KfacLayerWork &w = in_.layers[l];
      if (w.curvature[f] <= 0)
        continue;
      // Keys sort by (device, stage, direction, micro-batch): this layer's
      // micro-batches are one run.
      const int dir = static_cast<int>(w.direction);
      for (auto it = ends_.lower_bound({d, w.stage, dir, -1});
           it != ends_.end() && std::get<0>(it->first) == d &&
           std::get<1>(it->first) == w.stage && std::get<2>(it->first) == dir;
           ++it) {
        const int mb = std::get<3>(it->first);
        const std::array<double, 2> &ends = it->second;
        items.push_back(
            {f == 0 ? KfacItemKind::CurvatureA : KfacItemKind::CurvatureG,
             l,
             mb,
             w.curvature[f],
             ends[f],
             {}});
        curv[i][f].push_back(static_cast<int>(items.size()) - 1);
      }
    }
  }
  for (int f = 0; f < 2; ++f)
    for (size_t i = 0; i < layers.size(); ++i) {
      const int l = layers[i];
      if (in_.layers[l].reduce[f] <= 0)
        continue;
      items.push_back({f == 0 ? KfacItemKind::ReduceA : KfacItemKind::ReduceG,
                       l, -1, in_.layers[l].reduce[f], 0, curv[i][f]});
      reduce[i][f] = static_cast<int>(items.size()) - 1;
    }
  for (int f = 0; f < 2; ++f)
    for (size_t i = 0; i < layers.size(); ++i) {
      const int l = layers[i];
      if (in_.layers[l].invert[f] <= 0)
        continue;
      // Both factors: the damping π reads the traces of A and G
      // (backends/common/KfacRules.h), so the runtime inverts either only
      // once both are reduced.
      std::vector<int> deps;
      for (int h = 0; h < 2; ++h) {
        if (reduce[i][h] >= 0)
          deps.push_back(reduce[i][h]);
        else
          deps.insert(deps.end(), curv[i][h].begin(), curv[i][h].end());
      }
      items.push_back({f == 0 ? KfacItemKind::InvertA : KfacItemKind::InvertG,
                       l, -1, in_.layers[l].invert[f], 0, std::move(deps)});
    }
  return items;
}

/// Builds device d's items, accounts its work and memory, and packs the
/// items into its bubbles.
std::optional<std::string> KfacPacking::packDevice(int d) {
  DevicePacker pk{
      in_, sim_.devices[d].idleIntervals, sim_.makespan, period_, {}, {}};
  pk.items = buildItems(d);
  DeviceFill &fill = result_.devices[d];
  for (const Item &item : pk.items)
    fill.kfacWork += item.duration;
  for (int l : layersOf_[d]) {
    fill.precondition += in_.layers[l].precondition;
    // The factors, the inverses in use and the next refresh's pending ones
    // (installed at step s+K: docs/kfac.md "Refresh cycle").
    fill.factorBytes +=
        3 * (in_.layers[l].factorBytes[0] + in_.layers[l].factorBytes[1]);
    fill.inverseCopyBytes += in_.layers[l].inverseCopyBytes;
  }
  if (auto problem =
          fluid_ ? packFluidly(d, pk, fill) : packWholeItems(d, pk, fill))
    return problem;
  fill.refreshSteps = pinOf(d) > 0 ? pinOf(d) : fill.steps;
  fill.peakSavedBytes = peakSavedBytes(pk.items);
  fill.items = std::move(pk.placed);
  return std::nullopt;
}

/// The filling thread's packing (packFluid): the reductions and inversions
/// queued after the device's last instruction of the refresh step.
std::optional<std::string> KfacPacking::packFluidly(int d, DevicePacker &pk,
                                                    DeviceFill &fill) {
  double queuedAt = 0;
  for (const ExecutedInstruction &x : sim_.timeline)
    if (x.device == d)
      queuedAt = std::max(queuedAt, x.end);
  auto walk = detail::packFluid(pk.items, sim_.devices[d].idleIntervals,
                                sim_.makespan, period_, queuedAt, in_.margin,
                                pinOf(d), in_.maxSteps, d);
  if (!walk)
    return walk.error();
  fill.steps = walk->steps;
  fill.forced = walk->forced;
  pk.placed = std::move(walk->placed);
  return std::nullopt;
}

/// PipeFisher's packing of whole items: steps of bubbles until everything is
/// placed or a step places nothing (or a pinned K_d's steps are used); the
/// rest forced after the last step that placed something.
std::optional<std::string> KfacPacking::packWholeItems(int d, DevicePacker &pk,
                                                       DeviceFill &fill) {
  int lastPlacing = 0;
  for (int step = 0;; ++step) {
    bool all = std::all_of(pk.items.begin(), pk.items.end(),
                           [](const Item &i) { return i.placed; });
    if (all)
      break;
    if (pinOf(d) > 0 && step == pinOf(d)) {
      fill.forced = pk.force(lastPlacing);
      break;
    }
    if (step >= in_.maxSteps)
      return detail::tooManySteps(d, in_.maxSteps);
    if (pk.fillStep(step)) {
      lastPlacing = step;
      continue;
    }
    fill.forced = pk.force(lastPlacing);
    break;
  }
  fill.steps = lastPlacing + 1;
  return std::nullopt;
}

/// Peak of saved a / g: held from its producer's end in step 0 until its
/// curvature item ends; frees sort before allocations at equal times.
double KfacPacking::peakSavedBytes(const std::vector<Item> &items) const {
  std::vector<std::pair<double, double>> events;
  for (const Item &item : items) {
    if (item.kind != KfacItemKind::CurvatureA &&
        item.kind != KfacItemKind::CurvatureG)
      continue;
    const double bytes =
        in_.layers[item.layer]
            .savedBytes[item.kind == KfacItemKind::CurvatureA ? 0 : 1];
    events.push_back({item.ready, bytes});
    events.push_back({item.doneAt, -bytes});
  }
  std::sort(events.begin(), events.end());
  double held = 0, peak = 0;
  for (const auto &[when, bytes] : events) {
    held += bytes;
    peak = std::max(peak, held);
  }
  return peak;
}

/// Mirrored devices refresh together: each takes its group's largest K_d
/// (pins were checked equal within a group by assignLayers).
void KfacPacking::shareGroupIntervals() {
  std::vector<int> groupK(static_cast<size_t>(devices_), 1);
  for (int d = 0; d < devices_; ++d) {
    int &k = groupK[static_cast<size_t>(root(d))];
    k = std::max(k, result_.devices[d].refreshSteps);
  }
  for (int d = 0; d < devices_; ++d) {
    DeviceFill &fill = result_.devices[d];
    fill.refreshSteps = groupK[static_cast<size_t>(root(d))];
    result_.refreshSteps = std::max(result_.refreshSteps, fill.refreshSteps);
  }
}

/// Device d's preconditioning at each of its K_d steps' end, after the
/// forced tail of its refresh's last step.
void KfacPacking::addPreconditioning(int d, DeviceFill &fill) const {
  for (int step = 0; step < fill.refreshSteps; ++step) {
    double t = sim_.makespan + (step == fill.steps - 1 ? fill.forced : 0);
    for (int l : layersOf_[d]) {
      const double p = in_.layers[l].precondition;
      if (p <= 0)
        continue;
      fill.items.push_back(
          {KfacItemKind::Precondition, l, -1, step, t, t + p, false, {}});
      t += p;
    }
  }
}

/// The refresh intervals of mirrored devices made equal; the amortised step,
/// the utilisation, each device's items in execution order with its
/// preconditioning, and the forced items listed.
PipeFisherResult KfacPacking::finish() {
  shareGroupIntervals();
  double maxPrecondition = 0, maxForcedPerStep = 0;
  for (const DeviceFill &fill : result_.devices) {
    maxPrecondition = std::max(maxPrecondition, fill.precondition);
    maxForcedPerStep =
        std::max(maxForcedPerStep, fill.forced / fill.refreshSteps);
  }
  // Preconditioning at every step's end, after a forced tail; the step end is
  // shared, so utilisation divides by the slowest device's (amortised) step.
  result_.stepTime = sim_.makespan + maxPrecondition + maxForcedPerStep;
  double busy = 0, filledPerStep = 0;
  for (int d = 0; d < devices_; ++d) {
    DeviceFill &fill = result_.devices[d];
    const int K = fill.refreshSteps;
    const double b = sim_.devices[d].busy;
    fill.utilisationBefore = sim_.makespan > 0 ? b / sim_.makespan : 0;
    const double work = K * b + fill.kfacWork + K * fill.precondition;
    const double cycle = K * result_.stepTime;
    fill.utilisationAfter = cycle > 0 ? work / cycle : 0;
    busy += b;
    filledPerStep += work / K;
    addPreconditioning(d, fill);
    std::stable_sort(fill.items.begin(), fill.items.end(),
                     [](const PlacedItem &a, const PlacedItem &b) {
                       return a.step != b.step ? a.step < b.step
                                               : a.start < b.start;
                     });
    for (const PlacedItem &item : fill.items)
      if (item.forced)
        result_.unfitted.push_back(
            "stage " + std::to_string(d) + ": " +
            std::string(kfacItemName(item.kind)) + " " +
            in_.layers[item.layer].name +
            (item.microbatch >= 0 ? " mb " + std::to_string(item.microbatch)
                                  : ""));
  }
  result_.utilisationBefore =
      sim_.makespan > 0 ? busy / (devices_ * sim_.makespan) : 0;
  result_.utilisationAfter =
      result_.stepTime > 0 ? filledPerStep / (devices_ * result_.stepTime) : 0;
  return std::move(result_);
}

} // namespace

OrError<PipeFisherResult> packKfac(const Schedule &schedule,
                                   const SimulationResult &sim,
                                   const PipeFisherInput &input) {
  using R = OrError<PipeFisherResult>;
  if (auto problem = settingsProblem(schedule, sim, input))
    return R::failure(*problem);
  KfacPacking packing(schedule, sim, input);
  if (auto problem = packing.assignLayers())
    return R::failure(*problem);
  for (int d = 0; d < schedule.numDevices(); ++d)
    if (auto problem = packing.packDevice(d))
      return R::failure(*problem);
  return packing.finish();
}

} // namespace autoddl::pipeline
