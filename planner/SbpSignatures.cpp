//===- SbpSignatures.cpp - valid 1-D SBP signatures per op on the tp axis ===//
//
// The candidate labels of each coordinate (docs/planner.md "signatures"), after
// OneFlow's per-op GetSbp lists (reference: autoddl.md §2.3): every op can run
// replicated (all B) or split over the batch dimension (data parallel on the tp
// axis); sequence-wise ops can split the sequence (Megatron sequence
// parallelism); linear has Megatron's column (B x S(out) -> S) and row (S(in) x
// S(in) -> P) splits; attention and rotary split heads; embedding splits the
// vocabulary (-> P) or the hidden dim; cross entropy runs vocabulary-parallel.
// A split needs the dimension of at least tp elements (uneven splits pad; heads
// must divide).
//
// Backward transposes (the gradient layout each op produces for its operands):
// S stays S; a B operand of an op whose work is divided gets a P gradient (each
// rank holds a partial sum, Megatron's "f" operator); a B operand of a
// replicated op gets a B gradient; the gradient of a P operand is B.
//
//===----------------------------------------------------------------------===//
#include "planner/SearchGraph.h"

#include "ir/ops/OpSemantics.h"

#include <string_view>

namespace autoddl::planner {

namespace {

using cost::Sbp;

int64_t attrInt(const OpDef &op, const char *name, int64_t dflt) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end())
    return dflt;
  if (auto *v = std::get_if<int64_t>(&it->second))
    return *v;
  return dflt;
}

bool attrBool(const OpDef &op, const char *name, bool dflt) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end())
    return dflt;
  if (auto *v = std::get_if<bool>(&it->second))
    return *v;
  return dflt;
}

struct Ctx {
  const SearchGraph &sg;
  const ModelGraph &g;
  int n;
  int64_t b;
  bool dataSplits; // batch and sequence splits on the tp axis allowed
  /// Per tensor, the ops reading it (a tied table is read by two).
  std::vector<int> uses;

  /// Per tensor, the cross-entropies reading it as their logits (operand 0).
  std::vector<int> lossReads;

