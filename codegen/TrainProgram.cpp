//===- TrainProgram.cpp - fusion and padding decisions of train.cpp -------===//
//
// The emitter's decisions that change what the program computes where:
// GEMM epilogue fusions, stored (not added) gradients, the padded vocabulary.
// Made once by EmitContext's constructor (the plan* passes) and read by every
// part after; the texts that report them are the Emitter's (the end of this
// file). The rest of the emitter lives in codegen/emit/ (Emitter.h says where).
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"
#include "codegen/emit/NumberFold.h"
#include "planner/ProgramDecisions.h"

#include <algorithm>

namespace autoddl::codegen::emit {

/// Vocabulary of a token model: rows of the first embedding table.
int64_t EmitContext::vocab() const { return g.vocabularyRows(); }

/// The CUDA program runs a tanh GELU between two linears (an MLP block) in
/// their GEMMs' epilogues: the first linear's GEMM writes gelu(pre) and pre
/// (linear_gelu_forward), the second's input-gradient GEMM multiplies by the
/// GELU's derivative at pre (linear_backward_dgelu). This saves the GELU's two
/// passes over the 4C-wide activation and the zeroing of its output gradient.
/// Only where nothing else sees what the fusion skips: pre goes to the GELU
/// only, the GELU's output to the second linear's input only, all three on
/// one stage in the layouts they hand on (no conversion between); the first
/// linear not row-parallel (its all-reduce and bias follow the GEMM), the
/// second's input gradient complete on the rank (not column-parallel).
void EmitContext::planGeluFusion() {
  if (!cuda)
    return;
  const planner::GraphUses uses(g);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    planner::GeluChain chain; // the graph's part (planner/ProgramDecisions.h)
    if (!planner::geluEpilogueChain(g, uses, i, chain))
      continue;
    const size_t fc1 = chain.fc1, fc2 = chain.fc2;
    const OpDef &second = g.ops[fc2];
    const OpPlan &p1 = L.ops[fc1], &pg = L.ops[i], &p2 = L.ops[fc2];
    if (p1.stage != pg.stage || pg.stage != p2.stage ||
        !(pg.operands[0] == p1.result) || !(p2.operands[0] == pg.result) ||
        p1.mode == OpMode::Row || p2.mode == OpMode::Column ||
        padRows.count(g.ops[fc1].operands[1]) ||
        padRows.count(second.operands[1]))
      continue;
    fusedGelus.insert(i);
    geluOfFc1[fc1] = i;
    geluOfFc2[fc2] = i;
  }
}

/// The CUDA program runs a residual add whose one operand is a linear's output
/// (the attention and MLP projections) in that linear's GEMM: it reads the
/// residual as its C (beta = 1) and writes the sum (linear_residual_forward);
/// the linear's backward reads the sum's gradient, which is its output's,
/// and the add's backward only adds it to the residual's. This saves the add
/// kernel, the output-gradient buffer's zeroing and two of its passes. Only
/// where the linear's output goes to that add alone, on one stage, in the
/// layouts it is made in; the residual made before the linear (or an input)
/// and read in its own layout; the linear not row-parallel (its all-reduce
/// and bias follow the GEMM).
void EmitContext::planResidualFusion() {
  if (!cuda)
    return;
  const planner::GraphUses uses(g);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpDef &add = g.ops[i];
    // The graph's part (planner/ProgramDecisions.h), then the layouts'.
    for (size_t k : planner::residualGemmOperands(g, uses, i)) {
      const int t = add.operands[k], res = add.operands[1 - k];
      const int lin = producer[size_t(t)];
      if (addOfLinear.count(size_t(lin)))
        continue;
      const OpPlan &pl = L.ops[size_t(lin)], &pa = L.ops[i];
      if (pl.stage != pa.stage || pl.mode == OpMode::Row ||
          !(pa.operands[k] == pl.result) ||
          !(pa.operands[1 - k] == L.tensors[size_t(res)]) ||
          padRows.count(g.ops[size_t(lin)].operands[1]))
        continue;
      addOfLinear[size_t(lin)] = i;
      linearOperandOfAdd[i] = k;
      break;
    }
  }
}

