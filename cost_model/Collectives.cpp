//===- Collectives.cpp - α-β collective formulas (docs/cost-model.md §2) --===//
#include "cost_model/Collectives.h"
#include "support/EnumNames.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace autoddl::cost {

namespace {

constexpr EnumName<Collective> kCollectiveNames[] = {
    {Collective::AllReduce, "all_reduce"},
    {Collective::AllGather, "all_gather"},
    {Collective::ReduceScatter, "reduce_scatter"},
    {Collective::AllToAll, "all_to_all"},
    {Collective::SendRecv, "send_recv"}};

constexpr EnumName<Algorithm> kAlgorithmNames[] = {
    {Algorithm::Ring, "ring"},
    {Algorithm::Tree, "tree"},
    {Algorithm::Hierarchical, "hierarchical"},
    {Algorithm::Pairwise, "pairwise"},
    {Algorithm::Direct, "direct"},
    {Algorithm::None, "none"}};

} // namespace

std::string_view collectiveName(Collective c) {
  return nameOf(kCollectiveNames, c);
}

bool parseCollective(std::string_view s, Collective &out) {
  // "send" is the cost command's short spelling of send_recv.
  std::optional<Collective> c =
      parseName(kCollectiveNames, s == "send" ? "send_recv" : s);
  if (c)
    out = *c;
  return bool(c);
}

std::string_view algorithmName(Algorithm a) {
  return nameOf(kAlgorithmNames, a);
}

double busBandwidthFactor(Collective c, int n) {
  switch (c) {
  case Collective::AllReduce:
    return 2.0 * (n - 1) / n;
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll:
    return double(n - 1) / n;
  case Collective::SendRecv:
    return 1.0;
  }
  return 1.0;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The links one group sees (docs/cost-model.md §2.1).
struct GroupLinks {
  int g, N, n;   // gpus per node in the group, nodes, members
  double b1, a1; // intra-node: bytes/s per GPU, seconds per step
  double bn,
      a0; // inter-node: bytes/s of the node's NIC share, seconds per step
  double overhead; // seconds per collective call
};

GroupLinks linksOf(const Cluster &c, GroupPlacement p) {
  GroupLinks l;
  l.g = p.gpusPerNode;
  l.N = p.nodes;
  l.n = p.size();
  l.b1 = l.g > 1 ? c.intraNode.bandwidth : kInf;
  l.a1 = c.intraNode.latency;
  l.bn = l.N > 1 ? c.nodeNetworkShare(l.g) : kInf;
  l.a0 = c.interNode.latency;
  l.overhead = c.collectiveOverhead;
  return l;
}

// The bandwidth one ring step moves at: every ring link runs at once, so the
// slowest one sets the pace: NVLink per GPU, or the node's NIC share for the
// ring's one boundary crossing per node (per channel).
double ringBandwidth(const GroupLinks &l) { return std::min(l.b1, l.bn); }

CollectiveEstimate finish(Algorithm a, double latency, double bwTime,
                          double bytes, Collective c, int n) {
  CollectiveEstimate e;
  e.algorithm = a;
  e.latency = latency;
  e.time = latency + bwTime;
  e.algbw = e.time > 0 ? bytes / e.time : 0;
  e.busbw = e.algbw * busBandwidthFactor(c, n);
  return e;
}

// Ring with `steps` steps of which `interSteps` cross nodes, moving `volume`
// bytes per GPU (NCCL tuning.cc: latency = base + intra steps * intraLat +
// inter steps * interLat).
CollectiveEstimate ring(const GroupLinks &l, Collective c, double bytes,
                        int steps, int interSteps, double volume) {
  double latency = l.overhead + (steps - interSteps) * l.a1 + interSteps * l.a0;
  return finish(Algorithm::Ring, latency, volume / ringBandwidth(l), bytes, c,
                l.n);
}

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n)
    ++k;
  return k;
}

