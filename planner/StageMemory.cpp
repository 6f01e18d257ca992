//===- StageMemory.cpp - the programs' memory per pipeline rank --------===//
//
// Activation sets in flight per stage (as the schedule keeps them), the
// gradients a stage's sets share, the bytes of a layer kept or recomputed, and
// how many layers each rank recomputes to fit: the memory model of
// docs/planner.md §4 (Planner.h).
//
//===----------------------------------------------------------------------===//
#include "planner/Planner.h"

#include "cost_model/pipeline/ActivationSets.h"

#include <algorithm>

namespace autoddl::planner::search {
const std::vector<int> &Planner::activationSets(const Knobs &k) const {
  const int v = k.schedule == ScheduleKind::Interleaved ? k.chunks : 1;
  const auto key = std::make_tuple(static_cast<int>(k.schedule), k.pp,
                                   static_cast<int>(k.microbatches), v);
  auto it = setsMemo.find(key);
  if (it != setsMemo.end())
    return it->second;
  std::vector<int> counts(size_t(k.pp * v), int(k.microbatches));
  pipeline::ScheduleConfig sc{k.schedule, k.pp,
                              static_cast<int>(k.microbatches), v};
  // K-FAC plans too: their curvature reads a set where its operand is made,
  // or a copy made there (counted in the K-FAC state; codegen alike).
  if (auto sched = pipeline::generateSchedule(sc))
    if (auto sets = pipeline::countActivationSets(*sched))
      counts = *std::move(sets);
  return setsMemo.emplace(key, std::move(counts)).first->second;
}

Planner::LayerBytes Planner::layerBytes(const Knobs &k,
                                        const SegmentCost &lay) const {
  // The gradients are once per stage where its sets share them.
  const bool share = pipeline::setsShareGradients(k.schedule, kfac.has_value());
  const double grad = share ? lay.programGradBytes : 0,
               hostGrad = share ? lay.hostGradBytes : 0;
  LayerBytes b{lay.programBytes - grad, lay.programBytes - grad,
               lay.hostBytes - hostGrad, lay.hostBytes - hostGrad};
  b.sharedKept = b.sharedKeptRc = grad;
  b.sharedHost = b.sharedHostRc = hostGrad;
  const double toHost = 4.0 / o.activationElementBytes;
  if (k.recompute == cost::Recompute::Full) {
    // The layer's output, which the next layer reads, and its gradient,
    // which the next layer's backward writes; the rest is scratch.
    b.keptRc = (share ? 1 : 2) * lay.savedFull;
    b.sharedKeptRc = share ? lay.savedFull : 0;
    b.hostRc = b.keptRc * toHost;
    b.sharedHostRc = b.sharedKeptRc * toHost;
    b.scratch = lay.programBytes - 2 * lay.savedFull;
    b.hostScratch = lay.hostBytes - 2 * lay.savedFull * toHost;
  } else if (k.recompute == cost::Recompute::Selective) {
    // The attention probabilities (selectiveRecomputes): the CUDA program's
    // fused attention keeps none, the CPU program drops its own.
    b.hostRc = lay.hostBytes - hostGrad - lay.hostScores;
    b.hostScratch = lay.hostScores;
  }
  return b;
}

cost::RankMemory Planner::programMemory(const Knobs &k, const DevicePlan &d,
                                        const Aggregate &agg, int dev,
                                        double rc, double stepGraph) const {
  return programMemory(k, d, agg, rankStages(k, d, agg, dev), rc, stepGraph);
}

Planner::RankStages Planner::rankStages(const Knobs &k, const DevicePlan &d,
                                        const Aggregate &agg, int dev) const {
  const SegmentCost &pre = agg.seg[0], &lay = agg.seg[1], &post = agg.seg[2];
  RankStages r;
  r.dev = dev;
  double &ws = r.ws;
  const std::vector<int> &sets = activationSets(k);
  const bool share = pipeline::setsShareGradients(k.schedule, kfac.has_value());
  for (int id : d.rankStageIds[dev]) {
    const StageInfo &st = d.stages[id];
    const double n = st.endLayer - st.firstLayer;
    r.layers += n;
    r.stageLayers.push_back(n);
    r.sets.push_back(sets[size_t(st.stage)]);
    const double toHost = 4.0 / o.activationElementBytes;
    double perMb =
        (st.pre ? pre.programBytes : 0) + (st.post ? post.programBytes : 0);
    double hostPerMb =
        (st.pre ? pre.hostBytes : 0) + (st.post ? post.hostBytes : 0);
    double shared = 0, hostShared = 0;
    if (share) {
      shared = (st.pre ? pre.programGradBytes : 0) +
               (st.post ? post.programGradBytes : 0);
      hostShared =
          (st.pre ? pre.hostGradBytes : 0) + (st.post ? post.hostGradBytes : 0);
      perMb -= shared;
      hostPerMb -= hostShared;
      if (!st.post) { // the output's gradient is received into one a set
        perMb += lay.p2pBytes;
        hostPerMb += lay.p2pBytes * toHost;
      }
    }
    if (st.stage > 0) { // the received input and its gradient
      perMb += 2 * lay.p2pBytes;
      hostPerMb += 2 * lay.p2pBytes * toHost;
    }
    r.perMb.push_back(perMb);
    r.hostPerMb.push_back(hostPerMb);
    r.shared.push_back(shared);
    r.hostShared.push_back(hostShared);
    ws = std::max({ws, lay.workspace, st.pre ? pre.workspace : 0,
                   st.post ? post.workspace : 0});
    r.fp8WeightCopies += n * lay.fp8WeightCopies +
                         (st.pre ? pre.fp8WeightCopies : 0) +
                         (st.post ? post.fp8WeightCopies : 0);
  }
  return r;
}

cost::RankMemory Planner::programMemory(const Knobs &k, const DevicePlan &d,
                                        const Aggregate &agg,
                                        const RankStages &r, double rc,
                                        double stepGraph) const {
  const SegmentCost &lay = agg.seg[1];
  const LayerBytes lb = layerBytes(k, lay);
  const int dev = r.dev;
  const double ws = r.ws;
  // Per stage, its sets of its kept layers (recomputed by the rank's first
  // stages first); a stage that recomputes holds one scratch besides.
  double acts = 0, host = 0, scratches = 0, left = std::min(rc, r.layers);
  for (size_t i = 0; i < r.stageLayers.size(); ++i) {
    const double n = r.stageLayers[i], x = std::min(left, n);
    if (x > 0)
      scratches += 1;
    left -= x;
    acts += r.sets[i] * (r.perMb[i] + (n - x) * lb.kept + x * lb.keptRc) +
            r.shared[i] + (n - x) * lb.sharedKept + x * lb.sharedKeptRc;
    host += r.sets[i] * (r.hostPerMb[i] + (n - x) * lb.host + x * lb.hostRc) +
            r.hostShared[i] + (n - x) * lb.sharedHost + x * lb.sharedHostRc;
  }
  cost::ModelStateInputs si;
  si.params = d.params[dev];
  si.dataParallel = k.dp;
  si.zeroStage = k.zero;
  si.bytes = cost::cudaProgramAdamW();
  cost::RankMemory m;
  m.state = cost::modelStateBytes(si);
  m.activations = acts + scratches * lb.scratch;
  // The FP8 weight copies live through the step, beside the transient
  // workspace.
  m.workspace = ws + r.fp8WeightCopies + cost::kCublasLtWorkspaceBytes;
  m.graph = agg.graphBytes;
  const int comms = (k.pp > 1 ? 2 : 0) + (k.dp > 1) + (k.tp > 1);
  m.overhead =
      o.cudaOverheads
          ? cost::cudaOverheadEstimateBytes(comms, stepGraph > 0, m.allocated())
          : 0;
  si.bytes = cost::cpuProgramAdamW();
  m.host =
      cost::modelStateBytes(si).total() + host + scratches * lb.hostScratch;
  return m;
}

void Planner::chooseRecomputeLayers(const Knobs &k, DevicePlan &d,
                                    const Aggregate &agg,
                                    bool stepGraph) const {
  if (k.recompute == cost::Recompute::None)
    return;
  const LayerBytes lb = layerBytes(k, agg.seg[1]);
  const double limit = capacity - cost::planningMarginBytes(capacity);
  const double saving = lb.kept - lb.keptRc;
  for (int dev = 0; dev < k.pp; ++dev) {
    double layers = 0;
    for (int id : d.rankStageIds[dev])
      if (const StageInfo &st = d.stages[id]; st.device == dev)
        layers += st.endLayer - st.firstLayer;
    // Nothing to save (selective under a fused attention): none.
    double rc = saving > 0 ? layers : 0;
    const RankStages r = rankStages(k, d, agg, dev);
    if (saving > 0 && k.schedule != ScheduleKind::Chimera &&
        !o.fixed.recomputeAllLayers)
      for (double x = 0; x < layers; ++x)
        if (programMemory(k, d, agg, r, x, stepGraph).total() <= limit) {
          rc = x;
          break;
        }
    double left = rc;
    for (int id : d.rankStageIds[dev]) {
      StageInfo &st = d.stages[id];
      if (st.device != dev)
        continue;
      const int n = st.endLayer - st.firstLayer;
      st.recomputeLayers = static_cast<int>(std::min<double>(n, left));
      left -= st.recomputeLayers;
    }
  }
  if (k.schedule == ScheduleKind::Chimera)
    for (StageInfo &st : d.stages)
      st.recomputeLayers = st.endLayer - st.firstLayer;
}
} // namespace autoddl::planner::search
