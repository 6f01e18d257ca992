//===- FuseImportedTest.cpp - primitives + constants -> fused model ops ---===//
//
// Graphs built as an ONNX import builds them (GraphBuilder::constant and
// ::primitive beside model ops) go through fuseImportedGraph, and what comes
// back is compared with what the templates emit: op kinds, attributes,
// layers, parameters, and the planner's price of one plan. The decomposed
// Llama is tests/lit/passes/fuse_pipeline.mlir's layer, twice, inside the
// rest of tiny-llama.
//
//===----------------------------------------------------------------------===//
#include "ir/lower/FuseImported.h"

#include "cost_model/io/ClusterJson.h"
#include "ir/import/GraphBuilder.h"
#include "ir/import/ModelImporter.h"
#include "ir/lower/LowerToSbp.h"
#include "planner/Search.h"
#include "support/UserError.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

using namespace autoddl;
using autoddl::import::GraphBuilder;
using ops::DType;

namespace {

/// GraphBuilder plus the shorthands an exporter's graph needs.
struct Onnx {
  GraphBuilder b{"decomposed", "onnx", "test: "};

  int f32(const std::string &name, double v) {
    return b.constant(name, {}, DType::F32, {v});
  }
  int i64(const std::string &name, std::vector<int64_t> v) {
    return b.constant(name, {int64_t(v.size())}, DType::I64,
                      std::vector<double>(v.begin(), v.end()));
  }
  const ops::Shape &shape(int t) const { return b.shape(t); }
  /// A primitive whose result has `shape` (f32).
  int prim(const std::string &type, const std::string &name,
           std::vector<int> in, ops::Shape shape, ops::Attrs attrs = {},
           int position = -1) {
    return b.primitive(type, name, std::move(in), std::move(attrs),
                       {std::move(shape), DType::F32}, "", position);
  }
  /// An elementwise primitive: the result has the first operand's shape.
  int ew(const std::string &type, const std::string &name, std::vector<int> in,
         int position = -1) {
    ops::Shape s = shape(in[0]);
    for (int t : in)
      if (shape(t).size() > s.size())
        s = shape(t);
    return prim(type, name, std::move(in), s, {}, position);
  }
};

/// Rebuilds `g` through GraphBuilder, which checks every op against the
/// shared shape rules and the names for duplicates, as for any front end.
void expectValidates(const ModelGraph &g) {
  GraphBuilder b(g.name, g.family, "revalidate: ");
  std::vector<int> id(g.tensors.size(), -1);
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const TensorDef &t = g.tensors[i];
    if (t.role == TensorRole::Input)
      id[i] = b.input(t.name, t.shape, t.dtype);
    else if (t.role == TensorRole::Parameter)
      id[i] = b.param(t.name, t.shape, t.init, t.initStd);
    else
      EXPECT_NE(t.role, TensorRole::Constant) << t.name;
  }
  for (const OpDef &op : g.ops) {
    std::vector<int> in;
    for (int t : op.operands)
      in.push_back(id[t]);
    id[op.results[0]] =
        b.op(op.kind, op.name, in, op.attrs, g.tensors[op.results[0]].name);
    EXPECT_EQ(b.shape(id[op.results[0]]), g.tensors[op.results[0]].shape);
  }
  EXPECT_NO_THROW(b.finish(id[g.loss], g.numLayers, g.batch, g.seq));
  LowerResult lowered = lowerToSbpText(g);
  EXPECT_TRUE(lowered.ok()) << lowered.error;
}

