//===- Layout.cpp - op execution modes and tensor layouts ----------------===//
#include "codegen/Layout.h"
#include "codegen/emit/OpTable.h"

#include "planner/ProgramDecisions.h"

#include "support/UserError.h"

#include <algorithm>
#include <map>
#include <set>

namespace autoddl::codegen {

std::vector<int64_t> localShape(const std::vector<int64_t> &shape, TpLayout l,
                                int tp) {
  std::vector<int64_t> s = shape;
  if (l.split()) // ceil: a padded vocabulary's parts (paddedVocab below)
    s[size_t(l.dim)] = (s[size_t(l.dim)] + tp - 1) / tp;
  return s;
}

namespace {

/// Stage of every op from the plan's StageInfo: layered ops by their layer,
/// ops before the first layer on the stage with `pre`, after it on `post`.
std::vector<int> opStages(const planner::Plan &plan, const ModelGraph &g,
                          int &numStages) {
  numStages = std::max<int>(1, int(plan.stages.size()));
  std::vector<int> stage(g.ops.size(), 0);
  int preStage = 0, postStage = numStages - 1;
  for (const auto &s : plan.stages) {
    if (s.pre)
      preStage = s.stage;
    if (s.post)
      postStage = s.stage;
  }
  bool seenLayer = false;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpDef &op = g.ops[i];
    if (op.layer >= 0) {
      seenLayer = true;
      int found = -1;
      for (const auto &s : plan.stages)
        if (op.layer >= s.firstLayer && op.layer < s.endLayer)
          found = s.stage;
      if (found < 0 && !plan.stages.empty())
        throw UserError("plan: no stage holds layer " +
                        std::to_string(op.layer) + " (op " + op.name + ")");
      stage[i] = std::max(found, 0);
    } else {
      stage[i] = seenLayer ? postStage : preStage;
    }
  }
  // Stages must not go backwards along the op order (the program sends
  // activations down the pipeline only).
  for (size_t i = 1; i < g.ops.size(); ++i)
    if (stage[i] < stage[i - 1])
      throw UserError("plan: op " + g.ops[i].name + " is on stage " +
                      std::to_string(stage[i]) + " after an op on stage " +
                      std::to_string(stage[i - 1]));
  return stage;
}

/// The plan's signature for each op: by its name where the plan lists it; for
/// the other layers' ops, the op at the same position of the representative
/// layer.
std::vector<std::string> opSignatures(const planner::Plan &plan,
                                      const ModelGraph &g) {
  std::map<std::string, size_t> byName;
  for (size_t i = 0; i < g.ops.size(); ++i)
    byName[g.ops[i].name] = i;
  std::vector<int> posInLayer(g.ops.size(), -1);
  std::map<int64_t, int> counter;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].layer >= 0)
      posInLayer[i] = counter[g.ops[i].layer]++;
  std::map<std::string, std::string> named;
  std::map<int, std::string> inLayer;
  for (const auto &c : plan.ops) {
    auto it = byName.find(c.op);
    if (it == byName.end())
      continue;
    if (g.ops[it->second].layer >= 0)
      inLayer[posInLayer[it->second]] = c.signature;
    named[c.op] = c.signature;
  }
  std::vector<std::string> sig(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) {
    // An op the plan names takes its own signature (every op of a model
    // without repeated blocks, such as VGG's numbered convolutions); the
    // other layers' ops that of the same position in the named layer.
    auto it = named.find(g.ops[i].name);
    if (it != named.end()) {
      sig[i] = it->second;
    } else if (g.ops[i].layer >= 0) {
      auto at = inLayer.find(posInLayer[i]);
      if (at != inLayer.end())
        sig[i] = at->second;
    }
  }
  return sig;
}

/// One op under layout: its index, definition and plan, and its result's
/// shape.
struct OpAt {
  size_t i;
  const OpDef &op;
  OpPlan &p;
  const std::vector<int64_t> &out; // the result's shape
  int last;                        // out's last dimension
};

