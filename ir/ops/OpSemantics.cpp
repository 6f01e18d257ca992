//===- OpSemantics.cpp - shapes and FLOPs of each op of the vocabulary ---===//
//
// One rule per op kind of docs/ir.md. Each rule checks its operands and
// attributes, infers the result type, and counts forward FLOPs with the
// conventions of docs/ir.md ("FLOP conventions"): a multiply-add is 2 FLOPs;
// elementwise and normalisation ops count the per-element constant written
// beside their rule.
//
// Built without exceptions (the MLIR dialect links it): errors are returned as
// lower-case messages, arithmetic on sizes is checked for int64 overflow.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpSemantics.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>

namespace autoddl::ops {

std::string_view dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::Bool:
    return "i1";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view s) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64})
    if (dtypeName(t) == s)
      return t;
  return std::nullopt;
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

std::string_view attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::I64:
    return "i64";
  case AttrKind::F64:
    return "f64";
  case AttrKind::Bool:
    return "bool";
  case AttrKind::Str:
    return "str";
  case AttrKind::I64Array:
    return "i64 array";
  }
  return "?";
}

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
    {"sddmm", "nnz", AttrKind::I64, true},
    {"edge_softmax", "nnz", AttrKind::I64, true},
    {"edge_softmax", "scale", AttrKind::F64, false},
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
      makeInfo("parameter", 0, 0),  makeInfo("embedding", 2, 2),
      makeInfo("positional", 2, 2), makeInfo("rotary", 1, 1),
      makeInfo("linear", 2, 3),     makeInfo("matmul", 2, 2),
      makeInfo("bias_add", 2, 2),   makeInfo("add", 2, 2),
      makeInfo("mul", 2, 2),        makeInfo("gelu", 1, 1),
      makeInfo("relu", 1, 1),       makeInfo("silu", 1, 1),
      makeInfo("swiglu", 2, 2),     makeInfo("layernorm", 2, 3),
      makeInfo("rmsnorm", 2, 2),    makeInfo("softmax", 1, 1),
      makeInfo("attention", 1, 3),  makeInfo("cross_entropy", 2, 2),
      makeInfo("conv2d", 2, 3),     makeInfo("pool2d", 1, 1),
      makeInfo("flatten", 1, 1),    makeInfo("reshape", 1, 1),
      makeInfo("transpose", 1, 1),  makeInfo("spmm", 2, 2),
      makeInfo("sddmm", 3, 3),      makeInfo("edge_softmax", 2, 2),
  };
  // --loss squared_error's loss (docs/model-format.md "The loss").
  ops.push_back(makeInfo("squared_error", 2, 2));
  return ops;
}

// ---------------------------------------------------------------------------
// Checked size arithmetic. Products are formed in __int128 and compared with
// INT64_MAX, so no intermediate overflows.
// ---------------------------------------------------------------------------

using Wide = __int128;
constexpr Wide kInt64Max = INT64_MAX;

// Saturating product: callers only compare results with INT64_MAX, so anything
// beyond it is kept at INT64_MAX + 1. Factors are at most INT64_MAX + 1, so
// each step stays far inside __int128.
Wide mul(Wide a, Wide b) {
  Wide p = a * b;
  return p > kInt64Max ? kInt64Max + 1 : p;
}
template <typename... Rest> Wide mul(Wide a, Wide b, Rest... rest) {
  return mul(mul(a, b), rest...);
}

Wide product(const Shape &s, size_t from = 0, size_t to = SIZE_MAX) {
  Wide p = 1;
  to = std::min(to, s.size());
  for (size_t i = from; i < to; ++i)
    p = mul(p, s[i]);
  return p;
}

