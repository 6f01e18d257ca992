//===- Memory.h - bytes each rank holds at its peak -----------------------===//
//
// Functions over plain inputs so the planner can call them for any candidate
// (docs/cost-model.md §5):
//   parameters, gradients, optimizer state: per ZeRO (Rajbhandari et al. 2020,
//   §3),
//     sharded over the data-parallel degree by ZeRO stage;
//   activations: Korthikanti et al. 2022 ("Reducing Activation Recomputation in
//     Large Transformer Models", §4, Table 2) per layer per micro-batch, times
//     the micro-batches a pipeline schedule keeps in flight;
//   workspace: transient buffers the generated program allocates once
//   (cuBLASLt and attention-backward workspaces, one recomputed layer);
//   overhead: what the program's allocation wrapper does not count (CUDA
//   context, NCCL buffers, the step graph, allocator rounding), estimates.
// The planner keeps total() plus planningMarginBytes() within the device
// (docs/cost-model.md §5).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace autoddl::cost {

enum class Recompute { None, Selective, Full };

/// Bytes per parameter of each kind of state.
struct StateBytes {
  double weights = 2;   // the copy the forward reads (bf16)
  double gradients = 2; // bf16 gradients
  double optimizer =
      12; // fp32 master copy + Adam m + v: K = 12 in ZeRO's notation
  double zeroShard = 0; // a gradient shard ZeRO-1 keeps besides (/ Nd)
};
/// ZeRO §3 "mixed-precision Adam": 2 + 2 + 12 = 16 bytes per parameter.
StateBytes mixedPrecisionAdam();
/// Plain fp32 Adam: 4 (weights) + 4 (gradients) + 8 (m, v) = 16 bytes, no
/// master copy.
StateBytes fp32Adam();
/// What the generated CUDA program holds per parameter
/// (backends/cuda/harness/Harness.h, Param): fp32 value (4) + bf16 working
/// copy (2) as weights, fp32 gradient (4), fp32 AdamW m and v (8), and under
/// ZeRO-1 an fp32 gradient shard (4 / Nd): 18 bytes without ZeRO.
StateBytes cudaProgramAdamW();
/// The CPU program (backends/cpu/harness/Harness.h): fp32 value, gradient,
/// m, v: 16 bytes.
StateBytes cpuProgramAdamW();

/// The margin below device capacity a plan's predicted peak must keep:
/// max(5 % of the capacity, 1 GiB).
double planningMarginBytes(double capacity);

/// cuBLASLt workspace of the CUDA runtime (backends/cuda/Runtime.h), counted.
constexpr double kCublasLtWorkspaceBytes = 32.0 * (1 << 20);

/// Device memory a CUDA program uses that its allocation wrapper does not
/// count: ESTIMATES (docs/cost-model.md §5.3): the CUDA context with the
/// cuBLASLt/cuDNN handles and their kernel modules (~2.3 GiB on an H200, as
/// measured), NCCL's buffers (~0.25 GiB per communicator of more than one
/// rank), the step graph's own memory (~64 MiB) and cudaMalloc's rounding and
/// pools (~0.75 % of what is allocated).
double cudaOverheadEstimateBytes(int communicators, bool stepGraph,
                                 double allocatedBytes);

struct ModelStateInputs {
  double params =
      0; // parameters this rank holds after tensor/pipeline sharding
  int dataParallel =
      1; // degree over which ZeRO shards (the data-parallel axis)
  int zeroStage =
      0; // 0: none, 1: optimizer states, 2: + gradients, 3: + weights
  StateBytes bytes = mixedPrecisionAdam();
};

struct ModelStateBytes {
  double weights = 0, gradients = 0, optimizer = 0;
  double total() const { return weights + gradients + optimizer; }
};

/// ZeRO §3: stage 1 divides the optimizer term by Nd, stage 2 the gradients
/// too, stage 3 the weights too.
ModelStateBytes modelStateBytes(const ModelStateInputs &in);

struct TransformerActivationInputs {
  double seq = 0;         // s: sequence length
  double microBatch = 0;  // b
  double hidden = 0;      // h
  double heads = 0;       // a
  int tensorParallel = 1; // t
  bool sequenceParallel = false;
  Recompute recompute = Recompute::None;
  bool flashAttention =
      false; // the fused kernel keeps no s×s scores (the 5as/h term)
};

/// Bytes of activations one transformer layer keeps for backward per
/// micro-batch, 16-bit activations (Korthikanti et al. 2022, Eq. 1-4 and Table
/// 2):
///   no parallelism:        s·b·h·(34 + 5·a·s/h)
///   tensor parallel t:     s·b·h·(10 + 24/t + 5·a·s/(h·t))
///   + sequence parallel:   s·b·h·(34/t + 5·a·s/(h·t))
///   selective recompute:   drops the 5·a·s/h term (the attention scores)
///   full recompute:        2·s·b·h (only the layer's input; /t with sequence
///   parallel)
double transformerLayerActivationBytes(const TransformerActivationInputs &in);

struct RankMemoryInputs {
  ModelStateInputs state;
  double activationBytesPerMicroBatch = 0; // summed over this stage's layers
  double inFlightMicroBatches = 1; // from the pipeline schedule's simulator
  double workspaceBytes = 0;
};

struct RankMemory {
  ModelStateBytes state;
  double activations = 0;
  double workspace = 0;
  /// A graph model's adjacency as the CUDA program holds it at its peak
  /// (planner/AdjacencyMemory.h); 0 for other models.
  double graph = 0;
  double overhead = 0; // not counted by the program's wrapper (estimates)
  /// The CPU backend's host bytes for the same rank (fp32, unfused kernels);
  /// not part of total().
  double host = 0;
  /// What the program's allocation wrapper counts (peak_memory_bytes).
  double allocated() const {
    return state.total() + activations + workspace + graph;
  }
  double total() const { return allocated() + overhead; }
};

RankMemory rankMemory(const RankMemoryInputs &in);

} // namespace autoddl::cost
