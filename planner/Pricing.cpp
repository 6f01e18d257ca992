//===- Pricing.cpp - costs of an SBP assignment (docs/planner.md) --------===//
#include "planner/Pricing.h"

#include "backends/common/ConvScratch.h"
#include "planner/AdjacencyMemory.h"
#include "planner/Fp8Pricing.h"
#include "planner/ProgramDecisions.h"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace autoddl::planner {

using cost::Sbp;

int sbpCode(const Sbp &s) {
  if (s.kind == Sbp::Broadcast)
    return 0;
  if (s.kind == Sbp::Partial)
    return 1;
  return 2 + std::min(s.dim, 5);
}

namespace {

/// Ops whose backward needs none of their activation operands (docs/planner.md
/// "saved activations").
bool savesNothing(std::string_view k) {
  return k == "add" || k == "bias_add" || k == "positional" || k == "reshape" ||
         k == "flatten" || k == "transpose" || k == "rotary" ||
         k == "embedding";
}
/// Ops whose backward needs their result (softmax: y; attention: the output and
/// its log-sum-exp, as a fused flash-attention kernel keeps them).
bool savesResult(std::string_view k) {
  return k == "attention" || k == "softmax" || k == "edge_softmax";
}
double prod(const std::vector<int64_t> &s) {
  double p = 1;
  for (int64_t d : s)
    p *= static_cast<double>(d);
  return p;
}

constexpr double kImpossible = kImpossibleSeconds;

/// Rows of a tensor: all dimensions but the last.
double rows(const std::vector<int64_t> &shape) {
  return shape.empty() ? 1 : prod(shape) / static_cast<double>(shape.back());
}

/// The per-micro-batch buffers the generated programs keep inside an op
/// (codegen/emit: "saved 1/std", "saved log-sum-exp", "saved probabilities",
/// "per-position loss"; all fp32) and the CUDA runtime's grow-only workspace
/// of its backward (kernels/Attention.cu, AttentionCudnn.cu: an fp32 dQ
/// accumulator and one fp32 per row; the cross-entropy writes its gradient in
/// place and needs none; kernels/GatAttention.cu: the sources' fp32 sums).
void programBuffers(const OpDef &op, const std::vector<ops::ValueType> &in,
                    const std::vector<ops::ValueType> &out,
                    const ops::Attrs &attrs, const cost::KernelOptions &kernels,
                    double &programInternal, double &hostInternal,
                    double &hostScores, double &workspace) {
  const std::string &k = op.kind;
  if (k == "layernorm" || k == "rmsnorm") {
    const double stats = (k == "layernorm" ? 8.0 : 4.0) * rows(out[0].shape);
    programInternal = hostInternal = stats;
  } else if (k == "cross_entropy" && !in.empty()) {
    programInternal = hostInternal = 8.0 * rows(in[0].shape); // loss, lse
  } else if (k == "squared_error" && !in.empty()) {
    programInternal = hostInternal = 4.0 * rows(in[0].shape); // loss
  } else if (k == "attention" && out[0].shape.size() == 3) {
    const double b = out[0].shape[0], s = out[0].shape[1];
    const double heads =
        static_cast<double>(ops::attrOr(attrs, ops::attr::kNumHeads, 1));
    programInternal = hostInternal = 4.0 * b * heads * s; // log-sum-exp
    // The CPU program's attention keeps its probabilities.
    if (selectiveRecomputes(k, /*fusedAttention=*/false))
      hostScores = 4.0 * b * heads * s * s;
    if (kernels.attention == cost::AttentionKernel::Fused)
      workspace = 4.0 * prod(out[0].shape) + 4.0 * b * heads * s;
  } else if (k == "gat_aggregate" && in.size() == 4) {
    // dh and ds_src of every source node in fp32, and the adjacency's int32
    // columns the CUDA program keeps for these kernels: one buffer each for
    // the program, as the largest workspace is (the columns are not one, but
    // every gat_aggregate needs them, so the maximum counts them once).
    workspace =
        4.0 * (prod(in[3].shape) + prod(in[2].shape)) +
        4.0 * static_cast<double>(ops::attrOr(attrs, ops::attr::kNnz, 0));
  }
}

/// The CUDA program's scratch for conv2d `op` at micro-batch b: the most
/// one of its calls takes (backends/common/ConvScratch.h), which the grow-only
/// slot holds for the run. Priced channels-last, the program's default (NCHW
/// has no filter copy), on the whole micro-batch whatever the tp layout (each
/// rank convolves its micro-batch whole); no data gradient for a model input.
/// The CPU program has no such scratch (no cuDNN): workspaces are the CUDA
/// program's part only (StageMemory.cpp).
double convScratch(const SearchGraph &sg, const OpDef &op, int64_t b) {
  const std::vector<int64_t> x = sg.shapeAt(op.operands[0], b),
                             w = sg.shapeAt(op.operands[1], b);
  if (x.size() != 4 || w.size() != 4)
    return 0;
  rt::Conv2dShape s{x[0], x[1], x[2], x[3], w[0], w[2], w[3], 1, 0, true};
  s.stride = ops::attrOr(op.attrs, ops::attr::kStride, 1);
  s.padding = ops::attrOr(op.attrs, ops::attr::kPadding, 0);
  const bool dataGrad =
      sg.graph->tensors[size_t(op.operands[0])].role != TensorRole::Input;
  return double(rt::convScratchBound(s, dataGrad));
}

/// What an op's neighbours change of its price in the CUDA program.
struct NeighbourFusions {
  // A ReLU after a bias_add runs in the bias_add's passes: the bias's
  // backward reads the ReLU's output beside its gradient, the ReLU has no
  // kernel of its own.
  bool biasOfRelu = false, reluInBias = false;
  // Likewise a ReLU after a batch norm or a same-shape add (ResNet's),
  // unless that add is a linear's GEMM epilogue.
  bool producerOfRelu = false, reluInProducer = false;
  // A linear after a fused GELU: its input gradient's GEMM (the DGELU
  // epilogue) runs in bf16 in an fp8 plan (Linear.cu).
  bool dxThroughGelu = false;
  // An add whose batch norm operand runs it in its normalise pass
  // (residualNormOperand): the norm reads the other operand beside x, the
  // add has no forward kernel, the norm's output is never written.
  bool normOfAdd = false, addInNorm = false;
};
NeighbourFusions neighbourFusions(const ModelGraph &g, const GraphUses &uses,
                                  size_t gi, int tp) {
  const OpDef &op = g.ops[gi];
  NeighbourFusions f;
  f.biasOfRelu = fusedBiasRelu(g, uses, gi) >= 0;
  // The ReLU op i runs in its passes, or -1 (an add the GEMM writes runs none).
  auto reluOf = [&](size_t i) {
    const int relu = fusedProducerRelu(g, uses, i);
    return relu >= 0 && (!residualFusionPriced(tp) ||
                         residualGemmOperands(g, uses, i).empty())
               ? relu
               : -1;
  };
  f.producerOfRelu = reluOf(gi) >= 0;
  // Op i's batch norm operand runs it (an add the GEMM writes runs none).
  auto normOf = [&](size_t i) {
    const int k = residualNormOperand(g, uses, i);
    return k >= 0 && (!residualFusionPriced(tp) ||
                      residualGemmOperands(g, uses, i).empty())
               ? uses.producer[size_t(g.ops[i].operands[size_t(k)])]
               : -1;
  };
  f.addInNorm = normOf(gi) >= 0;
  if (op.results.size() == 1 && uses.readers[size_t(op.results[0])].size() == 1)
    f.normOfAdd = normOf(uses.readers[size_t(op.results[0])][0]) == int(gi);
  const int before =
      op.operands.empty() ? -1 : uses.producer[size_t(op.operands[0])];
  if (before < 0)
    return f;
  f.reluInProducer = op.kind == "relu" && reluOf(size_t(before)) == int(gi);
  GeluChain chain;
  f.dxThroughGelu = op.kind == "linear" &&
                    geluEpilogueChain(g, uses, size_t(before), chain) &&
                    chain.fc2 == gi;
  f.reluInBias =
      op.kind == "relu" && fusedBiasRelu(g, uses, size_t(before)) == int(gi);
  return f;
}

/// What the fusions of nf change of an op's forward and backward times;
/// `pass`: one pass over its output (seconds); batchNorm: the op is a batch
/// norm primitive.
void applyNeighbourFusions(const NeighbourFusions &nf, bool batchNorm,
                           double pass, double &forward, double &backward) {
  if (nf.reluInBias || nf.reluInProducer) // in its producer's passes
    forward = backward = 0;
  if (nf.addInNorm) // in its norm's normalise pass
    forward = 0;
  if (nf.normOfAdd) // its add's other operand read
    forward += pass;
  // The ReLU's output read as the mask: once, or in both of a batch norm's
  // backward passes (batchnorm_relu_backward).
  if (nf.biasOfRelu || nf.producerOfRelu)
    backward += (batchNorm ? 2 : 1) * pass;
}

} // namespace