std::string shapeStr(const Shape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::string typeStr(const ValueType &v) {
  return shapeStr(v.shape) + " " + std::string(dtypeName(v.dtype));
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}
bool isInt(DType t) { return t == DType::I32 || t == DType::I64; }

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
    return std::get<int64_t>(attrs.at(std::string(name)));
  }
  double f64(std::string_view name) const {
    return std::get<double>(attrs.at(std::string(name)));
  }
  bool flag(std::string_view name) const {
    return std::get<bool>(attrs.at(std::string(name)));
  }
  const std::string &str(std::string_view name) const {
    return std::get<std::string>(attrs.at(std::string(name)));
  }
  const std::vector<int64_t> &i64s(std::string_view name) const {
    return std::get<std::vector<int64_t>>(attrs.at(std::string(name)));
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

int64_t last(const Shape &s) { return s.back(); }

Shape withLast(Shape s, int64_t v) {
  s.back() = v;
  return s;
}

// Each rule returns the result types (empty on error, with rule.error set).
using Results = std::vector<ValueType>;

Results inferEmbedding(Rule &r) {
  const auto &ids = r.operands[0], &table = r.operands[1];
  if (!r.rankAtLeast(0, "ids", 1) || !r.integer(0, "ids") ||
      !r.rankIs(1, "table", 2) || !r.floating(1, "table"))
    return {};
  Shape out = ids.shape;
  out.push_back(table.shape[1]);
  return {{out, table.dtype}};
}

Results inferPositional(Rule &r) {
  const auto &x = r.operands[0], &table = r.operands[1];
  if (!r.rankAtLeast(0, "x", 2) || !r.floating(0, "x") ||
      !r.rankIs(1, "table", 2) || !r.floating(1, "table"))
    return {};
  int64_t t = x.shape[x.shape.size() - 2];
  if (table.shape[0] < t)
    return r.fail("expected positions table to hold at least " +
                  std::to_string(t) + " positions (the sequence length), got " +
                  std::to_string(table.shape[0])),
           Results{};
  if (!r.dimEq("table width", table.shape[1], last(x.shape)))
    return {};
  return {x};
}

Results inferRotary(Rule &r) {
  const auto &x = r.operands[0];
  if (!r.rankAtLeast(0, "x", 2) || !r.floating(0, "x") ||
      !r.positiveAttr("num_heads") || !r.positiveAttr("head_dim"))
    return {};
  if (r.i64("head_dim") % 2 != 0)
    return r.fail("expected an even head_dim for rotary, got " +
                  std::to_string(r.i64("head_dim"))),
           Results{};
  if (!(r.f64("theta") > 0))
    return r.fail("expected a positive theta, got " +
                  std::to_string(r.f64("theta"))),
           Results{};
  if ((Wide)r.i64("num_heads") * r.i64("head_dim") != last(x.shape))
    return r.fail("expected last dim of x to be num_heads*head_dim = " +
                  std::to_string(
                      (int64_t)((Wide)r.i64("num_heads") * r.i64("head_dim"))) +
                  ", got " + std::to_string(last(x.shape))),
           Results{};
  return {x};
}

Results inferLinear(Rule &r) {
  const auto &x = r.operands[0], &w = r.operands[1];
  if (!r.rankAtLeast(0, "x", 1) || !r.floating(0, "x") ||
      !r.rankIs(1, "weight", 2) || !r.floating(1, "weight"))
    return {};
  bool t = r.flag("transpose_weight");
  int64_t k = t ? w.shape[1] : w.shape[0];
  int64_t n = t ? w.shape[0] : w.shape[1];
  if (k != last(x.shape))
    return r.fail(
               "expected weight " + shapeStr(w.shape) +
               (t ? " ([N,K], transpose_weight)" : " ([K,N])") +
               " to match input features K = " + std::to_string(last(x.shape)) +
               ", got K = " + std::to_string(k)),
           Results{};
  if (r.operands.size() == 3) {
    if (!r.rankIs(2, "bias", 1) || !r.floating(2, "bias") ||
        !r.dimEq("bias size", r.operands[2].shape[0], n))
      return {};
  }
  return {{withLast(x.shape, n), x.dtype}};
}

Results inferMatmul(Rule &r) {
  const auto &a = r.operands[0], &b = r.operands[1];
  if (!r.rankAtLeast(0, "a", 2) || !r.rankAtLeast(1, "b", 2) ||
      !r.floating(0, "a") || !r.floating(1, "b"))
    return {};
  if (a.shape.size() != b.shape.size())
    return r.fail("expected a and b of one rank, got " + shapeStr(a.shape) +
                  " and " + shapeStr(b.shape)),
           Results{};
  size_t n = a.shape.size();
  for (size_t i = 0; i + 2 < n; ++i)
    if (a.shape[i] != b.shape[i])
      return r.fail("expected equal batch dims, got " + shapeStr(a.shape) +
                    " and " + shapeStr(b.shape)),
             Results{};
  bool t = r.flag("transpose_b");
  int64_t kb = t ? b.shape[n - 1] : b.shape[n - 2];
  int64_t nb = t ? b.shape[n - 2] : b.shape[n - 1];
  if (kb != a.shape[n - 1])
    return r.fail("expected contracted dims to agree, got a " +
                  shapeStr(a.shape) + " and b " + shapeStr(b.shape) +
                  (t ? " (transpose_b)" : "")),
           Results{};
  return {{withLast(a.shape, nb), a.dtype}};
}

Results inferBiasAdd(Rule &r) {
  const auto &x = r.operands[0];
  if (!r.rankAtLeast(0, "x", 1) || !r.floating(0, "x") ||
      !r.rankIs(1, "bias", 1) || !r.floating(1, "bias") ||
      !r.dimEq("bias size", r.operands[1].shape[0], last(x.shape)))
    return {};
  return {x};
}

Results inferBinary(Rule &r) {
  if (!r.floating(0, "a") || !r.sameType(0, "a", 1, "b"))
    return {};
  return {r.operands[0]};
}

Results inferUnary(Rule &r) {
  if (!r.floating(0, "x"))
    return {};
  return {r.operands[0]};
}

Results inferGelu(Rule &r) {
  const std::string &a = r.str("approximate");
  if (a != "tanh" && a != "none")
    return r.fail("expected approximate to be \"tanh\" or \"none\", got \"" +
                  a + "\""),
           Results{};
  return inferUnary(r);
}

Results inferSwiglu(Rule &r) {
  if (!r.floating(0, "gate") || !r.sameType(0, "gate", 1, "up"))
    return {};
  return {r.operands[0]};
}

Results inferNorm(Rule &r) {
  const auto &x = r.operands[0];
  if (!r.rankAtLeast(0, "x", 1) || !r.floating(0, "x") ||
      !r.rankIs(1, "gamma", 1) ||
      !r.dimEq("gamma size", r.operands[1].shape[0], last(x.shape)))
    return {};
  if (r.operands.size() == 3 &&
      (!r.rankIs(2, "beta", 1) ||
       !r.dimEq("beta size", r.operands[2].shape[0], last(x.shape))))
    return {};
  if (!(r.f64("epsilon") > 0))
    return r.fail("expected a positive epsilon, got " +
                  std::to_string(r.f64("epsilon"))),
           Results{};
  return {x};
}

Results inferSoftmax(Rule &r) {
  const auto &x = r.operands[0];
  int64_t rank = x.shape.size(), axis = r.i64("axis");
  if (!r.rankAtLeast(0, "x", 1) || !r.floating(0, "x"))
    return {};
  if (axis < -rank || axis >= rank)
    return r.fail("expected axis in [" + std::to_string(-rank) + ", " +
                  std::to_string(rank) + "), got " + std::to_string(axis)),
           Results{};
  return {x};
}

Results inferAttention(Rule &r) {
  if (!r.positiveAttr("num_heads") || !r.positiveAttr("head_dim") ||
      !r.positiveAttr("num_kv_heads"))
    return {};
  int64_t h = r.i64("num_heads"), g = r.i64("num_kv_heads"),
          d = r.i64("head_dim");
  if (h % g != 0)
    return r.fail("expected num_kv_heads (" + std::to_string(g) +
                  ") to divide num_heads (" + std::to_string(h) + ")"),
           Results{};
  if (r.operands.size() == 2)
    return r.fail("expected 1 operand (fused qkv) or 3 (q, k, v), got 2"),
           Results{};
  static const char *names[] = {"q", "k", "v"};
  for (size_t i = 0; i < r.operands.size(); ++i)
    if (!r.rankIs(i, r.operands.size() == 1 ? "qkv" : names[i], 3) ||
        !r.floating(i, r.operands.size() == 1 ? "qkv" : names[i]))
      return {};
  const Shape &q = r.operands[0].shape;
  if (r.operands.size() == 1) {
    if ((Wide)(h + 2 * g) * d != q[2])
      return r.fail("expected fused qkv width (num_heads+2*num_kv_heads)*"
                    "head_dim = " +
                    std::to_string((int64_t)((Wide)(h + 2 * g) * d)) +
                    ", got " + std::to_string(q[2])),
             Results{};
  } else {
    if ((Wide)h * d != q[2])
      return r.fail("expected q width num_heads*head_dim = " +
                    std::to_string((int64_t)((Wide)h * d)) + ", got " +
                    std::to_string(q[2])),
             Results{};
    for (int i = 1; i < 3; ++i) {
      const Shape &s = r.operands[i].shape;
      if (s[0] != q[0] || s[1] != q[1] || (Wide)g * d != s[2])
        return r.fail(std::string("expected ") + names[i] + " of shape [" +
                      std::to_string(q[0]) + "," + std::to_string(q[1]) + "," +
                      std::to_string((int64_t)((Wide)g * d)) +
                      "] (num_kv_heads*head_dim), got " + shapeStr(s)),
               Results{};
    }
  }
  return {{{q[0], q[1], (int64_t)((Wide)h * d)}, r.operands[0].dtype}};
}

Results inferCrossEntropy(Rule &r) {
  const auto &logits = r.operands[0], &targets = r.operands[1];
  if (!r.rankAtLeast(0, "logits", 1) || !r.floating(0, "logits") ||
      !r.integer(1, "targets"))
    return {};
  Shape lead(logits.shape.begin(), logits.shape.end() - 1);
  if (targets.shape != lead)
    return r.fail("expected targets of shape " + shapeStr(lead) +
                  " (logits without the class dim), got " +
                  shapeStr(targets.shape)),
           Results{};
  return {{Shape{}, DType::F32}};
}

// scores [B,C] (rank 2 only: the one-hot of a class label), labels [B].
Results inferSquaredError(Rule &r) {
  const auto &scores = r.operands[0], &targets = r.operands[1];
  if (!r.floating(0, "scores") || !r.integer(1, "targets"))
    return {};
  if (scores.shape.size() != 2)
    return r.fail("expected scores [batch, classes], got " +
                  shapeStr(scores.shape)),
           Results{};
  if (targets.shape != Shape{scores.shape[0]})
    return r.fail("expected targets of shape " + shapeStr({scores.shape[0]}) +
                  " (one class label a row), got " + shapeStr(targets.shape)),
           Results{};
  return {{Shape{}, DType::F32}};
}

// Output size of a sliding window; 0 or less means the window does not fit.
int64_t windowOut(int64_t in, int64_t k, int64_t s, int64_t p) {
  Wide span = (Wide)in + 2 * (Wide)p - k;
  if (span < 0)
    return 0;
  return (int64_t)(span / s + 1);
}

Results inferConv2d(Rule &r) {
  const auto &x = r.operands[0], &w = r.operands[1];
  if (!r.rankIs(0, "x ([B,Cin,H,W])", 4) || !r.floating(0, "x") ||
      !r.rankIs(1, "weight ([Cout,Cin,kh,kw])", 4) ||
      !r.floating(1, "weight") || !r.positiveAttr("stride"))
    return {};
  int64_t p = r.i64("padding"), s = r.i64("stride");
  if (p < 0)
    return r.fail("expected non-negative padding, got " + std::to_string(p)),
           Results{};
  if (!r.dimEq("weight input channels", w.shape[1], x.shape[1]))
    return {};
  if (r.operands.size() == 3 &&
      (!r.rankIs(2, "bias", 1) ||
       !r.dimEq("bias size", r.operands[2].shape[0], w.shape[0])))
    return {};
  int64_t ho = windowOut(x.shape[2], w.shape[2], s, p);
  int64_t wo = windowOut(x.shape[3], w.shape[3], s, p);
  if (ho <= 0 || wo <= 0)
    return r.fail("expected kernel " + std::to_string(w.shape[2]) + "x" +
                  std::to_string(w.shape[3]) + " to fit input " +
                  std::to_string(x.shape[2]) + "x" +
                  std::to_string(x.shape[3]) + " with padding " +
                  std::to_string(p)),
           Results{};
  return {{{x.shape[0], w.shape[0], ho, wo}, x.dtype}};
}

Results inferPool2d(Rule &r) {
  const auto &x = r.operands[0];
  if (!r.rankIs(0, "x ([B,C,H,W])", 4) || !r.floating(0, "x") ||
      !r.positiveAttr("kernel") || !r.positiveAttr("stride"))
    return {};
  const std::string &kind = r.str("kind");
  if (kind != "max" && kind != "avg")
    return r.fail("expected kind \"max\" or \"avg\", got \"" + kind + "\""),
           Results{};
  int64_t k = r.i64("kernel"), s = r.i64("stride");
  int64_t ho = windowOut(x.shape[2], k, s, 0),
          wo = windowOut(x.shape[3], k, s, 0);
  if (ho <= 0 || wo <= 0)
    return r.fail("expected pooling window " + std::to_string(k) +
                  " to fit input " + std::to_string(x.shape[2]) + "x" +
                  std::to_string(x.shape[3])),
           Results{};
  return {{{x.shape[0], x.shape[1], ho, wo}, x.dtype}};
}

Results inferFlatten(Rule &r) {
  const auto &x = r.operands[0];
  int64_t rank = x.shape.size(), sd = r.i64("start_dim");
  if (sd < 0 || sd >= rank)
    return r.fail("expected start_dim in [0, " + std::to_string(rank) +
                  "), got " + std::to_string(sd)),
           Results{};
  Shape out(x.shape.begin(), x.shape.begin() + sd);
  out.push_back((int64_t)product(x.shape, sd));
  return {{out, x.dtype}};
}

Results inferReshape(Rule &r) {
  const auto &x = r.operands[0];
  Shape out = r.i64s("shape");
  int inferred = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1 && inferred < 0) {
      inferred = i;
      continue;
    }
    if (out[i] <= 0)
      return r.fail("expected positive sizes in shape (one may be -1), got " +
                    shapeStr(out)),
             Results{};
  }
  Wide known = 1;
  for (size_t i = 0; i < out.size(); ++i)
    if ((int)i != inferred) {
      known *= out[i];
      if (known > kInt64Max)
        return r.fail("size of shape " + shapeStr(out) + " overflows int64"),
               Results{};
    }
  Wide total = product(x.shape);
  if (inferred >= 0) {
    if (total % known != 0)
      return r.fail("cannot reshape " + shapeStr(x.shape) + " into " +
                    shapeStr(out)),
             Results{};
    out[inferred] = (int64_t)(total / known);
  } else if (known != total) {
    return r.fail("expected shape with " + std::to_string((int64_t)total) +
                  " elements (as x " + shapeStr(x.shape) + "), got " +
                  shapeStr(out)),
           Results{};
  }
  return {{out, x.dtype}};
}

