//===- SbpSignatures.cpp - the tp axis's candidate signatures per op ------===//
//
// The candidate labels of each coordinate (docs/planner.md "signatures"): rows
// of the one table of SBP rules, ir/ops/SbpRules.h, which the sbp dialect's
// op interface reads too. This file holds only the planner's choice among
// them: every op can run replicated (all B) or split over the batch dimension
// (data parallel on the tp axis); sequence-wise ops can split the sequence
// (Megatron sequence parallelism); linear has Megatron's column and row
// splits; attention and rotary split heads; embedding splits the vocabulary
// (-> P) or the hidden dim; cross entropy runs vocabulary-parallel. A split
// needs the dimension of at least tp elements (uneven splits pad; heads must
// divide); --tp-mode tensor keeps what the generated programs run
// (planner/ProgramDecisions.h).
//
// Backward transposes (the gradient layout each op produces for its operands):
// S stays S; a B operand of an op whose work is divided gets a P gradient (each
// rank holds a partial sum, Megatron's "f" operator); a B operand of a
// replicated op gets a B gradient; the gradient of a P operand is B.
//
//===----------------------------------------------------------------------===//
#include "planner/SearchGraph.h"

#include "planner/ProgramDecisions.h"

#include "ir/ops/SbpRules.h"

#include <string_view>

namespace autoddl::planner {

namespace {

using cost::Sbp;

Sbp toSbp(const ops::AxisLayout &l) {
  if (l.isSplit())
    return Sbp::split(int(l.dim));
  return l.isPartial() ? Sbp::partial() : Sbp::broadcast();
}

struct Ctx {
  const SearchGraph &sg;
  const ModelGraph &g;
  int n;
  int64_t b;
  bool dataSplits; // batch and sequence splits on the tp axis allowed
  /// Per tensor, the ops making and reading it (a tied table is read by two).
  const GraphUses &uses;

