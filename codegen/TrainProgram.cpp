//===- TrainProgram.cpp - emit train.cpp for the CPU + MPI backend -------===//
//
// The program reads like llm.c (STYLE lesson 10): the plan in a header comment,
// one struct of activations per pipeline stage with every shape in a comment,
// each stage's forward and backward as straight-line kernel calls, and each
// pipeline device's instruction list (cost_model/pipeline/Schedule.h) spelled
// out. The fixed part (argument parsing, data, optimizer, checkpoints,
// metrics) is TrainMain.inc, appended unchanged.
//
//===----------------------------------------------------------------------===//
#include "codegen/CpuCodegen.h"
#include "codegen/Layout.h"
#include "planner/ProgramDecisions.h"

#include "cost_model/pipeline/Schedule.h"
#include "support/UserError.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

namespace autoddl::codegen {

// The fixed parts of train.cpp (TrainText.cpp, CudaTrainText.cpp): includes
// and helpers, the runtime glue every stage uses, and main(). The pieces named
// "Shared" are the same for both backends.
extern const char *const kTrainPreludeText;
extern const char *const kTrainSpecText;
extern const char *const kTrainSupportText;
extern const char *const kTrainSharedPipelineText;
extern const char *const kTrainDataText;
extern const char *const kTrainClassDataText;
extern const char *const kTrainAccuracyText;
extern const char *const kTrainClassIncludesText;
extern const char *const kTrainOptionsText;
extern const char *const kTrainParamsText;
extern const char *const kTrainAllParamsText;
extern const char *const kTrainOptimizerText;
extern const char *const kTrainParseText;
extern const char *const kTrainCheckpointText;
extern const char *const kTrainMainText;
extern const char *const kCudaTrainPreludeText;
extern const char *const kCudaTrainSupportText;
extern const char *const kCudaTrainDataText;
extern const char *const kCudaTrainInitText;
extern const char *const kCudaTrainParamsText;
extern const char *const kCudaTrainMainText;

namespace {

using pipeline::Direction;
using pipeline::OpKind;

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::string shapeInit(const std::vector<int64_t> &s) {
  std::string r = "Shape{";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

int64_t numel(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// A C identifier for a model name: "h.0.attn.qkv" -> "h0_attn_qkv".
std::string ident(const std::string &name) {
  std::string r;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      r += c;
    else if (!r.empty() && r.back() != '_')
      r += '_';
  }
  while (!r.empty() && r.back() == '_')
    r.pop_back();
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0])))
    r = "t_" + r;
  return r;
}

std::string fmtDouble(double v) {
  std::string s = fmt::format("{:.17g}", v);
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

template <typename T> T attrOr(const OpDef &op, const char *key, T dflt) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end())
    return dflt;
  if (auto *v = std::get_if<T>(&it->second))
    return *v;
  return dflt;
}

/// `text` with its one `anchor` replaced: the fixed program text a
/// classification model extends.
std::string replaceOnce(std::string text, const std::string &anchor,
                        const std::string &replacement) {
  const size_t at = text.find(anchor);
  if (at == std::string::npos || text.find(anchor, at + 1) != std::string::npos)
    throw std::logic_error("codegen: the fixed program text has no unique '" +
                           anchor + "'");
  return text.replace(at, anchor.size(), replacement);
}

/// The prelude of a classification program: it also includes the image
/// kernels.
std::string classPrelude(const std::string &prelude) {
  const std::string spmm = "// spmm\n", cstdio = "#include <cstdio>\n";
  return replaceOnce(replaceOnce(prelude, spmm, spmm + kTrainClassIncludesText),
                     cstdio, "#include <algorithm>\n" + cstdio);
}

/// main() of a classification program (or, with `graph`, of a graph model,
/// which has its own data): synthetic samples only (no --data), "samples" per
/// second, and the training accuracy of each step (before its update) printed
/// beside its loss; metrics.json's info.accuracy is the last step's. A graph
/// model also reports the accuracy over its held-out nodes
/// (info.heldout_accuracy).
std::string classMain(std::string text, bool graph) {
  const std::string graphData = "  if (kGraphModel) {\n";
  if (!graph) {
    text = replaceOnce(text, graphData,
                       "  if (!o.data.empty())\n    throw "
                       "std::invalid_argument(\"--data: a classification "
                       "model trains on synthetic \"\n                      "
                       "          \"class prototypes generated from "
                       "--seed\");\n" +
                           graphData);
    text = replaceOnce(
        text,
        "  metrics.items_name = kGraphModel ? \"samples\" : \"tokens\";\n",
        "  metrics.items_name = \"samples\";\n");
  }
  const std::string loop =
      "  for (int64_t step = first_step; step < o.steps; ++step) {\n";
  text =
      replaceOnce(text, loop,
                  std::string("  double accuracy = 0; // of the last step\n") +
                      (graph ? "  double heldout_accuracy = 0;\n" : "") + loop);
  const std::string mean = "    loss /= double(kLossCount);\n";
  std::string count =
      "    double correct = local_correct();\n    "
      "mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &correct, 1, MPI_DOUBLE, "
      "MPI_SUM,\n                           MPI_COMM_WORLD));\n    "
      "accuracy = correct / double(kLossCount);\n";
  if (graph)
    count += "    double heldout = local_heldout_correct();\n    "
             "mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &heldout, 1, MPI_DOUBLE, "
             "MPI_SUM,\n                           MPI_COMM_WORLD));\n    "
             "heldout_accuracy = heldout / double(kHeldOutCount);\n";
  text = replaceOnce(text, mean, mean + count);
  text = replaceOnce(
      text,
      "\"step %4lld/%lld: loss %.6f (%.1f ms)\\n\", (long long)step + 1,\n"
      "                  (long long)o.steps, loss, seconds * 1e3);",
      graph
          ? "\"step %4lld/%lld: loss %.6f accuracy %.4f held-out %.4f (%.1f "
            "ms)\\n\",\n                  (long long)step + 1, (long "
            "long)o.steps, loss, accuracy,\n                  "
            "heldout_accuracy, seconds * 1e3);"
          : "\"step %4lld/%lld: loss %.6f accuracy %.4f (%.1f ms)\\n\",\n"
            "                  (long long)step + 1, (long long)o.steps, loss, "
            "accuracy,\n                  seconds * 1e3);");
  const std::string out = "  if (!o.out.empty()) {\n";
  return replaceOnce(
      text, out,
      std::string(
          "  metrics.info[\"accuracy\"] = std::to_string(accuracy);\n") +
          (graph ? "  metrics.info[\"heldout_accuracy\"] = "
                   "std::to_string(heldout_accuracy);\n"
                 : "") +
          out);
}

/// What one step of a stage emits: forward lines, and the backward lines of
/// its input-gradient and weight-gradient halves.
struct Step {
  std::vector<std::string> fwd, bwdInput, bwdWeight;
  // Parameters whose gradient the input / weight half writes.
  std::vector<int> paramsInput, paramsWeight;
};

/// The CUDA program's op profiling (`--profile`, backends/cuda/OpProfile.h):
/// each call of an op's step is wrapped in a scope naming the op kind
/// (`{ OpScope op_scope("linear", kOpBackward); linear_backward(...); }`).
/// The tensor-parallel collectives, which run on compute_stream() too, are
/// scopes of their own, "comm:all_reduce", "comm:all_gather",
/// "comm:reduce_scatter"; a layout conversion's local slice "comm:slice"
/// (kind empty: every call is a collective or a slice). Comments,
/// declarations and block braces stay as they are.
void profileScopes(Step &s, const std::string &kind) {
  auto scopeOf = [&](const std::string &call) -> std::string {
    for (const char *c :
         {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"})
      if (call.rfind(c, 0) == 0)
        return std::string("comm:") + c;
    if (call == "slice_backward_gather")
      return "comm:all_gather";
    if (call == "all_gather_backward")
      return "comm:reduce_scatter";
    if (kind.empty())
      return "comm:slice";
    return kind;
  };
  auto wrap = [&](std::vector<std::string> &lines, const char *phase) {
    for (std::string &l : lines) {
      const size_t b = l.find_first_not_of(' ');
      if (b == std::string::npos)
        continue;
      size_t e = b;
      while (e < l.size() &&
             (std::islower(static_cast<unsigned char>(l[e])) ||
              std::isdigit(static_cast<unsigned char>(l[e])) || l[e] == '_'))
        ++e;
      const size_t semi = l.rfind(';');
      if (e == b || e >= l.size() || l[e] != '(' || semi == std::string::npos)
        continue;
      l.insert(semi + 1, " }");
      l.insert(b, fmt::format("{{ OpScope op_scope(\"{}\", {}); ",
                              scopeOf(l.substr(b, e - b)), phase));
    }
  };
  wrap(s.fwd, "kOpForward");
  wrap(s.bwdInput, "kOpBackward");
  wrap(s.bwdWeight, "kOpBackward");
}

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

class Emitter {
public:
  Emitter(const planner::Plan &plan, const ModelGraph &g, Backend backend)
      : plan_(plan), g_(g),
        L_(chooseLayout(plan, g, backend == Backend::Cuda ? "cuda" : "cpu")),
        tp_(plan.knobs.tp), cuda_(backend == Backend::Cuda) {
    names_.resize(g.tensors.size());
    std::set<std::string> used;
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      std::string n = ident(g.tensors[t].name);
      std::string u = n;
      for (int k = 2; used.count(u); ++k)
        u = n + "_" + std::to_string(k);
      used.insert(u);
      names_[t] = u;
    }
    producer_.assign(g.tensors.size(), -1);
    for (size_t i = 0; i < g.ops.size(); ++i)
      for (int r : g.ops[i].results)
        producer_[size_t(r)] = int(i);
    tokenModel_ = findInput("input_ids") >= 0;
    graphModel_ = findInput("adjacency") >= 0;
    if (!tokenModel_ && !graphModel_)
      findClassInputs();
    classModel_ = classInput_ >= 0 && classTargets_ >= 0;
    if (!tokenModel_ && !graphModel_ && !classModel_)
      throw UserError(
          "codegen: model " + g.name +
          " has neither input_ids, adjacency nor one f32 input with the "
          "class labels of a cross_entropy; the " +
          (cuda_ ? "cuda backend feeds token and graph models"
                 : "cpu backend feeds token, graph and classification models") +
          " only");
    if (cuda_ && classModel_)
      throw UserError("codegen: model " + g.name +
                      " is a classification model (" +
                      g.tensors[size_t(classInput_)].name + " and " +
                      g.tensors[size_t(classTargets_)].name +
                      "); the cuda backend runs token and graph models "
                      "only (use --backend cpu)");
  }

  std::string emit();

private:
  /// Whether the program reports the training accuracy (classifiers and
  /// graph models, whose losses are over labelled samples or nodes).
  bool reportsAccuracy() const { return classModel_ || graphModel_; }
  /// A classification model (mlp, vgg, an explicit graph): its one dense f32
  /// input (images or features) and the i32 input holding the labels of its
  /// cross_entropy.
  void findClassInputs() {
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      const TensorDef &td = g_.tensors[t];
      if (td.role != TensorRole::Input || td.sparse ||
          td.dtype != ops::DType::F32)
        continue;
      if (classInput_ >= 0) { // several: not a classifier this program feeds
        classInput_ = -1;
        return;
      }
      classInput_ = int(t);
    }
    for (const OpDef &op : g_.ops)
      if (op.kind == "cross_entropy" && op.operands.size() == 2 &&
          isInput(op.operands[1]))
        classTargets_ = op.operands[1];
  }
  int findInput(const std::string &name) const {
    for (size_t t = 0; t < g_.tensors.size(); ++t)
      if (g_.tensors[t].role == TensorRole::Input && g_.tensors[t].name == name)
        return int(t);
    return -1;
  }
  bool isParam(int t) const {
    return g_.tensors[size_t(t)].role == TensorRole::Parameter;
  }
  bool isInput(int t) const {
    return g_.tensors[size_t(t)].role == TensorRole::Input;
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
  void addMember(int stage, const Member &m);
  void addTensor(int stage, int t, TpLayout l, bool withGrad);
  std::string ensureLayout(int stage, int t, TpLayout want,
                           std::vector<Step> &steps);
  std::map<std::pair<size_t, bool>, std::vector<int>>
  assignBuckets(int stage, const std::vector<Step> &steps);
  std::string gradSyncConfig(const pipeline::Schedule &s) const;
  std::string stepGraphGlue(int stages) const;
  void emitOp(size_t i, std::vector<Step> &steps);
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
  std::string header() const;
  std::string params() const;
  std::string schedules(const pipeline::Schedule &s) const;

  const planner::Plan &plan_;
  const ModelGraph &g_;
  ModelLayout L_;
  int tp_;
  bool cuda_ = false; // emit the CUDA program (device buffers, NCCL)
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
  bool splitBackward_ = false;       // zero-bubble: B and W apart
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
  std::set<std::string> storedGrads_;
};

std::string Emitter::val(int t, TpLayout l) const {
  if (isParam(t)) // the kernels read the act_t working copy on cuda
    return "P." + names_[size_t(t)] +
           (cuda_ ? ".work.data()" : ".value.data()");
  if (isInput(t)) {
    const std::string &n = g_.tensors[size_t(t)].name;
    if (graphModel_) {
      if (n == "adjacency")
        return "graph_adjacency()";
      if (n == "features")
        return "graph_features()";
      return "graph_labels()";
    }
    return "a." + names_[size_t(t)] + ".data()";
  }
  return "a." + bufName(t, l) + ".data()";
}

std::string Emitter::grad(int t, TpLayout l) const {
  if (isParam(t))
    return "P." + names_[size_t(t)] + ".grad.data()";
  if (isInput(t))
    return "nullptr";
  return "a.d_" + bufName(t, l) + ".data()";
}

/// Vocabulary of a token model: rows of the first embedding table.
int64_t Emitter::vocab() const { return planner::vocabularyRows(g_); }

/// The CUDA program runs a tanh GELU between two linears (an MLP block) in
/// their GEMMs' epilogues: the first linear's GEMM writes gelu(pre) and pre
/// (linear_gelu_forward), the second's input-gradient GEMM multiplies by the
/// GELU's derivative at pre (linear_backward_dgelu). This saves the GELU's two
/// passes over the 4C-wide activation and the zeroing of its output gradient.
/// Only where nothing else sees what the fusion skips: pre goes to the GELU
/// only, the GELU's output to the second linear's input only, all three on
/// one stage in the layouts they hand on (no conversion between); the first
/// linear not row-parallel (its all-reduce and bias follow the GEMM), the
/// second's input gradient complete on the rank (not column-parallel).
void Emitter::planGeluFusion() {
  if (!cuda_)
    return;
  const planner::GraphUses uses(g_);
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    planner::GeluChain chain; // the graph's part (planner/ProgramDecisions.h)
    if (!planner::geluEpilogueChain(g_, uses, i, chain))
      continue;
    const size_t fc1 = chain.fc1, fc2 = chain.fc2;
    const OpDef &second = g_.ops[fc2];
    const OpPlan &p1 = L_.ops[fc1], &pg = L_.ops[i], &p2 = L_.ops[fc2];
    if (p1.stage != pg.stage || pg.stage != p2.stage ||
        !(pg.operands[0] == p1.result) || !(p2.operands[0] == pg.result) ||
        p1.mode == OpMode::Row || p2.mode == OpMode::Column ||
        padRows_.count(g_.ops[fc1].operands[1]) ||
        padRows_.count(second.operands[1]))
      continue;
    fusedGelus_.insert(i);
    geluOfFc1_[fc1] = i;
    geluOfFc2_[fc2] = i;
  }
}

