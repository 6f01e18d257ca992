//===- Search.cpp - outer loops, step pricing, the chosen plan -----------===//
#include "planner/Search.h"

#include "cost_model/Compute.h"
#include "cost_model/pipeline/ActivationSets.h"
#include "cost_model/pipeline/Simulator.h"
#include "planner/Collapse.h"
#include "planner/Descent.h"
#include "planner/Kfac.h"
#include "planner/Pricing.h"
#include "planner/Runnable.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <tuple>

namespace autoddl::planner {

using cost::Sbp;
using pipeline::ScheduleKind;

std::string axisOrderName(AxisOrder o) {
  return o == AxisOrder::TensorInner ? "pp,dp,tp" : "pp,tp,dp";
}

std::string recomputeName(cost::Recompute r) {
  switch (r) {
  case cost::Recompute::None:
    return "none";
  case cost::Recompute::Selective:
    return "selective";
  case cost::Recompute::Full:
    return "full";
  }
  return "none";
}

bool parseRecompute(const std::string &s, cost::Recompute &out) {
  for (cost::Recompute r : {cost::Recompute::None, cost::Recompute::Selective,
                            cost::Recompute::Full})
    if (s == recomputeName(r)) {
      out = r;
      return true;
    }
  return false;
}

bool selectiveRecomputes(const std::string &kind, bool fusedAttention) {
  return kind == "attention" && !fusedAttention;
}

bool applyStack(const std::string &name, PlannerOptions &o) {
  if (name == "modern") {
    o.kernels = cost::KernelOptions{};
    o.overlapGradSync = true;
    o.gradSyncElementBytes = o.activationElementBytes;
    o.overlapP2p = true;
    o.stack = name;
    return true;
  }
  if (name == "megatron-2021") {
    o.kernels.attention = cost::AttentionKernel::Unfused;
    o.kernels.attentionDropout = 0.1; // Megatron-LM's --attention-dropout
    o.overlapGradSync = false;
    o.gradSyncElementBytes = 4;
    o.overlapP2p = false;
    o.stack = name;
    return true;
  }
  return false;
}

std::string knobsToString(const Knobs &k) {
  std::string s =
      "tp=" + std::to_string(k.tp) + " pp=" + std::to_string(k.pp) +
      " dp=" + std::to_string(k.dp) +
      " microbatch=" + std::to_string(k.microbatch) +
      " microbatches=" + std::to_string(k.microbatches) +
      " schedule=" + std::string(pipeline::scheduleName(k.schedule));
  if (k.schedule == ScheduleKind::Interleaved)
    s += " chunks=" + std::to_string(k.chunks);
  s += " recompute=" + recomputeName(k.recompute) +
       " zero=" + std::to_string(k.zero) + " order=" + axisOrderName(k.order);
  return s;
}

namespace {

/// Micro-batches each stage of a device runs in a step: a Chimera device holds
/// one stage of each of its two pipelines, each running half of them
/// (Schedule.cpp, chimeraDevice); otherwise every stage (or interleaved
/// chunk) runs all of them.
double microbatchesPerStage(const Knobs &k) {
  const double mb = static_cast<double>(k.microbatches);
  return k.schedule == pipeline::ScheduleKind::Chimera ? mb / 2 : mb;
}

/// A mesh and micro-batch size with its searched SBP assignments.
struct Context {
  SearchGraph sg; // own copy: signatures depend on (tp, b)
  std::unique_ptr<PricingContext> pricing;
  std::unique_ptr<Incidence> incidence;
  std::vector<Assignment> assignments; // distinct results of the inner search
  std::vector<Aggregate> aggregates;
  int variables = -1; // descent variables left by the eliminations
};

using Partition = StagePartition;

struct Candidate {
  Knobs knobs;
  Partition partition = Partition::Balanced;
  Context *ctx = nullptr;
  int assignment = 0;
  double lowerBound = 0;
  double memoryEstimate = 0;
  int64_t order = 0; // generation index (tie-breaker)
};

/// A fully priced candidate.
struct Priced {
  bool valid = false;
  std::string invalid; // why not, when !valid
  double stepTime = 0, peakMemory = 0;
  bool fits = false;
  std::vector<DeviceTimes> devices;
  std::vector<StageInfo> stages;
  std::vector<int> layersPerStage;
  double p2p = 0;
  pipeline::StageTimes times;
  pipeline::SimulationResult sim;
  Prediction pred;
  cost::RankMemory peakParts;
  int criticalDevice = 0;
  std::optional<KfacPlan> kfac; // --optimizer kfac
  double kfacPeak = 0;          // K-FAC bytes of the peak-memory rank
};

struct Planner {
  const ModelGraph &g1;
  const cost::Cluster &c;
  const PlannerOptions &o;
  SearchGraph base;
  /// partition()'s balanced results by (stages, layer, pre and post times).
  mutable std::map<std::tuple<int, double, double, double>, std::vector<int>>
      partitionMemo;
  /// price()'s schedules by (kind, stages, micro-batches, chunks).
  std::map<std::tuple<int, int, int, int>,
           pipeline::OrError<pipeline::Schedule>>
      scheduleMemo;
  /// activationSets()'s counts by the same key.
  mutable std::map<std::tuple<int, int, int, int>, std::vector<int>> setsMemo;
  std::map<std::tuple<int, int, int64_t, int>, std::unique_ptr<Context>>
      contexts;
  std::vector<std::string> previousBest; // signature names of the last best
  SearchStats stats;
  double capacity = 0;
  double flopsPerSample = 0;
  /// No tensor scales with the batch (a gcn training on its whole graph, an
  /// explicit graph): a micro-batch is one instance of the model as imported,
  /// and the global batch counts instances.
  bool fixedShapes = false;
  /// A graph model's node count (gcn, gat: a sparse adjacency), else 0. Its
  /// dp splits the nodes, not the batch: every dp rank runs each instance
  /// (the whole graph) on its own block of rows.
  int64_t graphNodes = 0;
  std::optional<KfacModel> kfac; // --optimizer kfac: its layers

  Planner(const ModelGraph &g, const cost::Cluster &cl,
          const PlannerOptions &op)
      : g1(g), c(cl), o(op), runnable(g) {
    capacity = c.hbmBytes;
    flopsPerSample = static_cast<double>(g.forwardFlopsPerSample());
  }

  /// Called once the search graph is built (it knows the batch dims).
  void setFixedShapes() {
    fixedShapes = true;
    for (int d : base.shapes->batchDim)
      fixedShapes &= d < 0;
    if (fixedShapes) // FLOPs of one instance: all the samples it holds
      flopsPerSample *= static_cast<double>(std::max<int64_t>(1, g1.batch));
    if (fixedShapes)
      graphNodes = g1.graphNodes();
  }

  /// Instances (samples) one data-parallel replica runs per step: its share
  /// of the global batch, or all of it when dp splits a graph's nodes.
  int64_t replicaInstances(int dp) const {
    return graphNodes > 0 ? o.globalBatch : o.globalBatch / dp;
  }

  int stagesOf(const Knobs &k) const {
    return k.schedule == ScheduleKind::Interleaved ? k.pp * k.chunks : k.pp;
  }

  Context *context(int tp, int pp, int64_t b, AxisOrder order,
                   std::string &error) {
    auto key = std::make_tuple(tp, pp, b, static_cast<int>(order));
    auto it = contexts.find(key);
    if (it != contexts.end())
      return it->second->pricing ? it->second.get() : nullptr;
    auto ctx = std::make_unique<Context>();
    ctx->sg = base;
    const int world = c.worldSize();
    const int dp = world / (tp * pp);
    const int64_t m = replicaInstances(dp) / b;
    auto pricing = std::make_unique<PricingContext>(ctx->sg, c, o, tp, dp, pp,
                                                    b, m, order);
    Context *raw = ctx.get();
    contexts.emplace(key, std::move(ctx));
    if (!pricing->valid()) {
      error = pricing->error();
      return nullptr;
    }
    raw->pricing = std::move(pricing);
    raw->incidence = std::make_unique<Incidence>(raw->sg);
    searchSbp(*raw);
    return raw;
  }

  /// The inner search: descent from each start, with and without a memory term.
  void searchSbp(Context &ctx) {
    PricingContext &p = *ctx.pricing;
    std::vector<Assignment> starts = {pureDataParallelStart(p),
                                      megatronStart(p)};
    if (!previousBest.empty())
      starts.push_back(namedStart(p, previousBest));
    const double ref = p.referenceTime();
    // The memory weight makes "all of the device's memory" cost as much as the
    // all-replicated step: it trades time for the memory-lean layouts
    // (sequence parallelism) that let bigger micro-batches or less
    // recomputation fit.
    for (double lambda : {0.0, 1.0}) {
      p.setMemoryWeight(lambda * ref / std::max(1.0, capacity));
      // Exact eliminations first (Collapse.h); the descent and the oracle run
      // on the ops that remain. Tables too large to build: the plain search.
      ReducedProblem rp(p);
      if (rp.ok())
        ctx.variables = static_cast<int>(rp.live().size());
      std::vector<DescentResult> results;
      for (const Assignment &s : starts) {
        ++stats.descents;
        results.push_back(rp.ok() ? reducedDescent(p, rp, s)
                                  : coordinateDescent(p, *ctx.incidence, s));
      }
      if (o.mode == SearchMode::Exhaustive) {
        double ub = results.front().objective;
        for (const DescentResult &r : results)
          ub = std::min(ub, r.objective);
        const auto limit = static_cast<int64_t>(o.exhaustiveLimit);
        std::optional<DescentResult> exact =
            rp.ok() ? reducedExhaustive(p, rp, ub, limit)
                    : exhaustiveSearch(p, *ctx.incidence, ub, limit);
        results.clear();
        if (exact)
          results.push_back(*exact);
        else
          exhaustiveTooLarge = true;
      }
      for (const DescentResult &r : results) {
        bool seen = false;
        for (const Assignment &x : ctx.assignments)
          seen |= x == r.assignment;
        if (!seen)
          ctx.assignments.push_back(r.assignment);
      }
    }
    p.setMemoryWeight(0);
    for (const Assignment &a : ctx.assignments)
      ctx.aggregates.push_back(p.aggregate(a));
  }
  bool exhaustiveTooLarge = false;
  std::vector<std::string> refusals; // why enumerate() refused meshes, distinct
  RunnableConfigurations runnable;   // what the programs run (Runnable.h)