/// The CUDA program runs a ReLU after a bias_add (a graph layer's bias and
/// activation) in the bias_add's passes: bias_relu_forward writes relu(x +
/// b), and bias_relu_backward takes the ReLU's output gradient to the bias's
/// and the input's in one pass, masked by the ReLU's output. The sum between
/// them is never written. Where ProgramDecisions.h's fusedBiasRelu allows it
/// and both are on one stage, the ReLU reading the sum as it is made.
void EmitContext::planBiasReluFusion() {
  if (!cuda)
    return;
  const planner::GraphUses uses(g);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const int relu = planner::fusedBiasRelu(g, uses, i);
    if (relu < 0)
      continue;
    const OpPlan &pb = L.ops[i], &pr = L.ops[size_t(relu)];
    if (pb.stage != pr.stage || !(pr.operands[0] == pb.result))
      continue;
    reluOfBias[i] = size_t(relu);
    fusedRelus.insert(size_t(relu));
  }
}

/// The CUDA program runs a ReLU after a batch norm (an ONNX import's
/// BatchNormalization primitive: ResNet's conv, norm, ReLU) or after an add
/// (ResNet's residual) in that op's passes (kernels/Primitive.h
/// batchnorm_relu_*, kernels/Elementwise.h add_relu_*): the op's own output
/// is never written, and the ReLU's passes (10 ms of ResNet-50's step at
/// batch 256 on an H100, bench/results/onnx/2026-12-07-h100-resnet50/) are
/// gone. Where ProgramDecisions.h's fusedProducerRelu allows it, on one
/// stage, in the same tp layout and channels-last or not alike; an add's GEMM
/// fusion (planResidualFusion) first.
void EmitContext::planProducerReluFusion() {
  if (!cuda)
    return;
  const planner::GraphUses uses(g);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const int found = planner::fusedProducerRelu(g, uses, i);
    if (found < 0 || linearOperandOfAdd.count(i))
      continue;
    const size_t relu = size_t(found);
    const OpPlan &pn = L.ops[i], &pr = L.ops[relu];
    if (pn.stage != pr.stage || !(pr.operands[0] == pn.result) ||
        fusedRelus.count(relu) || nhwcOps.count(i) != nhwcOps.count(relu))
      continue;
    reluAfter[i] = relu;
    relusInProducer.insert(relu);
  }
}

/// The CUDA program runs a batch norm whose output only a same-shape add
/// reads (ResNet's last norm of a block, added to the shortcut) at the add's
/// place, the add (and its ReLU, planProducerReluFusion) in the norm's
/// normalise pass (kernels/Primitive.h batchnorm_add_forward): the norm's
/// output is never written nor read back, a write and a read of a block's
/// activation saved (torch.compile's fusion). At the add's place, as the
/// shortcut may be made after the norm (the downsample's). Where
/// ProgramDecisions.h's residualNormOperand allows it, on one stage, both
/// operands in their own layouts, channels-last or not alike; an add's GEMM
/// fusion (planResidualFusion) first. Both operands' gradients are the add's
/// output gradient (ReLU-masked): where the add stores the shortcut's and no
/// other reader of the shortcut runs its backward between the add's and the
/// norm's (each reads it before the norm in the forward), the norm's
/// backward reads it from the shortcut's buffer (gradAlias) and the add
/// writes it once: a write of a block's activation saved a step.
void EmitContext::planResidualNormFusion() {
  if (!cuda)
    return;
  const planner::GraphUses uses(g);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const int k = planner::residualNormOperand(g, uses, i);
    if (k < 0 || linearOperandOfAdd.count(i))
      continue;
    const OpDef &add = g.ops[i];
    const size_t norm = size_t(producer[size_t(add.operands[size_t(k)])]);
    bool ok = L.ops[norm].stage == L.ops[i].stage &&
              nhwcOps.count(norm) == nhwcOps.count(i);
    for (size_t j = 0; j < 2; ++j)
      ok = ok && L.ops[i].operands[j] == L.tensors[size_t(add.operands[j])];
    if (!ok)
      continue;
    normOfAdd[i] = norm;
    normsInAdd.insert(norm);
    const int shortcut = add.operands[size_t(1 - k)];
    bool alias = storesGrad(i, shortcut, L.tensors[size_t(shortcut)],
                            grad(shortcut, L.tensors[size_t(shortcut)]));
    for (size_t j : users[size_t(shortcut)])
      alias = alias && (j == i || j < norm);
    if (alias)
      gradAlias[add.operands[size_t(k)]] = shortcut;
  }
}

