//===- Pricing.h - what an SBP assignment costs on one mesh --------------===//
//
// A PricingContext fixes the mesh (tp, dp, pp degrees and axis order) and the
// micro-batch size, caches each op's cost under each of its signatures (compute
// roofline from cost_model/Compute.h on the local shard) and each edge's boxing
// costs (cost_model/Boxing.h on the tp axis), and prices an assignment (one
// signature index per collapsed op) in two forms:
//   - objective(): the scalar coordinate descent minimises, a sum of unary (op)
//     and edge terms, each >= 0 (so partial sums bound the exhaustive search);
//   - aggregate(): per-segment forward/backward/wgrad times, communication,
//     saved activations and parameter/gradient bytes the outer loop turns into
//     pipeline stage times, gradient sync and memory.
// Formulas: docs/planner.md "pricing".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/Cluster.h"
#include "cost_model/Collectives.h"
#include "cost_model/Compute.h"
#include "planner/AdjacencyMemory.h"
#include "planner/Plan.h"
#include "planner/SearchGraph.h"

#include <array>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace autoddl::planner {

using Assignment = std::vector<int>; // signature index per collapsed op

/// Seconds charged for a layout conversion that cannot run: a boxing the cost
/// model cannot do, or, under --tp-mode tensor, readers of a shared parameter
/// that disagree on its layout (the programs would run them replicated). Any
/// step at or above it is not a plan.
constexpr double kImpossibleSeconds = 1e9;

/// Per-segment totals, per micro-batch (one layer for Segment::Layer).
struct SegmentCost {
  double forward = 0;        // compute + forward tp collectives
  double backward = 0;       // dgrad + wgrad + backward tp collectives
  double weightGradient = 0; // the wgrad part
  double forwardComm = 0, backwardComm = 0;
  double savedNone = 0;      // activation bytes kept for backward, no recompute
  double savedSelective = 0; // ... with selective recompute
  double selectiveRecompute = 0; // forward time redone in backward (selective)
  double savedFull = 0;          // layer inputs only (full recompute)
  double workspace = 0;          // largest transient buffer of one op
  double fp8WeightCopies = 0;    // FP8 linears' weight copies for the step
  // What the generated programs allocate per micro-batch (docs/cost-model.md
  // §5.2): every buffer of the stage struct, values and gradients.
  double programBytes = 0; // CUDA program (bf16 activations, fused kernels)
  double hostBytes = 0;    // CPU program (fp32, unfused)
  double hostScores = 0;   // of hostBytes: attention probabilities (s x s)
  // Of programBytes and hostBytes: the gradient buffers (a stage's sets may
  // share them: pipeline::setsShareGradients).
  double programGradBytes = 0, hostGradBytes = 0;
  // Parameter elements read in both the pre and the post segment (a tied
  // embedding): held once by a rank that runs both.
  double sharedParamElems = 0;
  double paramElems = 0;  // parameter elements held per rank (tp-sharded)
  double gradBytesDp = 0; // gradient bytes all-reduced over dp only
  double gradBytesDpTp =
      0;               // ... over dp and tp together (B weights of split ops)
  double p2pBytes = 0; // activation bytes one rank sends to the next layer
};

struct Aggregate {
  std::array<SegmentCost, 3> seg; // indexed by Segment
  double objective = 0;
  /// A graph model's adjacency on the GPU at its peak (AdjacencyMemory.h):
  /// every rank loads the graph; 0 for other models.
  double graphBytes = 0;
};

class PricingContext {
public:
  /// `error` is set (and valid() false) when the mesh does not fit the cluster.
  PricingContext(SearchGraph &sg, const cost::Cluster &cluster,
                 const PlannerOptions &options, int tp, int dp, int pp,
                 int64_t microbatch, int64_t microbatches, AxisOrder order);

  bool valid() const { return error_.empty(); }
  const std::string &error() const { return error_; }

  int tp() const { return tp_; }
  int dp() const { return dp_; }
  int pp() const { return pp_; }
  /// Whether ops are priced as in a step replayed as one CUDA graph
  /// (cost::KernelOptions::stepGraph).
  bool stepGraph() const { return stepGraph_; }
  /// Which attention kernel the prices assume (Prediction::attentionKernel).
  const std::string &attentionKernel() const { return attentionKernel_; }
  int64_t microbatch() const { return b_; }
  int64_t microbatches() const { return m_; }
  AxisOrder order() const { return order_; }
  const cost::GroupPlacement &tpGroup() const { return tpGroup_; }
  const cost::GroupPlacement &dpGroup() const { return dpGroup_; }
  const cost::GroupPlacement &dpTpGroup() const { return dpTpGroup_; }
  const cost::GroupPlacement &ppGroup() const { return ppGroup_; }
  const SearchGraph &graph() const { return sg_; }
  const std::vector<Signature> &sigs(int op) const { return sg_.ops[op].sigs; }

  /// Weight (seconds per byte) of the memory term in objective(); 0 = time
  /// only.
  void setMemoryWeight(double w) { memoryWeight_ = w; }
  /// Seconds of the all-replicated assignment's time terms (scale for the
  /// weight).
  double referenceTime();

