//===- ShapeRule.h - what the shape rules of ir/ops share -----------------===//
//
// Internal to autoddl_ops: the checked size arithmetic, the Rule each shape
// rule reads its operands and attributes through, and the rules themselves
// (one function per op kind, by family: DenseShapeRules.cpp,
// ImageShapeRules.cpp, SparseShapeRules.cpp), which the table of op kinds
// names (OpKinds.cpp). Consumers include ir/ops/OpSemantics.h instead.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/ops/OpAttrs.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

namespace autoddl::ops::detail {

// ---------------------------------------------------------------------------
// Checked size arithmetic. Products are formed in __int128 and compared with
// INT64_MAX, so no intermediate overflows.
// ---------------------------------------------------------------------------

using Wide = __int128;
inline constexpr Wide kInt64Max = INT64_MAX;

// Saturating product: callers only compare results with INT64_MAX, so anything
// beyond it is kept at INT64_MAX + 1. Factors are at most INT64_MAX + 1, so
// each step stays far inside __int128.
inline Wide mul(Wide a, Wide b) {
  Wide p = a * b;
  return p > kInt64Max ? kInt64Max + 1 : p;
}
template <typename... Rest> Wide mul(Wide a, Wide b, Rest... rest) {
  return mul(mul(a, b), rest...);
}

inline Wide product(const Shape &s, size_t from = 0, size_t to = SIZE_MAX) {
  Wide p = 1;
  to = std::min(to, s.size());
  for (size_t i = from; i < to; ++i)
    p = mul(p, s[i]);
  return p;
}

inline std::string shapeStr(const Shape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

inline std::string typeStr(const ValueType &v) {
  return shapeStr(v.shape) + " " + std::string(dtypeName(v.dtype));
}

inline bool isFloat(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}
inline bool isInt(DType t) { return t == DType::I32 || t == DType::I64; }

// What one rule reads and writes: operands and attributes in, result types or
// an error out. Lookups of attributes go through the defaults, so rules see
// optional attributes as if they were given.
class Rule {
public:
  Rule(const std::vector<ValueType> &operands, const Attrs &attrs)
      : operands(operands), attrs(attrs) {}

  const std::vector<ValueType> &operands;
  const Attrs &attrs;
  std::string error;

  bool fail(std::string msg) {
    if (error.empty())
      error = std::move(msg);
    return false;
  }

  int64_t i64(std::string_view name) const {
    return attrAt<int64_t>(attrs, name);
  }
  double f64(std::string_view name) const {
    return attrAt<double>(attrs, name);
  }
  bool flag(std::string_view name) const { return attrAt<bool>(attrs, name); }
  const std::string &str(std::string_view name) const {
    return attrAt<std::string>(attrs, name);
  }
  const std::vector<int64_t> &i64s(std::string_view name) const {
    return attrAt<std::vector<int64_t>>(attrs, name);
  }

  bool rankAtLeast(int idx, const char *what, size_t r) {
    if (operands[idx].shape.size() < r)
      return fail("expected rank >= " + std::to_string(r) + " for " + what +
                  ", got " + std::to_string(operands[idx].shape.size()));
    return true;
  }
  bool rankIs(int idx, const char *what, size_t r) {
    if (operands[idx].shape.size() != r)
      return fail("expected rank " + std::to_string(r) + " for " + what +
                  ", got " + std::to_string(operands[idx].shape.size()) + " (" +
                  shapeStr(operands[idx].shape) + ")");
    return true;
  }
  bool floating(int idx, const char *what) {
    if (!isFloat(operands[idx].dtype))
      return fail(std::string("expected a floating-point ") + what + ", got " +
                  std::string(dtypeName(operands[idx].dtype)));
    return true;
  }
  bool integer(int idx, const char *what) {
    if (!isInt(operands[idx].dtype))
      return fail(std::string("expected integer ") + what +
                  " (i32 or i64), got " +
                  std::string(dtypeName(operands[idx].dtype)));
    return true;
  }
  bool dimEq(const char *what, int64_t got, int64_t want) {
    if (got != want)
      return fail(std::string("expected ") + what + " to be " +
                  std::to_string(want) + ", got " + std::to_string(got));
    return true;
  }
  bool sameType(int a, const char *an, int b, const char *bn) {
    if (operands[a].shape != operands[b].shape ||
        operands[a].dtype != operands[b].dtype)
      return fail(std::string("expected ") + an + " and " + bn +
                  " of one type, got " + typeStr(operands[a]) + " and " +
                  typeStr(operands[b]));
    return true;
  }
  bool positiveAttr(std::string_view name) {
    if (i64(name) <= 0)
      return fail("expected attribute '" + std::string(name) +
                  "' to be positive, got " + std::to_string(i64(name)));
    return true;
  }
};

// Each rule returns the result types (empty on error, with rule.error set).
using Results = std::vector<ValueType>;

// DenseShapeRules.cpp
Results inferEmbedding(Rule &r);
Results inferPositional(Rule &r);
Results inferRotary(Rule &r);
Results inferLinear(Rule &r);
Results inferMatmul(Rule &r);
Results inferBiasAdd(Rule &r);
Results inferBinary(Rule &r); // add, mul
Results inferUnary(Rule &r);  // relu, silu
Results inferGelu(Rule &r);
Results inferSwiglu(Rule &r);
Results inferNorm(Rule &r); // layernorm, rmsnorm
Results inferSoftmax(Rule &r);
Results inferAttention(Rule &r);
Results inferCrossEntropy(Rule &r);
Results inferSquaredError(Rule &r);

// ImageShapeRules.cpp
Results inferConv2d(Rule &r);
Results inferPool2d(Rule &r);
Results inferFlatten(Rule &r);
Results inferReshape(Rule &r);
Results inferTranspose(Rule &r);

// SparseShapeRules.cpp
Results inferSpmm(Rule &r);
Results inferSddmm(Rule &r);
Results inferEdgeSoftmax(Rule &r);
Results inferHeadDot(Rule &r);
Results inferGatAggregate(Rule &r);

/// Forward FLOPs in __int128 (ForwardFlops.cpp), so that inference can refuse
/// ops whose count does not fit in int64 instead of wrapping.
Wide wideFlops(std::string_view kind, const std::vector<ValueType> &operands,
               const std::vector<ValueType> &results, const Attrs &a);

} // namespace autoddl::ops::detail