  /// Layers per model stage: Uniform gives every stage floor(L/S) and the
  /// remainder to the first ones (Megatron); Balanced minimises the largest
  /// stage time given the embedding on the first and the head on the last
  /// stage.
  std::vector<int> partition(Partition kind, int S,
                             const Aggregate &agg) const {
    const int L = static_cast<int>(base.layers);
    std::vector<int> n(S, L / S);
    for (int s = 0; s < L % S; ++s)
      n[s]++;
    if (kind == Partition::Uniform || S == 1)
      return n;
    const SegmentCost &pre = agg.seg[0], &lay = agg.seg[1], &post = agg.seg[2];
    const double tl = lay.forward + lay.backward;
    const double tPre = pre.forward + pre.backward;
    const double tPost = post.forward + post.backward;
    // The result depends on these times alone, and candidates that differ
    // in knobs the layer times do not see (schedule, recomputation, ZeRO)
    // ask again: priced once per distinct (S, times).
    const auto key = std::make_tuple(S, tl, tPre, tPost);
    if (auto it = partitionMemo.find(key); it != partitionMemo.end())
      return it->second;
    std::vector<int> best = n;
    auto maxTime = [&](const std::vector<int> &x) {
      double m = 0;
      for (int s = 0; s < S; ++s)
        m = std::max(m, x[s] * tl + (s == 0 ? tPre : 0) +
                            (s == S - 1 ? tPost : 0));
      return m;
    };
    double bestT = maxTime(n);
    // The first stage from 1 to twice L/S layers (the embedding is light),
    // the last from 1 to L/S + 1 (the head is heavy; with two stages it takes
    // the rest), the others spread evenly: O(L^2 / S) partitions priced.
    // maxTime of such a partition in O(1): the middle stages' largest time
    // is that of the largest middle count (a max is one of its terms, so the
    // value is bit-identical to maxTime's loop); no vector per candidate.
    const int mid = S - 2;
    const int firstMax = std::min(L - (S - 1), 2 * (L / S) + 2);
    int bestFirst = 0, bestLast = 0;
    for (int first = 1; first <= firstMax; ++first) {
      const double tFirst = first * tl + tPre;
      for (int last = S == 2 ? L - first : 1;
           last <= std::min(L - first - mid, S == 2 ? L : L / S + 1); ++last) {
        double t = std::max(0.0, tFirst);
        if (mid > 0) {
          const int rest = L - first - last;
          t = std::max(t, (rest / mid + (rest % mid > 0 ? 1 : 0)) * tl);
        }
        t = std::max(t, last * tl + tPost);
        if (t < bestT * (1 - 1e-12)) {
          bestT = t;
          bestFirst = first;
          bestLast = last;
        }
      }
    }
    if (bestFirst > 0) {
      const int rest = L - bestFirst - bestLast;
      best.assign(S, 0);
      best[0] = bestFirst;
      best[S - 1] = bestLast;
      for (int s = 1; s < S - 1; ++s)
        best[s] = rest / mid + ((s - 1) < rest % mid ? 1 : 0);
    }
    partitionMemo.emplace(key, best);
    return best;
  }

  /// Per model stage: the activation sets the programs allocate for this
  /// schedule (pipeline::assignActivationSets, as codegen; K-FAC's curvature
  /// reads, placed after pricing, are not counted). A configuration the
  /// schedule rejects keeps every micro-batch (price() refuses it anyway).
  const std::vector<int> &activationSets(const Knobs &k) const {
    const int v = k.schedule == ScheduleKind::Interleaved ? k.chunks : 1;
    const auto key = std::make_tuple(static_cast<int>(k.schedule), k.pp,
                                     static_cast<int>(k.microbatches), v);
    auto it = setsMemo.find(key);
    if (it != setsMemo.end())
      return it->second;
    std::vector<int> counts(size_t(k.pp * v), int(k.microbatches));
    pipeline::ScheduleConfig sc{k.schedule, k.pp,
                                static_cast<int>(k.microbatches), v};
    // K-FAC plans keep every micro-batch's set for the step (its curvature
    // reads them when a filling thread gets to it; codegen alike).
    if (auto sched = pipeline::generateSchedule(sc))
      if (auto sets = pipeline::assignActivationSets(
              *sched, kfac ? pipeline::stepEndReads(*sched)
                           : std::vector<pipeline::SetRead>{}))
        counts = sets->count;
    return setsMemo.emplace(key, std::move(counts)).first->second;
  }

  /// Per-device stage times, memory and bounds without simulating.
  struct DevicePlan {
    std::vector<StageInfo> stages;
    std::vector<int> layers;
    pipeline::StageTimes times;       // as the simulator indexes them
    std::vector<DeviceTimes> devices; // per pipeline rank
    std::vector<double> params;       // parameter elements per device
    std::vector<double> gradDp, gradDpTp;
    std::vector<cost::RankMemory> memory; // per pipeline rank (programs)
    /// Per pipeline rank, the stages it runs in stage order (with Chimera,
    /// the up pipeline's copies too): the per-rank sums walk these, not
    /// every stage per rank (O(stages), not O(pp x stages), per plan).
    std::vector<std::vector<int>> rankStageIds;
  };

  /// Bytes one layer of a stage keeps per micro-batch in the programs (CUDA,
  /// CPU), recomputed or not, and the scratch one stage that recomputes holds
  /// once for the buffers its recomputed layers drop (codegen/emit/
  /// Recompute.cpp; docs/cost-model.md §5.4).
  struct LayerBytes {
    double kept = 0, keptRc = 0, host = 0, hostRc = 0;
    double scratch = 0, hostScratch = 0;
  };
  LayerBytes layerBytes(const Knobs &k, const SegmentCost &lay) const {
    LayerBytes b{lay.programBytes, lay.programBytes, lay.hostBytes,
                 lay.hostBytes};
    if (k.recompute == cost::Recompute::Full) {
      // The layer's output, which the next layer reads, and its gradient,
      // which the next layer's backward writes; the rest is scratch.
      b.keptRc = 2 * lay.savedFull;
      b.hostRc = b.keptRc * 4.0 / o.activationElementBytes;
      b.scratch = lay.programBytes - b.keptRc;
      b.hostScratch = lay.hostBytes - b.hostRc;
    } else if (k.recompute == cost::Recompute::Selective) {
      // The attention probabilities (selectiveRecomputes): the CUDA program's
      // fused attention keeps none, the CPU program drops its own.
      b.hostRc = lay.hostBytes - lay.hostScores;
      b.hostScratch = lay.hostScores;
    }
    return b;
  }

  /// The programs' memory of pipeline rank `dev` with `rc` layers recomputed
  /// on it: state, the activation sets of the stages it runs (as many per
  /// stage as its schedule keeps in flight: activationSets), and the
  /// workspaces.
  cost::RankMemory programMemory(const Knobs &k, const DevicePlan &d,
                                 const Aggregate &agg, int dev, double rc,
                                 double stepGraph) const {
    return programMemory(k, d, agg, rankStages(k, d, agg, dev), rc, stepGraph);
  }

  /// What programMemory sums over the stages rank `dev` runs; it does not
  /// depend on the layers recomputed, so chooseRecomputeLayers sums it once
  /// per rank, not once per count it tries (O(layers) instead of
  /// O(layers x stages) per rank).
  struct RankStages {
    int dev = 0;
    double layers = 0, ws = 0;
    // The rank's stages in order: layers, the bytes of one set outside the
    // layers (CUDA, CPU), and the sets.
    std::vector<double> stageLayers, perMb, hostPerMb, sets;
  };
  RankStages rankStages(const Knobs &k, const DevicePlan &d,
                        const Aggregate &agg, int dev) const {
    const SegmentCost &pre = agg.seg[0], &lay = agg.seg[1], &post = agg.seg[2];
    RankStages r;
    r.dev = dev;
    double &ws = r.ws;
    const std::vector<int> &sets = activationSets(k);
    for (int id : d.rankStageIds[dev]) {
      const StageInfo &st = d.stages[id];
      const double n = st.endLayer - st.firstLayer;
      r.layers += n;
      r.stageLayers.push_back(n);
      r.sets.push_back(sets[size_t(st.stage)]);
      double perMb =
          (st.pre ? pre.programBytes : 0) + (st.post ? post.programBytes : 0);
      double hostPerMb =
          (st.pre ? pre.hostBytes : 0) + (st.post ? post.hostBytes : 0);
      if (st.stage > 0) { // the received input and its gradient
        perMb += 2 * lay.p2pBytes;
        hostPerMb += 2 * lay.p2pBytes * 4.0 / o.activationElementBytes;
      }
      r.perMb.push_back(perMb);
      r.hostPerMb.push_back(hostPerMb);
      ws = std::max({ws, lay.workspace, st.pre ? pre.workspace : 0,
                     st.post ? post.workspace : 0});
    }
    return r;
  }

