//===- MalformedInputTest.cpp - bad model files get precise errors -------===//
//
// Every kind of bad input of issue part 6, in process: each must throw a
// UserError whose one-line message names the file, the place (line:column or
// JSON pointer) and the cause.
//
//===----------------------------------------------------------------------===//
#include "ImportTestUtil.h"

using namespace autoddl;
using autoddl::testing::importError;
using autoddl::testing::TempDir;

namespace {

// Asserts `text` is refused with a message containing each of `parts`.
void expectError(const std::string &text, std::vector<std::string> parts,
                 import::ImportOptions o = {}) {
  std::string e = importError(text, o);
  ASSERT_FALSE(e.empty()) << "imported without error: " << text;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e; // one line
  EXPECT_EQ(e.rfind("m.json", 0), 0u) << e;        // names the file first
  for (const std::string &p : parts)
    EXPECT_NE(e.find(p), std::string::npos) << "'" << p << "' not in: " << e;
}

// A Hugging Face config of `modelType` whose one other field, `field`,
// holds `value` (JSON text) is refused at /field with a message containing
// `cause`.
void expectFieldRefused(const std::string &modelType, const std::string &field,
                        const std::string &value, const std::string &cause) {
  expectError(R"({"model_type": ")" + modelType + R"(", ")" + field + R"(": )" +
                  value + "}",
              {"at /" + field + ":", cause});
}

const char *kGraphHead = R"({"graph": {
  "inputs": [{"name": "x", "shape": [2, 8]}, {"name": "y", "shape": [2], "dtype": "i32"}],
  "params": [{"name": "w", "shape": [4, 8]}],
  "ops": )";

std::string graph(const std::string &ops, const std::string &loss = "loss") {
  return std::string(kGraphHead) + ops + R"(, "loss": ")" + loss + R"("}})";
}

TEST(Malformed, SyntaxWithLineAndColumn) {
  // Truncated: the error is at the end, line 3.
  expectError("{\n  \"model_type\": \"gpt2\",\n  \"n_embd\": 7",
              {"m.json:3:", "invalid JSON"});
  // A stray character on line 2, column 16 (two spaces, "gpt2", then `, "x":
  // `).
  expectError("{\"model_type\":\n  \"gpt2\", \"x\": @}",
              {"m.json:2:16", "invalid JSON"});
  // A number too large for a double is not a parse_error in nlohmann/json but
  // out_of_range 406 (found by the fuzzer): still the user's error.
  expectError("-92233e720368547758085", {"invalid JSON", "number overflow"});
  expectError("{\"model_type\": \"gpt2\", \"n_embd\": 1e999}",
              {"invalid JSON", "number overflow"});
}

TEST(Malformed, EmptyBinaryMissingDirectory) {
  TempDir dir;
  auto err = [](const std::string &path) {
    try {
      import::importModel(path, {});
    } catch (const UserError &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string empty = dir.write("empty.json", "  \n");
  EXPECT_NE(err(empty).find(empty + ": file is empty"), std::string::npos);
  std::string binary = dir.write("bin.json", std::string("\x7f"
                                                         "ELF\0\0\x01",
                                                         7));
  EXPECT_NE(err(binary).find("binary"), std::string::npos) << err(binary);
  EXPECT_NE(err(dir.path + "/missing.json").find("cannot open model file"),
            std::string::npos);
  EXPECT_NE(err(dir.path).find("is a directory"), std::string::npos);
  EXPECT_NE(err("no-such-model").find("not a built-in model"),
            std::string::npos);
}

TEST(Malformed, WrongTypesAndShapes) {
  expectError("[1, 2]", {"at /:", "expected an object"});
  expectFieldRefused("gpt2", "n_embd", R"("768")",
                     "expected a positive integer, got string \"768\"");
  expectError(R"({"model_type": 7})", {"at /model_type:", "expected a string"});
  expectFieldRefused("gpt2", "tie_word_embeddings", R"("yes")",
                     "expected true or false");
  expectFieldRefused("gpt2", "architectures", R"("GPT2LMHeadModel")",
                     "expected a non-empty array");
  expectError(
      R"({"template": "gpt", "config": {"num_layers": 2.5}})",
      {"at /config/num_layers:", "expected a positive integer, got 2.5"});
  expectError(R"({"template": "mlp", "config": {"hidden_sizes": [8, "x"]}})",
              {"at /config/hidden_sizes/1:", "expected a positive integer"});
}

TEST(Malformed, UnknownModelTypeTemplateOpField) {
  expectError(R"({"model_type": "gptj"})",
              {"at /model_type:", "unknown model_type 'gptj'"});
  expectError(R"({"template": "resnet"})",
              {"at /template:", "unknown template 'resnet'"});
  expectError(R"({"foo": 1})", {"not a model description"});
  expectError(R"({"template": "gpt", "graph": {}})", {"ambiguous"});
  // Our own formats are strict: misspelt fields name their pointer.
  expectError(R"({"template": "gpt", "config": {"hiden_size": 64}})",
              {"at /config/hiden_size:", "unknown field 'hiden_size'"});
  expectError(R"({"template": "gpt", "confg": {}})",
              {"at /confg:", "unknown field"});
  expectError(
      graph(
          R"([{"op": "conv3d", "name": "c", "inputs": ["x"], "outputs": ["loss"]}])"),
      {"at /graph/ops/0/op:", "unknown op 'conv3d'"});
  expectError(
      graph(
          R"([{"op": "relu", "name": "r", "inputs": ["x"], "outputs": ["loss"], "colour": 1}])"),
      {"at /graph/ops/0/colour:", "unknown field"});
  expectError(
      graph(
          R"([{"op": "relu", "name": "r", "inputs": ["x"], "outputs": ["loss"],
                         "attrs": {"approximate": "tanh"}}])"),
      {"at /graph/ops/0/attrs/approximate:",
       "unknown attribute 'approximate' for op relu"});
  expectError(
      graph(
          R"([{"op": "layernorm", "name": "n", "inputs": ["x", "w"], "outputs": ["loss"],
                         "attrs": {"epsilon": "small"}}])"),
      {"at /graph/ops/0/attrs/epsilon:", "expected a number"});
  // Hugging Face's own extra fields are ignored, as transformers does.
  EXPECT_EQ(
      importError(
          R"({"model_type": "gpt2", "n_layer": 1, "made_up_field": {"a": 1}})"),
      "");
}

