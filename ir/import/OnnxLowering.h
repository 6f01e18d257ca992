//===- OnnxLowering.h - the ONNX reader's state (internal) ---------------===//
//
// One ONNX model being lowered to a ModelGraph. Split over OnnxReader.cpp
// (reading the protobuf, lowering nodes to the vocabulary) and
// OnnxFolding.cpp (constants: initializers that are not weights, Constant
// nodes, and the values computed from them and from static shapes),
// OnnxParameters.cpp (which initializers are PyTorch's parameters) and
// OnnxPrimitives.cpp (nodes kept as primitives).
// Edge code: errors throw UserError naming the file, the node and the cause.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/GraphBuilder.h"
#include "ir/import/OnnxConstants.h"
#include "ir/import/OnnxPatterns.h"
#include "ir/import/OnnxPrimitives.h"
#include "ir/import/Readers.h"

#include "support/UserError.h"

#include <onnx/onnx_pb.h>

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::import {

class OnnxLowering {
public:
  OnnxLowering(const std::string &path, const onnx::ModelProto &model,
               const BuildOptions &o)
      : path(path), model(model), o(o), b(o.name, "onnx", path + ": "),
        dir(path.substr(0, path.find_last_of('/') + 1)) {}

  /// The graph as lowered: primitives kept for the fusion passes.
  ModelGraph run();

private:
  [[noreturn]] void fail(const std::string &m) const {
    throw UserError(path + ": " + m);
  }
  [[noreturn]] void failNode(const onnx::NodeProto &n, const std::string &m) {
    throw UserError(path + ": node '" + nodeName(n) + "' (" + n.op_type() +
                    "): " + m);
  }
  std::string nodeName(const onnx::NodeProto &n) const {
    return n.name().empty() ? n.op_type() + "#" + std::to_string(nodeIndex(n))
                            : n.name();
  }
  int nodeIndex(const onnx::NodeProto &n) const {
    const auto &nodes = model.graph().node();
    for (int i = 0; i < nodes.size(); ++i)
      if (&nodes.Get(i) == &n)
        return i;
    return -1;
  }

  /// The loss: the exported one checked against --loss, or the one --loss
  /// names added on the single output (OnnxLoss.cpp).
  void addLoss();
  void readOpset();
  void readInputs();
  std::vector<const onnx::NodeProto *> topoOrder();
  void lower(const onnx::NodeProto &n);
  // One function per recognised op type (OnnxNodes.cpp); false: not lowered
  // here, the node becomes a primitive.
  bool lowerIdentity(const onnx::NodeProto &n);
  bool lowerCast(const onnx::NodeProto &n);
  bool lowerGather(const onnx::NodeProto &n);
  bool lowerMatMul(const onnx::NodeProto &n);
  bool lowerGemm(const onnx::NodeProto &n);
  bool lowerSplitToSequence(const onnx::NodeProto &n);
  bool lowerSequenceAt(const onnx::NodeProto &n);
  bool lowerSplit(const onnx::NodeProto &n);
  bool lowerPositions(const onnx::NodeProto &n);
  bool lowerAddMul(const onnx::NodeProto &n);
  bool lowerLayerNorm(const onnx::NodeProto &n);
  bool lowerGelu(const onnx::NodeProto &n);
  bool lowerRelu(const onnx::NodeProto &n);
  bool lowerSoftmax(const onnx::NodeProto &n);
  bool lowerConv(const onnx::NodeProto &n);
  bool lowerPool(const onnx::NodeProto &n);
  bool lowerBatchNorm(const onnx::NodeProto &n);
  bool lowerReshape(const onnx::NodeProto &n);
  bool lowerTranspose(const onnx::NodeProto &n);
  bool lowerCrossEntropy(const onnx::NodeProto &n);
  int64_t rankOf(int t) const { return int64_t(b.shape(t).size()); }
  void checkVersion(const onnx::NodeProto &n);
  std::optional<double> scalar(const std::string &name) const;

  // Constants (OnnxFolding.cpp).
  void readConstant(const onnx::NodeProto &n);
  bool fold(const onnx::NodeProto &n);
  const HostTensor &constant(const onnx::NodeProto &user,
                             const std::string &name);
  std::vector<int64_t> constantInts(const onnx::NodeProto &user,
                                    const std::string &name);
  const onnx::NodeProto *transposedWeight(const std::string &name) const;
  std::string tiedTable(const onnx::NodeProto &n, const std::string &w);
  bool castIsIdentity(const onnx::NodeProto &n);
  /// `position`: the source node's index when n is made here (-1: n's own).
  void primitive(const onnx::NodeProto &n, int position = -1);
  void sequenceAt(const onnx::NodeProto &n);
  std::pair<int64_t, int64_t> splitAxis(const onnx::NodeProto &split);
  void splitParts(const onnx::NodeProto &n);
  void slicePart(const onnx::NodeProto &n, const std::string &x, int64_t start,
                 int64_t end, int64_t axis, const std::string &out);
  int constantTensor(const onnx::NodeProto &user, const std::string &name);
  /// Whether initializer `name`, read by `user` with an activation, is a
  /// buffer PyTorch does not train (an additive mask, a rotary cos/sin
  /// table) rather than a weight (OnnxPrimitives.cpp).
  bool isBuffer(const onnx::NodeProto &user, const std::string &name);
  /// The buffer a BatchNormalization n reads at input i (3: running mean,
  /// 4: running var), one per node, named as PyTorch's state_dict names it
  /// (OnnxParameters.cpp).
  int runningStat(const onnx::NodeProto &n, int i);
  /// The parameter node n reads at input i (a weight): param()'s, or its
  /// own copy of a uniform weight the exporter merged (OnnxPrimitives.cpp).
  int weightParam(const onnx::NodeProto &n, int i, const std::string &init);
  /// The name of that copy: `name`, or "name#k" for its k-th reader.
  std::string untiedName(const onnx::NodeProto &n,
                         const std::string &name) const;

  ops::Shape dims(const onnx::TensorProto &t) const;
  std::string externalBytes(const onnx::TensorProto &t,
                            const onnx::NodeProto *n);
  void checkData(const onnx::TensorProto &t);
  int value(const onnx::NodeProto &n, int i);
  int param(const onnx::NodeProto &n, int i, const std::string &init,
            double std = 0.02);
  /// param() of initializer `name` (read by n).
  int paramNamed(const onnx::NodeProto &n, const std::string &name,
                 const std::string &init, double std = 0.02);
  /// A constant (initializer, Constant node or a value computed from them)
  /// that is not a parameter.
  bool isConst(const std::string &name) const {
    return !values.count(name) &&
           (consts.count(name) || evaluated.count(name) || derived.count(name));
  }
  void define(const onnx::NodeProto &n, int tensor) {
    values[n.output(0)] = tensor;
  }
  int add(const onnx::NodeProto &n, const std::string &kind,
          std::vector<int> operands, ops::Attrs attrs = {}) {
    b.setPlace(path + ": node '" + nodeName(n) + "' (" + n.op_type() + "): ");
    int t = b.op(kind, nodeName(n), std::move(operands), std::move(attrs),
                 n.output(0));
    noteScope(n);
    return t;
  }
  /// The repeated block (layer) the dynamo exporter's name scopes put node n
  /// in (its metadata "pkg.torch.onnx.name_scopes": "...layers.3..."), -1
  /// for a scope outside every block, -2 for a node without scopes.
  int64_t scopeLayer(const onnx::NodeProto &n) const;
  /// Records scopeLayer(n) for the op just built (assignLayers keeps it).
  void noteScope(const onnx::NodeProto &n) {
    if (int64_t l = scopeLayer(n); l > -2)
      scopes.emplace_back(b.graph().ops.size() - 1, l);
  }
  const onnx::NodeProto *soleConsumer(const std::string &value) const;

  const std::string &path;
  const onnx::ModelProto &model;
  const BuildOptions &o;
  GraphBuilder b;
  std::string dir;
  int64_t opset = 0;
  int64_t staticBatch = 0;           // a static dimension 0 of the inputs, or 0
  std::string staticBatchInput;      // the first input with it
  std::map<std::string, int> values; // ONNX value name -> tensor
  std::map<std::string, const onnx::TensorProto *> consts; // initializers
  // Values of Constant nodes and of nodes evaluated so far; values computed
  // from constants, by the node computing each (evaluated when read, so a
  // weight's Transpose is never materialised).
  std::map<std::string, HostTensor> evaluated;
  std::map<std::string, const onnx::NodeProto *> derived;
  std::map<std::string, int> constantTensors;     // constants primitives read
  std::map<std::string, bool> buffers;            // isBuffer's answers
  std::map<std::string, int> untied;              // weightParam's copies
  std::vector<std::pair<size_t, int64_t>> scopes; // op index, its scope layer
  // Gathers of a table at positions 0..T-1, lowered with their Add.
  std::map<std::string, const onnx::NodeProto *> positions;
  // SplitToSequence nodes by their output: a SequenceAt of one is a Slice.
  std::map<std::string, const onnx::NodeProto *> splits;
  std::deque<onnx::NodeProto> madeNodes; // those Slices, pools, norms

  std::map<std::string, std::vector<const onnx::NodeProto *>> consumers;
  std::set<const onnx::NodeProto *> folded; // lowered with an earlier node
  std::map<const onnx::NodeProto *, GeluMatch> gelus; // by their last node
  int loss = -1;
};

} // namespace autoddl::import