  cost::RankMemory programMemory(const Knobs &k, const DevicePlan &d,
                                 const Aggregate &agg, const RankStages &r,
                                 double rc, double stepGraph) const {
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
      acts += r.sets[i] * (r.perMb[i] + (n - x) * lb.kept + x * lb.keptRc);
      host += r.sets[i] * (r.hostPerMb[i] + (n - x) * lb.host + x * lb.hostRc);
    }
    cost::ModelStateInputs si;
    si.params = d.params[dev];
    si.dataParallel = k.dp;
    si.zeroStage = k.zero;
    si.bytes = cost::cudaProgramAdamW();
    cost::RankMemory m;
    m.state = cost::modelStateBytes(si);
    m.activations = acts + scratches * lb.scratch;
    m.workspace = ws + cost::kCublasLtWorkspaceBytes;
    const int comms = (k.pp > 1 ? 2 : 0) + (k.dp > 1) + (k.tp > 1);
    m.overhead = o.cudaOverheads ? cost::cudaOverheadEstimateBytes(
                                       comms, stepGraph > 0, m.allocated())
                                 : 0;
    si.bytes = cost::cpuProgramAdamW();
    m.host =
        cost::modelStateBytes(si).total() + host + scratches * lb.hostScratch;
    return m;
  }

  /// The layers each stage recomputes: none without recomputation; else, per
  /// rank, the fewest that bring its peak plus the margin within capacity
  /// (the first stages of a rank first), all when even that does not fit.
  void chooseRecomputeLayers(const Knobs &k, DevicePlan &d,
                             const Aggregate &agg, bool stepGraph) const {
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
      if (saving > 0 && k.schedule != ScheduleKind::Chimera)
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

  DevicePlan layout(const Knobs &k, Partition part, const Aggregate &agg,
                    const PricingContext &pc) const {
    DevicePlan d;
    const int S = stagesOf(k);
    d.layers = partition(part, S, agg);
    const SegmentCost &pre = agg.seg[0], &lay = agg.seg[1], &post = agg.seg[2];
    double rcLayer = 0;
    if (k.recompute == cost::Recompute::Selective)
      rcLayer = lay.selectiveRecompute;
    else if (k.recompute == cost::Recompute::Full)
      rcLayer = lay.forward;
    d.devices.assign(k.pp, {});
    d.params.assign(k.pp, 0);
    d.gradDp.assign(k.pp, 0);
    d.gradDpTp.assign(k.pp, 0);
    d.rankStageIds.assign(k.pp, {});
    int layer = 0;
    const bool chimera = k.schedule == ScheduleKind::Chimera;
    for (int s = 0; s < S; ++s) {
      StageInfo st;
      st.stage = s;
      st.device = s % k.pp;
      st.chunk = s / k.pp;
      st.firstLayer = layer;
      layer += d.layers[s];
      st.endLayer = layer;
      st.pre = s == 0;
      st.post = s == S - 1;
      d.stages.push_back(st);
      const double n = d.layers[s];
      auto addTo = [&](int dev) {
        d.params[dev] += n * lay.paramElems + (st.pre ? pre.paramElems : 0) +
                         (st.post ? post.paramElems : 0);
        d.gradDp[dev] += n * lay.gradBytesDp + (st.pre ? pre.gradBytesDp : 0) +
                         (st.post ? post.gradBytesDp : 0);
        d.gradDpTp[dev] += n * lay.gradBytesDpTp +
                           (st.pre ? pre.gradBytesDpTp : 0) +
                           (st.post ? post.gradBytesDpTp : 0);
      };
      addTo(st.device);
      d.rankStageIds[st.device].push_back(s);
      if (chimera) {
        addTo(k.pp - 1 - st.device); // the up pipeline's copy of this stage
        if (k.pp - 1 - st.device != st.device)
          d.rankStageIds[k.pp - 1 - st.device].push_back(s);
      }
    }
    // A rank running the first and the last stage holds a tied embedding once
    // (the programs keep one Param).
    for (int dev = 0; dev < k.pp; ++dev) {
      bool first = false, last = false;
      for (int id : d.rankStageIds[dev]) {
        first |= d.stages[id].pre;
        last |= d.stages[id].post;
      }
      if (first && last)
        d.params[dev] -= pre.sharedParamElems;
    }
    const bool graph = pc.stepGraph();
    chooseRecomputeLayers(k, d, agg, graph);
    d.memory.clear();
    for (int dev = 0; dev < k.pp; ++dev) {
      double rc = 0;
      for (int id : d.rankStageIds[dev])
        rc += d.stages[id].recomputeLayers;
      d.memory.push_back(programMemory(k, d, agg, dev, rc, graph));
    }
    // Blocking transfers (Megatron-LM 2021 synchronises after each p2p): a
    // stage's forward ends with sending its output, its backward with sending
    // the input gradient; both occupy the rank.
    const double p2p = k.pp > 1 ? pc.sendRecv(lay.p2pBytes) : 0;
    const double blocking = o.overlapP2p ? 0 : p2p;
    std::vector<double> F(S), B(S), W(S);
    for (int s = 0; s < S; ++s) {
      const StageInfo &st = d.stages[s];
      const double n = d.layers[s], rc = st.recomputeLayers;
      F[s] = n * lay.forward + (st.pre ? pre.forward : 0) +
             (st.post ? post.forward : 0);
      B[s] = n * lay.backward + rc * rcLayer + (st.pre ? pre.backward : 0) +
             (st.post ? post.backward : 0);
      W[s] = n * lay.weightGradient + (st.pre ? pre.weightGradient : 0) +
             (st.post ? post.weightGradient : 0);
      const double sendF = s < S - 1 ? blocking : 0,
                   sendB = s > 0 ? blocking : 0;
      F[s] += sendF;
      B[s] += sendB;
      auto addTo = [&](int dev) {
        DeviceTimes &dt = d.devices[dev];
        dt.forward += F[s];
        dt.backward += B[s];
        dt.weightGradient += W[s];
        dt.forwardComm += n * lay.forwardComm + (st.pre ? pre.forwardComm : 0) +
                          (st.post ? post.forwardComm : 0) + sendF;
        dt.backwardComm += sendB;
        dt.backwardComm +=
            n * lay.backwardComm + (st.pre ? pre.backwardComm : 0) +
            (st.post ? post.backwardComm : 0) +
            (k.recompute == cost::Recompute::Full ? rc * lay.forwardComm : 0);
        dt.recompute += rc * rcLayer;
      };
      addTo(st.device);
      if (chimera)
        addTo(k.pp - 1 - st.device); // the up pipeline's copy of this stage
    }
    // Simulator times: per device for interleaved, per stage otherwise.
    if (k.schedule == ScheduleKind::Interleaved) {
      d.times.forward.assign(k.pp, 0);
      d.times.backward.assign(k.pp, 0);
      d.times.weightGradient.assign(k.pp, 0);
      for (int s = 0; s < S; ++s) {
        d.times.forward[s % k.pp] += F[s];
        d.times.backward[s % k.pp] += B[s];
      }
    } else {
      d.times.forward = F;
      d.times.backward = B;
      d.times.weightGradient.assign(S, 0);
      if (k.schedule == ScheduleKind::ZeroBubbleH1)
        d.times.weightGradient = W;
    }
    d.times.p2p = p2p;
    return d;
  }

  /// Gradient sync and optimizer of one device, with the overlap model of
  /// docs/planner.md: the sync runs bucketed behind the last micro-batch's
  /// backward; what does not fit, and at least the last bucket, is exposed.
  void syncAndOptimizer(const Knobs &k, const PricingContext &pc,
                        DevicePlan &d) const {
    for (int dev = 0; dev < k.pp; ++dev) {
      DeviceTimes &dt = d.devices[dev];
      const double bytes = d.gradDp[dev] + d.gradDpTp[dev];
      const double window =
          dt.backward /
          (k.schedule == ScheduleKind::Interleaved ? k.chunks : 1);
      const double wide = o.gradSyncElementBytes / o.activationElementBytes;
      auto reduce = [&](cost::Collective coll) {
        return pc.bucketed(coll, wide * d.gradDp[dev], pc.dpGroup()) +
               pc.bucketed(coll, wide * d.gradDpTp[dev], pc.dpTpGroup());
      };
      const double bucketShare =
          bytes > 0 ? std::min(1.0, o.bucketBytes / bytes) : 0;
      double exposed = 0, full = 0;
      if (k.zero == 0) {
        full = reduce(cost::Collective::AllReduce);
        exposed = std::max(full - window, full * bucketShare);
      } else {
        // ZeRO: reduce-scatter the gradients, all-gather the updated weights
        // (hidden behind the next forward but for its first bucket).
        double rs = reduce(cost::Collective::ReduceScatter);
        double ag = reduce(cost::Collective::AllGather);
        if (k.zero == 1) {
          full = rs + ag;
          exposed = std::max(rs - window, rs * bucketShare) + ag * bucketShare;
        } else {
          // Stage 2 keeps only a shard of the gradients, so every micro-batch's
          // gradients are reduce-scattered behind that micro-batch's backward.
          double perMb = rs;
          double mb = static_cast<double>(k.microbatches);
          full = mb * perMb + ag;
          exposed =
              mb * std::max(0.0, perMb - dt.backward / std::max(1, k.chunks)) +
              perMb * bucketShare + ag * bucketShare;
        }
      }
      dt.gradSync = full;
      dt.gradSyncExposed = o.overlapGradSync ? exposed : full;
      double held = d.params[dev] / (k.zero >= 1 ? k.dp : 1);
      dt.optimizer =
          cost::optimizerStep(c, held, cost::Optimizer::AdamW, true).time;
    }
  }

  double lowerBound(const Knobs &k, const DevicePlan &d) const {
    double lb = 0;
    for (int dev = 0; dev < k.pp; ++dev) {
      const DeviceTimes &dt = d.devices[dev];
      lb = std::max(lb, static_cast<double>(k.microbatches) *
                                (dt.forward + dt.backward) +
                            dt.optimizer);
    }
    return lb;
  }

  /// The candidate as K-FAC's pricing reads it (planner/Kfac.h); `d` must
  /// outlive it.
  KfacCandidate kfacCandidate(const Knobs &k, const PricingContext &pc,
                              const DevicePlan &d) const {
    return {&k,
            &d.stages,
            fixedShapes ? static_cast<double>(g1.batch) /
                              (graphNodes > 0 ? k.dp : 1)
                        : static_cast<double>(k.microbatch),
            pc.dpGroup(),
            pc.ppGroup(),
            o.precision};
  }

  /// --optimizer kfac: packs the K-FAC items into the simulated bubbles
  /// (planner/Kfac.h) and adds their time and memory; false (r invalid) on a
  /// packing error.
  bool addKfac(const Knobs &k, const PricingContext &pc,
               const pipeline::Schedule &schedule, DevicePlan &d, Priced &r,
               double &step) const {
    const KfacCandidate kc = kfacCandidate(k, pc, d);
    auto kp = applyKfac(*kfac, c, kc, schedule, r.sim, o.kfacDamping,
                        o.kfacRefresh, o.kfacDeviceRefresh, o.kfacFilling,
                        d.devices, step, r.criticalDevice);
    if (!kp) {
      r.valid = false;
      r.invalid = kp.error();
      return false;
    }
    r.kfac = *std::move(kp);
    r.peakMemory = 0;
    for (const DeviceTimes &dt : d.devices)
      if (dt.memory > r.peakMemory) {
        r.peakMemory = dt.memory;
        r.peakParts = dt.memoryParts;
        r.kfacPeak = dt.kfacBytes;
      }
    return true;
  }

  /// Whether K-FAC cannot make this candidate a plan better than `bound`,
  /// before packing its items (the costly part at many micro-batches): K-FAC
  /// adds at least each device's factors and inverses to its memory and its
  /// preconditioning to its step end (PipeFisher.cpp), whatever the packing.
  bool kfacCannotWin(const Knobs &k, const PricingContext &pc,
                     const pipeline::Schedule &schedule, const DevicePlan &d,
                     double bound) const {
    const KfacCandidate kc = kfacCandidate(k, pc, d);
    std::vector<double> bytes(d.devices.size(), 0),
        precondition(d.devices.size(), 0);
    for (const pipeline::KfacLayerWork &w : kfacWork(*kfac, c, kc)) {
      const int dev = schedule.deviceOf(w.stage, w.direction);
      if (dev < 0 || static_cast<size_t>(dev) >= d.devices.size())
        continue;
      bytes[size_t(dev)] += 3 * (w.factorBytes[0] + w.factorBytes[1]);
      precondition[size_t(dev)] += w.precondition;
    }
    for (size_t dev = 0; dev < d.devices.size(); ++dev) {
      const DeviceTimes &dt = d.devices[dev];
      if (dt.memory + bytes[dev] + cost::planningMarginBytes(capacity) >
              capacity ||
          dt.end + dt.gradSyncExposed + dt.optimizer + precondition[dev] >=
              bound)
        return true;
    }
    return false;
  }

  /// Runs the simulator and fills everything. With K-FAC, a candidate that
  /// kfacCannotWin against `bound` (the best plan found) is not packed: it
  /// comes back invalid, "pruned".
  Priced price(const Candidate &cand,
               double bound = std::numeric_limits<double>::infinity()) {
    Priced r;
    const Knobs &k = cand.knobs;
    Context &ctx = *cand.ctx;
    const Aggregate &agg = ctx.aggregates[cand.assignment];
    DevicePlan d = layout(k, cand.partition, agg, *ctx.pricing);
    syncAndOptimizer(k, *ctx.pricing, d);
    pipeline::ScheduleConfig sc{k.schedule, k.pp,
                                static_cast<int>(k.microbatches), k.chunks};
    // A schedule depends on its configuration alone, and many candidates
    // (partitions, recomputation, ZeRO, SBP) share one: generated once.
    const auto key = std::make_tuple(static_cast<int>(sc.kind), sc.stages,
                                     sc.microbatches, sc.chunks);
    auto it = scheduleMemo.find(key);
    if (it == scheduleMemo.end())
      it = scheduleMemo.emplace(key, pipeline::generateSchedule(sc)).first;
    const pipeline::OrError<pipeline::Schedule> &schedule = it->second;
    if (!schedule) {
      r.invalid = schedule.error();
      return r;
    }
    auto sim = pipeline::simulate(*schedule, d.times);
    ++stats.simulated;
    if (!sim) {
      r.invalid = sim.error();
      return r;
    }
    r.valid = true;
    r.sim = *sim;
    std::vector<double> end(k.pp, 0);
    for (const pipeline::ExecutedInstruction &x : r.sim.timeline)
      end[x.device] = std::max(end[x.device], x.end);
    double step = 0;
    for (int dev = 0; dev < k.pp; ++dev) {
      DeviceTimes &dt = d.devices[dev];
      dt.end = end[dev];
      // The activation sets the programs allocate (activationSets), per
      // stage the rank runs; in units of one stage's set (interleaved: / v).
      dt.inFlight = 0;
      for (int id : d.rankStageIds[dev])
        dt.inFlight +=
            double(activationSets(k)[size_t(d.stages[id].stage)]) / sc.chunks;
      dt.memoryParts = d.memory[dev];
      dt.memory = dt.memoryParts.total();
      double t = dt.end + dt.gradSyncExposed + dt.optimizer;
      if (t > step) {
        step = t;
        r.criticalDevice = dev;
      }
      if (dt.memory > r.peakMemory) {
        r.peakMemory = dt.memory;
        r.peakParts = dt.memoryParts;
      }
    }
    if (kfac && kfacCannotWin(k, *ctx.pricing, *schedule, d, bound)) {
      r.valid = false;
      r.invalid = "pruned: K-FAC's factors or preconditioning alone make it "
                  "no better than the best plan";
      return r;
    }
    if (kfac && !addKfac(k, *ctx.pricing, *schedule, d, r, step))
      return r;
    r.stepTime = step;
    r.fits = r.peakMemory + cost::planningMarginBytes(capacity) <= capacity;
    r.devices = d.devices;
    r.stages = d.stages;
    for (StageInfo &st : r.stages)
      st.activationSets = activationSets(k)[size_t(st.stage)];
    r.layersPerStage = d.layers;
    r.p2p = d.times.p2p;
    r.times = d.times;
    // Prediction.
    Prediction &p = r.pred;
    const double world = c.worldSize();
    p.stepTime = step;
    p.modelFlopsPerStep =
        3 * flopsPerSample * static_cast<double>(o.globalBatch);
    double recomputeFlops = 0;
    if (k.recompute == cost::Recompute::Full)
      recomputeFlops = flopsPerSample * static_cast<double>(o.globalBatch);
    p.tflopsPerGpu = p.modelFlopsPerStep / step / world / 1e12;
    p.hardwareTflopsPerGpu =
        (p.modelFlopsPerStep + recomputeFlops) / step / world / 1e12;
    p.mfu = p.tflopsPerGpu * 1e12 / c.peakFlops(o.precision);
    p.bubbleFraction = r.sim.bubbleFraction;
    p.peakMemory = r.peakMemory;
    for (const DeviceTimes &dt : d.devices) {
      p.peakAllocated =
          std::max(p.peakAllocated, dt.memoryParts.allocated() + dt.kfacBytes);
      p.peakHostMemory = std::max(p.peakHostMemory, dt.memoryParts.host);
    }
    p.memoryMargin = cost::planningMarginBytes(capacity);
    const DeviceTimes &cd = d.devices[r.criticalDevice];
    const double mb = static_cast<double>(k.microbatches);
    const double runs = microbatchesPerStage(k);
    p.tpComm = runs * (cd.forwardComm + cd.backwardComm);
    p.compute = runs * (cd.forward + cd.backward) - p.tpComm;
    // Rounding leaves -1e-18 where there is no bubble: not a negative time.
    p.bubble = std::max(0.0, cd.end - runs * (cd.forward + cd.backward));
    p.p2p = k.pp > 1 ? 2 * mb * r.p2p : 0;
    p.gradSync = cd.gradSyncExposed;
    p.optimizer = cd.optimizer;
    return r;
  }

  std::vector<int> divisorsUpTo(int n, int cap) const {
    std::vector<int> v;
    for (int x = 1; x <= n && x <= cap; ++x)
      if (n % x == 0)
        v.push_back(x);
    return v;
  }

  /// Whether `--kfac-refresh K0,K1,...` pins Chimera's mirrored devices d and
  /// pp-1-d (copies of the same layers, so one K: PipeFisher.h) differently;
  /// then Chimera is skipped, and said why when nothing else applies.
  bool chimeraPinsDiffer(int pp) {
    const std::vector<int> &k = o.kfacDeviceRefresh;
    if (static_cast<int>(k.size()) != pp ||
        std::equal(k.begin(), k.end(), k.rbegin()))
      return false;
    if (!o.fixed.schedule || *o.fixed.schedule == ScheduleKind::Chimera) {
      const std::string why =
          "chimera's mirrored devices d and pp-1-d hold copies of the same "
          "layers and need one refresh interval, which --kfac-refresh pins "
          "apart";
      refuse(why);
    }
    return true;
  }

  /// Records why a configuration was refused, once per distinct reason: when
  /// none applies, the user sees them all, not only the last one tried.
  void refuse(const std::string &why) {
    if (std::find(refusals.begin(), refusals.end(), why) == refusals.end())
      refusals.push_back(why);
  }

  /// Every outer candidate of one context and assignment, in a fixed order.
  void expand(Context &ctx, int assignment, int tp, int pp, int64_t b,
              AxisOrder order, std::vector<Candidate> &out, int64_t &counter) {
    const FixedKnobs &f = o.fixed;
    const int dp = c.worldSize() / (tp * pp);
    const int64_t m = replicaInstances(dp) / b;
    std::vector<std::pair<ScheduleKind, int>> schedules;
    auto pinned = [&](ScheduleKind s) { return f.schedule && *f.schedule == s; };
    if (pp == 1) {
      schedules.push_back({ScheduleKind::OneFOneB, 1});
    } else {
      for (ScheduleKind s :
           {ScheduleKind::OneFOneB, ScheduleKind::GPipe,
            ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1,
            ScheduleKind::Chimera}) {
        if (s == ScheduleKind::Interleaved) {
          for (int v : {2, 3, 4, 6, 8}) {
            if (f.chunks && *f.chunks != v)
              continue;
            // A pinned schedule the micro-batches do not fit goes on to the
            // contract (Runnable.h), which names why it is refused.
            if (pp * v <= base.layers && (m % pp == 0 || pinned(s)))
              schedules.push_back({s, v});
          }
        } else if (s == ScheduleKind::Chimera) {
          if (((pp % 2 == 0 && m % pp == 0) || pinned(s)) &&
              !chimeraPinsDiffer(pp))
            schedules.push_back({s, 1});
        } else {
          schedules.push_back({s, 1});
        }
      }
    }
    std::vector<cost::Recompute> recomputes = {cost::Recompute::None,
                                               cost::Recompute::Selective,
                                               cost::Recompute::Full};
    std::vector<int> zeros;
    for (int z = 0; z <= kMaxGeneratedZero; ++z)
      zeros.push_back(z);
    if (f.zero && *f.zero > kMaxGeneratedZero)
      zeros.push_back(*f.zero); // refused below, naming why
    for (auto [s, v] : schedules) {
      if (f.schedule && *f.schedule != s)
        continue;
      for (cost::Recompute rc : recomputes) {
        if (f.recompute && *f.recompute != rc)
          continue;
        for (int z : zeros) {
          if (f.zero && *f.zero != z)
            continue;
          if (z > 0 && dp == 1 && !f.zero)
            continue; // nothing to shard
          // What the programs do not run is never a candidate
          // (DESIGN.md §5b); a pinned knob's reason reaches the user when
          // nothing else applies.
          const Knobs knobs{tp, pp, dp, b, m, s, v, rc, z, order};
          if (std::string why = runnable.refusal(knobs, kfac.has_value());
              !why.empty()) {
            refuse(why);
            continue;
          }
          for (Partition part : {Partition::Balanced, Partition::Uniform}) {
            if (pp == 1 && part == Partition::Uniform)
              continue;
            if (pp > 1 && f.partition && *f.partition != part)
              continue;
            Candidate cand;
            cand.knobs = knobs;
            cand.partition = part;
            cand.ctx = &ctx;
            cand.assignment = assignment;
            cand.order = counter++;
            const Aggregate &agg = ctx.aggregates[assignment];
            DevicePlan d = layout(cand.knobs, part, agg, *ctx.pricing);
            syncAndOptimizer(cand.knobs, *ctx.pricing, d);
            cand.lowerBound = lowerBound(cand.knobs, d);
            double mem = 0;
            for (const cost::RankMemory &rm : d.memory)
              mem = std::max(mem, rm.total());
            cand.memoryEstimate = mem;
            ++stats.candidatesPriced;
            out.push_back(cand);
          }
        }
      }
    }
  }

  /// Candidates of every mesh / micro-batch allowed by the pinned knobs; why
  /// the others were refused goes to `refusals`.
  void enumerate(std::vector<Candidate> &out) {
    const FixedKnobs &f = o.fixed;
    const int world = c.worldSize();
    const int G = c.gpusPerNode;
    int64_t counter = 0;
    std::vector<int> tps =
        f.tp ? std::vector<int>{*f.tp} : divisorsUpTo(world, G);
    for (int tp : tps) {
      if (tp < 1 || world % tp != 0) {
        refuse("tp=" + std::to_string(tp) + " does not divide the " +
               std::to_string(world) + " GPUs");
        continue;
      }
      const int maxPp = base.collapsed ? static_cast<int>(base.layers) : 1;
      std::vector<int> pps =
          f.pp ? std::vector<int>{*f.pp} : divisorsUpTo(world / tp, maxPp);
      for (int pp : pps) {
        if (pp < 1 || (world / tp) % pp != 0) {
          refuse("tp=" + std::to_string(tp) + " x pp=" + std::to_string(pp) +
                 " does not divide the " + std::to_string(world) + " GPUs");
          continue;
        }
        if (pp > maxPp) {
          refuse("pp=" + std::to_string(pp) + " exceeds the " +
                 std::to_string(maxPp) + " pipeline-able layers");
          continue;
        }
        if (!o.kfacDeviceRefresh.empty() &&
            static_cast<int>(o.kfacDeviceRefresh.size()) != pp) {
          refuse("--kfac-refresh lists " +
                 std::to_string(o.kfacDeviceRefresh.size()) +
                 " refresh intervals, one per pipeline device, but pp=" +
                 std::to_string(pp));
          continue;
        }
        const int dp = world / (tp * pp);
        if (f.dp && *f.dp != dp) {
          refuse("dp=" + std::to_string(*f.dp) + " with tp=" +
                 std::to_string(tp) + " pp=" + std::to_string(pp) +
                 " does not use the " + std::to_string(world) + " GPUs");
          continue;
        }
        if (graphNodes > 0 && graphNodes % dp != 0) {
          refuse("dp=" + std::to_string(dp) + " does not divide the " +
                 std::to_string(graphNodes) + " nodes of the graph");
          continue;
        }
        if (graphNodes == 0 && o.globalBatch % dp != 0) {
          refuse("global batch " + std::to_string(o.globalBatch) +
                 " is not divisible by dp=" + std::to_string(dp));
          continue;
        }
        const int64_t perReplica = replicaInstances(dp);
        std::vector<int64_t> bs;
        if (f.microbatch)
          bs.push_back(*f.microbatch);
        else if (fixedShapes)
          bs.push_back(1);
        else
          for (int64_t b = 1; b <= perReplica && b <= 64; ++b)
            if (perReplica % b == 0)
              bs.push_back(b);
        for (int64_t b : bs) {
          if (fixedShapes && b != 1) {
            refuse("the model's shapes do not scale with the batch (" +
                   g1.family +
                   "): a micro-batch is one instance of it, so "
                   "microbatch must be 1");
            continue;
          }
          if (b < 1 || perReplica % b != 0) {
            refuse("micro-batch " + std::to_string(b) +
                   " does not divide the " + std::to_string(perReplica) +
                   " samples per data-parallel replica");
            continue;
          }
          std::vector<AxisOrder> orders =
              f.order ? std::vector<AxisOrder>{*f.order}
              : (tp > 1 && dp > 1)
                  ? std::vector<AxisOrder>{AxisOrder::TensorInner,
                                           AxisOrder::DataInner}
                  : std::vector<AxisOrder>{AxisOrder::TensorInner};
          for (AxisOrder order : orders) {
            std::string err;
            Context *ctx = context(tp, pp, b, order, err);
            if (exhaustiveTooLarge)
              return; // plan() reports it; no point going on
            if (!ctx) {
              refuse(err);
              continue;
            }
            for (size_t a = 0; a < ctx->assignments.size(); ++a)
              expand(*ctx, static_cast<int>(a), tp, pp, b, order, out, counter);
            // The best of this context seeds the next ("previous best" start).
            previousBest.clear();
            const Assignment &first = ctx->assignments.front();
            for (size_t i = 0; i < first.size(); ++i)
              previousBest.push_back(ctx->sg.ops[i].sigs[first[i]].name);
          }
        }
      }
    }
  }
};

std::string linkOf(const cost::Cluster &c, const cost::GroupPlacement &g) {
  if (g.size() <= 1)
    return "none";
  if (g.nodes <= 1)
    return c.intraNode.kind;
  if (g.gpusPerNode <= 1)
    return c.interNode.kind;
  return c.intraNode.kind + "+" + c.interNode.kind;
}

std::string sbpStr(const Sbp &s) { return cost::sbpToString(s); }

/// The largest increase among the parts of the step, for "why it lost".
std::string dominantIncrease(const Prediction &chosen, const Prediction &alt) {
  std::pair<double, const char *> parts[] = {
      {alt.compute - chosen.compute, "compute"},
      {alt.tpComm - chosen.tpComm, "tensor-parallel communication"},
      {alt.bubble - chosen.bubble, "pipeline bubbles"},
      {alt.gradSync - chosen.gradSync, "exposed gradient sync"},
      {alt.optimizer - chosen.optimizer, "optimizer step"}};
  double top = 0;
  const char *name = "the step as a whole";
  for (auto [v, n] : parts)
    if (v > top) {
      top = v;
      name = n;
    }
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s grows by %.3g s", name, top);
  return top > 0 ? buf : name;
}

struct Explainer {
  Planner &pl;
  const Candidate &chosen;
  const Priced &chosenPriced;