/// Whether the gathered copy (B) of tensor t, split on rows, is read only by
/// column-parallel linears as their input (Megatron's sequence-parallel
/// column linears): their input gradients, partial over tp, are then summed
/// into the copy's gradient as they are and the conversion's backward
/// reduce-scatters it onto t's rows, where otherwise each linear all-reduces
/// its partial and the conversion keeps its rows (twice the volume).
bool EmitContext::gathersPartialGrads(int t) const {
  const TpLayout have = L.tensors[size_t(t)];
  if (!have.split() || have.segments > 1 || isParam(t) || isInput(t))
    return false;
  bool any = false;
  for (size_t i : users[size_t(t)])
    for (size_t k = 0; k < g.ops[i].operands.size(); ++k) {
      if (g.ops[i].operands[k] != t)
        continue;
      const TpLayout l = L.ops[i].operands[k];
      if (l == have)
        continue;
      if (l.split() || L.ops[i].mode != OpMode::Column || k != 0)
        return false;
      any = true;
    }
  return any;
}

/// cuda: whether op i's backward may store (=) its input gradient of t, held
/// in `dx`, instead of adding to it, so that the buffer needs no zeroing: op
/// i is t's first writer in the backward, which runs a stage's steps in
/// reverse op order. t is an activation made on this stage (its gradient is
/// not received); op i reads it once, in t's own layout (dx is that layout's
/// buffer), and is its last reader; every reader is on this stage and reads
/// t as it is stored, so no conversion's backward (a tp layout change, a
/// channels-last transpose, a gather over nodes) writes the buffer too. The
/// other readers' backwards run after op i's and add to what it stored.
bool EmitContext::storesGrad(size_t i, int t, TpLayout l,
                             const std::string &dx) const {
  if (!cuda || isParam(t) || isInput(t) || t == g.loss ||
      !(l == L.tensors[size_t(t)]) || dx != grad(t, l))
    return false;
  const int p = producer[size_t(t)];
  const std::vector<size_t> &readers = users[size_t(t)];
  if (p < 0 || readers.empty() || readers.back() != i ||
      std::count(readers.begin(), readers.end(), i) != 1)
    return false;
  if (readers.size() == 1)
    return L.ops[size_t(p)].stage == L.ops[i].stage;
  if (nodeSplit())
    return false;
  const bool last = storedChannelsLast(t);
  for (size_t j : readers) {
    const OpDef &op = g.ops[j];
    for (size_t k = 0; k < op.operands.size(); ++k)
      if (op.operands[k] == t &&
          (L.ops[j].stage != L.ops[size_t(p)].stage ||
           !(L.ops[j].operands[k] == L.tensors[size_t(t)]) ||
           (imageTensor(t) && (nhwcOps.count(j) > 0) != last)))
        return false;
  }
  return true;
}

