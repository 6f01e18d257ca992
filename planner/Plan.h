//===- Plan.h - the planner's inputs, knobs and the plan it returns ------===//
//
// Plain C++ (no MLIR, no exceptions): the search library (Search.h) fills a
// Plan, the edge library (PlanJson.h) writes it as plan.json
// (docs/plan-format.md) and reads it back for `autoddl inspect`.
//
// Vocabulary: the device mesh has three axes, "pp" (pipeline stages), "dp"
// (data parallel) and "tp" (the operator-parallel axis whose per-op SBP the
// coordinate descent chooses). Every activation is split over "dp" along its
// batch dimension; parameters are broadcast over "dp" (ZeRO shards their
// optimizer state / gradients over it). Times are seconds, sizes bytes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/Boxing.h"
#include "cost_model/Compute.h"
#include "cost_model/Memory.h"
#include "cost_model/pipeline/Schedule.h"
#include "planner/KfacPlan.h"
#include "planner/ProgramDecisions.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::planner {

enum class SearchMode { CoordinateDescent, Exhaustive };

/// Mesh axis order, outermost first; the innermost axis gets consecutive ranks
/// (NVLink neighbours). "pp" is always outermost.
enum class AxisOrder { TensorInner, DataInner };
std::string axisOrderName(AxisOrder o); // "pp,dp,tp" / "pp,tp,dp"

std::string recomputeName(cost::Recompute r); // "none", "selective", "full"
bool parseRecompute(const std::string &s, cost::Recompute &out);
/// Whether selective recomputation reruns an op of kind `kind` in the
/// backward: the attention core (Korthikanti et al. 2022) where the attention
/// keeps its probabilities (the CPU program's); a fused attention keeps only
/// the softmax statistics and has nothing to recompute. The one rule the
/// pricing (Pricing.cpp) and the programs (codegen/emit/Recompute.cpp) follow.
bool selectiveRecomputes(const std::string &kind, bool fusedAttention);

/// Knobs a user may pin (`--fix`); unset ones are searched.
/// How model layers are divided into pipeline stages: Balanced minimises the
/// largest stage time (the embedding on the first stage, the head on the last);
/// Uniform is Megatron's L/S each, the remainder to the first stages.
enum class StagePartition { Balanced, Uniform };

struct FixedKnobs {
  std::optional<int> tp, pp, dp;
  std::optional<int64_t> microbatch; // samples per micro-batch
  std::optional<pipeline::ScheduleKind> schedule;
  std::optional<int> chunks; // interleaved model chunks per device
  std::optional<cost::Recompute> recompute;
  /// Recompute every layer of every stage (Megatron's --recompute-method
  /// uniform), not only as many as memory needs: to price a published run.
  bool recomputeAllLayers = false;
  std::optional<int> zero; // 0, 1 (what the programs run: Runnable.h)
  std::optional<AxisOrder> order;
  std::optional<StagePartition> partition;
};