  bool pinned(const std::string &knob) const {
    const FixedKnobs &f = pl.o.fixed;
    return (knob == "tp" && f.tp) || (knob == "pp" && f.pp) ||
           (knob == "microbatch" && f.microbatch) ||
           (knob == "schedule" && (f.schedule || f.chunks)) ||
           (knob == "recompute" && f.recompute) || (knob == "zero" && f.zero) ||
           (knob == "order" && f.order) ||
           ((knob == "tp" || knob == "pp") && f.dp);
  }

  Alternative judge(const std::string &knob, const std::string &value,
                    const Priced &p, const std::string &invalid) const {
    Alternative a;
    a.knob = knob;
    a.value = value;
    if (!invalid.empty() || !p.valid) {
      a.reason = "invalid: " + (invalid.empty() ? p.invalid : invalid);
      return a;
    }
    if (p.stepTime >= kImpossibleSeconds) {
      a.reason = "invalid: needs a layout conversion that cannot run (a "
                 "boxing the cost model cannot do, or under --tp-mode tensor "
                 "a shared parameter read split by one op and whole by "
                 "another)";
      return a;
    }
    a.feasible = p.fits;
    a.stepTime = p.stepTime;
    a.peakMemory = p.peakMemory;
    a.deltaTime = p.stepTime - chosenPriced.stepTime;
    a.deltaMemory = p.peakMemory - chosenPriced.peakMemory;
    char buf[256];
    if (!p.fits) {
      std::snprintf(buf, sizeof buf, "does not fit: needs %.1f GiB of %.1f GiB",
                    p.peakMemory / (1 << 30), pl.capacity / (1 << 30));
      a.reason = buf;
    } else if (a.deltaTime == 0) {
      a.reason = "as fast; the search keeps the earlier candidate on ties";
    } else if (a.deltaTime > 0) {
      std::snprintf(buf, sizeof buf, "slower by %.1f%%: %s",
                    100 * a.deltaTime / chosenPriced.stepTime,
                    dominantIncrease(chosenPriced.pred, p.pred).c_str());
      a.reason = buf;
    } else if (pinned(knob)) {
      a.reason = "faster, but the knob is pinned by --fix";
    } else {
      std::snprintf(buf, sizeof buf,
                    "faster by %.2f%% with this knob alone, but outside the "
                    "searched set (pinned knobs or the memory pre-filter)",
                    -100 * a.deltaTime / chosenPriced.stepTime);
      a.reason = buf;
    }
    return a;
  }