  /// --tp-mode tensor: only what the generated programs run (codegen/Layout,
  /// by ProgramDecisions.h): a parameter split into exactly equal parts, or a
  /// vocabulary's rows in padded parts (`padded`: the op reads them where the
  /// programs can keep the padding out of the loss). A parameter read by
  /// several ops (a tied table) splits only when all its readers split it
  /// alike, which pricing enforces in this mode (Pricing.cpp, edgeTerms).
  bool runnableSplit(int param, int dim, bool padded = false) const {
    if (dataSplits)
      return true;
    return splitRuns(sg.shapeAt(param, b)[size_t(dim)], n, padded && dim == 0);
  }
  /// Whether the generated programs run this linear's padded vocabulary
  /// split: a table read by rows whose logits only the loss reads.
  bool paddedLmHead(const OpDef &op) const {
    return logitsOnlyToLoss(g, uses, op);
  }
  bool isParam(int t) const {
    return g.tensors[t].role == TensorRole::Parameter;
  }
  bool isData(int t) const { return g.tensors[t].role == TensorRole::Input; }
  int rank(int t) const { return static_cast<int>(sg.shape1(t).size()); }
  /// A dimension can be split when every rank gets at least one element; an
  /// uneven split pads the last shards (Megatron pads the vocabulary the same
  /// way), and local shapes round up.
  bool divisible(int t, int dim) const {
    if (dim < 0 || dim >= rank(t))
      return false;
    return sg.shapeAt(t, b)[dim] >= n;
  }
};

/// Completes a signature: distributed flag and default operand gradients.
Signature finish(const Ctx &c, const OpDef &op, std::string name,
                 std::vector<Sbp> operands, Sbp result) {
  Signature s;
  s.name = std::move(name);
  s.operands = std::move(operands);
  s.result = result;
  s.distributed = result.kind != Sbp::Broadcast;
  for (const Sbp &x : s.operands)
    s.distributed |= x.kind != Sbp::Broadcast;
  for (size_t k = 0; k < s.operands.size(); ++k) {
    Sbp &x = s.operands[k];
    if (c.isParam(op.operands[k]) && x.kind == Sbp::Partial) {
      // A parameter read as a partial value (a bias joining a row-parallel
      // linear's partial result) is stored whole and added on one rank, a
      // local B -> P: the planner reads it B; its gradient, the full sum of
      // dY, is whole (B).
      x = Sbp::broadcast();
      s.operandGrads.push_back(Sbp::broadcast());
    } else if (x.kind == Sbp::Split)
      s.operandGrads.push_back(x);
    else if (x.kind == Sbp::Partial)
      s.operandGrads.push_back(Sbp::broadcast());
    else
      s.operandGrads.push_back(s.distributed ? Sbp::partial()
                                             : Sbp::broadcast());
  }
  return s;
}

void addIfNew(std::vector<Signature> &list, Signature s) {
  for (const Signature &x : list)
    if (x.operands == s.operands && x.result == s.result)
      return;
  list.push_back(std::move(s));
}

/// Every non-parameter operand and the result split at `dimOf(t)`; parameters
/// B.
bool splitAll(const Ctx &c, const OpDef &op, int64_t dimFromEnd, bool useBatch,
              std::vector<Sbp> &operands, Sbp &result) {
  operands.clear();
  bool any = false;
  for (int t : op.operands) {
    if (c.isParam(t)) {
      operands.push_back(Sbp::broadcast());
      continue;
    }
    int d = useBatch ? c.sg.batchDim(t) : static_cast<int>(dimFromEnd);
    if (useBatch && d < 0)
      return false;
    if (!useBatch && (c.rank(t) < 2 || d == c.sg.batchDim(t)))
      return false;
    if (!c.divisible(t, d) || (useBatch && c.sg.shapeAt(t, c.b)[d] % c.n))
      return false; // samples are not padded: the batch must divide
    operands.push_back(Sbp::split(d));
    any = true;
  }
  int r = op.results.front();
  int d = useBatch ? c.sg.batchDim(r) : static_cast<int>(dimFromEnd);
  if (c.rank(r) == 0) {
    result = Sbp::partial(); // a scalar (the loss) of split inputs: partial sum
    return any;
  }
  if (d < 0 || !c.divisible(r, d) || (!useBatch && d == c.sg.batchDim(r)))
    return false;
  result = Sbp::split(d);
  return any;
}

bool isElementwise(std::string_view k) {
  return k == "add" || k == "mul" || k == "gelu" || k == "relu" ||
         k == "silu" || k == "elu" || k == "swiglu";
}

bool takesSequenceSplit(std::string_view k) {
  return isElementwise(k) || k == "layernorm" || k == "rmsnorm" ||
         k == "bias_add" || k == "positional" || k == "linear" ||
         k == "embedding" || k == "cross_entropy" || k == "rotary" ||
         k == "softmax";
}

/// The table's rows for `op` (ir/ops/SbpRules.h) at micro-batch b.
std::vector<ops::SbpRule> rulesOf(const Ctx &c, const OpDef &op) {
  std::vector<ops::Shape> shapes;
  for (int t : op.operands)
    shapes.push_back(c.sg.shapeAt(t, c.b));
  return ops::sbpRules(op.kind, shapes, ops::withDefaults(op.kind, op.attrs));
}

/// The first row of the table labelled `label`, or nullptr.
const ops::SbpRule *labelled(const std::vector<ops::SbpRule> &rules,
                             ops::SbpRuleLabel label) {
  for (const ops::SbpRule &r : rules)
    if (r.label == label)
      return &r;
  return nullptr;
}

/// Whether the table lists (operands) -> result.
bool listed(const std::vector<ops::SbpRule> &rules,
            const std::vector<Sbp> &operands, const Sbp &result) {
  for (const ops::SbpRule &r : rules) {
    bool same =
        r.operands.size() == operands.size() && toSbp(r.result) == result;
    for (size_t k = 0; same && k < operands.size(); ++k)
      same = toSbp(r.operands[k]) == operands[k];
    if (same)
      return true;
  }
  return false;
}

/// Completes a table row as `finish` does.
Signature finishRule(const Ctx &c, const OpDef &op, std::string name,
                     const ops::SbpRule &rule) {
  std::vector<Sbp> operands;
  for (const ops::AxisLayout &l : rule.operands)
    operands.push_back(toSbp(l));
  return finish(c, op, std::move(name), std::move(operands),
                toSbp(rule.result));
}

/// The candidates the search weighs for `op`: the table's rows it offers (by
/// label, or, for the batch and sequence splits, the row of the dims that
/// scale with the batch and the sequence), on the shapes at hand and, under
/// --tp-mode tensor, only those the generated programs run.
std::vector<Signature> signaturesOf(const Ctx &c, const OpDef &op) {
  using L = ops::SbpRuleLabel;
  std::vector<Signature> list;
  const std::string &k = op.kind;
  std::vector<Sbp> allB(op.operands.size(), Sbp::broadcast());
  list.push_back(finish(c, op, "replicate", allB, Sbp::broadcast()));
  if (c.n == 1)
    return list;
  const std::vector<ops::SbpRule> rules = rulesOf(c, op);

  std::vector<Sbp> ops;
  Sbp res;
  if (c.dataSplits && splitAll(c, op, 0, true, ops, res) &&
      listed(rules, ops, res))
    addIfNew(list, finish(c, op, "batch", ops, res));
  if (c.dataSplits && takesSequenceSplit(k) &&
      splitAll(c, op, 1, false, ops, res) && listed(rules, ops, res))
    addIfNew(list, finish(c, op, "sequence", ops, res));

  const int r = op.results.front();
  const int last = c.rank(r) - 1;
  if (isElementwise(k) && last >= 1) {
    bool ok = c.divisible(r, last);
    for (int t : op.operands)
      ok &= c.rank(t) == last + 1;
    if (const ops::SbpRule *hidden = labelled(rules, L::Hidden); hidden && ok)
      addIfNew(list, finishRule(c, op, "hidden", *hidden));
    if (const ops::SbpRule *partial = labelled(rules, L::Partial);
        partial && k == "add" && c.dataSplits)
      addIfNew(list, finishRule(c, op, "partial", *partial));
  } else if (k == "bias_add" && c.divisible(r, last)) {
    if (const ops::SbpRule *hidden = labelled(rules, L::Hidden))
      addIfNew(list, finishRule(c, op, "hidden", *hidden));
  } else if (k == "linear") {
    const int x = op.operands[0], w = op.operands[1];
    const bool bias = op.operands.size() > 2;
    const bool paramsRun = !bias || c.runnableSplit(op.operands[2], 0);
    if (const ops::SbpRule *column = labelled(rules, L::Column)) {
      const int wOut = int(column->operands[1].dim);
      if (c.divisible(w, wOut) && c.divisible(r, last) &&
          c.runnableSplit(w, wOut, c.paddedLmHead(op)) && paramsRun)
        addIfNew(list, finishRule(c, op, "column", *column));
    }
    if (const ops::SbpRule *row = labelled(rules, L::Row)) {
      const int xl = int(row->operands[0].dim), wIn = int(row->operands[1].dim);
      if (c.divisible(w, wIn) && c.divisible(x, xl) &&
          c.runnableSplit(w, wIn) &&
          (!bias || c.dataSplits ||
           c.uses.readers[size_t(op.operands[2])].size() == 1))
        addIfNew(list, finishRule(c, op, "row", *row));
    }
  } else if (k == "attention" || k == "rotary") {
    // The table lists heads of a packed qkv only for equal q/k/v segments.
    const int64_t heads = attrOr(op, ops::attr::kNumHeads, 1);
    const int64_t kv = attrOf(op, ops::attr::kNumKvHeads);
    bool ok = heads % c.n == 0 && kv % c.n == 0 && c.divisible(r, last);
    for (int t : op.operands)
      ok &= c.divisible(t, c.rank(t) - 1);
    if (const ops::SbpRule *split = labelled(rules, L::Heads); split && ok) {
      Signature s = finishRule(c, op, "heads", *split);
      s.splitHeads = true;
      addIfNew(list, s);
    }
  } else if (k == "embedding") {
    const int table = op.operands[1];
    if (const ops::SbpRule *vocab = labelled(rules, L::Vocab);
        vocab && c.divisible(table, 0) && c.runnableSplit(table, 0, true))
      addIfNew(list, finishRule(c, op, "vocab", *vocab));
    if (const ops::SbpRule *hidden = labelled(rules, L::Hidden);
        hidden && c.divisible(table, 1) && c.dataSplits) // programs: vocab
      addIfNew(list, finishRule(c, op, "hidden", *hidden));
  } else if (k == "positional") {
    if (const ops::SbpRule *hidden = labelled(rules, L::Hidden);
        hidden && c.divisible(r, last) && c.divisible(op.operands[1], 1) &&
        c.dataSplits)
      addIfNew(list, finishRule(c, op, "hidden", *hidden));
  } else if (k == "cross_entropy") {
    const ops::SbpRule *vocab = labelled(rules, L::Vocab);
    const int logits = op.operands[0];
    if (vocab && c.divisible(logits, int(vocab->operands[0].dim))) {
      // Megatron's vocabulary-parallel cross entropy: all-reduces of the row
      // max, the sum of exponentials and the target logit, fp32, one value per
      // row. After the third the loss is whole on every rank (B), where the
      // table's row leaves it partial (the target logit not all-reduced).
      Signature s = finishRule(c, op, "vocab", *vocab);
      s.result = Sbp::broadcast();
      double rows = 1;
      for (int d = 0; d < vocab->operands[0].dim; ++d)
        rows *= static_cast<double>(c.sg.shapeAt(logits, c.b)[d]);
      s.inOpAllReduceBytes = 3 * rows * 4;
      addIfNew(list, s);
    }
  }
  return list;
}

} // namespace

void enumerateSignatures(SearchGraph &sg, int tp, int64_t b, bool dataSplits) {
  const std::shared_ptr<const GraphUses> uses = usesOf(sg);
  Ctx c{sg, *sg.graph, tp, b, dataSplits, *uses};
  for (CollapsedOp &op : sg.ops)
    op.sigs = signaturesOf(c, sg.graph->ops[op.op]);
}

} // namespace autoddl::planner
