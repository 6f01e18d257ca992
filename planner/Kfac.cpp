//===- Kfac.cpp - K-FAC work items of a plan, priced and packed ----------===//
//
// Prices (docs/pipefisher.md §2), per K-FAC layer with S rows (tokens) per
// micro-batch on one data-parallel rank:
//   curvature  A = XᵀX, G = dYᵀdY: S·d² multiply-adds = 2·S·d² FLOP per
//              factor and micro-batch, bf16 operands (fp32 accumulation),
//              at the cluster's GEMM efficiency for a d×d×S GEMM; with a
//              factor stride (plan --kfac-factor-stride) S is the rows of the
//              selected samples, 1/stride of them;
//   reduction  all-reduce of the fp32 factor (4·d² bytes) over the ranks
//              holding the layer (dp replicas; Chimera: both pipelines), by
//              the α-β collective model;
//   inversion  Cholesky d³/3 + inverse from the factor (potri) 2·d³/3 = d³
//              FLOP in fp32 at the cluster's large-GEMM efficiency;
//   precondition G⁻¹·∇W·A⁻¹: 2·d_out²·d_in + 2·d_out·d_in² FLOP; in a
//              16-bit plan on a GPU with a faster bf16 rate, bf16 GEMMs with
//              fp32 accumulation on bf16 copies of the inverses (the CUDA
//              program's default, backends/cuda/kfac/Kfac.h) plus the
//              gradient's rounding to bf16, a memory-bound kernel of 6 bytes
//              an element; else fp32 GEMMs (the CPU program, the fp32 build).
// Each item's time is then multiplied by the cluster's measured factor for
// its kind (gpu.kfac_time_scale: curvature, inversion, precondition or, for
// bf16 preconditioning, precondition_bf16; 1 when absent), as op_time_scale
// corrects forward and backward.
// Under tensor parallelism each tp rank is priced as computing the unsplit
// layer's K-FAC (exact factors, as one device would).
//
//===----------------------------------------------------------------------===//
#include "planner/Kfac.h"

#include "cost_model/Collectives.h"
#include "cost_model/Compute.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