/// Builds the layout with the parameters in `replicatedParams` kept
/// replicated (the others split as their readers' modes ask): each op's mode
/// by its kind (one function per kind family, in op order, as the layouts
/// its operands arrive in ask), then the row-parallel linears that
/// reduce-scatter.
class LayoutBuilder {
public:
  LayoutBuilder(const planner::Plan &plan, const ModelGraph &g,
                const std::string &backend,
                const std::set<int> &replicatedParams,
                const std::set<int> &wholeParams, std::map<int, int> &rowReads)
      : g_(g), backend_(backend), replicatedParams_(replicatedParams),
        wholeParams_(wholeParams), rowReads_(rowReads), uses_(g),
        consumers_(uses_.readers) {
    L_.tp = plan.knobs.tp;
    tp_ = L_.tp;
    stage_ = opStages(plan, g, L_.numStages);
    sig_ = opSignatures(plan, g);
    L_.tensors.assign(g.tensors.size(), TpLayout{});
    L_.ops.resize(g.ops.size());
    // A graph model's linears and loss read node rows whose split the graph
    // kernels and the held-out labels do not follow: those stay as before.
    for (const auto &t : g.tensors)
      graph_ = graph_ || t.sparse;
  }

  ModelLayout build() {
    for (size_t i = 0; i < g_.ops.size(); ++i)
      layOp(i);
    for (size_t i = 0; i < g_.ops.size(); ++i)
      scatterRowsOfRowLinear(i);
    return std::move(L_);
  }

private:
  using KindRule = void (LayoutBuilder::*)(const OpAt &);
  static const std::map<std::string, KindRule> &kindRules();

  void layOp(size_t i);
  void layLinear(const OpAt &o);
  void layEmbedding(const OpAt &o);
  void layPositional(const OpAt &o);
  void layAttention(const OpAt &o);
  void layRotary(const OpAt &o);
  void layNorm(const OpAt &o);
  void layElementwise(const OpAt &o);
  void layBiasAdd(const OpAt &o);
  void laySpmm(const OpAt &o);
  void laySddmm(const OpAt &o);
  void layHeadDot(const OpAt &o);
  void layGatAggregate(const OpAt &o);
  void layLoss(const OpAt &o);
  void layImageOp(const OpAt &o);
  void scatterRowsOfRowLinear(size_t i);

  TpLayout lay(const OpDef &op, size_t k) const {
    return L_.tensors[size_t(op.operands[k])];
  }
  const std::vector<int64_t> &shape(const OpDef &op, size_t k) const {
    return g_.tensors[size_t(op.operands[k])].shape;
  }
  bool splittableParam(int t) const {
    return g_.tensors[size_t(t)].role == TensorRole::Parameter &&
           !replicatedParams_.count(t);
  }
  bool divisible(int64_t n) const { return tp_ > 1 && n % tp_ == 0; }
  // A vocabulary tp does not divide (GPT-2's 50257 rows) splits in parts of
  // ceil(V / tp) rows, the last shorter and stored padded with zero rows
  // (Megatron pads its vocabulary alike, but there the padding joins the
  // softmax; here it stays outside: the same function as one device). Every
  // rank keeps at least one real row.
  bool paddable(int64_t n) const {
    return planner::unevenVocabSplitRuns(n, tp_);
  }
  bool paddedVocab(size_t i, int64_t O) const;
  bool packedHeads(const OpDef &op) const;
  TpLayout rowSplitOf(size_t i, const std::vector<int64_t> &shape) const;
  TpLayout rowSplit(size_t i) const {
    return rowSplitOf(i, g_.tensors[size_t(g_.ops[i].results[0])].shape);
  }
  bool wholeParamsOk(const OpDef &op, size_t from) const;
  void readWhole(const OpDef &op, size_t from);
  void onRows(OpPlan &p, const OpDef &op, TpLayout rows, size_t from);

  const ModelGraph &g_;
  const std::string &backend_;
  const std::set<int> &replicatedParams_, &wholeParams_;
  std::map<int, int> &rowReads_;
  const planner::GraphUses uses_;
  const std::vector<std::vector<size_t>> &consumers_;
  ModelLayout L_;
  int tp_ = 1;
  std::vector<int> stage_;
  std::vector<std::string> sig_;
  bool graph_ = false;
};

