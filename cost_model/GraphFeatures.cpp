//===- GraphFeatures.cpp - the generated graph's sparse features ------===//
//
// Why the estimate holds. community_graph (backends/common/CommunityGraph.cpp)
// draws candidate pairs from one Philox stream: a candidate picks its first
// end's community a with chance q_a (the by_size table), keeps the second in a
// with chance p_in (else picks b with chance q_b), and draws each end's rank
// in its community from the power law (DegreeLaw.h): rank k with chance
// share(k). The edges are the distinct pairs among the first C candidates,
// C the smallest count holding `pairs` distinct ones. So pair {i, j}
// (communities a, b; shares s_i, s_j) is drawn by a candidate with chance
//   pi_ij = 2 s_i s_j q_a (p_in [a = b] + (1 - p_in) q_b),
// independently per candidate, and is an edge with chance 1 - exp(-C pi_ij)
// (Poisson limit of 1 - (1 - pi)^C). Node i's expected degree is 1 (its self
// loop) + sum_j of that, its variance sum_j p (1 - p), and C solves
// sum_i (d_i - 1) = 2 pairs (Newton from C = pairs; the sum is concave in C).
// Labels and ranks come from hashes of the node index, so a window of 8
// consecutive rows holds 8 independent draws of (community, rank): column j
// is one of the rows with chance 8 / nodes (its self loop), else each row is
// adjacent to it with chance (d_j - 1) / (nodes - 1), and the window's
// distinct columns (its 8x1 vectors) number
//   E[v] = sum_j 8 / n + (1 - 8 / n) (1 - (1 - (d_j - 1) / (n - 1))^8),
// exact up to the independence of edges that share no candidate. Nodes of
// like share are binned (ranks 0..31 one a bin, then bins 8 % wider); the
// pairs across communities, far from saturation, through one histogram of
// q_a s over all nodes.
//
// The largest degree is one node's, and its spread (a hub's degree varies by
// sqrt(sum p (1 - p)), ~50 on the Reddit-like graph) is wider than the
// margins the decider meets (that graph's skew is 7.12, the SpMM tree splits
// at 7.15, the law expects 7.19). So it is read: the candidates [0, C) are
// drawn as EdgeStream::pair draws them (one Philox block each, filtered on
// the rank words before any lookup), and the nodes whose expected degree
// comes within 6 deviations of the top one keep their distinct neighbours.
// Exact but for C: a hub of degree d moves by about d |dC| / C. Past
// mostScanned candidates, the expectation of the maximum of independent
// normals (d_i, its variance), each node in the rows with chance rows /
// nodes. tests/unit/cost_model/GraphFeaturesTest compares the result with
// spmmFeatures of the generated graph.
//
//===----------------------------------------------------------------------===//
#include "cost_model/GraphFeatures.h"

#include "backends/common/DegreeLaw.h"
#include "backends/common/Parallel.h"
#include "backends/common/Philox.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace autoddl::cost {
namespace {

/// Nodes of like expected degree: `count` members of one community, each the
/// end of a draw in it with chance `share`.
struct Bin {
  int64_t community = 0;
  double count = 0, share = 0;
  double mean = 0, var = 0; // degree (self loop included) and its variance
};

/// Nodes by q_a s (the chance a draw across communities lands on one), for
/// the pairs across communities.
struct CrossBin {
  double count = 0, u = 0;
};

/// The communities as community_graph groups them (DegreeLaw.h's
/// group_communities, the generator's own), and q_a: community a's share of
/// by_size, the chance an end of a draw across communities lands in it.
struct Communities : rt::Communities {
  std::vector<double> pick; // classes
};

Communities communities(uint64_t seed, int64_t nodes, int64_t classes,
                        double drawsPerNode) {
  std::vector<int32_t> label(static_cast<size_t>(nodes));
  rt::for_chunks(
      nodes,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          label[size_t(i)] = rt::community_of(seed, i, classes);
      },
      int64_t(1) << 16);
  Communities c;
  static_cast<rt::Communities &>(c) =
      rt::group_communities(seed, label, classes, drawsPerNode);
  c.pick.assign(size_t(classes), 0);
  for (int32_t k : c.by_size)
    c.pick[size_t(k)] += 1.0 / 65536;
  return c;
}

