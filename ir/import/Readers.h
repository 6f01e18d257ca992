//===- Readers.h - the model front ends (internal) ------------------===//
#pragma once

#include "ir/import/JsonFields.h"
#include "ir/import/ModelImporter.h"
#include "ir/import/Templates.h"

namespace autoddl::import {

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
