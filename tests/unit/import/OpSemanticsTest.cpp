//===- OpSemanticsTest.cpp - shape inference and FLOPs of the vocabulary -===//
#include "ir/ops/OpAttrs.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace autoddl::ops;

namespace {

ValueType f32(Shape s) { return {std::move(s), DType::F32}; }
ValueType i32(Shape s) { return {std::move(s), DType::I32}; }

TEST(OpSemantics, EveryDocumentedOpIsKnown) {
  // docs/ir.md's table lists these 30 op kinds (add and mul, gelu, relu,
  // silu and elu share rows).
  const char *kinds[] = {
      "parameter",     "embedding",    "positional",    "rotary",
      "linear",        "matmul",       "bias_add",      "add",
      "mul",           "gelu",         "relu",          "silu",
      "elu",           "swiglu",       "layernorm",     "rmsnorm",
      "softmax",       "attention",    "cross_entropy", "conv2d",
      "pool2d",        "flatten",      "reshape",       "transpose",
      "spmm",          "sddmm",        "edge_softmax",  "head_dot",
      "gat_aggregate", "squared_error"};
  for (const char *k : kinds)
    EXPECT_NE(lookupOp(k), nullptr) << k;
  EXPECT_EQ(allOps().size(), std::size(kinds));
  EXPECT_EQ(lookupOp("all_reduce"),
            nullptr); // collectives are not importer ops
}

TEST(OpSemantics, LinearShapesAndFlops) {
  // torch layout: w [N,K] = [3072,768]; x [2,8,768] -> [2,8,3072].
  Attrs a{{"transpose_weight", true}};
  auto r = inferResultTypes(
      "linear", {f32({2, 8, 768}), f32({3072, 768}), f32({3072})}, a);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.results[0].shape, (Shape{2, 8, 3072}));
  // 2·M·N·K + M·N with M = 2·8 = 16 rows, N = 3072, K = 768.
  EXPECT_EQ(forwardFlops("linear",
                         {f32({2, 8, 768}), f32({3072, 768}), f32({3072})},
                         r.results, a),
            2LL * 16 * 3072 * 768 + 16 * 3072);
  // Conv1D layout (GPT-2): w [K,N]; a torch-layout weight is then wrong.
  auto bad = inferResultTypes("linear", {f32({2, 8, 768}), f32({3072, 768})},
                              {{"transpose_weight", false}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error.find("K = 768"), std::string::npos) << bad.error;
}

TEST(OpSemantics, AttentionGqaAndFlops) {
  // Llama-2-70B-like heads: H = 64, G = 8, D = 128; q [1,16,8192], k/v
  // [1,16,1024].
  Attrs a{{"num_heads", int64_t{64}},
          {"num_kv_heads", int64_t{8}},
          {"head_dim", int64_t{128}},
          {"causal", true}};
  std::vector<ValueType> ops{f32({1, 16, 8192}), f32({1, 16, 1024}),
                             f32({1, 16, 1024})};
  auto r = inferResultTypes("attention", ops, a);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.results[0].shape, (Shape{1, 16, 8192}));
  // 4·B·H·T²·D + 5·B·H·T² (docs/ir.md) with B=1, H=64, T=16, D=128.
  EXPECT_EQ(forwardFlops("attention", ops, r.results, a),
            4LL * 64 * 16 * 16 * 128 + 5LL * 64 * 16 * 16);
  // Fused qkv: width (H + 2G)·D = (64 + 16)·128 = 10240.
  auto fused = inferResultTypes("attention", {f32({1, 16, 10240})}, a);
  ASSERT_TRUE(fused.ok()) << fused.error;
  EXPECT_EQ(fused.results[0].shape, (Shape{1, 16, 8192}));
  // G must divide H.
  a["num_kv_heads"] = int64_t{7};
  auto bad = inferResultTypes("attention", ops, a);
  EXPECT_NE(bad.error.find("divide"), std::string::npos) << bad.error;
}

TEST(OpSemantics, ConvPoolFlattenShapes) {
  // VGG first conv: 3x3, pad 1, stride 1 keeps 224x224.
  Attrs c{{"stride", int64_t{1}}, {"padding", int64_t{1}}};
  std::vector<ValueType> ops{f32({2, 3, 224, 224}), f32({64, 3, 3, 3}),
                             f32({64})};
  auto r = inferResultTypes("conv2d", ops, c);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.results[0].shape, (Shape{2, 64, 224, 224}));
  // 2·B·Cout·H'·W'·Cin·kh·kw + B·Cout·H'·W'.
  int64_t out = 2LL * 64 * 224 * 224;
  EXPECT_EQ(forwardFlops("conv2d", ops, r.results, c), 2 * out * 3 * 9 + out);
  auto p =
      inferResultTypes("pool2d", {f32({2, 64, 224, 224})},
                       {{"kind", std::string("max")}, {"kernel", int64_t{2}}});
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(p.results[0].shape,
            (Shape{2, 64, 112, 112})); // stride defaults to kernel
  auto f = inferResultTypes("flatten", {f32({2, 512, 7, 7})}, {});
  ASSERT_TRUE(f.ok()) << f.error;
  EXPECT_EQ(f.results[0].shape, (Shape{2, 25088})); // 512·7·7
}

