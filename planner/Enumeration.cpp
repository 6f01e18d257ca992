//===- Enumeration.cpp - the outer loops: every candidate the programs run ===//
//
// Meshes (tp x dp x pp, axis order), micro-batch sizes, schedules, recompu-
// tation and ZeRO stages in a fixed order; what the generated programs do not
// run (Runnable.h, DESIGN.md §5b) is never a candidate, and why a pinned knob
// was refused is kept for the user (Planner.h).
//
//===----------------------------------------------------------------------===//
#include "planner/Planner.h"

#include <algorithm>

namespace autoddl::planner::search {
std::vector<int> Planner::divisorsUpTo(int n, int cap) const {
  std::vector<int> v;
  for (int x = 1; x <= n && x <= cap; ++x)
    if (n % x == 0)
      v.push_back(x);
  return v;
}

bool Planner::chimeraPinsDiffer(int pp) {
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

void Planner::refuse(const std::string &why) {
  if (std::find(refusals.begin(), refusals.end(), why) == refusals.end())
    refusals.push_back(why);
}

void Planner::expand(Context &ctx, int assignment, int tp, int pp, int64_t b,
                     AxisOrder order, std::vector<Candidate> &out,
                     int64_t &counter) {
  const FixedKnobs &f = o.fixed;
  const int dp = c.worldSize() / (tp * pp);
  const int64_t m = replicaInstances(dp) / b;
  std::vector<std::pair<ScheduleKind, int>> schedules;
  auto pinned = [&](ScheduleKind s) { return f.schedule && *f.schedule == s; };
  if (pp == 1) {
    schedules.push_back({ScheduleKind::OneFOneB, 1});
  } else {
    for (ScheduleKind s : {ScheduleKind::OneFOneB, ScheduleKind::GPipe,
                           ScheduleKind::Interleaved,
                           ScheduleKind::ZeroBubbleH1, ScheduleKind::Chimera}) {
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
  std::vector<cost::Recompute> recomputes = {
      cost::Recompute::None, cost::Recompute::Selective, cost::Recompute::Full};
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

void Planner::enumerate(std::vector<Candidate> &out) {
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
        refuse("dp=" + std::to_string(*f.dp) +
               " with tp=" + std::to_string(tp) + " pp=" + std::to_string(pp) +
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
        bs.push_back(instanceMicrobatch());
      else
        for (int64_t b = 1; b <= perReplica && b <= 64; ++b)
          if (perReplica % b == 0)
            bs.push_back(b);
      for (int64_t b : bs) {
        if (fixedShapes && b != instanceMicrobatch()) {
          refuse(g1.staticBatch > 0
                     ? "input '" + g1.staticBatchInput +
                           "' has a static batch of " +
                           std::to_string(g1.staticBatch) +
                           ", so microbatch must be " +
                           std::to_string(g1.staticBatch)
                     : "the model's shapes do not scale with the batch (" +
                           g1.family +
                           "): a micro-batch is one instance of it, so "
                           "microbatch must be 1");
          continue;
        }
        if (b < 1 || perReplica % b != 0) {
          refuse("micro-batch " + std::to_string(b) + " does not divide the " +
                 std::to_string(perReplica) +
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
} // namespace autoddl::planner::search
