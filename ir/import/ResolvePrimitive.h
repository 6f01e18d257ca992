//===- ResolvePrimitive.h - a ModelGraph primitive as its kernels see it -===//
//
// An op of kind "primitive" (ModelGraph.h) resolved by the runtime's one
// table of what runs (backends/common/OnnxPrimitive.h): its ONNX attributes,
// the given operand and result shapes and the values of the constants it
// reads. fuseImported checks every primitive it keeps so on the graph's
// shapes (a form without a kernel refuses the model at import, naming the
// node); codegen resolves it again on the shapes a rank holds. Header-only:
// no exceptions, no MLIR.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"

#include "backends/common/OnnxPrimitive.h"

#include <string>
#include <variant>
#include <vector>

namespace autoddl {

/// What a primitive op of `g` gives its kernels besides shapes: the ONNX op
/// type, its attributes and, per operand, the values of a constant (empty
/// for any other operand).
struct PrimitiveInputs {
  std::string type;
  onnx_kernels::PrimitiveAttrs attrs;
  std::vector<std::vector<double>> consts;
};
inline PrimitiveInputs primitiveInputs(const ModelGraph &g, const OpDef &op) {
  PrimitiveInputs r;
  for (const auto &[name, value] : op.attrs) {
    if (auto *v = std::get_if<int64_t>(&value))
      r.attrs.ints[name] = *v;
    else if (auto *d = std::get_if<double>(&value))
      r.attrs.floats[name] = *d;
    else if (auto *l = std::get_if<std::vector<int64_t>>(&value))
      r.attrs.lists[name] = *l;
    else if (auto *s = std::get_if<std::string>(&value); s && name == "op_type")
      r.type = *s;
  }
  r.consts.resize(op.operands.size());
  for (size_t j = 0; j < op.operands.size(); ++j) {
    const TensorDef &t = g.tensors[size_t(op.operands[j])];
    if (t.role == TensorRole::Constant)
      r.consts[j] = t.values;
  }
  return r;
}

/// Resolves primitive `op` of `g` on operand shapes `in` and result shape
/// `out` into `p`; "" or why it does not run.
inline std::string resolvePrimitive(onnx_kernels::Primitive &p,
                                    const ModelGraph &g, const OpDef &op,
                                    const std::vector<ops::Shape> &in,
                                    const ops::Shape &out) {
  const PrimitiveInputs r = primitiveInputs(g, op);
  return onnx_kernels::makePrimitive(p, r.type, r.attrs, in, out, r.consts);
}

/// Why primitive `p` computes a sample's result from other samples of its
/// micro-batch of B (a reduction or softmax over dimension 0, a transpose
/// moving it, ...), or "" when it keeps them apart: dp and micro-batches
/// then split the samples freely. A batch norm on batch statistics mixes
/// only the samples of one micro-batch, by design: it is answered by
/// normalisesPerMicrobatch, not here. Assumes the result's dimension 0 is
/// the batch where it is B (the import's layout).
inline std::string primitiveMixesSamples(const onnx_kernels::Primitive &p,
                                         int64_t B,
                                         const std::vector<bool> &constant) {
  using K = onnx_kernels::Primitive::Kind;
  if (B <= 1)
    return "";
  if (p.kind == K::Reduce)
    for (int64_t a : p.axes)
      if (a == 0)
        return "it reduces over the batch dimension";
  if (p.out.empty() || p.out[0] != B)
    return "its result's first dimension is not the batch";
  switch (p.kind) {
  case K::Transpose:
    return p.perm[0] == 0 ? "" : "it moves the batch dimension";
  case K::Softmax:
  case K::LogSoftmax:
  case K::Concat:
    return p.axis != 0 ? "" : "it works along the batch dimension";
  case K::Slice:
    return p.window.begin[0] == 0 && p.window.step[0] == 1 &&
                   p.window.shape[0] == p.in[0][0]
               ? ""
               : "it slices the batch dimension";
  case K::Matmul:
    // [B,..,M,K]·[..,K,N] keeps dimension 0 a batch; [B,K]·[K,N] too when
    // the right side is a constant, not per-sample.
    return p.out.size() >= 3 || (p.in[1].size() < 3 && constant[1])
               ? ""
               : "it contracts over the samples";
  default: // elementwise, broadcasting, reshapes: sample-major stays so
    return "";
  }
}

/// Whether primitive `p` normalises with the statistics of its micro-batch
/// (BatchNormalization in training, as PyTorch's module in train mode): the
/// function is then one of the micro-batch size, as PyTorch's is of the
/// per-device batch under DDP without SyncBatchNorm and of the accumulation
/// step's batch; any dp x micro-batch split of that size computes it.
inline bool normalisesPerMicrobatch(const onnx_kernels::Primitive &p) {
  return p.kind == onnx_kernels::Primitive::Kind::BatchNorm && p.batchStats;
}

/// The first primitive of `g` (resolved on g's shapes; one the kernels do
/// not run is refused elsewhere, naming why) for which `why(p, constant)`
/// is not "", as "op NAME (TYPE): why", or "". `constant[j]`: operand j is
/// a constant or a parameter, not per-sample.
template <typename Why>
std::string firstPrimitiveWhere(const ModelGraph &g, Why why) {
  for (const OpDef &op : g.ops) {
    if (op.kind != "primitive")
      continue;
    std::vector<ops::Shape> in;
    std::vector<bool> constant;
    for (int t : op.operands) {
      const TensorDef &d = g.tensors[size_t(t)];
      in.push_back(d.shape);
      constant.push_back(d.role == TensorRole::Constant ||
                         d.role == TensorRole::Parameter);
    }
    onnx_kernels::Primitive p;
    if (!resolvePrimitive(p, g, op, in, g.tensors[size_t(op.results[0])].shape)
             .empty())
      continue;
    if (std::string w = why(p, constant); !w.empty())
      return "op " + op.name + " (" + primitiveInputs(g, op).type + "): " + w;
  }
  return "";
}

/// The first primitive of `g` (at its own batch, g.batch) that computes a
/// sample's result from other samples, as "op NAME (TYPE): why", or "":
/// such a model runs on the whole batch (no dp, one micro-batch).
inline std::string sampleMixingPrimitive(const ModelGraph &g) {
  return firstPrimitiveWhere(
      g, [&](const onnx_kernels::Primitive &p, const std::vector<bool> &c) {
        return primitiveMixesSamples(p, g.batch, c);
      });
}

/// The first primitive of `g` normalising per micro-batch, as "op NAME
/// (TYPE): it normalises with its micro-batch's statistics", or "": the
/// micro-batch size of such a model is part of its function, which plans
/// keep (PlanCommand.cpp) and verify's one-rank reference runs
/// (driver/Driver.h singleRankPlan).
inline std::string microbatchStatisticsPrimitive(const ModelGraph &g) {
  return firstPrimitiveWhere(
      g, [](const onnx_kernels::Primitive &p, const std::vector<bool> &) {
        return normalisesPerMicrobatch(p)
                   ? std::string("it normalises with its micro-batch's "
                                 "statistics")
                   : std::string();
      });
}

} // namespace autoddl