  /// Prices knobs `k` with the best of its context's assignments.
  Priced priceKnobs(const Knobs &k, Partition part, std::string &invalid) {
    const int world = pl.c.worldSize();
    if (k.tp < 1 || k.pp < 1 || world % (k.tp * k.pp) != 0) {
      invalid = "tp x pp does not divide the GPUs";
      return {};
    }
    Knobs kk = k;
    kk.dp = world / (k.tp * k.pp);
    if ((pl.graphNodes == 0 && pl.o.globalBatch % kk.dp != 0) ||
        (pl.graphNodes > 0 && pl.graphNodes % kk.dp != 0) ||
        pl.replicaInstances(kk.dp) % kk.microbatch != 0) {
      invalid = pl.graphNodes > 0
                    ? "dp does not divide the graph's nodes"
                    : "global batch not divisible by dp x micro-batch";
      return {};
    }
    kk.microbatches = pl.replicaInstances(kk.dp) / kk.microbatch;
    if (kk.pp > std::max<int64_t>(1, pl.base.layers)) {
      invalid = "more stages than layers";
      return {};
    }
    if (kk.pp == 1 && kk.schedule != ScheduleKind::OneFOneB) {
      invalid = "a schedule needs pp > 1";
      return {};
    }
    if (kk.schedule == ScheduleKind::Interleaved &&
        kk.pp * kk.chunks > pl.base.layers) {
      invalid = "more model chunks than layers";
      return {};
    }
    if (std::string why = pl.runnable.refusal(kk, pl.kfac.has_value());
        !why.empty()) {
      invalid = "the programs do not run it: " + why;
      return {};
    }
    std::string err;
    Context *ctx = pl.context(kk.tp, kk.pp, kk.microbatch, kk.order, err);
    if (!ctx) {
      invalid = err;
      return {};
    }
    Priced best;
    for (size_t a = 0; a < ctx->assignments.size(); ++a) {
      Candidate c;
      c.knobs = kk;
      c.partition = part;
      c.ctx = ctx;
      c.assignment = static_cast<int>(a);
      Priced p = pl.price(c);
      if (!p.valid) {
        if (!best.valid)
          invalid = p.invalid;
        continue;
      }
      bool better = !best.valid || (p.fits && !best.fits) ||
                    (p.fits == best.fits && p.stepTime < best.stepTime);
      if (better)
        best = std::move(p);
    }
    if (best.valid)
      invalid.clear();
    return best;
  }

