//===- TransformerTemplates.cpp - gpt, llama and bert --------------------===//
//
// Each builder follows the Hugging Face modeling file of its family
// (modeling_gpt2.py, modeling_llama.py, modeling_bert.py) module by module, so
// parameter names, shapes, tying and initialisation (`_init_weights`) match the
// real model tensor by tensor. Dropout is left out: it has no parameters and is
// the identity at the op level we model.
//
//===----------------------------------------------------------------------===//
#include "ir/import/JsonFields.h"
#include "ir/import/TemplateSupport.h"

#include <cmath>

namespace autoddl::import {

namespace {

void requireLayers(int64_t layers, const BuildOptions &o) {
  require(layers <= kMaxLayers, o,
          "number of layers " + std::to_string(layers) +
              " exceeds the limit of " + std::to_string(kMaxLayers));
}

void requireDivisible(int64_t hidden, int64_t heads, const BuildOptions &o) {
  require(hidden % heads == 0, o,
          "hidden size " + std::to_string(hidden) +
              " is not divisible by the number of attention heads " +
              std::to_string(heads));
}

ops::Attrs attentionAttrs(int64_t heads, int64_t kvHeads, int64_t headDim,
                          bool causal) {
  return {{"num_heads", heads},
          {"num_kv_heads", kvHeads},
          {"head_dim", headDim},
          {"causal", causal}};
}

ops::Attrs eps(double e) { return {{"epsilon", e}}; }

/// A causal LM's tail: lm_head (the embedding `embed` when tied, else its own
/// [V, C] weight) over `x`, and the cross-entropy with `targets`.
int lmHeadLoss(GraphBuilder &b, int x, int embed, bool tied, int64_t V,
               int64_t C, double initStd, int targets) {
  int head =
      tied ? embed : b.param("lm_head.weight", {V, C}, "normal", initStd);
  int logits =
      b.op("linear", "lm_head", {x, head}, {{"transpose_weight", true}});
  return b.op("cross_entropy", "loss", {logits, targets});
}

} // namespace

ModelGraph buildGpt(const GptConfig &c, const BuildOptions &o) {
  requireLayers(c.layers, o);
  requireDivisible(c.hidden, c.heads, o);
  const int64_t B = o.batch,
                T = sequenceLength(o, c.maxPositions, "n_positions");
  const int64_t C = c.hidden, V = c.vocabSize, H = c.heads, D = C / H;
  const int64_t F = c.ffnHidden ? c.ffnHidden : 4 * C;
  // GPT2PreTrainedModel._init_weights: residual projections (c_proj) get
  // std / sqrt(2·n_layer), "to account for accumulation on the residual path".
  const double projStd = c.initStd / std::sqrt(2.0 * c.layers);
  const ops::Attrs conv1d{
      {"transpose_weight", false}}; // GPT-2 Conv1D: w [in, out]

  GraphBuilder b(o.name, "gpt", o.place);
  int ids = b.input("input_ids", {B, T}, ops::DType::I32);
  int targets = b.input("targets", {B, T}, ops::DType::I32);
  int wte = b.param("transformer.wte.weight", {V, C}, "normal", c.initStd);
  int wpe = b.param("transformer.wpe.weight", {c.maxPositions, C}, "normal",
                    c.initStd);
  int x = b.op("embedding", "wte", {ids, wte});
  x = b.op("positional", "wpe", {x, wpe});
  for (int64_t l = 0; l < c.layers; ++l) {
    b.setLayer(l);
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    const std::string n = "h." + std::to_string(l) + ".";
    int h = b.op("layernorm", n + "ln_1",
                 {x, b.param(p + "ln_1.weight", {C}, "ones"),
                  b.param(p + "ln_1.bias", {C}, "zeros")},
                 eps(c.epsilon));
    int qkv = b.op(
        "linear", n + "attn.qkv",
        {h, b.param(p + "attn.c_attn.weight", {C, 3 * C}, "normal", c.initStd),
         b.param(p + "attn.c_attn.bias", {3 * C}, "zeros")},
        conv1d);
    int a = b.op("attention", n + "attn.core", {qkv},
                 attentionAttrs(H, H, D, true));
    a = b.op("linear", n + "attn.proj",
             {a, b.param(p + "attn.c_proj.weight", {C, C}, "normal", projStd),
              b.param(p + "attn.c_proj.bias", {C}, "zeros")},
             conv1d);
    x = b.op("add", n + "attn.residual", {x, a});
    h = b.op("layernorm", n + "ln_2",
             {x, b.param(p + "ln_2.weight", {C}, "ones"),
              b.param(p + "ln_2.bias", {C}, "zeros")},
             eps(c.epsilon));
    int m =
        b.op("linear", n + "mlp.fc",
             {h, b.param(p + "mlp.c_fc.weight", {C, F}, "normal", c.initStd),
              b.param(p + "mlp.c_fc.bias", {F}, "zeros")},
             conv1d);
    m = activation(b, n + "mlp.act", m, c.activation, o);
    m = b.op("linear", n + "mlp.proj",
             {m, b.param(p + "mlp.c_proj.weight", {F, C}, "normal", projStd),
              b.param(p + "mlp.c_proj.bias", {C}, "zeros")},
             conv1d);
    x = b.op("add", n + "mlp.residual", {x, m});
  }
  b.setLayer(-1);
  x = b.op("layernorm", "ln_f",
           {x, b.param("transformer.ln_f.weight", {C}, "ones"),
            b.param("transformer.ln_f.bias", {C}, "zeros")},
           eps(c.epsilon));
  // GPT2LMHeadModel: lm_head.weight is wte's storage when tied (one tensor).
  int loss = lmHeadLoss(b, x, wte, c.tiedHead, V, C, c.initStd, targets);
  return b.finish(loss, c.layers, B, T);
}

ModelGraph buildLlama(const LlamaConfig &c, const BuildOptions &o) {
  requireLayers(c.layers, o);
  const int64_t H = c.heads, G = c.kvHeads ? c.kvHeads : c.heads;
  if (!c.headDim)
    requireDivisible(c.hidden, H, o);
  require(H % G == 0, o,
          "number of attention heads " + std::to_string(H) +
              " is not divisible by the number of key/value heads " +
              std::to_string(G));
  const int64_t D = c.headDim ? c.headDim : c.hidden / H;
  require(D % 2 == 0, o,
          "head dimension " + std::to_string(D) +
              " must be even for rotary embeddings");
  const int64_t B = o.batch, T = sequenceLength(o, c.maxPositions,
                                                "max_position_embeddings");
  const int64_t C = c.hidden, V = c.vocabSize, I = c.intermediate;
  const double sd = c.initStd;
  const ops::Attrs rms = eps(c.epsilon);

  GraphBuilder b(o.name, "llama", o.place);
  int ids = b.input("input_ids", {B, T}, ops::DType::I32);
  int targets = b.input("targets", {B, T}, ops::DType::I32);
  int embed = b.param("model.embed_tokens.weight", {V, C}, "normal", sd);
  int x = b.op("embedding", "embed_tokens", {ids, embed});
  for (int64_t l = 0; l < c.layers; ++l) {
    b.setLayer(l);
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string n = "layers." + std::to_string(l) + ".";
    int h = b.op("rmsnorm", n + "input_layernorm",
                 {x, b.param(p + "input_layernorm.weight", {C}, "ones")}, rms);
    int q = torchLinear(b, n + "self_attn.q_proj", p + "self_attn.q_proj", h, C,
                        H * D, c.attentionBias, sd);
    int k = torchLinear(b, n + "self_attn.k_proj", p + "self_attn.k_proj", h, C,
                        G * D, c.attentionBias, sd);
    int v = torchLinear(b, n + "self_attn.v_proj", p + "self_attn.v_proj", h, C,
                        G * D, c.attentionBias, sd);
    q = b.op("rotary", n + "self_attn.rotary_q", {q},
             {{"num_heads", H}, {"head_dim", D}, {"theta", c.ropeTheta}});
    k = b.op("rotary", n + "self_attn.rotary_k", {k},
             {{"num_heads", G}, {"head_dim", D}, {"theta", c.ropeTheta}});
    int a = b.op("attention", n + "self_attn.core", {q, k, v},
                 attentionAttrs(H, G, D, true));
    a = torchLinear(b, n + "self_attn.o_proj", p + "self_attn.o_proj", a, H * D,
                    C, c.attentionBias, sd);
    x = b.op("add", n + "attn_residual", {x, a});
    h = b.op("rmsnorm", n + "post_attention_layernorm",
             {x, b.param(p + "post_attention_layernorm.weight", {C}, "ones")},
             rms);
    int gate = torchLinear(b, n + "mlp.gate_proj", p + "mlp.gate_proj", h, C, I,
                           c.mlpBias, sd);
    int up = torchLinear(b, n + "mlp.up_proj", p + "mlp.up_proj", h, C, I,
                         c.mlpBias, sd);
    int m = b.op("swiglu", n + "mlp.act", {gate, up});
    m = torchLinear(b, n + "mlp.down_proj", p + "mlp.down_proj", m, I, C,
                    c.mlpBias, sd);
    x = b.op("add", n + "mlp_residual", {x, m});
  }
  b.setLayer(-1);
  x = b.op("rmsnorm", "norm", {x, b.param("model.norm.weight", {C}, "ones")},
           rms);
  int loss = lmHeadLoss(b, x, embed, c.tiedHead, V, C, sd, targets);
  return b.finish(loss, c.layers, B, T);
}

ModelGraph buildBert(const BertConfig &c, const BuildOptions &o) {
  requireLayers(c.layers, o);
  requireDivisible(c.hidden, c.heads, o);
  require(c.head == "mlm" || c.head == "pooler", o,
          "unknown bert head '" + c.head +
              "' (expected \"mlm\" or \"pooler\")");
  const int64_t B = o.batch, T = sequenceLength(o, c.maxPositions,
                                                "max_position_embeddings");
  const int64_t C = c.hidden, V = c.vocabSize, H = c.heads, I = c.intermediate;
  const double sd = c.initStd;
  // BertForMaskedLM holds the encoder as `bert.`; BertModel is the encoder.
  const std::string root = c.head == "mlm" ? "bert." : "";

  GraphBuilder b(o.name, "bert", o.place);
  int ids = b.input("input_ids", {B, T}, ops::DType::I32);
  int types = b.input("token_type_ids", {B, T}, ops::DType::I32);
  int targets = b.input("targets", {B, T}, ops::DType::I32);
  const std::string e = root + "embeddings.";
  int words = b.param(e + "word_embeddings.weight", {V, C}, "normal", sd);
  int x = b.op("embedding", "embeddings.word", {ids, words});
  x = b.op("positional", "embeddings.position",
           {x, b.param(e + "position_embeddings.weight", {c.maxPositions, C},
                       "normal", sd)});
  int t = b.op("embedding", "embeddings.token_type",
               {types, b.param(e + "token_type_embeddings.weight",
                               {c.typeVocabSize, C}, "normal", sd)});
  x = b.op("add", "embeddings.sum", {x, t});
  x = b.op("layernorm", "embeddings.LayerNorm",
           {x, b.param(e + "LayerNorm.weight", {C}, "ones"),
            b.param(e + "LayerNorm.bias", {C}, "zeros")},
           eps(c.epsilon));
  auto layerNorm = [&](const std::string &opName, const std::string &prefix,
                       int in) {
    return b.op("layernorm", opName,
                {in, b.param(prefix + ".weight", {C}, "ones"),
                 b.param(prefix + ".bias", {C}, "zeros")},
                eps(c.epsilon));
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    b.setLayer(l);
    const std::string p = root + "encoder.layer." + std::to_string(l) + ".";
    const std::string n = "layer." + std::to_string(l) + ".";
    int q = torchLinear(b, n + "attention.self.query",
                        p + "attention.self.query", x, C, C, true, sd);
    int k = torchLinear(b, n + "attention.self.key", p + "attention.self.key",
                        x, C, C, true, sd);
    int v = torchLinear(b, n + "attention.self.value",
                        p + "attention.self.value", x, C, C, true, sd);
    int a = b.op("attention", n + "attention.self.core", {q, k, v},
                 attentionAttrs(H, H, C / H, false));
    a = torchLinear(b, n + "attention.output.dense",
                    p + "attention.output.dense", a, C, C, true, sd);
    // Post-LayerNorm: LayerNorm(x + sublayer(x)).
    x = b.op("add", n + "attention.output.residual", {x, a});
    x = layerNorm(n + "attention.output.LayerNorm",
                  p + "attention.output.LayerNorm", x);
    int m = torchLinear(b, n + "intermediate.dense", p + "intermediate.dense",
                        x, C, I, true, sd);
    m = activation(b, n + "intermediate.act", m, c.activation, o);
    m = torchLinear(b, n + "output.dense", p + "output.dense", m, I, C, true,
                    sd);
    x = b.op("add", n + "output.residual", {x, m});
    x = layerNorm(n + "output.LayerNorm", p + "output.LayerNorm", x);
  }
  b.setLayer(-1);
  int loss;
  if (c.head == "mlm") {
    // BertOnlyMLMHead: transform (dense, act, LayerNorm), then a decoder whose
    // weight is word_embeddings' storage and whose bias is
    // cls.predictions.bias.
    int h = torchLinear(b, "cls.predictions.transform.dense",
                        "cls.predictions.transform.dense", x, C, C, true, sd);
    h = activation(b, "cls.predictions.transform.act", h, c.activation, o);
    h = layerNorm("cls.predictions.transform.LayerNorm",
                  "cls.predictions.transform.LayerNorm", h);
    int logits = b.op("linear", "cls.predictions.decoder",
                      {h, words, b.param("cls.predictions.bias", {V}, "zeros")},
                      {{"transpose_weight", true}});
    loss = b.op("cross_entropy", "loss", {logits, targets});
  } else {
    // BertPooler is dense+tanh on the first token. The vocabulary has neither a
    // slice nor tanh, so the dense runs on every position (parameters exact,
    // FLOPs over by 2·C²·(T-1) per sample) and a parameter-free cross-entropy
    // over its C outputs stands in for the loss a head would add.
    int pooled =
        torchLinear(b, "pooler.dense", "pooler.dense", x, C, C, true, sd);
    loss = b.op("cross_entropy", "loss", {pooled, targets});
  }
  return b.finish(loss, c.layers, B, T);
}

} // namespace autoddl::import