/// x [4,8] -> linear -> erf GELU -> LayerNorm (with beta) -> linear ->
/// cross-entropy; the GELU's Div by `geluDivisor` (√2 for a real GELU).
ModelGraph mlpWithDecomposedGeluAndNorm(double geluDivisor) {
  Onnx o;
  int x = o.b.input("x", {4, 8});
  int targets = o.b.input("targets", {4}, DType::I32);
  int w1 = o.b.param("fc1.weight", {16, 8}, "normal", 0.02);
  int h = o.b.op("linear", "fc1", {x, w1}, {{"transpose_weight", true}});
  o.b.setLayer(0);
  int d = o.ew("Div", "act.div", {h, o.f32("c.sqrt2", geluDivisor)}, 1);
  int e = o.ew("Erf", "act.erf", {d}, 2);
  int a = o.ew("Add", "act.add", {e, o.f32("c.one", 1.0)}, 3);
  int m = o.b.op("mul", "act.mul", {h, a});
  int y = o.ew("Mul", "act.half", {m, o.f32("c.half", 0.5)}, 5);
  ops::Attrs lastAxis{{"axes", std::vector<int64_t>{-1}},
                      {"keepdims", int64_t(1)}};
  int mean = o.prim("ReduceMean", "ln.mean", {y}, {4, 1}, lastAxis, 6);
  int c = o.ew("Sub", "ln.centre", {y, mean}, 7);
  int sq = o.ew("Pow", "ln.square", {c, o.f32("c.two", 2.0)}, 8);
  int var = o.prim("ReduceMean", "ln.var", {sq}, {4, 1}, lastAxis, 9);
  int ve = o.ew("Add", "ln.add_eps", {var, o.f32("c.eps", 1e-5)}, 10);
  int s = o.ew("Sqrt", "ln.sqrt", {ve}, 11);
  int n = o.ew("Div", "ln.div", {c, s}, 12);
  int gamma = o.b.param("ln.weight", {16}, "ones");
  int beta = o.b.param("ln.bias", {16}, "zeros");
  int g = o.ew("Mul", "ln.scale", {n, gamma}, 13);
  int ln = o.ew("Add", "ln.shift", {g, beta}, 14);
  o.b.setLayer(-1);
  int w2 = o.b.param("fc2.weight", {3, 16}, "normal", 0.02);
  int logits = o.b.op("linear", "fc2", {ln, w2}, {{"transpose_weight", true}});
  int loss = o.b.op("cross_entropy", "loss", {logits, targets});
  return o.b.finish(loss, 1, 4, 0);
}

std::vector<std::string> kinds(const ModelGraph &g) {
  std::vector<std::string> out;
  for (const OpDef &op : g.ops)
    out.push_back(op.kind);
  return out;
}

TEST(FuseImportedTest, LowersConstantsAndPrimitives) {
  LowerResult lowered = lowerToSbpText(mlpWithDecomposedGeluAndNorm(M_SQRT2));
  ASSERT_TRUE(lowered.ok()) << lowered.error;
  EXPECT_NE(lowered.text.find("sbp.constant dense<5.000000e-01> : tensor<f32>"),
            std::string::npos);
  EXPECT_NE(lowered.text.find("sbp.primitive \"Erf\""), std::string::npos);
  // ONNX attributes as the lit tests spell them; the op's name its location.
  EXPECT_NE(lowered.text.find("sbp.primitive \"ReduceMean\"(%"),
            std::string::npos);
  EXPECT_NE(lowered.text.find("axes = array<i64: -1>"), std::string::npos);
  EXPECT_NE(lowered.text.find("keepdims = 1 : i64"), std::string::npos);
  EXPECT_NE(lowered.text.find("loc(\"ln.var\")"), std::string::npos);
}

TEST(FuseImportedTest, LowersBooleanAndSaturatedIntegerConstants) {
  Onnx o;
  int x = o.b.input("x", {2, 2});
  int t = o.b.input("t", {2}, DType::I32);
  int cond = o.b.constant("c.tril", {2, 2}, DType::Bool, {1, 0, 1, 1});
  int w = o.prim("Where", "where", {cond, x, o.f32("c.low", -1e9)}, {2, 2});
  // A Slice's "to the end": INT64_MAX, which a double holds as 2^63.
  int s = o.prim("Slice", "slice",
                 {w, o.i64("c.start", {0}),
                  o.i64("c.end", {std::numeric_limits<int64_t>::max()})},
                 {2, 2});
  int loss = o.b.op("cross_entropy", "loss", {s, t});
  LowerResult lowered = lowerToSbpText(o.b.finish(loss, 0, 2, 0));
  ASSERT_TRUE(lowered.ok()) << lowered.error;
  EXPECT_NE(lowered.text.find(
                "dense<[[true, false], [true, true]]> : tensor<2x2xi1>"),
            std::string::npos)
      << lowered.text;
  EXPECT_NE(lowered.text.find("dense<9223372036854775807> : tensor<1xi64>"),
            std::string::npos)
      << lowered.text;
}