// A padded vocabulary in an lm_head: its table read by rows (a transposed
// weight [V, C], no bias) and its logits read only by cross-entropies on
// the same stage, which skip the padding columns; nothing else would know
// to.
bool LayoutBuilder::paddedVocab(size_t i, int64_t O) const {
  if (!paddable(O) || !planner::logitsOnlyToLoss(g_, uses_, g_.ops[i]))
    return false;
  const auto &cs = consumers_[size_t(g_.ops[i].results[0])];
  return std::all_of(cs.begin(), cs.end(),
                     [&](size_t c) { return stage_[c] == stage_[i]; });
}

// A column linear whose sole consumer is a packed attention of equal q, k, v
// segments planned by heads: split per segment, so each rank's qkv holds
// whole heads (otherwise a contiguous split gives rank 0 all of q).
bool LayoutBuilder::packedHeads(const OpDef &op) const {
  const auto &cs = consumers_[size_t(op.results[0])];
  if (cs.size() != 1)
    return false;
  const OpDef &att = g_.ops[cs[0]];
  const int64_t H = attrOr(att, ops::attr::kNumHeads, 1),
                G = attrOf(att, ops::attr::kNumKvHeads);
  return att.kind == "attention" && att.operands.size() == 1 &&
         sig_[cs[0]] == "heads" && H == G && divisible(H);
}

// The rows an op the plan splits by `sequence` (dimension 1) or `batch`
// (dimension 0) runs on, when that dimension of `shape` (the result's, by
// default) divides and is not the last (a norm's features, an elementwise
// op's hidden split): B otherwise.
TpLayout LayoutBuilder::rowSplitOf(size_t i,
                                   const std::vector<int64_t> &shape) const {
  const int d = sig_[i] == "sequence" ? 1 : sig_[i] == "batch" ? 0 : -1;
  if (d < 0 || d + 1 >= int(shape.size()) || !divisible(shape[size_t(d)]))
    return TpLayout{};
  return TpLayout{d};
}

// An op on split rows reading a parameter whole: its gradient there is the
// rows' part (tpPartialGrads), so every reader of that parameter must run
// on split rows (chooseLayout keeps the others' parameters out of this).
bool LayoutBuilder::wholeParamsOk(const OpDef &op, size_t from) const {
  for (size_t k = from; k < op.operands.size(); ++k) {
    const int t = op.operands[k];
    if (g_.tensors[size_t(t)].role != TensorRole::Parameter ||
        wholeParams_.count(t))
      return false;
  }
  return true;
}

void LayoutBuilder::readWhole(const OpDef &op, size_t from) {
  for (size_t k = from; k < op.operands.size(); ++k) {
    ++rowReads_[op.operands[k]];
    L_.tpPartialGrads.insert(op.operands[k]);
  }
}

// Every operand and the result on the same rows (params read whole from
// operand `from` on).
void LayoutBuilder::onRows(OpPlan &p, const OpDef &op, TpLayout rows,
                           size_t from) {
  p.mode = OpMode::Local;
  for (size_t k = 0; k < from; ++k)
    p.operands[k] = rows;
  p.result = rows;
  readWhole(op, from);
}

const std::map<std::string, LayoutBuilder::KindRule> &
LayoutBuilder::kindRules() {
  static const std::map<std::string, KindRule> rules = {
      {"linear", &LayoutBuilder::layLinear},
      {"embedding", &LayoutBuilder::layEmbedding},
      {"positional", &LayoutBuilder::layPositional},
      {"attention", &LayoutBuilder::layAttention},
      {"rotary", &LayoutBuilder::layRotary},
      {"layernorm", &LayoutBuilder::layNorm},
      {"rmsnorm", &LayoutBuilder::layNorm},
      {"add", &LayoutBuilder::layElementwise},
      {"mul", &LayoutBuilder::layElementwise},
      {"gelu", &LayoutBuilder::layElementwise},
      {"relu", &LayoutBuilder::layElementwise},
      {"silu", &LayoutBuilder::layElementwise},
      {"elu", &LayoutBuilder::layElementwise},
      {"swiglu", &LayoutBuilder::layElementwise},
      {"bias_add", &LayoutBuilder::layBiasAdd},
      {"spmm", &LayoutBuilder::laySpmm},
      {"sddmm", &LayoutBuilder::laySddmm},
      {"head_dot", &LayoutBuilder::layHeadDot},
      {"gat_aggregate", &LayoutBuilder::layGatAggregate},
      {"cross_entropy", &LayoutBuilder::layLoss},
      {"squared_error", &LayoutBuilder::layLoss},
      {"conv2d", &LayoutBuilder::layImageOp},
      {"pool2d", &LayoutBuilder::layImageOp},
      {"flatten", &LayoutBuilder::layImageOp},
  };
  return rules;
}