  /// --tp-mode tensor: only what the generated programs run (codegen/Layout):
  /// a parameter split into exactly equal parts, or a vocabulary's rows in
  /// padded parts (`padded`: the op reads them where the programs can keep
  /// the padding out of the loss). A parameter read by several ops (a tied
  /// table) splits only when all its readers split it alike, which pricing
  /// enforces in this mode (Pricing.cpp, edgeTerms).
  bool runnableSplit(int param, int dim, bool padded = false) const {
    if (dataSplits)
      return true;
    const int64_t size = sg.shapeAt(param, b)[size_t(dim)];
    // Parts of ceil(size / n) rows, every rank keeping at least one.
    return size % n == 0 ||
           (padded && dim == 0 && size > (size + n - 1) / n * (n - 1));
  }
  /// Whether the generated programs run this linear's padded vocabulary
  /// split: a table read by rows (transposed weight, no bias) whose logits
  /// only cross-entropies read (Layout.cpp paddedVocab).
  bool paddedLmHead(const OpDef &op) const {
    const int r = op.results.front();
    return attrBool(op, "transpose_weight", false) && op.operands.size() == 2 &&
           uses[size_t(r)] > 0 && lossReads[size_t(r)] == uses[size_t(r)];
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
  for (const Sbp &x : s.operands) {
    if (x.kind == Sbp::Split)
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
         k == "silu" || k == "swiglu";
}

bool takesSequenceSplit(std::string_view k) {
  return isElementwise(k) || k == "layernorm" || k == "rmsnorm" ||
         k == "bias_add" || k == "positional" || k == "linear" ||
         k == "embedding" || k == "cross_entropy" || k == "rotary" ||
         k == "softmax";
}

std::vector<Signature> signaturesOf(const Ctx &c, const OpDef &op) {
  std::vector<Signature> list;
  const std::string &k = op.kind;
  std::vector<Sbp> allB(op.operands.size(), Sbp::broadcast());
  list.push_back(finish(c, op, "replicate", allB, Sbp::broadcast()));
  if (c.n == 1)
    return list;

  std::vector<Sbp> ops;
  Sbp res;
  if (c.dataSplits && splitAll(c, op, 0, true, ops, res))
    addIfNew(list, finish(c, op, "batch", ops, res));
  if (c.dataSplits && takesSequenceSplit(k) &&
      splitAll(c, op, 1, false, ops, res)) {
    bool ok = !(k == "softmax" && attrInt(op, "axis", -1) == 1);
    if (ok)
      addIfNew(list, finish(c, op, "sequence", ops, res));
  }

  const int r = op.results.front();
  const int last = c.rank(r) - 1;
  if (isElementwise(k) && last >= 1) {
    std::vector<Sbp> s(op.operands.size(), Sbp::split(last));
    bool ok = c.divisible(r, last);
    for (int t : op.operands)
      ok &= c.rank(t) == last + 1;
    if (ok)
      addIfNew(list, finish(c, op, "hidden", s, Sbp::split(last)));
    if (k == "add" && c.dataSplits) // partial sums add up to a partial sum
      addIfNew(list,
               finish(c, op, "partial",
                      std::vector<Sbp>(op.operands.size(), Sbp::partial()),
                      Sbp::partial()));
  } else if (k == "bias_add" && c.divisible(r, last)) {
    addIfNew(list, finish(c, op, "hidden", {Sbp::split(last), Sbp::split(0)},
                          Sbp::split(last)));
  } else if (k == "linear") {
    const int x = op.operands[0], w = op.operands[1];
    const bool transposed = attrBool(op, "transpose_weight", false);
    const int wOut = transposed ? 0 : 1, wIn = transposed ? 1 : 0;
    const bool bias = op.operands.size() > 2;
    const int xl = c.rank(x) - 1;
    const bool paramsRun = !bias || c.runnableSplit(op.operands[2], 0);
    if (c.divisible(w, wOut) && c.divisible(r, last) &&
        c.runnableSplit(w, wOut, c.paddedLmHead(op)) && paramsRun) {
      std::vector<Sbp> s = {Sbp::broadcast(), Sbp::split(wOut)};
      if (bias)
        s.push_back(Sbp::split(0));
      addIfNew(list, finish(c, op, "column", s, Sbp::split(last)));
    }
    if (c.divisible(w, wIn) && c.divisible(x, xl) && c.runnableSplit(w, wIn) &&
        (!bias || c.dataSplits || c.uses[size_t(op.operands[2])] == 1)) {
      std::vector<Sbp> s = {Sbp::split(xl), Sbp::split(wIn)};
      if (bias)
        s.push_back(Sbp::broadcast());
      Signature sig = finish(c, op, "row", s, Sbp::partial());
      if (bias) // the bias is added once; its gradient is the full sum of dY
                // (B)
        sig.operandGrads[2] = Sbp::broadcast();
      addIfNew(list, sig);
    }
  } else if (k == "attention" || k == "rotary") {
    const int64_t heads = attrInt(op, "num_heads", 1);
    const int64_t kv = attrInt(op, "num_kv_heads", heads);
    bool ok = heads % c.n == 0 && kv % c.n == 0 && c.divisible(r, last);
    // Programs split a packed qkv per q/k/v segment: equal segments only.
    if (!c.dataSplits && k == "attention" && op.operands.size() == 1)
      ok &= heads == kv;
    for (int t : op.operands)
      ok &= c.divisible(t, c.rank(t) - 1);
    if (ok) {
      Signature s =
          finish(c, op, "heads",
                 std::vector<Sbp>(op.operands.size(), Sbp::split(last)),
                 Sbp::split(last));
      s.splitHeads = true;
      addIfNew(list, s);
    }
  } else if (k == "embedding") {
    const int table = op.operands[1];
    if (c.divisible(table, 0) && c.runnableSplit(table, 0, true))
      addIfNew(list, finish(c, op, "vocab", {Sbp::broadcast(), Sbp::split(0)},
                            Sbp::partial()));
    if (c.divisible(table, 1) && c.dataSplits) // programs run vocab only
      addIfNew(list, finish(c, op, "hidden", {Sbp::broadcast(), Sbp::split(1)},
                            Sbp::split(last)));
  } else if (k == "positional") {
    if (c.divisible(r, last) && c.divisible(op.operands[1], 1) && c.dataSplits)
      addIfNew(list, finish(c, op, "hidden", {Sbp::split(last), Sbp::split(1)},
                            Sbp::split(last)));
  } else if (k == "cross_entropy") {
    const int logits = op.operands[0];
    const int ll = c.rank(logits) - 1;
    if (c.divisible(logits, ll)) {
      // Megatron's vocabulary-parallel cross entropy: all-reduces of the row
      // max, the sum of exponentials and the target logit, fp32, one value per
      // row.
      Signature s = finish(c, op, "vocab", {Sbp::split(ll), Sbp::broadcast()},
                           Sbp::broadcast());
      double rows = 1;
      for (int d = 0; d < ll; ++d)
        rows *= static_cast<double>(c.sg.shapeAt(logits, c.b)[d]);
      s.inOpAllReduceBytes = 3 * rows * 4;
      addIfNew(list, s);
    }
  }
  return list;
}

} // namespace

void enumerateSignatures(SearchGraph &sg, int tp, int64_t b, bool dataSplits) {
  Ctx c{sg, *sg.graph, tp, b, dataSplits, {}, {}};
  c.uses.assign(sg.graph->tensors.size(), 0);
  c.lossReads.assign(sg.graph->tensors.size(), 0);
  for (const OpDef &op : sg.graph->ops)
    for (size_t k = 0; k < op.operands.size(); ++k) {
      ++c.uses[size_t(op.operands[k])];
      if (op.kind == "cross_entropy" && k == 0)
        ++c.lossReads[size_t(op.operands[k])];
    }
  for (CollapsedOp &op : sg.ops)
    op.sigs = signaturesOf(c, sg.graph->ops[op.op]);
}

} // namespace autoddl::planner
