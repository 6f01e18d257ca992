//===- KfacPlan.h - the K-FAC part of a plan (Plan::kfac) ----------------===//
//
// What `autoddl plan --optimizer kfac` records (docs/plan-format.md "kfac"):
// the K-FAC layers with their priced items, and per pipeline device its
// refresh interval K_d and where PipeFisher's packer put each item
// (cost_model/pipeline/PipeFisher.h).
// Times are seconds within a step of the refresh.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/PipeFisher.h" // KfacFilling

#include <string>
#include <vector>

namespace autoddl::planner {

struct KfacItemPlacement {
  std::string item;    // "curv_A", "curv_G", "reduce_A", ..., "precond"
  int layer = 0;       // index into KfacPlan::layers
  int microbatch = -1; // curvature only
  int step = 0;        // 0 .. its device's refresh_steps - 1
  double start = 0, end = 0;
  bool forced = false; // after the step's pipeline end, not in a bubble
  /// Where the programs run it (DESIGN.md §5b: by instruction slot, not by
  /// time): before instruction `slot` of its device's schedule list, after
  /// every instruction the simulation ended by `start`; the list's size for a
  /// forced item (after the step's last). Codegen reads it and never
  /// re-simulates; it may only move an item later, after its inputs exist.
  int slot = 0;
  /// Fluid packing: each piece's step and span (plan.json "pieces", for an
  /// item of more than one); empty: one piece, [start, end) of `step`.
  std::vector<pipeline::ItemPiece> pieces;
};

struct KfacDevicePlan {
  int device = 0;
  int steps = 1;        // steps this device's refresh spans
  int refreshSteps = 1; // K_d: this device's refresh interval (>= steps)
  double work = 0, precondition = 0, forced = 0;
  double utilisationBefore = 0, utilisationAfter = 0;
  // factorBytes: factors, inverses and pending inverses (fp32), and the
  // inverses' bf16 copies where it preconditions in bf16.
  double savedBytes = 0, factorBytes = 0;
  std::vector<KfacItemPlacement> items;
};

struct KfacLayerPlan {
  std::string name;
  int stage = 0;
  std::string direction = "down";
  double curvature[2] = {0, 0}, reduce[2] = {0, 0}, invert[2] = {0, 0};
  double precondition = 0;
  int refreshSteps = 1; // K_d of the device holding this copy
};

struct KfacPlan {
  double damping = 1e-3;
  std::string rule = "sgd";   // the programs' rule: sgd, lamb or adam-graft
  int refreshSteps = 1;       // K: the largest device's K_d
  bool refreshPinned = false; // K or K_d from --kfac-refresh, not the bubbles
  /// > 0: the overhead budget (fraction of the first-order step) that
  /// lengthened some device's K_d beyond its bubbles' need (kfacOverhead).
  double overheadBudget = 0;
  /// kfac.fill: how the items were packed (`--kfac-fill`).
  pipeline::KfacFilling filling = pipeline::KfacFilling::Items;
  /// The running average of the factors (plan --kfac-factor-decay D; the
  /// programs' --kfac-factor-decay and --kfac-factor-every defaults): d (0:
  /// none, each refresh inverts its own step's factors), the factor interval
  /// F (chooseFactorInterval; 0 without a decay) and what its factor steps'
  /// curvature adds a step where no bubble holds it (seconds, not in the
  /// predicted step time).
  double factorDecay = 0;
  int factorEvery = 0;
  double factorOverhead = 0;
  /// S (plan --kfac-factor-stride; the programs' default): the factors from
  /// every S-th sample of each micro-batch, the curvature items priced at
  /// 1/S (1: every sample).
  int factorStride = 1;
  double firstOrderStepTime = 0; // the same candidate without K-FAC
  double utilisationBefore = 0, utilisationAfter = 0;
  std::vector<KfacLayerPlan> layers;
  std::vector<KfacDevicePlan> devices;
  std::vector<std::string>
      unfitted; // forced items, "stage 1: inv_A h.3.mlp.fc"
};

} // namespace autoddl::planner
