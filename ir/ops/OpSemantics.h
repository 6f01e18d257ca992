//===- OpSemantics.h - shapes and FLOPs of each op of the vocabulary -----===//
//
// The one place that knows, for every op kind of the sbp vocabulary
// (docs/ir.md), how many operands it takes, which attributes it needs, the
// shapes of its results and its forward FLOPs. Shared by the model importers
// (to infer shapes of explicit graphs), the sbp dialect's verifiers, and the
// cost model.
//
// Plain C++17: no MLIR, no exceptions. Errors come back as messages.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/common/Dims.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace autoddl::ops {

using Shape = Dims;
/// The elements of a shape (no overflow check: for shapes already validated).
inline int64_t numElements(const Shape &s) { return numel(s); }

// Bool is the element type of an imported graph's boolean constants (masks,
// ModelGraph's TensorRole::Constant), never of an input or a parameter.
enum class DType { F32, BF16, F16, I32, I64, Bool };
std::string_view dtypeName(DType t); // "f32", "bf16", ..., "i1"
/// Inverse of dtypeName over the dtypes a model's inputs may have (not Bool).
std::optional<DType> parseDType(std::string_view s);
int64_t dtypeBytes(DType t);

/// Attribute values as the IR spells them: i64, f64, bool, string, i64 array.
/// The dialect maps them to I64Attr, F64Attr, BoolAttr, StrAttr,
/// DenseI64ArrayAttr.
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
  std::string_view kind; // the sbp mnemonic, e.g. "linear"
  int minOperands;
  int maxOperands; // -1: variadic
  int numResults;
  std::vector<std::string_view> requiredAttrs;
  std::vector<std::string_view> optionalAttrs;
};

/// The IR type an attribute must have (docs/ir.md "Attribute types"); the index
/// of the matching AttrValue alternative.
enum class AttrKind { I64, F64, Bool, Str, I64Array };
std::string_view
attrKindName(AttrKind k); // "i64", "f64", "bool", "str", "i64 array"

/// Every op kind of the model vocabulary (collectives excluded), in docs/ir.md
/// order.
const std::vector<OpInfo> &allOps();
/// nullptr if `kind` is not part of the vocabulary.
const OpInfo *lookupOp(std::string_view kind);

/// The type attribute `attr` of op `kind` must have; nullopt when `kind` has no
/// such attribute (required or optional).
std::optional<AttrKind> attrKind(std::string_view kind, std::string_view attr);

/// `attrs` plus every optional attribute of `kind` that is missing, set to its
/// documented default (docs/ir.md), so importers emit fully explicit ops. An
/// optional attribute whose default depends on another one (attention's
/// num_kv_heads = num_heads, pool2d's stride = kernel) is filled from it when
/// that one is present.
Attrs withDefaults(std::string_view kind, const Attrs &attrs);

/// The documented default of attribute `name` of op kind `kind` given the
/// op's attributes `attrs` (for a default that is another attribute's
/// value), or nullopt: a required attribute, one `kind` lacks, or a
/// copied one whose source `attrs` lacks.
std::optional<AttrValue> attrDefault(std::string_view kind,
                                     std::string_view name, const Attrs &attrs);

/// Result of shape inference: either result types or a lower-case message
/// saying what was expected and what was got ("expected rank >= 2 for x, got
/// 1").
struct InferResult {
  std::vector<ValueType> results;
  std::string error;
  bool ok() const { return error.empty(); }
};

/// Infers result types of `kind` from operand types and attributes; checks
/// operand count, required attributes and their types, ranks, and size
/// agreement, that every size is positive, and that element counts and the op's
/// FLOPs fit in int64. Missing optional attributes take their defaults.
/// `parameter` has no operands to infer from: its result is its declared type,
/// so inference reports an error for it.
InferResult inferResultTypes(std::string_view kind,
                             const std::vector<ValueType> &operands,
                             const Attrs &attrs);

/// Forward FLOPs of one application of the op (multiply-add = 2 FLOPs; see
/// docs/ir.md "FLOP conventions"). Assumes the operands already passed
/// inference.
int64_t forwardFlops(std::string_view kind,
                     const std::vector<ValueType> &operands,
                     const std::vector<ValueType> &results, const Attrs &attrs);

} // namespace autoddl::ops