  void knob(std::vector<Alternative> &out, const std::string &name,
            const std::string &value, const Knobs &k, Partition part) {
    std::string invalid;
    Priced p = priceKnobs(k, part, invalid);
    out.push_back(judge(name, value, p, invalid));
  }

  std::vector<Alternative> run() {
    std::vector<Alternative> out;
    const Knobs base = chosen.knobs;
    const int world = pl.c.worldSize();
    auto neighbours = [](const std::vector<int64_t> &list, int64_t v) {
      std::vector<int64_t> r;
      for (size_t i = 0; i < list.size(); ++i)
        if (list[i] == v) {
          if (i > 0)
            r.push_back(list[i - 1]);
          if (i + 1 < list.size())
            r.push_back(list[i + 1]);
        }
      return r;
    };
    std::vector<int64_t> tps, pps, mbs;
    for (int x = 1; x <= world; ++x)
      if (world % x == 0)
        tps.push_back(x);
    for (int64_t x : neighbours(tps, base.tp)) {
      Knobs k = base;
      k.tp = static_cast<int>(x);
      knob(out, "tp", std::to_string(x), k, chosen.partition);
    }
    for (int x = 1; x <= world / base.tp; ++x)
      if ((world / base.tp) % x == 0)
        pps.push_back(x);
    for (int64_t x : neighbours(pps, base.pp)) {
      Knobs k = base;
      k.pp = static_cast<int>(x);
      if (k.pp == 1)
        k.schedule = ScheduleKind::OneFOneB;
      knob(out, "pp", std::to_string(x), k, chosen.partition);
    }
    const int64_t perReplica = pl.replicaInstances(base.dp);
    for (int64_t x = 1; x <= perReplica; ++x)
      if (perReplica % x == 0)
        mbs.push_back(x);
    for (int64_t x : neighbours(mbs, base.microbatch)) {
      Knobs k = base;
      k.microbatch = x;
      knob(out, "microbatch", std::to_string(x), k, chosen.partition);
    }
    if (base.pp > 1) {
      for (auto [s, v] : std::vector<std::pair<ScheduleKind, int>>{
               {ScheduleKind::OneFOneB, 1},
               {ScheduleKind::GPipe, 1},
               {ScheduleKind::Interleaved, 2},
               {ScheduleKind::Interleaved, 4},
               {ScheduleKind::ZeroBubbleH1, 1},
               {ScheduleKind::Chimera, 1}}) {
        if (s == base.schedule && v == base.chunks)
          continue;
        Knobs k = base;
        k.schedule = s;
        k.chunks = v;
        std::string name(pipeline::scheduleName(s));
        if (s == ScheduleKind::Interleaved)
          name += " chunks=" + std::to_string(v);
        knob(out, "schedule", name, k, chosen.partition);
      }
      Knobs k = base;
      knob(out, "partition",
           chosen.partition == Partition::Balanced ? "uniform" : "balanced", k,
           chosen.partition == Partition::Balanced ? Partition::Uniform
                                                   : Partition::Balanced);
    }
    for (cost::Recompute r : {cost::Recompute::None, cost::Recompute::Selective,
                              cost::Recompute::Full}) {
      if (r == base.recompute)
        continue;
      Knobs k = base;
      k.recompute = r;
      knob(out, "recompute", recomputeName(r), k, chosen.partition);
    }
    if (base.dp > 1)
      for (int z = 0; z <= kMaxGeneratedZero; ++z) {
        if (z == base.zero)
          continue;
        Knobs k = base;
        k.zero = z;
        knob(out, "zero", std::to_string(z), k, chosen.partition);
      }
    if (base.tp > 1 && base.dp > 1) {
      Knobs k = base;
      k.order = base.order == AxisOrder::TensorInner ? AxisOrder::DataInner
                                                     : AxisOrder::TensorInner;
      knob(out, "order", axisOrderName(k.order), k, chosen.partition);
    }
    // Per-op signatures: each other signature of each op, the rest unchanged.
    Context &ctx = *chosen.ctx;
    const Assignment chosenA = ctx.assignments[chosen.assignment];
    for (size_t i = 0; i < ctx.sg.ops.size(); ++i) {
      const CollapsedOp &op = ctx.sg.ops[i];
      for (size_t s = 0; s < op.sigs.size(); ++s) {
        if (static_cast<int>(s) == chosenA[i])
          continue;
        Assignment a = chosenA;
        a[i] = static_cast<int>(s);
        ctx.assignments.push_back(a);
        ctx.aggregates.push_back(ctx.pricing->aggregate(a));
        Candidate c = chosen;
        c.assignment = static_cast<int>(ctx.assignments.size()) - 1;
        Priced p = pl.price(c);
        out.push_back(
            judge("sbp:" + pl.g1.ops[op.op].name, op.sigs[s].name, p, ""));
      }
    }
    return out;
  }
};

/// Fills the plan's descriptive parts from the chosen candidate.
void describe(Planner &pl, const Candidate &cand, const Priced &pr,
              Plan &plan) {
  const ModelGraph &g = pl.g1;
  const cost::Cluster &c = pl.c;
  Context &ctx = *cand.ctx;
  PricingContext &pc = *ctx.pricing;
  const Assignment a = ctx.assignments[cand.assignment];
  const SearchGraph &sg = ctx.sg;
  const Knobs &k = cand.knobs;
  plan.model = g.name;
  plan.modelFamily = g.family;
  plan.parameters = g.parameterCount();
  plan.layers = sg.layers;
  plan.seq = g.seq;
  plan.cluster = c.name;
  plan.gpu = c.gpuModel;
  plan.nodes = c.nodes;
  plan.gpusPerNode = c.gpusPerNode;
  plan.peakFlops = c.peakFlops(pl.o.precision);
  plan.memoryCapacity = pl.capacity;
  plan.globalBatch = pl.o.globalBatch;
  plan.stack = pl.o.stack;
  plan.knobs = k;
  plan.axisLinks = {linkOf(c, pc.ppGroup()), linkOf(c, pc.dpGroup()),
                    linkOf(c, pc.tpGroup())};
  for (size_t i = 0; i < sg.ops.size(); ++i) {
    const CollapsedOp &op = sg.ops[i];
    const Signature &s = op.sigs[a[i]];
    OpChoice ch;
    ch.segment = segmentName(op.segment);
    ch.op = g.ops[op.op].name;
    ch.kind = g.ops[op.op].kind;
    ch.signature = s.name;
    for (const Sbp &x : s.operands)
      ch.operands.push_back(sbpStr(x));
    ch.result = sbpStr(s.result);
    for (const Signature &x : op.sigs)
      ch.candidates.push_back(x.name);
    plan.ops.push_back(ch);
  }
  // Stage of each layer.
  std::vector<int> stageOfLayer(std::max<int64_t>(1, sg.layers), 0);
  for (const StageInfo &st : pr.stages)
    for (int l = st.firstLayer; l < st.endLayer; ++l)
      stageOfLayer[l] = st.stage;
  const int lastStage = static_cast<int>(pr.stages.size()) - 1;
  auto stageOfOp = [&](int op) {
    int l = g.ops[op].layer;
    if (sg.collapsed && l >= 0 && l < static_cast<int>(stageOfLayer.size()))
      return stageOfLayer[l];
    return sg.ops[sg.opOf[op]].segment == Segment::Post ? lastStage : 0;
  };
  std::vector<int> producer(g.tensors.size(), -1),
      firstUse(g.tensors.size(), -1);
  std::vector<int> firstSlot(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (int t : g.ops[i].results)
      producer[t] = static_cast<int>(i);
    for (size_t kk = 0; kk < g.ops[i].operands.size(); ++kk) {
      int t = g.ops[i].operands[kk];
      if (firstUse[t] < 0) {
        firstUse[t] = static_cast<int>(i);
        firstSlot[t] = static_cast<int>(kk);
      }
    }
  }
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const TensorDef &td = g.tensors[t];
    TensorLayout tl;
    tl.name = td.name;
    tl.role = td.role == TensorRole::Parameter ? "parameter"
              : td.role == TensorRole::Input   ? "input"
                                               : "activation";
    tl.shape = sg.shapeAt(static_cast<int>(t), k.microbatch);
    const int bd = sg.batchDim(t);
    tl.dp = (td.role != TensorRole::Parameter && bd >= 0)
                ? sbpStr(Sbp::split(bd))
                : "B";
    Sbp tp = Sbp::broadcast();
    if (producer[t] >= 0) {
      tp = sg.ops[sg.opOf[producer[t]]].sigs[a[sg.opOf[producer[t]]]].result;
      tl.stage = stageOfOp(producer[t]);
    } else if (firstUse[t] >= 0) {
      int op = sg.opOf[firstUse[t]];
      tp = sg.ops[op].sigs[a[op]].operands[firstSlot[t]];
      tl.stage = stageOfOp(firstUse[t]);
    }
    tl.tp = sbpStr(tp);
    plan.tensors.push_back(tl);
  }
  // Per model op, for plan.mlir: the tp signature of its collapsed op; on dp
  // activations split along their batch dim, parameters whole, a batch-less
  // result of split inputs (the loss) partial.
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpDef &op = g.ops[i];
    const Signature &s = sg.ops[sg.opOf[i]].sigs[a[sg.opOf[i]]];
    ModelOpLayout ml;
    ml.stage = stageOfOp(static_cast<int>(i));
    bool anySplit = false;
    for (size_t kk = 0; kk < op.operands.size(); ++kk) {
      const int t = op.operands[kk];
      const int bd = sg.batchDim(t);
      const bool split =
          k.dp > 1 && bd >= 0 && g.tensors[t].role != TensorRole::Parameter;
      anySplit |= split;
      ml.dp.push_back(split ? sbpStr(Sbp::split(bd)) : "B");
      ml.tp.push_back(k.tp > 1 ? sbpStr(s.operands[kk]) : "B");
    }
    for (int t : op.results) {
      const int bd = sg.batchDim(t);
      ml.dp.push_back(k.dp > 1 && bd >= 0 ? sbpStr(Sbp::split(bd))
                      : anySplit          ? "P"
                                          : "B");
      ml.tp.push_back(k.tp > 1 ? sbpStr(s.result) : "B");
    }
    plan.modelOps.push_back(std::move(ml));
  }
  // Collectives, per collapsed edge (calls per step = weight x micro-batches).
  const double mb = static_cast<double>(k.microbatches);
  auto addBoxing = [&](const CollapsedEdge &e, const Sbp &from, const Sbp &to,
                       const char *phase) {
    cost::BoxingCost bc = pc.boxingDetail(e.tensor, from, to);
    for (const cost::BoxingStep &st : bc.steps) {
      if (st.free)
        continue;
      CollectiveUse u;
      u.where = g.tensors[e.tensor].name;
      u.phase = phase;
      u.collective = std::string(cost::collectiveName(st.collective));
      u.axis = "tp";
      u.bytes = st.bytes;
      u.time = st.estimate.time;
      u.perStep = static_cast<int64_t>(e.weight * mb);
      plan.collectives.push_back(u);
    }
  };
  for (const CollapsedEdge &e : sg.edges) {
    if (e.input || e.producer < 0)
      continue;
    const Signature &ps = sg.ops[e.producer].sigs[a[e.producer]];
    const Sbp R = ps.result;
    const Sbp expected = R.kind == Sbp::Partial ? Sbp::broadcast() : R;
    int seenX[8] = {0}, seenG[8] = {0};
    for (auto [op, slot] : e.consumers) {
      const Signature &cs = sg.ops[op].sigs[a[op]];
      if (cs.operands[slot] != R && !seenX[sbpCode(cs.operands[slot])]++)
        addBoxing(e, R, cs.operands[slot], "forward");
      if (cs.operandGrads[slot] != expected &&
          !seenG[sbpCode(cs.operandGrads[slot])]++)
        addBoxing(e, cs.operandGrads[slot], expected, "backward");
    }
  }
  for (size_t i = 0; i < sg.ops.size(); ++i) {
    const Signature &s = sg.ops[i].sigs[a[i]];
    if (s.inOpAllReduceBytes <= 0)
      continue;
    CollectiveUse u;
    u.where = g.ops[sg.ops[i].op].name;
    u.phase = "forward";
    u.collective = "all_reduce";
    u.axis = "tp";
    u.bytes = s.inOpAllReduceBytes / 3;
    u.time = cost::collectiveCost(c, cost::Collective::AllReduce, u.bytes,
                                  pc.tpGroup())
                 .best.time;
    u.perStep = static_cast<int64_t>(3 * sg.ops[i].count * mb);
    plan.collectives.push_back(u);
  }
  for (int dev = 0; dev < k.pp; ++dev) {
    const DeviceTimes &dt = pr.devices[dev];
    if (dt.gradSync <= 0)
      continue;
    CollectiveUse u;
    u.where = "gradients of pipeline rank " + std::to_string(dev);
    u.phase = "gradient-sync";
    u.collective = k.zero == 0 ? "all_reduce" : "reduce_scatter+all_gather";
    u.axis = "dp";
    u.time = dt.gradSync;
    u.perStep = k.zero == 2 ? k.microbatches : 1;
    // Bytes: this rank's gradients (dp-only and dp+tp groups together).
    u.bytes = 0;
    plan.collectives.push_back(u);
  }
  if (k.pp > 1) {
    CollectiveUse u;
    u.where = "stage boundary activations and their gradients";
    u.phase = "p2p";
    u.collective = "send_recv";
    u.axis = "pp";
    u.bytes = ctx.aggregates[cand.assignment].seg[1].p2pBytes;
    u.time = pr.p2p;
    u.perStep = static_cast<int64_t>(2 * mb);
    plan.collectives.push_back(u);
  }
  plan.stages = pr.stages;
  if (!sg.collapsed) {
    // Blocks that differ are not pipelined (pp = 1): the one stage holds every
    // model layer, so readers that place ops by layer find them there.
    int64_t endLayer = 0;
    for (const OpDef &op : g.ops)
      endLayer = std::max<int64_t>(endLayer, op.layer + 1);
    for (StageInfo &st : plan.stages)
      st.endLayer = static_cast<int>(endLayer);
  }
  plan.devices = pr.devices;
  plan.p2pTime = pr.p2p;
  plan.simForward = pr.times.forward;
  plan.simBackward = pr.times.backward;
  plan.simWeightGradient = pr.times.weightGradient;
  plan.predicted = pr.pred;
  plan.kfac = pr.kfac;
  plan.predicted.stepGraph = pc.stepGraph();
  plan.predicted.attentionKernel = pc.attentionKernel();
  // Per op kind on the critical rank, as layout() sums its stages' segments
  // (Chimera's up pipeline runs a second copy of a mirrored stage).
  // The same for every pipeline device, for validating a profile of another.
  const auto kinds = pc.opKindTimes(a);
  plan.predicted.opKindsByDevice.assign(static_cast<size_t>(k.pp), {});
  for (int device = 0; device < k.pp; ++device) {
    auto &out = plan.predicted.opKindsByDevice[static_cast<size_t>(device)];
    for (const StageInfo &st : pr.stages) {
      const bool mirrored =
          k.schedule == ScheduleKind::Chimera && k.pp - 1 - st.device == device;
      const int copies = (st.device == device) + mirrored;
      if (!copies)
        continue;
      const double n = pr.layersPerStage[static_cast<size_t>(st.stage)];
      auto add = [&](int segment, double times) {
        for (const auto &[kind, t] : kinds[segment])
          for (int half = 0; half < 2; ++half)
            out[kind][half] +=
                copies * times * microbatchesPerStage(k) * t[half];
      };
      add(1, n);
      if (st.pre)
        add(0, 1);
      if (st.post)
        add(2, 1);
    }
  }
  plan.predicted.opKinds =
      plan.predicted.opKindsByDevice[static_cast<size_t>(pr.criticalDevice)];
  if (pl.o.explain) {
    Explainer ex{pl, cand, pr};
    plan.alternatives = ex.run();
  }
}

} // namespace