struct DegreeModel {
  std::vector<double> pick;  // q_a
  std::vector<size_t> first; // community a's bins: [first[a], first[a + 1])
  std::vector<Bin> bins;
  std::vector<CrossBin> cross;
  double inside = 0; // p_in
};

DegreeModel degreeModel(const Communities &c) {
  DegreeModel m;
  m.pick = c.pick;
  // A candidate stays inside when its low 16 bits are below p_in 2^16.
  m.inside = std::ceil(rt::kCommunityEdgeFraction * 65536.0) / 65536;
  for (size_t a = 0; a + 1 < c.start.size(); ++a) {
    m.first.push_back(m.bins.size());
    const int64_t size = c.start[a + 1] - c.start[a];
    const rt::PowerLaw &law = c.law[a];
    auto mass = [&](double k) { return std::pow(k + law.x0, law.a); };
    for (int64_t k0 = 0; k0 < size;) {
      const int64_t k1 =
          std::min(size, k0 < 32 ? k0 + 1 : int64_t(double(k0) * 1.08));
      m.bins.push_back(
          {int64_t(a), double(k1 - k0),
           (mass(double(k1)) - mass(double(k0))) / law.span / double(k1 - k0)});
      k0 = k1;
    }
  }
  m.first.push_back(m.bins.size());
  // q_a s of every bin, in bins 2 % wide (count-weighted mean u).
  std::vector<std::pair<double, double>> us; // (u, count)
  for (const Bin &b : m.bins)
    us.push_back({m.pick[size_t(b.community)] * b.share, b.count});
  std::sort(us.begin(), us.end());
  for (size_t i = 0; i < us.size();) {
    CrossBin x;
    const double top = us[i].first * 1.02;
    for (; i < us.size() && us[i].first <= top; ++i)
      x.count += us[i].second, x.u += us[i].first * us[i].second;
    x.u /= x.count;
    m.cross.push_back(x);
  }
  return m;
}

/// Fills every bin's degree mean and variance for C candidates; returns
/// (sum_i d_i - 1, its derivative in C).
std::pair<double, double> degrees(DegreeModel &m, double candidates) {
  const double across = 2 * (1 - m.inside);
  double total = 0, slope = 0;
  for (Bin &b : m.bins) {
    const double q = m.pick[size_t(b.community)];
    double mean = 1, var = 0, dmean = 0;
    auto add = [&](double count, double pi) {
      const double x = std::exp(-candidates * pi);
      mean += count * (1 - x);
      var += count * (1 - x) * x;
      dmean += count * pi * x;
    };
    for (const CrossBin &c : m.cross)
      add(c.count, across * q * b.share * c.u);
    // The own community's pairs: all of pi in place of its across part.
    const double within = 2 * q * (m.inside + (1 - m.inside) * q);
    for (size_t k = m.first[size_t(b.community)];
         k < m.first[size_t(b.community) + 1]; ++k) {
      const Bin &o = m.bins[k];
      add(o.count, within * b.share * o.share);
      add(-o.count, across * q * q * b.share * o.share);
    }
    add(-1, within * b.share * b.share); // no pair with itself
    b.mean = mean;
    b.var = std::max(0.0, var);
    total += b.count * (mean - 1);
    slope += b.count * dmean;
  }
  return {total, slope};
}

