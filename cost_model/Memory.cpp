//===- Memory.cpp - per-rank memory (docs/cost-model.md §5) ---------------===//
#include "cost_model/Memory.h"

#include <algorithm>

namespace autoddl::cost {

StateBytes mixedPrecisionAdam() { return StateBytes{2, 2, 12}; }
StateBytes fp32Adam() { return StateBytes{4, 4, 8}; }
StateBytes cudaProgramAdamW() { return StateBytes{4 + 2, 4, 8, 4}; }
StateBytes cpuProgramAdamW() { return StateBytes{4, 4, 8}; }

double planningMarginBytes(double capacity) {
  return std::max(0.05 * capacity, double(1 << 30));
}

double cudaOverheadEstimateBytes(int communicators, bool stepGraph,
                                 double allocatedBytes) {
  // Fitted to cudaMemGetInfo at the peak of four one-GPU GPT-2 programs
  // (bench/results/cuda/2026-12-03-speed-autotune/graph_runs): 2.4-3.4 GB
  // above what the wrapper counted, ~2.3 GiB + 0.75 % of it (rounded up);
  // most of the base is the cuBLASLt and cuDNN kernel modules and handles.
  const double gib = double(1 << 30);
  return 2.3 * gib + 0.25 * gib * std::max(0, communicators) +
         (stepGraph ? 64.0 * (1 << 20) : 0) + 0.0075 * allocatedBytes;
}

ModelStateBytes modelStateBytes(const ModelStateInputs &in) {
  double nd = std::max(1, in.dataParallel);
  ModelStateBytes out;
  out.weights = in.params * in.bytes.weights / (in.zeroStage >= 3 ? nd : 1);
  out.gradients = in.params * in.bytes.gradients / (in.zeroStage >= 2 ? nd : 1);
  out.optimizer = in.params * in.bytes.optimizer / (in.zeroStage >= 1 ? nd : 1);
  if (in.zeroStage >= 1)
    out.optimizer += in.params * in.bytes.zeroShard / nd;
  return out;
}

double transformerLayerActivationBytes(const TransformerActivationInputs &in) {
  double s = in.seq, b = in.microBatch, h = in.hidden, a = in.heads;
  double t = std::max(1, in.tensorParallel);
  double sbh = s * b * h;
  if (in.recompute == Recompute::Full)
    return 2.0 * sbh / (in.sequenceParallel ? t : 1.0);
  // The 5as/h term is the softmax input/output and dropout mask of the s×s
  // scores; selective recomputation (and a fused attention kernel) keeps none
  // of them.
  bool keepScores = in.recompute == Recompute::None && !in.flashAttention;
  double scores = keepScores ? 5.0 * a * s / (h * t) : 0.0;
  if (in.sequenceParallel)
    return sbh * (34.0 / t + scores);
  return sbh * (10.0 + 24.0 / t + scores);
}

RankMemory rankMemory(const RankMemoryInputs &in) {
  RankMemory out;
  out.state = modelStateBytes(in.state);
  out.activations = in.activationBytesPerMicroBatch * in.inFlightMicroBatches;
  out.workspace = in.workspaceBytes;
  return out;
}

} // namespace autoddl::cost
