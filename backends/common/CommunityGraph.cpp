// The generated community graph (see CommunityGraph.h).
#include "backends/common/CommunityGraph.h"

#include "backends/common/DegreeLaw.h"
#include "backends/common/Parallel.h"
#include "backends/common/Philox.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace autoddl::rt {

std::vector<int32_t> planted_graph_split_labels(const PlantedGraph &g,
                                                bool heldout) {
  std::vector<int32_t> out(g.labels.size(), -1);
  for (size_t i = 0; i < out.size(); ++i)
    if (planted_graph_trains(int64_t(i)) != heldout)
      out[i] = g.labels[i];
  return out;
}

namespace {

/// Candidate edges: candidate e is one Philox block of the stream.
class EdgeStream {
public:
  EdgeStream(uint64_t seed, const Communities &c) : seed_(seed), c_(c) {}

  /// Candidate e's ends (equal ends: no edge): their communities
  /// (candidate_communities), then their power-law ranks (words 2 and 3).
  std::pair<int32_t, int32_t> pair(uint64_t e) const {
    const PhiloxCounter w = philox_words(seed_, sEdge_, e);
    const auto [ca, cb] = candidate_communities(w, c_.by_size.data());
    return {end(ca, w[2]), end(cb, w[3])};
  }

private:
  int32_t end(int32_t k, uint32_t word) const {
    return c_.order[size_t(c_.start[size_t(k)] + c_.law[size_t(k)].rank(word))];
  }
  uint64_t seed_;
  const Communities &c_;
  uint64_t sEdge_ = edge_stream();
};

/// Each row's distinct neighbours among candidates [0, count), as (column <<
/// 32 | first candidate index), sorted; both rows of a pair hold it.
struct CandidateRows {
  std::vector<int64_t> start; // nodes + 1 (into entries; rows compacted below)
  std::vector<int64_t> size;  // distinct entries of each row
  std::vector<uint64_t> entries;
};

CandidateRows candidate_rows(const EdgeStream &stream, int64_t nodes,
                             uint64_t count, int64_t threads) {
  // Per-thread row counts: a row's entries land in candidate order (thread t
  // holds the t-th contiguous chunk), whatever the thread count.
  const int64_t t = std::min<int64_t>(
      {std::max<int64_t>(1, int64_t(count >> 16)), host_threads(threads), 32});
  const uint64_t chunk = (count + uint64_t(t) - 1) / uint64_t(t);
  std::vector<int64_t> cnt(size_t(t * nodes), 0);
  auto each_thread = [&](auto body) {
    for_chunks(
        t,
        [&](int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k)
            body(k, uint64_t(k) * chunk,
                 std::min(count, uint64_t(k + 1) * chunk));
        },
        1, t);
  };
  // The candidates' ends, drawn once (a == b: no edge).
  std::vector<std::pair<int32_t, int32_t>> ends(count);
  each_thread([&](int64_t k, uint64_t e0, uint64_t e1) {
    int64_t *c = cnt.data() + k * nodes;
    for (uint64_t e = e0; e < e1; ++e) {
      const auto [a, b] = ends[e] = stream.pair(e);
      if (a != b) {
        ++c[a];
        ++c[b];
      }
    }
  });
  CandidateRows r;
  r.start.assign(size_t(nodes + 1), 0);
  for (int64_t i = 0; i < nodes; ++i) { // counts become write cursors
    int64_t at = r.start[size_t(i)];
    for (int64_t k = 0; k < t; ++k) {
      const int64_t c = cnt[size_t(k * nodes + i)];
      cnt[size_t(k * nodes + i)] = at;
      at += c;
    }
    r.start[size_t(i + 1)] = at;
  }
  r.entries.resize(size_t(r.start[size_t(nodes)]));
  each_thread([&](int64_t k, uint64_t e0, uint64_t e1) {
    int64_t *at = cnt.data() + k * nodes;
    for (uint64_t e = e0; e < e1; ++e) {
      const auto [a, b] = ends[e];
      if (a != b) {
        r.entries[size_t(at[a]++)] = uint64_t(uint32_t(b)) << 32 | e;
        r.entries[size_t(at[b]++)] = uint64_t(uint32_t(a)) << 32 | e;
      }
    }
  });
  cnt = {};
  ends = {};
  r.size.assign(size_t(nodes), 0);
  for_chunks(
      nodes,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          uint64_t *b = r.entries.data() + r.start[size_t(i)],
                   *e = r.entries.data() + r.start[size_t(i + 1)];
          std::sort(b, e); // by column, then candidate index
          r.size[size_t(i)] = std::unique(b, e,
                                          [](uint64_t x, uint64_t y) {
                                            return x >> 32 == y >> 32;
                                          }) -
                              b;
        }
      },
      1024, threads);
  return r;
}

} // namespace

