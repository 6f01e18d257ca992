//===- Collectives.h - α-β time of NCCL-style collectives -----------------===//
//
// Time of one collective over a group placed on the hierarchy (Cluster.h), for
// each algorithm that applies, and the cheapest. Formulas and their derivation:
// docs/cost-model.md §2 (after nccl-tests' doc/PERFORMANCE.md and NCCL's own
// tuning model, src/graph/tuning.cc). Message size conventions are nccl-tests':
//   all_reduce     S = bytes of each rank's buffer (input = output)
//   all_gather     S = bytes of the gathered output (each rank contributes S/n)
//   reduce_scatter S = bytes of each rank's input (each rank keeps S/n)
//   all_to_all     S = bytes of each rank's send buffer (S/n to every rank)
//   send_recv      S = bytes of the message
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/Cluster.h"

#include <string_view>
#include <vector>

namespace autoddl::cost {

enum class Collective {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  SendRecv
};
std::string_view collectiveName(Collective c); // "all_reduce", ..., "send_recv"
bool parseCollective(std::string_view s,
                     Collective &out); // also accepts "send"

enum class Algorithm {
  Ring,         // flat ring over all members (NCCL ring)
  Tree,         // intra-node chain + inter-node double binary tree (NCCL tree),
                // all_reduce only
  Hierarchical, // two-level: NCCL calls inside the node and across nodes (1/g
                // of the data)
  Pairwise,     // all_to_all: every pair exchanges directly
  Direct,       // send_recv: one transfer
  None,         // group of one rank: nothing moves
};
std::string_view algorithmName(Algorithm a);

struct CollectiveEstimate {
  Algorithm algorithm = Algorithm::None;
  double time = 0; // seconds
  double latency =
      0; // seconds of `time` that do not depend on S (α terms + overhead)
  double algbw = 0; // S / time, bytes/s
  double busbw = 0; // algbw * busBandwidthFactor (nccl-tests)
};

struct CollectiveCost {
  CollectiveEstimate best;                    // the cheapest of `candidates`
  std::vector<CollectiveEstimate> candidates; // every algorithm that applies
};

/// nccl-tests' bus-bandwidth factor: 2(n-1)/n for all_reduce, (n-1)/n for
/// all_gather, reduce_scatter and all_to_all, 1 for send_recv
/// (doc/PERFORMANCE.md).
double busBandwidthFactor(Collective c, int n);

/// Prices collective `c` of `bytes` (see the conventions above) over `group`.
/// Assumes a validated cluster and bytes >= 0. For send_recv the two ends are
/// on one node when group.nodes == 1, on two nodes otherwise.
CollectiveCost collectiveCost(const Cluster &cluster, Collective c,
                              double bytes, GroupPlacement group);

} // namespace autoddl::cost