/// The CUDA program runs a residual add whose one operand is a linear's output
/// (the attention and MLP projections) in that linear's GEMM: it reads the
/// residual as its C (beta = 1) and writes the sum (linear_residual_forward);
/// the linear's backward reads the sum's gradient, which is its output's,
/// and the add's backward only adds it to the residual's. This saves the add
/// kernel, the output-gradient buffer's zeroing and two of its passes. Only
/// where the linear's output goes to that add alone, on one stage, in the
/// layouts it is made in; the residual made before the linear (or an input)
/// and read in its own layout; the linear not row-parallel (its all-reduce
/// and bias follow the GEMM).
void Emitter::planResidualFusion() {
  if (!cuda_)
    return;
  const planner::GraphUses uses(g_);
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    const OpDef &add = g_.ops[i];
    // The graph's part (planner/ProgramDecisions.h), then the layouts'.
    for (size_t k : planner::residualGemmOperands(g_, uses, i)) {
      const int t = add.operands[k], res = add.operands[1 - k];
      const int lin = producer_[size_t(t)];
      if (addOfLinear_.count(size_t(lin)))
        continue;
      const OpPlan &pl = L_.ops[size_t(lin)], &pa = L_.ops[i];
      if (pl.stage != pa.stage || pl.mode == OpMode::Row ||
          !(pa.operands[k] == pl.result) ||
          !(pa.operands[1 - k] == L_.tensors[size_t(res)]) ||
          padRows_.count(g_.ops[size_t(lin)].operands[1]))
        continue;
      addOfLinear_[size_t(lin)] = i;
      linearOperandOfAdd_[i] = k;
      break;
    }
  }
}

/// Whether the gathered copy (B) of tensor t, split on rows, is read only by
/// column-parallel linears as their input (Megatron's sequence-parallel
/// column linears): their input gradients, partial over tp, are then summed
/// into the copy's gradient as they are and the conversion's backward
/// reduce-scatters it onto t's rows, where otherwise each linear all-reduces
/// its partial and the conversion keeps its rows (twice the volume).
bool Emitter::gathersPartialGrads(int t) const {
  const TpLayout have = L_.tensors[size_t(t)];
  if (!have.split() || have.segments > 1 || isParam(t) || isInput(t))
    return false;
  bool any = false;
  for (size_t i : users_[size_t(t)])
    for (size_t k = 0; k < g_.ops[i].operands.size(); ++k) {
      if (g_.ops[i].operands[k] != t)
        continue;
      const TpLayout l = L_.ops[i].operands[k];
      if (l == have)
        continue;
      if (l.split() || L_.ops[i].mode != OpMode::Column || k != 0)
        return false;
      any = true;
    }
  return any;
}

/// cuda: whether op i's backward may store (=) its input gradient of t, held
/// in `dx`, instead of adding to it, so that the buffer needs no zeroing:
/// t is an activation that op i alone reads, once, in t's own layout (no
/// conversion writes the buffer too), on the stage that makes t (its
/// gradient is not received), and dx is that layout's gradient buffer.
bool Emitter::storesGrad(size_t i, int t, TpLayout l,
                         const std::string &dx) const {
  if (!cuda_ || isParam(t) || isInput(t) || t == g_.loss ||
      !(l == L_.tensors[size_t(t)]) || dx != grad(t, l))
    return false;
  const int p = producer_[size_t(t)];
  return p >= 0 && L_.ops[size_t(p)].stage == L_.ops[i].stage &&
         users_[size_t(t)] == std::vector<size_t>{i};
}

/// The CUDA program holds a vocabulary-sized parameter whose leading dimension
/// is the vocabulary (the embedding table [V, C], an lm_head weight [V, C]
/// with transpose_weight) with its local rows rounded up to a multiple of 64:
/// GEMMs with 50257 as a dimension run at a fifth of the aligned rate on an
/// H200 (bench/results/cuda/2026-11-29-kernels/). Only where every use allows
/// it: embedding tables, and bias-free transposed linears whose logits go
/// only to a cross-entropy on the same stage in the same layout (which then
/// reads the first V columns of rows Vp apart). The padding rows are zero and
/// stay zero: zero logits columns, zero dlogits columns, zero weight
/// gradient rows, and the optimizer updates the real elements only.
void Emitter::planVocabPadding() {
  const int64_t V = planner::vocabularyRows(g_);
  if (!cuda_ || V <= 0)
    return;
  const planner::GraphUses graphUses(g_);
  std::vector<std::vector<std::pair<size_t, size_t>>> uses(g_.tensors.size());
  for (size_t i = 0; i < g_.ops.size(); ++i)
    for (size_t k = 0; k < g_.ops[i].operands.size(); ++k)
      uses[size_t(g_.ops[i].operands[k])].push_back({i, k});
  for (size_t t = 0; t < g_.tensors.size(); ++t) {
    if (!isParam(int(t)) || full(int(t)).size() != 2 || full(int(t))[0] != V)
      continue;
    const TpLayout l = L_.tensors[t];
    const int64_t rows = local(int(t), l)[0];
    const int64_t padded = planner::paddedVocabRows(rows);
    if (padded == rows || uses[t].empty())
      continue;
    bool ok = true;
    std::vector<int> logits;
    for (auto [i, k] : uses[t]) {
      const OpDef &op = g_.ops[i];
      const OpPlan &p = L_.ops[i];
      if (!(p.operands[k] == l) || k != 1)
        ok = false;
      else if (op.kind == "embedding")
        continue;
      else if (!planner::logitsOnlyToLoss(g_, graphUses, op))
        ok = false; // the graph's part (planner/ProgramDecisions.h)
      else {
        const int r = op.results[0];
        const TpLayout rl = L_.tensors[size_t(r)];
        ok &= p.result == rl && local(r, rl).back() == rows;
        for (auto [c, ck] : uses[size_t(r)]) {
          const OpPlan &cp = L_.ops[c];
          ok &= cp.stage == p.stage && cp.operands[0] == rl;
        }
        logits.push_back(r);
      }
      if (!ok)
        break;
    }
    if (!ok)
      continue;
    padRows_[int(t)] = padded;
    for (int r : logits)
      padCols_[r] = padded;
  }
}

/// The cuda program's device_numel(): elements a rank holds of a parameter
/// on the device (more than its block for a padded vocabulary).
std::string Emitter::vocabPaddingText() const {
  std::string out =
      "// Elements of a parameter on the device: its block, or more for a "
      "vocabulary padded\n// to a multiple of 64 rows per rank (the header "
      "says why; the padding rows stay zero).\n"
      "static int64_t device_numel(const Param &p) {\n";
  for (const auto &[t, rows] : padRows_) {
    const std::vector<int64_t> ls = local(t, L_.tensors[size_t(t)]);
    out += fmt::format("  if (&p == &P.{}) // {} held as {}\n    return {};\n",
                       names_[size_t(t)], shapeStr(ls), shapeStr({rows, ls[1]}),
                       rows * ls[1]);
  }
  out += "  return p.n;\n}\n\n";
  return out;
}

/// grad_partial_over_tp(): the parameters whose gradient each tp rank holds
/// a part of (ModelLayout::tpPartialGrads), summed over tp by the optimizer
/// step.
std::string Emitter::tpPartialGradsText() const {
  std::string out = "// Parameters read whole by ops on split rows (sequence-"
                    "parallel norms, batch or\n// sequence splits): each tp "
                    "rank's gradient is its rows' part, summed over tp\n// "
                    "before the optimizer step.\n"
                    "static bool grad_partial_over_tp(const Param &p) {\n";
  for (int t : L_.tpPartialGrads)
    out += fmt::format("  if (&p == &P.{})\n    return true;\n",
                       names_[size_t(t)]);
  out += L_.tpPartialGrads.empty() ? "  (void)p;\n  return false;\n}\n\n"
                                   : "  return false;\n}\n\n";
  return out;
}

void Emitter::addMember(int stage, const Member &m) {
  if (memberSet_[stage].insert(m.name).second)
    members_[stage].push_back(m);
}

void Emitter::addTensor(int stage, int t, TpLayout l, bool withGrad) {
  if (isParam(t))
    return;
  const auto &td = g_.tensors[size_t(t)];
  if (isInput(t)) {
    if (graphModel_)
      return;
    const bool i32 = td.dtype == ops::DType::I32;
    addMember(stage,
              {names_[size_t(t)], numel(td.shape),
               shapeStr(td.shape) + (i32 ? " i32, " : " f32, ") + td.name, i32,
               false});
    return;
  }
  if (td.shape.empty())
    return; // the scalar loss: kept as a sum in the struct
  if (g_.sparsePattern(t) >= 0) { // values at the adjacency's stored entries
    const std::string c = "[nnz] " + td.name + " at the stored entries of " +
                          g_.tensors[size_t(g_.sparsePattern(t))].name + " (" +
                          l.str() + ")";
    addMember(stage, {bufName(t, l), 0, c, false, false, false, elems(t, l)});
    if (withGrad)
      addMember(stage, {"d_" + bufName(t, l), 0, "gradient", false, true, false,
                        elems(t, l)});
    return;
  }
  std::vector<int64_t> ls = local(t, l);
  std::string c = shapeStr(ls) + " " + l.str() + " of " + shapeStr(td.shape);
  auto pad = padCols_.find(t);
  if (pad != padCols_.end()) { // rows of the padded vocabulary
    ls.back() = pad->second;
    c = shapeStr(ls) + " " + l.str() + " of " + shapeStr(td.shape) +
        ", the vocabulary padded (zero columns)";
  }
  addMember(stage, {bufName(t, l), numel(ls), c, false, false});
  if (withGrad)
    addMember(stage,
              {"d_" + bufName(t, l), numel(ls), "gradient", false, true});
}

/// Under a node split, the rows of every node of tensor t (which each dp rank
/// holds for its own nodes): all-gathered over dp once, before spmm or sddmm
/// reads them; the gradient of the gathered copy is partial on every rank and
/// is reduce-scattered back. Otherwise t as it is.
std::string Emitter::allNodes(int stage, int t, TpLayout l,
                              std::vector<Step> &steps) {
  if (!nodeSplit() || !g_.nodeRows(t) || g_.sparsePattern(t) >= 0)
    return val(t, l);
  const std::string name = bufName(t, l) + "_nodes";
  const std::vector<int64_t> ls = local(t, l);
  const int64_t cols = numel(ls) / ls[0], rows = ls[0] * plan_.knobs.dp;
  if (!converted_[{stage, name}]) {
    converted_[{stage, name}] = true;
    addMember(stage,
              {name, rows * cols,
               shapeStr({rows, cols}) + " " + g_.tensors[size_t(t)].name +
                   " of every node (gathered over dp)",
               false, false});
    Step s;
    s.fwd.push_back(fmt::format(
        "  // {}: every node's rows for spmm/sddmm: all-gather over dp",
        g_.tensors[size_t(t)].name));
    s.fwd.push_back(fmt::format("  all_gather_forward(a.{}.data(), {}, {}, 0, "
                                "g.dp);",
                                name, val(t, l), shapeInit(ls)));
    if (!isInput(t)) {
      addMember(stage,
                {"d_" + name, rows * cols, "gradient (partial)", false, true});
      s.bwdInput.push_back(fmt::format(
          "  // {}: the gathered copy's gradient is partial on every dp rank: "
          "reduce-scatter",
          g_.tensors[size_t(t)].name));
      s.bwdInput.push_back(
          fmt::format("  all_gather_backward({}, a.d_{}.data(), {}, 0, g.dp);",
                      grad(t, l), name, shapeInit(ls)));
    }
    if (cuda_)
      profileScopes(s, "");
    steps.push_back(std::move(s));
  }
  return "a." + name + ".data()";
}

