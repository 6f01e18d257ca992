//===- Kfac.h - K-FAC work items of a plan, priced and packed ------------===//
//
// `autoddl plan --optimizer kfac` (docs/pipefisher.md): which linear layers
// K-FAC preconditions, what each of its work items costs on the cluster, and
// where PipeFisher's packer (cost_model/pipeline/PipeFisher.h) puts them in
// the candidate's simulated bubbles. Plain C++, no exceptions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/common/KfacWidth.h"
#include "cost_model/Cluster.h"
#include "cost_model/pipeline/PipeFisher.h"
#include "ir/import/ModelGraph.h"
#include "planner/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::planner {

/// A linear wider than this on its input or output stays first-order; the
/// runtime's rule (backends/common/KfacWidth.h), so plans price what programs
/// run.
using rt::kKfacMaxFactorDim;

/// One K-FAC'd linear op of the model.
struct KfacLinear {
  int op = 0;                 // index into ModelGraph::ops
  std::string name;           // the op's name, e.g. "h.3.attn.qkv"
  int layer = -1;             // repeated-block index, -1 outside blocks
  bool beforeBlocks = true;   // layer -1: before the first block (embedding
                              // side) or after it (head side)
  int64_t in = 0, out = 0;    // d_in (factor A), d_out (factor G)
  double rowsPerInstance = 0; // rows of its input per sample as imported
};

struct KfacModel {
  std::vector<KfacLinear> linears;
  int headLinears = 0; // linears computing the loss's logits (first-order)
  int wideLinears = 0; // linears past kKfacMaxFactorDim (first-order)
};

/// The K-FAC layers of `g`: every `linear` except the one producing the
/// logits the loss reads (the vocabulary head or classifier) and those with
/// d_in or d_out above kKfacMaxFactorDim. Embeddings and norms are not
/// linears, so they stay first-order too. Fails (message) when nothing is
/// left.
pipeline::OrError<KfacModel> kfacModel(const ModelGraph &g);

/// What the planner knows about one candidate that K-FAC pricing needs.
struct KfacCandidate {
  const Knobs *knobs = nullptr;
  const std::vector<StageInfo> *stages = nullptr;
  double rowsScale = 1; // input rows per op on one dp rank / rowsPerInstance
  cost::GroupPlacement dpGroup, ppGroup;
  cost::Precision precision = cost::Precision::BF16;
  int factorStride = 1; // the curvature reads 1/factorStride of the rows
};

/// The packer's input for the candidate: per K-FAC layer copy (Chimera: two),
/// its items priced on `c` (seconds, bytes).
std::vector<pipeline::KfacLayerWork> kfacWork(const KfacModel &model,
                                              const cost::Cluster &c,
                                              const KfacCandidate &cand);

/// The plan's record of a packing (Plan::kfac) of `work` on `schedule`
/// (simulated as `sim`): each layer takes the K_d of the device holding it,
/// each item its instruction slot.
KfacPlan kfacPlan(const pipeline::Schedule &schedule,
                  const pipeline::SimulationResult &sim,
                  const std::vector<pipeline::KfacLayerWork> &work,
                  const pipeline::PipeFisherResult &packed, double damping,
                  double firstOrderStep);

/// The K-FAC settings of a search (PlannerOptions' kfac*): the damping, the
/// pinned refresh interval (`refresh` > 0: every K_d pinned,
/// PipeFisherInput::refreshSteps; `deviceRefresh` non-empty: one pinned K_d
/// per pipeline device, PipeFisherInput::deviceRefreshSteps), how items fill
/// the bubbles (PipeFisherInput::filling) and the overhead budget (a fraction
/// of the first-order step; 0: none).
struct KfacSettings {
  double damping;
  int refresh;
  std::vector<int> deviceRefresh;
  pipeline::KfacFilling filling;
  double overhead;
  double factorDecay = 0; // > 0: the running average (chooseFactorInterval)
  int factorEvery = 0;    // its F pinned; 0: chosen for `overhead`
  int factorStride = 1;   // plan --kfac-factor-stride (recorded in the plan)
};

/// Packs the candidate's K-FAC work into the bubbles of `sim` (of
/// `schedule`) and adds it to the candidate: each device's memory grows by its
/// K-FAC state (`kfacBytes`: the peak of saved inputs / output gradients
/// waiting for their curvature, the fp32 factors and their inverses), its step
/// end by its preconditioning; each device's forced tail is paid once per its
/// refresh of K_d steps, the step taking the largest forced_d / K_d (with
/// `s.overhead` > 0 and nothing pinned, a device whose forced tail per step
/// exceeds that fraction of the first-order step is packed again with K_d =
/// ceil(forced_d / (overhead x step)), Chimera's mirrored devices alike).
/// With `s.factorDecay` > 0 the factor interval F is chosen too
/// (chooseFactorInterval): its factor steps' curvature is added to the step
/// and the average's three factor-sized buffers to each device's memory.
/// `step` (the first-order step on entry) and `critical` are updated. Fails
/// on a packing error (message).
pipeline::OrError<KfacPlan>
applyKfac(const KfacModel &model, const cost::Cluster &c,
          const KfacCandidate &cand, const pipeline::Schedule &schedule,
          const pipeline::SimulationResult &sim, const KfacSettings &s,
          std::vector<DeviceTimes> &devices, double &step, int &critical);

/// plan --kfac-factor-decay D (docs/kfac.md "Factor interval and running
/// average"): records d and the factor interval F, `pinned` (> 0) or the
/// shortest F whose factor steps' curvature, where the plan's refresh step
/// runs it after the pipeline (each device's forced curvature items), adds at
/// most `overhead` of the first-order step a step, as the refresh's own tail
/// may; at most the shortest device K_d (0 overhead: F = that K_d, the
/// average over the refreshes alone). Sets factorOverhead, the added time a
/// step (the slowest device's forced curvature x (1/F - 1/K_d)), which
/// applyKfac adds to the step. A pinned F longer than the shortest K_d is
/// that K_d (plan refuses one longer than a pinned K).
void chooseFactorInterval(KfacPlan &p, double decay, int pinned,
                          double overhead);

} // namespace autoddl::planner