/// Op i's mode and its operands' and result's layouts (replicated unless
/// tp > 1 and its kind's rule splits it); its parameters and results take
/// them.
void LayoutBuilder::layOp(size_t i) {
  const OpDef &op = g_.ops[i];
  // The op table (codegen/emit/OpTable.cpp) is what the programs run; image
  // ops and primitives have no case below, so tp keeps them replicated.
  if (!emit::opTable().count(op.kind))
    throw UserError("codegen: op " + op.name + " (" + op.kind +
                    ") is not supported by the " + backend_ + " backend yet");
  OpPlan &p = L_.ops[i];
  p.stage = stage_[i];
  p.signature = sig_[i];
  p.operands.assign(op.operands.size(), TpLayout{});
  const auto &out = g_.tensors[size_t(op.results[0])].shape;
  auto rule = kindRules().find(op.kind);
  if (tp_ > 1 && rule != kindRules().end())
    (this->*rule->second)(OpAt{i, op, p, out, int(out.size()) - 1});
  // Parameters take the layout their consumers read them in (the same for
  // all of them: chooseLayout).
  for (size_t k = 0; k < op.operands.size(); ++k)
    if (g_.tensors[size_t(op.operands[k])].role == TensorRole::Parameter)
      L_.tensors[size_t(op.operands[k])] = p.operands[k];
  for (int r : op.results)
    L_.tensors[size_t(r)] = p.result;
}

void LayoutBuilder::layLinear(const OpAt &o) {
  const OpDef &op = o.op;
  OpPlan &p = o.p;
  const std::string &sig = sig_[o.i];
  const bool tw = attrOf(op, ops::attr::kTransposeWeight);
  const int w = op.operands[1];
  const bool hasBias = op.operands.size() > 2;
  const auto &ws = g_.tensors[size_t(w)].shape;
  const int64_t O = tw ? ws[0] : ws[1], K = tw ? ws[1] : ws[0];
  const bool paramsOk =
      splittableParam(w) && (!hasBias || splittableParam(op.operands[2]));
  if ((sig == "column" || sig == "vocab") && paramsOk &&
      (divisible(O) || paddedVocab(o.i, O))) {
    const int seg = sig == "column" && packedHeads(op) ? 3 : 1;
    p.mode = OpMode::Column;
    p.operands[1] = TpLayout{tw ? 0 : 1, seg};
    if (hasBias)
      p.operands[2] = TpLayout{0, seg};
    p.result = TpLayout{o.last, seg};
  } else if (sig == "row" && paramsOk && divisible(K)) {
    p.mode = OpMode::Row;
    p.operands[0] = TpLayout{int(shape(op, 0).size()) - 1};
    p.operands[1] = TpLayout{tw ? 1 : 0};
  } else if (rowSplit(o.i).split() && !graph_ && wholeParamsOk(op, 1)) {
    // Each rank's rows through the whole weight (the tp axis as data
    // parallelism, or DeepSpeed-Ulysses' sequence split).
    onRows(p, op, rowSplit(o.i), 1);
  }
}

