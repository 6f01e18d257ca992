//===- ModelImporter.h - model description -> ModelGraph -----------------===//
//
// The one entry point of the model front ends (docs/model-format.md). A model
// is named by a path to a JSON file or by a built-in name (the stem of a file
// in examples/models/, compiled into the binary). The JSON document is told
// apart by its top-level key:
//   "model_type"  a Hugging Face config.json (gpt2, llama, bert)
//   "template"    one of our templates with a "config" (gpt, llama, bert, mlp,
//   vgg, gcn) "graph"       an explicit op graph
// Bad input throws autoddl::UserError naming the file, the JSON pointer and the
// cause.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"

#include <string>
#include <vector>

namespace autoddl::import {

struct ImportOptions {
  int64_t batch = 0; // samples per micro-batch; 0: not given (1)
  int64_t seq = 0;   // sequence length; 0: not given (the model's context)
  /// --loss: the loss an ONNX model without an exported one trains with
  /// (cross_entropy, causal_lm or squared_error; docs/model-format.md "The
  /// loss"); "": the default for its output. Other models are refused.
  std::string loss;
};

/// Refuses a --loss name outside the vocabulary, naming the choices.
void checkLossName(const std::string &loss);

/// Whether importModel reads `model` as an ONNX file (a path ending in
/// ".onnx").
bool isOnnxModel(const std::string &model);

/// Imports `model`: a path to a JSON file, or a built-in name (see
/// builtinModelNames()). A path is anything that exists on disk, contains a '/'
/// or ends in ".json"; other names must be built-in.
ModelGraph importModel(const std::string &model, const ImportOptions &options);

/// Imports JSON text; `origin` names it in messages and `name` becomes the
/// model's name unless the document gives one. Used by importModel and the
/// fuzzer.
ModelGraph importModelText(const std::string &text, const std::string &origin,
                           const std::string &name,
                           const ImportOptions &options);
/// An ONNX model given as bytes (`origin` names it in errors; its folder holds
/// any external data), as importModel reads a .onnx file.
ModelGraph importOnnxBytes(const std::string &bytes, const std::string &origin,
                           const ImportOptions &options);

/// Names of the built-in models, sorted.
std::vector<std::string> builtinModelNames();

/// The bytes a model name stands for: a readable file's, a built-in's embedded
/// text, else empty. plan.json records their sha256 (the model planned).
std::string modelBytes(const std::string &model);

} // namespace autoddl::import
