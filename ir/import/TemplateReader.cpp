//===- TemplateReader.cpp - {"template": ..., "config": {...}} -----------===//
//
// Our own description of a model family instance. Strict: every field of the
// document and of its config must be known (docs/model-format.md lists them),
// so a misspelt field is an error instead of a silently used default.
//
//===----------------------------------------------------------------------===//
#include "ir/import/Readers.h"

#include "support/JsonFile.h"
#include "support/UserError.h"

namespace autoddl::import {

namespace {

// The template format names a field alike in every family.
const TransformerKeys kTemplateKeys{
    "vocab_size",     "max_positions", "hidden_size", "num_layers",
    "num_heads",      "norm_epsilon",  "init_std",    "ffn_hidden_size",
    "tie_embeddings", "activation",    "num_kv_heads"};

std::vector<int64_t> sizes(JsonFields &f, const std::string &key,
                           std::vector<int64_t> fallback) {
  return f.has(key) ? f.positiveList(key) : fallback;
}

ModelGraph gpt(JsonFields &f, const BuildOptions &o) {
  GptConfig c = readGptConfig(f, kTemplateKeys);
  f.rejectUnknown();
  return buildGpt(c, o);
}

ModelGraph llama(JsonFields &f, const BuildOptions &o) {
  LlamaConfig c = readLlamaConfig(f, kTemplateKeys);
  f.rejectUnknown();
  return buildLlama(c, o);
}

ModelGraph bert(JsonFields &f, const BuildOptions &o) {
  BertConfig c = readBertConfig(f, kTemplateKeys);
  c.head = f.string("head", c.head);
  if (c.head != "mlm" && c.head != "pooler")
    f.fail("head", "expected \"mlm\" or \"pooler\", got \"" + c.head + "\"");
  f.rejectUnknown();
  return buildBert(c, o);
}

ModelGraph mlp(JsonFields &f, const BuildOptions &o) {
  MlpConfig c;
  c.inputDim = f.positive("input_dim", c.inputDim);
  c.hiddenSizes = sizes(f, "hidden_sizes", c.hiddenSizes);
  c.numClasses = f.positive("num_classes", c.numClasses);
  c.activation = f.string("activation", c.activation);
  c.bias = f.flag("bias", c.bias);
  c.initStd = f.nonNegativeReal("init_std", c.initStd);
  f.rejectUnknown();
  return buildMlp(c, o);
}

ModelGraph vgg(JsonFields &f, const BuildOptions &o) {
  VggConfig c;
  if (const json *layers = f.find("layers")) {
    // A torchvision-style cfg list: channel counts and "M" for a max-pool.
    if (!layers->is_array() || layers->empty())
      f.fail("layers",
             "expected a non-empty array of channel counts and \"M\", got " +
                 describe(*layers));
    for (size_t i = 0; i < layers->size(); ++i) {
      const json &v = (*layers)[i];
      std::string place = jsonPlace(f.originName(), f.pointer() / "layers" / i);
      if (v.is_string() && v.get<std::string>() == "M")
        c.convChannels.push_back(0);
      else if (v.is_string())
        throw UserError(place + "expected a channel count or \"M\", got " +
                        describe(v));
      else
        c.convChannels.push_back(positiveSize(v, place));
    }
    if (f.has("variant"))
      f.fail("variant", "give either \"variant\" or \"layers\", not both");
  } else {
    std::string variant = f.string("variant", "vgg16");
    c.convChannels = vggChannels(variant);
    if (c.convChannels.empty())
      f.fail("variant", "unknown vgg variant '" + variant +
                            "' (expected vgg11, vgg13, vgg16 or vgg19)");
  }
  c.imageSize = f.positive("image_size", c.imageSize);
  c.inChannels = f.positive("in_channels", c.inChannels);
  c.numClasses = f.positive("num_classes", c.numClasses);
  c.fcHidden = f.positive("fc_hidden", c.fcHidden);
  c.initStd = f.nonNegativeReal("init_std", c.initStd);
  f.rejectUnknown();
  return buildVgg(c, o);
}

/// gcn, gat, transformer_conv and sage: the graph's size, the layer widths and
/// the classes (gat: and its heads).
GcnConfig graphConfig(JsonFields &f, bool heads = false) {
  GcnConfig c;
  if (heads) // PyG's GAT example: 8 heads of 8 features
    c.hiddenSizes = {8};
  c.numNodes = f.positive("num_nodes", c.numNodes);
  c.nnz = f.positive("nnz", c.nnz);
  c.inFeatures = f.positive("in_features", c.inFeatures);
  c.hiddenSizes = sizes(f, "hidden_sizes", c.hiddenSizes);
  c.numClasses = f.positive("num_classes", c.numClasses);
  if (heads)
    c.heads = f.positive("heads", c.heads);
  f.rejectUnknown();
  for (int64_t h : c.hiddenSizes) // gat's hidden layers are heads x h wide
    if (heads && (__int128)h * c.heads > (int64_t(1) << 40))
      f.fail("heads", "expected heads x hidden_sizes[i] <= 2^40, got " +
                          std::to_string(c.heads) + " x " + std::to_string(h));
  if ((__int128)c.numNodes * c.numNodes < c.nnz)
    f.fail("nnz", "expected at most num_nodes^2 = " +
                      std::to_string((int64_t)std::min<__int128>(
                          (__int128)c.numNodes * c.numNodes, INT64_MAX)) +
                      " stored entries, got " + std::to_string(c.nnz));
  return c;
}

ModelGraph gcn(JsonFields &f, const BuildOptions &o) {
  return buildGcn(graphConfig(f), o);
}

ModelGraph gat(JsonFields &f, const BuildOptions &o) {
  return buildGat(graphConfig(f, true), o);
}

ModelGraph transformerConv(JsonFields &f, const BuildOptions &o) {
  return buildTransformerConv(graphConfig(f), o);
}

ModelGraph sage(JsonFields &f, const BuildOptions &o) {
  return buildSage(graphConfig(f), o);
}

} // namespace

namespace {
void readShape(JsonFields &f, const TransformerKeys &keys,
               TransformerShape &c) {
  c.vocabSize = f.positive(keys.vocabSize, c.vocabSize);
  c.maxPositions = f.positive(keys.maxPositions, c.maxPositions);
  c.hidden = f.positive(keys.hidden, c.hidden);
  c.layers = f.positive(keys.layers, c.layers);
  c.heads = f.positive(keys.heads, c.heads);
  c.epsilon = f.positiveReal(keys.epsilon, c.epsilon);
  c.initStd = f.nonNegativeReal(keys.initStd, c.initStd);
}
} // namespace

GptConfig readGptConfig(JsonFields &f, const TransformerKeys &keys) {
  GptConfig c;
  readShape(f, keys, c);
  c.ffnHidden = f.positive(keys.ffnHidden, 0); // 0: 4·hidden
  c.tiedHead = f.flag(keys.tiedHead, c.tiedHead);
  c.activation = f.string(keys.activation, c.activation);
  return c;
}

LlamaConfig readLlamaConfig(JsonFields &f, const TransformerKeys &keys) {
  LlamaConfig c;
  readShape(f, keys, c);
  c.intermediate = f.positive("intermediate_size", c.intermediate);
  c.kvHeads = f.positive(keys.kvHeads, 0); // 0: the attention heads
  c.headDim = f.positive("head_dim", 0);   // 0: hidden / heads
  c.ropeTheta = f.positiveReal("rope_theta", c.ropeTheta);
  c.tiedHead = f.flag(keys.tiedHead, c.tiedHead);
  c.attentionBias = f.flag("attention_bias", c.attentionBias);
  c.mlpBias = f.flag("mlp_bias", c.mlpBias);
  return c;
}

BertConfig readBertConfig(JsonFields &f, const TransformerKeys &keys) {
  BertConfig c;
  readShape(f, keys, c);
  c.typeVocabSize = f.positive("type_vocab_size", c.typeVocabSize);
  c.intermediate = f.positive("intermediate_size", c.intermediate);
  c.activation = f.string(keys.activation, c.activation);
  return c;
}

ModelGraph readTemplate(JsonFields &doc, const BuildOptions &options) {
  doc.refuseNulls(); // our format: a null is a mistake, not a default
  std::string kind = doc.string("template");
  BuildOptions o = options;
  o.name = doc.string("name", o.name);
  doc.string("description", "");
  static const json noConfig = json::object(); // every field at its default
  JsonFields config =
      doc.has("config")
          ? doc.object("config")
          : JsonFields(noConfig, doc.pointer() / "config", doc.originName());
  doc.rejectUnknown();
  o.place = config.place();
  using Reader = ModelGraph (*)(JsonFields &, const BuildOptions &);
  static const std::pair<const char *, Reader> readers[] = {
      {"gpt", gpt},
      {"llama", llama},
      {"bert", bert},
      {"mlp", mlp},
      {"vgg", vgg},
      {"gcn", gcn},
      {"gat", gat},
      {"sage", sage},
      // Dot-product graph attention, PyG's TransformerConv (one head, no root
      // weight); gat is GATConv's additive attention.
      {"transformer_conv", transformerConv}};
  for (const auto &[name, read] : readers)
    if (kind == name)
      return read(config, o);
  doc.fail(
      "template",
      "unknown template '" + kind +
          "' (expected gpt, llama, bert, mlp, vgg, gcn, gat, transformer_conv "
          "or sage)");
}

} // namespace autoddl::import
