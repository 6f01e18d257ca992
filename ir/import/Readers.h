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

/// Names each op of a layer (OpDef::layer, after the fusion passes) and its
/// result "<h|layers>.<layer>.<name in the layer>", the name inside the
/// layer from the module path of the layer parameter it reads
/// ("h.3.attn.c_attn") or its kind ("h.3.attention", repeats "h.3.add_1"),
/// as a built-in model names them: identical layers then read the same but
/// for their number, which codegen's layer loop needs (LayerLoop.cpp). The
/// exporter's activation names ("view_14") number the nodes of the whole
/// graph, so layers never read the same under them (OnnxPrimitives.cpp).
void nameLayerOps(ModelGraph &g);

} // namespace autoddl::import