struct PlannerOptions {
  int64_t globalBatch = 0; // samples per step, all data-parallel ranks
  SearchMode mode = SearchMode::CoordinateDescent;
  FixedKnobs fixed;
  /// Bytes per element of activations, gradients and weights as the backend
  /// runs them (bf16).
  double activationElementBytes = 2;
  cost::Precision precision = cost::Precision::BF16;
  /// Whether the plan's prices count the CUDA runtime's overheads (context,
  /// NCCL buffers; docs/cost-model.md §5.3). Always true for device plans.
  bool cudaOverheads = true;
  /// Gradient-sync bucket (bytes of gradients per all-reduce / reduce-scatter).
  double bucketBytes = 40e6 * 2;
  /// Compute the "why not" table (neighbouring choices of every knob).
  bool explain = true;
  /// Exhaustive mode refuses problems with more SBP assignments than this.
  double exhaustiveLimit = 2e6;
  /// The training stack's kernels (attention fused or not, attention
  /// dropout): docs/cost-model.md §4.4.
  cost::KernelOptions kernels;
  /// Whether the data-parallel gradient sync runs behind the backward
  /// (PyTorch DDP, Megatron-LM --overlap-grad-reduce since 2023); false: after
  /// the pipeline flush, all of it exposed (Megatron-LM 2021).
  bool overlapGradSync = true;
  /// Bytes per gradient element the sync moves (2: bf16; 4: Megatron-LM's
  /// fp32 main_grad accumulation, --accumulate-allreduce-grads-in-fp32).
  double gradSyncElementBytes = 2;
  /// Whether pipeline transfers overlap compute (a latency between stages);
  /// false: each send blocks its rank (Megatron-LM 2021 synchronises the
  /// device after every batched p2p call).
  bool overlapP2p = true;
  std::string stack = "modern"; // the name applyStack last set
  /// Whether the tp axis may also carry batch and sequence splits (OneFlow's
  /// full 1-D SBP list, `--tp-mode any`). False (`--tp-mode tensor`): only the
  /// tensor-parallel splits the generated programs run (column, row,
  /// vocabulary, heads, hidden), so the program runs the plan as priced.
  bool tpDataSplits = true;
  /// "adamw" (first-order, the default) or "kfac": K-FAC on the linear
  /// layers, its work packed into the pipeline's bubbles (docs/pipefisher.md).
  std::string optimizer = "adamw";
  double kfacDamping = 1e-3; // > 0; recorded in the plan for the programs
  /// > 0: the refresh interval K pinned (`--kfac-refresh`); 0: K is set by
  /// the bubbles' capacity (PipeFisher).
  int kfacRefresh = 0;
  /// Empty: none. Else one pinned K_d per pipeline device (`--kfac-refresh
  /// K0,K1,...`): only candidates with pp equal to its length are searched.
  std::vector<int> kfacDeviceRefresh;
  /// > 0, K not pinned: a device whose forced K-FAC work (what its bubbles
  /// do not hold) would add more than this fraction of the first-order step
  /// refreshes less often, every K_d = ceil(forced_d / (fraction x step))
  /// steps (`--kfac-overhead`; KAISA's amortisation where bubbles are few).
  /// 0: K_d is what the bubbles need.
  double kfacOverhead = 0.05;
  /// How K-FAC items fill the bubbles (`--kfac-fill`): whole items
  /// (PipeFisher, the default) or fluid (the CPU programs' filling thread).
  pipeline::KfacFilling kfacFilling = pipeline::KfacFilling::Items;
  /// > 0: the factors folded into a running average of this decay
  /// (`--kfac-factor-decay`), every kfacFactorEvery steps (> 0: pinned,
  /// `--kfac-factor-every`; 0: chosen for kfacOverhead, chooseFactorInterval).
  double kfacFactorDecay = 0;
  int kfacFactorEvery = 0;
  /// The factors from every S-th sample of each micro-batch
  /// (`--kfac-factor-stride`): the curvature priced at 1/S, and only
  /// micro-batches of a multiple of S samples considered.
  int kfacFactorStride = 1;
};

/// The training stacks `--stack` names (docs/planner.md §4): "modern"
/// (FlashAttention, overlapped bf16 gradient sync and p2p; the defaults) and
/// "megatron-2021" (Megatron-LM as in Narayanan et al. SC'21: unfused attention
/// with dropout 0.1, fp32 gradients all-reduced after the flush, blocking
/// p2p). False on an unknown name.
bool applyStack(const std::string &name, PlannerOptions &o);

/// One op of the collapsed graph with the SBP signature the search chose.
struct OpChoice {
  std::string segment;   // "pre", "layer", "post"
  std::string op;        // representative op name, e.g. "h.1.attn.qkv"
  std::string kind;      // "linear"
  std::string signature; // "column", "row", "batch", "replicate", ...
  std::vector<std::string>
      operands; // per-operand tp-axis SBP ("B", "S(2)", "P")
  std::string result;
  std::vector<std::string>
      candidates; // every valid signature name, in search order
};

