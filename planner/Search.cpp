//===- Search.cpp - plan(): enumerate, visit by lower bound, describe ----===//
//
// The entry point of the search (Search.h); its parts live in one unit each
// (Planner.h): Enumeration.cpp, StepPricing.cpp, StageMemory.cpp,
// Explainer.cpp, Describe.cpp. Here: the knobs' names, the options' checks,
// the visit of the candidates by increasing lower bound, and the report when
// nothing fits.
//
//===----------------------------------------------------------------------===//
#include "planner/Search.h"

#include "planner/Planner.h"
#include "support/EnumNames.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace autoddl::planner {

using pipeline::ScheduleKind;

std::string axisOrderName(AxisOrder o) {
  return o == AxisOrder::TensorInner ? "pp,dp,tp" : "pp,tp,dp";
}

namespace {
constexpr EnumName<cost::Recompute> kRecomputeNames[] = {
    {cost::Recompute::None, "none"},
    {cost::Recompute::Selective, "selective"},
    {cost::Recompute::Full, "full"}};
} // namespace

std::string recomputeName(cost::Recompute r) {
  return std::string(nameOf(kRecomputeNames, r));
}

bool parseRecompute(const std::string &s, cost::Recompute &out) {
  std::optional<cost::Recompute> r = parseName(kRecomputeNames, s);
  if (r)
    out = *r;
  return bool(r);
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

std::string gradientSyncWhere(int rank) {
  return "gradients of pipeline rank " + std::to_string(rank);
}

int gradientSyncRank(const std::string &where) {
  const std::string prefix = "gradients of pipeline rank ";
  if (where.rfind(prefix, 0) != 0 || where.size() == prefix.size() ||
      where.size() > prefix.size() + 6)
    return -1;
  int rank = 0;
  for (size_t i = prefix.size(); i < where.size(); ++i) {
    if (where[i] < '0' || where[i] > '9')
      return -1;
    rank = rank * 10 + (where[i] - '0');
  }
  return rank;
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

using search::Candidate;
using search::Planner;
using search::Priced;

/// The K-FAC options' ranges and the model's K-FAC layers; "" when valid.
std::string setKfac(Planner &pl, const ModelGraph &g1,
                    const PlannerOptions &options) {
  if (!(options.kfacDamping > 0) || !std::isfinite(options.kfacDamping)) {
    char buf[96];
    std::snprintf(buf, sizeof buf,
                  "--kfac-damping must be a finite number > 0, got %g",
                  options.kfacDamping);
    return buf;
  }
  if (options.kfacRefresh < 0 || options.kfacRefresh > 4096)
    return "--kfac-refresh must be 1..4096 steps, got " +
           std::to_string(options.kfacRefresh);
  for (int k : options.kfacDeviceRefresh)
    if (k < 1 || k > 4096)
      return "--kfac-refresh must be 1..4096 steps, got " + std::to_string(k);
  auto model = kfacModel(g1);
  if (!model)
    return model.error();
  pl.kfac = *std::move(model);
  return "";
}

/// Why no candidate was enumerated: every distinct refusal, the
/// --kfac-refresh pin first when it is what skipped the pp that applies.
std::string noCandidate(const Planner &pl, const PlannerOptions &options) {
  if (!options.kfacDeviceRefresh.empty()) {
    const std::string n = std::to_string(options.kfacDeviceRefresh.size());
    std::string others;
    for (const std::string &why : pl.refusals)
      if (why.rfind("--kfac-refresh", 0) != 0)
        others += (others.empty() ? "" : "; ") + why;
    return "--kfac-refresh lists " + n +
           " refresh intervals, one per pipeline device, but no configuration "
           "with pp=" +
           n + " applies" +
           (others.empty() ? " (pp divides the GPUs over tp and is at most the "
                             "number of layers)"
                           : ": " + others);
  }
  if (pl.refusals.size() <= 1)
    return pl.refusals.empty() ? "no parallel configuration applies"
                               : pl.refusals.front();
  std::string all = "no parallel configuration applies: ";
  for (size_t i = 0; i < pl.refusals.size(); ++i)
    all += (i ? "; " : "") + pl.refusals[i];
  return all;
}

/// Visits the candidates in order of the lower bound and stops once it cannot
/// beat the best; the index of the fastest that fits (in `cands`, sorted on
/// return), or -1.
int searchBest(Planner &pl, std::vector<Candidate> &cands, bool exact,
               Priced &bestPriced) {
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Candidate &a, const Candidate &b) {
                     if (a.lowerBound != b.lowerBound)
                       return a.lowerBound < b.lowerBound;
                     return a.order < b.order;
                   });
  int best = -1;
  for (size_t i = 0; i < cands.size(); ++i) {
    const Candidate &cand = cands[i];
    if (best >= 0 && cand.lowerBound >= bestPriced.stepTime)
      break;
    // Candidates whose estimated memory is far over capacity are not simulated
    // in descent mode (the estimate uses closed-form in-flight counts); every
    // returned plan is checked on simulated numbers below.
    if (!exact && cand.memoryEstimate > 1.25 * pl.capacity)
      continue;
    Priced p =
        pl.price(cand, best >= 0 ? bestPriced.stepTime
                                 : std::numeric_limits<double>::infinity());
    if (!p.valid || !p.fits)
      continue;
    if (best < 0 || p.stepTime < bestPriced.stepTime) {
      best = static_cast<int>(i);
      bestPriced = std::move(p);
    }
  }
  return best;
}

/// Nothing fits: the smallest footprint (simulated) and what dominates it.
Infeasible infeasible(Planner &pl, const std::vector<Candidate> &cands) {
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
      {inf.parts.graph, "the graph's adjacency (W8 formats and their build)"},
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
  // No candidate takes the factor stride: that, not memory, is the cause.
  bool strideOnly = pl.kfac.has_value() && !cands.empty();
  for (const Candidate &c : cands)
    strideOnly = strideOnly && !pl.factorStrideRefusal(c.knobs).empty();
  if (strideOnly) {
    inf.message = pl.factorStrideRefusal(cands[smallest].knobs);
    return inf;
  }
  if (pl.kfac) { // say what K-FAC adds, whatever dominates
    std::snprintf(buf, sizeof buf,
                  "; with --optimizer kfac, of which K-FAC state (one "
                  "refresh's saved inputs and gradients, factors, "
                  "inverses) is %.1f GiB",
                  p.kfacPeak / (1 << 30));
    inf.message += buf;
  }
  return inf;
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
  if (options.optimizer == "kfac")
    if (std::string why = setKfac(pl, g1, options); !why.empty())
      return Result::failure(why);
  pl.stats.mode = options.mode == SearchMode::Exhaustive ? "exhaustive" : "cd";

  std::vector<Candidate> cands;
  pl.enumerate(cands);
  if (pl.exhaustiveTooLarge)
    return Result::failure(
        "the model is too large for --search exhaustive (more than " +
        std::to_string(static_cast<int64_t>(options.exhaustiveLimit)) +
        " partial SBP assignments); use --search cd");
  if (cands.empty())
    return Result::failure(noCandidate(pl, options));
  Priced bestPriced;
  const int best =
      searchBest(pl, cands, options.mode == SearchMode::Exhaustive, bestPriced);
  if (best < 0)
    return PlanOutcome(infeasible(pl, cands));
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
