//===- EmitContext.h - what every part of the emitter reads ----*- C++ -*-===//
//
// The read-only context of the train.cpp emitter (docs/codegen.md "The
// emitter's parts"): the plan, its model graph, the tensor layouts chosen
// for the backend, the backend's Target, and the facts derived from them
// once (tensor names, producers, the kind of model). Built once per program
// and never written after: the parts of the emitter (Emitter, KfacEmitter,
// LossEmitter, ...) take it by const reference and own only the state they
// write. Also the small text helpers they share, and Step / OpCall, the unit
// an op emitter fills.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/CpuCodegen.h"
#include "codegen/Layout.h"
#include "codegen/emit/SourceText.h"
#include "codegen/emit/Target.h"

#include "cost_model/pipeline/Schedule.h"
#include "support/UserError.h"

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::codegen::emit {

using pipeline::Direction;
using pipeline::OpKind;

inline std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

inline std::string shapeInit(const std::vector<int64_t> &s) {
  std::string r = "Shape{";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

inline int64_t lastDim(const std::vector<int64_t> &v) { return v.back(); }

inline int64_t numel(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// Adds two spaces before every line of `s`.
inline std::string indent(const std::string &s) {
  std::string r;
  size_t b = 0;
  while (b < s.size()) {
    size_t e = s.find('\n', b);
    e = e == std::string::npos ? s.size() : e + 1;
    r += "  " + s.substr(b, e - b);
    b = e;
  }
  return r;
}

inline std::string fmtDouble(double v) {
  std::string s = fmt::format("{:.17g}", v);
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

/// An op's kind as messages name it: an ONNX import's primitive by its ONNX
/// type and its node's position ("ONNX Pow, position 138").
inline std::string kindLabel(const OpDef &op) {
  if (op.kind != "primitive")
    return op.kind;
  return "ONNX " + attrOr(op, ops::attr::kOpType, "?") +
         (op.position >= 0 ? ", position " + std::to_string(op.position) : "");
}

/// What one step of a stage emits: forward lines, and the backward lines of
/// its input-gradient and weight-gradient halves.
struct Step {
  std::vector<std::string> fwd, bwdInput, bwdWeight;
  // Parameters whose gradient the input / weight half writes.
  std::vector<int> paramsInput, paramsWeight;
  int op = -1; // the model op whose own step this is; -1 for a conversion
};

/// One op being emitted (Emitter::emitOp): its operands in the layouts its
/// plan reads them in (values x, gradients dx, local shapes xs), its result
/// (value y, gradient dy, local shape ys of n elements), and the step its
/// lines go into. The op emitters unpack it with one structured binding.
struct OpCall {
  size_t i; // the op's index in the model graph
  const OpDef &op;
  const OpPlan &p;
  int st;               // its pipeline stage
  const std::string &k; // its kind
  std::vector<std::string> x, dx;
  std::vector<std::vector<int64_t>> xs;
  int r; // its result tensor
  std::vector<int64_t> ys;
  std::string y, dy;
  int64_t n;
  Step s;
  std::vector<Step> &steps;
  // Append a line to the forward, the input-gradient or the weight-gradient
  // half of the step.
  std::function<void(std::string)> F, BI, BW;
  // The first position of an op run on a sequence split (T positions a rank).
  std::function<std::string(const OpPlan &, int64_t)> sequenceOffset;
  // spmm's x and sddmm's y: every node's rows, when dp splits the nodes.
  std::function<void(size_t)> gatherNodes;
};

/// A table of identical layers' parameters: P.<name>[j].<member> holds
/// parameter params[j][k] of model layer layers[j].
struct LayerArray {
  std::string name;
  std::vector<int> layers;
  std::vector<std::string> members;
  std::vector<std::vector<int>> params;
};

/// The read-only context (see the file comment). Every member is written by
/// the constructor only (the members not declared const by its plan*
/// passes): the Emitter holds it const and the parts take a const
/// reference. The accessors below are the one place the parts look tensors
/// up.
struct EmitContext {
  EmitContext(const planner::Plan &plan, const ModelGraph &g, Backend backend);

  const planner::Plan &plan;
  const ModelGraph &g;
  const ModelLayout L; // the plan's tensor layouts for this backend
  const int tp;
  const bool cuda; // the CUDA program (device buffers, NCCL)
  // What the backend's program offers the op emitters (Target.h).
  const Target &target;
  // Each tensor's identifier: unique, and none another's derived buffer
  // name ("x_full", "d_x": tensorNames); a parameter of a layer table named
  // by its row ("h[3].attn_w": planLayerParams).
  std::vector<std::string> names;
  const std::vector<int> producer; // per tensor: the op writing it, or -1
  const bool tokenModel, graphModel;
  // An image or feature classifier (mlp, vgg): synthetic class prototypes;
  // its images / features input and its class labels (-1: none).
  const int classInput, classTargets;
  const bool classModel;

  // The decisions derived from the above before any code is emitted (the
  // constructor's plan* passes; codegen/TrainProgram.cpp, LayerLoop.cpp).
  // cuda: the padded vocabulary. Per parameter, its local rows padded to a
  // multiple of 64 (the device holds them, the padding rows zero); per
  // logits tensor, its last dimension padded alike (the rows' stride).
  std::map<int, int64_t> padRows, padCols;
  // cuda: linear -> tanh GELU -> linear chains run in the two GEMMs
  // (planGeluFusion): per GELU op its first linear, per first linear its
  // GELU, per second linear the GELU whose input gradient it writes.
  std::map<size_t, size_t> geluOfFc1, geluOfFc2;
  std::set<size_t> fusedGelus;
  // cuda: a linear whose output only a residual add reads writes the sum
  // (planResidualFusion): per linear its add, per add the operand index of
  // that linear's output.
  std::map<size_t, size_t> addOfLinear;
  std::map<size_t, size_t> linearOperandOfAdd;
  // cuda: a ReLU after a bias_add runs in the bias_add's kernels
  // (planBiasReluFusion): per bias_add its ReLU; the ReLUs emit nothing.
  std::map<size_t, size_t> reluOfBias;
  std::set<size_t> fusedRelus;
  // The ops reading each tensor (readers()).
  std::vector<std::vector<size_t>> users;
  // The layers' parameters as tables (planLayerParams, LayerLoop.cpp),
  // which also renames their parameters in `names`.
  std::vector<LayerArray> layerArrays;
  std::map<int, int> arrayOfParam; // first parameter -> its table
  // cuda: the ops that run on channels-last (NHWC) image tensors
  // (planChannelsLast, ChannelsLast.cpp); what they write is stored so.
  std::set<size_t> nhwcOps;
  // cuda: a ReLU after a batch norm primitive or an add runs in that op's
  // passes (planProducerReluFusion): per norm or add its ReLU; the ReLUs
  // emit nothing.
  std::map<size_t, size_t> reluAfter;
  std::set<size_t> relusInProducer;
  // cuda: an add whose batch norm operand runs in the add's place, the sum
  // (and the ReLU after it) in the norm's normalise pass
  // (planResidualNormFusion): per add its norm; the norms write no output.
  std::map<size_t, size_t> normOfAdd;
  std::set<size_t> normsInAdd;
  // cuda: a fused norm's output whose gradient is its add's other operand's
  // (planResidualNormFusion: the add stores that one gradient, the norm's
  // backward reads it there); grad() gives the other's buffer.
  std::map<int, int> gradAlias;

  int64_t vocab() const;
  /// How many layers of `stage` recompute (StageInfo::recomputeLayers, its
  /// first ones; 0 without recomputation; Recompute.cpp).
  int recomputedLayers(int stage) const;
  /// Whether op i's backward stores its input gradient of t (held in dx)
  /// instead of adding to it, and whether t's conversion gathers the
  /// partial gradients of its readers (TrainProgram.cpp).
  bool storesGrad(size_t i, int t, TpLayout l, const std::string &dx) const;
  bool gathersPartialGrads(int t) const;

  /// A classification model (mlp, vgg, an explicit graph): its one dense f32
  /// input (images or features) and the i32 input holding the labels of its
  /// cross_entropy; -1 for what it lacks.
  static std::pair<int, int> classifierInputs(const ModelGraph &g);
  static int findInput(const ModelGraph &g, const std::string &name);
  int findInput(const std::string &name) const { return findInput(g, name); }

  /// Whether the program reports the training accuracy (classifiers and
  /// graph models, whose losses are over labelled samples or nodes).
  bool reportsAccuracy() const { return classModel || graphModel; }
  bool isParam(int t) const {
    return g.tensors[size_t(t)].role == TensorRole::Parameter;
  }
  bool isInput(int t) const {
    return g.tensors[size_t(t)].role == TensorRole::Input;
  }
  /// A buffer of an ONNX import (read by primitives): a static array of the
  /// program, whole on every rank, without a gradient.
  bool isConst(int t) const {
    return g.tensors[size_t(t)].role == TensorRole::Constant;
  }
  /// Tensor t's name as a comment may carry it (SourceText.h).
  std::string note(int t) const {
    return commentText(g.tensors[size_t(t)].name);
  }
  const std::vector<int64_t> &full(int t) const {
    return g.tensors[size_t(t)].shape;
  }
  /// Local shape: tp layout l, and a graph model's own nodes' rows under dp.
  std::vector<int64_t> local(int t, TpLayout l) const {
    std::vector<int64_t> s = localShape(full(t), l, tp);
    if (nodeSplit() && g.nodeRows(t))
      s[0] /= plan.knobs.dp;
    return s;
  }
  /// dp splits a graph model's nodes: each dp rank owns a block of rows.
  bool nodeSplit() const { return graphModel && plan.knobs.dp > 1; }
  /// The stage-struct member holding tensor t in layout l.
  std::string bufName(int t, TpLayout l) const {
    if (l == L.tensors[size_t(t)])
      return names[size_t(t)];
    return names[size_t(t)] +
           (l.split() ? "_s" + std::to_string(l.dim) +
                            (l.segments > 1 ? "x" + std::to_string(l.segments)
                                            : std::string())
                      : "_full");
  }
  /// Tensor t's value and gradient in layout l, as a call's argument
  /// (StageLayout.cpp).
  std::string val(int t, TpLayout l) const;
  std::string grad(int t, TpLayout l) const;
  /// Elements of tensor t in layout l: a number, or for a sparse activation
  /// the stored entries of its adjacency (known once the graph is built).
  std::string elems(int t, TpLayout l) const {
    const int pattern = g.sparsePattern(t);
    if (pattern >= 0 && !isInput(t))
      return val(pattern, TpLayout{}) + ".nnz()";
    return std::to_string(numel(local(t, l)));
  }
  /// An activation or input of shape [N, C, H, W] whose NCHW and NHWC bytes
  /// differ (C > 1, H * W > 1): the tensors the layout choice concerns.
  bool imageTensor(int t) const;
  /// Whether tensor t is stored NHWC (its producer runs channels-last).
  bool storedChannelsLast(int t) const;

  /// Per tensor, the ops reading it (once per operand slot).
  std::vector<std::vector<size_t>> readers() const {
    std::vector<std::vector<size_t>> r(g.tensors.size());
    for (size_t i = 0; i < g.ops.size(); ++i)
      for (int t : g.ops[i].operands)
        r[size_t(t)].push_back(i);
    return r;
  }

private:
  void planVocabPadding();
  void planGeluFusion();
  void planResidualFusion();
  void planBiasReluFusion();
  /// The channels-last ops (ChannelsLast.cpp).
  void planChannelsLast();
  bool runsChannelsLast(size_t i) const;
  void planProducerReluFusion();
  void planResidualNormFusion();
  /// Groups the layers' parameters into tables (LayerLoop.cpp).
  void planLayerParams();
};

} // namespace autoddl::codegen::emit
