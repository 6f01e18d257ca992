// The degree law of the generated community graphs (CommunityGraph.h): the
// power law an edge end follows over a community's members, the members' rank
// order, the communities' grouping and a candidate edge's communities. One home
// for it: the generator draws from it, the planner computes the graph's
// features from it (cost_model/GraphFeatures.cpp) and estimates the degrees it
// gives (planner/AdjacencyMemory.cpp: how many windows the W8 builder splits).
#ifndef AUTODDL_BACKENDS_COMMON_DEGREELAW_H
#define AUTODDL_BACKENDS_COMMON_DEGREELAW_H

#include "backends/common/CommunityGraph.h"
#include "backends/common/Parallel.h"
#include "backends/common/Philox.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace autoddl::rt {

/// The power law over a community's n members: density proportional to
/// (x + x0)^-kDegreeExponent on [0, n), sampled by inverting its CDF, x =
/// (x0^a + u span)^(1/a) - x0 with a = 1 - kDegreeExponent = 0.4, so 1/a =
/// 2.5 and a draw is y^2 sqrt(y): no table, no pow. x0 >= 1 caps the largest
/// expected degree.
struct PowerLaw {
  static constexpr double a = 1 - kDegreeExponent;
  static_assert(a > 0.39999 && a < 0.40001, "rank() computes y^(1/a) as y^2.5");
  double x0a = 1, span = 0, x0 = 1;
  int64_t n = 1;
  PowerLaw() = default;
  PowerLaw(int64_t size, double offset) : x0(offset), n(size) {
    x0a = std::pow(x0, a);
    span = std::pow(double(n) + x0, a) - x0a;
  }
  /// Share of the draws landing on the member of rank k (from 0).
  double share(double k) const {
    return (std::pow(k + 1 + x0, a) - std::pow(k + x0, a)) / span;
  }
  double top_share() const { return share(0); }
  int64_t rank(uint32_t word) const {
    const double y = x0a + u32_to_unit(word) * span;
    const double x = y * y * std::sqrt(y) - x0;
    return std::min<int64_t>(n - 1, std::max<int64_t>(0, int64_t(x)));
  }
};

/// The smallest offset (from 1 up) at which the first member of a community
/// whose edges inside it have `draws` ends expects at most half of the
/// community as neighbours there: dense graphs (Reddit's average degree is
/// about 490) would otherwise draw their hubs' pairs over and over.
inline PowerLaw community_law(int64_t n, double draws) {
  const double cap = std::max(1.0, double(n) / 2);
  double lo = 1, hi = std::max(1.0, double(n));
  if (PowerLaw(n, lo).top_share() * draws <= cap)
    return PowerLaw(n, lo);
  for (int it = 0; it < 60; ++it) { // bisection on a log scale
    const double mid = std::sqrt(lo * hi);
    (PowerLaw(n, mid).top_share() * draws <= cap ? hi : lo) = mid;
  }
  return PowerLaw(n, hi);
}

/// Ranks one community's members [b, e): by their hash keys (key[node]), ties
/// by index, so member b[k] has rank k. Returns the community's law, its
/// nodes drawing `draws_per_node` edge ends each on average,
/// kCommunityEdgeFraction of them inside.
inline PowerLaw rank_community(int32_t *b, int32_t *e, const uint32_t *key,
                               double draws_per_node) {
  std::sort(b, e, [&](int32_t x, int32_t y) {
    const uint32_t kx = key[size_t(x)], ky = key[size_t(y)];
    return kx != ky ? kx < ky : x < y;
  });
  const int64_t size = int64_t(e - b);
  return community_law(std::max<int64_t>(1, size),
                       kCommunityEdgeFraction * draws_per_node * double(size));
}

/// The generator's Philox streams: a node's label, its rank key within its
/// community, and the candidate edges.
inline uint64_t label_stream() { return fnv1a64("graph.label"); }
inline uint64_t order_stream() { return fnv1a64("graph.order"); }
inline uint64_t edge_stream() { return fnv1a64("graph.edge"); }

/// Node i's community (its label): uniform over the classes.
inline int32_t community_of(uint64_t seed, int64_t i, int64_t classes) {
  return int32_t(philox_words(seed, label_stream(), uint64_t(i))[0] %
                 uint32_t(classes));
}

/// Nodes grouped by community, each community's members in a seeded order
/// (so a community's hubs are spread over the index range, and over dp ranks).
struct Communities {
  std::vector<int64_t> start;   // classes + 1
  std::vector<int32_t> order;   // nodes: rank k of a is order[start[a] + k]
  std::vector<PowerLaw> law;    // classes
  std::vector<int32_t> by_size; // 2^16 quantiles of the nodes' communities
};

/// The communities of `labels` (community_of each node), their members
/// ranked by order_stream keys and each one's law for `draws_per_node` edge
/// ends a node; `threads` as for_chunks' (the result does not depend on it).
inline Communities group_communities(uint64_t seed,
                                     const std::vector<int32_t> &labels,
                                     int64_t classes, double draws_per_node,
                                     int64_t threads = 0) {
  const int64_t n = int64_t(labels.size());
  Communities c;
  c.start.assign(size_t(classes + 1), 0);
  for (int32_t l : labels)
    ++c.start[size_t(l + 1)];
  for (int64_t k = 0; k < classes; ++k)
    c.start[size_t(k + 1)] += c.start[size_t(k)];
  c.order.resize(size_t(n));
  std::vector<int64_t> next(c.start.begin(), c.start.end() - 1);
  for (int64_t i = 0; i < n; ++i)
    c.order[size_t(next[size_t(labels[size_t(i)])]++)] = int32_t(i);
  const uint64_t sOrder = order_stream();
  std::vector<uint32_t> key(static_cast<size_t>(n));
  for_chunks(
      n,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          key[size_t(i)] = philox_words(seed, sOrder, uint64_t(i))[0];
      },
      1 << 16, threads);
  c.law.resize(size_t(classes));
  for_chunks(
      classes,
      [&](int64_t k0, int64_t k1) {
        for (int64_t k = k0; k < k1; ++k)
          c.law[size_t(k)] =
              rank_community(c.order.data() + c.start[size_t(k)],
                             c.order.data() + c.start[size_t(k + 1)],
                             key.data(), draws_per_node);
      },
      1, threads);
  // Community of a 16-bit quantile of the nodes: picking one by size.
  c.by_size.resize(size_t(1) << 16);
  for (int64_t t = 0, k = 0; t < (int64_t(1) << 16); ++t) {
    const int64_t at = (t * n) >> 16;
    while (c.start[size_t(k + 1)] <= at)
      ++k;
    c.by_size[size_t(t)] = int32_t(k);
  }
  return c;
}

/// The communities of a candidate edge's two ends, from its Philox block w:
/// the low half of word 0 says whether the edge stays in one community, its
/// high half picks the first end's community by size (by_size: 2^16
/// quantiles of the nodes), word 1 the second's for an edge across. Words 2
/// and 3 are the ends' rank words (PowerLaw::rank).
inline std::pair<int32_t, int32_t>
candidate_communities(const PhiloxCounter &w, const int32_t *by_size) {
  const int32_t ca = by_size[w[0] >> 16];
  return {ca, double(w[0] & 0xffff) < kCommunityEdgeFraction * 65536.0
                  ? ca
                  : by_size[w[1] >> 16]};
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_DEGREELAW_H
