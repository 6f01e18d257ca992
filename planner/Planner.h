//===- Planner.h - the search's state, shared by its units ----------------===//
//
// Internal to planner/ (plan() in Search.cpp is the entry point). One Planner
// per plan() call holds the model, cluster and options, the searched contexts
// (a mesh and micro-batch size with its SBP assignments) and the memos; its
// jobs live in one unit each:
//   Enumeration.cpp     the outer loops: candidates of every mesh, micro-batch,
//                       schedule, recomputation and ZeRO stage the programs run
//                       (the contract, Runnable.h), each with a lower bound;
//   StepPricing.cpp     the inner SBP search (coordinate descent) of a context,
//                       stage partition and times, gradient sync, the
//                       simulator, K-FAC: a candidate's step and memory;
//   StageMemory.cpp     the programs' memory per pipeline rank (activation
//                       sets in flight, recomputed layers);
//   Explainer.cpp       the neighbouring choices and why they lost (--why);
//   Describe.cpp        the chosen candidate as a Plan (tables, collectives).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/Schedule.h"
#include "cost_model/pipeline/Simulator.h"
#include "planner/Descent.h"
#include "planner/Kfac.h"
#include "planner/Pricing.h"
#include "planner/Runnable.h"
#include "planner/Search.h"

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace autoddl::planner::search {

using pipeline::ScheduleKind;

/// Micro-batches each stage of a device runs in a step: a Chimera device holds
/// one stage of each of its two pipelines, each running half of them
/// (Schedule.cpp, chimeraDevice); otherwise every stage (or interleaved
/// chunk) runs all of them.
inline double microbatchesPerStage(const Knobs &k) {
  const double mb = static_cast<double>(k.microbatches);
  return k.schedule == pipeline::ScheduleKind::Chimera ? mb / 2 : mb;
}

/// A mesh and micro-batch size with its searched SBP assignments.
struct Context {
  SearchGraph sg; // own copy: signatures depend on (tp, b)
  std::unique_ptr<PricingContext> pricing;
  std::unique_ptr<Incidence> incidence;
  std::vector<Assignment> assignments; // distinct results of the inner search
  std::vector<Aggregate> aggregates;
  int variables = -1; // descent variables left by the eliminations
};

using Partition = StagePartition;

struct Candidate {
  Knobs knobs;
  Partition partition = Partition::Balanced;
  Context *ctx = nullptr;
  int assignment = 0;
  double lowerBound = 0;
  double memoryEstimate = 0;
  int64_t order = 0; // generation index (tie-breaker)
};

/// A fully priced candidate.
struct Priced {
  bool valid = false;
  std::string invalid; // why not, when !valid
  double stepTime = 0, peakMemory = 0;
  bool fits = false;
  std::vector<DeviceTimes> devices;
  std::vector<StageInfo> stages;
  std::vector<int> layersPerStage;
  double p2p = 0;
  pipeline::StageTimes times;
  pipeline::SimulationResult sim;
  Prediction pred;
  cost::RankMemory peakParts;
  int criticalDevice = 0;
  std::optional<KfacPlan> kfac; // --optimizer kfac
  double kfacPeak = 0;          // K-FAC bytes of the peak-memory rank
};

struct Planner {
  const ModelGraph &g1;
  const cost::Cluster &c;
  const PlannerOptions &o;
  SearchGraph base;
  /// partition()'s balanced results by (stages, layer, pre and post times).
  mutable std::map<std::tuple<int, double, double, double>, std::vector<int>>
      partitionMemo;
  /// price()'s schedules by (kind, stages, micro-batches, chunks).
  /// A schedule and, when it checks out, its dependencies resolved once for
  /// every simulation of it (pipeline::prepareSchedule).
  struct MemoSchedule {
    pipeline::OrError<pipeline::Schedule> schedule;
    std::optional<pipeline::PreparedSchedule> prepared;
  };
  using ScheduleKey = std::tuple<int, int, int, int>;
  using ScheduleMemo = std::map<ScheduleKey, MemoSchedule>;
  ScheduleMemo scheduleMemo;
  /// What price() reads of a simulation: each device's end and the bubble
  /// fraction, or why the simulator refused.
  struct StepEnds {
    std::string error;
    std::vector<double> end;
    double bubbleFraction = 0;
  };
  /// simulateStep()'s results by schedule and stage times (F, B, W, p2p).
  std::map<std::tuple<ScheduleKey, std::vector<double>, std::vector<double>,
                      std::vector<double>, double>,
           StepEnds>
      simMemo;
  StepEnds lastEnds; // the one not memoised (K-FAC: `full` is read too)
  /// Simulates `entry`'s schedule under `times` once per distinct times;
  /// with K-FAC, every time and the whole result in `full`.
  const StepEnds &simulateStep(const ScheduleMemo::value_type &entry,
                               const pipeline::StageTimes &times,
                               pipeline::SimulationResult &full);
  /// activationSets()'s counts by the same key.
  mutable std::map<std::tuple<int, int, int, int>, std::vector<int>> setsMemo;
  std::map<std::tuple<int, int, int64_t, int>, std::unique_ptr<Context>>
      contexts;
  std::vector<std::string> previousBest; // signature names of the last best
  SearchStats stats;
  double capacity = 0;
  double flopsPerSample = 0;
  /// No tensor scales with the batch (a gcn training on its whole graph, an
  /// explicit graph, an ONNX export with a static batch): a micro-batch is one
  /// instance of the model as imported, and the global batch counts instances
  /// (a static-batch export's: samples, its micro-batch its static batch).
  bool fixedShapes = false;
  /// The micro-batch of a fixed-shape model: 1 instance, or the samples of a
  /// static-batch export.
  int64_t instanceMicrobatch() const {
    return g1.staticBatch > 0 ? g1.staticBatch : 1;
  }
  /// A graph model's node count (gcn, gat: a sparse adjacency), else 0. Its
  /// dp splits the nodes, not the batch: every dp rank runs each instance
  /// (the whole graph) on its own block of rows.
  int64_t graphNodes = 0;
  std::optional<KfacModel> kfac; // --optimizer kfac: its layers

  Planner(const ModelGraph &g, const cost::Cluster &cl,
          const PlannerOptions &op)
      : g1(g), c(cl), o(op), runnable(g) {
    capacity = c.hbmBytes;
    flopsPerSample = static_cast<double>(g.forwardFlopsPerSample());
  }

  /// Called once the search graph is built (it knows the batch dims).
  void setFixedShapes() {
    fixedShapes = true;
    for (int d : base.shapes->batchDim)
      fixedShapes &= d < 0;
    // FLOPs of one instance: all the samples it holds (a static-batch ONNX
    // export's global batch counts samples, not instances).
    if (fixedShapes && g1.staticBatch == 0)
      flopsPerSample *= static_cast<double>(std::max<int64_t>(1, g1.batch));
    if (fixedShapes)
      graphNodes = g1.graphNodes();
  }

  /// Instances (samples) one data-parallel replica runs per step: its share
  /// of the global batch, or all of it when dp splits a graph's nodes.
  int64_t replicaInstances(int dp) const {
    return graphNodes > 0 ? o.globalBatch : o.globalBatch / dp;
  }

  int stagesOf(const Knobs &k) const {
    return k.schedule == ScheduleKind::Interleaved ? k.pp * k.chunks : k.pp;
  }

  bool exhaustiveTooLarge = false;
  std::vector<std::string> refusals; // why enumerate() refused meshes, distinct
  RunnableConfigurations runnable;   // what the programs run (Runnable.h)

  Context *context(int tp, int pp, int64_t b, AxisOrder order,
                   std::string &error);
  /// The inner search: descent from each start, with and without a memory
  /// term.
  void searchSbp(Context &ctx);

  /// Layers per model stage: Uniform gives every stage floor(L/S) and the
  /// remainder to the first ones (Megatron); Balanced minimises the largest
  /// stage time given the embedding on the first and the head on the last
  /// stage.
  std::vector<int> partition(Partition kind, int S, const Aggregate &agg) const;

  /// Per model stage: the activation sets the programs allocate for this
  /// schedule (pipeline::countActivationSets: codegen's table's counts; K-FAC's
  /// curvature reads, placed after pricing, are not counted). A configuration
  /// the schedule rejects keeps every micro-batch (price() refuses it anyway).
  const std::vector<int> &activationSets(const Knobs &k) const;

  /// Per-device stage times, memory and bounds without simulating.
  struct DevicePlan {
    std::vector<StageInfo> stages;
    std::vector<int> layers;
    pipeline::StageTimes times;       // as the simulator indexes them
    std::vector<DeviceTimes> devices; // per pipeline rank
    std::vector<double> params;       // parameter elements per device
    std::vector<double> gradDp, gradDpTp;
    std::vector<cost::RankMemory> memory; // per pipeline rank (programs)
    /// Per pipeline rank, the stages it runs in stage order (with Chimera,
    /// the up pipeline's copies too): the per-rank sums walk these, not
    /// every stage per rank (O(stages), not O(pp x stages), per plan).
    std::vector<std::vector<int>> rankStageIds;
  };

  /// Bytes one layer of a stage keeps per micro-batch in the programs (CUDA,
  /// CPU), recomputed or not, and the scratch one stage that recomputes holds
  /// once for the buffers its recomputed layers drop (codegen/emit/
  /// Recompute.cpp; docs/cost-model.md §5.4).
  struct LayerBytes {
    // Per activation set (kept layer, recomputed layer; CUDA, CPU).
    double kept = 0, keptRc = 0, host = 0, hostRc = 0;
    // Once per stage: the gradients its sets share (setsShareGradients).
    double sharedKept = 0, sharedKeptRc = 0, sharedHost = 0, sharedHostRc = 0;
    double scratch = 0, hostScratch = 0;
  };
  LayerBytes layerBytes(const Knobs &k, const SegmentCost &lay) const;

  /// The programs' memory of pipeline rank `dev` with `rc` layers
  /// recomputed on it: state, the activation sets of the stages it runs (as
  /// many per stage as its schedule keeps in flight: activationSets), and
  /// the workspaces.
  cost::RankMemory programMemory(const Knobs &k, const DevicePlan &d,
                                 const Aggregate &agg, int dev, double rc,
                                 double stepGraph) const;

  /// What programMemory sums over the stages rank `dev` runs; it does not
  /// depend on the layers recomputed, so chooseRecomputeLayers sums it once
  /// per rank, not once per count it tries (O(layers) instead of
  /// O(layers x stages) per rank).
  struct RankStages {
    int dev = 0;
    double layers = 0, ws = 0;
    double fp8WeightCopies = 0; // of its layers' FP8 linears
    // The rank's stages in order: layers, the bytes of one set outside the
    // layers (CUDA, CPU), those its sets share, and the sets.
    std::vector<double> stageLayers, perMb, hostPerMb, shared, hostShared, sets;
  };
  RankStages rankStages(const Knobs &k, const DevicePlan &d,
                        const Aggregate &agg, int dev) const;
  cost::RankMemory programMemory(const Knobs &k, const DevicePlan &d,
                                 const Aggregate &agg, const RankStages &r,
                                 double rc, double stepGraph) const;

  /// The layers each stage recomputes: none without recomputation; else,
  /// per rank, the fewest that bring its peak plus the margin within
  /// capacity (the first stages of a rank first), all when even that does
  /// not fit.
  void chooseRecomputeLayers(const Knobs &k, DevicePlan &d,
                             const Aggregate &agg, bool stepGraph) const;

  /// Per-device stage times, memory and bounds without simulating.
  DevicePlan layout(const Knobs &k, Partition part, const Aggregate &agg,
                    const PricingContext &pc) const;

  /// Gradient sync and optimizer of one device, with the overlap model of
  /// docs/planner.md: the sync runs bucketed behind the last
  /// micro-batch's backward; what does not fit, and at least the last
  /// bucket, is exposed.
  void syncAndOptimizer(const Knobs &k, const PricingContext &pc,
                        DevicePlan &d) const;

  double lowerBound(const Knobs &k, const DevicePlan &d) const;

  /// The candidate as K-FAC's pricing reads it (planner/Kfac.h); `d` must
  /// outlive it.
  KfacCandidate kfacCandidate(const Knobs &k, const PricingContext &pc,
                              const DevicePlan &d) const;

  /// plan --kfac-factor-stride S: why this candidate cannot take S ("": it
  /// can): the stride selects whole samples, the same share of every
  /// micro-batch (backends/common/KfacRules.h kfac_row_stride), so a graph
  /// model (rows are nodes) and a micro-batch of other than a multiple of S
  /// samples are refused.
  std::string factorStrideRefusal(const Knobs &k) const;

  /// --optimizer kfac: packs the K-FAC items into the simulated bubbles
  /// (planner/Kfac.h) and adds their time and memory; false (r invalid)
  /// on a packing error.
  bool addKfac(const Knobs &k, const PricingContext &pc,
               const pipeline::Schedule &schedule, DevicePlan &d, Priced &r,
               double &step) const;

  /// Whether K-FAC cannot make this candidate a plan better than `bound`,
  /// before packing its items (the costly part at many micro-batches):
  /// K-FAC adds at least each device's factors and inverses to its memory
  /// and its preconditioning to its step end (PipeFisher.cpp), whatever
  /// the packing.
  bool kfacCannotWin(const Knobs &k, const PricingContext &pc,
                     const pipeline::Schedule &schedule, const DevicePlan &d,
                     double bound) const;

  /// Runs the simulator and fills everything. With K-FAC, a candidate
  /// that kfacCannotWin against `bound` (the best plan found) is not
  /// packed: it comes back invalid, "pruned".
  Priced price(const Candidate &cand,
               double bound = std::numeric_limits<double>::infinity());

  std::vector<int> divisorsUpTo(int n, int cap) const;

  /// Whether `--kfac-refresh K0,K1,...` pins Chimera's mirrored devices d
  /// and pp-1-d (copies of the same layers, so one K: PipeFisher.h)
  /// differently; then Chimera is skipped, and said why when nothing else
  /// applies.
  bool chimeraPinsDiffer(int pp);

  /// Records why a configuration was refused, once per distinct reason:
  /// when none applies, the user sees them all, not only the last one
  /// tried.
  void refuse(const std::string &why);

  /// Every outer candidate of one context and assignment, in a fixed
  /// order.
  void expand(Context &ctx, int assignment, int tp, int pp, int64_t b,
              AxisOrder order, std::vector<Candidate> &out, int64_t &counter);

  /// Candidates of every mesh / micro-batch allowed by the pinned knobs;
  /// why the others were refused goes to `refusals`.
  void enumerate(std::vector<Candidate> &out);
};

/// For each knob, the neighbouring choices of the chosen candidate priced
/// and why they lost (Explainer.cpp; `plan --why`, `inspect --why`).
std::vector<Alternative> explain(Planner &pl, const Candidate &chosen,
                                 const Priced &chosenPriced);

/// Fills the plan's descriptive parts from the chosen candidate
/// (Describe.cpp), and its alternatives when the options ask for them.
void describe(Planner &pl, const Candidate &cand, const Priced &pr, Plan &plan);

} // namespace autoddl::planner::search
