//===- LlamaExportTest.cpp - the dynamo exports as the reader reads them -===//
//
// transformers' LlamaForCausalLM and GPT2LMHeadModel exported by
// torch.onnx.export (dynamo, tests/onnx/exports), read with their primitives
// kept (before the fusion passes): the parameters are PyTorch's and the
// twin's, the constants the reader evaluated are the causal mask and the
// rotary tables the model computes, and every op has the twin's layer.
//
//===----------------------------------------------------------------------===//
#include "ir/import/ModelImporter.h"
#include "ir/import/Readers.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

using namespace autoddl;

namespace {

// The parameters (name -> shape) of a graph.
std::map<std::string, ops::Shape> parameters(const ModelGraph &g) {
  std::map<std::string, ops::Shape> out;
  for (const TensorDef &t : g.tensors)
    if (t.role == TensorRole::Parameter)
      out[t.name] = t.shape;
  return out;
}

ModelGraph readExport(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  import::BuildOptions o;
  o.name = "export";
  o.batch = 2;
  o.seq = 16;
  return import::readOnnx(bytes.str(), path, o);
}

ModelGraph twin(const std::string &name) {
  import::ImportOptions io;
  io.batch = 2;
  io.seq = 16;
  return import::importModel(name, io);
}

class LlamaExport : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    g = new ModelGraph(readExport("tests/onnx/exports/tiny-llama.onnx"));
  }
  static void TearDownTestSuite() { delete g; }

  // The constant operands of primitives of type `op` with shape `shape`.
  std::vector<const TensorDef *> constants(const std::string &op,
                                           const ops::Shape &shape) const {
    std::vector<const TensorDef *> out;
    for (const OpDef &o : g->ops)
      if (o.kind == "primitive" &&
          std::get<std::string>(o.attrs.at("op_type")) == op)
        for (int t : o.operands)
          if (g->tensors[t].role == TensorRole::Constant &&
              g->tensors[t].shape == shape)
            out.push_back(&g->tensors[t]);
    return out;
  }

  static ModelGraph *g;
};

ModelGraph *LlamaExport::g = nullptr;

TEST_F(LlamaExport, ParametersAreTheTwins) {
  // 125,248: PyTorch's count (tests/onnx/exports/tiny-llama.json), under
  // the twin's names and shapes (W [out,in] of each Linear).
  EXPECT_EQ(g->parameterCount(), 125248);
  EXPECT_EQ(g->numLayers, 2);
  EXPECT_EQ(parameters(*g), parameters(twin("tiny-llama")));
}

TEST(GptExport, ParametersAreTheTwins) {
  // transformers' GPT2LMHeadModel by dynamo: 120,576 parameters as PyTorch
  // counts them (tiny-gpt.json), the head tied to transformer.wte.weight,
  // Conv1D weights [in, out] as the twin's.
  ModelGraph g = readExport("tests/onnx/exports/tiny-gpt.onnx");
  EXPECT_EQ(g.parameterCount(), 120576);
  EXPECT_EQ(g.numLayers, 2);
  EXPECT_EQ(parameters(g), parameters(twin("tiny-gpt")));
}

TEST_F(LlamaExport, CausalMaskIsEvaluated) {
  // The mask added to the scores: 0 where key j <= query i, float32's lowest
  // above the diagonal (transformers' min_dtype), per sample.
  auto masks = constants("Add", {2, 1, 16, 16});
  ASSERT_EQ(masks.size(), 2u); // one per layer
  for (const TensorDef *m : masks)
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j)
          ASSERT_EQ(m->values[(b * 16 + i) * 16 + j], j <= i ? 0.0 : -FLT_MAX)
              << m->name << " at " << b << "," << i << "," << j;
}

TEST_F(LlamaExport, RotaryTablesAreEvaluated) {
  // cos/sin of position p times inv_freq[k] = 10000^(-2k/16) (head dim 16),
  // the 8 frequencies repeated twice along the last axis; float32.
  auto tables = constants("Mul", {1, 1, 16, 16});
  ASSERT_FALSE(tables.empty());
  int cos = 0, sin = 0;
  for (const TensorDef *t : tables) {
    bool isCos = t->values[0] == 1.0;
    (isCos ? cos : sin)++;
    for (int p = 0; p < 16; ++p)
      for (int i = 0; i < 16; ++i) {
        float inv = (float)(1.0 / std::pow(10000.0, 2.0 * (i % 8) / 16.0));
        float angle = (float)p * inv;
        double want = isCos ? std::cos(angle) : std::sin(angle);
        ASSERT_NEAR(t->values[p * 16 + i], want, 2e-6)
            << t->name << " at " << p << "," << i;
      }
  }
  EXPECT_GT(cos, 0);
  EXPECT_GT(sin, 0);
}

TEST_F(LlamaExport, PrimitivesAreTheDecomposedOps) {
  // Per layer: two RMSNorms (Pow, ReduceMean, Add eps, Sqrt, Reciprocal,
  // Mul, Mul by the weight), rotary on q and k (Mul cos, Slice x2, Neg,
  // Concat, Mul sin), the k/v head expansion (Unsqueeze, Expand), the
  // attention's scale (Mul x2), mask (Add), NaN guard (IsNaN, Where) and
  // SiLU's Sigmoid; then the final RMSNorm.
  std::map<std::string, int> kinds;
  for (const OpDef &o : g->ops)
    kinds[o.kind == "primitive" ? std::get<std::string>(o.attrs.at("op_type"))
                                : o.kind]++;
  std::map<std::string, int> want = {{"Add", 2 * 3 + 1},
                                     {"Concat", 2 * 2},
                                     {"Expand", 2 * 2},
                                     {"IsNaN", 2},
                                     {"Mul", 2 * 10 + 2},
                                     {"Neg", 2 * 2},
                                     {"Pow", 2 * 2 + 1},
                                     {"Reciprocal", 2 * 2 + 1},
                                     {"ReduceMean", 2 * 2 + 1},
                                     {"Sigmoid", 2},
                                     {"Slice", 2 * 4},
                                     {"Sqrt", 2 * 2 + 1},
                                     {"Unsqueeze", 2 * 2},
                                     {"Where", 2},
                                     {"add", 2 * 4},
                                     {"cross_entropy", 1},
                                     {"embedding", 1},
                                     {"linear", 2 * 7 + 1},
                                     {"matmul", 2 * 2},
                                     {"mul", 2 * 2},
                                     {"reshape", 2 * 8},
                                     {"softmax", 2},
                                     {"transpose", 2 * 5}};
  EXPECT_EQ(kinds, want);
}

TEST_F(LlamaExport, OpsCarryTheirLayer) {
  // An op reading layers.N's parameters is in layer N; a norm feeding layer
  // 1 is in layer 1; the residual add after layer 0's MLP is in layer 0;
  // the final norm, the head and the loss are in none.
  std::map<std::string, int> layer;
  for (const OpDef &o : g->ops)
    layer[o.name] = o.layer;
  EXPECT_EQ(layer.at("node_linear"), 0);     // layer 0's q_proj
  EXPECT_EQ(layer.at("node_linear_7"), 1);   // layer 1's q_proj
  EXPECT_EQ(layer.at("node_pow_3"), 1);      // layer 1's input norm
  EXPECT_EQ(layer.at("node_add_388"), 0);    // layer 0's last residual
  EXPECT_EQ(layer.at("node_pow_5"), -1);     // the final norm
  EXPECT_EQ(layer.at("node_linear_14"), -1); // lm_head
  EXPECT_EQ(layer.at("node_embedding"), -1);
}

} // namespace