void LayoutBuilder::layEmbedding(const OpAt &o) {
  const int table = o.op.operands[1];
  const int64_t V = g_.tensors[size_t(table)].shape[0];
  const std::string &sig = sig_[o.i];
  if (sig == "vocab" && splittableParam(table) &&
      (divisible(V) || paddable(V))) {
    o.p.mode = OpMode::VocabTable;
    o.p.operands[1] = TpLayout{0};
  } else if (sig == "hidden" && splittableParam(table) &&
             divisible(o.out[size_t(o.last)])) {
    // Each rank's hidden columns of every row: the table S(1), no sum.
    o.p.mode = OpMode::Local;
    o.p.operands[1] = TpLayout{1};
    o.p.result = TpLayout{o.last};
  } else if (rowSplit(o.i).split() && wholeParamsOk(o.op, 1)) {
    onRows(o.p, o.op, rowSplit(o.i), 1); // the ids' rows, the table whole
  }
}

void LayoutBuilder::layPositional(const OpAt &o) {
  // hidden: x's and the table's columns of this rank, added locally.
  const int table = o.op.operands[1];
  if (sig_[o.i] == "hidden" && splittableParam(table) &&
      divisible(o.out[size_t(o.last)])) {
    o.p.mode = OpMode::Local;
    o.p.operands[0] = TpLayout{o.last};
    o.p.operands[1] = TpLayout{1};
    o.p.result = TpLayout{o.last};
  } else if (rowSplit(o.i).split() && wholeParamsOk(o.op, 1)) {
    onRows(o.p, o.op, rowSplit(o.i),
           1); // a sequence split from position rank*T/tp
  }
}

void LayoutBuilder::layAttention(const OpAt &o) {
  const OpDef &op = o.op;
  const int64_t H = attrOr(op, ops::attr::kNumHeads, 1),
                G = attrOf(op, ops::attr::kNumKvHeads);
  const std::string &sig = sig_[o.i];
  if (op.operands.size() == 3) {
    bool allSplit = true;
    for (size_t k = 0; k < 3; ++k)
      allSplit = allSplit && lay(op, k).dim == int(shape(op, k).size()) - 1;
    // By heads when q, k, v arrive split so, or when the plan says heads
    // (converted to it: DeepSpeed-Ulysses' attention between sequence-split
    // projections).
    if ((allSplit || sig == "heads") && divisible(H) && divisible(G)) {
      o.p.mode = OpMode::HeadSplit;
      for (size_t k = 0; k < 3; ++k)
        o.p.operands[k] = TpLayout{int(shape(op, k).size()) - 1};
      o.p.result = TpLayout{o.last};
    } else if (sig == "batch" && rowSplit(o.i).split()) {
      onRows(o.p, op, rowSplit(o.i), 3); // whole sequences of its batch rows
    }
    return;
  }
  // Packed qkv, split per segment by its producer (packedHeads), or
  // converted to that when the plan says heads (equal q, k, v segments).
  if ((lay(op, 0).dim == o.last && lay(op, 0).segments == 3) ||
      (sig == "heads" && H == G && divisible(H))) {
    o.p.mode = OpMode::HeadSplit;
    o.p.operands[0] = TpLayout{o.last, 3};
    o.p.result = TpLayout{o.last};
  } else if (sig == "batch" && rowSplit(o.i).split()) {
    onRows(o.p, op, rowSplit(o.i), 1);
  }
}

void LayoutBuilder::layRotary(const OpAt &o) {
  const int64_t H = attrOr(o.op, ops::attr::kNumHeads, 1);
  if ((lay(o.op, 0).dim == o.last || sig_[o.i] == "heads") && divisible(H)) {
    o.p.mode = OpMode::HeadSplit;
    o.p.operands[0] = TpLayout{o.last};
    o.p.result = TpLayout{o.last};
  } else if (rowSplit(o.i).split()) {
    onRows(o.p, o.op, rowSplit(o.i),
           1); // a sequence split from position rank*T/tp
  }
}

void LayoutBuilder::layNorm(const OpAt &o) {
  // Megatron's sequence parallelism (or a batch split): the norm of each
  // rank's rows; the scale and shift stay whole, their gradients partial
  // over tp (tpPartialGrads). Only for parameters this op alone reads.
  if (rowSplit(o.i).split() && wholeParamsOk(o.op, 1))
    onRows(o.p, o.op, rowSplit(o.i), 1);
}

