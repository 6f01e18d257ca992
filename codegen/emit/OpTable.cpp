//===- OpTable.cpp - the op emitters' table, and one op's emission --------===//
//
// The one table of op kinds and their emitters (one file per op family:
// EmbeddingEmitter.cpp, LinearEmitter.cpp, ...), and emitOp, which converts
// an op's operands to the layouts its plan reads and calls its emitter.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpTable.h"
#include "codegen/emit/Emitter.h"

#include "ir/import/ResolvePrimitive.h"

#include <tuple>

namespace autoddl::codegen::emit {

namespace {

/// A primitive's form the CUDA kernels do not run (OnnxPrimitive.h
/// primitiveCudaRefusal: the rank, a MatMul's operand roles): the model's
/// property, whatever the plan; "" for any other op. A form no backend runs
/// is the emitter's refusal.
std::string cudaPrimitiveRefusal(const ModelGraph &g, const OpDef &op) {
  if (op.kind != "primitive")
    return "";
  std::vector<onnx_kernels::OperandRole> roles;
  std::vector<ops::Shape> in;
  for (int t : op.operands) {
    const TensorDef &d = g.tensors[size_t(t)];
    in.push_back(d.shape);
    roles.push_back(d.role == TensorRole::Parameter
                        ? onnx_kernels::OperandRole::Parameter
                    : d.role == TensorRole::Constant
                        ? onnx_kernels::OperandRole::Constant
                        : onnx_kernels::OperandRole::Activation);
  }
  onnx_kernels::Primitive prim;
  if (!resolvePrimitive(prim, g, op, in, g.tensors[size_t(op.results[0])].shape)
           .empty())
    return "";
  const std::string e = onnx_kernels::primitiveCudaRefusal(prim, roles);
  return e.empty() ? ""
                   : "op " + op.name + " (" + kindLabel(op) + "): " + e +
                         " (use --backend cpu)";
}

} // namespace

std::string OpEmitters::storeFlags(const OpCall &c,
                                   std::initializer_list<size_t> ks) {
  std::string flags;
  bool any = false;
  for (size_t k : ks) {
    const bool store =
        cx_.storesGrad(c.i, c.op.operands[k], c.p.operands[k], c.dx[k]);
    if (store)
      storedGrads_.insert(c.dx[k]);
    any = any || store;
    flags += store ? ", false" : ", true";
  }
  return any ? flags : "";
}

std::string opsRefusal(const ModelGraph &g, Backend backend) {
  const bool cuda = backend == Backend::Cuda;
  const std::string name = cuda ? "cuda" : "cpu";
  const auto &table = opTable();
  for (const OpDef &op : g.ops) {
    const auto entry = table.find(op.kind);
    if (entry == table.end())
      return "op " + op.name + " (" + op.kind + ") is not supported by the " +
             name + " backend yet";
    if (!cuda)
      continue;
    if (entry->second.cuda == CudaRuns::No)
      return "op " + op.name + " (" + kindLabel(op) +
             ") is not supported by the cuda backend yet (use --backend cpu)";
    if (std::string e = cudaPrimitiveRefusal(g, op); !e.empty())
      return e;
    // The CUDA kernels take parameters (act_t working copy, fp32 gradient)
    // only where a layer has weights; elsewhere a parameter operand would
    // need an activation-typed gradient.
    for (int t : op.operands)
      if (g.tensors[size_t(t)].role == TensorRole::Parameter &&
          entry->second.cuda != CudaRuns::WithWeights)
        return "op " + op.name + " (" + op.kind + ") takes the parameter " +
               g.tensors[size_t(t)].name + " as an operand; the cuda backend " +
               "runs " + op.kind + " on activations only (use --backend cpu)";
  }
  if (EmitContext::findInput(g, "input_ids") >= 0 ||
      EmitContext::findInput(g, "adjacency") >= 0)
    return "";
  // A classifier: its samples and labels are fed by load_samples (both
  // harnesses).
  const auto [input, targets] = EmitContext::classifierInputs(g);
  if (input < 0 || targets < 0)
    return "model " + g.name +
           " has neither input_ids, adjacency nor one f32 input with the "
           "class labels of a cross_entropy or squared_error; the " +
           name + " backend feeds token, graph and classification models only";
  return "";
}

/// Emits op i (with the conversions its operands need) into `steps`.
void Emitter::emitOp(size_t i, std::vector<Step> &steps) {
  const OpDef &op = cx_.g.ops[i];
  const OpPlan &p = cx_.L.ops[i];
  const int st = p.stage;
  std::vector<std::string> x(op.operands.size()), dx(op.operands.size());
  std::vector<std::vector<int64_t>> xs(op.operands.size());
  for (size_t k = 0; k < op.operands.size(); ++k) {
    const int t = op.operands[k];
    x[k] = buffers_.ensureLayout(st, t, p.operands[k], steps);
    dx[k] = cx_.grad(t, p.operands[k]);
    std::tie(x[k], dx[k]) =
        buffers_.ensureFormat(st, t, p.operands[k], i, x[k], dx[k], steps);
    xs[k] = cx_.local(t, p.operands[k]);
  }
  const int r = op.results[0];
  // A fused GELU's output gradient is never formed (planGeluFusion); a
  // linear whose GEMM writes its sum with a residual (planResidualFusion),
  // and a bias_add whose ReLU runs in its passes (planBiasReluFusion), has
  // neither output nor gradient buffer; a norm run in its add's place
  // (planResidualNormFusion) its gradient's alone, or none where it reads
  // the shortcut's (gradAlias).
  if (!cx_.addOfLinear.count(i) && !cx_.reluOfBias.count(i) &&
      !cx_.reluAfter.count(i))
    buffers_.addTensor(st, r, p.result,
                       !cx_.fusedGelus.count(i) && !cx_.gradAlias.count(r),
                       !cx_.normsInAdd.count(i));
  const std::vector<int64_t> ys = cx_.local(r, p.result);
  const std::string y = cx_.full(r).empty() ? "" : cx_.val(r, p.result);
  std::string dy = cx_.full(r).empty() ? "" : cx_.grad(r, p.result);
  const int64_t n = numel(ys);
  Step s;
  // The comment line: name, kind, mode, operand and result shapes.
  std::string operands;
  for (size_t k = 0; k < op.operands.size(); ++k)
    operands += (k ? ", " : "") + shapeStr(xs[k]) +
                (p.operands[k].split() ? " " + p.operands[k].str() : "");
  const char *modeName[] = {"",
                            " (column-parallel)",
                            " (row-parallel)",
                            " (vocab-parallel table)",
                            " (local heads)",
                            " (on local shards)",
                            " (vocab-parallel)"};
  s.fwd.push_back(fmt::format("  // {}: {}{}({}) -> {}{}{}",
                              commentText(op.name), commentText(op.kind),
                              modeName[int(p.mode)], operands, shapeStr(ys),
                              p.result.split() ? " " + p.result.str() : "",
                              cx_.nhwcOps.count(i) ? ", channels-last" : ""));
  s.bwdInput.push_back(fmt::format("  // {}: {} backward", commentText(op.name),
                                   commentText(op.kind)));
  const std::string &k = op.kind;
  const auto &table = opTable();
  const auto entry = table.find(k);
  const OpEntry *e = entry == table.end() ? nullptr : &entry->second;
  OpCall c{i,  op, p,  st, k, std::move(x), std::move(dx), std::move(xs),
           r,  ys, y,  dy, n, std::move(s), steps,         {},
           {}, {}, {}, {}};
  c.F = [&c](std::string line) { c.s.fwd.push_back("  " + line); };
  c.BI = [&c](std::string line) { c.s.bwdInput.push_back("  " + line); };
  c.BW = [&c](std::string line) { c.s.bwdWeight.push_back("  " + line); };
  c.sequenceOffset = [](const OpPlan &p, int64_t T) {
    return p.mode == OpMode::Local && p.operands[0].dim == 1
               ? fmt::format("g.rtp * {}", T)
               : std::string("0");
  };
  c.gatherNodes = [this, &c](size_t k) {
    const std::string all =
        buffers_.allNodes(c.st, c.op.operands[k], c.p.operands[k], c.steps);
    if (all == c.x[k])
      return;
    c.x[k] = all;
    c.dx[k] =
        cx_.isInput(c.op.operands[k]) ? "nullptr" : "a.d_" + all.substr(2);
  };
  if (e)
    e->emit(ops_, c);
  // Which half writes each parameter's gradient (for the gradient buckets).
  auto writes = [](const std::vector<std::string> &lines,
                   const std::string &g) {
    for (const auto &l : lines)
      if (l.find(g) != std::string::npos)
        return true;
    return false;
  };
  for (size_t k = 0; k < op.operands.size(); ++k) {
    if (!cx_.isParam(op.operands[k]))
      continue;
    if (writes(c.s.bwdWeight, c.dx[k]))
      c.s.paramsWeight.push_back(op.operands[k]);
    else if (writes(c.s.bwdInput, c.dx[k]))
      c.s.paramsInput.push_back(op.operands[k]);
  }
  if (cx_.target.opProfiling)
    profileScopes(c.s, profileKind(op));
  steps.push_back(std::move(c.s));
}

const std::map<std::string, OpEntry> &opTable() {
  // Adding an op: its emitter in the family's file, a line here, its kernel
  // in backends/ (docs/codegen.md "Adding an op").
  static const std::map<std::string, OpEntry> table = {
      // EmbeddingEmitter.cpp
      {"embedding", {&OpEmitters::emitEmbedding, CudaRuns::WithWeights}},
      {"positional", {&OpEmitters::emitPositional, CudaRuns::WithWeights}},
      {"rotary", {&OpEmitters::emitRotary, CudaRuns::OnActivations}},
      // LinearEmitter.cpp
      {"linear", {&OpEmitters::emitLinear, CudaRuns::WithWeights}},
      {"matmul", {&OpEmitters::emitMatmul, CudaRuns::OnActivations}},
      {"bias_add", {&OpEmitters::emitBiasAdd, CudaRuns::WithWeights}},
      // ElementwiseEmitter.cpp
      {"add", {&OpEmitters::emitAdd, CudaRuns::OnActivations}},
      {"mul", {&OpEmitters::emitMul, CudaRuns::OnActivations}},
      {"gelu", {&OpEmitters::emitGelu, CudaRuns::OnActivations}},
      {"relu", {&OpEmitters::emitReluSilu, CudaRuns::OnActivations}},
      {"silu", {&OpEmitters::emitReluSilu, CudaRuns::OnActivations}},
      {"elu", {&OpEmitters::emitReluSilu, CudaRuns::OnActivations}},
      {"swiglu", {&OpEmitters::emitSwiglu, CudaRuns::OnActivations}},
      {"softmax", {&OpEmitters::emitSoftmax, CudaRuns::OnActivations}},
      // NormEmitter.cpp
      {"layernorm", {&OpEmitters::emitNorm, CudaRuns::WithWeights}},
      {"rmsnorm", {&OpEmitters::emitNorm, CudaRuns::WithWeights}},
      // LossEmitter.h: the loss emitter's own state (LossEmitter.cpp)
      {"cross_entropy",
       {[](OpEmitters &e, OpCall &c) { e.loss_.crossEntropy(c); },
        CudaRuns::OnActivations, kLabelledLoss}},
      {"squared_error",
       {[](OpEmitters &e, OpCall &c) { e.loss_.squaredError(c); },
        CudaRuns::OnActivations, kLabelledLoss}},
      // AttentionEmitter.cpp
      {"attention", {&OpEmitters::emitAttention, CudaRuns::OnActivations}},
      // ImageEmitter.cpp
      {"conv2d",
       {&OpEmitters::emitConv2d, CudaRuns::WithWeights, kImageKernels}},
      {"pool2d",
       {&OpEmitters::emitPool2d, CudaRuns::OnActivations, kImageKernels}},
      {"flatten", {&OpEmitters::emitFlatten, CudaRuns::OnActivations}},
      {"reshape", {&OpEmitters::emitFlatten, CudaRuns::OnActivations}},
      {"transpose",
       {&OpEmitters::emitTranspose, CudaRuns::OnActivations, kImageKernels}},
      // SparseEmitter.cpp
      {"spmm", {&OpEmitters::emitSpmm, CudaRuns::OnActivations}},
      {"sddmm", {&OpEmitters::emitSddmm, CudaRuns::OnActivations}},
      {"edge_softmax", {&OpEmitters::emitEdgeSoftmax, CudaRuns::OnActivations}},
      {"head_dot", {&OpEmitters::emitHeadDot, CudaRuns::WithWeights}},
      {"gat_aggregate",
       {&OpEmitters::emitGatAggregate, CudaRuns::OnActivations, kGraphColumns}},
      // PrimitiveEmitter.cpp
      // (parameters too: kernels/Primitive.h writes their fp32 gradients)
      {"primitive",
       {&OpEmitters::emitPrimitive, CudaRuns::WithWeights, kPrimitives}},
  };
  return table;
}

bool opHas(const std::string &kind, OpTrait trait) {
  const auto &table = opTable();
  const auto it = table.find(kind);
  return it != table.end() && (it->second.traits & trait) != 0;
}

bool anyOpHas(const ModelGraph &g, OpTrait trait) {
  return std::any_of(g.ops.begin(), g.ops.end(),
                     [&](const OpDef &op) { return opHas(op.kind, trait); });
}

} // namespace autoddl::codegen::emit