Results inferTranspose(Rule &r) {
  const auto &x = r.operands[0];
  const Shape &perm = r.i64s("perm");
  Shape sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool isPerm = sorted.size() == x.shape.size();
  for (size_t i = 0; isPerm && i < sorted.size(); ++i)
    isPerm = sorted[i] == (int64_t)i;
  if (!isPerm)
    return r.fail("expected perm to be a permutation of 0.." +
                  std::to_string((int64_t)x.shape.size() - 1) + ", got " +
                  shapeStr(perm)),
           Results{};
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    out[i] = x.shape[perm[i]];
  return {{out, x.dtype}};
}

bool checkNnz(Rule &r, const Shape &adj) {
  int64_t nnz = r.i64("nnz");
  if (nnz < 0 || nnz > product(adj))
    return r.fail("expected nnz in [0, " +
                  std::to_string((int64_t)product(adj)) + "] for a " +
                  shapeStr(adj) + " sparse matrix, got " + std::to_string(nnz));
  return true;
}

Results inferSpmm(Rule &r) {
  const auto &adj = r.operands[0], &x = r.operands[1];
  if (!r.rankIs(0, "adj", 2) || !r.rankIs(1, "x", 2) || !r.floating(1, "x") ||
      !checkNnz(r, adj.shape) ||
      !r.dimEq("rows of x (columns of adj)", x.shape[0], adj.shape[1]))
    return {};
  return {{{adj.shape[0], x.shape[1]}, x.dtype}};
}

