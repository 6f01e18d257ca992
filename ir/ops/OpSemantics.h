//===- OpSemantics.h - shapes and FLOPs of each op of the vocabulary -----===//
//
// The one place that knows, for every op kind of the sbp vocabulary (docs/ir.md),
// how many operands it takes, which attributes it needs, the shapes of its results
// and its forward FLOPs. Shared by the model importers (to infer shapes of explicit
// graphs), the sbp dialect's verifiers, and the cost model.
//
// Plain C++17: no MLIR, no exceptions. Errors come back as messages.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace autoddl::ops {

using Shape = std::vector<int64_t>;

enum class DType { F32, BF16, F16, I32, I64 };
std::string_view dtypeName(DType t);                   // "f32", "bf16", ...
std::optional<DType> parseDType(std::string_view s);   // inverse of dtypeName
int64_t dtypeBytes(DType t);

/// Attribute values as the IR spells them: i64, f64, bool, string, i64 array.
/// The dialect maps them to I64Attr, F64Attr, BoolAttr, StrAttr, DenseI64ArrayAttr.
using AttrValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;
using Attrs = std::map<std::string, AttrValue>;

/// A value as an op sees it: shape and element type.
struct ValueType {
  Shape shape;
  DType dtype = DType::F32;
};

/// Static facts about an op kind.
struct OpInfo {
  std::string_view kind;    // the sbp mnemonic, e.g. "linear"
  int minOperands;
  int maxOperands;          // -1: variadic
  int numResults;
  std::vector<std::string_view> requiredAttrs;
  std::vector<std::string_view> optionalAttrs;
};

/// Every op kind of the model vocabulary (collectives excluded), in docs/ir.md order.
const std::vector<OpInfo> &allOps();
/// nullptr if `kind` is not part of the vocabulary.
const OpInfo *lookupOp(std::string_view kind);

/// Result of shape inference: either result types or a lower-case message saying
/// what was expected and what was got ("expected rank >= 2 for x, got 1").
struct InferResult {
  std::vector<ValueType> results;
  std::string error;
  bool ok() const { return error.empty(); }
};

/// Infers result types of `kind` from operand types and attributes; checks operand
/// count, required attributes and their types, ranks, and size agreement.
InferResult inferResultTypes(std::string_view kind,
                             const std::vector<ValueType> &operands,
                             const Attrs &attrs);

/// Forward FLOPs of one application of the op (multiply-add = 2 FLOPs; see
/// docs/ir.md "FLOP conventions"). Assumes the operands already passed inference.
int64_t forwardFlops(std::string_view kind,
                     const std::vector<ValueType> &operands,
                     const std::vector<ValueType> &results, const Attrs &attrs);

} // namespace autoddl::ops