PricingContext::PricingContext(SearchGraph &sg, const cost::Cluster &cluster,
                               const PlannerOptions &options, int tp, int dp,
                               int pp, int64_t microbatch, int64_t microbatches,
                               AxisOrder order)
    : sg_(sg), c_(cluster), o_(options), tp_(tp), dp_(dp), pp_(pp),
      b_(microbatch), m_(microbatches), order_(order) {
  std::vector<int64_t> shape = order == AxisOrder::TensorInner
                                   ? std::vector<int64_t>{pp, dp, tp}
                                   : std::vector<int64_t>{pp, tp, dp};
  const int tpAxis = order == AxisOrder::TensorInner ? 2 : 1;
  const int dpAxis = order == AxisOrder::TensorInner ? 1 : 2;
  if (!cost::placeMeshAxis(c_, shape, tpAxis, tpGroup_, error_) ||
      !cost::placeMeshAxis(c_, shape, dpAxis, dpGroup_, error_) ||
      !cost::placeMeshAxis(c_, shape, 0, ppGroup_, error_) ||
      !cost::contiguousGroup(c_, dp * tp, dpTpGroup_, error_)) {
    if (error_.empty())
      error_ = "mesh does not fit the cluster";
    return;
  }
  error_.clear();
  tpMesh_.shape = {tp};
  tpMesh_.axes = {tpGroup_};
  // The objective prices gradient sync by bandwidth alone (bucketing and
  // latency are the outer loop's business): bus bandwidth of a large
  // all-reduce.
  if (dp > 1)
    dpBusbw_ =
        cost::collectiveCost(c_, cost::Collective::AllReduce, 1e9, dpGroup_)
            .best.busbw;
  if (dp * tp > 1)
    dpTpBusbw_ =
        cost::collectiveCost(c_, cost::Collective::AllReduce, 1e9, dpTpGroup_)
            .best.busbw;
  enumerateSignatures(sg_, tp, b_, o_.tpDataSplits);

  const ModelGraph &g = *sg_.graph;
  cost::KernelOptions kernels = o_.kernels;
  kernels.stepGraph = stepGraph_ = stepRunsAsGraph(g);
  for (const OpDef &op : g.ops)
    if (op.kind == "attention" &&
        kernels.attention == cost::AttentionKernel::Fused)
      attentionKernel_ = c_.attention.kernel;
  sizeTensors();
  if (adjacency_ >= 0) { // the variants the program builds its formats in
    kernels.adjacencyKnown = true;
    auto variant = [](const FormatUse &f) {
      return f.tensorCores ? sparse::SpmmVariant::TensorCore
                           : sparse::SpmmVariant::Hybrid;
    };
    kernels.adjacencyA = variant(adjacencyUse_.a);
    kernels.adjacencyAT =
        variant(adjacencyUse_.at.built ? adjacencyUse_.at : adjacencyUse_.a);
  }
  priceOps(kernels);
}