Results inferSddmm(Rule &r) {
  const auto &mask = r.operands[0], &x = r.operands[1], &y = r.operands[2];
  if (!r.rankIs(0, "mask", 2) || !r.rankIs(1, "x", 2) || !r.rankIs(2, "y", 2) ||
      !r.floating(1, "x") || !r.floating(2, "y") || !checkNnz(r, mask.shape) ||
      !r.dimEq("rows of x (rows of mask)", x.shape[0], mask.shape[0]) ||
      !r.dimEq("rows of y (columns of mask)", y.shape[0], mask.shape[1]) ||
      !r.dimEq("columns of y", y.shape[1], x.shape[1]))
    return {};
  return {{mask.shape, x.dtype}};
}

// A softmax over each row's stored entries of mask: scores has mask's shape
// (a sparse activation, e.g. sddmm's result, holding values at mask's stored
// entries only).
Results inferEdgeSoftmax(Rule &r) {
  const auto &mask = r.operands[0], &scores = r.operands[1];
  if (!r.rankIs(0, "mask", 2) || !r.rankIs(1, "scores", 2) ||
      !r.floating(1, "scores") || !checkNnz(r, mask.shape) ||
      !r.dimEq("rows of scores (rows of mask)", scores.shape[0],
               mask.shape[0]) ||
      !r.dimEq("columns of scores (columns of mask)", scores.shape[1],
               mask.shape[1]))
    return {};
  if (!std::isfinite(r.f64("scale")))
    return r.fail("expected a finite scale, got " +
                  std::to_string(r.f64("scale"))),
           Results{};
  return {scores};
}

