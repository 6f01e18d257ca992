//===- OpVocabulary.cpp - the op vocabulary and its attributes ------------===//
//
// Names of the element types and attribute kinds, and for each op kind of
// docs/ir.md its operand counts, its attributes with their types, and the
// defaults of the optional ones.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpSemantics.h"
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

namespace {

// ---------------------------------------------------------------------------
// The vocabulary: operand counts, attributes, their types and defaults.
// ---------------------------------------------------------------------------

struct AttrSpec {
  std::string_view op;
  std::string_view name;
  AttrKind kind;
  bool required;
};

// Every attribute of every op, in docs/ir.md order. Defaults of optional
// attributes live in withDefaults().
const AttrSpec kAttrSpecs[] = {
    {"parameter", "name", AttrKind::Str, true},
    {"parameter", "init", AttrKind::Str, true},
    {"parameter", "init_std", AttrKind::F64, false},
    {"rotary", "num_heads", AttrKind::I64, true},
    {"rotary", "head_dim", AttrKind::I64, true},
    {"rotary", "theta", AttrKind::F64, false},
    {"linear", "transpose_weight", AttrKind::Bool, false},
    {"matmul", "transpose_b", AttrKind::Bool, false},
    {"gelu", "approximate", AttrKind::Str, false},
    {"layernorm", "epsilon", AttrKind::F64, false},
    {"rmsnorm", "epsilon", AttrKind::F64, false},
    {"softmax", "axis", AttrKind::I64, false},
    {"attention", "num_heads", AttrKind::I64, true},
    {"attention", "head_dim", AttrKind::I64, true},
    {"attention", "num_kv_heads", AttrKind::I64, false},
    {"attention", "causal", AttrKind::Bool, false},
    {"conv2d", "stride", AttrKind::I64, false},
    {"conv2d", "padding", AttrKind::I64, false},
    {"pool2d", "kind", AttrKind::Str, true},
    {"pool2d", "kernel", AttrKind::I64, true},
    {"pool2d", "stride", AttrKind::I64, false},
    {"flatten", "start_dim", AttrKind::I64, false},
    {"reshape", "shape", AttrKind::I64Array, true},
    {"transpose", "perm", AttrKind::I64Array, true},
    {"spmm", "nnz", AttrKind::I64, true},
    {"spmm", "reduce", AttrKind::Str, false},
    {"sddmm", "nnz", AttrKind::I64, true},
    {"edge_softmax", "nnz", AttrKind::I64, true},
    {"edge_softmax", "scale", AttrKind::F64, false},
    {"gat_aggregate", "nnz", AttrKind::I64, true},
    {"gat_aggregate", "negative_slope", AttrKind::F64, false},
};

OpInfo makeInfo(std::string_view kind, int minOperands, int maxOperands) {
  OpInfo info{kind, minOperands, maxOperands, 1, {}, {}};
  for (const AttrSpec &a : kAttrSpecs)
    if (a.op == kind)
      (a.required ? info.requiredAttrs : info.optionalAttrs).push_back(a.name);
  return info;
}

std::vector<OpInfo> buildOps() {
  std::vector<OpInfo> ops = {
      makeInfo("parameter", 0, 0),     makeInfo("embedding", 2, 2),
      makeInfo("positional", 2, 2),    makeInfo("rotary", 1, 1),
      makeInfo("linear", 2, 3),        makeInfo("matmul", 2, 2),
      makeInfo("bias_add", 2, 2),      makeInfo("add", 2, 2),
      makeInfo("mul", 2, 2),           makeInfo("gelu", 1, 1),
      makeInfo("relu", 1, 1),          makeInfo("silu", 1, 1),
      makeInfo("elu", 1, 1),           makeInfo("swiglu", 2, 2),
      makeInfo("layernorm", 2, 3),     makeInfo("rmsnorm", 2, 2),
      makeInfo("softmax", 1, 1),       makeInfo("attention", 1, 3),
      makeInfo("cross_entropy", 2, 2), makeInfo("conv2d", 2, 3),
      makeInfo("pool2d", 1, 1),        makeInfo("flatten", 1, 1),
      makeInfo("reshape", 1, 1),       makeInfo("transpose", 1, 1),
      makeInfo("spmm", 2, 2),          makeInfo("sddmm", 3, 3),
      makeInfo("edge_softmax", 2, 2),  makeInfo("head_dot", 2, 2),
      makeInfo("gat_aggregate", 4, 4),
  };
  // --loss squared_error's loss (docs/model-format.md "The loss").
  ops.push_back(makeInfo("squared_error", 2, 2));
  return ops;
}

} // namespace

const std::vector<OpInfo> &allOps() {
  static const std::vector<OpInfo> ops = buildOps();
  return ops;
}

const OpInfo *lookupOp(std::string_view kind) {
  for (const OpInfo &info : allOps())
    if (info.kind == kind)
      return &info;
  return nullptr;
}

std::optional<AttrKind> attrKind(std::string_view kind, std::string_view attr) {
  for (const AttrSpec &a : kAttrSpecs)
    if (a.op == kind && a.name == attr)
      return a.kind;
  return std::nullopt;
}

Attrs withDefaults(std::string_view kind, const Attrs &attrs) {
  Attrs out = attrs;
  auto fill = [&](const char *name, AttrValue v) { out.emplace(name, v); };
  auto copyFrom = [&](const char *name, const char *from) {
    auto it = out.find(from);
    if (it != out.end())
      out.emplace(name, it->second);
  };
  if (kind == "parameter")
    fill("init_std", 0.02);
  else if (kind == "rotary")
    fill("theta", 10000.0);
  else if (kind == "linear")
    fill("transpose_weight", true);
  else if (kind == "matmul")
    fill("transpose_b", false);
  else if (kind == "gelu")
    fill("approximate", std::string("none"));
  else if (kind == "layernorm" || kind == "rmsnorm")
    fill("epsilon", 1e-5);
  else if (kind == "softmax")
    fill("axis", int64_t{-1});
  else if (kind == "attention") {
    copyFrom("num_kv_heads", "num_heads");
    fill("causal", false);
  } else if (kind == "conv2d") {
    fill("stride", int64_t{1});
    fill("padding", int64_t{0});
  } else if (kind == "pool2d")
    copyFrom("stride", "kernel");
  else if (kind == "flatten")
    fill("start_dim", int64_t{1});
  else if (kind == "edge_softmax")
    fill("scale", 1.0);
  else if (kind == "gat_aggregate")
    fill("negative_slope", 0.2);
  else if (kind == "spmm")
    fill("reduce", std::string("sum"));
  return out;
}

} // namespace autoddl::ops
