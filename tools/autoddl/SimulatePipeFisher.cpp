//===- SimulatePipeFisher.cpp - `autoddl simulate --pipefisher` ----------===//
#include "tools/autoddl/SimulatePipeFisher.h"

#include "cost_model/pipeline/PipeFisher.h"
#include "planner/Kfac.h"
#include "planner/KfacJson.h"
#include "planner/KfacReport.h"
#include "support/UserError.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace autoddl::cli {

using namespace autoddl::pipeline;

PipeFisherOutput simulatePipeFisher(const Schedule &schedule,
                                    const SimulationResult &sim,
                                    const PipeFisherTimes &t,
                                    trace::ChromeTrace *trace, double us) {
  if (t.layers < 1)
    throw UserError(fmt::format(
        "--kfac-layers: expected at least 1 layer per stage, got {}",
        t.layers));
  // K-FAC's items: per layer, curvature per micro-batch and factor, plus its
  // inversions and reductions, on every model stage (both directions for
  // chimera); bounded as the schedule's instructions are, so a typo does not
  // run (and allocate) for hours.
  const long long copies =
      schedule.config.kind == ScheduleKind::Chimera ? 2 : 1;
  const long long perLayer = 2LL * (schedule.config.microbatches + 3);
  const long long layerCopies = (long long)schedule.modelStages() * copies;
  // A stage of the largest models holds a few hundred linear layers.
  constexpr long long kMaxLayersPerStage = 1024;
  const long long most =
      std::min(kMaxLayersPerStage, kMaxInstructions / perLayer / layerCopies);
  if ((long long)t.layers > most)
    throw UserError(fmt::format(
        "--kfac-layers: expected at most {} layers per stage (K-FAC items "
        "with {} model stages and {} micro-batches stay within {}), got {}",
        most, schedule.modelStages(), schedule.config.microbatches,
        kMaxInstructions, t.layers));
  if (!std::isfinite(t.margin) || t.margin < 0)
    throw UserError(
        fmt::format("--margin: expected a number >= 0, got {}", t.margin));
  if (t.refresh < 0 || t.refresh > 4096)
    throw UserError(fmt::format(
        "--kfac-refresh: expected 1..4096 steps, got {}", t.refresh));
  if (!t.deviceRefresh.empty() &&
      static_cast<int>(t.deviceRefresh.size()) != schedule.numDevices())
    throw UserError(fmt::format(
        "--kfac-refresh: lists {} refresh intervals, one per pipeline device, "
        "but the schedule has {}",
        t.deviceRefresh.size(), schedule.numDevices()));
  PipeFisherInput in;
  in.margin = t.margin;
  in.refreshSteps = t.refresh;
  in.deviceRefreshSteps = t.deviceRefresh;
  in.filling = t.filling;
  const bool chimera = schedule.config.kind == ScheduleKind::Chimera;
  for (int stage = 0; stage < schedule.modelStages(); ++stage) {
    const int dev = stage % schedule.numDevices(); // its times' index
    for (int copy = 0; copy < (chimera ? 2 : 1); ++copy)
      for (int l = 0; l < t.layers; ++l) {
        KfacLayerWork w;
        w.name = fmt::format("s{}.l{}", stage, l);
        w.stage = stage;
        w.direction = copy ? Direction::Up : Direction::Down;
        w.curvature[0] = w.curvature[1] = t.curvature[dev];
        w.invert[0] = w.invert[1] = t.inversion[dev];
        w.reduce[0] = w.reduce[1] = t.reduction[dev];
        w.precondition = t.precondition[dev];
        in.layers.push_back(w);
      }
  }
  auto packed = packKfac(schedule, sim, in);
  if (!packed)
    throw UserError(packed.error());
  planner::KfacPlan plan =
      planner::kfacPlan(schedule, sim, in.layers, *packed, 1e-3, sim.makespan);
  plan.refreshPinned = t.refresh > 0 || !t.deviceRefresh.empty();
  PipeFisherOutput out;
  out.text = fmt::format(
      "\nPipeFisher: {} K-FAC layer{} per stage{}; step {:g} ms with K-FAC "
      "(makespan {:g} + preconditioning + the largest forced tail / its K)\n",
      t.layers, t.layers == 1 ? "" : "s",
      chimera ? " and pipeline direction" : "", packed->stepTime, sim.makespan);
  out.text += planner::kfacSummary(plan, 1, "ms");
  const std::string timeline = planner::kfacTimeline(sim, plan, 160);
  if (!timeline.empty())
    out.text += "\n" + timeline;
  // The JSON keeps plan.json's "kfac" keys, whose times are seconds: the
  // simulator's unit is ms.
  planner::KfacPlan seconds = plan;
  const double s = 1e-3;
  for (planner::KfacLayerPlan &l : seconds.layers) {
    for (int f = 0; f < 2; ++f) {
      l.curvature[f] *= s;
      l.reduce[f] *= s;
      l.invert[f] *= s;
    }
    l.precondition *= s;
  }
  for (planner::KfacDevicePlan &d : seconds.devices) {
    d.work *= s;
    d.precondition *= s;
    d.forced *= s;
    for (planner::KfacItemPlacement &it : d.items) {
      it.start *= s;
      it.end *= s;
      for (ItemPiece &piece : it.pieces) {
        piece.start *= s;
        piece.end *= s;
      }
    }
  }
  out.json = planner::kfacToJson(seconds);
  out.json.erase("damping");
  out.json["first_order_step_time_s"] = s * sim.makespan;
  out.json["step_time_s"] = s * packed->stepTime;
  if (trace)
    for (int d = 0; d < schedule.numDevices(); ++d)
      planner::addKfacEvents(plan, d, 0,
                             schedule.numDevices() + d * plan.refreshSteps, us,
                             *trace, fmt::format("stage {} ", d));
  return out;
}

} // namespace autoddl::cli