TEST(Malformed, UnsupportedArchitectureFieldsAreRefusedByName) {
  expectFieldRefused("llama", "rope_scaling",
                     R"({"type": "linear", "factor": 2.0})",
                     "rope_scaling is not supported");
  expectFieldRefused("gpt2", "add_cross_attention", "true", "not supported");
  expectFieldRefused("gpt2", "scale_attn_by_inverse_layer_idx", "true",
                     "not supported");
  expectFieldRefused("bert", "is_decoder", "true", "not supported");
  expectFieldRefused("bert", "position_embedding_type", R"("relative_key")",
                     "relative_key");
  expectFieldRefused("llama", "hidden_act", R"("gelu")", "SwiGLU");
  expectError(
      R"({"model_type": "gpt2", "architectures": ["GPT2ForSequenceClassification"]})",
      {"at /architectures:", "GPT2ForSequenceClassification", "not supported"});
  expectError(R"({"model_type": "gpt2", "activation_function": "quick_gelu"})",
              {"activation 'quick_gelu' is not supported"});
  // Null is "use the default" in a config.json, not a refusal.
  EXPECT_EQ(
      importError(
          R"({"model_type": "llama", "num_hidden_layers": 1, "rope_scaling": null})"),
      "");
}

TEST(Malformed, ZeroNegativeOverflowingSizes) {
  expectFieldRefused("gpt2", "n_embd", "0", "got 0");
  expectFieldRefused("gpt2", "n_layer", "-3", "got -3");
  expectFieldRefused("gpt2", "vocab_size", "1e30", "overflows int64");
  expectFieldRefused("gpt2", "vocab_size", "9223372036854775808",
                     "overflows int64");
  // Each size fits, their product does not: 2^40 · 2^40 elements in wte.
  expectError(
      R"({"model_type": "gpt2", "vocab_size": 1099511627776, "n_embd": 1099511627776,
                  "n_head": 1, "n_layer": 1})",
      {"m.json:", "overflows int64"});
  // Every tensor and op fits (c_fc is C·4C = 2^60 elements) but 8 layers of
  // 12·C² = 3·2^60 parameters each do not.
  import::ImportOptions one;
  one.seq = 1;
  expectError(
      R"({"template": "gpt", "config": {"hidden_size": 536870912, "num_heads": 1,
                  "num_layers": 8, "vocab_size": 1, "max_positions": 1}})",
      {"at /config:", "parameter count overflows int64"}, one);
  expectError(R"({"model_type": "gpt2", "n_layer": 100000000})",
              {"exceeds the limit"});
  std::string zeroDim = graph(
      R"([{"op": "relu", "name": "r", "inputs": ["x"], "outputs": ["loss"]}])");
  zeroDim.replace(zeroDim.find("[2, 8]"), 6, "[2, 0]");
  expectError(zeroDim, {"at /graph/inputs/0/shape/1:",
                        "expected a positive integer, got 0"});
  expectError(R"({"template": "gcn", "config": {"num_nodes": 3, "nnz": 10}})",
              {"at /config/nnz:", "at most num_nodes^2"});
  // gat's hidden width is heads x hidden_sizes[i]: its product is bounded.
  expectError(
      R"({"template": "gat", "config": {"heads": 4611686018427387904}})",
      {"at /config/heads:", "expected heads x hidden_sizes[i] <= 2^40"});
  expectError(R"({"template": "gat", "config": {"heads": 0}})",
              {"at /config/heads:", "expected a positive integer, got 0"});
}