/// E[max] of independent integer degrees ~ N(mean, var) (scaled: each bin's
/// member is a row with chance `in`; degree x `scale`, plus binomial
/// thinning when scale < 1), as sum_k P(max > k).
double expectedMax(const std::vector<Bin> &bins, double in, double scale) {
  double hi = 1;
  for (const Bin &b : bins)
    hi = std::max(hi, b.mean * scale + 12 * std::sqrt(b.var) * scale + 2);
  double sum = 0;
  int64_t k = int64_t(hi);
  for (; k >= 0; --k) {
    double logF = 0; // log P(every degree <= k)
    for (const Bin &b : bins) {
      const double mu = b.mean * scale;
      const double sd =
          std::sqrt(b.var * scale * scale + b.mean * scale * (1 - scale));
      if (mu + 12 * sd + 1 < double(k))
        continue;
      const double tail =
          sd > 0 ? 0.5 * std::erfc((double(k) + 0.5 - mu) / (sd * M_SQRT2))
                 : (double(k) < mu ? 1.0 : 0.0);
      logF += b.count * std::log1p(-std::min(in * tail, 1.0)); // log(0): -inf
    }
    const double above = 1 - std::exp(logF);
    sum += above;
    if (above > 1 - 1e-12) // P(max > j) is 1 for every j below
      return sum + double(k);
  }
  return sum;
}

/// Expected 8x1 vectors of `rows` consecutive rows in windows of 8, each row
/// a random node, columns the nodes kept with chance `in`. Column j is in a
/// window of r distinct rows: through its self loop when j is one of them
/// (chance r / nodes), else through an edge of one of them (each another
/// node, adjacent with chance (d_j - 1) / (nodes - 1)).
double windowVectors(const std::vector<Bin> &bins, int64_t nodes, int64_t rows,
                     double in) {
  const double n = double(nodes);
  auto perWindow = [&](int64_t r) {
    const double self = double(r) / n;
    double v = 0;
    for (const Bin &b : bins) {
      const double edge = nodes > 1 ? (b.mean - 1) / (n - 1) : 0;
      v += b.count * (self + (1 - self) * (1 - std::pow(1 - edge, double(r))));
    }
    return in * v;
  };
  return double(rows / 8) * perWindow(8) +
         (rows % 8 ? perWindow(rows % 8) : 0.0);
}

sparse::SpmmFeatures features(int64_t rows, int64_t cols, double nnz,
                              double maxDegree, double vectors) {
  sparse::SpmmFeatures f;
  f.rows = rows;
  f.cols = cols;
  f.nnz = std::llround(nnz);
  if (rows <= 0 || f.nnz <= 0)
    return f;
  f.maxDegree = std::llround(maxDegree);
  f.meanDegree = nnz / double(rows);
  f.degreeSkew = maxDegree / f.meanDegree;
  f.naturalVectors = std::max<int64_t>(1, std::llround(vectors));
  f.windowFill = nnz / double(f.naturalVectors);
  return f;
}

/// The nodes that can hold the largest degree and their distinct neighbours
/// (self loops left out), read from the generator's own candidate stream.
struct Hubs {
  std::vector<int32_t> node;
  std::vector<std::vector<int32_t>> partners;
};