/// Makes tensor t available in layout `want` on `stage`, emitting the
/// conversion once (a converted copy shared by every consumer).
std::string Emitter::ensureLayout(int stage, int t, TpLayout want,
                                  std::vector<Step> &steps) {
  TpLayout have = L_.tensors[size_t(t)];
  if (isInput(t) && want.split() && !graphModel_) {
    // An input read on split rows (batch or sequence): this rank's slice of
    // the loaded micro-batch, taken once per forward.
    const auto &td = g_.tensors[size_t(t)];
    const std::string name =
        names_[size_t(t)] + "_s" + std::to_string(want.dim);
    auto key = std::make_pair(stage, name);
    if (!converted_[key]) {
      converted_[key] = true;
      const bool i32 = td.dtype == ops::DType::I32;
      addMember(stage, {name, numel(local(t, want)),
                        shapeStr(local(t, want)) + (i32 ? " i32, " : " f32, ") +
                            td.name + " " + want.str(),
                        i32, false});
      Step s;
      s.fwd.push_back(fmt::format("  // {}: this tp rank's {} (local slice)",
                                  td.name, want.str()));
      s.fwd.push_back(fmt::format("  slice_forward(a.{}.data(), {}, {}, {}, "
                                  "kTP, g.rtp);",
                                  name, val(t, TpLayout{}),
                                  shapeInit(local(t, TpLayout{})), want.dim));
      if (cuda_)
        profileScopes(s, "");
      steps.push_back(std::move(s));
    }
    return "a." + name + ".data()";
  }
  if (have == want || isParam(t) || isInput(t))
    return val(t, want);
  const auto &fs = full(t);
  if (have.split() && want.split() &&
      (fs[size_t(have.dim)] % tp_ != 0 || fs[size_t(want.dim)] % tp_ != 0 ||
       have.dim == want.dim)) {
    ensureLayout(stage, t, TpLayout{}, steps); // uneven parts: through B
    have = TpLayout{};
  }
  // The collectives see a split "per segments" (a packed q|k|v: rank r holds
  // part r of every segment) as a plain split of a view with that dimension
  // cut in two, [segments, size / segments], split on the second.
  const std::vector<int64_t> whole = local(t, TpLayout{});
  std::vector<int64_t> view;
  std::vector<int> viewIndex(whole.size());
  for (size_t d = 0; d < whole.size(); ++d) {
    int seg = 1;
    for (const TpLayout &l : {have, want})
      if (l.dim == int(d))
        seg = std::max(seg, l.segments);
    if (seg > 1)
      view.push_back(seg);
    viewIndex[d] = int(view.size());
    view.push_back(whole[d] / seg);
  }
  auto viewDim = [&](TpLayout l) { return viewIndex[size_t(l.dim)]; };
  auto localView = [&](TpLayout l) { // ceil: a padded vocabulary's parts
    std::vector<int64_t> v = view;
    v[size_t(viewDim(l))] = (v[size_t(viewDim(l))] + tp_ - 1) / tp_;
    return shapeInit(v);
  };
  auto key = std::make_pair(stage, bufName(t, want));
  if (!converted_[key]) {
    converted_[key] = true;
    addTensor(stage, t, want, true);
    Step s;
    const std::string &n = g_.tensors[size_t(t)].name;
    if (have.split() && want.split()) { // S(a) -> S(b)
      s.fwd.push_back(
          fmt::format("  // {}: {} -> {} for its consumers: all-to-all over tp",
                      n, have.str(), want.str()));
      s.fwd.push_back(fmt::format(
          "  all_to_all_forward({}, {}, {}, {}, {}, g.tp);", val(t, want),
          val(t, have), localView(have), viewDim(have), viewDim(want)));
      s.bwdInput.push_back(fmt::format(
          "  // {}: the gradient goes back the same way (all-to-all)", n));
      s.bwdInput.push_back(fmt::format(
          "  all_to_all_backward({}, {}, {}, {}, {}, g.tp);", grad(t, have),
          grad(t, want), localView(have), viewDim(have), viewDim(want)));
    } else if (have.split()) { // S(d) -> B
      s.fwd.push_back(
          fmt::format("  // {}: {} -> B for its consumers: all-gather over tp",
                      n, have.str()));
      s.fwd.push_back(fmt::format("  all_gather_forward({}, {}, {}, {}, g.tp);",
                                  val(t, want), val(t, have), localView(have),
                                  viewDim(have)));
      if (gathersPartialGrads(t)) {
        s.bwdInput.push_back(fmt::format(
            "  // {}: the gathered copy's gradient is partial (column-parallel "
            "readers): reduce-scatter",
            n));
        s.bwdInput.push_back(fmt::format(
            "  all_gather_backward({}, {}, {}, {}, g.tp);", grad(t, have),
            grad(t, want), localView(have), viewDim(have)));
      } else {
        s.bwdInput.push_back(fmt::format(
            "  // {}: the gradient of the gathered copy is equal on every tp "
            "rank; keep this rank's part",
            n));
        s.bwdInput.push_back(fmt::format(
            "  gather_backward_local({}, {}, {}, {});", grad(t, have),
            grad(t, want), shapeInit(view), viewDim(have)));
      }
    } else { // B -> S(d)
      s.fwd.push_back(fmt::format(
          "  // {}: B -> {} for its consumers: local slice", n, want.str()));
      s.fwd.push_back(fmt::format(
          "  slice_forward({}, {}, {}, {}, kTP, g.rtp);", val(t, want),
          val(t, have), shapeInit(view), viewDim(want)));
      s.bwdInput.push_back(fmt::format(
          "  // {}: each tp rank holds the gradient of its slice: all-gather",
          n));
      s.bwdInput.push_back(
          fmt::format("  slice_backward_gather({}, {}, {}, {});", grad(t, have),
                      grad(t, want), localView(want), viewDim(want)));
    }
    if (cuda_)
      profileScopes(s, "");
    steps.push_back(std::move(s));
  }
  return val(t, want);
}

std::string Emitter::schedules(const pipeline::Schedule &s) const {
  std::string out;
  const int p = s.numDevices();
  for (int d = 0; d < p; ++d) {
    std::string list;
    for (const auto &ins : s.devices[size_t(d)]) {
      std::string letter(pipeline::opKindLetter(ins.kind));
      list += " " + letter + std::to_string(ins.microbatch);
    }
    out += fmt::format("// Pipeline device {}:{}\n", d, list);
    out += fmt::format("static void run_device{}(int64_t step) {{\n", d);
    for (const auto &ins : s.devices[size_t(d)]) {
      const char *dir = ins.direction == Direction::Up ? "kUp" : "kDown";
      const char *fn = ins.kind == OpKind::Forward          ? "forward"
                       : ins.kind == OpKind::Backward       ? "backward_input"
                       : ins.kind == OpKind::WeightGradient ? "backward_weight"
                                                            : "backward";
      out += fmt::format("  stage{}_{}(step, {}, {});\n", ins.stage, fn,
                         ins.microbatch, dir);
    }
    out += "}\n\n";
  }
  out += "static void run_schedule(int64_t step) {\n  switch (g.rpp) {\n";
  for (int d = 0; d < p; ++d)
    out +=
        fmt::format("  case {}:\n    run_device{}(step);\n    break;\n", d, d);
  out += "  }\n}\n";
  return out;
}

