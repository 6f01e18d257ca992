//===- ModelGraph.h - the importers' output: a typed op graph ------------===//
//
// What every model front end (JSON op graph, templates, Hugging Face
// config.json) produces, before lowering to the sbp dialect
// (ir/lower/LowerToSbp.h). Plain C++: no MLIR. Ops are listed in topological
// order and use the op kinds and attribute names of docs/ir.md, so lowering is
// a mechanical one-op-to-one-op translation.
//
// An imported (ONNX) graph may also hold what the vocabulary lacks: constant
// buffers (TensorRole::Constant) and ops of kind "primitive" (an ONNX operator
// by name). fuseImportedGraph (ir/lower/FuseImported.h) turns those into model
// ops or refuses the model, so the planner and codegen never see either.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/ops/OpAttrs.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace autoddl {

enum class TensorRole {
  Input,      // data fed per step: token ids, targets, features, adjacency
  Parameter,  // trainable; carries its framework name (e.g. Hugging Face's)
  Activation, // produced by an op
  Constant    // a buffer with `values` (scalar, mask, table, shape): read by
              // primitives, never trained, never a parameter
};

struct TensorDef {
  std::string name; // parameters: the real model's name, e.g.
                    // "transformer.h.0.attn.c_attn.weight"
  ops::Shape shape;
  ops::DType dtype = ops::DType::F32;
  TensorRole role = TensorRole::Activation;
  // Parameters only: how to initialise ("normal", "zeros", "ones") and the std
  // of "normal".
  std::string init;
  double initStd = 0.0;
  // Inputs only: "sparse" for an adjacency given as a sparse matrix with `nnz`
  // stored entries.
  bool sparse = false;
  int64_t nnz = 0;
  // Constants only: the elements, row-major, as many as the shape's product;
  // dtype F32, I32, I64 (exact to 2^53; ±2^63, e.g. a Slice's INT64_MAX "to
  // the end", saturates to the int64 limit) or Bool (0/1).
  std::vector<double> values;
  // Constants only: a module buffer (a BatchNormalization's running mean or
  // var, PyTorch's register_buffer) rather than a value of the model: the
  // program updates it and checkpoints it under `name`; `values` is its
  // start. Never trained, never counted as a parameter.
  bool buffer = false;
};

// kind "primitive": an ONNX operator outside the vocabulary (sbp.primitive).
// attrs["op_type"] is its ONNX op type ("Erf"); its ONNX attributes follow as
// further attrs (int -> int64_t, float -> double, ints -> vector<int64_t>,
// string -> string); operands in ONNX order (Constant tensors allowed); one
// result, whose type the front end gives (no shape rule exists for it).
struct OpDef {
  std::string kind; // sbp mnemonic, e.g. "layernorm", or "primitive"
  std::string name; // unique, e.g. "h.3.attn.qkv"; becomes the op's location
  std::vector<int> operands; // indices into ModelGraph::tensors
  std::vector<int> results;  // indices into ModelGraph::tensors
  ops::Attrs attrs;
  int layer = -1; // repeated-block index (transformer layer, conv block); -1
                  // outside blocks
  // The node's index in the source file's graph (ONNX), named in messages
  // about the op; -1: its index in ModelGraph::ops is named instead.
  int position = -1;
};

/// Attribute `a` of `op` when it holds its type, else `dflt` (ops::attrOr).
template <typename T>
T attrOr(const OpDef &op, ops::AttrName<T> a,
         const std::common_type_t<T> &dflt) {
  return ops::attrOr(op.attrs, a, dflt);
}
/// The op's kind as a program's --profile and a plan's op_kinds_s name it:
/// its kind, an ONNX primitive by its op type ("primitive:MaxPool").
inline std::string profileKind(const OpDef &op) {
  return op.kind == "primitive"
             ? "primitive:" + attrOr(op, ops::attr::kOpType, "")
             : op.kind;
}
/// Attribute `a` of `op`, else its documented default (ops::attrOf): for
/// the optional attributes of the vocabulary.
template <typename T> T attrOf(const OpDef &op, ops::AttrName<T> a) {
  return ops::attrOf(op.kind, op.attrs, a);
}

/// Whether `family` is a whole-graph template (gcn, gat, transformer_conv,
/// sage): fixed shapes, dp splits the nodes.
inline bool graphTemplateFamily(std::string_view family) {
  return family == "gcn" || family == "gat" || family == "transformer_conv" ||
         family == "sage";
}

struct ModelGraph {
  std::string name;   // e.g. "gpt2", "llama-2-7b", or the file's stem
  std::string family; // "gpt", "llama", "bert", "mlp", "vgg", "gcn", "gat",
                      // "transformer_conv", "sage", "graph"
  std::vector<TensorDef> tensors;
  std::vector<OpDef> ops; // topological order
  int loss = -1;          // tensor index of the scalar loss
  int64_t numLayers = 0;  // repeated blocks (see docs/model-format.md "layers")
  int64_t batch = 1;      // samples per micro-batch the shapes were built for
  int64_t seq = 0;        // sequence length (0 for non-sequence models)
  // An ONNX export with a static batch (no dynamic batch axis): the samples
  // its shapes hold, which are every plan's micro-batch (plans accumulate
  // and data-parallelise whole instances), and the input that fixes it; 0
  // and "" when the batch scales.
  int64_t staticBatch = 0;
  std::string staticBatchInput;
  // The Hugging Face config.json text the model was read from ("" for
  // templates, graphs and ONNX): generated programs save it beside their
  // checkpoints.
  std::string hfConfig;
  // Parameters that share storage are one tensor used twice (tied embeddings),
  // so each parameter is counted once.

  /// Elements of the Parameter tensors (constants and inputs are not counted).
  int64_t parameterCount() const;
  /// The sparse input whose stored entries tensor t holds values at: t itself
  /// for a sparse input, the mask's pattern for a sparse activation (the
  /// result of sddmm or edge_softmax); -1 for a dense tensor.
  int sparsePattern(int t) const;
  /// Elements tensor t holds: nnz for a sparse tensor, else its shape's
  /// product.
  double storedElements(int t) const;
  /// A graph model's node count: the rows of its sparse input (adjacency), 0
  /// for a model without one. Data parallelism splits these nodes.
  int64_t graphNodes() const;
  /// Whether tensor t has one row per node of a graph model (features, the
  /// activations computed from them, the adjacency and its sparse
  /// activations, the labels): the rows a dp rank owns. Parameters never do.
  bool nodeRows(int t) const;
  /// The types of these tensors, in order (an op's operands or results).
  std::vector<ops::ValueType> valueTypes(const std::vector<int> &ts) const;
  /// ops::forwardFlops of one op of this graph.
  int64_t opForwardFlops(const OpDef &op) const;
  /// Sum of opForwardFlops over ops, divided by `batch`.
  int64_t forwardFlopsPerSample() const;
  /// The vocabulary of a token model: the rows of its first embedding table;
  /// 0 without one.
  int64_t vocabularyRows() const;
};

/// Per tensor, the ops reading it, once per operand slot, in op order.
std::vector<std::vector<size_t>> tensorReaders(const ModelGraph &g);

/// Whether `op` is an lm_head that reads its table by rows and whose logits
/// only the loss reads: a bias-free linear with a transposed weight [V, C]
/// whose result goes only to cross-entropies as their logits, which can leave
/// a padded vocabulary's columns out (`readers`: tensorReaders).
bool logitsOnlyToLoss(const ModelGraph &g,
                      const std::vector<std::vector<size_t>> &readers,
                      const OpDef &op);

} // namespace autoddl
