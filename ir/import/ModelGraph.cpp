//===- ModelGraph.cpp -----------------------------------------------------===//
#include "ir/import/ModelGraph.h"

#include <algorithm>

namespace autoddl {

int64_t ModelGraph::parameterCount() const {
  // A tied weight is one tensor, so summing tensors counts it once.
  int64_t n = 0;
  for (const TensorDef &t : tensors) {
    if (t.role != TensorRole::Parameter)
      continue;
    int64_t elems = 1;
    for (int64_t d : t.shape)
      elems = __builtin_mul_overflow(elems, d, &elems) ? INT64_MAX : elems;
    n = __builtin_add_overflow(n, elems, &n) ? INT64_MAX
                                             : n; // importers refuse this
  }
  return n;
}

std::vector<ops::ValueType>
ModelGraph::valueTypes(const std::vector<int> &ts) const {
  std::vector<ops::ValueType> types;
  for (int t : ts)
    types.push_back({tensors[t].shape, tensors[t].dtype});
  return types;
}

int64_t ModelGraph::opForwardFlops(const OpDef &op) const {
  return ops::forwardFlops(op.kind, valueTypes(op.operands),
                           valueTypes(op.results), op.attrs);
}

int64_t ModelGraph::forwardFlopsPerSample() const {
  int64_t total = 0;
  for (const OpDef &op : ops) {
    const int64_t f = opForwardFlops(op);
    total = __builtin_add_overflow(total, f, &total) ? INT64_MAX : total;
  }
  return batch > 0 ? total / batch : total;
}

int ModelGraph::sparsePattern(int t) const {
  if (t < 0 || size_t(t) >= tensors.size())
    return -1;
  if (tensors[size_t(t)].role == TensorRole::Input)
    return tensors[size_t(t)].sparse ? t : -1;
  for (const OpDef &op : ops)
    if (!op.results.empty() && op.results[0] == t)
      return (op.kind == "sddmm" || op.kind == "edge_softmax")
                 ? sparsePattern(op.operands[0])
                 : -1;
  return -1;
}

double ModelGraph::storedElements(int t) const {
  const int p = sparsePattern(t);
  if (p >= 0)
    return static_cast<double>(tensors[size_t(p)].nnz);
  double n = 1;
  for (int64_t d : tensors[size_t(t)].shape)
    n *= static_cast<double>(d);
  return n;
}

int64_t ModelGraph::graphNodes() const {
  for (const TensorDef &t : tensors)
    if (t.role == TensorRole::Input && t.sparse && !t.shape.empty())
      return t.shape[0];
  return 0;
}

bool ModelGraph::nodeRows(int t) const {
  const TensorDef &d = tensors[size_t(t)];
  const int64_t n = graphNodes();
  return n > 0 && d.role != TensorRole::Parameter &&
         d.role != TensorRole::Constant && !d.shape.empty() && d.shape[0] == n;
}

int64_t ModelGraph::vocabularyRows() const {
  for (const OpDef &op : ops)
    if (op.kind == "embedding" && op.operands.size() > 1)
      if (const auto &sh = tensors[size_t(op.operands[1])].shape; !sh.empty())
        return sh.front();
  return 0;
}

std::vector<std::vector<size_t>> tensorReaders(const ModelGraph &g) {
  std::vector<std::vector<size_t>> readers(g.tensors.size());
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (int t : g.ops[i].operands)
      readers[size_t(t)].push_back(i);
  return readers;
}

bool logitsOnlyToLoss(const ModelGraph &g,
                      const std::vector<std::vector<size_t>> &readers,
                      const OpDef &op) {
  if (op.kind != "linear" || op.operands.size() != 2 ||
      !attrOf(op, ops::attr::kTransposeWeight))
    return false;
  const int logits = op.results.front();
  const std::vector<size_t> &rs = readers[size_t(logits)];
  return !rs.empty() && std::all_of(rs.begin(), rs.end(), [&](size_t c) {
    return g.ops[c].kind == "cross_entropy" && g.ops[c].operands[0] == logits;
  });
}

} // namespace autoddl