/// Emits op i (with the conversions its operands need) into `steps`.
void Emitter::emitOp(size_t i, std::vector<Step> &steps) {
  const OpDef &op = g_.ops[i];
  const OpPlan &p = L_.ops[i];
  const int st = p.stage;
  std::vector<std::string> x(op.operands.size()), dx(op.operands.size());
  std::vector<std::vector<int64_t>> xs(op.operands.size());
  for (size_t k = 0; k < op.operands.size(); ++k) {
    const int t = op.operands[k];
    x[k] = ensureLayout(st, t, p.operands[k], steps);
    dx[k] = grad(t, p.operands[k]);
    xs[k] = local(t, p.operands[k]);
  }
  const int r = op.results[0];
  // A fused GELU's output gradient is never formed (planGeluFusion); a
  // linear whose GEMM writes its sum with a residual (planResidualFusion)
  // has neither output nor gradient buffer.
  if (!addOfLinear_.count(i))
    addTensor(st, r, p.result, !fusedGelus_.count(i));
  const std::vector<int64_t> ys = local(r, p.result);
  const std::string y = full(r).empty() ? "" : val(r, p.result);
  std::string dy = full(r).empty() ? "" : grad(r, p.result);
  const int64_t n = numel(ys);
  Step s;
  // The comment line: name, kind, mode, operand and result shapes.
  std::string operands;
  for (size_t k = 0; k < op.operands.size(); ++k)
    operands += (k ? ", " : "") + shapeStr(xs[k]) +
                (p.operands[k].split() ? " " + p.operands[k].str() : "");
  const char *modeName[] = {"",
                            " (column-parallel)",
                            " (row-parallel)",
                            " (vocab-parallel table)",
                            " (local heads)",
                            " (on local shards)",
                            " (vocab-parallel)"};
  s.fwd.push_back(fmt::format("  // {}: {}{}({}) -> {}{}", op.name, op.kind,
                              modeName[int(p.mode)], operands, shapeStr(ys),
                              p.result.split() ? " " + p.result.str() : ""));
  s.bwdInput.push_back(fmt::format("  // {}: {} backward", op.name, op.kind));
  auto F = [&](std::string line) { s.fwd.push_back("  " + line); };
  auto BI = [&](std::string line) { s.bwdInput.push_back("  " + line); };
  auto BW = [&](std::string line) { s.bwdWeight.push_back("  " + line); };
  const std::string &k = op.kind;
  static const std::set<std::string> imageOps = {"conv2d", "pool2d", "flatten",
                                                 "reshape", "transpose"};
  if (cuda_ && imageOps.count(k))
    throw UserError("codegen: op " + op.name + " (" + k +
                    ") is not supported by the cuda backend yet (use "
                    "--backend cpu)");
  if (cuda_) {
    // The CUDA kernels take parameters (act_t working copy, fp32 gradient)
    // only where a layer has weights; elsewhere a parameter operand would
    // need an activation-typed gradient.
    static const std::set<std::string> weighted = {"embedding", "positional",
                                                   "linear",    "bias_add",
                                                   "layernorm", "rmsnorm"};
    for (int t : op.operands)
      if (isParam(t) && !weighted.count(k))
        throw UserError("codegen: op " + op.name + " (" + k +
                        ") takes the parameter " + g_.tensors[size_t(t)].name +
                        " as an operand; the cuda backend runs " + k +
                        " on activations only (use --backend cpu)");
  }
  auto lastDim = [](const std::vector<int64_t> &v) { return v.back(); };
  // The first position of an op run on a sequence split (T positions a rank).
  auto sequenceOffset = [&](const OpPlan &p, int64_t T) {
    return p.mode == OpMode::Local && p.operands[0].dim == 1
               ? fmt::format("g.rtp * {}", T)
               : std::string("0");
  };
  // spmm's x and sddmm's y: every node's rows, when dp splits the nodes.
  auto gatherNodes = [&](size_t k) {
    const std::string all = allNodes(st, op.operands[k], p.operands[k], steps);
    if (all == x[k])
      return;
    x[k] = all;
    dx[k] = isInput(op.operands[k]) ? "nullptr" : "a.d_" + all.substr(2);
  };

  if (k == "embedding") {
    const int64_t N = numel(xs[0]), C = xs[1][1], V = full(op.operands[1])[0];
    if (p.mode == OpMode::VocabTable) {
      const int64_t Vl = xs[1][0];
      F(fmt::format("embedding_forward({}, {}, {}, {}, {}, g.rtp * {}, {});", y,
                    x[0], x[1], N, C, Vl, Vl));
      F(fmt::format("all_reduce_forward({}, {}, g.tp); // P -> B", y, N * C));
      BI(fmt::format("embedding_backward({}, {}, {}, {}, {}, g.rtp * {}, {});",
                     dx[1], dy, x[0], N, C, Vl, Vl));
    } else {
      F(fmt::format("embedding_forward({}, {}, {}, {}, {}, 0, {});", y, x[0],
                    x[1], N, C, V));
      BI(fmt::format("embedding_backward({}, {}, {}, {}, {}, 0, {});", dx[1],
                     dy, x[0], N, C, V));
    }
  } else if (k == "positional") {
    const int64_t B = xs[0][0], T = xs[0][1], C = xs[0][2];
    const std::string t0 = sequenceOffset(p, T);
    F(fmt::format("positional_forward({}, {}, {}, {}, {}, {}, {});", y, x[0],
                  x[1], B, T, C, t0));
    BI(fmt::format("positional_backward({}, {}, {}, {}, {}, {}, {});", dx[0],
                   dx[1], dy, B, T, C, t0));
  } else if (k == "rotary") {
    const int64_t B = xs[0][0], T = xs[0][1],
                  D = attrOr<int64_t>(op, "head_dim", 1),
                  H = lastDim(xs[0]) / D;
    const std::string theta = fmtDouble(attrOr<double>(op, "theta", 10000.0));
    const std::string t0 = sequenceOffset(p, T);
    F(fmt::format("rotary_forward({}, {}, {}, {}, {}, {}, {}, {});", y, x[0], B,
                  T, H, D, theta, t0));
    BI(fmt::format("rotary_backward({}, {}, {}, {}, {}, {}, {}, {});", dx[0],
                   dy, B, T, H, D, theta, t0));
  } else if (k == "linear") {
    const bool tw = attrOr<bool>(op, "transpose_weight", false);
    const int64_t K = lastDim(xs[0]), N = numel(xs[0]) / K;
    // A row-parallel linear reduce-scattering into split rows (Layout.cpp):
    // its whole partial output, and in the backward its all-gathered output
    // gradient (which every GEMM of the backward reads), share one buffer.
    const bool scatters = p.mode == OpMode::Row && p.result.split();
    const std::string dyRows = dy;
    if (scatters) {
      const std::string whole = names_[size_t(r)] + "_whole";
      addMember(st, {whole, N * lastDim(ys),
                     shapeStr(local(r, TpLayout{})) +
                         " partial sum, then the gathered output gradient",
                     false, false});
      dy = "a." + whole + ".data()";
    }
    auto pad = padRows_.find(op.operands[1]);
    const int64_t O = pad != padRows_.end() ? pad->second : lastDim(ys);
    if (pad != padRows_.end())
      F(fmt::format("// the vocabulary padded: {} output features, the last "
                    "{} zero",
                    O, O - lastDim(ys)));
    const std::string b = op.operands.size() > 2 ? x[2] : "nullptr";
    const std::string db = op.operands.size() > 2 ? dx[2] : "nullptr";
    const char *twS = tw ? "true" : "false";
    const bool needDx = !isInput(op.operands[0]);
    // The sum's gradient is this linear's output's (planResidualFusion).
    std::string residualForward;
    if (addOfLinear_.count(i)) {
      const size_t ai = addOfLinear_.at(i), lk = linearOperandOfAdd_.at(ai);
      const OpDef &add = g_.ops[ai];
      const int res = add.operands[1 - lk], sum = add.results[0];
      dy = grad(sum, L_.ops[ai].result);
      residualForward = fmt::format(
          "linear_residual_forward({}, {}, {}, {}, {}, {}, {}, {}, {}); // and "
          "{}",
          val(sum, L_.ops[ai].result), val(res, L_.ops[ai].operands[1 - lk]),
          x[0], x[1], b, N, K, O, twS, add.name);
    }
    // The input gradient through a fused GELU (planGeluFusion): pre's
    // gradient, written whole by this GEMM.
    std::string dgelu;
    if (needDx && geluOfFc2_.count(i)) {
      const size_t gi = geluOfFc2_.at(i);
      const int pre = g_.ops[gi].operands[0];
      const TpLayout lp = L_.ops[gi].operands[0];
      dgelu = fmt::format("linear_backward_dgelu({}, {}, {}, {}, {}, {}, {}, "
                          "{}); // through {}",
                          grad(pre, lp), dy, x[1], val(pre, lp), N, K, O, twS,
                          g_.ops[gi].name);
      storedGrads_.insert(grad(pre, lp)); // its only writer, storing
    }
    // An input gradient this linear alone writes is stored (beta = 0); not
    // the column-parallel one, added from its all-reduced partial.
    const bool storeDx = needDx && dgelu.empty() && p.mode != OpMode::Column &&
                         storesGrad(i, op.operands[0], p.operands[0], dx[0]);
    const char *storeS = storeDx ? ", false" : "";
    if (storeDx)
      storedGrads_.insert(dx[0]);
    if (p.mode == OpMode::Row) {
      // The partial sum: all-reduced in place, or reduce-scattered from the
      // whole buffer onto the result's rows (`scatters`); then the bias.
      const int64_t rows = n / O;
      F(fmt::format("linear_forward({}, {}, {}, nullptr, {}, {}, {}, {});",
                    scatters ? dy : y, x[0], x[1], N, K, O, twS));
      if (scatters)
        F(fmt::format("reduce_scatter_forward({}, {}, {}, {}, g.tp); // P -> "
                      "{}",
                      y, dy, shapeInit(local(r, TpLayout{})), p.result.dim,
                      p.result.str()));
      else
        F(fmt::format("all_reduce_forward({}, {}, g.tp); // P -> B", y, N * O));
      if (b != "nullptr")
        F(fmt::format("bias_add_forward({}, {}, {}, {}, {});", y, y, b, rows,
                      O));
      if (scatters) {
        BI("// the reduce-scatter's transpose: all-gather the output gradient");
        BI(fmt::format("all_gather_forward({}, {}, {}, {}, g.tp);", dy, dyRows,
                       shapeInit(ys), p.result.dim));
      } else {
        BI("// the all-reduce's transpose is the identity (B gradient)");
      }
      if (!dgelu.empty())
        BI(dgelu);
      else if (needDx)
        BI(fmt::format("linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                       "{}, {}, {}{});",
                       dx[0], dy, x[0], x[1], N, K, O, twS, storeS));
      BW(fmt::format(
          "linear_backward(nullptr, {}, nullptr, {}, {}, {}, {}, {}, "
          "{}, {});",
          dx[1], dy, x[0], x[1], N, K, O, twS));
      if (b != "nullptr") // on split rows: partial over tp
        BW(fmt::format("bias_add_backward(nullptr, {}, {}, {}, {});", db,
                       dyRows, rows, O));
    } else {
      if (geluOfFc1_.count(i)) {
        const size_t gi = geluOfFc1_.at(i);
        F(fmt::format("linear_gelu_forward({}, {}, {}, {}, {}, {}, {}, {}, "
                      "{}); // and {}",
                      val(g_.ops[gi].results[0], L_.ops[gi].result), y, x[0],
                      x[1], b, N, K, O, twS, g_.ops[gi].name));
      } else if (!residualForward.empty()) {
        F(residualForward);
      } else {
        F(fmt::format("linear_forward({}, {}, {}, {}, {}, {}, {}, {});", y,
                      x[0], x[1], b, N, K, O, twS));
      }
      if (needDx && p.mode == OpMode::Column &&
          gathersPartialGrads(op.operands[0])) {
        BI("// column-parallel: dx from this rank's output features is a "
           "partial sum, added as it is (the all-gather's backward "
           "reduce-scatters it)");
        BI(fmt::format("linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                       "{}, {}, {});",
                       dx[0], dy, x[0], x[1], N, K, O, twS));
      } else if (needDx && p.mode == OpMode::Column && cuda_) {
        const std::string part = names_[size_t(r)] + "_dx_partial";
        addMember(st,
                  {part, N * K, shapeStr({N, K}) + " partial input gradient",
                   false, false});
        BI("{ // column-parallel: dx from this rank's output features is a "
           "partial sum (P -> B)");
        BI(fmt::format("  act_t *partial = a.{}.data();", part));
        BI(fmt::format("  zero(partial, {} * sizeof(act_t));", N * K));
        BI(fmt::format("  linear_backward(partial, nullptr, nullptr, {}, {}, "
                       "{}, {}, {}, {}, {});",
                       dy, x[0], x[1], N, K, O, twS));
        BI(fmt::format("  all_reduce_forward(partial, {}, g.tp);", N * K));
        BI(fmt::format("  add_into({}, partial, {});", dx[0], N * K));
        BI("}");
      } else if (needDx && p.mode == OpMode::Column) {
        BI("{ // column-parallel: dx from this rank's output features is a "
           "partial sum (P -> B)");
        BI(fmt::format("  std::vector<float> partial({});", N * K));
        BI(fmt::format(
            "  linear_backward(partial.data(), nullptr, nullptr, {}, "
            "{}, {}, {}, {}, {}, {});",
            dy, x[0], x[1], N, K, O, twS));
        BI(fmt::format("  all_reduce_forward(partial.data(), {}, g.tp);",
                       N * K));
        BI(fmt::format("  add_into({}, partial.data(), {});", dx[0], N * K));
        BI("}");
      } else if (!dgelu.empty()) {
        BI(dgelu);
      } else if (needDx) {
        BI(fmt::format("linear_backward({}, nullptr, nullptr, {}, {}, {}, {}, "
                       "{}, {}, {}{});",
                       dx[0], dy, x[0], x[1], N, K, O, twS, storeS));
      }
      BW(fmt::format("linear_backward(nullptr, {}, {}, {}, {}, {}, {}, {}, {}, "
                     "{});",
                     dx[1], db, dy, x[0], x[1], N, K, O, twS));
    }
  } else if (k == "matmul") {
    const bool tb = attrOr<bool>(op, "transpose_b", false);
    const auto &a = xs[0];
    const int64_t M = a[a.size() - 2], K = a.back(), N = ys.back(),
                  Bt = numel(a) / (M * K);
    const char *tbS = tb ? "true" : "false";
    F(fmt::format("matmul_forward({}, {}, {}, {}, {}, {}, {}, {});", y, x[0],
                  x[1], Bt, M, K, N, tbS));
    BI(fmt::format("matmul_backward({}, {}, {}, {}, {}, {}, {}, {}, {}, {});",
                   dx[0], dx[1], dy, x[0], x[1], Bt, M, K, N, tbS));
  } else if (k == "bias_add") {
    const int64_t O = lastDim(ys), N = n / O;
    F(fmt::format("bias_add_forward({}, {}, {}, {}, {});", y, x[0], x[1], N,
                  O));
    BI(fmt::format("bias_add_backward({}, {}, {}, {}, {});", dx[0], dx[1], dy,
                   N, O));
  } else if (k == "add" && linearOperandOfAdd_.count(i)) {
    const size_t lk = linearOperandOfAdd_.at(i);
    F("// in the GEMM of its linear operand (linear_residual_forward)");
    BI("// the linear operand's gradient is this sum's (its backward reads "
       "it)");
    if (!isInput(op.operands[1 - lk]))
      BI(fmt::format("add_into({}, {}, {});", dx[1 - lk], dy, n));
  } else if (k == "add") {
    F(fmt::format("add_forward({}, {}, {}, {});", y, x[0], x[1], n));
    BI(fmt::format("add_backward({}, {}, {}, {});", dx[0], dx[1], dy, n));
  } else if (k == "mul") {
    F(fmt::format("mul_forward({}, {}, {}, {});", y, x[0], x[1], n));
    BI(fmt::format("mul_backward({}, {}, {}, {}, {}, {});", dx[0], dx[1], dy,
                   x[0], x[1], n));
  } else if (k == "gelu" && fusedGelus_.count(i)) {
    F("// in the GEMM epilogue of its producer (linear_gelu_forward)");
    BI("// in the input-gradient GEMM of its consumer (linear_backward_dgelu)");
  } else if (k == "gelu") {
    const char *tanhS = attrOr<std::string>(op, "approximate", "tanh") == "none"
                            ? "false"
                            : "true";
    F(fmt::format("gelu_forward({}, {}, {}, {});", y, x[0], n, tanhS));
    BI(fmt::format("gelu_backward({}, {}, {}, {}, {});", dx[0], x[0], dy, n,
                   tanhS));
  } else if (k == "relu" || k == "silu") {
    F(fmt::format("{}_forward({}, {}, {});", k, y, x[0], n));
    BI(fmt::format("{}_backward({}, {}, {}, {});", k, dx[0], x[0], dy, n));
  } else if (k == "swiglu") {
    F(fmt::format("swiglu_forward({}, {}, {}, {});", y, x[0], x[1], n));
    BI(fmt::format("swiglu_backward({}, {}, {}, {}, {}, {});", dx[0], dx[1],
                   x[0], x[1], dy, n));
  } else if (k == "layernorm" || k == "rmsnorm") {
    const int64_t C = lastDim(ys), N = n / C;
    const std::string eps = fmtDouble(attrOr<double>(op, "epsilon", 1e-5));
    const std::string base = names_[size_t(r)];
    addMember(st, {base + "_rstd", N, "[N] saved 1/std", false, false, true});
    if (k == "layernorm") {
      addMember(st, {base + "_mean", N, "[N] saved mean", false, false, true});
      const std::string beta = op.operands.size() > 2 ? x[2] : "nullptr";
      const std::string dbeta = op.operands.size() > 2 ? dx[2] : "nullptr";
      F(fmt::format("layernorm_forward({}, a.{}_mean.data(), a.{}_rstd.data(), "
                    "{}, {}, {}, {}, {}, {}f);",
                    y, base, base, x[0], x[1], beta, N, C, eps));
      BI(fmt::format("layernorm_backward({}, {}, {}, {}, {}, {}, "
                     "a.{}_mean.data(), a.{}_rstd.data(), {}, {});",
                     dx[0], dx[1], dbeta, dy, x[0], x[1], base, base, N, C));
    } else {
      F(fmt::format(
          "rmsnorm_forward({}, a.{}_rstd.data(), {}, {}, {}, {}, {}f);", y,
          base, x[0], x[1], N, C, eps));
      BI(fmt::format(
          "rmsnorm_backward({}, {}, {}, {}, {}, a.{}_rstd.data(), {}, "
          "{});",
          dx[0], dx[1], dy, x[0], x[1], base, N, C));
    }
  } else if (k == "softmax") {
    int64_t axis = attrOr<int64_t>(op, "axis", -1);
    if (axis < 0)
      axis += int64_t(ys.size());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= ys[size_t(d)];
    for (size_t d = size_t(axis) + 1; d < ys.size(); ++d)
      inner *= ys[d];
    const int64_t Ln = ys[size_t(axis)];
    F(fmt::format("softmax_forward({}, {}, {}, {}, {});", y, x[0], outer, Ln,
                  inner));
    BI(fmt::format("softmax_backward({}, {}, {}, {}, {}, {});", dx[0], y, dy,
                   outer, Ln, inner));
  } else if (k == "attention") {
    const int64_t D = attrOr<int64_t>(op, "head_dim", 1);
    int64_t H = attrOr<int64_t>(op, "num_heads", 1);
    int64_t G = attrOr<int64_t>(op, "num_kv_heads", H);
    if (p.mode == OpMode::HeadSplit) {
      H /= tp_;
      G /= tp_;
    }
    const bool causal = attrOr<bool>(op, "causal", true);
    const int64_t B = ys[0], T = ys[1];
    const std::string base = names_[size_t(r)];
    if (cuda_) // FlashAttention-style: the log-sum-exp, not the probabilities
      addMember(st, {base + "_lse", B * H * T,
                     shapeStr({B, H, T}) + " saved log-sum-exp", false, false,
                     true});
    else
      addMember(st, {base + "_att", B * H * T * T,
                     shapeStr({B, H, T, T}) + " saved probabilities", false,
                     false});
    std::string views, gviews;
    if (op.operands.size() == 1) {
      views = fmt::format("attention_qkv_views({}, {}, {}, {})", x[0], H, G, D);
      gviews = fmt::format("attention_qkv_grad_views({}, {}, {}, {})", dx[0], H,
                           G, D);
    } else {
      views = fmt::format("AttentionViews{{{}, {}, {}, {}, {}}}", x[0], x[1],
                          x[2], H * D, G * D);
      gviews = fmt::format("AttentionGradViews{{{}, {}, {}, {}, {}}}", dx[0],
                           dx[1], dx[2], H * D, G * D);
    }
    const char *causalS = causal ? "true" : "false";
    if (cuda_) {
      // Input gradients this attention alone writes are stored.
      bool store = true;
      for (size_t k = 0; k < op.operands.size(); ++k)
        store = store && storesGrad(i, op.operands[k], p.operands[k], dx[k]);
      if (store)
        storedGrads_.insert(dx.begin(), dx.end());
      F(fmt::format("attention_forward({}, a.{}_lse.data(), {}, {}, {}, {}, "
                    "{}, {}, {});",
                    y, base, views, B, T, H, G, D, causalS));
      BI(fmt::format("attention_backward({}, {}, {}, a.{}_lse.data(), {}, {}, "
                     "{}, {}, {}, {}, {}{});",
                     gviews, dy, y, base, views, B, T, H, G, D, causalS,
                     store ? ", false" : ""));
      profileScopes(s, k);
      steps.push_back(std::move(s));
      return;
    }
    F(fmt::format("attention_forward({}, a.{}_att.data(), {}, {}, {}, {}, {}, "
                  "{}, {});",
                  y, base, views, B, T, H, G, D, causalS));
    BI(fmt::format(
        "attention_backward({}, {}, a.{}_att.data(), {}, {}, {}, {}, "
        "{}, {});",
        gviews, dy, base, views, B, T, H, G, D));
  } else if (k == "cross_entropy") {
    const int64_t V = lastDim(xs[0]), N = numel(xs[0]) / V,
                  Vf = full(op.operands[0]).back();
    // A vocabulary tp does not divide: every rank's logits are V = ceil(Vf /
    // tp) columns from column g.rtp * V, of which the last rank's tail is
    // padding (Layout.cpp paddedVocab); the kernels read the real ones.
    const bool uneven = p.mode == OpMode::VocabLoss && Vf % tp_ != 0;
    const std::string cols =
        uneven ? fmt::format("std::min<int64_t>({}, {} - g.rtp * {})", V, Vf, V)
               : std::to_string(V);
    auto pad = padCols_.find(op.operands[0]);
    // The row stride of padded logits (an extra kernel argument).
    const std::string ld = pad != padCols_.end()
                               ? fmt::format(", {}", pad->second)
                           : uneven ? fmt::format(", {}", V)
                                    : std::string();
    // On split rows (batch or sequence) each tp rank holds N of the
    // micro-batch's tp * N positions.
    lossRowsSplit_ = p.mode == OpMode::Local;
    lossCount_ = lossRowsSplit_ ? N * tp_ : N;
    // cuda: dlogits this loss alone writes are stored (=), never zeroed.
    const bool storeDx = storesGrad(i, op.operands[0], p.operands[0], dx[0]);
    if (storeDx)
      storedGrads_.insert(dx[0]);
    const std::string ldStore =
        storeDx ? (ld.empty() ? std::string(", 0") : ld) + ", false" : ld;
    addMember(st, {"losses", N, "[N] per-position loss", false, false, true});
    if (p.mode == OpMode::VocabLoss) {
      addMember(st, {"loss_max", N, "[N] row max over the vocabulary", false,
                     false, true});
      addMember(st, {"loss_sums", 2 * N, "[2N] sum-exp and target logit", false,
                     false, true});
      if (ld.empty()) {
        F(fmt::format("crossentropy_vocab_parallel_forward(a.losses.data(), "
                      "a.loss_max.data(), a.loss_sums.data(), {}, {}, {}, {}, "
                      "g.rtp * {}, g.tp);",
                      x[0], x[1], N, V, V));
      } else { // the three steps of the forward, with the row stride
        F(fmt::format("crossentropy_vocab_parallel_max(a.loss_max.data(), {}, "
                      "{}, {}{});",
                      x[0], N, cols, ld));
        F(fmt::format("all_reduce_max(a.loss_max.data(), {}, g.tp);", N));
        F(fmt::format("crossentropy_vocab_parallel_sums(a.loss_sums.data(), "
                      "{}, {}, a.loss_max.data(), {}, {}, g.rtp * {}{});",
                      x[0], x[1], N, cols, V, ld));
        F(fmt::format("all_reduce_forward(a.loss_sums.data(), {}, g.tp);",
                      2 * N));
        F(fmt::format("crossentropy_vocab_parallel_loss(a.losses.data(), "
                      "a.loss_max.data(), a.loss_sums.data(), {}, {});",
                      x[1], N));
      }
      BI(fmt::format("crossentropy_vocab_parallel_backward({}, {}, {}, "
                     "a.loss_max.data(), a.loss_sums.data(), {}, {}, g.rtp * "
                     "{}, kLossScale{});",
                     dx[0], x[0], x[1], N, cols, V, ldStore));
    } else {
      addMember(st,
                {"loss_lse", N, "[N] saved log-sum-exp", false, false, true});
      F(fmt::format("crossentropy_forward(a.losses.data(), a.loss_lse.data(), "
                    "{}, {}, {}, {}{});",
                    x[0], x[1], N, V, ld));
      BI(fmt::format("crossentropy_backward({}, {}, a.loss_lse.data(), {}, {}, "
                     "{}, kLossScale{});",
                     dx[0], x[0], x[1], N, V, ldStore));
    }
    if (!cuda_) { // cuda: summed on the device at the end of the step
      F("a.loss_sum = 0;");
      F(fmt::format("for (int64_t i = 0; i < {}; ++i)", N));
      F("  a.loss_sum += a.losses[size_t(i)];");
    }
    if (reportsAccuracy() && p.mode == OpMode::VocabLoss) {
      // Gathered: tp * V columns a row, the padding (uneven) at the end.
      const int64_t Vg = V * tp_;
      const std::string whole = names_[size_t(op.operands[0])] + "_whole";
      const std::string ldG = Vg != Vf ? fmt::format(", {}", Vg) : "";
      if (pad != padCols_.end())
        throw std::logic_error("codegen: the accuracy of padded logits");
      addMember(st, {whole, N * Vg,
                     shapeStr({N, Vg}) + " gathered logits (accuracy)", false,
                     false, !cuda_});
      F(fmt::format("all_gather_forward(a.{}.data(), {}, {}, 1, g.tp); // for "
                    "the accuracy",
                    whole, x[0], shapeInit({N, V})));
      F(fmt::format("a.correct = count_correct(a.{}.data(), {}, {}, {}{});",
                    whole, x[1], N, Vf, ldG));
      if (graphModel_)
        F(fmt::format("a.correct_heldout = count_correct(a.{}.data(), "
                      "graph_heldout_labels(), {}, {}{});",
                      whole, N, Vf, ldG));
    } else if (reportsAccuracy()) {
      F(fmt::format("a.correct = count_correct({}, {}, {}, {});", x[0], x[1], N,
                    V));
      if (graphModel_)
        F(fmt::format("a.correct_heldout = count_correct({}, "
                      "graph_heldout_labels(), {}, {});",
                      x[0], N, V));
    }
  } else if (k == "conv2d") {
    // Replicated over tp: every rank convolves its whole micro-batch.
    const auto &xsh = xs[0], &wsh = xs[1];
    const std::string shape = fmt::format(
        "Conv2dShape{{{}, {}, {}, {}, {}, {}, {}, {}, {}}}", xsh[0], xsh[1],
        xsh[2], xsh[3], wsh[0], wsh[2], wsh[3],
        attrOr<int64_t>(op, "stride", 1), attrOr<int64_t>(op, "padding", 0));
    const std::string b = op.operands.size() > 2 ? x[2] : "nullptr";
    const std::string db = op.operands.size() > 2 ? dx[2] : "nullptr";
    F(fmt::format("conv2d_forward({}, {}, {}, {}, {});", y, x[0], x[1], b,
                  shape));
    if (!isInput(op.operands[0]))
      BI(fmt::format("conv2d_backward({}, nullptr, nullptr, {}, {}, {}, {});",
                     dx[0], dy, x[0], x[1], shape));
    BW(fmt::format("conv2d_backward(nullptr, {}, {}, {}, {}, {}, {});", dx[1],
                   db, dy, x[0], x[1], shape));
  } else if (k == "pool2d") {
    const auto &a = xs[0];
    const char *isMax =
        attrOr<std::string>(op, "kind", "max") == "max" ? "true" : "false";
    const int64_t kernel = attrOr<int64_t>(op, "kernel", 2),
                  stride = attrOr<int64_t>(op, "stride", kernel);
    F(fmt::format("pool2d_forward({}, {}, {}, {}, {}, {}, {}, {});", y, x[0],
                  a[0] * a[1], a[2], a[3], kernel, stride, isMax));
    if (!isInput(op.operands[0]))
      BI(fmt::format("pool2d_backward({}, {}, {}, {}, {}, {}, {}, {}, {});",
                     dx[0], x[0], dy, a[0] * a[1], a[2], a[3], kernel, stride,
                     isMax));
  } else if (k == "flatten" || k == "reshape") {
    F(fmt::format("std::copy_n({}, {}, {}); // the same row-major elements",
                  x[0], n, y));
    if (!isInput(op.operands[0]))
      BI(fmt::format("add_into({}, {}, {});", dx[0], dy, n));
  } else if (k == "transpose") {
    const std::string perm =
        shapeInit(attrOr<std::vector<int64_t>>(op, "perm", {}));
    F(fmt::format("transpose_forward({}, {}, {}, {});", y, x[0],
                  shapeInit(xs[0]), perm));
    if (!isInput(op.operands[0]))
      BI(fmt::format("transpose_backward({}, {}, {}, {});", dx[0], dy,
                     shapeInit(xs[0]), perm));
  } else if (k == "spmm" && !isInput(op.operands[0])) {
    // The adjacency's values are an activation (gat's attention): the
    // pattern is the sparse input it was computed on.
    const int64_t Fl = lastDim(ys);
    const std::string pattern =
        val(g_.sparsePattern(op.operands[0]), TpLayout{});
    gatherNodes(1);
    F(fmt::format("spmm_values_forward({}, {}, {}, {}, {});", y, pattern, x[0],
                  x[1], Fl));
    if (p.mode != OpMode::Local) {
      BI(fmt::format("spmm_values_backward({}, {}, {}, {}, {}, {}, {});", dx[1],
                     dx[0], pattern, x[0], dy, x[1], Fl));
    } else { // x split on features: dvalues from this rank's is partial
      const std::string nnz = elems(op.operands[0], p.operands[0]);
      BI("{ // the values' gradient from this rank's features is a partial sum "
         "(P -> B)");
      if (cuda_) {
        const std::string part = names_[size_t(r)] + "_dvalues_partial";
        addMember(st, {part, 0, "[nnz] partial gradient of the values", false,
                       false, false, nnz});
        BI(fmt::format("  act_t *partial = a.{}.data();", part));
        BI(fmt::format("  zero(partial, {} * sizeof(act_t));", nnz));
      } else {
        BI(fmt::format("  std::vector<float> values_partial({});", nnz));
        BI("  float *partial = values_partial.data();");
      }
      BI(fmt::format("  spmm_values_backward({}, partial, {}, {}, {}, {}, {});",
                     dx[1], pattern, x[0], dy, x[1], Fl));
      BI(fmt::format("  all_reduce_forward(partial, {}, g.tp);", nnz));
      BI(fmt::format("  add_into({}, partial, {});", dx[0], nnz));
      BI("}");
    }
  } else if (k == "spmm") {
    const int64_t Fl = lastDim(ys);
    gatherNodes(1);
    F(fmt::format("spmm_forward({}, {}, {}, {});", y, x[0], x[1], Fl));
    if (!isInput(op.operands[1]))
      BI(fmt::format("spmm_backward({}, nullptr, {}, {}, {}, {});", dx[1], x[0],
                     dy, x[1], Fl));
  } else if (k == "sddmm") {
    const int64_t K = lastDim(xs[1]);
    gatherNodes(2);
    F(fmt::format("sddmm_forward({}, {}, {}, {}, {});", y, x[0], x[1], x[2],
                  K));
    if (p.mode == OpMode::Local) // x and y split on K: partial dot products
      F(fmt::format("all_reduce_forward({}, {}, g.tp); // P -> B", y,
                    elems(r, p.result)));
    if (!isInput(op.operands[1]) || !isInput(op.operands[2]))
      BI(fmt::format("sddmm_backward({}, {}, {}, {}, {}, {}, {});", dx[1],
                     dx[2], x[0], dy, x[1], x[2], K));
  } else if (k == "edge_softmax") {
    const std::string scale = fmtDouble(attrOr<double>(op, "scale", 1.0));
    F(fmt::format("edge_softmax_forward({}, {}, {}, {}f);", y, x[0], x[1],
                  scale));
    if (!isInput(op.operands[1]))
      BI(fmt::format("edge_softmax_backward({}, {}, {}, {}, {}f);", dx[1], x[0],
                     y, dy, scale));
  }
  // Which half writes each parameter's gradient (for the gradient buckets).
  auto writes = [](const std::vector<std::string> &lines,
                   const std::string &g) {
    for (const auto &l : lines)
      if (l.find(g) != std::string::npos)
        return true;
    return false;
  };
  for (size_t k = 0; k < op.operands.size(); ++k) {
    if (!isParam(op.operands[k]))
      continue;
    if (writes(s.bwdWeight, dx[k]))
      s.paramsWeight.push_back(op.operands[k]);
    else if (writes(s.bwdInput, dx[k]))
      s.paramsInput.push_back(op.operands[k]);
  }
  if (cuda_)
    profileScopes(s, k);
  steps.push_back(std::move(s));
}