void PricingContext::sizeTensors() {
  const ModelGraph &g = *sg_.graph;
  // A graph model splits its nodes over dp (docs/planner.md "Graph models"):
  // each rank computes its own rows, gathering the rows spmm and sddmm read
  // from every node.
  const int64_t nodes = g.graphNodes();
  const bool nodeSplit = nodes > 0 && dp_ > 1;
  slot_.assign(g.tensors.size(), -1);
  // Only a model with a sparse input has sparse tensors (sparsePattern ends
  // at one); asking per tensor scans the ops, O(ops^2) on a long chain.
  const bool sparseModel =
      std::any_of(g.tensors.begin(), g.tensors.end(), [](const TensorDef &d) {
        return d.role == TensorRole::Input && d.sparse;
      });
  auto addSlot = [&](int t) {
    if (slot_[t] >= 0)
      return;
    slot_[t] = static_cast<int>(elems_.size());
    // A sparse tensor (adjacency, attention scores) holds nnz values; a dp
    // rank of a graph model holds its own nodes' rows.
    double n = sparseModel && g.sparsePattern(t) >= 0
                   ? g.storedElements(t)
                   : prod(sg_.shapeAt(t, b_));
    elems_.push_back(nodeSplit && g.nodeRows(t) ? n / dp_ : n);
  };
  for (const CollapsedEdge &e : sg_.edges)
    addSlot(e.tensor);
  for (const CollapsedOp &op : sg_.ops) {
    for (int t : g.ops[op.op].operands)
      addSlot(t);
    for (int t : g.ops[op.op].results)
      addSlot(t);
  }
  for (size_t t = 0; t < g.tensors.size() && nodes > 0; ++t)
    if (g.tensors[t].role == TensorRole::Input && g.tensors[t].sparse) {
      adjacency_ = int(t);
      adjacencyUse_ = adjacencyUse(g, adjacency_, dp_,
                                   o_.activationElementBytes, c_, o_.precision);
      adjacencyBytes_ = adjacencyBytes(adjacencyUse_).peak;
    }
  boxCache_.assign(elems_.size(), {});
  for (auto &row : boxCache_)
    row.fill(-1);
}

namespace {
/// An FP8 linear's casts (Fp8Pricing.h) on its times, its scratch and its
/// weight's copy.
template <class SigCost> void addFp8Casts(SigCost &sc, const Fp8CastCost &f) {
  sc.forward += f.forward;
  sc.backward += f.backward;
  sc.wgrad += f.wgrad;
  sc.workspace = std::max(sc.workspace, f.scratch);
  sc.fp8WeightCopy = f.weightCopy;
}
} // namespace

