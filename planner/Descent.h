//===- Descent.h - the inner SBP search on one mesh -----------------------===//
//
// Block coordinate descent over per-op signatures (one op at a time, then every
// producer/consumer pair jointly, as OneFlow's SbpNode/SbpEdge greedy moves),
// re-sweeping until no move lowers the objective; and the exact oracle, a
// branch-and-bound over every assignment in topological order (all terms are
// non-negative, so a partial sum bounds every completion). Reference:
// autoddl.md §4.2.3, §4.3; docs/planner.md "inner search".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "planner/Pricing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace autoddl::planner {

/// Ops and edges each move touches, so a move is priced incrementally.
struct Incidence {
  std::vector<std::vector<int>>
      edgesOf;             // collapsed op -> edges it is an endpoint of
  std::vector<int> lastOp; // edge -> largest endpoint op index
  explicit Incidence(const SearchGraph &sg);
};

struct DescentResult {
  Assignment assignment;
  double objective = 0;
  int sweeps = 0;
};

/// Coordinate descent from `start`. Ties keep the current signature; among
/// equal improvements the first found (op order, then signature index) wins.
DescentResult coordinateDescent(PricingContext &ctx, const Incidence &inc,
                                Assignment start);

/// The exact minimum of the objective; `upperBound` prunes (pass the descent's
/// value). nullopt when more than `nodeLimit` partial assignments were visited.
std::optional<DescentResult> exhaustiveSearch(PricingContext &ctx,
                                              const Incidence &inc,
                                              double upperBound,
                                              int64_t nodeLimit);

/// The result of a search that ended at `a` after `sweeps` sweeps: `a` and
/// its full objective.
inline DescentResult priced(PricingContext &ctx, Assignment a, int sweeps = 0) {
  DescentResult r;
  r.objective = ctx.objective(a);
  r.assignment = std::move(a);
  r.sweeps = sweeps;
  return r;
}

/// Whether `candidate` improves on `current` by more than rounding (1e-12
/// relative): a descent keeps the current signature on ties.
inline bool better(double candidate, double current) {
  return candidate < current - 1e-12 * std::max(1.0, std::abs(current));
}

/// Block coordinate descent, shared by coordinateDescent and reducedDescent.
/// Each sweep (at most 200) moves every op of `ops` alone to its best other
/// signature, then every (u, w) of `pairs` jointly, keeping a move only when
/// better(); it stops after a sweep that changed nothing. `signatures(op)`
/// counts an op's choices, `local(a, op)` and `localPair(a, u, w)` price the
/// terms that depend on them (each call counted in `evaluations`). Returns
/// the sweeps run (201: the limit was reached).
template <class Signatures, class Local, class LocalPair>
int descend(Assignment &a, const std::vector<int> &ops,
            const std::vector<std::pair<int, int>> &pairs,
            Signatures signatures, Local local, LocalPair localPair,
            int64_t &evaluations) {
  int sweeps = 1;
  for (; sweeps <= 200; ++sweeps) {
    bool changed = false;
    for (int op : ops) {
      const int k = signatures(op);
      if (k < 2)
        continue;
      ++evaluations;
      double best = local(a, op);
      const int cur = a[op];
      int bestSig = cur;
      for (int s = 0; s < k; ++s) {
        if (s == cur)
          continue;
        a[op] = s;
        ++evaluations;
        double v = local(a, op);
        if (better(v, best)) {
          best = v;
          bestSig = s;
        }
      }
      a[op] = bestSig;
      changed |= bestSig != cur;
    }
    for (auto [u, w] : pairs) {
      const int ku = signatures(u), kw = signatures(w);
      if (ku < 2 || kw < 2)
        continue;
      const int cu = a[u], cw = a[w];
      ++evaluations;
      double best = localPair(a, u, w);
      int bu = cu, bw = cw;
      for (int su = 0; su < ku; ++su)
        for (int sw = 0; sw < kw; ++sw) {
          if (su == cu && sw == cw)
            continue;
          a[u] = su;
          a[w] = sw;
          ++evaluations;
          double v = localPair(a, u, w);
          if (better(v, best)) {
            best = v;
            bu = su;
            bw = sw;
          }
        }
      a[u] = bu;
      a[w] = bw;
      changed |= bu != cu || bw != cw;
    }
    if (!changed)
      break;
  }
  return sweeps;
}

/// Depth-first branch and bound, shared by exhaustiveSearch and the reduced
/// problem's reducedExhaustive: ops are assigned in `order`, op order[pos]
/// taking each of choices[pos] signatures; `addClosed(pos, a, v)` adds to v
/// the terms that position's choice completes. A branch is cut when its
/// partial cost plus restBound[pos + 1] (a lower bound of what the later
/// positions add) is not below the best complete cost found (at first
/// `bound`).
template <class AddClosed> class BranchAndBound {
public:
  BranchAndBound(std::vector<int> order, std::vector<int> choices,
                 std::vector<double> restBound, size_t ops, double bound,
                 int64_t nodeLimit, AddClosed addClosed)
      : order_(std::move(order)), choices_(std::move(choices)),
        restBound_(std::move(restBound)), a_(ops, 0), bestValue_(bound),
        limit_(nodeLimit), addClosed_(std::move(addClosed)) {}

  /// The cheapest complete assignment (unassigned ops 0) below the bound,
  /// starting from cost `constant`; nullopt when none is, or when more than
  /// the node limit of partial assignments were visited.
  std::optional<Assignment> run(double constant) {
    visit(0, constant);
    if (exceeded_ || !found_)
      return std::nullopt;
    return best_;
  }
  int64_t nodes() const { return nodes_; }

private:
  void visit(size_t pos, double partial) {
    if (exceeded_)
      return;
    if (++nodes_ > limit_) {
      exceeded_ = true;
      return;
    }
    if (pos == order_.size()) {
      if (partial < bestValue_) {
        bestValue_ = partial;
        best_ = a_;
        found_ = true;
      }
      return;
    }
    const int op = order_[pos];
    for (int s = 0; s < choices_[pos]; ++s) {
      a_[op] = s;
      double v = partial;
      addClosed_(pos, a_, v);
      if (v + restBound_[pos + 1] < bestValue_)
        visit(pos + 1, v);
    }
    a_[op] = 0;
  }

  std::vector<int> order_, choices_;
  std::vector<double> restBound_;
  Assignment a_, best_;
  double bestValue_;
  int64_t limit_, nodes_ = 0;
  bool exceeded_ = false, found_ = false;
  AddClosed addClosed_;
};

/// Starting points: every op split over the batch where it can ("pure data
/// parallel" on the tp axis), and Megatron-LM's tensor parallelism (column /
/// row linears, heads, vocabulary-parallel embedding and loss).
Assignment pureDataParallelStart(const PricingContext &ctx);
Assignment megatronStart(const PricingContext &ctx);
/// `previous` (signature names per op) mapped onto this context's signatures.
Assignment namedStart(const PricingContext &ctx,
                      const std::vector<std::string> &previous);

} // namespace autoddl::planner