/// Ranks below tracked[a] of each community a, from candidates [0, count).
/// Exact but for count (the estimate of C): a hub of degree d gains or loses
/// about d |count - C| / C neighbours. One Philox block a candidate, on the
/// host's threads.
Hubs scanHubs(uint64_t seed, const Communities &c,
              const std::vector<int64_t> &tracked, uint64_t count) {
  const size_t classes = c.law.size();
  std::vector<int64_t> base(classes + 1, 0); // slot of rank r of a: base[a] + r
  std::vector<uint64_t> limit(classes, 0); // rank(w) < tracked[a] needs w < it
  Hubs h;
  for (size_t a = 0; a < classes; ++a) {
    base[a + 1] = base[a] + tracked[a];
    for (int64_t r = 0; r < tracked[a]; ++r)
      h.node.push_back(c.order[size_t(c.start[a] + r)]);
    const rt::PowerLaw &law = c.law[a];
    const double u =
        (std::pow(double(tracked[a]) + law.x0, law.a) - law.x0a) / law.span;
    limit[a] =
        tracked[a] > 0 ? uint64_t(std::min(1.0, u) * 4294967296.0) + 2 : 0;
  }
  const uint64_t sEdge = rt::edge_stream();
  constexpr uint64_t kBatch = 16;
  const int64_t threads = std::min<int64_t>(rt::host_threads(), 16);
  // found[k * slots + s]: thread k's neighbours of slot s
  const size_t slots = h.node.size();
  std::vector<std::vector<int32_t>> found(static_cast<size_t>(threads) * slots);
  rt::for_chunks(
      threads,
      [&](int64_t k0, int64_t k1) {
        for (int64_t k = k0; k < k1; ++k)
          for (uint64_t e0 = count * uint64_t(k) / uint64_t(threads),
                        end = count * uint64_t(k + 1) / uint64_t(threads);
               e0 < end; e0 += kBatch) {
            // Independent blocks first: their rounds overlap in the core.
            rt::PhiloxCounter words[kBatch];
            const uint64_t n = std::min<uint64_t>(kBatch, end - e0);
            for (uint64_t i = 0; i < n; ++i)
              words[i] = rt::philox_words(seed, sEdge, e0 + i);
            for (uint64_t i = 0; i < n; ++i) {
              // EdgeStream::pair (CommunityGraph.cpp), filtered on the ranks'
              // words before any lookup.
              const rt::PhiloxCounter &w = words[i];
              const auto [ca, cb] =
                  rt::candidate_communities(w, c.by_size.data());
              if (w[2] >= limit[size_t(ca)] && w[3] >= limit[size_t(cb)])
                continue;
              const int64_t ra = c.law[size_t(ca)].rank(w[2]),
                            rb = c.law[size_t(cb)].rank(w[3]);
              const int32_t a = c.order[size_t(c.start[size_t(ca)] + ra)],
                            b = c.order[size_t(c.start[size_t(cb)] + rb)];
              if (a == b)
                continue;
              std::vector<int32_t> *mine = found.data() + size_t(k) * slots;
              if (ra < tracked[size_t(ca)])
                mine[size_t(base[size_t(ca)] + ra)].push_back(b);
              if (rb < tracked[size_t(cb)])
                mine[size_t(base[size_t(cb)] + rb)].push_back(a);
            }
          }
      },
      1, threads);
  h.partners.resize(slots);
  rt::for_chunks(
      int64_t(slots),
      [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) {
          std::vector<int32_t> &p = h.partners[size_t(s)];
          for (int64_t k = 0; k < threads; ++k) {
            std::vector<int32_t> &f = found[size_t(k) * slots + size_t(s)];
            p.insert(p.end(), f.begin(), f.end());
            f = {};
          }
          std::sort(p.begin(), p.end());
          p.erase(std::unique(p.begin(), p.end()), p.end());
        }
      },
      16, threads);
  return h;
}

/// What a graph's features are computed from, for any block of rows.
struct GraphLaw {
  std::vector<Bin> bins;
  Hubs hubs;
  int64_t pairs = 0;
};

GraphLaw graphLaw(int64_t nodes, int64_t nnz, int64_t classes, uint64_t seed,
                  uint64_t mostScanned) {
  GraphLaw g;
  g.pairs = (nnz - nodes) / 2; // as community_graph rounds
  const Communities c =
      communities(seed, nodes, classes, 2.0 * double(g.pairs) / double(nodes));
  DegreeModel m = degreeModel(c);
  double count = double(g.pairs);
  for (int it = 0; it < 50 && g.pairs > 0; ++it) {
    const auto [total, slope] = degrees(m, count);
    if (!(slope > 0))
      break;
    const double step = (2.0 * double(g.pairs) - total) / slope;
    count += step;
    if (std::abs(step) < 1e-9 * count)
      break;
  }
  degrees(m, count);
  // Track the ranks whose degree comes within 6 deviations of the largest
  // expected one (at least 32 a community, for a dp rank's own largest).
  double top = 0, topSd = 0;
  for (const Bin &b : m.bins)
    if (b.mean > top)
      top = b.mean, topSd = std::sqrt(b.var);
  std::vector<int64_t> tracked(c.law.size(), 0);
  for (const Bin &b : m.bins) {
    int64_t &t = tracked[size_t(b.community)];
    if (t < 32 || (b.mean + 6 * std::sqrt(b.var) >= top - 6 * topSd && t < 256))
      t += int64_t(b.count);
  }
  const uint64_t scanned = uint64_t(std::llround(count));
  if (g.pairs > 0 && scanned <= mostScanned)
    g.hubs = scanHubs(seed, c, tracked, scanned);
  g.bins = std::move(m.bins);
  return g;
}