/// Groups the stage's parameters into data-parallel gradient buckets of about
/// 25 MiB of fp32 gradients (PyTorch DDP's default), in the order backward
/// completes them; gradients partial over tp fill buckets of their own, summed
/// over dp x tp (over tp alone when dp = 1). Returns, per (step, weight half?),
/// the buckets complete after that step's lines. Parameters shared by several
/// pipeline devices (tied, Chimera) are left to the optimizer step, which sums
/// them over their devices first.
std::map<std::pair<size_t, bool>, std::vector<int>>
Emitter::assignBuckets(int stage, const std::vector<Step> &steps) {
  std::map<std::pair<size_t, bool>, std::vector<int>> after;
  constexpr int64_t kBucketBytes = int64_t(25) << 20;
  // The execution order of the backward halves: (step index, weight half).
  std::vector<std::vector<std::pair<size_t, bool>>> sequences(1);
  for (size_t i = steps.size(); i-- > 0;) {
    sequences[0].push_back({i, false});
    if (!splitBackward_)
      sequences[0].push_back({i, true});
  }
  if (splitBackward_) {
    sequences.emplace_back();
    for (size_t i = steps.size(); i-- > 0;)
      sequences[1].push_back({i, true});
  }
  // The last write of each parameter (a weight-half write wins under zb-h1:
  // W runs after B).
  std::map<int, std::pair<size_t, bool>> last;
  for (const auto &seq : sequences)
    for (const auto &pos : seq) {
      const Step &st = steps[pos.first];
      for (int t : pos.second ? st.paramsWeight : st.paramsInput)
        if (__builtin_popcountll(deviceMask_[size_t(t)]) == 1)
          last[t] = pos;
    }
  for (const auto &seq : sequences) {
    // The open bucket of each kind: [0] dp only, [1] partial over tp too.
    Bucket open[2];
    int64_t bytes[2] = {0, 0};
    std::pair<size_t, bool> closeAt[2];
    for (int k = 0; k < 2; ++k) {
      open[k].stage = stage;
      open[k].tpPartial = k == 1;
    }
    auto close = [&](int k) {
      after[closeAt[k]].push_back(int(buckets_.size()));
      buckets_.push_back(open[k]);
      open[k].params.clear();
      bytes[k] = 0;
    };
    for (const auto &pos : seq) {
      const Step &st = steps[pos.first];
      for (int t : pos.second ? st.paramsWeight : st.paramsInput) {
        const int k = L_.tpPartialGrads.count(t) ? 1 : 0;
        if (k == 0 && plan_.knobs.dp == 1) // nothing to sum
          continue;
        Bucket &b = open[k];
        auto it = last.find(t);
        if (it == last.end() || it->second != pos ||
            std::find(b.params.begin(), b.params.end(), t) != b.params.end())
          continue;
        b.params.push_back(t);
        b.weightPart = splitBackward_ && pos.second;
        bytes[k] += 4 * numel(local(t, L_.tensors[size_t(t)]));
        closeAt[k] = pos;
      }
      for (int k = 0; k < 2; ++k)
        if (bytes[k] >= kBucketBytes)
          close(k);
    }
    for (int k = 0; k < 2; ++k)
      if (!open[k].params.empty())
        close(k);
  }
  return after;
}

