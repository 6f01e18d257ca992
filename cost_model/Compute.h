//===- Compute.h - roofline time of an op on its local shard --------------===//
//
// time = max(FLOPs / (peak * eff), bytes / (HBM bandwidth * eff_mem)), at least
// the kernel-launch floor; eff by shape for GEMM-like ops (wave and tile
// quantisation, docs/cost-model.md §4). A calibration entry of the cluster
// (measured time or efficiency of an exact op/shape) replaces the estimate.
// Forward FLOPs come from the shared rules in ir/ops/OpSemantics.h; backward
// splits into the input gradient (dgrad) and the weight gradient (wgrad) so
// zero-bubble schedules can place them apart. Shapes given are the LOCAL shard
// shapes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cuda/sparse/SpmmDecider.h"
#include "cost_model/Cluster.h"
#include "ir/ops/OpSemantics.h"

#include <string_view>
#include <vector>

namespace autoddl::cost {

struct KernelCost {
  double flops = 0;        // FLOP
  double bytes = 0;        // bytes read + written in HBM
  double time = 0;         // seconds
  double efficiency = 0;   // fraction of peak FLOP/s assumed (GEMM-like) or 0
  bool calibrated = false; // time came from the calibration table
  bool computeBound = false;
};

/// linear, matmul, conv2d: a GEMM whose backward runs as two launches (dgrad,
/// wgrad); the per-op overhead of a fitted cluster counts both.
bool isGemmKind(std::string_view kind);

struct OpCost {
  KernelCost forward;
  KernelCost backwardData;   // dgrad: gradients of activations
  KernelCost backwardWeight; // wgrad: gradients of parameters (zero if none)
  /// Bytes the op keeps for its backward beyond its operands and result
  /// (unfused attention: the probabilities, the dropout mask and output).
  double savedInternal = 0;
  double backward() const { return backwardData.time + backwardWeight.time; }
};

/// How the training stack runs attention (docs/cost-model.md §4.4).
enum class AttentionKernel {
  Fused,  // FlashAttention: one kernel, no T x T matrix in HBM (default)
  Unfused // Megatron-LM before FlashAttention (2021): batched GEMM q·kᵀ,
          // fused scale-mask-softmax, dropout, batched GEMM with v
};

/// Software facts of the training stack that change op costs.
struct KernelOptions {
  AttentionKernel attention = AttentionKernel::Fused;
  /// Attention-probability dropout (unfused kernels only; a fused kernel
  /// drops inside the kernel at no extra HBM traffic). 0: none.
  double attentionDropout = 0;
  /// The step runs as one CUDA graph (backends/cuda/StepGraph.h): each op
  /// execution costs gpu.graph_op_overhead_us, not gpu.op_overhead_us.
  bool stepGraph = false;
  /// The W8 variants the CUDA program builds a graph model's adjacency in:
  /// A (spmm, sddmm) and A^T (spmm's backward), each the decider's pick at
  /// its first use on the features of the graph the program trains
  /// (planner/AdjacencyMemory.h). Unset (adjacencyKnown false), each op is
  /// priced at the decider's pick for it on an assumed power-law graph.
  bool adjacencyKnown = false;
  sparse::SpmmVariant adjacencyA = sparse::SpmmVariant::Hybrid,
                      adjacencyAT = sparse::SpmmVariant::Hybrid;
};

/// Achievable fraction of peak of an M×N×K GEMM: the cluster's large-GEMM
/// efficiency times tile quantisation (128×128 output tiles), wave quantisation
/// (tiles over SMs) and a per-tile pipeline fill of 128 along K
/// (docs/cost-model.md §4.2).
double gemmEfficiency(const Cluster &c, double m, double n, double k,
                      double batch = 1);

/// The roofline of one kernel: max(flops / (peak(p) * eff), bytes / (bw *
/// eff_mem)), at least c.kernelLaunch.
KernelCost roofline(const Cluster &c, double flops, double bytes,
                    double efficiency, Precision p);

/// FLOP/s of sparse op `op` ("spmm", "sddmm", or one variant's:
/// "spmm.hybrid", "spmm.all-tc", "sddmm.hybrid", "sddmm.all-tc") at feature
/// width `width` from c.sparseRates: linear in the width between measured
/// widths, the nearest measured width's rate outside them. A precision without
/// an entry uses its twin (bf16 <-> fp16, tf32 <-> fp32: the same tensor-core
/// rate). 0 when the table has no entry.
double sparseFlopRate(const Cluster &c, std::string_view op, Precision p,
                      double width);

/// The W8 format variant (hybrid or all-tc) the CUDA program's decider
/// (backends/cuda/sparse/SpmmDecider.h) picks for an spmm or sddmm of this
/// width on a matrix of these features. The cluster file has no L2 size, so
/// the L2-fit feature is 0 (the fitted trees do not split on it).
sparse::SpmmVariant sparseVariant(bool sddmm, const sparse::SpmmFeatures &f,
                                  double width, Precision p);
/// The same for an adjacency of this shape and nnz whose graph the plan does
/// not know: it assumes a power-law graph (powerLawFeatures).
sparse::SpmmVariant sparseVariant(bool sddmm,
                                  const std::vector<int64_t> &adjacency,
                                  double nnz, double width, Precision p);

/// Looks up (op, precision, shape) in c.calibration; returns true and sets
/// `time` (seconds) when an entry gives a time, or `efficiency` when it gives
/// that.
bool calibrated(const Cluster &c, std::string_view op, Precision p,
                const std::vector<int64_t> &shape, double &time,
                double &efficiency);

/// Forward, dgrad and wgrad cost of op `kind` on local operand/result types, in
/// precision `p` (bytes per element from `p`: 4 for fp32/tf32, 2 for bf16/fp16;
/// integer operands keep their own size). `parameterOperands[i]` says operand i
/// is a trainable parameter (its gradient is wgrad). Backward rules and their
/// sources: docs/cost-model.md §4.3.
OpCost opCost(const Cluster &c, std::string_view kind,
              const std::vector<ops::ValueType> &operands,
              const std::vector<ops::ValueType> &results,
              const ops::Attrs &attrs,
              const std::vector<bool> &parameterOperands, Precision p,
              const KernelOptions &kernels = {});

/// Optimizer kinds of the step.
enum class Optimizer { SGD, AdamW };

/// Time of one optimizer step over `params` locally held parameters:
/// memory-bound, AdamW reads p (fp32 master), g, m, v and writes p, m, v (7 × 4
/// bytes) plus the bf16 copy of p written for the next forward (2 bytes) when
/// mixed precision; SGD reads p, g, writes p.
KernelCost optimizerStep(const Cluster &c, double params, Optimizer opt,
                         bool mixedPrecision);

} // namespace autoddl::cost
