//===- Layout.cpp - op execution modes and tensor layouts ----------------===//
#include "codegen/Layout.h"

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

int64_t intAttr(const OpDef &op, const char *key, int64_t dflt) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end())
    return dflt;
  if (auto *v = std::get_if<int64_t>(&it->second))
    return *v;
  return dflt;
}

bool boolAttr(const OpDef &op, const char *key, bool dflt) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end())
    return dflt;
  if (auto *v = std::get_if<bool>(&it->second))
    return *v;
  return dflt;
}

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

const std::set<std::string> kSupported = {
    "embedding", "positional", "rotary", "linear", "matmul", "bias_add", "add",
    "mul", "gelu", "relu", "silu", "swiglu", "layernorm", "rmsnorm", "softmax",
    "attention", "cross_entropy", "squared_error", "spmm", "sddmm",
    "edge_softmax",
    // Image ops: always replicated over tp (no case below splits them).
    "conv2d", "pool2d", "flatten", "reshape", "transpose",
    // An ONNX import's unfused primitive: replicated over tp, too.
    "primitive"};

const std::set<std::string> kElementwise = {"add",  "mul",  "gelu",
                                            "relu", "silu", "swiglu"};

/// The layout with the parameters in `replicatedParams` kept replicated (the
/// others split as their readers' modes ask).
ModelLayout layoutWith(const planner::Plan &plan, const ModelGraph &g,
                       const std::string &backend,
                       const std::set<int> &replicatedParams,
                       const std::set<int> &wholeParams,
                       std::map<int, int> &rowReads) {
  ModelLayout L;
  L.tp = plan.knobs.tp;
  const int tp = L.tp;
  std::vector<int> stage = opStages(plan, g, L.numStages);
  std::vector<std::string> sig = opSignatures(plan, g);
  L.tensors.assign(g.tensors.size(), TpLayout{});
  L.ops.resize(g.ops.size());

  auto splittableParam = [&](int t) {
    return g.tensors[size_t(t)].role == TensorRole::Parameter &&
           !replicatedParams.count(t);
  };
  auto divisible = [&](int64_t n) { return tp > 1 && n % tp == 0; };
  // A vocabulary tp does not divide (GPT-2's 50257 rows) splits in parts of
  // ceil(V / tp) rows, the last shorter and stored padded with zero rows
  // (Megatron pads its vocabulary alike, but there the padding joins the
  // softmax; here it stays outside: the same function as one device). Every
  // rank keeps at least one real row.
  auto paddable = [&](int64_t n) {
    return planner::unevenVocabSplitRuns(n, tp);
  };
  // A graph model's linears and loss read node rows whose split the graph
  // kernels and the held-out labels do not follow: those stay as before.
  bool graph = false;
  for (const auto &t : g.tensors)
    graph = graph || t.sparse;
  const planner::GraphUses uses(g);
  const std::vector<std::vector<size_t>> &consumers = uses.readers;
  // A padded vocabulary in an lm_head: its table read by rows (a transposed
  // weight [V, C], no bias) and its logits read only by cross-entropies on
  // the same stage, which skip the padding columns; nothing else would know
  // to.
  auto paddedVocab = [&](size_t i, int64_t O) {
    if (!paddable(O) || !planner::logitsOnlyToLoss(g, uses, g.ops[i]))
      return false;
    const auto &cs = consumers[size_t(g.ops[i].results[0])];
    return std::all_of(cs.begin(), cs.end(),
                       [&](size_t c) { return stage[c] == stage[i]; });
  };
  // A column linear whose sole consumer is a packed attention of equal q, k, v
  // segments planned by heads: split per segment, so each rank's qkv holds
  // whole heads (otherwise a contiguous split gives rank 0 all of q).
  auto packedHeads = [&](const OpDef &op) {
    const auto &cs = consumers[size_t(op.results[0])];
    if (cs.size() != 1)
      return false;
    const OpDef &att = g.ops[cs[0]];
    const int64_t H = intAttr(att, "num_heads", 1),
                  G = intAttr(att, "num_kv_heads", H);
    return att.kind == "attention" && att.operands.size() == 1 &&
           sig[cs[0]] == "heads" && H == G && divisible(H);
  };

  // The rows an op the plan splits by `sequence` (dimension 1) or `batch`
  // (dimension 0) runs on, when that dimension of `shape` (the result's, by
  // default) divides and is not the last (a norm's features, an elementwise
  // op's hidden split): B otherwise.
  auto rowSplitOf = [&](size_t i, const std::vector<int64_t> &shape) {
    const int d = sig[i] == "sequence" ? 1 : sig[i] == "batch" ? 0 : -1;
    if (d < 0 || d + 1 >= int(shape.size()) || !divisible(shape[size_t(d)]))
      return TpLayout{};
    return TpLayout{d};
  };
  auto rowSplit = [&](size_t i) {
    return rowSplitOf(i, g.tensors[size_t(g.ops[i].results[0])].shape);
  };
  // An op on split rows reading a parameter whole: its gradient there is the
  // rows' part (tpPartialGrads), so every reader of that parameter must run
  // on split rows (chooseLayout keeps the others' parameters out of this).
  auto wholeParamsOk = [&](const OpDef &op, size_t from) {
    for (size_t k = from; k < op.operands.size(); ++k) {
      const int t = op.operands[k];
      if (g.tensors[size_t(t)].role != TensorRole::Parameter ||
          wholeParams.count(t))
        return false;
    }
    return true;
  };
  auto readWhole = [&](const OpDef &op, size_t from) {
    for (size_t k = from; k < op.operands.size(); ++k) {
      ++rowReads[op.operands[k]];
      L.tpPartialGrads.insert(op.operands[k]);
    }
  };
  // Every operand and the result on the same rows (params read whole from
  // operand `from` on).
  auto onRows = [&](OpPlan &p, const OpDef &op, TpLayout rows, size_t from) {
    p.mode = OpMode::Local;
    for (size_t k = 0; k < from; ++k)
      p.operands[k] = rows;
    p.result = rows;
    readWhole(op, from);
  };

  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpDef &op = g.ops[i];
    if (!kSupported.count(op.kind))
      throw UserError("codegen: op " + op.name + " (" + op.kind +
                      ") is not supported by the " + backend + " backend yet");
    OpPlan &p = L.ops[i];
    p.stage = stage[i];
    p.signature = sig[i];
    p.operands.assign(op.operands.size(), TpLayout{});
    auto lay = [&](size_t k) { return L.tensors[size_t(op.operands[k])]; };
    auto shape = [&](size_t k) {
      return g.tensors[size_t(op.operands[k])].shape;
    };
    const auto &out = g.tensors[size_t(op.results[0])].shape;
    const int last = int(out.size()) - 1;

    if (tp > 1 && op.kind == "linear") {
      const bool tw = boolAttr(op, "transpose_weight", false);
      const int w = op.operands[1];
      const bool hasBias = op.operands.size() > 2;
      const auto &ws = g.tensors[size_t(w)].shape;
      const int64_t O = tw ? ws[0] : ws[1], K = tw ? ws[1] : ws[0];
      const bool paramsOk =
          splittableParam(w) && (!hasBias || splittableParam(op.operands[2]));
      if ((sig[i] == "column" || sig[i] == "vocab") && paramsOk &&
          (divisible(O) || paddedVocab(i, O))) {
        const int seg = sig[i] == "column" && packedHeads(op) ? 3 : 1;
        p.mode = OpMode::Column;
        p.operands[1] = TpLayout{tw ? 0 : 1, seg};
        if (hasBias)
          p.operands[2] = TpLayout{0, seg};
        p.result = TpLayout{last, seg};
      } else if (sig[i] == "row" && paramsOk && divisible(K)) {
        p.mode = OpMode::Row;
        p.operands[0] = TpLayout{int(shape(0).size()) - 1};
        p.operands[1] = TpLayout{tw ? 1 : 0};
      } else if (rowSplit(i).split() && !graph && wholeParamsOk(op, 1)) {
        // Each rank's rows through the whole weight (the tp axis as data
        // parallelism, or DeepSpeed-Ulysses' sequence split).
        onRows(p, op, rowSplit(i), 1);
      }
    } else if (tp > 1 && op.kind == "embedding") {
      const int table = op.operands[1];
      const int64_t V = g.tensors[size_t(table)].shape[0];
      if (sig[i] == "vocab" && splittableParam(table) &&
          (divisible(V) || paddable(V))) {
        p.mode = OpMode::VocabTable;
        p.operands[1] = TpLayout{0};
      } else if (sig[i] == "hidden" && splittableParam(table) &&
                 divisible(out[size_t(last)])) {
        // Each rank's hidden columns of every row: the table S(1), no sum.
        p.mode = OpMode::Local;
        p.operands[1] = TpLayout{1};
        p.result = TpLayout{last};
      } else if (rowSplit(i).split() && wholeParamsOk(op, 1)) {
        onRows(p, op, rowSplit(i), 1); // the ids' rows, the table whole
      }
    } else if (tp > 1 && op.kind == "positional") {
      // hidden: x's and the table's columns of this rank, added locally.
      const int table = op.operands[1];
      if (sig[i] == "hidden" && splittableParam(table) &&
          divisible(out[size_t(last)])) {
        p.mode = OpMode::Local;
        p.operands[0] = TpLayout{last};
        p.operands[1] = TpLayout{1};
        p.result = TpLayout{last};
      } else if (rowSplit(i).split() && wholeParamsOk(op, 1)) {
        onRows(p, op, rowSplit(i),
               1); // a sequence split from position rank*T/tp
      }
    } else if (tp > 1 && op.kind == "attention" && op.operands.size() == 3) {
      const int64_t H = intAttr(op, "num_heads", 1),
                    G = intAttr(op, "num_kv_heads", H);
      bool allSplit = true;
      for (size_t k = 0; k < 3; ++k)
        allSplit = allSplit && lay(k).dim == int(shape(k).size()) - 1;
      // By heads when q, k, v arrive split so, or when the plan says heads
      // (converted to it: DeepSpeed-Ulysses' attention between sequence-split
      // projections).
      if ((allSplit || sig[i] == "heads") && divisible(H) && divisible(G)) {
        p.mode = OpMode::HeadSplit;
        for (size_t k = 0; k < 3; ++k)
          p.operands[k] = TpLayout{int(shape(k).size()) - 1};
        p.result = TpLayout{last};
      } else if (sig[i] == "batch" && rowSplit(i).split()) {
        onRows(p, op, rowSplit(i), 3); // whole sequences of its batch rows
      }
    } else if (tp > 1 && op.kind == "attention") {
      // Packed qkv, split per segment by its producer (packedHeads), or
      // converted to that when the plan says heads (equal q, k, v segments).
      const int64_t H = intAttr(op, "num_heads", 1),
                    G = intAttr(op, "num_kv_heads", H);
      if ((lay(0).dim == last && lay(0).segments == 3) ||
          (sig[i] == "heads" && H == G && divisible(H))) {
        p.mode = OpMode::HeadSplit;
        p.operands[0] = TpLayout{last, 3};
        p.result = TpLayout{last};
      } else if (sig[i] == "batch" && rowSplit(i).split()) {
        onRows(p, op, rowSplit(i), 1);
      }
    } else if (tp > 1 && op.kind == "rotary") {
      const int64_t H = intAttr(op, "num_heads", 1);
      if ((lay(0).dim == last || sig[i] == "heads") && divisible(H)) {
        p.mode = OpMode::HeadSplit;
        p.operands[0] = TpLayout{last};
        p.result = TpLayout{last};
      } else if (rowSplit(i).split()) {
        onRows(p, op, rowSplit(i),
               1); // a sequence split from position rank*T/tp
      }
    } else if (tp > 1 && (op.kind == "layernorm" || op.kind == "rmsnorm")) {
      // Megatron's sequence parallelism (or a batch split): the norm of each
      // rank's rows; the scale and shift stay whole, their gradients partial
      // over tp (tpPartialGrads). Only for parameters this op alone reads.
      if (rowSplit(i).split() && wholeParamsOk(op, 1))
        onRows(p, op, rowSplit(i), 1);
    } else if (tp > 1 && kElementwise.count(op.kind)) {
      bool sameShapes = true, anyParam = false;
      for (size_t k = 0; k < op.operands.size(); ++k) {
        sameShapes = sameShapes && shape(k) == out;
        anyParam = anyParam || g.tensors[size_t(op.operands[k])].role ==
                                   TensorRole::Parameter;
      }
      // The plan's rows split (Megatron's sequence-parallel residual adds),
      // else the split an operand arrives in.
      TpLayout chosen = anyParam ? TpLayout{} : rowSplit(i);
      for (size_t k = 0; k < op.operands.size() && !chosen.split(); ++k)
        if (lay(k).split() && shape(k) == out) {
          chosen = lay(k);
          break;
        }
      if (chosen.split() && sameShapes) {
        p.mode = OpMode::Local;
        for (auto &o : p.operands)
          o = chosen;
        p.result = chosen;
      }
    } else if (tp > 1 && op.kind == "bias_add") {
      if (lay(0).dim == last && splittableParam(op.operands[1])) {
        p.mode = OpMode::Local;
        p.operands[0] = lay(0);
        p.operands[1] = TpLayout{0};
        p.result = lay(0);
      } else if (rowSplit(i).split() && !graph && wholeParamsOk(op, 1)) {
        onRows(p, op, rowSplit(i), 1);
      }
    } else if (tp > 1 && op.kind == "spmm") {
      if (lay(1).dim == 1) {
        p.mode = OpMode::Local;
        p.operands[1] = lay(1);
        p.result = lay(1);
      }
    } else if (tp > 1 && op.kind == "sddmm") {
      // x and y split on K: each rank's partial dot products, all-reduced.
      if (lay(1).dim == 1 && lay(2).dim == 1) {
        p.mode = OpMode::Local;
        p.operands[1] = lay(1);
        p.operands[2] = lay(2);
      }
    } else if (tp > 1 &&
               (op.kind == "cross_entropy" || op.kind == "squared_error")) {
      if (op.kind == "cross_entropy" &&
          lay(0).dim == int(shape(0).size()) - 1) {
        p.mode = OpMode::VocabLoss;
        p.operands[0] = lay(0);
      } else if (const TpLayout rows = rowSplitOf(i, shape(0));
                 rows.split() && !graph) {
        // Each rank's rows' losses: the sum partial over tp (every rank
        // reports its part), the logits' gradient scaled by the global count.
        p.mode = OpMode::Local;
        p.operands[0] = p.operands[1] = rows;
      }
    } else if (tp > 1 && (op.kind == "conv2d" || op.kind == "pool2d" ||
                          op.kind == "flatten")) {
      // A batch split: each rank's samples (a flatten keeping the batch
      // dimension first), a convolution's weights whole.
      const bool keepsBatch =
          op.kind != "flatten" || shape(0).at(0) == out.at(0);
      if (sig[i] == "batch" && keepsBatch && rowSplit(i).split() &&
          wholeParamsOk(op, 1))
        onRows(p, op, rowSplit(i), 1);
    }
    // Parameters take the layout their consumers read them in (the same for
    // all of them: chooseLayout).
    for (size_t k = 0; k < op.operands.size(); ++k)
      if (g.tensors[size_t(op.operands[k])].role == TensorRole::Parameter)
        L.tensors[size_t(op.operands[k])] = p.operands[k];
    for (int r : op.results)
      L.tensors[size_t(r)] = p.result;
  }
  // A row-parallel linear whose every reader takes its result on split rows
  // (Megatron's sequence parallelism: the residual add after the attention
  // or MLP projection) reduce-scatters its partial sum into those rows instead
  // of all-reducing it and slicing; its bias is then added to the rows and
  // its gradient is partial over tp.
  for (size_t i = 0; i < g.ops.size(); ++i) {
    OpPlan &p = L.ops[i];
    const OpDef &op = g.ops[i];
    const int r = op.results[0];
    if (p.mode != OpMode::Row || r == g.loss || consumers[size_t(r)].empty())
      continue;
    TpLayout rows;
    bool ok = true;
    for (size_t c : consumers[size_t(r)])
      for (size_t k = 0; k < g.ops[c].operands.size(); ++k)
        if (g.ops[c].operands[k] == r) {
          const TpLayout l = L.ops[c].operands[k];
          ok = ok && l.split() && l.segments == 1 &&
               l.dim + 1 < int(g.tensors[size_t(r)].shape.size()) &&
               (!rows.split() || l == rows) && L.ops[c].stage == p.stage;
          rows = l;
        }
    if (!ok || !rows.split() ||
        !divisible(g.tensors[size_t(r)].shape[size_t(rows.dim)]) ||
        (op.operands.size() > 2 && !wholeParamsOk(op, 2)))
      continue;
    p.result = rows;
    L.tensors[size_t(r)] = rows;
    readWhole(op, 2);
  }
  return L;
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