TEST(FuseImportedTest, FusesGeluAndLayerNorm) {
  ModelGraph g = mlpWithDecomposedGeluAndNorm(M_SQRT2);
  // fc1 128 + ln 32 + fc2 48: the five scalar constants are not parameters.
  EXPECT_EQ(g.parameterCount(), 208);
  fuseImportedGraph(g, "mlp.onnx");
  EXPECT_EQ(kinds(g), (std::vector<std::string>{"linear", "gelu", "layernorm",
                                                "linear", "cross_entropy"}));
  // Each fused op is named after the last op of its form and produces that
  // op's tensor, so what reads it (fc2) is unchanged.
  EXPECT_EQ(g.ops[1].name, "act.half");
  EXPECT_EQ(g.ops[1].attrs, (ops::Attrs{{"approximate", std::string("none")}}));
  EXPECT_EQ(g.ops[2].name, "ln.shift");
  EXPECT_EQ(g.tensors[g.ops[2].results[0]].name, "ln.shift");
  // The f32 epsilon reads back as the decimal it was written as.
  EXPECT_EQ(g.ops[2].attrs, (ops::Attrs{{"epsilon", 1e-5}}));
  EXPECT_EQ(g.ops[2].operands.size(), 3u); // x, gamma, beta
  EXPECT_EQ(g.tensors[g.ops[2].operands[1]].name, "ln.weight");
  EXPECT_EQ(g.tensors[g.ops[2].operands[2]].name, "ln.bias");
  EXPECT_EQ(g.ops[1].layer, 0);
  EXPECT_EQ(g.ops[2].layer, 0);
  EXPECT_EQ(g.ops[3].layer, -1);
  EXPECT_EQ(g.parameterCount(), 208);
  for (const TensorDef &t : g.tensors)
    EXPECT_NE(t.role, TensorRole::Constant) << t.name;
  EXPECT_EQ(g.tensors[g.loss].name, "loss");
  EXPECT_EQ(g.batch, 4);
  expectValidates(g);
}

TEST(FuseImportedTest, AFusedOpTakesTheLayerOfTheOpsItReplaced) {
  // Only the Erf knows its layer; the GELU replacing the form takes it, and
  // the op after it (layer -1, reading the GELU) keeps -1.
  Onnx o;
  int x = o.b.input("x", {2, 3});
  int t = o.b.input("t", {2}, DType::I32);
  int d = o.ew("Div", "div", {x, o.f32("c.sqrt2", M_SQRT2)});
  o.b.setLayer(3);
  int e = o.ew("Erf", "erf", {d});
  o.b.setLayer(-1);
  int a = o.ew("Add", "add", {e, o.f32("c.one", 1.0)});
  int m = o.b.op("mul", "mul", {x, a});
  int y = o.ew("Mul", "half", {m, o.f32("c.half", 0.5)});
  int r = o.b.op("relu", "relu", {y});
  int loss = o.b.op("cross_entropy", "loss", {r, t});
  ModelGraph g = o.b.finish(loss, 4, 2, 0);
  fuseImportedGraph(g, "m.onnx");
  ASSERT_EQ(kinds(g),
            (std::vector<std::string>{"gelu", "relu", "cross_entropy"}));
  EXPECT_EQ(g.ops[0].layer, 3);
  EXPECT_EQ(g.ops[1].layer, -1);
}

/// fuseImportedGraph(g, "m.onnx") refuses g with `message`.
void expectRefused(ModelGraph g, const char *message) {
  try {
    fuseImportedGraph(g, "m.onnx");
    FAIL() << "expected a refusal";
  } catch (const UserError &e) {
    EXPECT_STREQ(e.what(), message);
  }
}