void LayoutBuilder::layElementwise(const OpAt &o) {
  const OpDef &op = o.op;
  bool sameShapes = true, anyParam = false;
  for (size_t k = 0; k < op.operands.size(); ++k) {
    sameShapes = sameShapes && shape(op, k) == o.out;
    anyParam = anyParam ||
               g_.tensors[size_t(op.operands[k])].role == TensorRole::Parameter;
  }
  // The plan's rows split (Megatron's sequence-parallel residual adds),
  // else the split an operand arrives in.
  TpLayout chosen = anyParam ? TpLayout{} : rowSplit(o.i);
  for (size_t k = 0; k < op.operands.size() && !chosen.split(); ++k)
    if (lay(op, k).split() && shape(op, k) == o.out) {
      chosen = lay(op, k);
      break;
    }
  if (chosen.split() && sameShapes) {
    o.p.mode = OpMode::Local;
    for (auto &operand : o.p.operands)
      operand = chosen;
    o.p.result = chosen;
  }
}

void LayoutBuilder::layBiasAdd(const OpAt &o) {
  if (lay(o.op, 0).dim == o.last && splittableParam(o.op.operands[1])) {
    o.p.mode = OpMode::Local;
    o.p.operands[0] = lay(o.op, 0);
    o.p.operands[1] = TpLayout{0};
    o.p.result = lay(o.op, 0);
  } else if (rowSplit(o.i).split() && !graph_ && wholeParamsOk(o.op, 1)) {
    onRows(o.p, o.op, rowSplit(o.i), 1);
  }
}

void LayoutBuilder::laySpmm(const OpAt &o) {
  if (lay(o.op, 1).dim == 1) {
    o.p.mode = OpMode::Local;
    o.p.operands[1] = lay(o.op, 1);
    o.p.result = lay(o.op, 1);
  }
}

void LayoutBuilder::laySddmm(const OpAt &o) {
  // x and y split on K: each rank's partial dot products, all-reduced.
  if (lay(o.op, 1).dim == 1 && lay(o.op, 2).dim == 1) {
    o.p.mode = OpMode::Local;
    o.p.operands[1] = lay(o.op, 1);
    o.p.operands[2] = lay(o.op, 2);
  }
}

// GATConv by heads: x's columns split into whole heads (tp divides the heads)
// with att's rows, each rank its heads' terms; gat_aggregate on them is local
// too (a head's softmax and messages are its own). Otherwise replicated.
void LayoutBuilder::layHeadDot(const OpAt &o) {
  if (lay(o.op, 0) == TpLayout{1} && divisible(shape(o.op, 1)[0]) &&
      splittableParam(o.op.operands[1])) {
    o.p.mode = OpMode::Local;
    o.p.operands[0] = lay(o.op, 0);
    o.p.operands[1] = TpLayout{0};
    o.p.result = TpLayout{1};
  }
}

void LayoutBuilder::layGatAggregate(const OpAt &o) {
  if (lay(o.op, 1) == TpLayout{1} && lay(o.op, 2) == TpLayout{1} &&
      lay(o.op, 3) == TpLayout{1} && divisible(shape(o.op, 1)[1])) {
    o.p.mode = OpMode::Local;
    for (size_t k = 1; k < 4; ++k)
      o.p.operands[k] = lay(o.op, k);
    o.p.result = TpLayout{1};
  }
}

void LayoutBuilder::layLoss(const OpAt &o) {
  const OpDef &op = o.op;
  if (op.kind == "cross_entropy" &&
      lay(op, 0).dim == int(shape(op, 0).size()) - 1) {
    o.p.mode = OpMode::VocabLoss;
    o.p.operands[0] = lay(op, 0);
  } else if (const TpLayout rows = rowSplitOf(o.i, shape(op, 0));
             rows.split() && !graph_) {
    // Each rank's rows' losses: the sum partial over tp (every rank
    // reports its part), the logits' gradient scaled by the global count.
    o.p.mode = OpMode::Local;
    o.p.operands[0] = o.p.operands[1] = rows;
  }
}

