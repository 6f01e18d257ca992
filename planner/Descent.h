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

#include <cstdint>
#include <optional>

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

/// Starting points: every op split over the batch where it can ("pure data
/// parallel" on the tp axis), and Megatron-LM's tensor parallelism (column /
/// row linears, heads, vocabulary-parallel embedding and loss).
Assignment pureDataParallelStart(const PricingContext &ctx);
Assignment megatronStart(const PricingContext &ctx);
/// `previous` (signature names per op) mapped onto this context's signatures.
Assignment namedStart(const PricingContext &ctx,
                      const std::vector<std::string> &previous);

} // namespace autoddl::planner