PlantedGraph community_graph(uint64_t seed, int64_t nodes, int64_t nnz,
                             int64_t features, int64_t classes, int64_t x_node0,
                             int64_t x_rows, int64_t threads) {
  if (nodes <= 0 || features <= 0 || classes <= 0)
    throw std::invalid_argument("graph needs positive nodes, features and "
                                "classes");
  if (nodes > std::numeric_limits<int32_t>::max() || nnz < nodes ||
      nnz > std::numeric_limits<int32_t>::max() ||
      (__int128)nnz > (__int128)nodes * nodes)
    throw std::invalid_argument(
        "graph of " + std::to_string(nodes) +
        " nodes: expected nnz in [nodes, "
        "min(nodes^2, 2^31 - 1)] (self loops included), got " +
        std::to_string(nnz));
  PlantedGraph g;
  g.nodes = nodes;
  g.features = features;
  g.classes = classes;
  g.labels.resize(size_t(nodes));
  for_chunks(
      nodes,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          g.labels[size_t(i)] = community_of(seed, i, classes);
      },
      1 << 16, threads);
  const uint64_t pairs = uint64_t(nnz - nodes) / 2; // undirected edges
  const Communities comm = group_communities(
      seed, g.labels, classes, 2.0 * double(pairs) / double(nodes), threads);
  const EdgeStream stream(seed, comm);

  // Draw candidates until `pairs` distinct ones are among them; the first
  // `pairs` (by the index of their first draw) are the edges.
  CandidateRows rows;
  std::vector<uint8_t> first; // candidate e is a kept pair's first draw
  // Candidate indices are 32-bit, and a graph needing 64 draws an edge is
  // too close to complete for a power law (memory grows with the draws).
  const uint64_t most = std::min((uint64_t(1) << 32) - 1, 64 * pairs + 4096);
  uint64_t count = std::min(most, pairs + pairs / 8 + 64), cutoff = 0;
  while (pairs > 0) {
    rows = candidate_rows(stream, nodes, count, threads);
    first.assign(count, 0);
    for_chunks(
        nodes,
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            for (int64_t k = 0; k < rows.size[size_t(i)]; ++k) {
              const uint64_t v =
                  rows.entries[size_t(rows.start[size_t(i)] + k)];
              if (int64_t(v >> 32) > i) // each pair once, from its lower row
                first[size_t(uint32_t(v))] = 1;
            }
        },
        1024, threads);
    uint64_t distinct = 0, e = 0;
    for (; e < count && distinct < pairs; ++e)
      distinct += first[size_t(e)];
    if (distinct == pairs) {
      cutoff = e; // candidates [0, cutoff) hold exactly `pairs` first draws
      break;
    }
    if (count == most)
      throw std::invalid_argument("graph of " + std::to_string(nodes) +
                                  " nodes and nnz " + std::to_string(nnz) +
                                  ": too dense to draw distinct edges from a "
                                  "power law; give fewer stored entries");
    count = std::min(
        most,
        std::max(count * 2,
                 uint64_t(double(count) * double(pairs) /
                          double(std::max<uint64_t>(1, distinct)) * 1.25)));
  }

  // The CSR: each row's kept neighbours and its self loop, in column order.
  g.row_ptr.assign(size_t(nodes + 1), 0);
  auto kept = [&](int64_t i, int64_t k) {
    return uint32_t(rows.entries[size_t(rows.start[size_t(i)] + k)]) < cutoff;
  };
  for_chunks(
      nodes,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          int64_t n = 1;
          for (int64_t k = 0; pairs > 0 && k < rows.size[size_t(i)]; ++k)
            n += kept(i, k);
          g.row_ptr[size_t(i + 1)] = int32_t(n);
        }
      },
      1 << 14, threads);
  for (int64_t i = 0; i < nodes; ++i)
    g.row_ptr[size_t(i + 1)] += g.row_ptr[size_t(i)];
  g.col_idx.resize(size_t(g.row_ptr[size_t(nodes)]));
  for_chunks(
      nodes,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          int32_t *out = g.col_idx.data() + g.row_ptr[size_t(i)];
          bool self = false;
          for (int64_t k = 0; pairs > 0 && k < rows.size[size_t(i)]; ++k) {
            if (!kept(i, k))
              continue;
            const int32_t j =
                int32_t(rows.entries[size_t(rows.start[size_t(i)] + k)] >> 32);
            if (!self && j > i) {
              *out++ = int32_t(i);
              self = true;
            }
            *out++ = j;
          }
          if (!self)
            *out = int32_t(i);
        }
      },
      1 << 14, threads);
  rows = {};
  first = {};
  gcn_normalise(g, threads);
  g.x_node0 = x_node0;
  g.x = community_features(seed, g.labels, features, x_node0, x_rows, threads);
  return g;
}

std::vector<float> community_features(uint64_t seed,
                                      const std::vector<int32_t> &labels,
                                      int64_t features, int64_t node0,
                                      int64_t rows, int64_t threads) {
  const uint64_t sMu = fnv1a64("graph.mu"), sX = fnv1a64("graph.x");
  const double signal = kFeatureSignal / std::sqrt(double(features));
  std::vector<float> x(size_t(rows * features));
  for_chunks(
      rows,
      [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const uint64_t i = uint64_t(node0 + r),
                         c = uint64_t(labels[size_t(i)]);
          for (int64_t f = 0; f < features; ++f) {
            const double mu = philox_normal(
                philox_words(seed, sMu, c * uint64_t(features) + uint64_t(f)));
            const double noise = philox_normal(
                philox_words(seed, sX, i * uint64_t(features) + uint64_t(f)));
            x[size_t(r * features + f)] = float(signal * mu + noise);
          }
        }
      },
      256, threads);
  return x;
}

void gcn_normalise(PlantedGraph &g, int64_t threads) {
  g.values.resize(g.col_idx.size());
  const std::vector<int32_t> &p = g.row_ptr;
  for_chunks(
      g.nodes,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const double di = double(p[size_t(i + 1)] - p[size_t(i)]);
          for (int32_t k = p[size_t(i)]; k < p[size_t(i + 1)]; ++k) {
            const int32_t j = g.col_idx[size_t(k)];
            g.values[size_t(k)] = float(
                1.0 / std::sqrt(di * double(p[size_t(j + 1)] - p[size_t(j)])));
          }
        }
      },
      1 << 14, threads);
}

} // namespace autoddl::rt
