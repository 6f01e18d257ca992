//===- Templates.h - parametrised model families -------------------------===//
//
// One builder per family of docs/model-format.md. Each takes a config whose
// fields are already validated for type and sign (by the template reader or the
// Hugging Face reader), checks the relations between fields, and builds the op
// graph with the real model's parameter names (Hugging Face's for gpt, llama
// and bert; torchvision's for vgg; PyG's for gcn and gat).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::import {

/// What the caller asks for beyond the model: shapes and naming.
struct BuildOptions {
  std::string name;  // ModelGraph::name
  std::string place; // error prefix naming the config ("x.json: at /config: ")
  int64_t batch = 1; // samples per micro-batch
  int64_t seq = 0;   // sequence length; 0: the model's context length
  std::string loss;  // an ONNX model's --loss (checkLossName); "": default
};

/// The fields every transformer family has; each family's config sets its
/// own defaults (the Hugging Face class's) and both readers fill them through
/// read{Gpt,Llama,Bert}Config with their format's key names.
struct TransformerShape {
  int64_t vocabSize;
  int64_t maxPositions;
  int64_t hidden;
  int64_t layers;
  int64_t heads;
  double epsilon; // the norms' epsilon
  double initStd;
};

/// GPT-2 / GPT-3: learned positions, pre-LayerNorm, GELU MLP, fused qkv
/// (Conv1D weights [in, out]), tied or untied LM head.
struct GptConfig : TransformerShape {
  GptConfig() : TransformerShape{50257, 1024, 768, 12, 12, 1e-5, 0.02} {}
  int64_t ffnHidden = 0; // 0: 4·hidden
  bool tiedHead = true;
  std::string activation = "gelu_new"; // gelu_new | gelu | relu | silu
};

/// Llama: RMSNorm, SwiGLU MLP, rotary positions, grouped-query attention.
struct LlamaConfig : TransformerShape {
  LlamaConfig() : TransformerShape{32000, 2048, 4096, 32, 32, 1e-6, 0.02} {}
  int64_t intermediate = 11008;
  int64_t kvHeads = 0; // 0: heads (no grouping)
  int64_t headDim = 0; // 0: hidden / heads
  double ropeTheta = 10000.0;
  bool tiedHead = false;
  bool attentionBias = false;
  bool mlpBias = false;
};

/// BERT encoder with either the masked-LM head (BertForMaskedLM) or the pooler
/// (BertModel).
struct BertConfig : TransformerShape {
  BertConfig() : TransformerShape{30522, 512, 768, 12, 12, 1e-12, 0.02} {}
  int64_t typeVocabSize = 2;
  int64_t intermediate = 3072;
  std::string activation = "gelu";
  std::string head = "mlm"; // "mlm" (BertForMaskedLM) | "pooler" (BertModel)
};

/// Multi-layer perceptron classifier.
struct MlpConfig {
  int64_t inputDim = 784;
  std::vector<int64_t> hiddenSizes = {1024, 1024};
  int64_t numClasses = 10;
  std::string activation = "relu"; // relu | gelu | silu
  bool bias = true;
  double initStd = 0.02;
};

/// VGG (Simonyan & Zisserman) as torchvision builds it, without batch norm.
struct VggConfig {
  std::vector<int64_t> convChannels; // 0 marks a 2x2 max-pool ("M")
  int64_t imageSize = 224;
  int64_t inChannels = 3;
  int64_t numClasses = 1000;
  int64_t fcHidden = 4096;
  double initStd = 0.01;
};
/// torchvision's cfgs "A", "B", "D", "E" for vgg11/13/16/19; empty if unknown.
std::vector<int64_t> vggChannels(const std::string &variant);

/// Graph convolutional network (Kipf & Welling): H' = act(Â·H·W + b) per layer,
/// the adjacency a sparse input with `nnz` stored entries.
struct GcnConfig {
  int64_t numNodes = 2708;
  int64_t nnz = 13264;
  int64_t inFeatures = 1433;
  std::vector<int64_t> hiddenSizes = {16};
  int64_t numClasses = 7;
  // gat only: the attention heads of each hidden layer (concatenated; the
  // output layer has one head, as PyG's GAT example).
  int64_t heads = 8;
  // Weights are glorot-initialised as in PyG, so there is no init_std.
};

ModelGraph buildGpt(const GptConfig &c, const BuildOptions &o);
ModelGraph buildLlama(const LlamaConfig &c, const BuildOptions &o);
ModelGraph buildBert(const BertConfig &c, const BuildOptions &o);
ModelGraph buildMlp(const MlpConfig &c, const BuildOptions &o);
ModelGraph buildVgg(const VggConfig &c, const BuildOptions &o);
ModelGraph buildGcn(const GcnConfig &c, const BuildOptions &o);
/// Dot-product graph attention, PyG's TransformerConv (one head, no root
/// weight): per layer q, k, v = x·W (no bias), scores = sddmm(adj, q, k),
/// att = edge_softmax(adj, scores / √d), H' = relu(spmm(att, v) + b); the
/// adjacency's pattern only (its values are not used). The fields of gcn.
ModelGraph buildTransformerConv(const GcnConfig &c, const BuildOptions &o);
/// Graph attention as PyG's GATConv: per layer Wh = lin(x) (no bias), per head
/// e_ij = LeakyReLU_0.2(att_src·Wh_j + att_dst·Wh_i), alpha the softmax of e
/// over row i's stored entries (self loops included), H' = sum_j alpha_ij Wh_j
/// per head, the heads concatenated (hidden layers: `heads` heads of
/// hidden_sizes[i] channels) or one head (the output layer, concat=False),
/// plus a bias, elu between layers. The fields of gcn and `heads`.
ModelGraph buildGat(const GcnConfig &c, const BuildOptions &o);
/// GraphSAGE with the mean aggregator, as PyG's SAGEConv(aggr="mean"): per
/// layer H' = act(lin_l(mean_{j in N(i)} H_j) + lin_r(H_i)), lin_l with a
/// bias, lin_r without; N(i) the adjacency row's stored entries (self loop
/// included: the programs add one to every row). The same fields as gcn.
ModelGraph buildSage(const GcnConfig &c, const BuildOptions &o);

} // namespace autoddl::import
