//===- Emitter.h - the train.cpp emitter, shared by its units --*- C++ -*-===//
//
// The emitter of a plan's training program (docs/codegen.md), split by job:
// stage layout (StageLayout.cpp), a stage's functions (Stage.cpp), the ops
// (OpEmitters.cpp), gradient buckets (GradBuckets.cpp), the schedule
// (Schedule.cpp), identical layers as a loop (LayerLoop.cpp) and the
// program's assembly (ProgramAssembly.cpp); the
// fusion and padding decisions stay in codegen/TrainProgram.cpp. Internal to
// autoddl_codegen: callers use emitTrainProgram (CpuCodegen.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/CpuCodegen.h"
#include "codegen/Layout.h"
#include "codegen/emit/SourceText.h"
#include "codegen/emit/Target.h"

#include "cost_model/pipeline/ActivationSets.h"
#include "cost_model/pipeline/Schedule.h"
#include "support/UserError.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <variant>
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
  return "ONNX " + attrOr<std::string>(op, "op_type", "?") +
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

/// Wraps each call of a CUDA step in an OpScope (StageLayout.cpp).
void profileScopes(Step &s, const std::string &kind);

/// Activations crossing into `stage` from earlier stages (Stage.cpp).
std::vector<int> boundaryTensors(const ModelGraph &g, const ModelLayout &L,
                                 int stage);

/// A data-parallel gradient bucket of the cuda program: parameters whose
/// gradients are complete after one point of a stage's backward.
struct Bucket {
  int stage = 0;
  bool weightPart = false; // completes in the weight-gradient half (zb-h1)
  // Gradients partial over tp as well (ModelLayout::tpPartialGrads): summed
  // over the stage's dp x tp group in one all-reduce.
  bool tpPartial = false;
  std::vector<int> params;
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

/// A float buffer of a stage struct.
struct Member {
  std::string name;
  int64_t size = 0;
  std::string comment;
  bool i32 = false;
  bool grad = false; // a gradient buffer (zeroed before each backward)
  bool stat = false; // fp32 statistics (act_t activations otherwise, on cuda)
  // Set for a size known at run time only (a sparse activation: the graph's
  // stored entries): the expression replaces `size`.
  std::string sizeExpr = {};
};

/// The ops of one layer on a stage: its steps and the stage members its
/// ops added (LayerLoop.cpp).
struct LayerSpan {
  int layer = -1;
  size_t stepBegin = 0, stepEnd = 0, memberBegin = 0, memberEnd = 0;
};

/// A stage's layers as a table a.layers[j] of struct Stage<k>Layer: its
/// members' names in that struct, and per flat member its layer and index.
struct StageLayers {
  std::vector<LayerSpan> spans;
  std::vector<std::string> canon;
  std::string group; // the layers' name in the model ("h")
  std::map<std::string, std::pair<int, size_t>> memberOf;
  bool folded() const { return !spans.empty(); }
  /// `text` with every "a.<member of a layer>" as "a.layers[j].<name>".
  std::string rename(const std::string &text) const;
};

/// Activation recomputation on a stage (Recompute.cpp): its first `layers`
/// layers keep only the members the rest of the stage reads, the others
/// (`scratch`, per member of Stage<k>Layer) live in one stage-wide scratch
/// layer: each such layer's forward and backward run between `before[j]`
/// and `after[j]` (the scratch swapped in and out), its backward after
/// `rerun[j]` (the scratch's gradients cleared, the forward of its rerun
/// steps again).
struct StageRecompute {
  size_t layers = 0;
  std::vector<bool> scratch;
  std::vector<std::string> before, rerun, after; // per layer, flat names
  bool any() const { return layers > 0; }
};

/// Stages whose code differs in numbers only, as one template over the
/// stage S (StageTypes.cpp).
struct StageTypes {
  std::vector<int> typeOf;     // per stage: the stage whose names it shares
  std::vector<bool> templated; // per stage: runs an instance of a template
  std::string text;            // every stage's code
  /// Stage s's function `name`: "stage5_forward" or "stage1_forward<5>".
  std::string fn(int s, const std::string &name) const {
    const int r = typeOf[size_t(s)];
    return templated[size_t(s)] ? fmt::format("stage{}_{}<{}>", r, name, s)
                                : fmt::format("stage{}_{}", s, name);
  }
};

/// Folds `texts` (per stage, its code; `members`, its struct's member names)
/// where the stages marked eligible read the same but for numbers.
StageTypes foldStages(const std::vector<std::string> &texts,
                      const std::vector<std::set<std::string>> &members,
                      const std::vector<bool> &eligible);

class Emitter {
public:
  Emitter(const planner::Plan &plan, const ModelGraph &g, Backend backend)
      : plan_(plan), g_(g),
        L_(chooseLayout(plan, g, backend == Backend::Cuda ? "cuda" : "cpu")),
        tp_(plan.knobs.tp), cuda_(backend == Backend::Cuda),
        target_(cuda_ ? cudaTarget() : cpuTarget()) {
    nameTensors();
    producer_.assign(g.tensors.size(), -1);
    for (size_t i = 0; i < g.ops.size(); ++i)
      for (int r : g.ops[i].results)
        producer_[size_t(r)] = int(i);
    tokenModel_ = findInput(g, "input_ids") >= 0;
    graphModel_ = findInput(g, "adjacency") >= 0;
    if (!tokenModel_ && !graphModel_)
      std::tie(classInput_, classTargets_) = classifierInputs(g);
    classModel_ = classInput_ >= 0 && classTargets_ >= 0;
  }

