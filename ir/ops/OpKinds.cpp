//===- OpKinds.cpp - the one table of op kinds ----------------------------===//
//
// Names of the element types and attribute kinds, and the table of op kinds
// (OpKinds.h): for each op kind of docs/ir.md its operand counts, its
// attributes with their types and the defaults of the optional ones, and the
// functions of its shape rule, FLOPs and SBP rows. lookupOp, attrKind,
// withDefaults, inferResultTypes, forwardFlops and sbpRules all read it.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpKinds.h"
#include "support/EnumNames.h"

namespace autoddl::ops {

namespace {
constexpr EnumName<DType> kDTypeNames[] = {
    {DType::F32, "f32"}, {DType::BF16, "bf16"}, {DType::F16, "f16"},
    {DType::I32, "i32"}, {DType::I64, "i64"},   {DType::Bool, "i1"}};

constexpr EnumName<AttrKind> kAttrKindNames[] = {
    {AttrKind::I64, "i64"},
    {AttrKind::F64, "f64"},
    {AttrKind::Bool, "bool"},
    {AttrKind::Str, "str"},
    {AttrKind::I64Array, "i64 array"}};
} // namespace

std::string_view dtypeName(DType t) { return nameOf(kDTypeNames, t); }

std::optional<DType> parseDType(std::string_view s) {
  std::optional<DType> t = parseName(kDTypeNames, s);
  if (t == DType::Bool) // a mask, never a model input's type
    return std::nullopt;
  return t;
}

int64_t dtypeBytes(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::I64:
    return 8;
  case DType::Bool:
    return 1;
  }
  return 0;
}

std::string_view attrKindName(AttrKind k) { return nameOf(kAttrKindNames, k); }

namespace detail {

namespace {

Results inferParameter(Rule &r) {
  return r.fail("the result of parameter is its declared type; nothing to "
                "infer"),
         Results{};
}

// The attribute specs of the table's rows: a required attribute, an optional
// one with its documented default (docs/ir.md), or one whose default is
// another attribute's value.
AttrSpec need(std::string_view name, AttrKind kind) {
  return {name, kind, true, std::nullopt, {}};
}
AttrSpec optional(std::string_view name, AttrValue dflt) {
  const auto kind = static_cast<AttrKind>(dflt.index());
  return {name, kind, false, std::move(dflt), {}};
}
AttrSpec optI64(std::string_view name, int64_t v) { return optional(name, v); }
AttrSpec optF64(std::string_view name, double v) { return optional(name, v); }
AttrSpec optBool(std::string_view name, bool v) { return optional(name, v); }
AttrSpec optStr(std::string_view name, const char *v) {
  return optional(name, std::string(v));
}
AttrSpec optCopyOf(std::string_view name, AttrKind kind,
                   std::string_view from) {
  return {name, kind, false, std::nullopt, from};
}

constexpr AttrKind I64 = AttrKind::I64, Str = AttrKind::Str,
                   I64s = AttrKind::I64Array;

std::vector<OpKind> buildKinds() {
  // clang-format off
  // kind, operands (min, max), attributes, shape rule, FLOPs (per element
  // where a count: docs/ir.md "FLOP conventions"), SBP rows; then the split
  // granule and the operand without a gradient where a kind has them.
  return {
      {"parameter", 0, 0,
       {need("name", Str), need("init", Str), optF64("init_std", 0.02)},
       inferParameter, noFlops, parameterRows},
      {"embedding", 2, 2, {}, inferEmbedding, noFlops, embeddingRows, nullptr,
       0 /* integer ids */},
      {"positional", 2, 2, {}, inferPositional, flopsPerElement<1>,
       positionalRows},
      // x·cos + rotate(x)·sin: two multiplies and an add
      {"rotary", 1, 1,
       {need("num_heads", I64), need("head_dim", I64), optF64("theta", 10000.0)},
       inferRotary, flopsPerElement<3>, rotaryRows, rotaryGranule},
      {"linear", 2, 3, {optBool("transpose_weight", true)}, inferLinear,
       linearFlops, linearRows},
      {"matmul", 2, 2, {optBool("transpose_b", false)}, inferMatmul,
       matmulFlops, matmulRows},
      {"bias_add", 2, 2, {}, inferBiasAdd, flopsPerElement<1>, biasAddRows},
      {"add", 2, 2, {}, inferBinary, flopsPerElement<1>, addRows},
      {"mul", 2, 2, {}, inferBinary, flopsPerElement<1>, mulRows},
      // tanh form: x³, two multiply-adds, tanh, add, two multiplies ≈ 8; the
      // erf form is counted the same
      {"gelu", 1, 1, {optStr("approximate", "none")}, inferGelu,
       flopsPerElement<8>, unaryRows},
      {"relu", 1, 1, {}, inferUnary, flopsPerElement<1>, unaryRows},
      // exp, add, divide, multiply
      {"silu", 1, 1, {}, inferUnary, flopsPerElement<4>, unaryRows},
      {"elu", 1, 1, {}, inferUnary, flopsPerElement<1>, unaryRows},
      // silu(gate) (4) and the product with up (1)
      {"swiglu", 2, 2, {}, inferSwiglu, flopsPerElement<5>, swigluRows},
      // mean (1), variance (3), normalise (2), affine (2)
      {"layernorm", 2, 3, {optF64("epsilon", 1e-5)}, inferNorm,
       flopsPerElement<8>, normRows},
      // square-sum (2), scale (1), gamma (1)
      {"rmsnorm", 2, 2, {optF64("epsilon", 1e-5)}, inferNorm,
       flopsPerElement<4>, normRows},
      // max, subtract, exp, sum, divide
      {"softmax", 1, 1, {optI64("axis", -1)}, inferSoftmax, flopsPerElement<5>,
       softmaxRows},
      {"attention", 1, 3,
       {need("num_heads", I64), need("head_dim", I64),
        optCopyOf("num_kv_heads", I64, "num_heads"), optBool("causal", false)},
       inferAttention, attentionFlops, attentionRows, attentionGranule},
      {"cross_entropy", 2, 2, {}, inferCrossEntropy, crossEntropyFlops,
       crossEntropyRows, nullptr, 1 /* integer targets */},
      {"conv2d", 2, 3, {optI64("stride", 1), optI64("padding", 0)},
       inferConv2d, conv2dFlops, conv2dRows},
      {"pool2d", 1, 1,
       {need("kind", Str), need("kernel", I64),
        optCopyOf("stride", I64, "kernel")},
       inferPool2d, pool2dFlops, pool2dRows},
      {"flatten", 1, 1, {optI64("start_dim", 1)}, inferFlatten, noFlops,
       flattenRows},
      {"reshape", 1, 1, {need("shape", I64s)}, inferReshape, noFlops,
       reshapeRows},
      {"transpose", 1, 1, {need("perm", I64s)}, inferTranspose, noFlops,
       transposeRows},
      {"spmm", 2, 2, {need("nnz", I64), optStr("reduce", "sum")}, inferSpmm,
       spmmFlops, spmmRows},
      {"sddmm", 3, 3, {need("nnz", I64)}, inferSddmm, spmmFlops, sddmmRows},
      {"edge_softmax", 2, 2, {need("nnz", I64), optF64("scale", 1.0)},
       inferEdgeSoftmax, edgeSoftmaxFlops, edgeSoftmaxRows},
      {"head_dot", 2, 2, {}, inferHeadDot, headDotFlops, headDotRows},
      {"gat_aggregate", 4, 4,
       {need("nnz", I64), optF64("negative_slope", 0.2)},
       inferGatAggregate, gatAggregateFlops, gatAggregateRows},
      // --loss squared_error's loss (docs/model-format.md "The loss").
      {"squared_error", 2, 2, {}, inferSquaredError, squaredErrorFlops,
       squaredErrorRows, nullptr, 1 /* integer targets */},
  };
  // clang-format on
}

} // namespace

const std::vector<OpKind> &opKinds() {
  static const std::vector<OpKind> kinds = buildKinds();
  return kinds;
}

const OpKind *findOpKind(std::string_view kind) {
  for (const OpKind &k : opKinds())
    if (k.kind == kind)
      return &k;
  return nullptr;
}

} // namespace detail