/// One tensor of the model with its nd-SBP over ("dp", "tp") and its stage.
struct TensorLayout {
  std::string name;
  std::string role;           // "input", "parameter", "activation"
  std::vector<int64_t> shape; // at the plan's micro-batch size
  std::string dp, tp;         // per-axis SBP
  int stage = 0;              // pipeline model stage that holds it
};

/// A collective the plan runs.
struct CollectiveUse {
  std::string where; // op or tensor it belongs to
  std::string
      phase; // "forward", "backward", "gradient-sync", "p2p", "recompute"
  std::string collective; // "all_reduce", ...
  std::string axis;       // "tp", "dp", "dp+tp", "pp"
  double bytes = 0;       // nccl-tests size convention (Collectives.h)
  double time = 0;        // seconds, one call
  int64_t perStep = 0;    // calls per step per rank that runs it
};

/// A gradient sync's `where`: "gradients of pipeline rank <d>"; codegen reads
/// the rank back (gradientSyncRank: -1 for any other text) to count the
/// bytes the plan prices by time alone, and the validator requires it.
std::string gradientSyncWhere(int rank);
int gradientSyncRank(const std::string &where);

struct StageInfo {
  int stage = 0;  // model stage (pipeline position)
  int device = 0; // pipeline rank that runs it
  int chunk = 0;
  int firstLayer = 0, endLayer = 0; // [first, end)
  bool pre = false, post = false;   // holds the embedding / the head and loss
  /// Layers of this stage whose forward reruns in the backward (Megatron's
  /// --recompute-num-layers), the first ones of the stage; 0 without
  /// recomputation. The planner recomputes only what memory needs.
  int recomputeLayers = 0;
  /// The activation sets the programs allocate for this stage: the most
  /// micro-batches its schedule keeps alive at once on a device
  /// (pipeline::assignActivationSets); 0: not recorded (older plans).
  int activationSets = 0;
};

/// Per pipeline rank (device), per micro-batch unless said otherwise.
struct DeviceTimes {
  double forward = 0, backward = 0,
         weightGradient = 0;                // seconds, incl. tp comm
  double forwardComm = 0, backwardComm = 0; // tp collectives inside them
  double recompute = 0;                     // part of backward
  double gradSync = 0;        // seconds per step, full (before overlap)
  double gradSyncExposed = 0; // seconds per step on the critical path
  double optimizer = 0;       // seconds per step
  double end = 0;             // when its last backward ends (simulated)
  double memory = 0;          // predicted peak bytes
  cost::RankMemory memoryParts;
  double inFlight = 0;  // activation sets held, in units of one stage's
  double kfacBytes = 0; // K-FAC state, in `memory` (--optimizer kfac)

  /// The times as plan.json's `pipeline_ranks[]` names them, in its order:
  /// the one list the writer and the validator read.
  std::array<std::pair<const char *, double>, 11> jsonFields() const {
    return {{{"forward_s", forward},
             {"backward_s", backward},
             {"weight_gradient_s", weightGradient},
             {"forward_comm_s", forwardComm},
             {"backward_comm_s", backwardComm},
             {"recompute_s", recompute},
             {"grad_sync_s", gradSync},
             {"grad_sync_exposed_s", gradSyncExposed},
             {"optimizer_s", optimizer},
             {"end_s", end},
             {"in_flight_microbatches", inFlight}}};
  }
};