/// The CUDA program's step graph (backends/cuda/StepGraph.h): whether this
/// plan's forward and backward qualify, and the input loads that run ahead of
/// the graph. Every plan does but one with an accuracy count (copied to the
/// host inside the step): tensor-parallel collectives run on the compute
/// stream, and the pipeline links' transfers and the gradient buckets'
/// all-reduces on streams forked from it and joined back before the body
/// ends, so the capture holds them with the kernels.
std::string Emitter::stepGraphGlue(int stages) const {
  const bool graphable = planner::stepRunsAsGraph(g_);
  std::string out = fmt::format(
      "\n// Whether forward and backward run as one CUDA graph after the "
      "first step (StepGraph.h):\n// {}.\nconstexpr bool kStepGraphable = "
      "{};\n\n",
      graphable ? "yes (collectives and pipeline transfers are captured with "
                  "the kernels)"
                : "not for this plan (its accuracy count is read inside the "
                  "step)",
      graphable ? "true" : "false");
  out += "// The inputs of every micro-batch this rank runs, loaded ahead of "
         "a step graph.\n[[maybe_unused]] static void preload_inputs(int64_t "
         "step) {\n  for (int64_t mb = 0; mb < kMicroBatches; ++mb) {\n";
  for (int s = 0; s < stages; ++s)
    out += fmt::format("    if (holds_stage({0}))\n      stage{0}_load_inputs("
                       "stage{0}[size_t(mb)], step, mb);\n",
                       s);
  out += "  }\n}\n";
  return out;
}

/// The cuda program's configure_grad_sync(): each bucket's gradients and how
/// many backward passes (micro-batches) complete it on the device holding it.
std::string Emitter::gradSyncConfig(const pipeline::Schedule &sched) const {
  std::string out =
      "// Data-parallel gradient buckets (~25 MiB of fp32 gradients each, in "
      "the order backward\n// completes them): all-reduced on their own stream "
      "once the last micro-batch's backward\n// has written them, overlapping "
      "the rest of the backward pass.\n";
  out += fmt::format("constexpr int kBuckets = {};\n", buckets_.size());
  out += "static void configure_grad_sync() {\n";
  if (buckets_.empty()) {
    out += "  grad_sync.configure(g.dp, {}, {});\n}\n\n";
    return out;
  }
  out += "  std::vector<std::vector<std::pair<float *, int64_t>>> "
         "buckets(kBuckets);\n  std::vector<int> expected(kBuckets, 0);\n";
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket &k = buckets_[b];
    int count = 0;
    for (const auto &dev : sched.devices)
      for (const auto &ins : dev)
        if (ins.stage == k.stage &&
            (ins.kind == OpKind::FullBackward ||
             ins.kind ==
                 (k.weightPart ? OpKind::WeightGradient : OpKind::Backward)))
          ++count;
    out += fmt::format("  if (holds_stage({})) {{ // stage {}\n", k.stage,
                       k.stage);
    for (int t : k.params)
      out += fmt::format("    buckets[{0}].push_back({{P.{1}.grad.data(), "
                         "P.{1}.n}});\n    P.{1}.bucket = {0};\n",
                         b, names_[size_t(t)]);
    out += fmt::format("    expected[{}] = {};\n  }}\n", b, count);
  }
  out += "  grad_sync.configure(g.dp, std::move(buckets), "
         "std::move(expected));\n";
  bool anyPartial = false;
  for (const Bucket &k : buckets_)
    anyPartial |= k.tpPartial;
  if (anyPartial) {
    // Collective over the world: every rank splits, whatever it holds.
    out += "  // Gradients partial over tp as well: one all-reduce over the "
           "stage's dp x tp ranks.\n  static const Comm dp_tp = comm_split("
           "int(g.rpp), world().rank);\n";
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (buckets_[b].tpPartial)
        out += fmt::format("  grad_sync.set_bucket_comm({}, dp_tp);\n", b);
  }
  out += "}\n\n";
  return out;
}

