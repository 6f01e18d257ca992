//===- Readers.h - the three JSON front ends (internal) ------------------===//
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

} // namespace autoddl::import