pipeline::OrError<PlanOutcome> plan(const ModelGraph &g1, const ModelGraph &g2,
                                    const cost::Cluster &cluster,
                                    const PlannerOptions &options) {
  using Result = pipeline::OrError<PlanOutcome>;
  const auto start = std::chrono::steady_clock::now();
  if (options.globalBatch < 1)
    return Result::failure("expected a global batch of at least 1, got " +
                           std::to_string(options.globalBatch));
  Planner pl(g1, cluster, options);
  std::string error;
  if (!buildSearchGraph(g1, g2, pl.base, error))
    return Result::failure(error);
  pl.setFixedShapes();
  if (options.optimizer == "kfac") {
    if (!(options.kfacDamping > 0) || !std::isfinite(options.kfacDamping)) {
      char buf[96];
      std::snprintf(buf, sizeof buf,
                    "--kfac-damping must be a finite number > 0, got %g",
                    options.kfacDamping);
      return Result::failure(buf);
    }
    if (options.kfacRefresh < 0 || options.kfacRefresh > 4096)
      return Result::failure("--kfac-refresh must be 1..4096 steps, got " +
                             std::to_string(options.kfacRefresh));
    for (int k : options.kfacDeviceRefresh)
      if (k < 1 || k > 4096)
        return Result::failure("--kfac-refresh must be 1..4096 steps, got " +
                               std::to_string(k));
    auto model = kfacModel(g1);
    if (!model)
      return Result::failure(model.error());
    pl.kfac = *std::move(model);
  }
  pl.stats.mode = options.mode == SearchMode::Exhaustive ? "exhaustive" : "cd";

  std::vector<Candidate> cands;
  pl.enumerate(cands);
  if (pl.exhaustiveTooLarge)
    return Result::failure(
        "the model is too large for --search exhaustive (more than " +
        std::to_string(static_cast<int64_t>(options.exhaustiveLimit)) +
        " partial SBP assignments); use --search cd");
  if (cands.empty() && !options.kfacDeviceRefresh.empty()) {
    // Name the pin first: it is why the pp that would apply was skipped.
    const std::string n = std::to_string(options.kfacDeviceRefresh.size());
    std::string others;
    for (const std::string &why : pl.refusals)
      if (why.rfind("--kfac-refresh", 0) != 0)
        others += (others.empty() ? "" : "; ") + why;
    return Result::failure(
        "--kfac-refresh lists " + n +
        " refresh intervals, one per pipeline device, but no configuration "
        "with pp=" +
        n + " applies" +
        (others.empty() ? " (pp divides the GPUs over tp and is at most the "
                          "number of layers)"
                        : ": " + others));
  }
  if (cands.empty()) {
    if (pl.refusals.size() <= 1)
      return Result::failure(pl.refusals.empty()
                                 ? "no parallel configuration applies"
                                 : pl.refusals.front());
    std::string all = "no parallel configuration applies: ";
    for (size_t i = 0; i < pl.refusals.size(); ++i)
      all += (i ? "; " : "") + pl.refusals[i];
    return Result::failure(all);
  }
  // Visit in order of the lower bound; stop once it cannot beat the best.
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Candidate &a, const Candidate &b) {
                     if (a.lowerBound != b.lowerBound)
                       return a.lowerBound < b.lowerBound;
                     return a.order < b.order;
                   });
  const bool exact = options.mode == SearchMode::Exhaustive;
  int best = -1;
  Priced bestPriced;
  for (size_t i = 0; i < cands.size(); ++i) {
    const Candidate &cand = cands[i];
    if (best >= 0 && cand.lowerBound >= bestPriced.stepTime)
      break;
    // Candidates whose estimated memory is far over capacity are not simulated
    // in descent mode (the estimate uses closed-form in-flight counts); every
    // returned plan is checked on simulated numbers below.
    if (!exact && cand.memoryEstimate > 1.25 * pl.capacity)
      continue;
    Priced p = pl.price(cand, best >= 0
                                  ? bestPriced.stepTime
                                  : std::numeric_limits<double>::infinity());
    if (!p.valid || !p.fits)
      continue;
    if (best < 0 || p.stepTime < bestPriced.stepTime) {
      best = static_cast<int>(i);
      bestPriced = std::move(p);
    }
  }
  if (best < 0) {
    // Nothing fits: report the smallest footprint (simulated).
    size_t smallest = 0;
    for (size_t i = 1; i < cands.size(); ++i)
      if (cands[i].memoryEstimate < cands[smallest].memoryEstimate)
        smallest = i;
    Priced p = pl.price(cands[smallest]);
    Infeasible inf;
    inf.knobs = cands[smallest].knobs;
    inf.peakMemory = p.valid ? p.peakMemory : cands[smallest].memoryEstimate;
    inf.capacity = pl.capacity;
    inf.parts = p.peakParts;
    inf.candidatesPriced = pl.stats.candidatesPriced;
    std::pair<double, const char *> parts[] = {
        {inf.parts.state.weights, "weights"},
        {inf.parts.state.gradients, "gradients"},
        {inf.parts.state.optimizer, "optimizer state"},
        {inf.parts.activations, "activations"},
        {inf.parts.workspace, "workspace"},
        {p.kfacPeak, "K-FAC state (saved inputs and output gradients, "
                     "factors, inverses)"}};
    double top = -1;
    for (auto [v, name] : parts)
      if (v > top) {
        top = v;
        inf.dominant = name;
      }
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "no plan fits in %.1f GiB per GPU with a %.1f GiB margin: "
                  "the smallest footprint found needs %.1f GiB (%s), "
                  "dominated by %s (%.1f GiB)",
                  inf.capacity / (1 << 30),
                  cost::planningMarginBytes(inf.capacity) / (1 << 30),
                  inf.peakMemory / (1 << 30), knobsToString(inf.knobs).c_str(),
                  inf.dominant.c_str(), top / (1 << 30));
    inf.message = buf;
    if (pl.kfac) { // say what K-FAC adds, whatever dominates
      std::snprintf(buf, sizeof buf,
                    "; with --optimizer kfac, of which K-FAC state (one "
                    "refresh's saved inputs and gradients, factors, "
                    "inverses) is %.1f GiB",
                    p.kfacPeak / (1 << 30));
      inf.message += buf;
    }
    return PlanOutcome(inf);
  }
  Plan result;
  const SearchStats searched = pl.stats; // before "why" prices its neighbours
  describe(pl, cands[best], bestPriced, result);
  result.search = searched;
  for (const auto &[key, ctx] : pl.contexts)
    if (ctx->pricing)
      result.search.sbpEvaluations += ctx->pricing->evaluations;
  result.search.sbpOps = static_cast<int64_t>(cands[best].ctx->sg.ops.size());
  result.search.descentVariables = cands[best].ctx->variables >= 0
                                       ? cands[best].ctx->variables
                                       : result.search.sbpOps;
  result.search.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return PlanOutcome(std::move(result));
}

} // namespace autoddl::planner