TEST(FuseImportedTest, KeepsAPrimitiveNoPatternRecognises) {
  // erf(x / 2) is not GELU's: its Div, Erf, Add and Muls stay primitives,
  // with the scalar constants they read, to run as they are (the norm still
  // fuses).
  ModelGraph g = mlpWithDecomposedGeluAndNorm(2.0);
  fuseImportedGraph(g, "mlp.onnx");
  std::vector<std::string> types;
  for (const OpDef &op : g.ops)
    if (op.kind == "primitive")
      types.push_back(std::get<std::string>(op.attrs.at("op_type")));
  EXPECT_EQ(types, (std::vector<std::string>{"Div", "Erf", "Add", "Mul"}));
  const std::vector<std::string> k = kinds(g);
  EXPECT_EQ(std::count(k.begin(), k.end(), "layernorm"), 1);
  int constants = 0;
  for (const TensorDef &t : g.tensors)
    constants += t.role == TensorRole::Constant;
  EXPECT_EQ(constants, 3); // 2, 1 and 0.5
  EXPECT_EQ(g.parameterCount(), 208);
}

TEST(FuseImportedTest, ListsUnfusedLayersAlikeWhateverTheNodeOrder) {
  // Two layers y = Sigmoid(x) * Tanh(x), the file listing the branches in
  // opposite orders: read back depth-first from the loss, both layers list
  // their primitives alike, as the planner's layer collapse needs.
  Onnx o;
  int x = o.b.input("x", {2, 3});
  int t = o.b.input("t", {2}, DType::I32);
  for (int layer = 0; layer < 2; ++layer) {
    o.b.setLayer(layer);
    const std::string l = "l" + std::to_string(layer) + ".";
    int s = -1, h = -1;
    if (layer == 0) {
      s = o.ew("Sigmoid", l + "sigmoid", {x});
      h = o.ew("Tanh", l + "tanh", {x});
    } else {
      h = o.ew("Tanh", l + "tanh", {x});
      s = o.ew("Sigmoid", l + "sigmoid", {x});
    }
    x = o.ew("Mul", l + "mul", {s, h});
  }
  o.b.setLayer(-1);
  int loss = o.b.op("cross_entropy", "loss", {x, t});
  ModelGraph g = o.b.finish(loss, 0, 2, 0);
  fuseImportedGraph(g, "m.onnx");
  std::vector<std::string> layer0, layer1;
  for (const OpDef &op : g.ops)
    if (op.kind == "primitive")
      (op.layer == 0 ? layer0 : layer1)
          .push_back(std::get<std::string>(op.attrs.at("op_type")));
  EXPECT_EQ(layer0, (std::vector<std::string>{"Sigmoid", "Tanh", "Mul"}));
  EXPECT_EQ(layer1, layer0);
}

/// x [2,3] through one primitive `type` (f32 [2,3]) into the loss with
/// targets t [2]: a graph whose only question is that primitive.
ModelGraph onePrimitive(const std::string &type, const std::string &name,
                        ops::Attrs attrs = {}, int position = -1) {
  Onnx o;
  int x = o.b.input("x", {2, 3});
  int t = o.b.input("t", {2}, DType::I32);
  int e = o.prim(type, name, {x}, {2, 3}, std::move(attrs), position);
  int loss = o.b.op("cross_entropy", "loss", {e, t});
  return o.b.finish(loss, 0, 2, 0);
}

TEST(FuseImportedTest, RefusesAPrimitiveWithoutAKernel) {
  expectRefused(onePrimitive("Atan", "atan", {}, 7),
                "m.onnx: node 'atan' (Atan, position 7): Atan is outside "
                "the model vocabulary, no sbp-fuse pattern recognised it "
                "and it has no kernel");
}

TEST(FuseImportedTest, RefusesAFormItsKernelDoesNotRun) {
  expectRefused(onePrimitive("Cast", "cast", {{"to", int64_t(7)}}, 4),
                "m.onnx: node 'cast' (Cast, position 4): Cast is outside "
                "the model vocabulary, no sbp-fuse pattern recognised it "
                "and its kernel does not run it: Cast to a type other than "
                "float");
}

TEST(FuseImportedTest, PositionDefaultsToTheOpIndex) {
  // No position given.
  FusedGraph fused = fuseImported(onePrimitive("Atan", "atan"));
  EXPECT_EQ(fused.primitiveName, "atan");
  EXPECT_EQ(fused.primitiveType, "Atan");
  EXPECT_EQ(fused.primitivePosition, 0);
  EXPECT_FALSE(fused.ok());
}

