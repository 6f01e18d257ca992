//===- Collapse.cpp - exact eliminations (docs/planner.md §2) -------------===//
#include "planner/Collapse.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace autoddl::planner {

namespace {

/// Visits every assignment of `scope` (row major) through `a`, calling f(i).
template <typename F>
void forEachIndex(const std::vector<int> &scope, const std::vector<int> &sizes,
                  Assignment &a, F &&f) {
  const size_t r = scope.size();
  for (int op : scope)
    a[op] = 0;
  size_t i = 0;
  while (true) {
    f(i++);
    size_t d = r;
    while (d > 0) {
      int op = scope[d - 1];
      if (++a[op] < sizes[op])
        break;
      a[op] = 0;
      --d;
    }
    if (d == 0)
      return;
  }
}

} // namespace

double ReducedProblem::evaluate(const Factor &f, const Assignment &a) const {
  size_t idx = 0;
  for (int op : f.scope)
    idx = idx * static_cast<size_t>(sizes_[op]) + static_cast<size_t>(a[op]);
  return f.table[idx];
}

ReducedProblem::ReducedProblem(PricingContext &ctx, size_t maxEntries) {
  const SearchGraph &sg = ctx.graph();
  const int n = static_cast<int>(sg.ops.size());
  for (const CollapsedOp &op : sg.ops)
    sizes_.push_back(static_cast<int>(op.sigs.size()));
  Incidence inc(sg);
  Assignment a(n, 0);

  // Working tables; identical scopes are merged on insertion (parallel edges).
  std::vector<Factor> work;
  std::vector<bool> alive;
  std::map<std::vector<int>, int> byScope;
  std::vector<std::set<int>> touching(n);
  auto add = [&](Factor f) {
    auto it = byScope.find(f.scope);
    if (it != byScope.end()) {
      Factor &g = work[it->second];
      for (size_t i = 0; i < g.table.size(); ++i)
        g.table[i] += f.table[i];
      return;
    }
    const int id = static_cast<int>(work.size());
    byScope.emplace(f.scope, id);
    for (int op : f.scope)
      touching[op].insert(id);
    work.push_back(std::move(f));
    alive.push_back(true);
  };
  auto remove = [&](int id) {
    alive[id] = false;
    byScope.erase(work[id].scope);
    for (int op : work[id].scope)
      touching[op].erase(id);
  };

  for (int op = 0; op < n; ++op) {
    Factor f{{op}, {}};
    for (int s = 0; s < sizes_[op]; ++s)
      f.table.push_back(ctx.unary(op, s));
    add(std::move(f));
  }
  for (size_t e = 0; e < sg.edges.size(); ++e) {
    const std::vector<int> scope = sg.edges[e].endpoints();
    if (scope.empty()) {
      constant_ += ctx.edgeTerm(static_cast<int>(e), a);
      continue;
    }
    size_t entries = 1;
    for (int op : scope) {
      entries *= static_cast<size_t>(sizes_[op]);
      if (entries > maxEntries) {
        ok_ = false;
        return;
      }
    }
    Factor f{scope, std::vector<double>(entries, 0)};
    bool nonzero = false;
    forEachIndex(scope, sizes_, a, [&](size_t i) {
      f.table[i] = ctx.edgeTerm(static_cast<int>(e), a);
      nonzero |= f.table[i] != 0;
    });
    if (nonzero)
      add(std::move(f));
  }

  // Eliminate leaves, chain interiors and isolated ops until none is left.
  std::vector<bool> gone(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int v = 0; v < n; ++v) {
      if (gone[v])
        continue;
      std::set<int> nb;
      for (int id : touching[v])
        for (int op : work[id].scope)
          if (op != v)
            nb.insert(op);
      if (nb.size() > 2)
        continue;
      Step st{v, {}};
      for (int id : std::vector<int>(touching[v].begin(), touching[v].end())) {
        st.folded.push_back(work[id]);
        remove(id);
      }
      Factor f{std::vector<int>(nb.begin(), nb.end()), {}};
      size_t entries = 1;
      for (int op : f.scope)
        entries *= static_cast<size_t>(sizes_[op]);
      f.table.assign(entries, 0);
      forEachIndex(f.scope, sizes_, a, [&](size_t i) {
        double best = std::numeric_limits<double>::infinity();
        for (int s = 0; s < sizes_[v]; ++s) {
          a[v] = s;
          double t = 0;
          for (const Factor &g : st.folded)
            t += evaluate(g, a);
          best = std::min(best, t);
        }
        f.table[i] = best;
      });
      if (f.scope.empty())
        constant_ += f.table.front();
      else
        add(std::move(f));
      steps_.push_back(std::move(st));
      gone[v] = true;
      changed = true;
    }
  }
  for (int op = 0; op < n; ++op)
    if (!gone[op])
      live_.push_back(op);
  of_.assign(n, {});
  std::set<std::pair<int, int>> seenPairs;
  for (size_t id = 0; id < work.size(); ++id) {
    if (!alive[id])
      continue;
    const int k = static_cast<int>(factors_.size());
    for (int op : work[id].scope)
      of_[op].push_back(k);
    const std::vector<int> &s = work[id].scope;
    for (size_t i = 0; i < s.size(); ++i)
      for (size_t j = i + 1; j < s.size(); ++j)
        if (seenPairs.insert({s[i], s[j]}).second)
          pairs_.push_back({s[i], s[j]});
    factors_.push_back(std::move(work[id]));
  }
}

