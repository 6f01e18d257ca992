//===- SearchGraph.h - the collapsed training graph the search runs on ---===//
//
// Transformer layers are identical, so the search prices one representative
// layer and multiplies (docs/planner.md "collapsing"): every op of layer l maps
// to the op at the same position of the representative layer, and every tensor
// edge of the model maps to a collapsed edge (producer op, consumer ops) with a
// weight that counts how many model edges it stands for. Ops outside the
// repeated blocks
// ("pre": embeddings, "post": final norm, head, loss) stay as they are. The
// collapse is exact for a stack of identical layers: the objective of an
// assignment on the collapsed graph equals the objective on the full graph.
//
// Each collapsed op carries its valid 1-D SBP signatures on the "tp" mesh axis
// (SbpSignatures.cpp) for a given tp degree and micro-batch size.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/Boxing.h"
#include "ir/import/ModelGraph.h"

#include <memory>
#include <string>
#include <vector>

namespace autoddl::planner {

struct GraphUses;

enum class Segment { Pre = 0, Layer = 1, Post = 2 };
const char *segmentName(Segment s);

/// One SBP signature of an op on the tp axis.
struct Signature {
  std::string name;
  std::vector<cost::Sbp> operands; // forward layout each operand must have
  cost::Sbp result;
  /// Layout of each operand's gradient as this op's backward produces it
  /// (docs/planner.md "backward transposes").
  std::vector<cost::Sbp> operandGrads;
  bool distributed = false; // the op's work is divided over tp
  double inOpAllReduceBytes =
      0; // collectives inside the op (vocab-parallel CE)
  /// Heads divided by tp (attention, rotary): attrs scaled for the local shard.
  bool splitHeads = false;
};

struct CollapsedOp {
  int op = -1; // representative ModelGraph op
  Segment segment = Segment::Pre;
  int count = 0; // model ops it stands for
  std::vector<Signature> sigs;
};

/// A collapsed tensor edge: one producer (or none: input/parameter) and the
/// consumer operand slots.
struct CollapsedEdge {
  int tensor = -1;   // representative tensor (shapes, name)
  int producer = -1; // collapsed op, -1 for inputs and parameters
  std::vector<std::pair<int, int>> consumers; // (collapsed op, operand index)
  Segment segment = Segment::Pre;             // whose stage pays for it
  bool crossesLayers = false; // layer l -> layer l+1 (the pipeline p2p tensor)
  double weight = 0;          // model edges it stands for
  bool parameter = false, input = false;
  /// The distinct collapsed ops it joins (producer and consumers), ascending.
  std::vector<int> endpoints() const;
};

struct SearchGraph {
  const ModelGraph *graph = nullptr;
  std::vector<CollapsedOp> ops; // topological
  std::vector<CollapsedEdge> edges;
  std::vector<int> opOf; // ModelGraph op -> collapsed op
  /// Per ModelGraph tensor, shared by the copies the search makes per mesh.
  struct Shapes {
    std::vector<int> batchDim; // the dim that scales with the batch, or -1
    std::vector<std::vector<int64_t>> shape1, shape2; // at batch 1 and 2
  };
  std::shared_ptr<const Shapes> shapes;
  /// The model's use lists (ProgramDecisions.h), built once per model and
  /// shared by the copies: signatures and pricing, per candidate, read them.
  std::shared_ptr<const GraphUses> uses;
  int batchDim(int t) const { return shapes->batchDim[t]; }
  const std::vector<int64_t> &shape1(int t) const { return shapes->shape1[t]; }
  int64_t layers = 0;     // identical repeated layers collapsed
  bool collapsed = false; // false: the model had no identical layers

  /// Shape of tensor `t` at micro-batch `b`.
  std::vector<int64_t> shapeAt(int t, int64_t b) const;
};

/// Builds the collapsed graph from the model imported at micro-batch 1 (`g1`)
/// and at micro-batch 2 (`g2`, the same model; the dims that doubled are batch
/// dims). Returns false with `error` when the two graphs disagree.
bool buildSearchGraph(const ModelGraph &g1, const ModelGraph &g2,
                      SearchGraph &out, std::string &error);

/// `sg.uses`, or the use lists of `sg.graph` built now for a graph that was
/// not made by buildSearchGraph.
std::shared_ptr<const GraphUses> usesOf(const SearchGraph &sg);

/// Fills every op's valid signatures for tp degree `tp` at micro-batch `b`
/// (SbpSignatures.cpp). Signature 0 is always "replicate" (all B).
/// `dataSplits`: also the batch and sequence splits on the tp axis.
void enumerateSignatures(SearchGraph &sg, int tp, int64_t b,
                         bool dataSplits = true);

} // namespace autoddl::planner
