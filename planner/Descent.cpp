//===- Descent.cpp - coordinate descent and the exact oracle -------------===//
#include "planner/Descent.h"

#include <algorithm>
#include <string_view>

namespace autoddl::planner {

using cost::Sbp;

Incidence::Incidence(const SearchGraph &sg) {
  edgesOf.assign(sg.ops.size(), {});
  lastOp.assign(sg.edges.size(), -1);
  for (size_t e = 0; e < sg.edges.size(); ++e) {
    const std::vector<int> ends = sg.edges[e].endpoints();
    for (int op : ends)
      edgesOf[op].push_back(static_cast<int>(e));
    lastOp[e] = ends.empty() ? -1 : ends.back();
  }
}

namespace {

/// Objective terms that depend on the ops in `ops` (their unaries and every
/// edge they touch, each edge once).
double localCost(PricingContext &ctx, const Incidence &inc, const Assignment &a,
                 std::initializer_list<int> ops) {
  double total = 0;
  std::vector<int> edges;
  for (int op : ops) {
    total += ctx.unary(op, a[op]);
    for (int e : inc.edgesOf[op])
      edges.push_back(e);
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  for (int e : edges)
    total += ctx.edgeTerm(e, a);
  return total;
}

} // namespace

DescentResult coordinateDescent(PricingContext &ctx, const Incidence &inc,
                                Assignment a) {
  const SearchGraph &sg = ctx.graph();
  const int n = static_cast<int>(sg.ops.size());
  // Single-op moves in topological order; then pair moves along producer ->
  // consumer edges: a column -> row switch only pays when both ends change
  // together.
  std::vector<int> ops(n);
  for (int op = 0; op < n; ++op)
    ops[op] = op;
  std::vector<std::pair<int, int>> pairs;
  for (const CollapsedEdge &e : sg.edges)
    if (e.producer >= 0)
      for (auto [c, slot] : e.consumers)
        if (c != e.producer)
          pairs.push_back({e.producer, c});
  const int sweeps = descend(
      a, ops, pairs,
      [&](int op) { return static_cast<int>(sg.ops[op].sigs.size()); },
      [&](const Assignment &x, int op) { return localCost(ctx, inc, x, {op}); },
      [&](const Assignment &x, int u, int w) {
        return localCost(ctx, inc, x, {u, w});
      },
      ctx.evaluations);
  return priced(ctx, std::move(a), sweeps);
}

std::optional<DescentResult> exhaustiveSearch(PricingContext &ctx,
                                              const Incidence &inc,
                                              double upperBound,
                                              int64_t nodeLimit) {
  const SearchGraph &sg = ctx.graph();
  const int n = static_cast<int>(sg.ops.size());
  std::vector<int> order(n), choices(n);
  for (int op = 0; op < n; ++op) {
    order[op] = op;
    choices[op] = static_cast<int>(sg.ops[op].sigs.size());
  }
  // Every op still to assign adds at least its cheapest unary term.
  std::vector<double> restBound(n + 1, 0);
  for (int op = n - 1; op >= 0; --op) {
    double cheapest = ctx.unary(op, 0);
    for (size_t s = 1; s < sg.ops[op].sigs.size(); ++s)
      cheapest = std::min(cheapest, ctx.unary(op, static_cast<int>(s)));
    restBound[op] = restBound[op + 1] + cheapest;
  }
  // Edges without endpoints among the ops (never happens) and the edges whose
  // last endpoint is an op are closed when that op is assigned.
  std::vector<std::vector<int>> edgesClosedAt(n);
  double constant = 0;
  const Assignment unassigned(n, 0);
  for (size_t e = 0; e < sg.edges.size(); ++e) {
    if (inc.lastOp[e] >= 0)
      edgesClosedAt[inc.lastOp[e]].push_back(static_cast<int>(e));
    else
      constant += ctx.edgeTerm(static_cast<int>(e), unassigned);
  }
  BranchAndBound bb(std::move(order), std::move(choices), std::move(restBound),
                    n, upperBound * (1 + 1e-9) + 1e-15, nodeLimit,
                    [&](size_t op, const Assignment &a, double &v) {
                      v += ctx.unary(static_cast<int>(op), a[op]);
                      for (int e : edgesClosedAt[op])
                        v += ctx.edgeTerm(e, a);
                    });
  std::optional<Assignment> best = bb.run(constant);
  ctx.evaluations += bb.nodes();
  if (!best)
    return std::nullopt;
  return priced(ctx, std::move(*best));
}

namespace {

int findSig(const CollapsedOp &op, std::string_view name) {
  for (size_t s = 0; s < op.sigs.size(); ++s)
    if (op.sigs[s].name == name)
      return static_cast<int>(s);
  return -1;
}

} // namespace

Assignment pureDataParallelStart(const PricingContext &ctx) {
  const SearchGraph &sg = ctx.graph();
  Assignment a(sg.ops.size(), 0);
  for (size_t i = 0; i < sg.ops.size(); ++i)
    a[i] = std::max(0, findSig(sg.ops[i], "batch"));
  return a;
}

Assignment megatronStart(const PricingContext &ctx) {
  const SearchGraph &sg = ctx.graph();
  const ModelGraph &g = *sg.graph;
  Assignment a(sg.ops.size(), 0);
  // Layout of each tensor produced so far (B when unknown).
  std::vector<Sbp> layout(g.tensors.size(), Sbp::broadcast());
  // The model ops each collapsed op stands for, in model order.
  std::vector<std::vector<size_t>> members(sg.ops.size());
  for (size_t j = 0; j < g.ops.size(); ++j)
    if (sg.opOf[j] >= 0 && size_t(sg.opOf[j]) < members.size())
      members[size_t(sg.opOf[j])].push_back(j);
  for (size_t i = 0; i < sg.ops.size(); ++i) {
    const CollapsedOp &op = sg.ops[i];
    const OpDef &def = g.ops[op.op];
    const int r = def.results.front();
    auto splitLast = [&](int t) {
      return layout[t].kind == Sbp::Split &&
             layout[t].dim == static_cast<int>(sg.shape1(t).size()) - 1;
    };
    int pick = -1;
    const std::string &k = def.kind;
    if (k == "linear")
      pick = findSig(op, splitLast(def.operands[0]) ? "row" : "column");
    else if (k == "attention" || k == "rotary")
      pick = findSig(op, "heads");
    else if (k == "gelu" || k == "relu" || k == "silu" || k == "elu" ||
             k == "swiglu" || k == "mul") {
      bool all = true;
      for (int t : def.operands)
        all &= splitLast(t);
      if (all)
        pick = findSig(op, "hidden");
    } else if (k == "embedding")
      pick = findSig(op, "vocab");
    else if (k == "cross_entropy" && splitLast(def.operands[0]))
      pick = findSig(op, "vocab");
    a[i] = std::max(0, pick);
    layout[r] = op.sigs[a[i]].result;
    // A P result is all-reduced before anything else reads it (Megatron's "g").
    if (layout[r].kind == Sbp::Partial)
      layout[r] = Sbp::broadcast();
    // Every later layer reads this layer's tensors at the same positions.
    for (size_t j : members[i])
      layout[g.ops[j].results.front()] = layout[r];
  }
  return a;
}

Assignment namedStart(const PricingContext &ctx,
                      const std::vector<std::string> &previous) {
  const SearchGraph &sg = ctx.graph();
  Assignment a(sg.ops.size(), 0);
  for (size_t i = 0; i < sg.ops.size() && i < previous.size(); ++i)
    a[i] = std::max(0, findSig(sg.ops[i], previous[i]));
  return a;
}

} // namespace autoddl::planner