void PricingContext::priceOps(const cost::KernelOptions &kernels) {
  const ModelGraph &g = *sg_.graph;
  const bool nodeSplit = g.graphNodes() > 0 && dp_ > 1;
  // What the generated CUDA program does that changes an op's time, decided
  // where codegen decides it (ProgramDecisions.h). It pads the vocabulary
  // (docs/codegen.md, "CUDA backend"): an lm_head runs with its local rows,
  // and so the logits' last dimension, rounded up to a multiple of 64 (a GEMM
  // on an odd dimension runs at a fraction of the aligned rate:
  // docs/calibrate.md). A tanh GELU between two linears runs in their GEMMs'
  // epilogues: its time is the first GEMM's extra write of the
  // pre-activation and the second's extra read of it, no kernel of its own.
  // A residual add on a linear's output runs in that linear's GEMM (the GEMM
  // reads the residual as its C and writes the sum): the forward costs the
  // GEMM's extra read, the backward is the residual's gradient update alone.
  const std::shared_ptr<const GraphUses> usesPtr = usesOf(sg_);
  const GraphUses &uses = *usesPtr;
  GeluChain chain;
  opCost_.resize(sg_.ops.size());
  inGemm_.clear();
  biasOfRelu_.clear();
  normOfAdd_.clear();
  fusedOperand_.clear();
  padScale_.assign(sg_.ops.size(), 1.0);
  for (size_t i = 0; i < sg_.ops.size(); ++i) {
    const OpDef &op = g.ops[sg_.ops[i].op];
    const size_t gi = size_t(sg_.ops[i].op);
    const bool padVocab = padsVocabulary(g, uses, op);
    const bool fusedGelu = geluEpilogueChain(g, uses, gi, chain);
    const bool fusedResidual = !fusedGelu && residualFusionPriced(tp_) &&
                               !residualGemmOperands(g, uses, gi).empty();
    const NeighbourFusions nf = neighbourFusions(g, uses, gi, tp_);
    biasOfRelu_.push_back(nf.biasOfRelu || nf.producerOfRelu);
    normOfAdd_.push_back(nf.normOfAdd);
    inGemm_.push_back(fusedGelu       ? InGemm::All
                      : fusedResidual ? InGemm::Forward
                                      : InGemm::None);
    // Codegen fuses the residual on any tp when the linear is not
    // row-parallel (edgeTerms checks the signature for memory).
    const std::vector<size_t> residual =
        fusedGelu ? std::vector<size_t>{} : residualGemmOperands(g, uses, gi);
    fusedOperand_.push_back(residual.empty() ? -1 : int(residual.front()));
    // The dense operands whose rows spmm (x), sddmm (y) and gat_aggregate
    // (s_src, h) read for every node: all-gathered over dp under a node split.
    auto allNodes = [&](size_t k) {
      return op.kind == "spmm"            ? k == 1
             : op.kind == "sddmm"         ? k == 2
             : op.kind == "gat_aggregate" ? k >= 2
                                          : false;
    };
    const double convBytes = op.kind == "conv2d" ? convScratch(sg_, op, b_) : 0;
    for (const Signature &s : sg_.ops[i].sigs) {
      auto local = [&](int t, const Sbp &l, bool every = false) {
        std::vector<int64_t> sh = sg_.shapeAt(t, b_);
        if (l.kind == Sbp::Split && l.dim < static_cast<int>(sh.size()))
          sh[l.dim] = (sh[l.dim] + tp_ - 1) / tp_; // uneven splits pad
        if (nodeSplit && !every && g.nodeRows(t))
          sh[0] = (sh[0] + dp_ - 1) / dp_;
        return ops::ValueType{sh, g.tensors[t].dtype};
      };
      std::vector<ops::ValueType> in, out;
      std::vector<bool> isParam;
      double gathered = 0; // bytes all-gathered over dp (node split)
      for (size_t k = 0; k < op.operands.size(); ++k) {
        const bool every = nodeSplit && allNodes(k);
        in.push_back(local(op.operands[k], s.operands[k], every));
        isParam.push_back(g.tensors[op.operands[k]].role ==
                          TensorRole::Parameter);
        if (every)
          gathered += prod(in.back().shape) * o_.activationElementBytes;
      }
      Sbp r = s.result.kind == Sbp::Partial ? Sbp::broadcast() : s.result;
      out.push_back(local(op.results.front(), r));
      if (padVocab) {
        padScale_[i] = double(paddedVocabRows(in[1].shape.front())) /
                       double(std::max<int64_t>(1, in[1].shape.front()));
        in[1].shape.front() = paddedVocabRows(in[1].shape.front());
        out[0].shape.back() = in[1].shape.front();
      }
      ops::Attrs attrs = op.attrs;
      if (nodeSplit) // a rank's rows hold about 1/dp of the stored entries
        if (int64_t *nnz = ops::findAttr(attrs, ops::attr::kNnz))
          *nnz = (*nnz + dp_ - 1) / dp_;
      if (s.splitHeads)
        for (auto name : {ops::attr::kNumHeads, ops::attr::kNumKvHeads})
          if (int64_t *heads = ops::findAttr(attrs, name))
            *heads /= tp_;
      // An fp8 plan runs the block linears that pass the size rule in FP8
      // (plus their casts), everything else in bf16.
      const bool fp8 = runsInFp8(op, in, out[0], o_.precision);
      const cost::Precision bulk = cost::bulkPrecision(o_.precision);
      cost::OpCost oc =
          cost::opCost(c_, op.kind, in, out, attrs, isParam,
                       fp8 ? cost::Precision::FP8 : bulk, kernels);
      OpSigCost sc;
      sc.forward = oc.forward.time;
      sc.backward = oc.backward();
      if (fp8 && nf.dxThroughGelu) { // that GEMM in bf16, the others in FP8
        const cost::OpCost ob =
            cost::opCost(c_, op.kind, in, out, attrs, isParam, bulk, kernels);
        sc.backward = ob.backward() - ob.backwardWeight.time +
                      oc.backwardWeight.time;
      }
      if (op.kind == "spmm" &&
          g.tensors[op.operands[0]].role == TensorRole::Activation)
        // The values are an activation (gat's attention): their gradient is
        // an SDDMM of dY and x on the same pattern.
        sc.backward +=
            cost::opCost(c_, "sddmm", {in[0], out[0], in[1]}, {in[0]}, attrs,
                         {false, false, false}, bulk, kernels)
                .forward.time;
      sc.wgrad = oc.backwardWeight.time;
      if (fusedGelu) {
        const double bytes = prod(out[0].shape) * o_.activationElementBytes;
        sc.forward = sc.backward = bytes / (c_.hbmBandwidth * c_.hbmEfficiency);
        sc.wgrad = 0;
      }
      if (fusedResidual) {
        const double bytes = prod(out[0].shape) * o_.activationElementBytes;
        sc.forward = bytes / (c_.hbmBandwidth * c_.hbmEfficiency);
        // The residual's gradient += the sum's: an add of one operand.
        sc.backward = cost::opCost(c_, "add", {out[0]}, out, attrs, {false},
                                   bulk, kernels)
                          .backward();
      }
      applyNeighbourFusions(nf, batchNormPrimitive(op),
                            prod(out[0].shape) * o_.activationElementBytes /
                                (c_.hbmBandwidth * c_.hbmEfficiency),
                            sc.forward, sc.backward);
      sc.savedInternal = oc.savedInternal;
      if (s.inOpAllReduceBytes > 0)
        sc.comm = cost::collectiveCost(c_, cost::Collective::AllReduce,
                                       s.inOpAllReduceBytes, tpGroup_)
                      .best.time;
      if (gathered > 0) // all-gather forward, reduce-scatter of its gradient
        sc.comm += cost::collectiveCost(c_, cost::Collective::AllGather,
                                        gathered, dpGroup_)
                       .best.time +
                   cost::collectiveCost(c_, cost::Collective::ReduceScatter,
                                        gathered, dpGroup_)
                       .best.time;
      programBuffers(op, in, out, attrs, kernels, sc.programInternal,
                     sc.hostInternal, sc.hostScores, sc.workspace);
      sc.workspace = std::max(sc.workspace, convBytes);
      if (fp8)
        addFp8Casts(sc, fp8CastCost(c_, in[0], out[0], nf.dxThroughGelu, m_,
                                    fp8SharedAt(sg_, gi, b_, tp_)));
      opCost_[i].push_back(sc);
    }
  }
}