/// Activations crossing into `stage` from earlier stages (produced before it,
/// consumed on it or later), in tensor order.
std::vector<int> boundaryTensors(const ModelGraph &g, const ModelLayout &L,
                                 int stage) {
  std::vector<int> prodStage(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (int r : g.ops[i].results)
      prodStage[size_t(r)] = L.ops[i].stage;
  std::set<int> out;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (L.ops[i].stage >= stage)
      for (int t : g.ops[i].operands)
        if (prodStage[size_t(t)] >= 0 && prodStage[size_t(t)] < stage &&
            !g.tensors[size_t(t)].shape.empty())
          out.insert(t);
  return {out.begin(), out.end()};
}

void Emitter::emitStage(int stage, std::string &out) {
  std::vector<Step> steps;
  const std::vector<int> in = boundaryTensors(g_, L_, stage);
  const std::vector<int> sendOut = stage + 1 < L_.numStages
                                       ? boundaryTensors(g_, L_, stage + 1)
                                       : std::vector<int>{};
  for (int t : in)
    addTensor(stage, t, L_.tensors[size_t(t)], true);
  std::vector<int> inputs;
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    if (L_.ops[i].stage != stage)
      continue;
    for (int t : g_.ops[i].operands)
      if (isInput(t) && !graphModel_ &&
          std::find(inputs.begin(), inputs.end(), t) == inputs.end()) {
        inputs.push_back(t);
        addTensor(stage, t, TpLayout{}, false);
      }
    emitOp(i, steps);
  }
  const bool hasLoss =
      g_.loss >= 0 && producer_[size_t(g_.loss)] >= 0 &&
      L_.ops[size_t(producer_[size_t(g_.loss)])].stage == stage;

  // The struct.
  int64_t first = -1, last = -1;
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (L_.ops[i].stage == stage) {
      if (first < 0)
        first = int64_t(i);
      last = int64_t(i);
    }
  if (first < 0)
    out += fmt::format(
        "// ---- stage {}: no ops (passes its inputs on) ----\n\n", stage);
  else
    out += fmt::format("// ---- stage {}: ops {} .. {} ----\n\n", stage,
                       g_.ops[size_t(first)].name, g_.ops[size_t(last)].name);
  out += fmt::format("// One micro-batch's activations on stage {} (local "
                     "shapes; the batch dimension is the micro-batch).\n",
                     stage);
  out += fmt::format("struct Stage{} {{\n", stage);
  for (const Member &m : members_[stage]) {
    if (cuda_) {
      const char *type = m.i32 ? "int32_t" : m.stat ? "float" : "act_t";
      out += fmt::format(
          "  DeviceBuffer<{}> {}{{{}}}; // {}\n", type, m.name,
          m.sizeExpr.empty() ? std::to_string(m.size) : m.sizeExpr, m.comment);
      continue;
    }
    out += fmt::format(
        "  std::vector<{}> {} = std::vector<{}>({}); // {}\n",
        m.i32 ? "int32_t" : "float", m.name, m.i32 ? "int32_t" : "float",
        m.sizeExpr.empty() ? std::to_string(m.size) : m.sizeExpr, m.comment);
  }
  if (hasLoss && !cuda_)
    out += "  double loss_sum = 0; // sum of the per-position losses\n";
  if (hasLoss && reportsAccuracy())
    out += "  int64_t correct = 0; // samples whose largest logit is the "
           "label\n";
  if (hasLoss && graphModel_)
    out += "  int64_t correct_heldout = 0; // the same over the held-out "
           "nodes\n";
  if (cuda_)
    out += fmt::format("  ZeroSet grad_zeros; // the gradients "
                       "stage{}_zero_grads clears, one launch\n",
                       stage);
  out += "};\n";
  out += fmt::format("static std::vector<Stage{0}> stage{0}; // per "
                     "micro-batch, on the devices running stage {0}\n\n",
                     stage);

  // Forward. The CUDA program loads a stage's inputs in their own function,
  // which the step runs ahead of a captured step graph (StepGraph.h).
  std::string load;
  auto holds = [&](int t) {
    return t >= 0 && std::find(inputs.begin(), inputs.end(), t) != inputs.end();
  };
  if (!inputs.empty() && classModel_) {
    const int tg = classTargets_;
    load += fmt::format(
        "  load_samples(step, mb, {}, {});\n",
        holds(classInput_) ? "a." + names_[size_t(classInput_)] + ".data()"
                           : "nullptr",
        holds(tg) ? "a." + names_[size_t(tg)] + ".data()" : "nullptr");
  } else if (!inputs.empty()) {
    int ids = findInput("input_ids"), tg = findInput("targets"),
        types = findInput("token_type_ids");
    load += fmt::format(
        "  load_tokens(step, mb, {}, {});\n",
        holds(ids) ? "a." + names_[size_t(ids)] + ".data()" : "nullptr",
        holds(tg) ? "a." + names_[size_t(tg)] + ".data()" : "nullptr");
    if (holds(types) && cuda_)
      load += fmt::format("  zero(a.{0}.data(), a.{0}.size() * "
                          "sizeof(int32_t)); // one segment\n",
                          names_[size_t(types)]);
    else if (holds(types))
      load += fmt::format("  std::fill(a.{0}.begin(), a.{0}.end(), 0); // one "
                          "segment\n",
                          names_[size_t(types)]);
  }
  if (cuda_) {
    out += fmt::format("static void stage{}_load_inputs([[maybe_unused]] "
                       "Stage{} &a, [[maybe_unused]] int64_t step, "
                       "[[maybe_unused]] int64_t mb) {{\n",
                       stage, stage) +
           load + "}\n\n";
    out += fmt::format("static void stage{}_forward_compute(Stage{} &a, "
                       "int64_t step, int64_t mb) {{\n",
                       stage, stage);
    out += fmt::format("  if (!inputs_preloaded)\n    stage{}_load_inputs(a, "
                       "step, mb);\n",
                       stage);
  } else {
    out += fmt::format("static void stage{}_forward_compute(Stage{} &a, "
                       "int64_t step, int64_t mb) {{\n",
                       stage, stage);
    out += load.empty() ? "  (void)step;\n  (void)mb;\n" : load;
  }
  for (const Step &s : steps)
    for (const auto &l : s.fwd)
      out += l + "\n";
  out += "}\n\n";

  // Backward: input-gradient half, weight-gradient half, both.
  std::map<std::pair<size_t, bool>, std::vector<int>> ready;
  // Buckets for dp (no ZeRO: it reduce-scatters at the step), and for
  // gradients partial over tp even when dp = 1.
  if (cuda_ && plan_.knobs.zero == 0 &&
      (plan_.knobs.dp > 1 || !L_.tpPartialGrads.empty()))
    ready = assignBuckets(stage, steps);
  auto readyLines = [&](size_t i, bool weight) {
    std::string r;
    auto it = ready.find({i, weight});
    if (it != ready.end())
      for (int b : it->second)
        r += fmt::format("  grad_sync.ready({}); // gradient bucket {} "
                         "complete after this micro-batch\n",
                         b, b);
    return r;
  };
  auto emitBackward = [&](const char *suffix, bool inputPart, bool weightPart) {
    out +=
        fmt::format("static void stage{}_{}([[maybe_unused]] Stage{} &a) {{\n",
                    stage, suffix, stage);
    for (size_t i = steps.size(); i-- > 0;) {
      const Step &st = steps[i];
      if (inputPart) {
        for (const auto &l : st.bwdInput)
          out += l + "\n";
        out += readyLines(i, false);
      }
      if (weightPart) {
        for (const auto &l : st.bwdWeight)
          out += l + "\n";
        out += readyLines(i, true);
      }
    }
    out += "}\n\n";
  };
  if (splitBackward_) {
    emitBackward("backward_input_compute", true, false);
    emitBackward("backward_weight_compute", false, true);
  } else {
    emitBackward("backward_compute", true, true);
  }

  out += fmt::format("static void stage{}_zero_grads(Stage{} &a) {{\n", stage,
                     stage);
  // On cuda the gradients received from the next stage are left alone: the
  // receive overwrites them, possibly already posted; so are those whose only
  // writer stores them (storedGrads_). The rest are one ZeroSet, built at the
  // first call (an eager step: sealing copies to the device).
  std::set<std::string> received;
  for (int t : sendOut)
    received.insert("d_" + bufName(t, L_.tensors[size_t(t)]));
  if (cuda_)
    out += "  if (!a.grad_zeros.sealed()) {\n";
  for (const Member &m : members_[stage]) {
    if (!m.grad)
      continue;
    if (!cuda_)
      out += fmt::format("  std::fill(a.{0}.begin(), a.{0}.end(), 0.0f);\n",
                         m.name);
    else if (!received.count(m.name) &&
             !storedGrads_.count("a." + m.name + ".data()"))
      out += fmt::format("    a.grad_zeros.add(a.{0}.data(), a.{0}.size() * "
                         "int64_t(sizeof(act_t)));\n",
                         m.name);
  }
  if (cuda_)
    out += "    a.grad_zeros.seal();\n  }\n  a.grad_zeros.zero();\n";
  out += "  (void)a;\n}\n\n";

  // The instructions: receive, compute (traced F/B/W), send.
  auto transferList = [&](const std::vector<int> &ts, bool grads, int peerStage,
                          int boundary, const char *dirTag, bool send) {
    const char *format =
        send ? (cuda_ ? "  pipe_send({}, {}, device_of({}, dir), tag(mb, {}, "
                        "{}, {}));\n"
                      : "  pending.push_back(isend({}, {}, device_of({}, dir), "
                        "tag(mb, {}, {}, {}), g.pp));\n")
             : (cuda_ ? "  pipe_recv({}, {}, device_of({}, dir), tag(mb, {}, "
                        "{}, {}));\n"
                      : "  recv({}, {}, device_of({}, dir), tag(mb, {}, {}, "
                        "{}), g.pp);\n");
    std::string s;
    for (size_t k = 0; k < ts.size(); ++k) {
      const int t = ts[k];
      TpLayout l = L_.tensors[size_t(t)];
      s += fmt::format(fmt::runtime(format), grads ? grad(t, l) : val(t, l),
                       elems(t, l), peerStage, boundary, dirTag, k);
    }
    return s;
  };
  auto recvList = [&](const std::vector<int> &ts, bool grads, int peerStage,
                      int boundary, const char *dirTag) {
    return transferList(ts, grads, peerStage, boundary, dirTag, false);
  };
  auto sendList = [&](const std::vector<int> &ts, bool grads, int peerStage,
                      int boundary, const char *dirTag) {
    return transferList(ts, grads, peerStage, boundary, dirTag, true);
  };
  out +=
      fmt::format("static void stage{0}_forward(int64_t step, int mb, "
                  "Direction dir) {{\n  Stage{0} &a = stage{0}[size_t(mb)];\n",
                  stage);
  // The compute of an instruction, timed: on the host clock (cpu) or by CUDA
  // events, skipped while the pipeline's transfers are being recorded (cuda).
  auto timed = [&](const std::string &call, const char *letter) {
    if (!cuda_)
      return "  const double t0 = trace.now_us();\n  " + call +
             "\n  trace.end(\"" + letter + "\" + std::to_string(mb), 0, t0);\n";
    return "  if (!pipe.recording()) {\n    const int t0 = trace.begin();\n"
           "    " +
           call + "\n    trace.end(\"" + letter +
           "\" + std::to_string(mb), 0, t0);\n  }\n";
  };
  out += recvList(in, false, stage - 1, stage - 1, "kActivation");
  out +=
      timed(fmt::format("stage{}_forward_compute(a, step, mb);", stage), "F");
  out += sendList(sendOut, false, stage + 1, stage, "kActivation");
  out += "  (void)dir;\n}\n\n";
  std::vector<const char *> parts = {"backward"};
  if (splitBackward_)
    parts = {"backward_input", "backward_weight"};
  for (const char *part : parts) {
    const bool weightOnly = std::string(part) == "backward_weight";
    out += fmt::format("static void stage{0}_{1}(int64_t, int mb, Direction "
                       "dir) {{\n  Stage{0} &a = stage{0}[size_t(mb)];\n",
                       stage, part);
    if (!weightOnly) {
      out += fmt::format(cuda_ ? "  if (!pipe.recording())\n    "
                                 "stage{}_zero_grads(a);\n"
                               : "  stage{}_zero_grads(a);\n",
                         stage);
      out += recvList(sendOut, true, stage + 1, stage, "kGradient");
    }
    out += timed(fmt::format("stage{}_{}_compute(a);", stage, part),
                 weightOnly ? "W" : "B");
    if (!weightOnly)
      out += sendList(in, true, stage - 1, stage - 1, "kGradient");
    out += "  (void)dir;\n}\n\n";
  }
}

std::string Emitter::header() const {
  const auto &k = plan_.knobs;
  std::string h;
  h += fmt::format("//===- train.cpp - generated by `autoddl codegen --backend "
                   "{}` from plan.json ===//\n//\n",
                   cuda_ ? "cuda" : "cpu");
  h += fmt::format("// Model     {} ({}), {} parameters, {} layers{}\n",
                   plan_.model, g_.family, g_.parameterCount(), g_.numLayers,
                   g_.seq ? ", sequence " + std::to_string(g_.seq) : "");
  h += fmt::format("// Mesh      pp={} x dp={} x tp={} = {} ranks, axes ({}) "
                   "row-major: the last axis varies fastest\n",
                   k.pp, k.dp, k.tp, k.pp * k.dp * k.tp,
                   planner::axisOrderName(k.order));
  h +=
      fmt::format("// Batch     {} samples per step = dp {} x {} micro-batches "
                  "x {} samples\n",
                  plan_.globalBatch, k.dp, k.microbatches, k.microbatch);
  h += fmt::format(
      "// Schedule  {}{}, ZeRO stage {}{}\n",
      pipeline::scheduleName(k.schedule),
      k.chunks > 1 ? " (" + std::to_string(k.chunks) + " chunks)" : "", k.zero,
      k.recompute != cost::Recompute::None
          ? " (recompute " + planner::recomputeName(k.recompute) +
                " is a memory knob; this program keeps every "
                "activation)"
          : "");
  if (!padRows_.empty())
    h += fmt::format(
        "// Vocabulary {} padded on the device to a multiple of 64 rows per "
        "rank (GEMMs with an odd\n// dimension run at a fraction of the "
        "aligned rate): the logits are [N, Vp], the padding rows\n// and "
        "columns stay zero, and checkpoints, gradient sync and metrics use "
        "the real rows only:\n",
        vocab());
  for (const auto &[t, rows] : padRows_) {
    const std::vector<int64_t> ls = local(t, L_.tensors[size_t(t)]);
    h += fmt::format("//   {} {} -> {}\n", g_.tensors[size_t(t)].name,
                     shapeStr(ls), shapeStr({rows, ls[1]}));
  }
  h += "//\n// Stages (model stage -> pipeline device, layers):\n";
  for (const auto &s : plan_.stages)
    h +=
        fmt::format("//   stage {} on device {}: layers [{}, {}){}{}\n",
                    s.stage, s.device, s.firstLayer, s.endLayer,
                    s.pre ? " + embedding" : "", s.post ? " + head, loss" : "");
  if (plan_.stages.empty())
    h += "//   stage 0 on device 0: the whole model\n";
  h += "//\n// Parameters, nd-SBP over (dp, tp) as this program holds them "
       "(dp: B, ZeRO shards the\n// optimizer state over dp):\n";
  for (size_t t = 0; t < g_.tensors.size(); ++t)
    if (isParam(int(t)))
      h += fmt::format("//   {:<40} {:<12} (B, {})\n", g_.tensors[t].name,
                       shapeStr(full(int(t))), L_.tensors[t].str());
  h += "//\n// Ops whose plan signature splits over tp, and how they run "
       "here:\n";
  bool any = false;
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    const OpPlan &p = L_.ops[i];
    if (p.signature.empty() || p.signature == "replicate" ||
        plan_.knobs.tp == 1)
      continue;
    static const char *mode[] = {"replicated",         "column",      "row",
                                 "vocab table",        "local heads", "local",
                                 "vocab-parallel loss"};
    h += fmt::format("//   {:<28} {:<10} plan {:<8} -> {}\n", g_.ops[i].name,
                     g_.ops[i].kind, p.signature, mode[int(p.mode)]);
    any = true;
  }
  if (!any)
    h += "//   (none)\n";
  // Splits the program does not generate (Layout.h lists those it does) run
  // replicated over tp: the same function at more than the plan's work per
  // rank.
  int replicatedOps = 0;
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (plan_.knobs.tp > 1 && L_.ops[i].mode == OpMode::Replicated &&
        !L_.ops[i].signature.empty() && L_.ops[i].signature != "replicate")
      ++replicatedOps;
  if (replicatedOps > 0) {
    const std::string note = fmt::format(
        "{} ops the plan splits over tp run replicated over tp here (splits "
        "of matmul, softmax, reshape, transpose and graph ops, batch or "
        "sequence splits of a graph model's linears and loss, an undivided "
        "vocabulary outside a bias-free lm_head feeding only the loss, tied "
        "tables not split by vocabulary for both their readers, and "
        "parameters read whole by ops on split rows and by others are not "
        "split by generated programs yet): expect more time per step than "
        "predicted; `autoddl plan --tp-mode tensor` leaves out such splits",
        replicatedOps);
    h += "//   " + note + "\n";
    std::fprintf(stderr, "autoddl: codegen: warning: %s\n", note.c_str());
  }
  // Expected communication volume per step, by collective and axis.
  std::map<std::string, std::pair<int64_t, double>> vol;
  for (const auto &c : plan_.collectives) {
    auto &v = vol[c.collective + " over " + c.axis + " (" + c.phase + ")"];
    v.first += c.perStep;
    v.second += c.bytes * double(c.perStep);
  }
  h += "//\n// Expected communication per step and rank (the plan's cost "
       "model):\n";
  if (vol.empty())
    h += "//   none\n";
  for (const auto &[what, v] : vol)
    h += fmt::format("//   {:<48} {:>6} calls {:>14.0f} bytes\n", what, v.first,
                     v.second);
  h += "//\n//===----------------------------------------------------------"
       "------------===//\n";
  return h;
}