TEST(FuseImportedTest, SkipsThePassesNamed) {
  // Without sbp-fuse-norms the LayerNorm stays decomposed, as primitives.
  ModelGraph g = mlpWithDecomposedGeluAndNorm(M_SQRT2);
  FusedGraph fused = fuseImported(g, {"sbp-fuse-norms"});
  ASSERT_TRUE(fused.ok()) << fused.error;
  const std::vector<std::string> k = kinds(fused.graph);
  EXPECT_EQ(std::count(k.begin(), k.end(), "layernorm"), 0);
  EXPECT_EQ(std::count(k.begin(), k.end(), "gelu"), 1);
  EXPECT_GT(std::count(k.begin(), k.end(), "primitive"), 0);
}

TEST(FuseImportedTest, RefusesAConstantReadByAModelOp) {
  Onnx o;
  int x = o.b.input("x", {2, 3});
  int t = o.b.input("t", {2}, DType::I32);
  int c = o.b.constant("table", {2, 3}, DType::F32, {1, 2, 3, 4, 5, 6});
  int m = o.b.op("mul", "scale", {x, c});
  int loss = o.b.op("cross_entropy", "loss", {m, t});
  ModelGraph g = o.b.finish(loss, 0, 2, 0);
  EXPECT_THROW(
      {
        try {
          fuseImportedGraph(g, "m.onnx");
        } catch (const UserError &e) {
          EXPECT_STREQ(e.what(), "m.onnx: node 'scale' (mul): reads the "
                                 "constant 'table', which no op of the model "
                                 "vocabulary takes");
          throw;
        }
      },
      UserError);
}

TEST(FuseImportedTest, NamesAMalformedGraph) {
  // What GraphBuilder would refuse, built past it: a front end's bug is
  // reported, not fused.
  Onnx o;
  int x = o.b.input("x", {2, 3});
  int t = o.b.input("t", {2}, DType::I32);
  int c = o.b.constant("table", {2, 3}, DType::F32, {1, 2, 3, 4, 5, 6});
  int e = o.prim("Add", "add", {x, c}, {2, 3});
  int loss = o.b.op("cross_entropy", "loss", {e, t});
  ModelGraph g = o.b.finish(loss, 0, 2, 0);
  g.tensors[c].values.pop_back();
  try {
    fuseImportedGraph(g, "m.onnx");
    FAIL() << "expected a refusal";
  } catch (const UserError &e) {
    EXPECT_STREQ(e.what(), "m.onnx: the imported graph is malformed: "
                           "constant 'table': expected 6 values, got 5");
  }
}

TEST(FuseImportedTest, LeavesAGraphWithoutPrimitivesAlone) {
  ModelGraph g = import::importModel("tiny-gpt", {});
  const ModelGraph before = g;
  EXPECT_FALSE(hasImportedPrimitives(g));
  fuseImportedGraph(g, "tiny-gpt");
  EXPECT_EQ(kinds(g), kinds(before));
  EXPECT_EQ(g.tensors.size(), before.tensors.size());
}

/// tiny-llama (examples/models/tiny-llama.json) at batch 2, sequence 4, as
/// transformers' LlamaForCausalLM exports it: the model ops the ONNX reader
/// recognises in C++ (linear, matmul, reshape, transpose, softmax, add, mul)
/// and everything else as primitives over shared constants, each layer as
/// tests/lit/passes/fuse_pipeline.mlir writes it.
class DecomposedLlama {
public:
  static constexpr int64_t T = 4, C = 64, H = 4, G = 2, D = 16, I = 176,
                           V = 256, L = 2;
  explicit DecomposedLlama(int64_t batch) : B(batch) {}
  ModelGraph build() {
    int ids = o.b.input("input_ids", {B, T}, DType::I32);
    int targets = o.b.input("targets", {B, T}, DType::I32);
    constants();
    int embed = o.b.param("model.embed_tokens.weight", {V, C}, "normal", 0.02);
    int x = o.b.op("embedding", "/model/embed_tokens/Gather", {ids, embed});
    for (int l = 0; l < L; ++l)
      x = layer(l, x);
    o.b.setLayer(-1);
    x = rmsnorm("/model/norm/", "model.norm.weight", x);
    int head = o.b.param("lm_head.weight", {V, C}, "normal", 0.02);
    int logits = linear("/lm_head/MatMul", head, x);
    int loss = o.b.op("cross_entropy", "loss", {logits, targets});
    return o.b.finish(loss, L, B, T);
  }

