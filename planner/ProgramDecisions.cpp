//===- ProgramDecisions.cpp - what the generated programs do that costs ---===//
#include "planner/ProgramDecisions.h"

#include "ir/import/ModelGraph.h"
#include "ir/ops/SbpRules.h"

#include <algorithm>
#include <string>

namespace autoddl::planner {

GraphUses::GraphUses(const ModelGraph &g)
    : producer(g.tensors.size(), -1), readers(g.tensors.size()) {
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (int r : g.ops[i].results)
      producer[size_t(r)] = int(i);
    for (int t : g.ops[i].operands)
      readers[size_t(t)].push_back(i);
  }
}

bool stepRunsAsGraph(const ModelGraph &g) {
  // A training Dropout primitive keys its mask by the step, a host value a
  // captured graph would freeze (the importer keeps only a training Dropout
  // as a primitive).
  for (const OpDef &op : g.ops)
    if (op.kind == "primitive" &&
        attrOr(op, ops::attr::kOpType, "") == "Dropout")
      return false;
  return true;
}

bool unevenVocabSplitRuns(int64_t size, int tp) {
  return tp > 1 && size % tp != 0 && ops::paddedVocabulary(size, tp) != 0;
}

bool splitRuns(int64_t size, int tp, bool paddedRows) {
  return size % tp == 0 || (paddedRows && unevenVocabSplitRuns(size, tp));
}

bool logitsOnlyToLoss(const ModelGraph &g, const GraphUses &uses,
                      const OpDef &op) {
  return autoddl::logitsOnlyToLoss(g, uses.readers, op);
}

int64_t paddedVocabRows(int64_t localRows) {
  return (localRows + 63) / 64 * 64;
}

bool padsVocabulary(const ModelGraph &g, const GraphUses &uses,
                    const OpDef &op) {
  if (!logitsOnlyToLoss(g, uses, op))
    return false;
  const TensorDef &w = g.tensors[size_t(op.operands[1])];
  return w.role == TensorRole::Parameter && w.shape.size() == 2 &&
         w.shape.front() == g.vocabularyRows();
}

bool geluEpilogueChain(const ModelGraph &g, const GraphUses &uses, size_t gelu,
                       GeluChain &chain) {
  const OpDef &op = g.ops[gelu];
  if (op.kind != "gelu" || op.operands.size() != 1 || op.results.size() != 1 ||
      attrOf(op, ops::attr::kApproximate) == "none")
    return false;
  const int pre = op.operands[0], out = op.results[0];
  const int fc1 = uses.producer[size_t(pre)];
  if (fc1 < 0 || g.ops[size_t(fc1)].kind != "linear" ||
      uses.readers[size_t(pre)] != std::vector<size_t>{gelu} ||
      uses.readers[size_t(out)].size() != 1 || pre == g.loss || out == g.loss)
    return false;
  const size_t fc2 = uses.readers[size_t(out)][0];
  if (g.ops[fc2].kind != "linear" || g.ops[fc2].operands[0] != out)
    return false;
  chain = {size_t(fc1), fc2};
  return true;
}

int fusedBiasRelu(const ModelGraph &g, const GraphUses &uses, size_t bias) {
  const OpDef &op = g.ops[bias];
  if (op.kind != "bias_add" || op.operands.size() != 2 ||
      op.results.size() != 1 ||
      g.tensors[size_t(op.operands[1])].role != TensorRole::Parameter)
    return -1;
  const int sum = op.results[0];
  const std::vector<size_t> &readers = uses.readers[size_t(sum)];
  if (readers.size() != 1 || sum == g.loss)
    return -1;
  const OpDef &relu = g.ops[readers[0]];
  if (relu.kind != "relu" || relu.operands.size() != 1 ||
      relu.results.size() != 1 || relu.results[0] == g.loss)
    return -1;
  return int(readers[0]);
}