  std::string emit();

  /// Why `backend` does not run model `g` whatever the plan (an op kind, an
  /// op reading a parameter where the CUDA kernels take none, a model it does
  /// not feed), or "" (codegen::backendRefusal; OpTable.cpp).
  static std::string backendRefusal(const ModelGraph &g, Backend backend);

private:
  /// Whether the program reports the training accuracy (classifiers and
  /// graph models, whose losses are over labelled samples or nodes).
  bool reportsAccuracy() const { return classModel_ || graphModel_; }
  /// A classification model (mlp, vgg, an explicit graph): its one dense f32
  /// input (images or features) and the i32 input holding the labels of its
  /// cross_entropy; -1 for what it lacks.
  static std::pair<int, int> classifierInputs(const ModelGraph &g) {
    int input = -1, targets = -1;
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      const TensorDef &td = g.tensors[t];
      if (td.role != TensorRole::Input || td.sparse ||
          td.dtype != ops::DType::F32)
        continue;
      if (input >= 0) // several: not a classifier this program feeds
        return {-1, -1};
      input = int(t);
    }
    for (const OpDef &op : g.ops)
      if ((op.kind == "cross_entropy" || op.kind == "squared_error") &&
          op.operands.size() == 2 &&
          g.tensors[size_t(op.operands[1])].role == TensorRole::Input)
        targets = op.operands[1];
    return {input, targets};
  }
  static int findInput(const ModelGraph &g, const std::string &name) {
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (g.tensors[t].role == TensorRole::Input && g.tensors[t].name == name)
        return int(t);
    return -1;
  }
  int findInput(const std::string &name) const { return findInput(g_, name); }
  bool isParam(int t) const {
    return g_.tensors[size_t(t)].role == TensorRole::Parameter;
  }
  bool isInput(int t) const {
    return g_.tensors[size_t(t)].role == TensorRole::Input;
  }
  /// A buffer of an ONNX import (read by primitives): a static array of the
  /// program, whole on every rank, without a gradient.
  bool isConst(int t) const {
    return g_.tensors[size_t(t)].role == TensorRole::Constant;
  }
  /// Tensor t's name as a comment may carry it (SourceText.h).
  std::string note(int t) const {
    return commentText(g_.tensors[size_t(t)].name);
  }
  const std::vector<int64_t> &full(int t) const {
    return g_.tensors[size_t(t)].shape;
  }
  /// Local shape: tp layout l, and a graph model's own nodes' rows under dp.
  std::vector<int64_t> local(int t, TpLayout l) const {
    std::vector<int64_t> s = localShape(full(t), l, tp_);
    if (nodeSplit() && g_.nodeRows(t))
      s[0] /= plan_.knobs.dp;
    return s;
  }
  /// dp splits a graph model's nodes: each dp rank owns a block of rows.
  bool nodeSplit() const { return graphModel_ && plan_.knobs.dp > 1; }
  std::string allNodes(int stage, int t, TpLayout l, std::vector<Step> &steps);
  /// The stage-struct member holding tensor t in layout l.
  std::string bufName(int t, TpLayout l) const {
    if (l == L_.tensors[size_t(t)])
      return names_[size_t(t)];
    return names_[size_t(t)] +
           (l.split() ? "_s" + std::to_string(l.dim) +
                            (l.segments > 1 ? "x" + std::to_string(l.segments)
                                            : std::string())
                      : "_full");
  }
  std::string val(int t, TpLayout l) const;
  std::string grad(int t, TpLayout l) const;
  /// Elements of tensor t in layout l: a number, or for a sparse activation
  /// the stored entries of its adjacency (known once the graph is built).
  std::string elems(int t, TpLayout l) const {
    const int pattern = g_.sparsePattern(t);
    if (pattern >= 0 && !isInput(t))
      return val(pattern, TpLayout{}) + ".nnz()";
    return std::to_string(numel(local(t, l)));
  }
  /// names_: each tensor's identifier, unique, and none another's derived
  /// buffer name ("x_full", "d_x": StageLayout.cpp).
  void nameTensors();
  void addMember(int stage, const Member &m);
  void addTensor(int stage, int t, TpLayout l, bool withGrad);
  std::string ensureLayout(int stage, int t, TpLayout want,
                           std::vector<Step> &steps);
  std::map<std::pair<size_t, bool>, std::vector<int>>
  assignBuckets(int stage, const std::vector<Step> &steps);
  std::string gradSyncConfig(const pipeline::Schedule &s) const;
  std::string stepGraphGlue() const;
  void emitOp(size_t i, std::vector<Step> &steps);
  /// An op kind's emitter (OpTable.cpp): its lines, and what the CUDA program
  /// allows of it.
  /// What the CUDA program runs of an op kind: nothing yet (image ops), the
  /// op on activations only, or also with parameter operands (the ops of
  /// layers with weights, which take the act_t working copy and the fp32
  /// gradient).
  enum class CudaRuns { No, OnActivations, WithWeights };
  struct OpEntry {
    void (Emitter::*emit)(OpCall &);
    CudaRuns cuda;
  };
  /// Every op kind the programs run, with its emitter: the one table.
  static const std::map<std::string, OpEntry> &opTable();
  // The op emitters, one a kind, in one file per family
  // (EmbeddingEmitter.cpp, LinearEmitter.cpp, ...).
  void emitEmbedding(OpCall &c);
  void emitPositional(OpCall &c);
  void emitRotary(OpCall &c);
  void emitLinear(OpCall &c);
  void emitMatmul(OpCall &c);
  void emitBiasAdd(OpCall &c);
  void emitAdd(OpCall &c);
  void emitMul(OpCall &c);
  void emitGelu(OpCall &c);
  void emitReluSilu(OpCall &c);
  void emitSwiglu(OpCall &c);
  void emitNorm(OpCall &c);
  void emitSoftmax(OpCall &c);
  void emitCrossEntropy(OpCall &c);
  void emitSquaredError(OpCall &c);
  // The accuracy counts: the activation set's (`comment`) or the results'
  // members, a counting call's text ("a.correct" counting scores against
  // labels, or the held-out nodes' count), and the host value of one after
  // the step.
  std::string correctMembers(bool comment) const;
  std::string countCorrect(bool heldout, const std::string &args) const;
  std::string correctRead(bool heldout) const;
  void emitRowsAccuracy(const std::function<void(std::string)> &F,
                        const std::string &scores, const std::string &labels,
                        int64_t N, int64_t V);
  void emitAttention(OpCall &c);
  void emitConv2d(OpCall &c);
  void emitPool2d(OpCall &c);
  void emitFlatten(OpCall &c);
  void emitTranspose(OpCall &c);
  void emitSpmm(OpCall &c);
  void emitSddmm(OpCall &c);
  void emitEdgeSoftmax(OpCall &c);
  void emitHeadDot(OpCall &c);
  void emitGatAggregate(OpCall &c);
  void emitPrimitive(OpCall &c);
  int64_t vocab() const;
  void planVocabPadding();
  void planGeluFusion();
  /// Per tensor, the ops reading it (once per operand slot).
  std::vector<std::vector<size_t>> readers() const {
    std::vector<std::vector<size_t>> r(g_.tensors.size());
    for (size_t i = 0; i < g_.ops.size(); ++i)
      for (int t : g_.ops[i].operands)
        r[size_t(t)].push_back(i);
    return r;
  }
  void planResidualFusion();
  bool storesGrad(size_t i, int t, TpLayout l, const std::string &dx) const;
  bool gathersPartialGrads(int t) const;
  std::string vocabPaddingText() const;
  std::string tpPartialGradsText() const;
  void emitStage(int stage, std::string &out);
  /// What a stage's code is emitted from (Stage.cpp, planStage).
  struct StagePlan {
    int stage;
    std::vector<Step> steps;
    std::vector<int> in, sendOut, inputs; // boundary in / out, model inputs
    StageLayers sl;
    StageRecompute rc;
    bool hasLoss;
  };
  StagePlan planStage(int stage);
  /// Stage st's members (none yet: empty).
  const std::vector<Member> &stageMembers(int st) const {
    static const std::vector<Member> none;
    auto it = members_.find(st);
    return it == members_.end() ? none : it->second;
  }
  std::string stageStructText(const StagePlan &p);
  std::set<std::string> perSetGradients(const StagePlan &p);
  /// The per-set buffer the gradient of output t, sent to the next stage,
  /// is received into where the sets share gradients (Stage.cpp).
  std::string receivedGrad(int t) const {
    return "d_" + bufName(t, L_.tensors[size_t(t)]) + "_received";
  }
  std::string stageForwardText(const StagePlan &p) const;
  std::string stageBackwardText(const StagePlan &p);
  std::string stageZeroGradsText(const StagePlan &p) const;
  std::string stageInstructionsText(const StagePlan &p) const;
  std::string stageSetsText(const StagePlan &p) const;
  /// Groups the layers' parameters into tables (LayerLoop.cpp).
  void planLayerParams();
  /// struct Params and param_specs(), the layer tables as loops.
  std::string paramsText() const;
  /// The parameter tensors in the order of param_specs()'s rows.
  std::vector<int> paramOrder() const;
  /// The stage's layers as a table, or none where their members differ.
  StageLayers planStageLayers(int stage,
                              const std::vector<LayerSpan> &spans) const;
  std::string canonicalLayerText(const StageLayers &sl, size_t j,
                                 const std::string &text) const;
  /// The layers' forward or backward lines (stepText per step), the layers
  /// after the first as loops where their lines read the same.
  std::string foldLayers(const StageLayers &sl,
                         const std::vector<std::string> &stepText,
                         bool backward,
                         const StageRecompute *rc = nullptr) const;
  /// A stage function's lines: the steps before the layers, the layers
  /// (foldLayers), the steps after; the backward last step first.
  std::string layerOrdered(const StageLayers &sl,
                           const std::vector<std::string> &stepText,
                           bool backward,
                           const StageRecompute *rc = nullptr) const;
  /// How many layers of `stage` recompute (StageInfo::recomputeLayers, its
  /// first ones; 0 without recomputation).
  int recomputedLayers(int stage) const;
  /// What `stage` recomputes, and how (Recompute.cpp); `outside` is the
  /// stage's text outside its steps that names members (its transfers).
  StageRecompute planRecompute(int stage, const StageLayers &sl,
                               const std::vector<Step> &steps,
                               const std::string &outside) const;
  /// The declarations and functions of a stage's recomputation: the layer
  /// struct's constructor, the scratch, stage<k>_recompute_begin/_end.
  std::string recomputeText(int stage, const StageLayers &sl,
                            const StageRecompute &rc) const;
  std::set<int> scratchStages_; // stages with a recompute scratch layer
  StageTypes stageTypes_;       // which stages share one template
  std::string header() const;
  std::string stagesCode(int stages);
  std::string constsText(const pipeline::Schedule &sched) const;
  std::string stepGlue(const pipeline::Schedule &sched);
  std::string paramListText() const;
  double collectiveBytes(const planner::CollectiveUse &c) const;
  /// The header's account of what the program recomputes (Recompute.cpp).
  std::string recomputeSummary() const;
  std::string prelude() const;
  std::string specText() const;
  std::string programMain() const;
  std::string fp8Weights() const; // main()'s FP8 linears (fp8 plans)
  // K-FAC plans (KfacEmitter.cpp).
  void checkKfac() const;
  void emitKfacCurvature(OpCall &c, const std::string &dy, int64_t rows,
                         int64_t in, int64_t out, bool tw);
  std::string kfacProgramText() const;
  /// Stage `st`'s K-FAC operand function (empty without K-FAC layers).
  std::string kfacStageFunction(int st) const;
  // A K-FAC item placed on a device: run in the refresh cycle's step `phase`
  // (0: the refresh step), in the canonical order of `key` within its slot;
  // `entry`, its instruction-table entry (ScheduleTable.h).
  struct KfacCall {
    int phase;
    std::tuple<int, int, int> key; // kind (curvature, reduce, invert), row, G
    std::string entry;
    int saved = -1; // kfac_curvature_saved's layer row
  };
  // (device, slot) -> calls; slot k: before instruction k, k = the list's
  // length: after the last.
  std::map<std::pair<int, size_t>, std::vector<KfacCall>>
  kfacPlacement(const pipeline::Schedule &s) const;
  std::string params() const;
  std::string schedules(const pipeline::Schedule &s) const;