// Two-level algorithm as three (or two) NCCL calls on split communicators, run
// one after the other (docs/cost-model.md §2.4):
//   all_reduce:     reduce_scatter inside the node on S, all_reduce across
//   nodes on
//                   S/g, all_gather inside the node on S
//   all_gather:     all_gather across nodes on S/g, then inside the node on S
//   reduce_scatter: reduce_scatter inside the node on S, then across nodes on
//   S/g
// The cross-node groups hold one GPU per node; g of them run at once per node
// and share its NICs (Cluster::nodeNetworkShare).
CollectiveEstimate hierarchical(const Cluster &cluster, Collective c, double S,
                                GroupPlacement group) {
  GroupPlacement intra{group.gpusPerNode, 1}, inter{1, group.nodes};
  double g = group.gpusPerNode;
  std::vector<CollectiveEstimate> phases;
  if (c == Collective::AllReduce) {
    phases = {collectiveCost(cluster, Collective::ReduceScatter, S, intra).best,
              collectiveCost(cluster, Collective::AllReduce, S / g, inter).best,
              collectiveCost(cluster, Collective::AllGather, S, intra).best};
  } else if (c == Collective::AllGather) {
    phases = {collectiveCost(cluster, Collective::AllGather, S / g, inter).best,
              collectiveCost(cluster, Collective::AllGather, S, intra).best};
  } else {
    phases = {
        collectiveCost(cluster, Collective::ReduceScatter, S, intra).best,
        collectiveCost(cluster, Collective::ReduceScatter, S / g, inter).best};
  }
  double time = 0, latency = 0;
  for (const CollectiveEstimate &e : phases) {
    time += e.time;
    latency += e.latency;
  }
  return finish(Algorithm::Hierarchical, latency, time - latency, S, c,
                group.size());
}

} // namespace

CollectiveCost collectiveCost(const Cluster &cluster, Collective c,
                              double bytes, GroupPlacement group) {
  CollectiveCost out;
  GroupLinks l = linksOf(cluster, group);
  int n = l.n, g = l.g, N = l.N;
  if (n <= 1 && c != Collective::SendRecv) {
    out.best.algorithm = Algorithm::None;
    out.candidates.push_back(out.best);
    return out;
  }
  double S = bytes;
  switch (c) {
  case Collective::AllReduce: {
    // Ring: reduce-scatter then all-gather, 2(n-1) steps each moving S/n.
    out.candidates.push_back(
        ring(l, c, S, 2 * (n - 1), 2 * (N - 1), 2.0 * (n - 1) / n * S));
    // Tree (NCCL): reduce up and broadcast down a chain inside each node and a
    // double binary tree across nodes; latency 2((g-1)α1 + ceil(log2 N)α0); the
    // pipelined tree moves S up and S down at the slowest link: 2S/B
    // (tuning.cc: tree algbw = busbw / 2).
    double treeLat = l.overhead + 2.0 * ((g - 1) * l.a1 + ceilLog2(N) * l.a0);
    out.candidates.push_back(
        finish(Algorithm::Tree, treeLat, 2.0 * S / ringBandwidth(l), S, c, n));
    if (g > 1 && N > 1)
      out.candidates.push_back(hierarchical(cluster, c, S, group));
    break;
  }
  case Collective::AllGather:
  case Collective::ReduceScatter: {
    // Ring: n-1 steps each moving S/n.
    out.candidates.push_back(
        ring(l, c, S, n - 1, N - 1, double(n - 1) / n * S));
    if (g > 1 && N > 1)
      out.candidates.push_back(hierarchical(cluster, c, S, group));
    break;
  }
  case Collective::AllToAll: {
    // Pairwise: S/n to each of the n-1 others. Per GPU (g-1)S/n over NVLink;
    // per node g(n-g)S/n over its NIC share; both run at once. One step per
    // peer.
    double intra = g > 1 ? (g - 1) * S / n / l.b1 : 0;
    double inter = N > 1 ? g * double(n - g) * S / n / l.bn : 0;
    double lat = l.overhead + (g - 1) * l.a1 + (n - g) * l.a0;
    out.candidates.push_back(
        finish(Algorithm::Pairwise, lat, std::max(intra, inter), S, c, n));
    break;
  }
  case Collective::SendRecv: {
    // One message between two GPUs: over NVLink inside a node, else over the
    // sender's share of its node's NICs (all G GPUs of a stage send at once).
    bool sameNode = N <= 1;
    double bw = sameNode ? cluster.intraNode.pointToPoint()
                         : cluster.nodeNetworkShare(1);
    double lat = l.overhead + (sameNode ? l.a1 : l.a0);
    out.candidates.push_back(finish(Algorithm::Direct, lat, S / bw, S, c, 2));
    break;
  }
  }
  out.best = *std::min_element(
      out.candidates.begin(), out.candidates.end(),
      [](const CollectiveEstimate &a, const CollectiveEstimate &b) {
        return a.time < b.time;
      });
  return out;
}

} // namespace autoddl::cost