  double objective(const Assignment &a);
  /// The unary term of op `op` under signature `s` (objective units).
  double unary(int op, int s) const;
  /// The term of edge `e` under `a` (objective units); needs every endpoint
  /// set.
  double edgeTerm(int e, const Assignment &a);
  Aggregate aggregate(const Assignment &a);
  /// Per segment and op kind, the compute seconds of one micro-batch (one
  /// layer for Segment::Layer) as aggregate() counts them, without the tp
  /// collectives: {forward, backward (input and weight gradients)}.
  std::array<std::map<std::string, std::array<double, 2>>, 3>
  opKindTimes(const Assignment &a) const;

  /// Bytes of tensor `t` on one rank under tp layout `s` (dp splits the batch).
  double localBytes(int t, const cost::Sbp &s) const;
  /// Time of a tp-axis boxing of tensor `t` from `from` to `to`.
  double boxing(int t, const cost::Sbp &from, const cost::Sbp &to);
  /// The collectives a boxing runs (for plan.json).
  cost::BoxingCost boxingDetail(int t, const cost::Sbp &from,
                                const cost::Sbp &to) const;
  /// One point-to-point transfer of `bytes` between adjacent pipeline stages.
  double sendRecv(double bytes) const;
  /// Bucketed all-reduce / reduce-scatter time of `bytes` over `group`.
  double bucketed(cost::Collective c, double bytes,
                  const cost::GroupPlacement &group) const;

  int64_t evaluations = 0;

private:
  /// Each tensor's elements on one rank (a slot per edge and op operand).
  void sizeTensors();
  /// Each op's cost under each of its signatures, as the programs run it.
  void priceOps(const cost::KernelOptions &kernels);
  struct OpSigCost {
    double forward = 0, backward = 0, wgrad = 0, comm = 0, resultSaved = 0,
           workspace = 0;
    double savedInternal = 0; // kept inside the op (unfused attention)
    // Per micro-batch buffers the programs keep inside the op (norm
    // statistics, log-sum-exps, per-position losses; the CPU program's
    // attention probabilities in hostScores).
    double programInternal = 0, hostInternal = 0, hostScores = 0;
    // An FP8 linear's weight copy, held through the step (Fp8Rule.h).
    double fp8WeightCopy = 0;
  };
  struct EdgeTerms {
    double fwdBox = 0, bwdBox = 0, saved = 0, savedSelective = 0,
           recomputeSel = 0, paramElems = 0, gradDp = 0, gradDpTp = 0, p2p = 0,
           savedFull = 0, program = 0, host = 0, programGrad = 0, hostGrad = 0;
  };
  EdgeTerms edgeTerms(int e, const Assignment &a);
  double termsObjective(const EdgeTerms &t, double weight) const;

  SearchGraph &sg_;
  const cost::Cluster &c_;
  const PlannerOptions &o_;
  int tp_, dp_, pp_;
  bool stepGraph_ = false;
  std::string attentionKernel_;
  int64_t b_, m_;
  AxisOrder order_;
  std::string error_;
  cost::MeshOnCluster tpMesh_;
  cost::GroupPlacement tpGroup_, dpGroup_, dpTpGroup_, ppGroup_;
  std::vector<std::vector<OpSigCost>> opCost_;
  // Per collapsed op, what of it the CUDA program runs inside a linear's GEMM
  // (that time counts as "linear" in opKindTimes): a GELU between two linears
  // all of it, a residual add on a linear's output its forward.
  enum class InGemm { None, All, Forward };
  std::vector<InGemm> inGemm_;
  // Per op: a bias_add, batch norm or add whose ReLU runs in its passes (its
  // result never formed).
  std::vector<bool> biasOfRelu_;
  // Per op: a batch norm whose add runs in its normalise pass (its value
  // never formed, its gradient is).
  std::vector<bool> normOfAdd_;
  // Per collapsed residual add: the operand whose linear may write the sum
  // in its GEMM (that tensor is then never materialised); else -1.
  std::vector<int> fusedOperand_;
  // Per collapsed op, padded over real columns of its output (an lm_head
  // whose vocabulary the CUDA program pads, ProgramDecisions.h); else 1.
  std::vector<double> padScale_;
  // Only the tensors of the collapsed graph are priced: slot_ maps a model
  // tensor to its row in elems_ / boxCache_ (-1: not in the collapsed graph).
  std::vector<int> slot_;
  std::vector<double> elems_; // elements at micro-batch b
  // A graph model's sparse input, and the CUDA program's bytes for it at
  // their peak (AdjacencyMemory.h); -1 and 0 for other models.
  int adjacency_ = -1;
  double adjacencyBytes_ = 0;
  AdjacencyUse adjacencyUse_; // its formats' variants price the sparse ops
  std::vector<std::array<double, 64>> boxCache_; // (from,to) -> s, -1 = unknown
  mutable std::map<std::tuple<int, double, int, int>, double> bucketMemo_;
  double memoryWeight_ = 0;
  double dpBusbw_ = 1, dpTpBusbw_ = 1; // bytes/s of a large all-reduce
  double referenceTime_ = -1;
};

/// Index of an Sbp in [0, 8): B, P, S(0..5).
int sbpCode(const cost::Sbp &s);

} // namespace autoddl::planner