TEST(OpSemantics, SparseOps) {
  Attrs a{{"nnz", int64_t{13264}}};
  std::vector<ValueType> ops{f32({2708, 2708}), f32({2708, 16})};
  auto r = inferResultTypes("spmm", ops, a);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.results[0].shape, (Shape{2708, 16}));
  EXPECT_EQ(forwardFlops("spmm", ops, r.results, a),
            2LL * 13264 * 16); // 2·nnz·F
  auto s = inferResultTypes("sddmm", {f32({4, 5}), f32({4, 3}), f32({5, 3})},
                            {{"nnz", int64_t{7}}});
  ASSERT_TRUE(s.ok()) << s.error;
  EXPECT_EQ(s.results[0].shape, (Shape{4, 5}));
  auto bad = inferResultTypes("spmm", ops, {{"nnz", int64_t{-1}}});
  EXPECT_NE(bad.error.find("nnz"), std::string::npos) << bad.error;
  // reduce: sum (the default) or mean (sage), the same shape and FLOPs.
  Attrs mean{{"nnz", int64_t{13264}}, {"reduce", std::string("mean")}};
  EXPECT_TRUE(inferResultTypes("spmm", ops, mean).ok());
  auto max = inferResultTypes(
      "spmm", ops, {{"nnz", int64_t{13264}}, {"reduce", std::string("max")}});
  EXPECT_NE(max.error.find("reduce \"sum\" or \"mean\", got \"max\""),
            std::string::npos)
      << max.error;
  // edge_softmax: scores of mask's shape, 6·nnz FLOPs, scale defaults to 1.
  Attrs e{{"nnz", int64_t{7}}};
  std::vector<ValueType> eops{f32({4, 5}), f32({4, 5})};
  auto sm = inferResultTypes("edge_softmax", eops, e);
  ASSERT_TRUE(sm.ok()) << sm.error;
  EXPECT_EQ(sm.results[0].shape, (Shape{4, 5}));
  EXPECT_EQ(forwardFlops("edge_softmax", eops, sm.results, e), 6 * 7);
  auto wrong = inferResultTypes("edge_softmax", {f32({4, 5}), f32({4, 3})}, e);
  EXPECT_NE(wrong.error.find("columns of scores"), std::string::npos)
      << wrong.error;
}

TEST(OpSemantics, GatOps) {
  // head_dot: x [N, H*C], att [H, C] -> [N, H], 2·N·H·C FLOPs.
  std::vector<ValueType> hops{f32({6, 8}), f32({2, 4})};
  auto h = inferResultTypes("head_dot", hops, {});
  ASSERT_TRUE(h.ok()) << h.error;
  EXPECT_EQ(h.results[0].shape, (Shape{6, 2}));
  EXPECT_EQ(forwardFlops("head_dot", hops, h.results, {}), 2 * 6 * 8);
  auto badAtt = inferResultTypes("head_dot", {f32({6, 8}), f32({3, 4})}, {});
  EXPECT_NE(badAtt.error.find("heads x channels of att"), std::string::npos)
      << badAtt.error;
  // gat_aggregate: adj [N,M], s_dst [N,H], s_src [M,H], h [M,H*C] ->
  // [N,H*C]; 7·nnz·H + 2·nnz·H·C FLOPs; negative_slope defaults to 0.2.
  Attrs a{{"nnz", int64_t{9}}};
  std::vector<ValueType> gops{f32({4, 6}), f32({4, 2}), f32({6, 2}),
                              f32({6, 8})};
  auto g = inferResultTypes("gat_aggregate", gops, a);
  ASSERT_TRUE(g.ok()) << g.error;
  EXPECT_EQ(g.results[0].shape, (Shape{4, 8}));
  EXPECT_EQ(forwardFlops("gat_aggregate", gops, g.results, a),
            7 * 9 * 2 + 2 * 9 * 8);
  EXPECT_EQ(
      std::get<double>(withDefaults("gat_aggregate", a).at("negative_slope")),
      0.2);
  auto odd = inferResultTypes(
      "gat_aggregate", {f32({4, 6}), f32({4, 3}), f32({6, 3}), f32({6, 8})}, a);
  EXPECT_NE(odd.error.find("multiple of the 3 heads"), std::string::npos)
      << odd.error;
  auto rows = inferResultTypes(
      "gat_aggregate", {f32({4, 6}), f32({4, 2}), f32({5, 2}), f32({6, 8})}, a);
  EXPECT_NE(rows.error.find("rows of s_src"), std::string::npos) << rows.error;
}