void LayoutBuilder::layImageOp(const OpAt &o) {
  // A batch split: each rank's samples (a flatten keeping the batch
  // dimension first), a convolution's weights whole.
  const bool keepsBatch =
      o.op.kind != "flatten" || shape(o.op, 0).at(0) == o.out.at(0);
  if (sig_[o.i] == "batch" && keepsBatch && rowSplit(o.i).split() &&
      wholeParamsOk(o.op, 1))
    onRows(o.p, o.op, rowSplit(o.i), 1);
}

// A row-parallel linear whose every reader takes its result on split rows
// (Megatron's sequence parallelism: the residual add after the attention
// or MLP projection) reduce-scatters its partial sum into those rows instead
// of all-reducing it and slicing; its bias is then added to the rows and
// its gradient is partial over tp.
void LayoutBuilder::scatterRowsOfRowLinear(size_t i) {
  OpPlan &p = L_.ops[i];
  const OpDef &op = g_.ops[i];
  const int r = op.results[0];
  if (p.mode != OpMode::Row || r == g_.loss || consumers_[size_t(r)].empty())
    return;
  TpLayout rows;
  bool ok = true;
  for (size_t c : consumers_[size_t(r)])
    for (size_t k = 0; k < g_.ops[c].operands.size(); ++k)
      if (g_.ops[c].operands[k] == r) {
        const TpLayout l = L_.ops[c].operands[k];
        ok = ok && l.split() && l.segments == 1 &&
             l.dim + 1 < int(g_.tensors[size_t(r)].shape.size()) &&
             (!rows.split() || l == rows) && L_.ops[c].stage == p.stage;
        rows = l;
      }
  if (!ok || !rows.split() ||
      !divisible(g_.tensors[size_t(r)].shape[size_t(rows.dim)]) ||
      (op.operands.size() > 2 && !wholeParamsOk(op, 2)))
    return;
  p.result = rows;
  L_.tensors[size_t(r)] = rows;
  readWhole(op, 2);
}

/// The layout with the parameters in `replicatedParams` kept replicated (the
/// others split as their readers' modes ask).
ModelLayout layoutWith(const planner::Plan &plan, const ModelGraph &g,
                       const std::string &backend,
                       const std::set<int> &replicatedParams,
                       const std::set<int> &wholeParams,
                       std::map<int, int> &rowReads) {
  return LayoutBuilder(plan, g, backend, replicatedParams, wholeParams,
                       rowReads)
      .build();
}

} // namespace

ModelLayout chooseLayout(const planner::Plan &plan, const ModelGraph &g,
                         const std::string &backend) {
  // A parameter read by several ops (a tied embedding: the table and the
  // lm_head) splits only when every reader reads it the same way (both by
  // vocabulary rows, Megatron's vocab-parallel embedding and output layer);
  // otherwise it is replicated and the layout made again. Each round
  // replicates one more parameter or stops, so this ends.
  // Likewise a parameter read whole on split rows by one reader and not by
  // another would sum a partial and a whole gradient: it is kept off split
  // rows (wholeParams) and the layout made again.
  std::set<int> replicated, whole;
  for (;;) {
    std::map<int, int> rowReads;
    ModelLayout L = layoutWith(plan, g, backend, replicated, whole, rowReads);
    bool again = false;
    for (const auto &[t, reads] : rowReads) {
      int all = 0;
      for (const OpDef &op : g.ops)
        all += int(std::count(op.operands.begin(), op.operands.end(), t));
      if (reads != all && whole.insert(t).second)
        again = true;
    }
    if (again)
      continue;
    int mixed = -1;
    for (size_t i = 0; i < g.ops.size() && mixed < 0; ++i)
      for (size_t k = 0; k < g.ops[i].operands.size(); ++k) {
        const int t = g.ops[i].operands[k];
        if (g.tensors[size_t(t)].role == TensorRole::Parameter &&
            L.ops[i].operands[k] != L.tensors[size_t(t)]) {
          mixed = t;
          break;
        }
      }
    // (Replicated already: a reader that lays out its operands without
    // asking; keep this layout.)
    if (mixed < 0 || !replicated.insert(mixed).second)
      return L;
  }
}

} // namespace autoddl::codegen
