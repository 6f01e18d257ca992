//===- Explainer.cpp - the neighbouring choices and why they lost -------===//
//
// `plan --why` / `inspect --why`: each knob of the chosen candidate moved to
// its neighbours (and each op's other signatures), priced as the search prices
// candidates, and judged against the chosen step: invalid, does not fit (only
// when it would be at least as fast: memory is then the reason), slower (by
// which part of the step; its memory said besides when it does not fit
// either), or faster but pinned / outside the searched set.
//
//===----------------------------------------------------------------------===//
#include "planner/Planner.h"

#include <algorithm>
#include <cstdio>

namespace autoddl::planner::search {

namespace {

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
    // Memory is named as the reason only where it is one: an alternative
    // that does not fit but would be no faster lost on time (its memory is
    // said besides).
    char need[96] = "";
    if (!p.fits)
      std::snprintf(need, sizeof need, "needs %.1f GiB of %.1f GiB",
                    p.peakMemory / (1 << 30), pl.capacity / (1 << 30));
    const double pct = 100 * a.deltaTime / chosenPriced.stepTime;
    char buf[384];
    if (!p.fits && a.deltaTime < 0) {
      std::snprintf(buf, sizeof buf,
                    "does not fit: %s (it would be faster by %.2f%%)", need,
                    -pct);
      a.reason = buf;
    } else if (!p.fits && a.deltaTime == 0) {
      std::snprintf(buf, sizeof buf, "does not fit: %s (as fast otherwise)",
                    need);
      a.reason = buf;
    } else if (a.deltaTime == 0) {
      a.reason = "as fast; the search keeps the earlier candidate on ties";
    } else if (a.deltaTime > 0) {
      std::snprintf(buf, sizeof buf, "slower by %.1f%%: %s%s%s", pct,
                    dominantIncrease(chosenPriced.pred, p.pred).c_str(),
                    p.fits ? "" : "; it does not fit either: ", need);
      a.reason = buf;
    } else if (pinned(knob)) {
      a.reason = "faster, but the knob is pinned by --fix";
    } else {
      // Not the memory pre-filter: it skips only candidates far over
      // capacity, and this one fits.
      std::snprintf(buf, sizeof buf,
                    "faster by %.2f%% with this knob alone, but outside the "
                    "searched set (another pinned knob, or a value the "
                    "search does not enumerate)",
                    -pct);
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

} // namespace

std::vector<Alternative> explain(Planner &pl, const Candidate &chosen,
                                 const Priced &chosenPriced) {
  Explainer ex{pl, chosen, chosenPriced};
  return ex.run();
}

} // namespace autoddl::planner::search