Results inferParameter(Rule &r) {
  return r.fail("the result of parameter is its declared type; nothing to "
                "infer"),
         Results{};
}

using InferFn = Results (*)(Rule &);

struct RuleEntry {
  std::string_view kind;
  InferFn infer;
};

const RuleEntry kRules[] = {
    {"parameter", inferParameter},
    {"embedding", inferEmbedding},
    {"positional", inferPositional},
    {"rotary", inferRotary},
    {"linear", inferLinear},
    {"matmul", inferMatmul},
    {"bias_add", inferBiasAdd},
    {"add", inferBinary},
    {"mul", inferBinary},
    {"gelu", inferGelu},
    {"relu", inferUnary},
    {"silu", inferUnary},
    {"swiglu", inferSwiglu},
    {"layernorm", inferNorm},
    {"rmsnorm", inferNorm},
    {"softmax", inferSoftmax},
    {"attention", inferAttention},
    {"cross_entropy", inferCrossEntropy},
    {"squared_error", inferSquaredError},
    {"conv2d", inferConv2d},
    {"pool2d", inferPool2d},
    {"flatten", inferFlatten},
    {"reshape", inferReshape},
    {"transpose", inferTranspose},
    {"spmm", inferSpmm},
    {"sddmm", inferSddmm},
    {"edge_softmax", inferEdgeSoftmax},
};

