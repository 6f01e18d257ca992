//===- Readers.h - the model front ends (internal) ------------------===//
#pragma once

#include "ir/import/JsonFields.h"
#include "ir/import/ModelImporter.h"
#include "ir/import/Templates.h"

namespace autoddl::import {

/// How one format spells TransformerShape's fields.
/// How one format spells the transformer families' fields: the shared ones
/// (TransformerShape's) and those the families spell differently (a family
/// reads only its own).
struct TransformerKeys {
  const char *vocabSize, *maxPositions, *hidden, *layers, *heads, *epsilon,
      *initStd;
  const char *ffnHidden, *tiedHead, *activation, *kvHeads;
};
/// A family's config from the fields `keys` names (the rest spelt alike in
/// both formats); an absent field keeps the config's default.
GptConfig readGptConfig(JsonFields &f, const TransformerKeys &keys);
LlamaConfig readLlamaConfig(JsonFields &f, const TransformerKeys &keys);
BertConfig readBertConfig(JsonFields &f, const TransformerKeys &keys);

/// A Hugging Face config.json (lenient: unknown fields are ignored).
ModelGraph readHfConfig(JsonFields &doc, const BuildOptions &o);
/// {"template": ..., "config": {...}} (strict).
ModelGraph readTemplate(JsonFields &doc, const BuildOptions &o);
/// {"graph": {...}} (strict).
ModelGraph readGraph(JsonFields &doc, const BuildOptions &o);
/// An ONNX model file (OnnxReader.cpp). o.batch and o.seq pin dynamic input
/// dimensions 0 and 1 (0: not given).
ModelGraph readOnnxFile(const std::string &path, const BuildOptions &o);
/// An ONNX model's bytes; `path` names it in errors and locates external data.
/// The graph as lowered: "primitive" ops kept for fuseImportedGraph.
ModelGraph readOnnx(const std::string &data, const std::string &path,
                    const BuildOptions &o);

} // namespace autoddl::import
