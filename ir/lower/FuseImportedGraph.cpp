//===- FuseImportedGraph.cpp - fuseImported for the front ends (edge) -----===//
//
// The throwing side of ir/lower/FuseImported.h: the core gives back what it
// found, this turns a primitive no pattern recognised into the user's
// one-line error, worded as the ONNX reader words its refusals.
//
//===----------------------------------------------------------------------===//
#include "ir/lower/FuseImported.h"

#include "support/UserError.h"

#include <algorithm>
#include <cstdlib>

namespace autoddl {

std::set<std::string> fuseSkipFromEnvironment() {
  std::set<std::string> skip;
  if (const char *env = std::getenv("AUTODDL_FUSE_SKIP")) {
    const std::string list = env;
    for (size_t b = 0; b <= list.size();) {
      const size_t e = std::min(list.find(',', b), list.size());
      const std::string name = list.substr(b, e - b);
      b = e + 1;
      if (name.empty())
        continue;
      const auto &known = fusePassNames();
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::string all;
        for (const std::string &k : known)
          all += (all.empty() ? "" : ", ") + k;
        throw UserError("AUTODDL_FUSE_SKIP: '" + name +
                        "' is not an sbp-fuse pass (" + all + ")");
      }
      skip.insert(name);
    }
  }
  return skip;
}

std::string fuseSkipText(const std::set<std::string> &skip) {
  std::string text;
  for (const std::string &name : fusePassNames())
    if (skip.count(name))
      text += (text.empty() ? "" : ",") + name;
  return text;
}

void fuseImportedGraph(ModelGraph &g, const std::string &file) {
  if (!hasImportedPrimitives(g))
    return;
  FusedGraph fused = fuseImported(g, fuseSkipFromEnvironment());
  if (!fused.primitiveName.empty())
    throw UserError(
        file + ": node '" + fused.primitiveName + "' (" + fused.primitiveType +
        ", position " + std::to_string(fused.primitivePosition) +
        "): " + fused.primitiveType +
        " is outside the model vocabulary, no sbp-fuse pattern "
        "recognised it and " +
        (fused.primitiveWhy.empty()
             ? std::string("it has no kernel")
             : "its kernel does not run it: " + fused.primitiveWhy));
  if (!fused.error.empty())
    throw UserError(file + ": the imported graph is malformed: " + fused.error);
  // The model ops take parameters and activations; only a primitive reads
  // a buffer (the generated program embeds it).
  for (const OpDef &op : fused.graph.ops)
    for (int t : op.operands)
      if (op.kind != "primitive" &&
          fused.graph.tensors[t].role == TensorRole::Constant)
        throw UserError(file + ": node '" + op.name + "' (" + op.kind +
                        "): reads the constant '" +
                        fused.graph.tensors[t].name +
                        "', which no op of the model vocabulary takes");
  g = std::move(fused.graph);
}

} // namespace autoddl