double PricingContext::localBytes(int t, const Sbp &s) const {
  double bytes = elems_[slot_[t]] * o_.activationElementBytes;
  return s.kind == Sbp::Split ? bytes / tp_ : bytes;
}

double PricingContext::boxing(int t, const Sbp &from, const Sbp &to) {
  if (from == to || tp_ == 1)
    return 0;
  double &slot = boxCache_[slot_[t]][sbpCode(from) * 8 + sbpCode(to)];
  if (slot < 0) {
    cost::BoxingCost bc = boxingDetail(t, from, to);
    slot = bc.possible ? bc.time : kImpossible;
  }
  return slot;
}

cost::BoxingCost PricingContext::boxingDetail(int t, const Sbp &from,
                                              const Sbp &to) const {
  return cost::ndTransition(
      c_, tpMesh_, elems_[slot_[t]] * o_.activationElementBytes, {from}, {to});
}

double PricingContext::bucketed(cost::Collective coll, double bytes,
                                const cost::GroupPlacement &group) const {
  if (bytes <= 0 || group.size() <= 1)
    return 0;
  auto key = std::make_tuple(static_cast<int>(coll), bytes, group.gpusPerNode,
                             group.nodes);
  auto it = bucketMemo_.find(key);
  if (it != bucketMemo_.end())
    return it->second;
  double full = std::floor(bytes / o_.bucketBytes);
  double rest = bytes - full * o_.bucketBytes;
  double t = 0;
  if (full > 0)
    t += full * cost::collectiveCost(c_, coll, o_.bucketBytes, group).best.time;
  if (rest > 0)
    t += cost::collectiveCost(c_, coll, rest, group).best.time;
  bucketMemo_.emplace(key, t);
  return t;
}

