//===- FuseImportedGraph.cpp - fuseImported for the front ends (edge) -----===//
//
// The throwing side of ir/lower/FuseImported.h: the core gives back what it
// found, this turns a primitive no pattern recognised into the user's
// one-line error, worded as the ONNX reader words its refusals.
//
//===----------------------------------------------------------------------===//
#include "ir/lower/FuseImported.h"

#include "support/UserError.h"

namespace autoddl {

void fuseImportedGraph(ModelGraph &g, const std::string &file) {
  if (!hasImportedPrimitives(g))
    return;
  FusedGraph fused = fuseImported(g);
  if (!fused.primitiveName.empty())
    throw UserError(file + ": node '" + fused.primitiveName + "' (" +
                    fused.primitiveType + ", position " +
                    std::to_string(fused.primitivePosition) +
                    "): " + fused.primitiveType +
                    " is outside the model vocabulary and no sbp-fuse pattern "
                    "recognised it");
  if (!fused.error.empty())
    throw UserError(file + ": the imported graph is malformed: " + fused.error);
  // The model ops take parameters and activations; a buffer they would read
  // has no place in a plan or a generated program.
  for (const OpDef &op : fused.graph.ops)
    for (int t : op.operands)
      if (fused.graph.tensors[t].role == TensorRole::Constant)
        throw UserError(file + ": node '" + op.name + "' (" + op.kind +
                        "): reads the constant '" +
                        fused.graph.tensors[t].name +
                        "', which no op of the model vocabulary takes");
  g = std::move(fused.graph);
}

} // namespace autoddl
