//===- OnnxPrimitives.h - ONNX nodes kept as primitive ops (internal) ----===//
//
// A node outside the vocabulary of docs/ir.md that reads an activation (an
// export's decomposed RMSNorm, rotary embedding, SiLU, grouped-query head
// expansion) becomes an OpDef of kind "primitive" carrying its ONNX op type
// and attributes, for the fusion passes (ir/lower/FuseImported.h) to
// recognise. Its result's shape and element type follow the ONNX spec here.
// Errors throw std::invalid_argument; the reader names the node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"
#include "ir/import/OnnxConstants.h"
#include "ir/ops/OpSemantics.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <vector>

namespace autoddl::import {

/// One input of a primitive: its static shape and ONNX element type, and its
/// values when it is a constant (null for an activation or a weight).
struct PrimitiveInput {
  std::vector<int64_t> shape;
  int32_t type = onnx::TensorProto::FLOAT;
  const HostTensor *value = nullptr;
};

struct PrimitiveResult {
  std::vector<int64_t> shape;
  int32_t type = onnx::TensorProto::FLOAT;
};

/// Whether inferPrimitive has a shape rule for op `op`.
bool isPrimitiveOp(const std::string &op);

/// The shape and element type of node n's first output (ONNX semantics).
PrimitiveResult inferPrimitive(const onnx::NodeProto &n,
                               const std::vector<PrimitiveInput> &in);

/// The node's attributes as IR attributes (int -> int64, float -> double,
/// ints -> int64 array, string -> string), plus "op_type". Float lists,
/// tensors and graphs are refused.
ops::Attrs primitiveAttrs(const onnx::NodeProto &n);

/// The IR element type holding an ONNX one: float32 as f32, float16 and
/// bfloat16 as theirs, int64 as i64, other integers and bool as i32.
ops::DType irType(int32_t onnxType);

/// The ONNX element type of an IR one (i32 as INT32).
int32_t onnxType(ops::DType t);

/// Gives each op the transformer layer it belongs to: an op reading a
/// parameter named "...layers.N..." or "...h.N..." (Hugging Face's module
/// paths) is in layer N, one reading another parameter in none; an op
/// without parameters is in the first layer of the ops reading its result.
/// `scoped` (op index, layer; -1: outside every layer) places ops first, by
/// the exporter's name scopes, over their parameters' names.
/// Returns the number of layers (the largest index + 1).
int64_t
assignLayers(ModelGraph &g,
             const std::vector<std::pair<size_t, int64_t>> &scoped = {});

} // namespace autoddl::import