double ReducedProblem::value(const Assignment &a) const {
  double t = constant_;
  for (const Factor &f : factors_)
    t += evaluate(f, a);
  return t;
}

double ReducedProblem::local(const Assignment &a, int op) const {
  double t = 0;
  for (int id : of_[op])
    t += evaluate(factors_[id], a);
  return t;
}

double ReducedProblem::localPair(const Assignment &a, int u, int w) const {
  double t = local(a, u);
  for (int id : of_[w]) {
    const std::vector<int> &s = factors_[id].scope;
    if (std::find(s.begin(), s.end(), u) == s.end())
      t += evaluate(factors_[id], a);
  }
  return t;
}

void ReducedProblem::recover(Assignment &a) const {
  for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
    int bestSig = 0;
    double best = std::numeric_limits<double>::infinity();
    for (int s = 0; s < sizes_[it->op]; ++s) {
      a[it->op] = s;
      double t = 0;
      for (const Factor &f : it->folded)
        t += evaluate(f, a);
      if (t < best) {
        best = t;
        bestSig = s;
      }
    }
    a[it->op] = bestSig;
  }
}

DescentResult reducedDescent(PricingContext &ctx, const ReducedProblem &rp,
                             Assignment a) {
  const int sweeps = descend(
      a, rp.live(), rp.pairs(), [&](int op) { return rp.signatures(op); },
      [&](const Assignment &x, int op) { return rp.local(x, op); },
      [&](const Assignment &x, int u, int w) { return rp.localPair(x, u, w); },
      ctx.evaluations);
  rp.recover(a);
  return priced(ctx, std::move(a), sweeps);
}

std::optional<DescentResult> reducedExhaustive(PricingContext &ctx,
                                               const ReducedProblem &rp,
                                               double upperBound,
                                               int64_t nodeLimit) {
  const int n = static_cast<int>(ctx.graph().ops.size());
  const std::vector<int> &live = rp.live();
  std::vector<int> position(n, -1), choices;
  for (size_t i = 0; i < live.size(); ++i) {
    position[live[i]] = static_cast<int>(i);
    choices.push_back(rp.signatures(live[i]));
  }
  std::vector<std::vector<int>> closedAt(live.size() + 1);
  std::vector<double> minAt(live.size() + 1, 0);
  for (size_t id = 0; id < rp.factors().size(); ++id) {
    const Factor &f = rp.factors()[id];
    int last = 0;
    for (int op : f.scope)
      last = std::max(last, position[op]);
    closedAt[last].push_back(static_cast<int>(id));
    minAt[last] += *std::min_element(f.table.begin(), f.table.end());
  }
  // Every table not yet complete adds at least its minimum.
  std::vector<double> restBound(live.size() + 1, 0);
  for (int i = static_cast<int>(live.size()) - 1; i >= 0; --i)
    restBound[i] = restBound[i + 1] + minAt[i];
  BranchAndBound bb(live, std::move(choices), std::move(restBound), n,
                    upperBound * (1 + 1e-6) + 1e-15, nodeLimit,
                    [&](size_t pos, const Assignment &a, double &v) {
                      for (int id : closedAt[pos])
                        v += rp.evaluate(rp.factors()[id], a);
                    });
  std::optional<Assignment> best = bb.run(rp.constant());
  ctx.evaluations += bb.nodes();
  if (!best)
    return std::nullopt;
  rp.recover(*best);
  return priced(ctx, std::move(*best));
}

} // namespace autoddl::planner