std::string Emitter::emit() {
  const auto &k = plan_.knobs;
  pipeline::ScheduleConfig cfg;
  cfg.kind = k.schedule;
  cfg.stages = k.pp;
  cfg.microbatches = int(k.microbatches);
  cfg.chunks = k.schedule == pipeline::ScheduleKind::Interleaved ? k.chunks : 1;
  auto sched = pipeline::generateSchedule(cfg);
  if (!sched)
    throw UserError("plan: " + sched.error());
  const int stages = sched->modelStages();
  if (stages != L_.numStages)
    throw UserError(fmt::format("plan: the schedule has {} model stages but "
                                "the plan lists {}",
                                stages, L_.numStages));
  if (k.zero > planner::kMaxGeneratedZero)
    throw UserError(fmt::format(
        "codegen: plan zero={}: the generated programs shard the optimizer "
        "state only (ZeRO-1), so this plan would hold full gradients and need "
        "more memory than it was priced with; plan again with zero 0 or 1 "
        "(autoddl plan searches only those unless --fix zero=2)",
        k.zero));
  const bool chimera = k.schedule == pipeline::ScheduleKind::Chimera;
  splitBackward_ = sched->splitsBackward();
  if (graphModel_ && k.microbatches > 1)
    throw UserError("codegen: a graph model trains on the whole graph: "
                    "micro-batches must be 1");
  if (nodeSplit() && full(findInput("features"))[0] % k.dp != 0)
    throw UserError(fmt::format(
        "codegen: dp={} splits the graph's nodes, and does not divide its {}",
        k.dp, full(findInput("features"))[0]));

  // Which pipeline devices hold each parameter (a stage's parameters live on
  // the device running it; Chimera runs every stage on two devices).
  std::vector<uint64_t> &mask = deviceMask_;
  mask.assign(g_.tensors.size(), 0);
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    const int st = L_.ops[i].stage;
    uint64_t m = uint64_t(1) << sched->deviceOf(st, Direction::Down);
    if (chimera)
      m |= uint64_t(1) << sched->deviceOf(st, Direction::Up);
    for (int t : g_.ops[i].operands)
      if (isParam(t))
        mask[size_t(t)] |= m;
  }

  users_ = readers();
  planVocabPadding();
  planGeluFusion();
  planResidualFusion();
  std::string stagesText;
  for (int s = 0; s < stages; ++s)
    emitStage(s, stagesText);
  std::string params = "// Every parameter of the model; a rank holds those of "
                       "the stages it runs.\nstruct Params {\n";
  std::string table;
  for (size_t t = 0; t < g_.tensors.size(); ++t) {
    if (!isParam(int(t)))
      continue;
    const auto &td = g_.tensors[t];
    params += fmt::format("  Param {}; // {} {}\n", names_[t],
                          shapeStr(td.shape), L_.tensors[t].str());
    // A packed q|k|v split per segment names its segment count last.
    const std::string segments =
        L_.tensors[t].segments > 1 ? fmt::format(", {}", L_.tensors[t].segments)
                                   : std::string();
    table +=
        fmt::format("      {{&P.{}, \"{}\", {}, {}, \"{}\", {}, {:#x}{}}},\n",
                    names_[t], td.name, shapeInit(td.shape), L_.tensors[t].dim,
                    td.init.empty() ? "normal" : td.init, fmtDouble(td.initStd),
                    mask[t], segments);
  }
  params += "};\nstatic Params P;\n\n";
  params += "// name, full shape, tp split dimension (-1: B), init, std, "
            "pipeline devices holding it (bits)\nstatic std::vector<ParamSpec> "
            "param_specs() {\n  return {\n" +
            table + "  };\n}\n\n";
  if (cuda_)
    params += vocabPaddingText();
  params += tpPartialGradsText();

  int maxBoundary = 1;
  for (int s = 1; s < stages; ++s)
    maxBoundary = std::max(maxBoundary, int(boundaryTensors(g_, L_, s).size()));

  const int64_t globalCount = lossCount_ * k.microbatches * k.dp;
  std::string consts;
  consts += "// ---- the plan ----\n";
  consts += fmt::format("constexpr int64_t kPP = {}, kDP = {}, kTP = {};\n",
                        k.pp, k.dp, k.tp);
  consts += fmt::format(
      "constexpr bool kTensorInner = {}; // mesh axes (pp, dp, tp); else (pp, "
      "tp, dp)\n",
      k.order == planner::AxisOrder::TensorInner ? "true" : "false");
  consts += fmt::format("constexpr int64_t kStages = {}, kMicroBatches = {}, "
                        "kMicroBatch = {};\n",
                        stages, k.microbatches, k.microbatch);
  consts += fmt::format("constexpr int64_t kGlobalBatch = {}, kSeq = {}, "
                        "kVocab = {};\n",
                        plan_.globalBatch, g_.seq, vocab());
  consts +=
      fmt::format("constexpr bool kChimera = {}, kGraphModel = {};\n",
                  chimera ? "true" : "false", graphModel_ ? "true" : "false");
  consts += fmt::format("constexpr int kZero = {};\n", k.zero);
  consts += fmt::format("constexpr bool kLossRowsOnTp = {}; // the loss split "
                        "by rows (batch, sequence) over tp\n",
                        lossRowsSplit_ ? "true" : "false");
  consts += fmt::format("constexpr int kMaxBoundary = {}; // tensors crossing "
                        "one stage boundary\n",
                        maxBoundary);
  if (!graphModel_) // a graph model's count follows kNodes, below
    consts += fmt::format("// The loss is the mean over {} positions of the "
                          "global batch.\nconstexpr int64_t kLossCount = "
                          "{};\nconstexpr float kLossScale = 1.0f / "
                          "float(kLossCount);\n",
                          globalCount, globalCount);
  consts +=
      fmt::format("constexpr const char *kModelName = \"{}\";\n", plan_.model);
  if (cuda_) {
    consts +=
        fmt::format("// Model FLOPs of one step (forward + backward, the "
                    "plan's count) and the peak of one\n// {} (the "
                    "cluster preset): the MFU reported in metrics.json.\n",
                    plan_.gpu.empty() ? "GPU" : plan_.gpu);
    consts += fmt::format("constexpr double kModelFlopsPerStep = {}, "
                          "kPeakFlopsPerGpu = {};\n",
                          fmtDouble(plan_.predicted.modelFlopsPerStep),
                          fmtDouble(plan_.peakFlops));
  }
  if (graphModel_) {
    const int x = findInput("features");
    const auto &fs = full(x);
    int64_t classes = 0;
    for (size_t i = 0; i < g_.ops.size(); ++i)
      if (g_.ops[i].kind == "cross_entropy")
        classes = full(g_.ops[i].operands[0]).back();
    consts += fmt::format("constexpr int64_t kNodes = {}, kFeatures = {}, "
                          "kClasses = {};\n",
                          fs[0], fs[1], classes);
    consts += "// The loss is the mean over the graph's training nodes (the "
              "even ones,\n// backends/common/Data.h); the odd ones are held "
              "out, for the held-out accuracy.\nconstexpr int64_t kLossCount "
              "= planted_graph_training_nodes(kNodes);\nconstexpr int64_t "
              "kHeldOutCount = kNodes - kLossCount;\nconstexpr float "
              "kLossScale = 1.0f / float(kLossCount);\n";
  } else if (classModel_) {
    const auto &xs = full(classInput_);
    int64_t classes = 0;
    for (const OpDef &op : g_.ops)
      if (op.kind == "cross_entropy")
        classes = full(op.operands[0]).back();
    consts += fmt::format(
        "// Samples per micro-batch (the leading dimension of {} {}; an "
        "explicit graph's\n// micro-batch is one instance of it), features "
        "of one sample, classes.\nconstexpr int64_t kClassBatch = {};\n"
        "constexpr int64_t kNodes = 0, kFeatures = {}, kClasses = {};\n",
        g_.tensors[size_t(classInput_)].name, shapeStr(xs), xs[0],
        numel(xs) / xs[0], classes);
  } else {
    consts += "constexpr int64_t kNodes = 0, kFeatures = 0, kClasses = 0; // "
              "graph models only\n";
  }
  consts += "\n";

  std::string lastStage = fmt::format("stage{}", stages - 1);
  std::string glue;
  glue += "// ---- the step ----\n\n";
  glue += "static void allocate_stages() {\n";
  for (int s = 0; s < stages; ++s)
    glue += fmt::format("  if (holds_stage({0}))\n    stage{0}.resize(size_t("
                        "kMicroBatches));\n",
                        s);
  glue += "}\n\n";
  if (cuda_) {
    glue += "// Device buffers go before the CUDA context does.\n";
    glue += "static void free_stages() {\n";
    for (int s = 0; s < stages; ++s)
      glue += fmt::format("  stage{}.clear();\n", s);
    glue += "}\n\n";
  }
  // With the loss on split rows (kLossRowsOnTp) every tp rank sums its own
  // positions; otherwise tp rank 0 holds them all.
  glue += "// This rank's share of the step's summed loss (of the devices "
          "running the last stage).\n";
  glue += "static double local_loss_sum() {\n  double sum = 0;\n  if "
          "(kLossRowsOnTp || g.rtp == 0)\n";
  if (cuda_)
    glue += fmt::format("    for (const auto &a : {})\n   "
                        "   sum += sum_to_host(a.losses.data(), "
                        "a.losses.size());\n",
                        lastStage);
  else
    glue += fmt::format("    for (const auto &a : {})\n   "
                        "   sum += a.loss_sum;\n",
                        lastStage);
  glue += "  return sum;\n}\n\n";
  if (reportsAccuracy())
    glue += fmt::format(
        "// This rank's share of the step's correctly classified samples (as "
        "local_loss_sum).\nstatic double local_correct() {{\n  double sum = "
        "0;\n  if (kLossRowsOnTp || g.rtp == 0)\n    for (const auto &a : "
        "{})\n      sum += double(a.correct);\n  return sum;\n}}\n\n",
        lastStage);
  if (graphModel_)
    glue += fmt::format(
        "// The same over the graph's held-out nodes.\nstatic double "
        "local_heldout_correct() {{\n  double sum = 0;\n  if (g.rtp == 0)\n "
        "   for (const auto &a : {})\n      sum += "
        "double(a.correct_heldout);\n  return sum;\n}}\n\n",
        lastStage);
  glue += schedules(*sched);
  if (cuda_) {
    glue += "\n" + gradSyncConfig(*sched);
    glue += stepGraphGlue(stages);
  }

  if (cuda_) // accuracy: the device count_correct (kernels/CrossEntropy.h)
    return header() + kCudaTrainPreludeText + kTrainSpecText + consts + params +
           kCudaTrainSupportText + kTrainSharedPipelineText +
           kCudaTrainDataText + stagesText + glue + kTrainOptionsText +
           kCudaTrainInitText + kTrainAllParamsText + kCudaTrainParamsText +
           kTrainCheckpointText + kTrainParseText +
           (reportsAccuracy() ? classMain(kCudaTrainMainText, graphModel_)
                              : std::string(kCudaTrainMainText));
  std::string prelude = kTrainPreludeText, data = kTrainDataText,
              mainText = kTrainMainText;
  if (classModel_) {
    prelude = classPrelude(prelude);
    data += kTrainClassDataText;
  } else if (std::any_of(g_.ops.begin(), g_.ops.end(), [](const OpDef &o) {
               return o.kind == "transpose" || o.kind == "conv2d" ||
                      o.kind == "pool2d";
             })) {
    // A token model with these ops (an ONNX export's head reshapes) needs
    // their kernels too.
    const std::string spmm = "// spmm\n";
    prelude = replaceOnce(prelude, spmm, spmm + kTrainClassIncludesText);
  }
  if (reportsAccuracy()) {
    data += kTrainAccuracyText;
    mainText = classMain(mainText, graphModel_);
  }
  return header() + prelude + kTrainSpecText + consts + params +
         kTrainSupportText + kTrainSharedPipelineText + data + stagesText +
         glue + kTrainOptionsText + kTrainParamsText + kTrainAllParamsText +
         kTrainOptimizerText + kTrainCheckpointText + kTrainParseText +
         mainText;
}

} // namespace

std::string emitTrainProgram(const planner::Plan &plan, const ModelGraph &model,
                             Backend backend) {
  Emitter e(plan, model, backend);
  return e.emit();
}

std::string emitCpuTrainProgram(const planner::Plan &plan,
                                const ModelGraph &model) {
  return emitTrainProgram(plan, model, Backend::Cpu);
}

} // namespace autoddl::codegen
