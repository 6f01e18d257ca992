//===- OpAttrs.h - the typed accessor of op attributes --------*- C++ -*-===//
//
// Every attribute of the vocabulary (docs/ir.md "Attribute types") named once,
// with the type its value has in every op kind that takes it, and the one
// accessor that reads an op's attributes. The names' types agree with the table
// of op kinds (ir/ops/OpKinds.cpp; OpSemanticsTest checks every row).
// An ONNX primitive's own attributes (any name) are read through the untyped
// overloads.
//
// Plain C++17 like OpSemantics.h: no MLIR, no exceptions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/ops/OpSemantics.h"

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace autoddl::ops {

/// An attribute's name together with the C++ type of its value (one of
/// AttrValue's alternatives).
template <typename T> struct AttrName { std::string_view name; };

namespace attr {
using I64s = std::vector<int64_t>;
// parameter
inline constexpr AttrName<std::string> kName{"name"}, kInit{"init"};
inline constexpr AttrName<double> kInitStd{"init_std"};
// rotary, attention
inline constexpr AttrName<int64_t> kNumHeads{"num_heads"}, kHeadDim{"head_dim"},
    kNumKvHeads{"num_kv_heads"};
inline constexpr AttrName<double> kTheta{"theta"};
inline constexpr AttrName<bool> kCausal{"causal"};
// linear, matmul
inline constexpr AttrName<bool> kTransposeWeight{"transpose_weight"},
    kTransposeB{"transpose_b"};
// gelu, layernorm / rmsnorm, softmax
inline constexpr AttrName<std::string> kApproximate{"approximate"};
inline constexpr AttrName<double> kEpsilon{"epsilon"};
inline constexpr AttrName<int64_t> kAxis{"axis"};
// conv2d, pool2d, flatten, reshape, transpose
inline constexpr AttrName<int64_t> kStride{"stride"}, kPadding{"padding"},
    kKernel{"kernel"}, kStartDim{"start_dim"};
inline constexpr AttrName<std::string> kPoolKind{"kind"};
inline constexpr AttrName<I64s> kShape{"shape"}, kPerm{"perm"};
// spmm, sddmm, edge_softmax, gat_aggregate
inline constexpr AttrName<int64_t> kNnz{"nnz"};
inline constexpr AttrName<std::string> kReduce{"reduce"};
inline constexpr AttrName<double> kScale{"scale"},
    kNegativeSlope{"negative_slope"};
// primitive: the ONNX op type (its ONNX attributes follow under their names)
inline constexpr AttrName<std::string> kOpType{"op_type"};
} // namespace attr

/// The value of attribute `name` when `attrs` has it with a T, else nullptr.
template <typename T>
const T *findAttr(const Attrs &attrs, std::string_view name) {
  auto it = attrs.find(std::string(name));
  return it == attrs.end() ? nullptr : std::get_if<T>(&it->second);
}
template <typename T> const T *findAttr(const Attrs &attrs, AttrName<T> a) {
  return findAttr<T>(attrs, a.name);
}
template <typename T> T *findAttr(Attrs &attrs, AttrName<T> a) {
  auto it = attrs.find(std::string(a.name));
  return it == attrs.end() ? nullptr : std::get_if<T>(&it->second);
}

/// The value of attribute `name` when `attrs` has it with a T, else `dflt`.
template <typename T>
T attrOr(const Attrs &attrs, std::string_view name,
         const std::common_type_t<T> &dflt) {
  const T *v = findAttr<T>(attrs, name);
  return v ? *v : dflt;
}
template <typename T>
T attrOr(const Attrs &attrs, AttrName<T> a, const std::common_type_t<T> &dflt) {
  return attrOr<T>(attrs, a.name, dflt);
}

/// Attribute `a` of an op of kind `kind`: its own value, else its documented
/// default (attrDefault, the table of op kinds); T{} where it has neither (a
/// required attribute the op lacks, which inference refuses) or a value of
/// another type.
template <typename T>
T attrOf(std::string_view kind, const Attrs &attrs, AttrName<T> a) {
  if (const T *v = findAttr(attrs, a))
    return *v;
  const std::optional<AttrValue> d = attrDefault(kind, a.name, attrs);
  const T *v = d ? std::get_if<T>(&*d) : nullptr;
  return v ? *v : T{};
}

/// The value of attribute `a`, which `attrs` has (an op that passed
/// inferResultTypes, with withDefaults applied).
template <typename T>
const T &attrAt(const Attrs &attrs, std::string_view name) {
  return std::get<T>(attrs.at(std::string(name)));
}
template <typename T> const T &attrAt(const Attrs &attrs, AttrName<T> a) {
  return attrAt<T>(attrs, a.name);
}

} // namespace autoddl::ops