double PricingContext::sendRecv(double bytes) const {
  if (pp_ <= 1)
    return 0;
  // Adjacent stages are on different nodes when the pp axis spans nodes.
  const bool network = ppGroup_.nodes > 1;
  cost::GroupPlacement pair{network ? 1 : 2, network ? 2 : 1};
  auto key = std::make_tuple(static_cast<int>(cost::Collective::SendRecv),
                             bytes, pair.gpusPerNode, pair.nodes);
  auto it = bucketMemo_.find(key);
  if (it != bucketMemo_.end())
    return it->second;
  double t = cost::collectiveCost(c_, cost::Collective::SendRecv, bytes, pair)
                 .best.time;
  bucketMemo_.emplace(key, t);
  return t;
}

double PricingContext::unary(int op, int s) const {
  const OpSigCost &c = opCost_[op][s];
  return sg_.ops[op].count * (c.forward + c.backward + c.comm);
}

PricingContext::EdgeTerms PricingContext::edgeTerms(int e,
                                                    const Assignment &a) {
  EdgeTerms r;
  const CollapsedEdge &E = sg_.edges[e];
  const int t = E.tensor;
  const ModelGraph &g = *sg_.graph;
  if (E.input) {
    // The data loader hands every rank its layout directly; the programs
    // keep each micro-batch's ids / targets (4-byte elements). The CUDA
    // program of a graph model keeps its adjacency in W8 formats (a memory
    // part of its own, Aggregate::graphBytes), its features as act_t and its
    // labels twice (training and held-out, backends/cuda/harness/Harness.cpp).
    r.program = r.host = elems_[slot_[t]] * 4;
    if (t == adjacency_)
      r.program = 0;
    else if (adjacency_ >= 0 && g.nodeRows(t))
      r.program = elems_[slot_[t]] * (g.tensors[t].dtype == ops::DType::I32
                                          ? 8
                                          : o_.activationElementBytes);
    return r;
  }
  auto sigOf = [&](int op) -> const Signature & {
    return sg_.ops[op].sigs[a[op]];
  };
  if (E.parameter) {
    auto [c0, k0] = E.consumers.front();
    const Sbp storage = sigOf(c0).operands[k0];
    r.paramElems = elems_[slot_[t]] / (storage.kind == Sbp::Split ? tp_ : 1);
    bool gradPartial = false;
    int seen[8] = {0};
    for (auto [c, k] : E.consumers) {
      const Sbp x = sigOf(c).operands[k], gr = sigOf(c).operandGrads[k];
      if (gr.kind == Sbp::Partial && storage.kind == Sbp::Broadcast)
        gradPartial = true;
      // --tp-mode tensor prices only what the programs run, and they convert
      // no parameter: readers of a shared parameter that disagree (a tied
      // table split for one, whole for the other) would run replicated.
      if (x != storage && !o_.tpDataSplits)
        r.fwdBox += kImpossible;
      if (x != storage && !seen[sbpCode(x)]++) {
        r.fwdBox += boxing(t, storage, x);
        if (storage.kind == Sbp::Split)
          r.bwdBox += boxing(t, gr, storage);
      }
    }
    double gradBytes = r.paramElems * o_.activationElementBytes;
    (gradPartial ? r.gradDpTp : r.gradDp) = gradBytes;
    return r;
  }
  if (E.producer < 0)
    return r;
  const Signature &ps = sigOf(E.producer);
  const Sbp R = ps.result;
  const Sbp expected = R.kind == Sbp::Partial ? Sbp::broadcast() : R;
  int seenX[8] = {0}, seenG[8] = {0};
  double saved = -1;
  const std::string &producerKind = g.ops[sg_.ops[E.producer].op].kind;
  if (savesResult(producerKind))
    saved = localBytes(t, R);
  Sbp savedLayout = R;
  for (auto [c, k] : E.consumers) {
    const Sbp x = sigOf(c).operands[k], gr = sigOf(c).operandGrads[k];
    if (x != R && !seenX[sbpCode(x)]++)
      r.fwdBox += boxing(t, R, x);
    if (gr != expected && !seenG[sbpCode(gr)]++)
      r.bwdBox += boxing(t, gr, expected);
    if (!savesNothing(g.ops[sg_.ops[c].op].kind)) {
      // Keep the smaller of the producer's and the consumer's layout; keeping
      // the producer's costs a re-gather in backward (sequence parallelism).
      double bx = localBytes(t, x), br = localBytes(t, R);
      double pick = std::min(bx, br);
      if (saved < 0 || pick < saved) {
        saved = pick;
        savedLayout = br <= bx ? R : x;
      }
    }
  }
  // The programs' buffers: the tensor as made, with its gradient, and each
  // other layout a consumer reads it in (a converted copy, with its
  // gradient). The CUDA program writes no gradient of a GELU fused into its
  // GEMMs, and never materialises a linear's output its GEMM adds to the
  // residual, nor the result of a bias_add, batch norm or add that its ReLU
  // reads in the same pass, nor the value of a batch norm its add's pass
  // replaces (its gradient is formed; ProgramDecisions.h).
  const double hostScale = 4.0 / o_.activationElementBytes;
  const InGemm made = inGemm_[E.producer];
  bool neverFormed = !E.consumers.empty() && R.kind != Sbp::Partial;
  for (auto [c, k] : E.consumers)
    neverFormed &= (fusedOperand_[c] == k || biasOfRelu_[E.producer]) &&
                    sigOf(c).operands[k] == R;
  // A partial result is all-reduced in place: the buffer holds it whole.
  const Sbp kept = R.kind == Sbp::Partial ? Sbp::broadcast() : R;
  const double rb = localBytes(t, kept) * padScale_[E.producer];
  // Each buffer with its gradient (of which programGrad/hostGrad: the
  // gradients, which a stage's sets may share: StageMemory.cpp).
  const bool gradOnly =
      normOfAdd_[E.producer] && E.consumers.size() == 1 &&
      sigOf(E.consumers[0].first).operands[E.consumers[0].second] == R;
  r.programGrad = neverFormed || made == InGemm::All ? 0 : rb;
  r.program = neverFormed ? 0 : made == InGemm::All || gradOnly ? rb : 2 * rb;
  r.hostGrad = rb * hostScale;
  r.host = 2 * rb * hostScale;
  {
    int seenC[8] = {0};
    seenC[sbpCode(kept)] = 1;
    for (auto [c, k] : E.consumers) {
      const Sbp x = sigOf(c).operands[k];
      if (!seenC[sbpCode(x)]++) {
        r.program += 2 * localBytes(t, x);
        r.programGrad += localBytes(t, x);
        r.host += 2 * localBytes(t, x) * hostScale;
        r.hostGrad += localBytes(t, x) * hostScale;
      }
      // A consumer whose input gradient is partial over tp (a column
      // linear) writes it into a buffer of its own before the all-reduce
      // (into a converted copy's gradient, reduced on the way back, else).
      if (x.kind == Sbp::Broadcast && x == kept &&
          sigOf(c).operandGrads[k].kind == Sbp::Partial) {
        r.program += localBytes(t, x);
        r.programGrad += localBytes(t, x);
        r.host += localBytes(t, x) * hostScale;
        r.hostGrad += localBytes(t, x) * hostScale;
      }
    }
  }
  if (saved > 0) {
    r.saved = saved;
    for (auto [c, k] : E.consumers) {
      const Sbp x = sigOf(c).operands[k];
      if (!savesNothing(g.ops[sg_.ops[c].op].kind) && savedLayout == R &&
          x != R && R.kind == Sbp::Split)
        r.bwdBox += boxing(t, R, x); // re-gather what the forward gathered
    }
    // Selective recomputation drops the attention scores inside the op
    // (aggregate()); a tensor between ops is kept.
    r.savedSelective = saved;
  }
  if (E.crossesLayers) {
    r.p2p = localBytes(t, R);
    r.savedFull = localBytes(t, R);
  }
  return r;
}