struct Prediction {
  double stepTime = 0;
  double tflopsPerGpu =
      0; // model FLOPs (fwd+bwd, no recompute) / s / GPU / 1e12
  double hardwareTflopsPerGpu = 0; // including recomputation
  double mfu = 0;
  double bubbleFraction = 0;
  double peakMemory = 0; // max over ranks, with the estimated overheads
  /// Max over ranks of what the CUDA program's allocation wrapper counts
  /// (its metrics' peak_memory_bytes), and of the CPU program's host bytes;
  /// 0 in plans written before these existed.
  double peakAllocated = 0, peakHostMemory = 0;
  /// The margin below capacity the planner kept (cost::planningMarginBytes).
  double memoryMargin = 0;
  double modelFlopsPerStep = 0;
  // Breakdown of the critical rank's step (seconds): compute, tp comm, p2p,
  // bubble, exposed gradient sync, optimizer.
  double compute = 0, tpComm = 0, p2p = 0, bubble = 0, gradSync = 0,
         optimizer = 0;
  /// Per op kind, the critical rank's compute seconds per step (all its
  /// micro-batches), tp collectives excluded: {forward, backward}. Empty in
  /// plans written before it existed. `autoddl validate` compares it with
  /// the generated program's --profile.
  std::map<std::string, std::array<double, 2>> opKinds;
  /// The same per pipeline device (index = device), for comparing with a
  /// profile of any rank (autoddl validate); empty in older plans.
  std::vector<std::map<std::string, std::array<double, 2>>> opKindsByDevice;
  /// Priced as a step the generated CUDA program replays as one CUDA graph
  /// (a token model, on any mesh; gpu.graph_op_overhead_us).
  bool stepGraph = false;
  /// The attention kernel the prices assume (cluster gpu.attention.kernel:
  /// "cudnn" or "own") where the model has attention and the cluster names
  /// one; empty otherwise (then not written: the batched-GEMM estimate).
  std::string attentionKernel;

  /// A number of plan.json's `predicted` and where it lives in `P` (a
  /// Prediction or a const one); `optional`: older plans may lack it.
  template <class P> struct Field {
    const char *key;
    decltype(&std::declval<P &>().stepTime) value;
    bool optional = false;
  };
  /// `predicted`'s numbers in plan.json's order: the one list the writer, the
  /// reader and the validator use.
  template <class P> static std::array<Field<P>, 10> numbers(P &p) {
    return {{{"step_time_s", &p.stepTime},
             {"tflops_per_gpu", &p.tflopsPerGpu},
             {"hardware_tflops_per_gpu", &p.hardwareTflopsPerGpu},
             {"mfu", &p.mfu},
             {"bubble_fraction", &p.bubbleFraction},
             {"peak_memory_bytes", &p.peakMemory},
             // Absent in plans written before the programs' memory was
             // modelled.
             {"peak_allocated_bytes", &p.peakAllocated, true},
             {"peak_host_memory_bytes", &p.peakHostMemory, true},
             {"memory_margin_bytes", &p.memoryMargin, true},
             {"model_flops_per_step", &p.modelFlopsPerStep}}};
  }
  /// `predicted.breakdown_s`'s seconds, likewise.
  template <class P> static std::array<Field<P>, 6> breakdown(P &p) {
    return {{{"compute", &p.compute},
             {"tp_comm", &p.tpComm},
             {"p2p", &p.p2p},
             {"bubble", &p.bubble},
             {"grad_sync_exposed", &p.gradSync},
             {"optimizer", &p.optimizer}}};
  }
};

struct Knobs {
  int tp = 1, pp = 1, dp = 1;
  int64_t microbatch = 1, microbatches = 1;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::OneFOneB;
  int chunks = 1;
  cost::Recompute recompute = cost::Recompute::None;
  int zero = 0;
  AxisOrder order = AxisOrder::TensorInner;
};
std::string knobsToString(const Knobs &k); // "tp=8 pp=16 dp=8 mb=1 m=192 ..."

/// A neighbour of the chosen plan along one knob.
struct Alternative {
  std::string knob;  // "tp", "pp", "microbatch", "schedule", ..., "sbp:<op>"
  std::string value; // the neighbouring choice
  bool feasible = false;
  double stepTime = 0, peakMemory = 0; // of the neighbour (0 when invalid)
  double deltaTime = 0, deltaMemory = 0;
  std::string reason; // why it lost
};