  /// Only the rotary of q: x [B,T,H·D] -> heads -> rotate -> back -> loss.
  ModelGraph rotaryOnly() {
    int x = o.b.input("x", {B, T, H * D});
    int targets = o.b.input("targets", {B, T}, DType::I32);
    constants();
    int r = rotate("rot/", heads("q/", x, H));
    int back = o.b.op("transpose", "back/Transpose", {r},
                      {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    int y = o.b.op("reshape", "back/Reshape", {back},
                   {{"shape", std::vector<int64_t>{B, T, H * D}}});
    int loss = o.b.op("cross_entropy", "loss", {y, targets});
    return o.b.finish(loss, 0, B, T);
  }

private:
  void constants() {
    axes = o.i64("c.axes", {-1});
    two = o.f32("c.two", 2.0);
    eps = o.f32("c.eps", 1e-6);
    zero = o.i64("c.zero", {0});
    half = o.i64("c.half", {D / 2});
    end = o.i64("c.end", {std::numeric_limits<int64_t>::max()});
    one = o.i64("c.one", {1});
    kvAxis = o.i64("c.kv_axis", {2});
    sqrtD = o.f32("c.sqrt_d", std::sqrt(double(D)));
    kvShape = o.i64("c.kv_shape", {B, G, H / G, T, D});
    // Llama's tables: cos/sin(t·θ^(-2i/D)), θ = 1e4, both halves alike.
    std::vector<double> c, s;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < D; ++j) {
        double a = t * std::pow(1e4, -2.0 * (j % (D / 2)) / D);
        c.push_back(std::cos(a));
        s.push_back(std::sin(a));
      }
    cos = o.b.constant("c.cos", {1, T, D}, DType::F32, c);
    sin = o.b.constant("c.sin", {1, T, D}, DType::F32, s);
    std::vector<double> m;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j)
        m.push_back(j <= i ? 0.0 : -std::numeric_limits<double>::infinity());
    mask = o.b.constant("c.mask", {1, 1, T, T}, DType::F32, m);
  }

  int linear(const std::string &name, int w, int x) {
    return o.b.op("linear", name, {x, w}, {{"transpose_weight", true}});
  }
  int param(const std::string &name, ops::Shape s) {
    return o.b.param(name, s, "normal", 0.02);
  }

  int rmsnorm(const std::string &n, const std::string &weight, int x) {
    int w = o.b.param(weight, {C}, "ones");
    int sq = o.ew("Pow", n + "Pow", {x, two});
    int var = o.prim("ReduceMean", n + "ReduceMean", {sq, axes}, {B, T, 1},
                     {{"keepdims", int64_t(1)}});
    int s = o.ew("Sqrt", n + "Sqrt", {o.ew("Add", n + "Add", {var, eps})});
    int r = o.ew("Reciprocal", n + "Reciprocal", {s});
    return o.ew("Mul", n + "Mul_1", {w, o.ew("Mul", n + "Mul", {x, r})});
  }