double PricingContext::termsObjective(const EdgeTerms &t, double weight) const {
  double sync = 0;
  if (t.gradDp > 0 && dp_ > 1)
    sync += t.gradDp * 2.0 * (dp_ - 1) / dp_ / std::max(1.0, dpBusbw_);
  if (t.gradDpTp > 0 && dp_ * tp_ > 1)
    sync += t.gradDpTp * 2.0 * (dp_ * tp_ - 1) / (dp_ * tp_) /
            std::max(1.0, dpTpBusbw_);
  double mem = t.paramElems * 16.0 / pp_ + t.saved;
  return weight * (t.fwdBox + t.bwdBox + sync / static_cast<double>(m_) +
                   memoryWeight_ * mem);
}

double PricingContext::edgeTerm(int e, const Assignment &a) {
  return termsObjective(edgeTerms(e, a), sg_.edges[e].weight);
}

double PricingContext::objective(const Assignment &a) {
  ++evaluations;
  double total = 0;
  for (size_t i = 0; i < sg_.ops.size(); ++i)
    total += unary(static_cast<int>(i), a[i]);
  for (size_t e = 0; e < sg_.edges.size(); ++e)
    total += edgeTerm(static_cast<int>(e), a);
  return total;
}

double PricingContext::referenceTime() {
  if (referenceTime_ < 0) {
    double w = memoryWeight_;
    memoryWeight_ = 0;
    referenceTime_ = objective(Assignment(sg_.ops.size(), 0));
    memoryWeight_ = w;
  }
  return referenceTime_;
}

