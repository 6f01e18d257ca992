//===- FuseImported.h - an imported graph's primitives -> model ops ------===//
//
// An ONNX import may hold constants (TensorRole::Constant) and ops of kind
// "primitive" (ModelGraph.h). These functions lower such a graph to the sbp
// dialect, run sbp-fuse-linear, -norms, -activations, -rotary and -attention (the
// order of tests/lit/passes/fuse_pipeline.mlir: rotary before attention) and
// read the fused module back into a ModelGraph of model ops only
// (docs/onnx-lowering.md "Fusion patterns in the IR"). Plain C++ interface: no
// MLIR types.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"

#include <set>
#include <string>
#include <vector>

namespace autoddl {

/// What fuseImported gives back. On success `graph` holds the same inputs,
/// parameters (names, shapes, init, order), loss, name, family, batch, seq and
/// numLayers as the graph given; its ops are the fused module's, named by
/// their locations (a fused op takes the name of the last op of the form it
/// replaced, that op's result tensor and its layer, or where that is -1 the
/// first layer set among the ops it replaced), with attributes as the
/// templates write them (defaults explicit). Constants no op reads any more
/// are gone.
struct FusedGraph {
  ModelGraph graph;
  // A primitive that no pattern recognised and that has no kernel (the
  // first in graph order), else empty: its op name, ONNX op type and position
  // (OpDef::position, or its index in the ops of the graph given when that is
  // -1).
  std::string primitiveName, primitiveType;
  int primitivePosition = -1;
  // Why its kernel does not run it ("Max takes two operands"), or empty
  // when its op has no kernel at all.
  std::string primitiveWhy;
  // The lowering's or the verifier's message when the graph given is malformed
  // (a bug of its front end, not of the user's model); "" otherwise.
  std::string error;
  bool ok() const { return error.empty() && primitiveName.empty(); }
};

/// Whether `g` holds a constant or a primitive, i.e. needs fuseImported.
bool hasImportedPrimitives(const ModelGraph &g);

/// The sbp-fuse passes fuseImported runs, in their order (flags).
const std::vector<std::string> &fusePassNames();

/// Lowers `g`, fuses (without the passes named in `skip`) and reads it back.
/// A primitive that no pattern recognised stays, as an op of kind
/// "primitive" with the constants it reads, where it has a kernel
/// (backends/common/OnnxPrimitive.h); one without refuses the model. Core
/// code: never throws.
FusedGraph fuseImported(const ModelGraph &g,
                        const std::set<std::string> &skip = {});

/// The passes AUTODDL_FUSE_SKIP lists (comma-separated flags of
/// fusePassNames()); throws UserError, one line, on a name that is no pass.
std::set<std::string> fuseSkipFromEnvironment();
/// `skip` as a plan records it: the names in pass order, comma-separated.
std::string fuseSkipText(const std::set<std::string> &skip);

/// The front ends' entry point: replaces `g` by its fused form when it holds
/// constants or primitives (otherwise leaves it as it is), leaving out the
/// passes that the environment's AUTODDL_FUSE_SKIP lists (comma-separated
/// flags). Throws UserError, one line, when a primitive without a kernel
/// stays:
///   <file>: node '<name>' (<OpType>, position N): <OpType> is outside the
///   model vocabulary, no sbp-fuse pattern recognised it and it has no kernel
/// `file` names the model in that message.
void fuseImportedGraph(ModelGraph &g, const std::string &file);

} // namespace autoddl