// Forward FLOPs in __int128 so that inference can refuse ops whose count does
// not fit in int64 instead of wrapping.
Wide wideFlops(std::string_view kind, const std::vector<ValueType> &operands,
               const std::vector<ValueType> &results, const Attrs &a) {
  auto get = [&](const char *name) { return std::get<int64_t>(a.at(name)); };
  const Shape &x = operands.empty() ? Shape{} : operands[0].shape;
  const Shape &y = results.empty() ? Shape{} : results[0].shape;
  Wide outElems = product(y);
  if (kind == "linear") {
    // 2·M·N·K, + M·N for the bias (docs/ir.md).
    Wide m = product(x, 0, x.size() - 1), n = y.back(), k = x.back();
    return mul(2, m, n, k) + (operands.size() == 3 ? mul(m, n) : 0);
  }
  if (kind == "matmul")
    return mul(2, outElems, x.back()); // 2·M·N·K per batch entry
  if (kind == "attention") {
    // 4·B·H·T²·D for q·kᵀ and the weighted sum of v, + 5·B·H·T² for scale,
    // mask and softmax; the causal mask is not discounted (Megatron-LM, PaLM).
    Wide b = x[0], t = x[1], h = get("num_heads"), d = get("head_dim");
    return mul(4, b, h, t, t, d) + mul(5, b, h, t, t);
  }
  if (kind == "spmm")
    return mul(2, get("nnz"), operands[1].shape[1]); // 2·nnz·F
  if (kind == "sddmm")
    return mul(2, get("nnz"), operands[1].shape[1]); // 2·nnz·K
  if (kind == "edge_softmax")
    return mul(6, get("nnz")); // scale, max, subtract, exp, sum, divide
  if (kind == "conv2d") {
    // 2·B·Cout·H'·W'·Cin·kh·kw, + B·Cout·H'·W' for the bias.
    const Shape &w = operands[1].shape;
    return mul(2, outElems, w[1], w[2], w[3]) +
           (operands.size() == 3 ? outElems : 0);
  }
  if (kind == "pool2d")
    return mul(outElems, get("kernel"),
               get("kernel")); // one op per window element
  if (kind == "positional" || kind == "bias_add" || kind == "add" ||
      kind == "mul" || kind == "relu")
    return outElems; // one add, multiply or compare per element
  if (kind == "silu")
    return mul(4, outElems); // exp, add, divide, multiply
  if (kind == "swiglu")
    return mul(5, outElems); // silu(gate) (4) and the product with up (1)
  if (kind == "gelu")
    // tanh form: x³, two multiply-adds, tanh, add, two multiplies ≈ 8; the erf
    // form is counted the same.
    return mul(8, outElems);
  if (kind == "rotary")
    return mul(3, outElems); // x·cos + rotate(x)·sin: two multiplies and an add
  if (kind == "layernorm")
    return mul(8,
               outElems); // mean (1), variance (3), normalise (2), affine (2)
  if (kind == "rmsnorm")
    return mul(4, outElems); // square-sum (2), scale (1), gamma (1)
  if (kind == "softmax")
    return mul(5, outElems); // max, subtract, exp, sum, divide
  if (kind == "cross_entropy")
    // log-softmax over the logits (5 per element); the pick-and-mean is noise.
    return mul(5, product(x));
  if (kind == "squared_error")
    return mul(3, product(x)); // subtract, square, sum
  if (kind == "primitive") {
    // An ONNX op left unfused (docs/model-format.md): MatMul 2·M·N·K per
    // batch entry, Softmax as softmax, data movement (Reshape, Transpose,
    // Slice, ...) none, anything else one operation per result element.
    auto t = a.find("op_type");
    const std::string *op =
        t == a.end() ? nullptr : std::get_if<std::string>(&t->second);
    const std::string type = op ? *op : "";
    if (type == "MatMul")
      return mul(2, outElems, x.empty() ? 1 : x.back());
    if (type == "Softmax" || type == "LogSoftmax")
      return mul(5, outElems);
    for (const char *move :
         {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast",
          "Transpose", "Expand", "Slice", "Concat"})
      if (type == move)
        return 0;
    return outElems;
  }
  // embedding (a lookup), flatten, reshape, transpose, parameter: no
  // arithmetic.
  return 0;
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
  return out;
}

