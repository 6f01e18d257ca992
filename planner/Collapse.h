//===- Collapse.h - exact node and edge eliminations before the descent ---===//
//
// OneFlow/AutoDDL's graph collapsing (reference autoddl.md §4.2.2,
// `SbpGraph::NodeAndEdgeEliminations`) on the search's objective, written as a
// sum of cost tables ("factors") over the signature choices of the collapsed
// ops: one table per op (its unary term) and one per tensor edge (over its
// producer and consumers). Then, until nothing changes:
//   - parallel edges: tables over the same ops are added into one;
//   - leaf: an op whose tables touch one other op u is folded into u:
//       T_u(s_u) = min over s_v of Σ its tables(s_v, s_u);
//   - chain interior: an op whose tables touch exactly two others u, w becomes
//     one table over (u, w): T(s_u, s_w) = min over s_v of Σ (...);
//   - an op whose tables touch nothing is a constant.
// Each elimination is exact: for every choice of the remaining ops the folded
// table holds the best cost of the eliminated op, which is recovered after
// the search (in reverse order, lowest signature index on ties). The descent
// and the exact search then run on the remaining ops only (docs/planner.md §2).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "planner/Descent.h"

#include <optional>
#include <vector>

namespace autoddl::planner {

/// A cost table over the signatures of the ops in `scope` (ascending), row
/// major: the last op of the scope varies fastest.
struct Factor {
  std::vector<int> scope;
  std::vector<double> table;
};

class ReducedProblem {
public:
  /// Tabulates `ctx`'s objective at its current memory weight and eliminates.
  /// ok() is false (and nothing is reduced) when a table would exceed
  /// `maxEntries` entries.
  explicit ReducedProblem(PricingContext &ctx, size_t maxEntries = 1 << 22);

  bool ok() const { return ok_; }
  /// Ops still searched, ascending (the descent variables).
  const std::vector<int> &live() const { return live_; }
  int eliminated() const { return static_cast<int>(steps_.size()); }

  /// The objective of an assignment of the live ops (the others ignored):
  /// equals the full objective with the eliminated ops recovered.
  double value(const Assignment &a) const;
  /// The tables containing `op` (for incremental moves).
  double local(const Assignment &a, int op) const;
  double localPair(const Assignment &a, int u, int w) const;
  /// Pairs of live ops that share a table (the descent's pair moves), in a
  /// fixed order.
  const std::vector<std::pair<int, int>> &pairs() const { return pairs_; }
  const std::vector<Factor> &factors() const { return factors_; }
  const std::vector<std::vector<int>> &factorsOf() const { return of_; }
  double constant() const { return constant_; }
  int signatures(int op) const { return sizes_[op]; }

  /// Fills the eliminated ops' choices given the live ones.
  void recover(Assignment &a) const;

  double evaluate(const Factor &f, const Assignment &a) const;

private:
  struct Step {
    int op;
    std::vector<Factor> folded; // the tables the op was eliminated with
  };
  bool ok_ = true;
  std::vector<int> sizes_;
  std::vector<Factor> factors_; // live tables
  std::vector<std::vector<int>> of_;
  std::vector<int> live_;
  std::vector<Step> steps_;
  std::vector<std::pair<int, int>> pairs_;
  double constant_ = 0;
};

/// Coordinate descent (single-op, then pair moves; ties keep the current
/// signature) on the reduced problem from `start`, the eliminated ops
/// recovered; `objective` is the full objective of the result.
DescentResult reducedDescent(PricingContext &ctx, const ReducedProblem &rp,
                             Assignment start);

/// The exact minimum by branch and bound over the live ops; nullopt past
/// `nodeLimit` visited partial assignments.
std::optional<DescentResult> reducedExhaustive(PricingContext &ctx,
                                               const ReducedProblem &rp,
                                               double upperBound,
                                               int64_t nodeLimit);

} // namespace autoddl::planner
