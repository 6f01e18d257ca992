//===- Boxing.h - cost of changing a tensor's nd-SBP ----------------------===//
//
// A small plain-C++ mirror of the sbp dialect's layouts (the planner converts
// the typed attributes into these): per mesh axis Split(dim), Broadcast or
// Partial(sum). A transition between two nd-SBPs is priced as the cheapest
// sequence of 1-D transitions, each changing one mesh axis and running as one
// collective over that axis's groups (docs/cost-model.md §3):
//   S(i)->B all_gather   P->B all_reduce   P->S(i) reduce_scatter
//   S(i)->S(j) all_to_all   B->S(i), B->P free (local slice / keep one copy)
//   S->P not direct (as OneFlow's lazy boxing; goes through B)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/Collectives.h"

#include <string>
#include <vector>

namespace autoddl::cost {

struct Sbp {
  enum Kind { Split, Broadcast, Partial };
  Kind kind = Broadcast;
  int dim = 0; // tensor dimension split; only for Split

  static Sbp split(int d) { return {Split, d}; }
  static Sbp broadcast() { return {Broadcast, 0}; }
  static Sbp partial() { return {Partial, 0}; }
  bool operator==(const Sbp &o) const {
    return kind == o.kind && (kind != Split || dim == o.dim);
  }
  bool operator!=(const Sbp &o) const { return !(*this == o); }
};

/// One Sbp per mesh axis, outermost axis first.
using NdSbp = std::vector<Sbp>;

std::string sbpToString(const Sbp &s);     // "S(0)", "B", "P"
std::string ndSbpToString(const NdSbp &s); // "(S(0), B)"
/// Parses "S(1)", "B", "P" (also "S1"); false on anything else.
bool parseSbp(const std::string &text, Sbp &out);

/// One step of a transition: mesh axis `axis` goes from `from` to `to` by
/// `collective` (or for free), priced on that axis's links.
struct BoxingStep {
  int axis = 0;
  Sbp from, to;
  bool free = false;
  Collective collective = Collective::AllReduce;
  double bytes = 0; // the collective's S (Collectives.h conventions)
  CollectiveEstimate estimate;
};

struct BoxingCost {
  bool possible = false;
  bool searchTooLarge = false; // ndTransition refused: over kMaxBoxingStates
  double time = 0; // seconds, sum over steps
  std::vector<BoxingStep> steps;
};

/// A device mesh on a cluster: its shape and, per axis, where its groups lie.
struct MeshOnCluster {
  std::vector<int64_t> shape;
  std::vector<GroupPlacement> axes;
};
/// Places every axis of `shape` with placeMeshAxis.
bool placeMesh(const Cluster &c, const std::vector<int64_t> &shape,
               MeshOnCluster &out, std::string &error);

/// Cost of one 1-D transition on mesh axis `axis` of a tensor whose logical
/// size is `tensorBytes`, every other axis staying as in `state`. `possible` is
/// false for S->P.
BoxingCost oneAxisTransition(const Cluster &c, const MeshOnCluster &mesh,
                             double tensorBytes, const NdSbp &state, int axis,
                             const Sbp &to);

/// Cheapest sequence of 1-D transitions from `from` to `to` (Dijkstra over
/// nd-SBP states whose per-axis values are drawn from B, S(0), both endpoints'
/// values and every split dim either side uses). Both must have one entry per
/// mesh axis. Assumes every split it tries divides the tensor evenly.
/// ndTransition gives up (possible = false) beyond this many states.
constexpr double kMaxBoxingStates = 1e6;

BoxingCost ndTransition(const Cluster &c, const MeshOnCluster &mesh,
                        double tensorBytes, const NdSbp &from, const NdSbp &to);

} // namespace autoddl::cost