Aggregate PricingContext::aggregate(const Assignment &a) {
  Aggregate agg;
  const ModelGraph &g = *sg_.graph;
  auto instances = [&](Segment s) {
    return s == Segment::Layer ? static_cast<double>(sg_.layers) : 1.0;
  };
  for (size_t i = 0; i < sg_.ops.size(); ++i) {
    const CollapsedOp &op = sg_.ops[i];
    SegmentCost &s = agg.seg[static_cast<int>(op.segment)];
    const OpSigCost &c = opCost_[i][a[i]];
    double w = op.count / instances(op.segment);
    s.forward += w * (c.forward + c.comm);
    s.forwardComm += w * c.comm;
    s.backward += w * c.backward;
    s.weightGradient += w * c.wgrad;
    s.workspace = std::max(s.workspace, c.workspace);
    s.fp8WeightCopies += w * c.fp8WeightCopy;
    // Kept inside the op (unfused attention's probabilities): selective
    // recomputation drops exactly these and reruns the op's forward
    // (Korthikanti et al. 2022). A fused attention keeps none: selective
    // then saves nothing and reruns nothing.
    s.savedNone += w * c.savedInternal;
    if (c.savedInternal > 0 &&
        selectiveRecomputes(g.ops[op.op].kind,
                            o_.kernels.attention ==
                                cost::AttentionKernel::Fused))
      s.selectiveRecompute += w * c.forward;
    s.programBytes += w * c.programInternal;
    s.hostBytes += w * (c.hostInternal + c.hostScores);
    s.hostScores += w * c.hostScores;
  }
  for (size_t e = 0; e < sg_.edges.size(); ++e) {
    const CollapsedEdge &E = sg_.edges[e];
    SegmentCost &s = agg.seg[static_cast<int>(E.segment)];
    EdgeTerms t = edgeTerms(static_cast<int>(e), a);
    double w = E.weight / instances(E.segment);
    s.forward += w * t.fwdBox;
    s.forwardComm += w * t.fwdBox;
    s.backward += w * t.bwdBox;
    s.backwardComm += w * t.bwdBox;
    s.savedNone += w * t.saved;
    s.savedSelective += w * t.savedSelective;
    // A program's buffer lives with the op that makes it (the last layer's
    // output, read by the head, is still a layer's buffer).
    const Segment made =
        E.producer >= 0 ? sg_.ops[E.producer].segment : E.segment;
    const double wm = E.weight / instances(made);
    agg.seg[static_cast<int>(made)].programBytes += wm * t.program;
    agg.seg[static_cast<int>(made)].programGradBytes += wm * t.programGrad;
    agg.seg[static_cast<int>(made)].hostBytes += wm * t.host;
    agg.seg[static_cast<int>(made)].hostGradBytes += wm * t.hostGrad;
    s.selectiveRecompute += w * t.recomputeSel;
    // The tensor a layer hands the next: one per boundary, whatever the weight.
    s.savedFull += t.savedFull;
    s.p2pBytes = std::max(s.p2pBytes, t.p2p);
    if (E.parameter) {
      // A parameter used in two segments (a tied embedding) is held, and its
      // gradient synchronised, by the stage of each (as Megatron does).
      bool in[3] = {false, false, false};
      for (auto [c, k] : E.consumers)
        in[static_cast<int>(sg_.ops[c].segment)] = true;
      for (int sgi = 0; sgi < 3; ++sgi) {
        if (!in[sgi])
          continue;
        double wi = E.weight / instances(static_cast<Segment>(sgi));
        agg.seg[sgi].paramElems += wi * t.paramElems;
        if (sgi == 2 && in[0])
          agg.seg[0].sharedParamElems += wi * t.paramElems;
        agg.seg[sgi].gradBytesDp += wi * t.gradDp;
        agg.seg[sgi].gradBytesDpTp += wi * t.gradDpTp;
      }
    }
  }
  agg.objective = objective(a);
  agg.graphBytes = adjacencyBytes_;
  return agg;
}

std::array<std::map<std::string, std::array<double, 2>>, 3>
PricingContext::opKindTimes(const Assignment &a) const {
  std::array<std::map<std::string, std::array<double, 2>>, 3> kinds;
  for (size_t i = 0; i < sg_.ops.size(); ++i) {
    const CollapsedOp &op = sg_.ops[i];
    const OpSigCost &c = opCost_[i][a[i]];
    const double w =
        op.count /
        (op.segment == Segment::Layer ? static_cast<double>(sg_.layers) : 1.0);
    auto &seg = kinds[static_cast<int>(op.segment)];
    const std::string kind = profileKind(sg_.graph->ops[op.op]);
    seg[inGemm_[i] == InGemm::None ? kind : "linear"][0] += w * c.forward;
    seg[inGemm_[i] == InGemm::All ? "linear" : kind][1] += w * c.backward;
  }
  return kinds;
}

} // namespace autoddl::planner