namespace autoddl::planner {

using pipeline::Direction;
using pipeline::KfacLayerWork;

namespace {

/// Inversion runs in fp32 (cuSOLVER / LAPACK Cholesky: docs/kfac.md).
constexpr cost::Precision kKfacFp32 = cost::Precision::FP32;

/// Whether a plan of `precision` on `c` preconditions in bf16: a 16-bit plan
/// (the CUDA program's bf16 build, AUTODDL_KFAC_PRECOND unset) where bf16
/// GEMMs run faster than fp32 ones. Elsewhere (CPU clusters, whose CPU
/// program preconditions in fp32; GPUs without bf16 tensor cores) the fp32
/// price and its time scale stand.
bool preconditionsInBf16(const cost::Cluster &c, cost::Precision precision) {
  return cost::bulkPrecision(precision) != cost::Precision::FP32 &&
         cost::bulkPrecision(precision) != cost::Precision::TF32 &&
         c.peakFlops(cost::Precision::BF16) > c.peakFlops(kKfacFp32);
}

/// Seconds of one layer's preconditioning, G⁻¹ ∇W A⁻¹ and G⁻¹ ∇b, d = {d_in,
/// d_out}, before its time scale. fp32: the GEMMs read both fp32 inverses
/// and write and read the gradient-sized intermediate. bf16: the GEMMs read
/// the inverses' bf16 copies (2 bytes), the gradient rounded to bf16 (read
/// 2), the bf16 intermediate (written and read, 4) and write the fp32 result
/// (4); the rounding reads 4 and writes 2 bytes an element, a kernel of its
/// own.
double preconditionTime(const cost::Cluster &c, const double d[2], bool bf16) {
  const double flops = 2 * d[1] * d[1] * d[0] + 2 * d[1] * d[0] * d[0];
  const double square = d[0] * d[0] + d[1] * d[1], grad = d[0] * d[1];
  if (!bf16)
    return cost::roofline(c, flops, 4 * (square + 2 * grad), c.gemmEfficiency,
                          kKfacFp32)
        .time;
  return cost::roofline(c, flops, 2 * square + 10 * grad, c.gemmEfficiency,
                        cost::Precision::BF16)
             .time +
         cost::roofline(c, 0, 6 * grad, c.gemmEfficiency, cost::Precision::BF16)
             .time;
}

/// The linear producing the logits the loss reads, through shape-only ops
/// and a bias add; -1 when there is none.
int headLinear(const ModelGraph &g) {
  std::vector<int> producer(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (int r : g.ops[i].results)
      producer[r] = static_cast<int>(i);
  if (g.loss < 0 || producer[g.loss] < 0)
    return -1;
  const OpDef &loss = g.ops[producer[g.loss]];
  if (loss.operands.empty())
    return -1;
  int t = loss.operands[0];
  static const std::set<std::string> passThrough = {"reshape", "flatten",
                                                    "transpose", "bias_add"};
  while (t >= 0 && producer[t] >= 0) {
    const OpDef &op = g.ops[producer[t]];
    if (op.kind == "linear")
      return producer[t];
    if (!passThrough.count(op.kind) || op.operands.empty())
      return -1;
    t = op.operands[0];
  }
  return -1;
}

/// The cluster's measured / priced factor of a K-FAC item kind
/// ("curvature", "inversion", "precondition"; gpu.kfac_time_scale, which the
/// cluster reader keeps as the op time scale of kind "kfac:<item>"), 1 when
/// it has none.
double kfacTimeScale(const cost::Cluster &c, const std::string &item) {
  for (const cost::OpTimeScale &s : c.opTimeScales)
    if (s.kind == "kfac:" + item)
      return s.forward;
  return 1;
}

double product(const ops::Shape &s, size_t from, size_t to) {
  double p = 1;
  for (size_t i = from; i < to && i < s.size(); ++i)
    p *= static_cast<double>(s[i]);
  return p;
}

} // namespace

pipeline::OrError<KfacModel> kfacModel(const ModelGraph &g) {
  using R = pipeline::OrError<KfacModel>;
  KfacModel m;
  const int head = headLinear(g);
  bool blocksSeen = false;
  int linears = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpDef &op = g.ops[i];
    blocksSeen |= op.layer >= 0;
    if (op.kind != "linear")
      continue;
    ++linears;
    if (static_cast<int>(i) == head) {
      ++m.headLinears;
      continue;
    }
    const ops::Shape &x = g.tensors[op.operands[0]].shape;
    const ops::Shape &y = g.tensors[op.results[0]].shape;
    KfacLinear l;
    l.op = static_cast<int>(i);
    l.name = op.name;
    l.layer = op.layer;
    l.beforeBlocks = !blocksSeen;
    l.in = x.empty() ? 1 : x.back();
    l.out = y.empty() ? 1 : y.back();
    if (l.in > kKfacMaxFactorDim || l.out > kKfacMaxFactorDim) {
      ++m.wideLinears;
      continue;
    }
    l.rowsPerInstance = product(x, 0, x.empty() ? 0 : x.size() - 1) /
                        static_cast<double>(std::max<int64_t>(1, g.batch));
    m.linears.push_back(l);
  }
  if (m.linears.empty()) {
    if (linears == 0)
      return R::failure("--optimizer kfac: model '" + g.name +
                        "' has no linear layer for K-FAC to precondition");
    return R::failure(
        "--optimizer kfac: none of the " + std::to_string(linears) +
        " linear layers of model '" + g.name + "' can take K-FAC (" +
        std::to_string(m.headLinears) + " computes the loss's logits, " +
        std::to_string(m.wideLinears) + " wider than " +
        std::to_string(kKfacMaxFactorDim) + ", which stay first-order)");
  }
  return m;
}

std::vector<KfacLayerWork> kfacWork(const KfacModel &model,
                                    const cost::Cluster &c,
                                    const KfacCandidate &cand) {
  const Knobs &k = *cand.knobs;
  const bool chimera = k.schedule == pipeline::ScheduleKind::Chimera;
  // Ranks holding one copy of a layer: the dp replicas, and for Chimera the
  // mirrored pipeline's device (another pp rank).
  cost::GroupPlacement group = cand.dpGroup;
  if (chimera) {
    if (cand.ppGroup.nodes > 1)
      group.nodes *= 2;
    else
      group.gpusPerNode *= 2;
  }
  const bool bf16 = preconditionsInBf16(c, cand.precision);
  const double curvScale = kfacTimeScale(c, "curvature"),
               invScale = kfacTimeScale(c, "inversion"),
               preScale = kfacTimeScale(c, bf16 ? "precondition_bf16"
                                                : "precondition");
  std::vector<KfacLayerWork> out;
  for (const StageInfo &st : *cand.stages) {
    for (const KfacLinear &l : model.linears) {
      const bool here = l.layer >= 0
                            ? st.firstLayer <= l.layer && l.layer < st.endLayer
                            : (l.beforeBlocks ? st.pre : st.post);
      // Models without blocks run unpipelined: their one stage has it all.
      const bool only = cand.stages->size() == 1;
      if (!here && !only)
        continue;
      KfacLayerWork w;
      w.name = l.name;
      w.stage = st.stage;
      w.collectiveCurvature = k.tp > 1; // gathers a split operand over tp
      const double S = l.rowsPerInstance * cand.rowsScale;
      const double read = S / cand.factorStride; // the curvature's rows
      const double d[2] = {static_cast<double>(l.in),
                           static_cast<double>(l.out)};
      for (int f = 0; f < 2; ++f) {
        const double eff = cost::gemmEfficiency(c, d[f], d[f], read);
        w.curvature[f] = cost::roofline(c, 2 * read * d[f] * d[f],
                                        2 * read * d[f] * 2 + 4 * d[f] * d[f],
                                        eff, cand.precision)
                             .time *
                         curvScale;
        const double factor = 4 * d[f] * d[f];
        if (group.size() > 1)
          w.reduce[f] = cost::collectiveCost(c, cost::Collective::AllReduce,
                                             factor, group)
                            .best.time;
        w.invert[f] = cost::roofline(c, d[f] * d[f] * d[f], 3 * factor,
                                     c.gemmEfficiency, kKfacFp32)
                          .time *
                      invScale;
        w.savedBytes[f] = S * d[f] * 2; // bf16 a / g of one micro-batch
        w.factorBytes[f] = factor;
      }
      w.precondition = preconditionTime(c, d, bf16) * preScale;
      // The bf16 copies of both inverses in use (Kfac.h's A_inv_bf16).
      w.inverseCopyBytes = bf16 ? 2 * (d[0] * d[0] + d[1] * d[1]) : 0;
      out.push_back(w);
      if (chimera) { // the up pipeline's copy of this stage
        w.direction = Direction::Up;
        out.push_back(w);
      }
    }
  }
  return out;
}

namespace {
/// Per device, when each of its instructions ends in `sim`, by list index: a
/// device runs its list in order, so these rise with the index.
std::vector<std::vector<double>>
instructionEnds(const pipeline::SimulationResult &sim, size_t devices) {
  std::vector<std::vector<double>> ends(devices);
  for (const pipeline::ExecutedInstruction &e : sim.timeline)
    if (e.device >= 0 && static_cast<size_t>(e.device) < devices) {
      auto &d = ends[static_cast<size_t>(e.device)];
      if (d.size() <= static_cast<size_t>(e.index))
        d.resize(static_cast<size_t>(e.index) + 1, 0.0);
      d[static_cast<size_t>(e.index)] = e.end;
    }
  return ends;
}

/// The instruction slot of an item starting at `start`: after every
/// instruction of its device the simulation ended by then (KfacItemPlacement).
int slotOf(const std::vector<double> &ends, double start) {
  return static_cast<int>(
      std::upper_bound(ends.begin(), ends.end(), start + 1e-12) - ends.begin());
}
} // namespace

KfacPlan kfacPlan(const pipeline::Schedule &schedule,
                  const pipeline::SimulationResult &sim,
                  const std::vector<KfacLayerWork> &work,
                  const pipeline::PipeFisherResult &packed, double damping,
                  double firstOrderStep) {
  KfacPlan p;
  p.damping = damping;
  p.refreshSteps = packed.refreshSteps;
  p.filling = packed.filling;
  p.firstOrderStepTime = firstOrderStep;
  p.utilisationBefore = packed.utilisationBefore;
  p.utilisationAfter = packed.utilisationAfter;
  p.unfitted = packed.unfitted;
  for (const KfacLayerWork &w : work) {
    KfacLayerPlan l;
    l.name = w.name;
    l.stage = w.stage;
    l.direction = w.direction == Direction::Up ? "up" : "down";
    for (int f = 0; f < 2; ++f) {
      l.curvature[f] = w.curvature[f];
      l.reduce[f] = w.reduce[f];
      l.invert[f] = w.invert[f];
    }
    l.precondition = w.precondition;
    const int dev = schedule.deviceOf(w.stage, w.direction);
    if (dev >= 0 && dev < static_cast<int>(packed.devices.size()))
      l.refreshSteps = packed.devices[static_cast<size_t>(dev)].refreshSteps;
    p.layers.push_back(l);
  }
  const auto ends = instructionEnds(sim, packed.devices.size());
  for (size_t d = 0; d < packed.devices.size(); ++d) {
    const pipeline::DeviceFill &f = packed.devices[d];
    KfacDevicePlan dp;
    dp.device = static_cast<int>(d);
    dp.steps = f.steps;
    dp.refreshSteps = f.refreshSteps;
    dp.work = f.kfacWork;
    dp.precondition = f.precondition;
    dp.forced = f.forced;
    dp.utilisationBefore = f.utilisationBefore;
    dp.utilisationAfter = f.utilisationAfter;
    dp.savedBytes = f.peakSavedBytes;
    dp.factorBytes = f.factorBytes + f.inverseCopyBytes;
    const int listSize = d < schedule.devices.size()
                             ? static_cast<int>(schedule.devices[d].size())
                             : 0;
    for (const pipeline::PlacedItem &it : f.items) {
      // A forced curvature item: where its operand is made (its start).
      const bool curvature = it.kind == pipeline::KfacItemKind::CurvatureA ||
                             it.kind == pipeline::KfacItemKind::CurvatureG;
      const int slot =
          it.forced && !curvature ? listSize : slotOf(ends[d], it.start);
      KfacItemPlacement placed{std::string(pipeline::kfacItemName(it.kind)),
                               it.layer,
                               it.microbatch,
                               it.step,
                               it.start,
                               it.end,
                               it.forced,
                               slot,
                               it.pieces};
      dp.items.push_back(std::move(placed));
    }
    p.devices.push_back(std::move(dp));
  }
  return p;
}

pipeline::OrError<KfacPlan>
applyKfac(const KfacModel &model, const cost::Cluster &c,
          const KfacCandidate &cand, const pipeline::Schedule &schedule,
          const pipeline::SimulationResult &sim, const KfacSettings &s,
          std::vector<DeviceTimes> &devices, double &step, int &critical) {
  const int refresh = s.refresh;
  const std::vector<int> &deviceRefresh = s.deviceRefresh;
  const double overhead = s.overhead;
  pipeline::PipeFisherInput in;
  in.refreshSteps = refresh;
  in.deviceRefreshSteps = deviceRefresh;
  in.filling = s.filling;
  in.layers = kfacWork(model, c, cand);
  auto packed = pipeline::packKfac(schedule, sim, in);
  if (!packed)
    return pipeline::OrError<KfacPlan>::failure(packed.error());
  // Amortised where the bubbles hold too little (KAISA): each device's
  // forced tail once per K_d steps, K_d long enough for the budget. Packed
  // again over K_d steps, the bubbles hold the same or more, so the tail
  // stays within it.
  bool amortised = false;
  if (refresh == 0 && deviceRefresh.empty() && overhead > 0 && step > 0) {
    std::vector<int> pins;
    for (const pipeline::DeviceFill &f : packed->devices) {
      const double need = std::ceil(f.forced / (overhead * step) - 1e-9);
      const int k = static_cast<int>(std::min<double>(
          in.maxSteps, std::max<double>(f.refreshSteps, need)));
      amortised = amortised || k > f.refreshSteps;
      pins.push_back(k);
    }
    if (schedule.config.kind == pipeline::ScheduleKind::Chimera) // mirrored
      std::fill(pins.begin(), pins.end(),
                *std::max_element(pins.begin(), pins.end()));
    if (amortised) {
      in.deviceRefreshSteps = pins;
      packed = pipeline::packKfac(schedule, sim, in);
      if (!packed)
        return pipeline::OrError<KfacPlan>::failure(packed.error());
    }
  }
  KfacPlan plan = kfacPlan(schedule, sim, in.layers, *packed, s.damping, step);
  plan.overheadBudget = amortised ? overhead : 0;
  plan.factorStride = s.factorStride;
  if (s.factorDecay > 0)
    chooseFactorInterval(plan, s.factorDecay, s.factorEvery, overhead);
  // Each device's forced tail once per its own K_d (PipeFisher.h).
  double forcedPerStep = 0, worst = 0;
  for (size_t d = 0; d < devices.size() && d < packed->devices.size(); ++d) {
    const pipeline::DeviceFill &f = packed->devices[d];
    DeviceTimes &dt = devices[d];
    // With the running average: its average, recent and step sums, as many
    // fp32 factor-sized buffers as the factors, inverses and pending ones.
    dt.kfacBytes = f.peakSavedBytes +
                   f.factorBytes * (plan.factorDecay > 0 ? 2.0 : 1.0) +
                   f.inverseCopyBytes;
    dt.memory += dt.kfacBytes;
    forcedPerStep = std::max(forcedPerStep, f.forced / f.refreshSteps);
    const double t =
        dt.end + dt.gradSyncExposed + dt.optimizer + f.precondition;
    if (t > worst) {
      worst = t;
      critical = static_cast<int>(d);
    }
  }
  plan.refreshPinned = refresh > 0 || !deviceRefresh.empty();
  step = worst + forcedPerStep + plan.factorOverhead;
  return plan;
}

void chooseFactorInterval(KfacPlan &p, double decay, int pinned,
                          double overhead) {
  int shortest = p.refreshSteps;
  std::vector<double> curvature; // per device: its forced curvature, seconds
  for (const KfacDevicePlan &d : p.devices) {
    shortest = std::min(shortest, d.refreshSteps);
    double t = 0;
    for (const KfacItemPlacement &it : d.items)
      if (it.forced && it.item.rfind("curv_", 0) == 0)
        t += it.end - it.start;
    curvature.push_back(t);
  }
  int f = std::min(pinned, shortest);
  if (f < 1) {
    f = 1;
    const double budget = overhead * p.firstOrderStepTime;
    for (double t : curvature)
      f = std::max(f, budget > 0 ? static_cast<int>(std::min<double>(
                                       shortest, std::ceil(t / budget - 1e-9)))
                                 : shortest);
  }
  p.factorDecay = decay;
  p.factorEvery = f;
  p.factorOverhead = 0;
  for (size_t d = 0; d < curvature.size(); ++d)
    p.factorOverhead =
        std::max(p.factorOverhead,
                 curvature[d] * (1.0 / f - 1.0 / p.devices[d].refreshSteps));
}

} // namespace autoddl::planner
