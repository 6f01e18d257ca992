//===- ModelGraph.cpp -----------------------------------------------------===//
#include "ir/import/ModelGraph.h"

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

int64_t ModelGraph::forwardFlopsPerSample() const {
  int64_t total = 0;
  for (const OpDef &op : ops) {
    std::vector<ops::ValueType> in, out;
    for (int t : op.operands)
      in.push_back({tensors[t].shape, tensors[t].dtype});
    for (int t : op.results)
      out.push_back({tensors[t].shape, tensors[t].dtype});
    int64_t f = ops::forwardFlops(op.kind, in, out, op.attrs);
    total = __builtin_add_overflow(total, f, &total) ? INT64_MAX : total;
  }
  return batch > 0 ? total / batch : total;
}

} // namespace autoddl