InferResult inferResultTypes(std::string_view kind,
                             const std::vector<ValueType> &operands,
                             const Attrs &attrs) {
  InferResult res;
  const OpInfo *info = lookupOp(kind);
  if (!info) {
    res.error = "unknown op kind '" + std::string(kind) + "'";
    return res;
  }
  int n = operands.size();
  if (n < info->minOperands ||
      (info->maxOperands >= 0 && n > info->maxOperands)) {
    std::string want = std::to_string(info->minOperands);
    if (info->maxOperands != info->minOperands)
      want += info->maxOperands < 0
                  ? " or more"
                  : " to " + std::to_string(info->maxOperands);
    res.error = "expected " + want + " operands, got " + std::to_string(n);
    return res;
  }
  for (std::string_view name : info->requiredAttrs)
    if (!attrs.count(std::string(name))) {
      res.error = "missing required attribute '" + std::string(name) + "'";
      return res;
    }
  Attrs full = withDefaults(kind, attrs);
  for (const auto &[name, value] : full) {
    std::optional<AttrKind> want = attrKind(kind, name);
    if (!want)
      continue; // not ours (e.g. sbp.layer); the dialect checks those
    if (value.index() != static_cast<size_t>(*want)) {
      res.error = "expected attribute '" + name + "' of type " +
                  std::string(attrKindName(*want));
      return res;
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int64_t d : operands[i].shape)
      if (d <= 0) {
        res.error = "expected positive sizes, got " +
                    shapeStr(operands[i].shape) + " for operand #" +
                    std::to_string(i);
        return res;
      }
    if (product(operands[i].shape) > kInt64Max) {
      res.error = "element count of " + shapeStr(operands[i].shape) +
                  " (operand #" + std::to_string(i) + ") overflows int64";
      return res;
    }
  }
  const RuleEntry *rule = nullptr;
  for (const RuleEntry &e : kRules)
    if (e.kind == kind)
      rule = &e;
  Rule r(operands, full);
  Results results = rule->infer(r);
  if (!r.error.empty()) {
    res.error = r.error;
    return res;
  }
  for (const ValueType &v : results)
    if (product(v.shape) > kInt64Max) {
      res.error =
          "element count of result " + shapeStr(v.shape) + " overflows int64";
      return res;
    }
  if (wideFlops(kind, operands, results, full) > kInt64Max) {
    res.error = "forward FLOPs overflow int64";
    return res;
  }
  res.results = std::move(results);
  return res;
}

int64_t forwardFlops(std::string_view kind,
                     const std::vector<ValueType> &operands,
                     const std::vector<ValueType> &results,
                     const Attrs &attrs) {
  Wide f = wideFlops(kind, operands, results, withDefaults(kind, attrs));
  return f > kInt64Max ? INT64_MAX : static_cast<int64_t>(f);
}

} // namespace autoddl::ops
