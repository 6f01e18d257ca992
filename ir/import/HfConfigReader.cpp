//===- HfConfigReader.cpp - Hugging Face config.json ---------------------===//
//
// Reads a config.json as transformers does: a missing (or null) field takes the
// default of GPT2Config / LlamaConfig / BertConfig, an unknown field is
// ignored. A field that would change the architecture in a way the templates do
// not build (rope_scaling, cross-attention, ...) is refused by name rather than
// silently dropped.
//
//===----------------------------------------------------------------------===//
#include "ir/import/Readers.h"

#include "support/UserError.h"

namespace autoddl::import {

namespace {

// The model class: the first entry of "architectures", or `fallback` when the
// field is absent (the LM-head class, the one training needs).
std::string architecture(JsonFields &f, const std::string &fallback,
                         const std::vector<std::string> &supported) {
  const json *a = f.find("architectures");
  std::string arch = fallback;
  if (a) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string())
      f.fail("architectures",
             "expected a non-empty array of strings, got " + describe(*a));
    arch = (*a)[0].get<std::string>();
  }
  for (const std::string &s : supported)
    if (s == arch)
      return arch;
  std::string list;
  for (const std::string &s : supported)
    list += (list.empty() ? "" : ", ") + s;
  f.fail("architectures", "architecture '" + arch +
                              "' is not supported (supported: " + list + ")");
}

// Refuses a flag whose non-default value we cannot build.
void refuseFlag(JsonFields &f, const std::string &key, bool unsupported,
                const std::string &why) {
  const json *v = f.find(key);
  if (v && v->is_boolean() && v->get<bool>() == unsupported)
    f.fail(key, key + " = " + (unsupported ? "true" : "false") +
                    " is not supported: " + why);
  if (v && !v->is_boolean())
    f.fail(key, "expected true or false, got " + describe(*v));
}

// Refuses any value of the string field `key` but `only` (its default).
void refuseOtherThan(JsonFields &f, const std::string &key,
                     const std::string &only, const std::string &why) {
  std::string v = f.string(key, only);
  if (v != only)
    f.fail(key, key + " '" + v + "' is not supported" + why);
}

void refuseNonNull(JsonFields &f, const std::string &key,
                   const std::string &why) {
  if (const json *v = f.find(key))
    f.fail(key, key + " is not supported (got " + describe(*v) + "): " + why);
}

// Llama's and BERT's names (PretrainedConfig's); they differ only in the
// norm's epsilon. The configs' defaults are LlamaConfig's and BertConfig's.
TransformerKeys hfKeys(const char *epsilon) {
  return {"vocab_size",          "max_position_embeddings",
          "hidden_size",         "num_hidden_layers",
          "num_attention_heads", epsilon,
          "initializer_range",   nullptr,
          "tie_word_embeddings", "hidden_act",
          "num_key_value_heads"};
}

ModelGraph readGpt2(JsonFields &f, const BuildOptions &o) {
  architecture(f, "GPT2LMHeadModel", {"GPT2LMHeadModel"});
  refuseFlag(f, "add_cross_attention", true, "cross-attention layers");
  refuseFlag(f, "scale_attn_by_inverse_layer_idx", true,
             "per-layer attention scaling");
  refuseFlag(f, "scale_attn_weights", false,
             "attention without 1/sqrt(head_dim) scaling");
  // GPT2Config's names (it predates PretrainedConfig's); its defaults are
  // GptConfig's.
  return buildGpt(
      readGptConfig(f,
                    {"vocab_size", "n_positions", "n_embd", "n_layer", "n_head",
                     "layer_norm_epsilon", "initializer_range", "n_inner",
                     "tie_word_embeddings", "activation_function", nullptr}),
      o);
}

ModelGraph readLlama(JsonFields &f, const BuildOptions &o) {
  architecture(f, "LlamaForCausalLM", {"LlamaForCausalLM"});
  refuseNonNull(f, "rope_scaling",
                "only plain rotary embeddings (rope_scaling null) are built");
  refuseOtherThan(f, "hidden_act", "silu", ": the llama MLP is SwiGLU (silu)");
  return buildLlama(readLlamaConfig(f, hfKeys("rms_norm_eps")), o);
}

ModelGraph readBert(JsonFields &f, const BuildOptions &o) {
  std::string arch =
      architecture(f, "BertForMaskedLM", {"BertForMaskedLM", "BertModel"});
  refuseFlag(f, "is_decoder", true, "bert as a causal decoder");
  refuseFlag(f, "add_cross_attention", true, "cross-attention layers");
  refuseOtherThan(f, "position_embedding_type", "absolute",
                  " (only \"absolute\")");
  BertConfig c = readBertConfig(f, hfKeys("layer_norm_eps"));
  c.head = arch == "BertModel" ? "pooler" : "mlm";
  return buildBert(c, o);
}

} // namespace

ModelGraph readHfConfig(JsonFields &f, const BuildOptions &o) {
  std::string type = f.string("model_type");
  if (type == "gpt2")
    return readGpt2(f, o);
  if (type == "llama")
    return readLlama(f, o);
  if (type == "bert")
    return readBert(f, o);
  f.fail("model_type",
         "unknown model_type '" + type + "' (supported: gpt2, llama, bert)");
}

} // namespace autoddl::import