/// The CUDA program holds a vocabulary-sized parameter whose leading dimension
/// is the vocabulary (the embedding table [V, C], an lm_head weight [V, C]
/// with transpose_weight) with its local rows rounded up to a multiple of 64:
/// GEMMs with 50257 as a dimension run at a fifth of the aligned rate on an
/// H200 (bench/results/cuda/2026-11-29-kernels/). Only where every use allows
/// it: embedding tables, and bias-free transposed linears whose logits go
/// only to a cross-entropy on the same stage in the same layout (which then
/// reads the first V columns of rows Vp apart). The padding rows are zero and
/// stay zero: zero logits columns, zero dlogits columns, zero weight
/// gradient rows, and the optimizer updates the real elements only.
void EmitContext::planVocabPadding() {
  const int64_t V = g.vocabularyRows();
  if (!cuda || V <= 0)
    return;
  const planner::GraphUses graphUses(g);
  std::vector<std::vector<std::pair<size_t, size_t>>> uses(g.tensors.size());
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (size_t k = 0; k < g.ops[i].operands.size(); ++k)
      uses[size_t(g.ops[i].operands[k])].push_back({i, k});
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (!isParam(int(t)) || full(int(t)).size() != 2 || full(int(t))[0] != V)
      continue;
    const TpLayout l = L.tensors[t];
    const int64_t rows = local(int(t), l)[0];
    const int64_t padded = planner::paddedVocabRows(rows);
    if (padded == rows || uses[t].empty())
      continue;
    bool ok = true;
    std::vector<int> logits;
    for (auto [i, k] : uses[t]) {
      const OpDef &op = g.ops[i];
      const OpPlan &p = L.ops[i];
      if (!(p.operands[k] == l) || k != 1)
        ok = false;
      else if (op.kind == "embedding")
        continue;
      else if (!planner::logitsOnlyToLoss(g, graphUses, op))
        ok = false; // the graph's part (planner/ProgramDecisions.h)
      else {
        const int r = op.results[0];
        const TpLayout rl = L.tensors[size_t(r)];
        ok &= p.result == rl && local(r, rl).back() == rows;
        for (auto [c, ck] : uses[size_t(r)]) {
          const OpPlan &cp = L.ops[c];
          ok &= cp.stage == p.stage && cp.operands[0] == rl;
        }
        logits.push_back(r);
      }
      if (!ok)
        break;
    }
    if (!ok)
      continue;
    padRows[int(t)] = padded;
    for (int r : logits)
      padCols[r] = padded;
  }
}

/// The cuda program's device_numel(): elements a rank holds of a parameter
/// on the device (more than its block for a padded vocabulary).
std::string Emitter::vocabPaddingText() const {
  std::string out =
      "// Elements of a parameter on the device: its block, or more for a "
      "vocabulary padded\n// to a multiple of 64 rows per rank (the header "
      "says why; the padding rows stay zero).\n"
      "static int64_t device_numel(const Param &p) {\n";
  for (const auto &[t, rows] : cx_.padRows) {
    const std::vector<int64_t> ls = cx_.local(t, cx_.L.tensors[size_t(t)]);
    out += fmt::format("  if (&p == &P.{}) // {} held as {}\n    return {};\n",
                       cx_.names[size_t(t)], shapeStr(ls),
                       shapeStr({rows, ls[1]}), rows * ls[1]);
  }
  out += "  return p.n;\n}\n\n";
  return out;
}

/// grad_partial_over_tp(): the parameters whose gradient each tp rank holds
/// a part of (ModelLayout::tpPartialGrads), summed over tp by the optimizer
/// step.
std::string Emitter::tpPartialGradsText() const {
  std::string out = "// Parameters read whole by ops on split rows (sequence-"
                    "parallel norms, batch or\n// sequence splits): each tp "
                    "rank's gradient is its rows' part, summed over tp\n// "
                    "before the optimizer step.\n"
                    "static bool grad_partial_over_tp(const Param &p) {\n";
  const std::vector<int> all = layers_.paramOrder();
  if (!all.empty() && std::all_of(all.begin(), all.end(), [&](int t) {
        return cx_.L.tpPartialGrads.count(t) > 0;
      }))
    return out + "  (void)p;\n  return true; // every parameter\n}\n\n";
  std::vector<std::string> checks; // a layer table's as a loop over it
  for (int t : cx_.L.tpPartialGrads)
    checks.push_back(fmt::format("  if (&p == &P.{})\n    return true;\n",
                                 cx_.names[size_t(t)]));
  out += foldBlocks(checks, "  ", true);
  out += cx_.L.tpPartialGrads.empty() ? "  (void)p;\n  return false;\n}\n\n"
                                      : "  return false;\n}\n\n";
  return out;
}

} // namespace autoddl::codegen::emit