  /// [B,T,h·D] -> [B,h,T,D]
  int heads(const std::string &n, int x, int64_t h) {
    int r = o.b.op("reshape", n + "Reshape", {x},
                   {{"shape", std::vector<int64_t>{B, T, h, D}}});
    return o.b.op("transpose", n + "Transpose", {r},
                  {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  }

  int rotate(const std::string &n, int x4) {
    ops::Shape s = o.shape(x4), halfShape = s;
    halfShape.back() /= 2;
    ops::Shape table{1, 1, T, D};
    int cu = o.prim("Unsqueeze", n + "Unsqueeze", {cos, one}, table);
    int su = o.prim("Unsqueeze", n + "Unsqueeze_1", {sin, one}, table);
    int x1 =
        o.prim("Slice", n + "Slice", {x4, zero, half, axes, one}, halfShape);
    int x2 =
        o.prim("Slice", n + "Slice_1", {x4, half, end, axes, one}, halfShape);
    int rh = o.prim("Concat", n + "Concat", {o.ew("Neg", n + "Neg", {x2}), x1},
                    s, {{"axis", int64_t(-1)}});
    int c = o.ew("Mul", n + "Mul", {x4, cu});
    return o.ew("Add", n + "Add", {c, o.ew("Mul", n + "Mul_1", {rh, su})});
  }

  /// transformers' repeat_kv: [B,G,T,D] -> [B,H,T,D]
  int repeatKv(const std::string &n, int x4) {
    int u = o.prim("Unsqueeze", n + "Unsqueeze", {x4, kvAxis}, {B, G, 1, T, D});
    int e = o.prim("Expand", n + "Expand", {u, kvShape}, {B, G, H / G, T, D});
    return o.b.op("reshape", n + "Reshape", {e},
                  {{"shape", std::vector<int64_t>{B, H, T, D}}});
  }

  int layer(int l, int x) {
    o.b.setLayer(l);
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string n = "/model/layers." + std::to_string(l) + "/";
    int h = rmsnorm(n + "input_layernorm/", p + "input_layernorm.weight", x);
    int wq = param(p + "self_attn.q_proj.weight", {H * D, C});
    int wk = param(p + "self_attn.k_proj.weight", {G * D, C});
    int wv = param(p + "self_attn.v_proj.weight", {G * D, C});
    int wo = param(p + "self_attn.o_proj.weight", {C, H * D});
    const std::string a = n + "self_attn/";
    int q = linear(a + "q_proj/MatMul", wq, h);
    int k = linear(a + "k_proj/MatMul", wk, h);
    int v = linear(a + "v_proj/MatMul", wv, h);
    int q4 = heads(a + "q/", q, H), k4 = heads(a + "k/", k, G);
    int v4 = heads(a + "v/", v, G);
    int qr = rotate(a + "rotary_q/", q4), kr = rotate(a + "rotary_k/", k4);
    int kx = repeatKv(a + "repeat_k/", kr), vx = repeatKv(a + "repeat_v/", v4);
    int kt = o.b.op("transpose", a + "Transpose_k", {kx},
                    {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
    int sc = o.b.op("matmul", a + "MatMul", {qr, kt});
    int scm = o.ew("Add", a + "Add_mask",
                   {o.ew("Div", a + "Div", {sc, sqrtD}), mask});
    int pr = o.b.op("softmax", a + "Softmax", {scm}, {{"axis", int64_t(-1)}});
    int ov = o.b.op("matmul", a + "MatMul_1", {pr, vx});
    int ot = o.b.op("transpose", a + "Transpose_o", {ov},
                    {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    int att = o.b.op("reshape", a + "Reshape_o", {ot},
                     {{"shape", std::vector<int64_t>{B, T, H * D}}});
    int r1 =
        o.b.op("add", n + "Add", {x, linear(a + "o_proj/MatMul", wo, att)});
    h = rmsnorm(n + "post_attention_layernorm/",
                p + "post_attention_layernorm.weight", r1);
    int wg = param(p + "mlp.gate_proj.weight", {I, C});
    int wu = param(p + "mlp.up_proj.weight", {I, C});
    int wd = param(p + "mlp.down_proj.weight", {C, I});
    int g = linear(n + "mlp/gate_proj/MatMul", wg, h);
    int u = linear(n + "mlp/up_proj/MatMul", wu, h);
    int silu = o.ew("Mul", n + "mlp/act_fn/Mul",
                    {g, o.ew("Sigmoid", n + "mlp/act_fn/Sigmoid", {g})});
    int sw = o.b.op("mul", n + "mlp/Mul", {silu, u});
    return o.b.op("add", n + "Add_1",
                  {r1, linear(n + "mlp/down_proj/MatMul", wd, sw)});
  }

  const int64_t B;
  Onnx o;
  int axes, two, eps, zero, half, end, one, kvAxis, sqrtD, kvShape, cos, sin,
      mask;
};

TEST(FuseImportedTest, DecomposedLlamaFusesToTheTinyLlamaTemplate) {
  ModelGraph g = DecomposedLlama(2).build();
  import::ImportOptions options;
  options.batch = 2;
  options.seq = DecomposedLlama::T;
  const ModelGraph twin = import::importModel("tiny-llama", options);
  EXPECT_EQ(g.parameterCount(), twin.parameterCount());
  fuseImportedGraph(g, "tiny-llama.onnx");

  // Op by op: kind, attributes (defaults explicit on both sides) and layer.
  ASSERT_EQ(kinds(g), kinds(twin));
  for (size_t i = 0; i < g.ops.size(); ++i) {
    EXPECT_EQ(g.ops[i].attrs, twin.ops[i].attrs)
        << g.ops[i].name << " against " << twin.ops[i].name;
    EXPECT_EQ(g.ops[i].layer, twin.ops[i].layer) << g.ops[i].name;
  }
  // The same parameters, by name, shape and initialisation.
  std::map<std::string, std::pair<ops::Shape, std::string>> ours, theirs;
  for (const TensorDef &t : g.tensors)
    if (t.role == TensorRole::Parameter)
      ours[t.name] = {t.shape, t.init};
  for (const TensorDef &t : twin.tensors)
    if (t.role == TensorRole::Parameter)
      theirs[t.name] = {t.shape, t.init};
  EXPECT_EQ(ours, theirs);
  EXPECT_EQ(g.parameterCount(), twin.parameterCount());
  EXPECT_EQ(g.forwardFlopsPerSample(), twin.forwardFlopsPerSample());
  // A fused op keeps the name of the op it replaced last; the rotary's head
  // view (reshape, transpose at the same place) went into the attention.
  EXPECT_EQ(g.ops[5].name, "/model/layers.0/self_attn/rotary_q/Add.rotary");
  EXPECT_EQ(g.ops[7].name, "/model/layers.0/self_attn/Reshape_o");
  expectValidates(g);
}

TEST(FuseImportedTest, OpsSharingALocationAreNamedApart) {
  // Without an attention to absorb it, the rotary's head view stays: three
  // ops at rot/Add; the transpose computes the Add's value and keeps its name.
  ModelGraph g = DecomposedLlama(1).rotaryOnly();
  fuseImportedGraph(g, "rotary.onnx");
  ASSERT_EQ(kinds(g), (std::vector<std::string>{"rotary", "reshape",
                                                "transpose", "transpose",
                                                "reshape", "cross_entropy"}));
  EXPECT_EQ(g.ops[0].name, "rot/Add.rotary");
  EXPECT_EQ(g.ops[1].name, "rot/Add.reshape");
  EXPECT_EQ(g.ops[2].name, "rot/Add");
  EXPECT_EQ(g.tensors[g.ops[2].results[0]].name, "rot/Add");
  EXPECT_EQ(g.tensors[g.ops[0].results[0]].name, "rot/Add.rotary");
  EXPECT_EQ(g.tensors[g.ops[0].operands[0]].name, "x");
  EXPECT_EQ(g.ops[0].attrs, (ops::Attrs{{"num_heads", int64_t(4)},
                                        {"head_dim", int64_t(16)},
                                        {"theta", 1e4}}));
  expectValidates(g);
}

/// The planner takes the fused graph as it takes the template's: the same
/// tp=2 plan of tiny-llama on two H200s prices to the same step and memory.
TEST(FuseImportedTest, FusedLlamaPlansAsTheTemplate) {
  auto fused = [](int64_t batch) {
    ModelGraph g = DecomposedLlama(batch).build();
    fuseImportedGraph(g, "tiny-llama.onnx");
    return g;
  };
  auto twin = [](int64_t batch) {
    import::ImportOptions options;
    options.batch = batch;
    options.seq = DecomposedLlama::T;
    return import::importModel("tiny-llama", options);
  };
  planner::PlannerOptions options;
  options.globalBatch = 8;
  options.fixed.tp = 2;
  const cost::Cluster cluster = cost::loadCluster("h200x2-nvlink");
  auto ours = planner::plan(fused(1), fused(2), cluster, options);
  auto theirs = planner::plan(twin(1), twin(2), cluster, options);
  ASSERT_TRUE(static_cast<bool>(ours)) << ours.error();
  ASSERT_TRUE(static_cast<bool>(theirs)) << theirs.error();
  const auto *a = std::get_if<planner::Plan>(&*ours);
  const auto *b = std::get_if<planner::Plan>(&*theirs);
  ASSERT_TRUE(a && b);
  EXPECT_DOUBLE_EQ(a->predicted.stepTime, b->predicted.stepTime);
  EXPECT_DOUBLE_EQ(a->predicted.peakMemory, b->predicted.peakMemory);
  EXPECT_GT(a->predicted.stepTime, 0);
}

} // namespace
