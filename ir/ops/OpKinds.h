//===- OpKinds.h - the one table of op kinds ------------------*- C++ -*-===//
//
// Internal to autoddl_ops: one row per op kind of the vocabulary (docs/ir.md)
// with everything ir/ops knows of it (operand counts, attributes with their
// types and defaults, shape rule, forward FLOPs, SBP rows, split granule, the
// operand without a gradient). OpSemantics.h and SbpRules.h answer from it;
// the rules themselves live by family (*ShapeRules.cpp, ForwardFlops.cpp,
// SbpRules.cpp). Adding an op kind: one row in OpKinds.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/ops/SbpRules.h"
#include "ir/ops/ShapeRule.h"

#include <optional>
#include <string_view>
#include <vector>

namespace autoddl::ops::detail {

/// One attribute of an op kind: its IR type, and for an optional one its
/// documented default (a value, or the value of another attribute).
struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required = true;
  std::optional<AttrValue> value; // the default of an optional attribute
  std::string_view copyOf;        // or: the default is this attribute's value
};

/// What a FLOP count reads: the op's operands, results and attributes (with
/// the defaults applied).
struct FlopArgs {
  const std::vector<ValueType> &operands;
  const std::vector<ValueType> &results;
  const Attrs &attrs;

  const Shape &x() const { return operand(0); }
  const Shape &operand(size_t i) const {
    static const Shape none;
    return i < operands.size() ? operands[i].shape : none;
  }
  Wide outElems() const {
    return results.empty() ? 1 : product(results[0].shape);
  }
  int64_t operator[](AttrName<int64_t> a) const { return attrAt(attrs, a); }
};

using InferFn = Results (*)(Rule &);
using FlopsFn = Wide (*)(const FlopArgs &);
using SbpFn = std::vector<SbpRule> (*)(const std::vector<Shape> &operands,
                                       const Attrs &attrs);
/// Granule of splits of dimension `dim` of value `valueIndex` (operands, then
/// the result); see sbpSplitGranule.
using GranuleFn = int64_t (*)(const std::vector<Shape> &operands,
                              const Attrs &attrs, unsigned valueIndex,
                              int64_t dim);

struct OpKind {
  std::string_view kind; // the sbp mnemonic
  int minOperands;
  int maxOperands; // -1: variadic
  std::vector<AttrSpec> attrs;
  InferFn infer;
  FlopsFn flops;
  SbpFn sbp;
  GranuleFn granule = nullptr; // nullptr: any split (granule 1)
  int gradientFree = -1;       // the operand without a gradient, or -1
};

/// Every op kind of the vocabulary, in docs/ir.md order (OpKinds.cpp).
const std::vector<OpKind> &opKinds();
/// nullptr if `kind` is not part of the vocabulary.
const OpKind *findOpKind(std::string_view kind);

// ForwardFlops.cpp: one count per kind (docs/ir.md "FLOP conventions").
Wide noFlops(const FlopArgs &); // lookups and data movement
template <int PerElement> Wide flopsPerElement(const FlopArgs &a) {
  return mul(PerElement, a.outElems());
}
Wide linearFlops(const FlopArgs &a);
Wide matmulFlops(const FlopArgs &a);
Wide attentionFlops(const FlopArgs &a);
Wide crossEntropyFlops(const FlopArgs &a);
Wide squaredErrorFlops(const FlopArgs &a);
Wide conv2dFlops(const FlopArgs &a);
Wide pool2dFlops(const FlopArgs &a);
Wide spmmFlops(const FlopArgs &a); // spmm and sddmm
Wide edgeSoftmaxFlops(const FlopArgs &a);
Wide headDotFlops(const FlopArgs &a);
Wide gatAggregateFlops(const FlopArgs &a);
Wide primitiveFlops(const FlopArgs &a); // an ONNX op left unfused

// SbpRules.cpp: the 1-D signatures of each kind.
using Rows = std::vector<SbpRule>;
Rows parameterRows(const std::vector<Shape> &, const Attrs &);
Rows embeddingRows(const std::vector<Shape> &, const Attrs &);
Rows positionalRows(const std::vector<Shape> &, const Attrs &);
Rows rotaryRows(const std::vector<Shape> &, const Attrs &);
Rows linearRows(const std::vector<Shape> &, const Attrs &);
Rows matmulRows(const std::vector<Shape> &, const Attrs &);
Rows biasAddRows(const std::vector<Shape> &, const Attrs &);
Rows addRows(const std::vector<Shape> &, const Attrs &);
Rows mulRows(const std::vector<Shape> &, const Attrs &);
Rows unaryRows(const std::vector<Shape> &, const Attrs &); // gelu, relu, ...
Rows swigluRows(const std::vector<Shape> &, const Attrs &);
Rows normRows(const std::vector<Shape> &, const Attrs &); // layernorm, rmsnorm
Rows softmaxRows(const std::vector<Shape> &, const Attrs &);
Rows attentionRows(const std::vector<Shape> &, const Attrs &);
Rows crossEntropyRows(const std::vector<Shape> &, const Attrs &);
Rows squaredErrorRows(const std::vector<Shape> &, const Attrs &);
Rows conv2dRows(const std::vector<Shape> &, const Attrs &);
Rows pool2dRows(const std::vector<Shape> &, const Attrs &);
Rows flattenRows(const std::vector<Shape> &, const Attrs &);
Rows reshapeRows(const std::vector<Shape> &, const Attrs &);
Rows transposeRows(const std::vector<Shape> &, const Attrs &);
Rows spmmRows(const std::vector<Shape> &, const Attrs &);
Rows sddmmRows(const std::vector<Shape> &, const Attrs &);
Rows edgeSoftmaxRows(const std::vector<Shape> &, const Attrs &);
Rows headDotRows(const std::vector<Shape> &, const Attrs &);
Rows gatAggregateRows(const std::vector<Shape> &, const Attrs &);
int64_t rotaryGranule(const std::vector<Shape> &, const Attrs &, unsigned,
                      int64_t dim);
int64_t attentionGranule(const std::vector<Shape> &, const Attrs &, unsigned,
                         int64_t dim);

} // namespace autoddl::ops::detail
