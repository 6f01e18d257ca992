//===- StepPricing.cpp - what one candidate's step costs -------------===//
//
// The inner SBP search of a context (coordinate descent from several starts,
// Descent.h, Collapse.h), then per candidate: the stage partition and times,
// gradient sync and optimizer, a lower bound without simulating, and the
// simulated step with K-FAC packed into its bubbles (Planner.h).
//
//===----------------------------------------------------------------------===//
#include "planner/Planner.h"

#include "planner/Collapse.h"
#include "planner/Descent.h"

#include <cmath>

#include <algorithm>

namespace autoddl::planner::search {
Context *Planner::context(int tp, int pp, int64_t b, AxisOrder order,
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
  auto pricing =
      std::make_unique<PricingContext>(ctx->sg, c, o, tp, dp, pp, b, m, order);
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

void Planner::searchSbp(Context &ctx) {
  PricingContext &p = *ctx.pricing;
  std::vector<Assignment> starts = {pureDataParallelStart(p), megatronStart(p)};
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

std::vector<int> Planner::partition(Partition kind, int S,
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
      m = std::max(m,
                   x[s] * tl + (s == 0 ? tPre : 0) + (s == S - 1 ? tPost : 0));
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

Planner::DevicePlan Planner::layout(const Knobs &k, Partition part,
                                    const Aggregate &agg,
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
    const double sendF = s < S - 1 ? blocking : 0, sendB = s > 0 ? blocking : 0;
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

void Planner::syncAndOptimizer(const Knobs &k, const PricingContext &pc,
                               DevicePlan &d) const {
  for (int dev = 0; dev < k.pp; ++dev) {
    DeviceTimes &dt = d.devices[dev];
    const double bytes = d.gradDp[dev] + d.gradDpTp[dev];
    const double window =
        dt.backward / (k.schedule == ScheduleKind::Interleaved ? k.chunks : 1);
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
    } else if (kfac) {
      // K-FAC with ZeRO-1 (KfacRun's rule_step): the gradients all-reduced
      // whole (preconditioning reads every row), the rule on this rank's
      // shard, the weights all-gathered; both in the optimizer step, after
      // the backward (a ZeRO program has no gradient buckets).
      full = reduce(cost::Collective::AllReduce) +
             reduce(cost::Collective::AllGather);
      exposed = full;
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

double Planner::lowerBound(const Knobs &k, const DevicePlan &d) const {
  double lb = 0;
  for (int dev = 0; dev < k.pp; ++dev) {
    const DeviceTimes &dt = d.devices[dev];
    lb = std::max(lb, static_cast<double>(k.microbatches) *
                              (dt.forward + dt.backward) +
                          dt.optimizer);
  }
  return lb;
}

KfacCandidate Planner::kfacCandidate(const Knobs &k, const PricingContext &pc,
                                     const DevicePlan &d) const {
  return {&k,
          &d.stages,
          fixedShapes
              ? static_cast<double>(g1.batch) / (graphNodes > 0 ? k.dp : 1)
              : static_cast<double>(k.microbatch),
          pc.dpGroup(),
          pc.ppGroup(),
          cost::bulkPrecision(o.precision),
          o.kfacFactorStride};
}

std::string Planner::factorStrideRefusal(const Knobs &k) const {
  const int stride = o.kfacFactorStride;
  const int64_t samples = fixedShapes ? instanceMicrobatch() : k.microbatch;
  if (stride <= 1)
    return "";
  if (graphNodes > 0)
    return "--kfac-factor-stride: a graph model's rows are nodes, not samples "
           "(only 1 there)";
  if (samples % stride != 0)
    return "--kfac-factor-stride " + std::to_string(stride) +
           " does not divide the micro-batch of " + std::to_string(samples) +
           " samples";
  return "";
}

bool Planner::addKfac(const Knobs &k, const PricingContext &pc,
                      const pipeline::Schedule &schedule, DevicePlan &d,
                      Priced &r, double &step) const {
  const int stride = o.kfacFactorStride;
  if (std::string why = factorStrideRefusal(k); !why.empty()) {
    r.valid = false;
    r.invalid = std::move(why);
    return false;
  }
  const KfacCandidate kc = kfacCandidate(k, pc, d);
  const KfacSettings settings{
      o.kfacDamping,  o.kfacRefresh,     o.kfacDeviceRefresh, o.kfacFilling,
      o.kfacOverhead, o.kfacFactorDecay, o.kfacFactorEvery,   stride};
  auto kp = applyKfac(*kfac, c, kc, schedule, r.sim, settings, d.devices, step,
                      r.criticalDevice);
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

bool Planner::kfacCannotWin(const Knobs &k, const PricingContext &pc,
                            const pipeline::Schedule &schedule,
                            const DevicePlan &d, double bound) const {
  const KfacCandidate kc = kfacCandidate(k, pc, d);
  std::vector<double> bytes(d.devices.size(), 0),
      precondition(d.devices.size(), 0);
  for (const pipeline::KfacLayerWork &w : kfacWork(*kfac, c, kc)) {
    const int dev = schedule.deviceOf(w.stage, w.direction);
    if (dev < 0 || static_cast<size_t>(dev) >= d.devices.size())
      continue;
    bytes[size_t(dev)] +=
        3 * (w.factorBytes[0] + w.factorBytes[1]) + w.inverseCopyBytes;
    precondition[size_t(dev)] += w.precondition;
  }
  for (size_t dev = 0; dev < d.devices.size(); ++dev) {
    const DeviceTimes &dt = d.devices[dev];
    if (dt.memory + bytes[dev] + cost::planningMarginBytes(capacity) >
            capacity ||
        dt.end + dt.gradSyncExposed + dt.optimizer + precondition[dev] >= bound)
      return true;
  }
  return false;
}

const Planner::StepEnds &
Planner::simulateStep(const ScheduleMemo::value_type &entry,
                      const pipeline::StageTimes &times,
                      pipeline::SimulationResult &full) {
  const MemoSchedule &ms = entry.second;
  auto run = [&](StepEnds &out) {
    // A schedule that does not check out: simulate() names why.
    // K-FAC packs its items into the timeline's bubbles; else only each
    // device's end is read.
    auto sim = ms.prepared
                   ? pipeline::simulate(*ms.prepared, times, kfac.has_value())
                   : pipeline::simulate(*ms.schedule, times);
    if (!sim) {
      out.error = sim.error();
      return;
    }
    out.end.assign(size_t(std::get<1>(entry.first)), 0); // per device
    for (size_t d = 0; d < sim->devices.size() && d < out.end.size(); ++d)
      out.end[d] = sim->devices[d].end;
    out.bubbleFraction = sim->bubbleFraction;
    if (kfac)
      full = *std::move(sim);
  };
  bool finite = std::isfinite(times.p2p);
  for (const std::vector<double> *v :
       {&times.forward, &times.backward, &times.weightGradient})
    for (double x : *v)
      finite &= std::isfinite(x);
  if (kfac || !finite) { // the whole result, or a key maps cannot order
    lastEnds = StepEnds{};
    run(lastEnds);
    return lastEnds;
  }
  // The step depends on the schedule and the times alone: candidates that
  // differ only in what the simulator does not see (ZeRO, a recomputation
  // that changes no time, partitions that agree) share one simulation.
  auto key = std::make_tuple(entry.first, times.forward, times.backward,
                             times.weightGradient, times.p2p);
  auto it = simMemo.find(key);
  if (it == simMemo.end()) {
    it = simMemo.emplace(std::move(key), StepEnds{}).first;
    run(it->second);
  }
  return it->second;
}

Priced Planner::price(const Candidate &cand, double bound) {
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
  if (it == scheduleMemo.end()) {
    it = scheduleMemo
             .emplace(key, MemoSchedule{pipeline::generateSchedule(sc), {}})
             .first;
    if (const auto &s = it->second.schedule)
      if (auto prepared = pipeline::prepareSchedule(*s))
        it->second.prepared = *std::move(prepared);
  }
  const pipeline::OrError<pipeline::Schedule> &schedule = it->second.schedule;
  if (!schedule) {
    r.invalid = schedule.error();
    return r;
  }
  const StepEnds &ends = simulateStep(*it, d.times, r.sim);
  ++stats.simulated;
  if (!ends.error.empty()) {
    r.invalid = ends.error;
    return r;
  }
  r.valid = true;
  const std::vector<double> &end = ends.end;
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
  p.modelFlopsPerStep = 3 * flopsPerSample * static_cast<double>(o.globalBatch);
  double recomputeFlops = 0;
  if (k.recompute == cost::Recompute::Full)
    recomputeFlops = flopsPerSample * static_cast<double>(o.globalBatch);
  p.tflopsPerGpu = p.modelFlopsPerStep / step / world / 1e12;
  p.hardwareTflopsPerGpu =
      (p.modelFlopsPerStep + recomputeFlops) / step / world / 1e12;
  p.mfu =
      p.tflopsPerGpu * 1e12 / c.peakFlops(cost::bulkPrecision(o.precision));
  p.bubbleFraction = ends.bubbleFraction;
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
} // namespace autoddl::planner::search