/// The features of rows [node0, node0 + rows): fill and mean from the law,
/// the largest degree from the hubs' neighbours (the law's expectation if
/// none is a row).
AdjacencyFeatures rankFeatures(const GraphLaw &g, int64_t nodes, int64_t node0,
                               int64_t rows) {
  const double in = double(rows) / double(nodes);
  // The rows' entries: the hubs' own, and the rest's share of the others.
  double hubEntries = 0, rowHubEntries = 0, maxA = -1, maxAt = -1;
  for (size_t s = 0; s < g.hubs.node.size(); ++s) {
    const std::vector<int32_t> &p = g.hubs.partners[s];
    const bool row = g.hubs.node[s] >= node0 && g.hubs.node[s] < node0 + rows;
    hubEntries += double(p.size() + 1);
    if (row) {
      rowHubEntries += double(p.size() + 1);
      maxA = std::max(maxA, double(p.size() + 1));
    }
    const auto b = std::lower_bound(p.begin(), p.end(), int32_t(node0)),
               e = std::lower_bound(b, p.end(), int32_t(node0 + rows));
    maxAt = std::max(maxAt, double(e - b + (row ? 1 : 0)));
  }
  const double nnz =
      rowHubEntries + in * (double(nodes + 2 * g.pairs) - hubEntries);
  if (maxA < 0)
    maxA = expectedMax(g.bins, in, 1.0);
  if (maxAt < 0)
    maxAt = expectedMax(g.bins, 1.0, in);
  // The fill the law expects, of this block's entries.
  const double fillA = double(nodes + 2 * g.pairs) * in /
                       windowVectors(g.bins, nodes, rows, 1.0),
               fillAt = double(nodes + 2 * g.pairs) * in /
                        windowVectors(g.bins, nodes, nodes, in);
  AdjacencyFeatures out;
  out.a = features(rows, nodes, nnz, maxA, nnz / fillA);
  out.at = features(nodes, rows, nnz, maxAt, nnz / fillAt);
  return out;
}

} // namespace

AdjacencyFeatures communityGraphFeatures(int64_t nodes, int64_t nnz,
                                         int64_t classes, int64_t rows,
                                         int64_t node0, uint64_t seed,
                                         uint64_t mostScanned) {
  // The generator's own limits (int32 node ids and CSR offsets): past them
  // no program builds this graph, and the caller keeps its assumption.
  if (nodes <= 0 || classes <= 0 || nnz < nodes || rows <= 0 || node0 < 0 ||
      nodes > INT32_MAX || nnz > INT32_MAX)
    return {};
  rows = std::min(rows, nodes);
  node0 = std::min(node0, nodes - rows);
  // One law a graph (its dp splits share it), one result a block of rows.
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int64_t, int64_t, uint64_t, uint64_t>,
                  std::shared_ptr<const GraphLaw>>
      laws;
  static std::map<std::tuple<int64_t, int64_t, int64_t, uint64_t, uint64_t,
                             int64_t, int64_t>,
                  AdjacencyFeatures>
      memo;
  const auto graph = std::make_tuple(nodes, nnz, classes, seed, mostScanned);
  const auto key = std::tuple_cat(graph, std::make_tuple(node0, rows));
  std::lock_guard<std::mutex> lock(mu); // a plan's threads wait for one scan
  if (auto it = memo.find(key); it != memo.end())
    return it->second;
  std::shared_ptr<const GraphLaw> &law = laws[graph];
  if (!law)
    law = std::make_shared<const GraphLaw>(
        graphLaw(nodes, nnz, classes, seed, mostScanned));
  return memo.emplace(key, rankFeatures(*law, nodes, node0, rows))
      .first->second;
}

} // namespace autoddl::cost
