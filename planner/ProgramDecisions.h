//===- ProgramDecisions.h - what the generated programs do that costs -----===//
//
// The decisions of the generated training programs that change what a step
// costs, computed here once: codegen (codegen/TrainProgram.cpp, Layout.cpp)
// acts on them and the planner's pricing (Pricing.cpp, SbpSignatures.cpp)
// prices them, so predictions cannot drift from programs. Each function states
// the part of the decision that depends on the graph alone; where codegen adds
// conditions on the plan's layouts and stages (which the pricing, pricing ops
// one at a time, does not see), the comment says so.
//
// Plain C++ (no MLIR, no exceptions), at the planner's layer: codegen depends
// on the planner, not the other way round.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace autoddl {
struct ModelGraph;
struct OpDef;
} // namespace autoddl

namespace autoddl::planner {

/// Per tensor, the op making it and the ops reading it.
struct GraphUses {
  explicit GraphUses(const ModelGraph &g);
  std::vector<int> producer; // -1: an input or a parameter
  /// The ops reading each tensor, once per operand slot, in op order.
  std::vector<std::vector<size_t>> readers;
};

/// Whether the generated CUDA program of an fp8 plan registers `op` as an
/// FP8 linear (codegen/emit/ProgramAssembly.cpp): a linear of a repeated
/// block (a transformer layer's qkv, attention projection, MLP fc and proj;
/// not the embedding or the LM head, nor a model without blocks). The
/// runtime then runs it in FP8 where its local shape passes
/// backends/common/Fp8Rule.h's fp8RunsLinear, which the pricing applies to
/// the same shape.
bool fp8Linear(const OpDef &op);

/// Which input casts of FP8 linear `gi` the CUDA runtime shares with a
/// neighbour (backends/cuda/kernels/Fp8Linear.cu Held: in a step, linear
/// calls in a row of one direction reading one x): its forward reads x as
/// the FP8 linear before it in op order cast it, with only linears of that
/// x between (LLaMA's k and v after q, up after gate); its weight gradient
/// reads x^T as the FP8 linear after it cast it (the backward runs them in
/// reverse). runsInFp8(j): whether linear op j runs in FP8.
struct Fp8SharedInput {
  bool x = false, xT = false;
};
Fp8SharedInput fp8SharedInput(const ModelGraph &g, size_t gi,
                              const std::function<bool(size_t)> &runsInFp8);

/// Whether the generated CUDA program runs forward and backward as one CUDA
/// graph after the first step (backends/cuda/StepGraph.h): every model's
/// step, on every mesh (its collectives and pipeline transfers are captured
/// with the kernels, accuracy counts stay on the device until the step
/// ends), but one with a training Dropout primitive.
bool stepRunsAsGraph(const ModelGraph &g);

/// Whether the programs split `size` elements over `tp` ranks: into equal
/// parts, or, for a vocabulary's rows (`paddedRows`), into parts of
/// ceil(size / tp) rows, the last shorter and stored padded with zero rows,
/// every rank keeping at least one real row (Megatron pads its vocabulary
/// alike; here the padding stays out of the softmax).
bool splitRuns(int64_t size, int tp, bool paddedRows);
/// The uneven case of splitRuns: tp does not divide `size` (GPT-2's 50257);
/// ops::paddedVocabulary is the rule.
bool unevenVocabSplitRuns(int64_t size, int tp);

/// autoddl::logitsOnlyToLoss (ir/import/ModelGraph.h) over the planner's use
/// lists. The vocabulary is ModelGraph::vocabularyRows.
bool logitsOnlyToLoss(const ModelGraph &g, const GraphUses &uses,
                      const OpDef &op);
/// The CUDA program's rows of a vocabulary-sized parameter a rank holds:
/// `localRows` rounded up to a multiple of 64 (GEMMs with 50257 as a
/// dimension run at a fifth of the aligned rate on an H200:
/// bench/cuda/results/kernels_h200.txt).
int64_t paddedVocabRows(int64_t localRows);
/// Whether the CUDA program runs `op`, an lm_head as logitsOnlyToLoss says
/// whose weight has the vocabulary's rows, on a padded vocabulary (its local
/// rows and the logits' last dimension paddedVocabRows). Codegen
/// (planVocabPadding) also wants every reader of the table in the table's
/// layout, and the losses on the lm_head's stage in the logits' layout.
bool padsVocabulary(const ModelGraph &g, const GraphUses &uses,
                    const OpDef &op);

/// A tanh GELU between two linears, which the CUDA program runs in their
/// GEMMs' epilogues (linear_gelu_forward, linear_backward_dgelu).
struct GeluChain {
  size_t fc1 = 0, fc2 = 0; // the linear before and the linear after
};
/// The chain of GELU op `gelu`, when the graph allows the fusion: its input
/// made by a linear and read by the GELU alone, its output read by the second
/// linear alone, as that linear's input; neither the loss. Codegen
/// (planGeluFusion) also wants the three ops on one stage in the layouts they
/// hand on, the first linear not row-parallel and the second not
/// column-parallel; the pricing does not look at signatures.
bool geluEpilogueChain(const ModelGraph &g, const GraphUses &uses, size_t gelu,
                       GeluChain &chain);

/// The ReLU that the CUDA program runs in the pass of the bias_add before it
/// (bias_relu_forward, bias_relu_backward: a graph layer's bias and
/// activation), for bias_add op `bias`, or -1: the bias a parameter, the
/// sum read by one ReLU alone (its input) and neither the loss. Codegen
/// (planBiasReluFusion) also wants both on one stage, the ReLU reading the
/// sum in the layout it is made in; the pricing does not look at layouts.
int fusedBiasRelu(const ModelGraph &g, const GraphUses &uses, size_t bias);

/// Whether op `o` is an imported BatchNormalization primitive.
bool batchNormPrimitive(const OpDef &o);

/// The ReLU that the CUDA program runs in the passes of the op before it
/// (batchnorm_relu_*, add_relu_*: ResNet's norm, ReLU and residual, ReLU),
/// for op `op`, or -1: op a BatchNormalization primitive or an add of two
/// operands of its result's shape, its result read by one ReLU alone (its
/// input), neither the loss. Codegen (planProducerReluFusion) also wants
/// both on one stage in one layout, and an add whose sum no linear's GEMM
/// writes (planResidualFusion); the pricing does not look at layouts.
int fusedProducerRelu(const ModelGraph &g, const GraphUses &uses, size_t op);

/// The operand of add op `add` whose batch norm the CUDA program runs with
/// the add in its normalise pass (batchnorm_add_forward: ResNet's last norm
/// of a block and its shortcut, y = norm(x) + shortcut, then the ReLU after
/// the add where fusedProducerRelu runs it there), or -1: an add of two
/// distinct operands of its result's shape, operand k (0 first) made by a
/// BatchNormalization primitive and read by this add alone, neither the
/// loss. The norm's own output is never written (its gradient is: the add's
/// backward stores it, the norm's reads it). Codegen
/// (planResidualNormFusion) also wants both on one stage in one layout and
/// an add whose sum no linear's GEMM writes; the pricing does not look at
/// layouts.
int residualNormOperand(const ModelGraph &g, const GraphUses &uses, size_t add);

/// For residual add op `add`, the operands (1, then 0) whose producing linear
/// can write the sum in its GEMM (linear_residual_forward, reading the other
/// operand, the residual, as C): that linear's output read by this add alone
/// and not the loss, of the sum's shape; the residual not a parameter and
/// made before the linear (or an input). Codegen (planResidualFusion) takes
/// the first whose linear is not row-parallel (its all-reduce and bias follow
/// the GEMM) and whose operands arrive in the layouts they are made in;
/// residualFusionPriced says when the pricing counts it.
std::vector<size_t> residualGemmOperands(const ModelGraph &g,
                                         const GraphUses &uses, size_t add);
/// The pricing's stand-in for "the linear is not row-parallel", which it
/// cannot see op by op: no tensor parallelism.
inline bool residualFusionPriced(int tp) { return tp == 1; }

} // namespace autoddl::planner