TEST(Malformed, ShapeRelations) {
  expectError(
      R"({"model_type": "gpt2", "n_embd": 770})",
      {"m.json:",
       "hidden size 770 is not divisible by the number of attention heads 12"});
  expectError(R"({"model_type": "llama", "num_key_value_heads": 5})",
              {"not divisible by the number of key/value heads 5"});
  expectError(
      R"({"template": "bert", "config": {"hidden_size": 100, "num_heads": 3}})",
      {"at /config:", "not divisible"});
  import::ImportOptions longSeq;
  longSeq.seq = 4096;
  expectError(R"({"model_type": "gpt2"})",
              {"sequence length 4096 exceeds", "n_positions"}, longSeq);
  import::ImportOptions batch;
  batch.batch = 2;
  expectError(
      graph(
          R"([{"op": "relu", "name": "r", "inputs": ["x"], "outputs": ["loss"]}])"),
      {"fixed shapes"}, batch);
  expectError(
      graph(
          R"([{"op": "linear", "name": "fc", "inputs": ["x", "w"], "outputs": ["h"],
                         "attrs": {"transpose_weight": false}},
                        {"op": "cross_entropy", "name": "ce", "inputs": ["h", "y"], "outputs": ["loss"]}])"),
      {"at /graph/ops/0:", "op 'fc' (linear)", "K = 8"});
}

TEST(Malformed, GraphStructure) {
  // a reads b's output and b reads a's: a cycle, named op by op.
  expectError(
      graph(
          R"([{"op": "add", "name": "a", "inputs": ["x", "tb"], "outputs": ["ta"]},
                        {"op": "add", "name": "b", "inputs": ["ta", "x"], "outputs": ["tb"]}])"),
      {"cycle in the graph", "'a'", "'b'"});
  // Named in the direction data flows: a feeds b, b feeds c, c feeds a.
  expectError(
      graph(
          R"([{"op": "add", "name": "a", "inputs": ["x", "tc"], "outputs": ["ta"]},
                        {"op": "add", "name": "b", "inputs": ["ta", "x"], "outputs": ["tb"]},
                        {"op": "add", "name": "c", "inputs": ["tb", "x"], "outputs": ["tc"]}])"),
      {"cycle in the graph: 'a' -> 'b' -> 'c' -> 'a'"});
  // A name nobody defines.
  expectError(
      graph(
          R"([{"op": "add", "name": "a", "inputs": ["x", "nope"], "outputs": ["loss"]}])"),
      {"at /graph/ops/0/inputs/1:", "reads tensor 'nope'"});
  expectError(
      graph(R"([{"op": "relu", "name": "a", "inputs": ["x"], "outputs": ["t"]},
                        {"op": "relu", "name": "a", "inputs": ["x"], "outputs": ["u"]}])"),
      {"at /graph/ops/1/name:", "duplicate op name 'a'"});
  expectError(
      graph(
          R"([{"op": "relu", "name": "a", "inputs": ["x"], "outputs": ["w"]}])"),
      {"at /graph/ops/0/outputs:", "'w' is already defined"});
  expectError(
      graph(
          R"([{"op": "relu", "name": "a", "inputs": ["x"], "outputs": ["t"]}])",
          "t"),
      {"loss must be a scalar"});
  expectError(
      graph(
          R"([{"op": "relu", "name": "a", "inputs": ["x"], "outputs": ["t"]}])",
          "zz"),
      {"at /graph/loss:", "no tensor named 'zz'"});
  expectError(graph("[]"), {"at /graph/ops:", "at least one op"});
  expectError(
      graph(
          R"([{"op": "add", "name": "a", "inputs": ["x"], "outputs": ["loss"]}])"),
      {"op 'a' (add)", "expected 2 operands, got 1"});
}

} // namespace