TEST(OpSemantics, EmbeddingCrossEntropy) {
  auto e =
      inferResultTypes("embedding", {i32({4, 128}), f32({50257, 768})}, {});
  ASSERT_TRUE(e.ok()) << e.error;
  EXPECT_EQ(e.results[0].shape, (Shape{4, 128, 768}));
  auto ce = inferResultTypes("cross_entropy",
                             {f32({4, 128, 50257}), i32({4, 128})}, {});
  ASSERT_TRUE(ce.ok()) << ce.error;
  EXPECT_TRUE(ce.results[0].shape.empty()); // scalar loss
  auto bad = inferResultTypes("cross_entropy",
                              {f32({4, 128, 50257}), i32({4, 127})}, {});
  EXPECT_NE(bad.error.find("[4,128]"), std::string::npos) << bad.error;
  auto fl = inferResultTypes("embedding", {f32({4, 128}), f32({10, 8})}, {});
  EXPECT_NE(fl.error.find("integer ids"), std::string::npos) << fl.error;
}

TEST(OpSemantics, SquaredErrorTakesScoresAndOneLabelARow) {
  auto se = inferResultTypes("squared_error", {f32({8, 10}), i32({8})}, {});
  ASSERT_TRUE(se.ok()) << se.error;
  EXPECT_TRUE(se.results[0].shape.empty()); // scalar loss
  auto rank3 =
      inferResultTypes("squared_error", {f32({2, 4, 10}), i32({2, 4})}, {});
  EXPECT_NE(rank3.error.find("[batch, classes]"), std::string::npos)
      << rank3.error;
  auto rows = inferResultTypes("squared_error", {f32({8, 10}), i32({7})}, {});
  EXPECT_NE(rows.error.find("[8]"), std::string::npos) << rows.error;
}

TEST(OpSemantics, ReshapeTransposeRotary) {
  auto r = inferResultTypes("reshape", {f32({2, 3, 4})},
                            {{"shape", std::vector<int64_t>{6, -1}}});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.results[0].shape, (Shape{6, 4}));
  auto bad = inferResultTypes("reshape", {f32({2, 3, 4})},
                              {{"shape", std::vector<int64_t>{5, 5}}});
  EXPECT_FALSE(bad.ok());
  auto t = inferResultTypes("transpose", {f32({2, 3, 4})},
                            {{"perm", std::vector<int64_t>{2, 0, 1}}});
  ASSERT_TRUE(t.ok()) << t.error;
  EXPECT_EQ(t.results[0].shape, (Shape{4, 2, 3}));
  EXPECT_FALSE(inferResultTypes("transpose", {f32({2, 3})},
                                {{"perm", std::vector<int64_t>{0, 0}}})
                   .ok());
  auto rot = inferResultTypes(
      "rotary", {f32({1, 8, 4096})},
      {{"num_heads", int64_t{32}}, {"head_dim", int64_t{127}}});
  EXPECT_NE(rot.error.find("even head_dim"), std::string::npos) << rot.error;
}

TEST(OpSemantics, RejectsBadCountsAttrsAndSizes) {
  EXPECT_NE(inferResultTypes("add", {f32({2})}, {})
                .error.find("expected 2 operands, got 1"),
            std::string::npos);
  EXPECT_NE(inferResultTypes("softmax", {f32({2})}, {{"axis", 1.5}})
                .error.find("'axis' of type i64"),
            std::string::npos);
  EXPECT_NE(inferResultTypes("pool2d", {f32({1, 1, 4, 4})},
                             {{"kind", std::string("max")}})
                .error.find("missing required attribute 'kernel'"),
            std::string::npos);
  EXPECT_NE(
      inferResultTypes("relu", {f32({2, 0})}, {}).error.find("positive sizes"),
      std::string::npos);
  // 2^32 · 2^32 elements do not fit in int64.
  EXPECT_NE(inferResultTypes("relu", {f32({1LL << 32, 1LL << 32})}, {})
                .error.find("overflows int64"),
            std::string::npos);
  // Fits in elements (2^31 · 2^31 = 2^62) but 2·M·N·K = 2^94 FLOPs does not.
  EXPECT_NE(inferResultTypes(
                "linear",
                {f32({1LL << 31, 1LL << 31}), f32({1LL << 31, 1LL << 31})}, {})
                .error.find("FLOPs overflow"),
            std::string::npos);
  EXPECT_NE(
      inferResultTypes("nope", {}, {}).error.find("unknown op kind 'nope'"),
      std::string::npos);
}

