//===- Readers.h - the model front ends (internal) ------------------===//
#pragma once

#include "ir/import/JsonFields.h"
#include "ir/import/ModelImporter.h"
#include "ir/import/Templates.h"

namespace autoddl::import {

/// How one format spells TransformerShape's fields.
struct TransformerKeys {
  const char *vocabSize, *maxPositions, *hidden, *layers, *heads, *epsilon,
      *initStd;
};
/// Reads the fields `keys` names into `c`; an absent field keeps c's default.
void readTransformerShape(JsonFields &f, const TransformerKeys &keys,
                          TransformerShape &c);

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