namespace {

std::vector<OpInfo> buildOps() {
  std::vector<OpInfo> ops;
  for (const detail::OpKind &k : detail::opKinds()) {
    OpInfo info{k.kind, k.minOperands, k.maxOperands, 1, {}, {}};
    for (const detail::AttrSpec &a : k.attrs)
      (a.required ? info.requiredAttrs : info.optionalAttrs).push_back(a.name);
    ops.push_back(std::move(info));
  }
  return ops;
}

} // namespace

const std::vector<OpInfo> &allOps() {
  static const std::vector<OpInfo> ops = buildOps();
  return ops;
}

// allOps() holds one OpInfo per op kind, in opKinds()'s order.
const OpInfo *lookupOp(std::string_view kind) {
  const detail::OpKind *k = detail::findOpKind(kind);
  return k ? &allOps()[k - detail::opKinds().data()] : nullptr;
}

std::optional<AttrKind> attrKind(std::string_view kind, std::string_view attr) {
  if (const detail::OpKind *k = detail::findOpKind(kind))
    for (const detail::AttrSpec &a : k->attrs)
      if (a.name == attr)
        return a.kind;
  return std::nullopt;
}

namespace {
std::optional<AttrValue> defaultOf(const detail::AttrSpec &a,
                                   const Attrs &attrs) {
  if (a.value || a.copyOf.empty())
    return a.value;
  auto from = attrs.find(std::string(a.copyOf));
  return from == attrs.end() ? std::nullopt
                             : std::optional<AttrValue>(from->second);
}
} // namespace

Attrs withDefaults(std::string_view kind, const Attrs &attrs) {
  Attrs out = attrs;
  if (const detail::OpKind *k = detail::findOpKind(kind))
    for (const detail::AttrSpec &a : k->attrs)
      if (std::optional<AttrValue> d = defaultOf(a, out))
        out.emplace(std::string(a.name), std::move(*d));
  return out;
}

std::optional<AttrValue>
attrDefault(std::string_view kind, std::string_view name, const Attrs &attrs) {
  if (const detail::OpKind *k = detail::findOpKind(kind))
    for (const detail::AttrSpec &a : k->attrs)
      if (a.name == name)
        return defaultOf(a, attrs);
  return std::nullopt;
}

} // namespace autoddl::ops
