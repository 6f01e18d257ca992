//===- ImportTest.cpp - imported models match the real ones --------------===//
//
// Parameter counts of real published configurations (examples/models/ holds
// their config.json), tensor names and shapes, tying, Hugging Face defaults,
// and forward FLOPs against the closed forms. Each expected number is derived
// in the comment above it.
//
//===----------------------------------------------------------------------===//
#include "ImportTestUtil.h"

#include <cmath>
#include <map>

using namespace autoddl;
using autoddl::testing::importError;

namespace {

ModelGraph load(const std::string &name, import::ImportOptions o = {}) {
  return import::importModel(name, o);
}

const TensorDef *tensor(const ModelGraph &g, const std::string &name) {
  for (const TensorDef &t : g.tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

std::map<std::string, int64_t> flopsByKind(const ModelGraph &g) {
  std::map<std::string, int64_t> out;
  for (const OpDef &op : g.ops)
    out[op.kind] += g.opForwardFlops(op);
  return out;
}

// GPT-2 family, tied head: V·C (wte) + P·C (wpe) + L·(12C² + 13C) + 2C (ln_f).
// Per layer: c_attn C·3C+3C, attn c_proj C²+C, c_fc 4C²+4C, mlp c_proj 4C²+C,
// two LayerNorms 4C: 12C² + 13C.
int64_t gptParams(int64_t V, int64_t P, int64_t C, int64_t L) {
  return V * C + P * C + L * (12 * C * C + 13 * C) + 2 * C;
}

TEST(ImportParams, Gpt2Family) {
  // 50257·768 + 1024·768 + 12·(12·768² + 13·768) + 2·768 = 124,439,808, the
  // figure Hugging Face reports for gpt2 (GPT2LMHeadModel, lm_head tied).
  EXPECT_EQ(gptParams(50257, 1024, 768, 12), 124439808);
  EXPECT_EQ(load("gpt2").parameterCount(), 124439808);
  // gpt2-medium: C=1024, L=24 -> 354,823,168.
  EXPECT_EQ(load("gpt2-medium").parameterCount(), 354823168);
  EXPECT_EQ(gptParams(50257, 1024, 1024, 24), 354823168);
  // gpt2-large: C=1280, L=36 -> 774,030,080.
  EXPECT_EQ(load("gpt2-large").parameterCount(), 774030080);
  // gpt2-xl: C=1600, L=48 -> 1,557,611,200.
  EXPECT_EQ(load("gpt2-xl").parameterCount(), 1557611200);
  // GPT-3 175B (Brown et al. 2020, Table 2.1: d_model 12288, 96 layers, 96
  // heads, n_ctx 2048, GPT-2 vocabulary): 50257·12288 + 2048·12288 +
  // 96·(12·12288² + 13·12288) + 2·12288 = 174,604,259,328 (≈ the paper's
  // 175.0B).
  EXPECT_EQ(gptParams(50257, 2048, 12288, 96), 174604259328LL);
  EXPECT_EQ(load("gpt3-175b").parameterCount(), 174604259328LL);
}

// Llama, untied head: 2·V·C + L·(2C·H·D + 2C·G·D + 3C·I + 2C) + C.
int64_t llamaParams(int64_t V, int64_t C, int64_t I, int64_t L, int64_t H,
                    int64_t G) {
  int64_t D = C / H;
  return 2 * V * C + L * (2 * C * H * D + 2 * C * G * D + 3 * C * I + 2 * C) +
         C;
}

TEST(ImportParams, Llama2) {
  // Llama-2-7B: V=32000, C=4096, I=11008, L=32, no GQA -> 6,738,415,616 (the
  // count of meta-llama/Llama-2-7b-hf's safetensors).
  EXPECT_EQ(llamaParams(32000, 4096, 11008, 32, 32, 32), 6738415616LL);
  EXPECT_EQ(load("llama-2-7b").parameterCount(), 6738415616LL);
  // Llama-2-13B: C=5120, I=13824, L=40 -> 13,015,864,320.
  EXPECT_EQ(llamaParams(32000, 5120, 13824, 40, 40, 40), 13015864320LL);
  EXPECT_EQ(load("llama-2-13b").parameterCount(), 13015864320LL);
  // Llama-2-70B: C=8192, I=28672, L=80, H=64, G=8 (k/v 1024 wide) ->
  // 68,976,648,192.
  EXPECT_EQ(llamaParams(32000, 8192, 28672, 80, 64, 8), 68976648192LL);
  EXPECT_EQ(load("llama-2-70b").parameterCount(), 68976648192LL);
}

TEST(ImportParams, Bert) {
  // bert-base-uncased, BertForMaskedLM (no pooler): embeddings V·C + P·C +
  // 2·C + LN 2C = 23,837,184; 12 layers of 4(C²+C) + 2(C·I) + I + C + 4C =
  // 7,087,872 each; MLM transform C²+C + LN 2C, decoder tied, bias V:
  // 23,837,184 + 85,054,464 + 590,592 + 1,536 + 30,522 = 109,514,298.
  EXPECT_EQ(load("bert-base-uncased").parameterCount(), 109514298);
  // bert-large-uncased (C=1024, I=4096, L=24), same head: 335,174,458.
  EXPECT_EQ(load("bert-large-uncased").parameterCount(), 335174458);
  // BertModel: pooler C²+C instead of the MLM head: 23,837,184 + 85,054,464 +
  // 590,592 = 109,482,240.
  EXPECT_EQ(23837184 + 85054464 + 590592, 109482240);
  ModelGraph model = import::importModelText(
      R"({"model_type": "bert", "architectures": ["BertModel"]})", "b.json",
      "b", {});
  EXPECT_EQ(model.parameterCount(), 109482240);
  EXPECT_NE(tensor(model, "pooler.dense.weight"),
            nullptr); // BertModel: no "bert." prefix
}

TEST(ImportParams, VisionGraphAndMlp) {
  // torchvision vgg16: 13 convs 14,714,688 + classifier 25088·4096+4096 +
  // 4096²+4096 + 4096·1000+1000 = 123,642,856 -> 138,357,544 (torchvision
  // docs).
  EXPECT_EQ(load("vgg16").parameterCount(), 138357544);
  EXPECT_EQ(load("vgg16").numLayers, 16);
  // GCN on Cora (PyG GCNConv): 1433·16 + 16 + 16·7 + 7 = 23,063.
  EXPECT_EQ(load("gcn-cora").parameterCount(), 23063);
  // GAT on Cora (PyG GATConv, its GAT example: 8 heads x 8, then one head):
  // lin 1433·64, att_src and att_dst 64 each, bias 64; lin 64·7, att 7 + 7,
  // bias 7 = 92,373.
  EXPECT_EQ(load("gat-cora").parameterCount(), 92373);
  // GraphSAGE on Cora's sizes (PyG SAGEConv): lin_l (with bias) and lin_r
  // per layer, 2·1433·16 + 16 + 2·16·7 + 7 = 46,103.
  EXPECT_EQ(load("sage-cora").parameterCount(), 46103);
  // transformer_conv on Cora's sizes (PyG TransformerConv, one head, no root
  // weight): q, k, v per layer, 3·1433·16 + 16 + 3·16·7 + 7.
  EXPECT_EQ(load("transformer_conv-cora").parameterCount(), 69143);
  ModelGraph tc = import::importModelText(R"({"template": "transformer_conv"})",
                                          "t.json", "t", {});
  EXPECT_EQ(tc.parameterCount(), 69143);
  EXPECT_EQ(tc.family, "transformer_conv");
  // gat's heads: 4 heads of 8 (gat's default width) in the hidden layer, at
  // the other defaults (Cora's sizes): 1433·32 + 3·32 + 32·7 + 3·7.
  ModelGraph gat4 = import::importModelText(
      R"({"template": "gat", "config": {"heads": 4}})", "t.json", "t", {});
  EXPECT_EQ(gat4.parameterCount(), 1433 * 32 + 3 * 32 + 32 * 7 + 3 * 7);
  EXPECT_EQ(gat4.family, "gat");
  // heads is gat's field only.
  EXPECT_THROW(
      import::importModelText(R"({"template": "gcn", "config": {"heads": 4}})",
                              "t.json", "t", {}),
      UserError);
  // MLP 784-1024-1024-10 with biases: 803,840 + 1,049,600 + 10,250 = 1,863,690.
  EXPECT_EQ(load("mlp-mnist").parameterCount(), 1863690);
  // tiny-gpt template: gptParams(256, 64, 64, 2) = 120,576.
  EXPECT_EQ(load("tiny-gpt").parameterCount(), gptParams(256, 64, 64, 2));
  // tiny-llama: V=256, C=64, I=176, L=2, H=4, G=2 (D=16, k/v 32 wide).
  EXPECT_EQ(load("tiny-llama").parameterCount(),
            llamaParams(256, 64, 176, 2, 4, 2));
  // tiny-graph: fc1 32·64+64, fc2 64·10+10 = 2,762.
  EXPECT_EQ(load("tiny-graph").parameterCount(), 2762);
}

TEST(ImportTensors, NamesShapesAndTying) {
  ModelGraph gpt2 = load("gpt2");
  // GPT-2's Conv1D stores [in, out]: c_attn is [768, 3·768].
  const TensorDef *cAttn = tensor(gpt2, "transformer.h.0.attn.c_attn.weight");
  ASSERT_NE(cAttn, nullptr);
  EXPECT_EQ(cAttn->shape, (ops::Shape{768, 2304}));
  EXPECT_EQ(tensor(gpt2, "transformer.h.11.mlp.c_proj.weight")->shape,
            (ops::Shape{3072, 768}));
  // Tied: no lm_head.weight tensor; the head reads wte.
  EXPECT_EQ(tensor(gpt2, "lm_head.weight"), nullptr);
  const OpDef &head = gpt2.ops[gpt2.ops.size() - 2];
  EXPECT_EQ(head.name, "lm_head");
  EXPECT_EQ(gpt2.tensors[head.operands[1]].name, "transformer.wte.weight");
  // _init_weights: c_proj std = 0.02 / sqrt(2·n_layer); LayerNorm weight ones.
  EXPECT_DOUBLE_EQ(tensor(gpt2, "transformer.h.0.attn.c_proj.weight")->initStd,
                   0.02 / std::sqrt(24.0));
  EXPECT_EQ(tensor(gpt2, "transformer.ln_f.weight")->init, "ones");
  // wte, wpe + 12 layers of 12 tensors + ln_f's 2 = 148 tensors, as in
  // GPT2LMHeadModel.named_parameters() (which lists the tied lm_head once).
  int params = 0;
  for (const TensorDef &t : gpt2.tensors)
    params += t.role == TensorRole::Parameter;
  EXPECT_EQ(params, 148);

  ModelGraph llama = load("llama-2-70b");
  // GQA: k_proj maps 8192 -> 8 kv heads · 128 = 1024 (torch Linear [out, in]).
  EXPECT_EQ(tensor(llama, "model.layers.79.self_attn.k_proj.weight")->shape,
            (ops::Shape{1024, 8192}));
  EXPECT_EQ(tensor(llama, "lm_head.weight")->shape, (ops::Shape{32000, 8192}));
  EXPECT_EQ(tensor(llama, "model.layers.0.self_attn.q_proj.bias"), nullptr);

  ModelGraph bert = load("bert-base-uncased");
  EXPECT_EQ(tensor(bert, "bert.embeddings.token_type_embeddings.weight")->shape,
            (ops::Shape{2, 768}));
  EXPECT_EQ(tensor(bert, "cls.predictions.bias")->shape, (ops::Shape{30522}));
  EXPECT_EQ(tensor(bert, "cls.predictions.decoder.weight"), nullptr); // tied
}

TEST(ImportHf, DefaultsMatchTransformers) {
  // An empty GPT2Config is gpt2 (124M); extra fields are ignored.
  ModelGraph g = import::importModelText(
      R"({"model_type": "gpt2", "foo": [1]})", "c.json", "c", {});
  EXPECT_EQ(g.parameterCount(), 124439808);
  EXPECT_EQ(g.seq, 1024); // n_positions
  // LlamaConfig() is the 7B shape (max_position_embeddings 2048 in the class).
  g = import::importModelText(
      R"({"model_type": "llama", "num_key_value_heads": null})", "c.json", "c",
      {});
  EXPECT_EQ(g.parameterCount(), 6738415616LL);
  EXPECT_EQ(g.seq, 2048);
  // BertConfig() with the masked-LM head is bert-base-uncased's shape.
  g = import::importModelText(R"({"model_type": "bert"})", "c.json", "c", {});
  EXPECT_EQ(g.parameterCount(), 109514298);
  // Untying GPT-2 adds lm_head.weight [V, C]: 124,439,808 + 50257·768.
  g = import::importModelText(
      R"({"model_type": "gpt2", "tie_word_embeddings": false})", "c.json", "c",
      {});
  EXPECT_EQ(g.parameterCount(), 124439808 + 50257 * 768);
  // Llama with attention_bias: q,k,v,o biases, 4·4096 per layer on 32 layers.
  g = import::importModelText(
      R"({"model_type": "llama", "attention_bias": true})", "c.json", "c", {});
  EXPECT_EQ(g.parameterCount(), 6738415616LL + 32 * 4 * 4096);
}

TEST(ImportFlops, Gpt2MatchesClosedForms) {
  const int64_t T = 1024, C = 768, L = 12, V = 50257, H = 12, D = 64;
  ModelGraph g = load("gpt2");
  auto byKind = flopsByKind(g);
  // Linear layers: 2·T·(weights) + T·(biases); weights per layer 12C², biases
  // 3C + C + 4C + C = 9C; the tied head adds V·C weights.
  EXPECT_EQ(byKind["linear"], 2 * T * (L * 12 * C * C + V * C) + T * L * 9 * C);
  // Attention per layer: 4·H·T²·D + 5·H·T² (docs/ir.md).
  EXPECT_EQ(byKind["attention"], L * (4 * H * T * T * D + 5 * H * T * T));
  // Kaplan et al. (2020): C_forward ≈ 2·N_nonembedding-position +
  // 2·n_layer·n_ctx·d per token; with the tied head: 2·(N - P·C)·T + 4·L·T²·C.
  // Elementwise ops make the difference; it stays under 1%.
  double approx =
      2.0 * (g.parameterCount() - 1024 * C) * T + 4.0 * L * T * T * C;
  EXPECT_NEAR(g.forwardFlopsPerSample() / approx, 1.0, 0.01);
}

TEST(ImportFlops, LlamaAndBatchSeq) {
  import::ImportOptions o;
  o.batch = 4;
  o.seq = 512;
  ModelGraph g = load("llama-2-7b", o);
  const int64_t T = 512, C = 4096, I = 11008, L = 32, V = 32000, H = 32,
                D = 128;
  EXPECT_EQ(g.tensors[0].shape, (ops::Shape{4, 512})); // input_ids [B, T]
  auto byKind = flopsByKind(g);
  // No biases: 2·B·T·(L·(4C² + 3CI) + V·C).
  EXPECT_EQ(byKind["linear"],
            2 * 4 * T * (L * (4 * C * C + 3 * C * I) + V * C));
  EXPECT_EQ(byKind["attention"], 4 * L * (4 * H * T * T * D + 5 * H * T * T));
  // Per sample = total / B; 2·N·T + 4·L·T²·C within 1% (embedding lookup is
  // free, the untied head is not).
  double approx = 2.0 * (g.parameterCount() - V * C) * T + 4.0 * L * T * T * C;
  EXPECT_NEAR(g.forwardFlopsPerSample() / approx, 1.0, 0.01);
}

TEST(ImportGraph, OpsAreOrderedAndLayered) {
  // Ops listed consumer-first still import: the reader sorts them.
  std::string text = R"({"graph": {
    "inputs": [{"name": "x", "shape": [2, 8]}, {"name": "y", "shape": [2], "dtype": "i32"}],
    "params": [{"name": "w", "shape": [4, 8]}],
    "ops": [
      {"op": "cross_entropy", "name": "loss", "inputs": ["h", "y"], "outputs": ["loss"]},
      {"op": "linear", "name": "fc", "inputs": ["x", "w"], "outputs": ["h"], "layer": 0}],
    "loss": "loss"}})";
  ModelGraph g = import::importModelText(text, "g.json", "g", {});
  ASSERT_EQ(g.ops.size(), 2u);
  EXPECT_EQ(g.ops[0].name, "fc");
  EXPECT_EQ(g.ops[0].layer, 0);
  EXPECT_EQ(g.numLayers, 1);
  EXPECT_EQ(g.tensors[g.loss].name, "loss");
  // transpose_weight defaulted to true (torch Linear) and written explicitly.
  EXPECT_TRUE(std::get<bool>(g.ops[0].attrs.at("transpose_weight")));
  // 2·M·N·K = 2·2·4·8 = 128 for fc, + 5·(2·4) = 40 for the loss; per sample
  // / 1.
  EXPECT_EQ(g.forwardFlopsPerSample(), 128 + 40);
}

TEST(ImportBuiltins, NamesAndRule) {
  auto names = import::builtinModelNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "gpt2"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "llama-2-70b"), names.end());
  try {
    load("gpt5");
    FAIL() << "gpt5 imported";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find("not a built-in model"),
              std::string::npos);
  }
}

} // namespace