bool batchNormPrimitive(const OpDef &o) {
  return o.kind == "primitive" &&
         attrOr(o, ops::attr::kOpType, "") == "BatchNormalization";
}

namespace {
/// An add of two operands of its one result's shape (ResNet's residual).
bool sameShapeAdd(const ModelGraph &g, const OpDef &o) {
  if (o.kind != "add" || o.operands.size() != 2 || o.results.size() != 1)
    return false;
  const auto &out = g.tensors[size_t(o.results[0])].shape;
  return g.tensors[size_t(o.operands[0])].shape == out &&
         g.tensors[size_t(o.operands[1])].shape == out;
}
} // namespace

int fusedProducerRelu(const ModelGraph &g, const GraphUses &uses, size_t op) {
  const OpDef &o = g.ops[op];
  if (!(batchNormPrimitive(o) || sameShapeAdd(g, o)) ||
      o.results.size() != 1 || o.results[0] == g.loss)
    return -1;
  const std::vector<size_t> &readers = uses.readers[size_t(o.results[0])];
  if (readers.size() != 1)
    return -1;
  const OpDef &relu = g.ops[readers[0]];
  if (relu.kind != "relu" || relu.operands.size() != 1 ||
      relu.operands[0] != o.results[0] || relu.results.size() != 1 ||
      relu.results[0] == g.loss)
    return -1;
  return int(readers[0]);
}

int residualNormOperand(const ModelGraph &g, const GraphUses &uses,
                        size_t add) {
  const OpDef &o = g.ops[add];
  if (!sameShapeAdd(g, o) || o.operands[0] == o.operands[1] ||
      o.results[0] == g.loss)
    return -1;
  for (int k : {0, 1}) {
    const int t = o.operands[size_t(k)], norm = uses.producer[size_t(t)];
    if (norm >= 0 && batchNormPrimitive(g.ops[size_t(norm)]) &&
        g.ops[size_t(norm)].results.size() == 1 && t != g.loss &&
        uses.readers[size_t(t)] == std::vector<size_t>{add})
      return k;
  }
  return -1;
}

std::vector<size_t> residualGemmOperands(const ModelGraph &g,
                                         const GraphUses &uses, size_t add) {
  const OpDef &op = g.ops[add];
  std::vector<size_t> out;
  if (op.kind != "add" || op.operands.size() != 2 ||
      op.operands[0] == op.operands[1])
    return out;
  for (size_t k : {size_t(1), size_t(0)}) {
    const int t = op.operands[k], res = op.operands[1 - k];
    const int lin = uses.producer[size_t(t)];
    if (lin >= 0 && g.ops[size_t(lin)].kind == "linear" &&
        uses.readers[size_t(t)] == std::vector<size_t>{add} && t != g.loss &&
        g.tensors[size_t(res)].role != TensorRole::Parameter &&
        uses.producer[size_t(res)] < lin &&
        g.tensors[size_t(t)].shape == g.tensors[size_t(op.results[0])].shape)
      out.push_back(k);
  }
  return out;
}

bool fp8Linear(const OpDef &op) { return op.kind == "linear" && op.layer >= 0; }

Fp8SharedInput fp8SharedInput(const ModelGraph &g, size_t gi,
                              const std::function<bool(size_t)> &runsInFp8) {
  const int x = g.ops[gi].operands[0];
  // Whether an FP8 linear of the same x comes first that way, with only
  // linears of that x (in bf16) between: any other op ends what is held.
  auto sharedWith = [&](int step) {
    for (int j = int(gi) + step; j >= 0 && j < int(g.ops.size()); j += step) {
      const OpDef &op = g.ops[size_t(j)];
      if (op.kind != "linear" || op.operands.empty() || op.operands[0] != x)
        return false;
      if (fp8Linear(op) && runsInFp8(size_t(j)))
        return true;
    }
    return false;
  };
  Fp8SharedInput s;
  s.x = sharedWith(-1);
  s.xT = sharedWith(1);
  return s;
}

} // namespace autoddl::planner