struct SearchStats {
  double wallSeconds = 0;
  int64_t candidatesPriced = 0; // outer configurations costed
  int64_t simulated = 0;        // of them, run through the pipeline simulator
  int64_t sbpEvaluations = 0; // objective evaluations inside coordinate descent
  int64_t descents = 0;       // coordinate-descent runs (starts)
  /// Of the chosen mesh: collapsed ops with an SBP choice, and how many of
  /// them the exact eliminations left to the descent (docs/planner.md §2).
  int64_t sbpOps = 0, descentVariables = 0;
  std::string mode; // "cd" / "exhaustive"
};

/// One model op's layouts (operands, then results) over the "dp" and "tp"
/// axes and its stage: what plan.mlir annotates (ir/lower/LowerPlan.h).
struct ModelOpLayout {
  std::vector<std::string> dp, tp;
  int stage = 0;
};

struct Plan {
  int version = 1;
  std::string model, modelFamily;
  /// What `autoddl plan` was given (the absolute path of a model file, or a
  /// built-in name) and the SHA-256 of that file's bytes (a built-in's
  /// embedded text); empty in plans written before these fields existed.
  /// Commands that read the plan load the model from modelSource.
  std::string modelSource, modelSha256;
  /// The sbp-fuse passes left out of the model's import (AUTODDL_FUSE_SKIP
  /// when the plan was made, in pass order; empty: none): the commands that
  /// load the model for the plan refuse another setting, which would give
  /// them another graph than the one planned.
  std::string fuseSkip;
  /// The file the plan was read from (not part of the JSON; for messages).
  std::string origin;
  int64_t parameters = 0, layers = 0, seq = 0;
  /// An ONNX model's --loss ("": its default); codegen re-imports with it.
  std::string loss;
  std::string cluster, gpu;
  int nodes = 0, gpusPerNode = 0;
  double peakFlops = 0, memoryCapacity = 0;
  int64_t globalBatch = 0;
  std::string stack = "modern"; // training stack priced (PlannerOptions)
  /// The precision the plan was priced in and the programs run
  /// (PlannerOptions::precision): bf16, or fp8 (the eligible block linears'
  /// GEMMs in FP8: backends/common/Fp8Rule.h).
  cost::Precision precision = cost::Precision::BF16;
  Knobs knobs;
  std::vector<std::string>
      axisLinks; // per axis of ("pp","dp","tp"): "nvlink", "infiniband",
                 // "nvlink+infiniband", "none"
  std::vector<OpChoice> ops;
  std::vector<TensorLayout> tensors;
  std::vector<CollectiveUse> collectives;
  std::vector<StageInfo> stages;
  std::vector<DeviceTimes> devices;
  double p2pTime = 0; // one activation transfer between stages
  /// The per-micro-batch times as the pipeline simulator indexes them (per
  /// pipeline rank for interleaved, per stage otherwise), so `inspect` can
  /// replay the step.
  std::vector<double> simForward, simBackward, simWeightGradient;
  Prediction predicted;
  SearchStats search;
  std::vector<Alternative> alternatives;
  /// --optimizer kfac: the K-FAC layers and where their work runs; absent
  /// (first-order) in plans written without it.
  std::optional<KfacPlan> kfac;
  /// Per model op, in graph order (filled by plan(); not in plan.json).
  std::vector<ModelOpLayout> modelOps;
};

/// When no configuration fits in memory: the smallest footprint seen.
struct Infeasible {
  Knobs knobs;
  double peakMemory = 0, capacity = 0;
  cost::RankMemory parts; // of the rank with the peak
  std::string dominant;   // "weights", "gradients", "optimizer", "activations",
                          // "workspace"
  int64_t candidatesPriced = 0;
  std::string message; // one line
};

} // namespace autoddl::planner