  const planner::Plan &plan_;
  const ModelGraph &g_;
  ModelLayout L_;
  int tp_;
  bool cuda_ = false; // emit the CUDA program (device buffers, NCCL)
  // What the backend's program offers the op emitters (Target.h).
  const Target &target_;
  std::vector<std::string> names_;
  std::vector<int> producer_;
  bool tokenModel_ = false, graphModel_ = false;
  // An image or feature classifier (mlp, vgg): synthetic class prototypes.
  bool classModel_ = false;
  int classInput_ = -1;   // its images / features input
  int classTargets_ = -1; // its class labels
  // Per stage: struct members (in order, unique), and buffers already there.
  std::map<int, std::vector<Member>> members_;
  std::map<int, std::set<std::string>> memberSet_;
  std::map<std::pair<int, std::string>, bool> converted_;
  // File-scope declarations of the ONNX primitives (PrimitiveEmitter.cpp):
  // the constants they read and each op's resolved Primitive.
  std::string primitiveDecls_;
  std::set<int> declaredConsts_;
  IdentTable primitiveNames_;  // their resolutions' names (prim_<op>)
  bool splitBackward_ = false; // zero-bubble: B and W apart
  bool shareGrads_ = false;    // the sets of a stage share inner gradients
  // The activation sets each stage allocates and the micro-batch each holds
  // (pipeline/ActivationSets.h), from the schedule and K-FAC's reads.
  pipeline::ActivationSets sets_;
  std::set<int> inputStages_; // stages with Stage<k>Inputs (a step graph's)
  int lossStage_ = -1;        // the stage with Stage<k>Results
  /// `stage<k>[...]`: micro-batch `mb`'s activation set of `stage`.
  std::string setOf(int stage, const std::string &mb) const {
    return fmt::format("stage{0}[size_t(kSetOf[{0}][{1}])]", stage, mb);
  }
  std::vector<uint64_t> deviceMask_; // per tensor: pipeline devices holding it
  std::vector<Bucket> buckets_;      // cuda, no ZeRO, dp > 1 or tp-partial
  double lossScale_ = 0;
  int64_t lossCount_ = 0;
  bool lossRowsSplit_ = false; // every tp rank holds some positions' losses
  // cuda: the padded vocabulary. Per parameter, its local rows padded to a
  // multiple of 64 (the device holds them, the padding rows zero); per
  // logits tensor, its last dimension padded alike (the rows' stride).
  std::map<int, int64_t> padRows_, padCols_;
  // cuda: linear -> tanh GELU -> linear chains run in the two GEMMs
  // (planGeluFusion): per GELU op its first linear, per first linear its
  // GELU, per second linear the GELU whose input gradient it writes.
  std::map<size_t, size_t> geluOfFc1_, geluOfFc2_;
  std::set<size_t> fusedGelus_;
  // cuda: a linear whose output only a residual add reads writes the sum
  // (planResidualFusion): per linear its add, per add the operand index of
  // that linear's output.
  std::map<size_t, size_t> addOfLinear_;
  std::map<size_t, size_t> linearOperandOfAdd_;
  // The ops reading each tensor (readers(), once per emit), and on cuda the
  // activation gradient buffers ("a.d_...data()") one backward call writes
  // whole by storing (=): never zeroed (storesGrad).
  std::vector<std::vector<size_t>> users_;
  /// A table of identical layers' parameters: P.<name>[j].<member> holds
  /// parameter params[j][k] of model layer layers[j].
  struct LayerArray {
    std::string name;
    std::vector<int> layers;
    std::vector<std::string> members;
    std::vector<std::vector<int>> params;
  };
  std::vector<LayerArray> layerArrays_;
  std::map<int, int> arrayOfParam_; // first parameter -> its table
  std::set<std::string> storedGrads_;
  // K-FAC: per linear op its row of the layer table, and the rows.
  std::map<size_t, int> kfacIndex_;
  std::vector<std::string> kfacRows_;     // each row's fields after its name
  std::vector<std::string> kfacRowNames_; // each row's op name
  std::map<std::string, int> kfacByName_; // op name -> row
  std::vector<int> kfacStage_;            // per row: its model stage
  // Per model stage, the cases of its curvature function: a layer's row, its
  // input (factor A's operand), output gradient (G's) and rows.
  struct KfacCase {
    int row;
    std::string x, dy;
    int64_t rows;
  };
  std::map<int, std::vector<KfacCase>> kfacCases_;
};

} // namespace autoddl::codegen::emit