TEST(OpSemantics, AttrKindsAndDefaults) {
  EXPECT_EQ(attrKind("layernorm", "epsilon"), AttrKind::F64);
  EXPECT_EQ(attrKind("layernorm", "eps"), std::nullopt);
  Attrs d = withDefaults(
      "attention", {{"num_heads", int64_t{12}}, {"head_dim", int64_t{64}}});
  EXPECT_EQ(std::get<int64_t>(d.at("num_kv_heads")),
            12); // G defaults to H (no GQA)
  EXPECT_EQ(std::get<bool>(d.at("causal")), false);
  EXPECT_EQ(parseDType("bf16"), DType::BF16);
  EXPECT_EQ(dtypeBytes(DType::BF16), 2);
  // Bool is for an imported graph's constants (masks), never an input's dtype.
  EXPECT_EQ(dtypeName(DType::Bool), "i1");
  EXPECT_EQ(parseDType("i1"), std::nullopt);
}

// The typed names of OpAttrs.h against the table of op kinds: every attribute
// of every kind has a name whose C++ type is the attribute's kind, and every
// name (but a primitive's op_type) is some kind's attribute.
template <typename T>
std::pair<std::string, AttrKind> typedName(AttrName<T> a) {
  return {std::string(a.name), static_cast<AttrKind>(AttrValue(T{}).index())};
}

TEST(OpSemantics, TypedAttributeNamesMatchTheTable) {
  using namespace attr;
  const std::map<std::string, AttrKind> names = {typedName(kName),
                                                 typedName(kInit),
                                                 typedName(kInitStd),
                                                 typedName(kNumHeads),
                                                 typedName(kHeadDim),
                                                 typedName(kNumKvHeads),
                                                 typedName(kTheta),
                                                 typedName(kCausal),
                                                 typedName(kTransposeWeight),
                                                 typedName(kTransposeB),
                                                 typedName(kApproximate),
                                                 typedName(kEpsilon),
                                                 typedName(kAxis),
                                                 typedName(kStride),
                                                 typedName(kPadding),
                                                 typedName(kKernel),
                                                 typedName(kStartDim),
                                                 typedName(kPoolKind),
                                                 typedName(kShape),
                                                 typedName(kPerm),
                                                 typedName(kNnz),
                                                 typedName(kReduce),
                                                 typedName(kScale),
                                                 typedName(kNegativeSlope)};
  std::set<std::string> used;
  for (const OpInfo &op : allOps())
    for (const auto &list : {op.requiredAttrs, op.optionalAttrs})
      for (std::string_view a : list) {
        auto it = names.find(std::string(a));
        ASSERT_NE(it, names.end()) << op.kind << "." << a << " has no name";
        EXPECT_EQ(attrKind(op.kind, a), it->second) << op.kind << "." << a;
        used.insert(std::string(a));
      }
  EXPECT_EQ(used.size(), names.size());
  // The accessor: present with its type, else the fallback.
  const Attrs a{{"num_heads", int64_t{4}}, {"causal", std::string("yes")}};
  EXPECT_EQ(attrOr(a, kNumHeads, 1), 4);
  EXPECT_EQ(attrOr(a, kHeadDim, 7), 7);
  EXPECT_EQ(attrOr(a, kCausal, false), false); // a string is not a bool
  EXPECT_EQ(findAttr(a, kCausal), nullptr);
  // attrOf: the op's value, else the table's default (a value, or another
  // attribute's: num_kv_heads is num_heads); a required one has none.
  EXPECT_EQ(attrOf("attention", a, kNumKvHeads), 4);
  EXPECT_EQ(attrOf("attention", {}, kNumKvHeads), 0);
  EXPECT_EQ(attrOf("linear", {}, kTransposeWeight), true);
  EXPECT_EQ(attrOf("gelu", {}, kApproximate), "none");
  EXPECT_EQ(attrOf("attention", a, kHeadDim), 0);
  EXPECT_EQ(attrDefault("pool2d", "kind", {}), std::nullopt);
  EXPECT_EQ(attrDefault("pool2d", "stride", {{"kernel", int64_t{3}}}),
            AttrValue(int64_t{3}));
}

} // namespace
