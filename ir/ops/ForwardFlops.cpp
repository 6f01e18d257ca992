//===- ForwardFlops.cpp - forward FLOPs of each op ------------------------===//
//
// The FLOP count of one application of each op kind, with the conventions of
// docs/ir.md ("FLOP conventions"): a multiply-add is 2 FLOPs; elementwise and
// normalisation ops count the per-element constant written beside their row
// of the table (OpKinds.cpp).
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpKinds.h"

namespace autoddl::ops {

namespace detail {

// embedding (a lookup), flatten, reshape, transpose, parameter: no
// arithmetic.
Wide noFlops(const FlopArgs &) { return 0; }

Wide linearFlops(const FlopArgs &a) {
  // 2·M·N·K, + M·N for the bias (docs/ir.md).
  const Shape &x = a.x(), &y = a.results[0].shape;
  Wide m = product(x, 0, x.size() - 1), n = y.back(), k = x.back();
  return mul(2, m, n, k) + (a.operands.size() == 3 ? mul(m, n) : 0);
}

Wide matmulFlops(const FlopArgs &a) {
  return mul(2, a.outElems(), a.x().back()); // 2·M·N·K per batch entry
}

Wide attentionFlops(const FlopArgs &a) {
  // 4·B·H·T²·D for q·kᵀ and the weighted sum of v, + 5·B·H·T² for scale,
  // mask and softmax; the causal mask is not discounted (Megatron-LM, PaLM).
  const Shape &x = a.x();
  Wide b = x[0], t = x[1], h = a[attr::kNumHeads], d = a[attr::kHeadDim];
  return mul(4, b, h, t, t, d) + mul(5, b, h, t, t);
}

Wide crossEntropyFlops(const FlopArgs &a) {
  // log-softmax over the logits (5 per element); the pick-and-mean is noise.
  return mul(5, product(a.x()));
}

Wide squaredErrorFlops(const FlopArgs &a) {
  return mul(3, product(a.x())); // subtract, square, sum
}

Wide conv2dFlops(const FlopArgs &a) {
  // 2·B·Cout·H'·W'·Cin·kh·kw, + B·Cout·H'·W' for the bias.
  const Shape &w = a.operand(1);
  return mul(2, a.outElems(), w[1], w[2], w[3]) +
         (a.operands.size() == 3 ? a.outElems() : 0);
}

Wide pool2dFlops(const FlopArgs &a) {
  // one op per window element
  return mul(a.outElems(), a[attr::kKernel], a[attr::kKernel]);
}

Wide spmmFlops(const FlopArgs &a) {
  // spmm 2·nnz·F, sddmm 2·nnz·K: the second operand's columns
  return mul(2, a[attr::kNnz], a.operand(1)[1]);
}

Wide edgeSoftmaxFlops(const FlopArgs &a) {
  return mul(6, a[attr::kNnz]); // scale, max, subtract, exp, sum, divide
}

Wide headDotFlops(const FlopArgs &a) {
  return mul(2, a.x()[0], a.x()[1]); // 2·N·H·C
}

Wide gatAggregateFlops(const FlopArgs &a) {
  // Per edge and head: add, LeakyReLU, max, subtract, exp, sum, divide (7);
  // per edge and feature a multiply-add (2·nnz·H·C).
  const Wide heads = a.operand(1)[1], width = a.operand(3)[1];
  return mul(7, a[attr::kNnz], heads) + mul(2, a[attr::kNnz], width);
}

Wide primitiveFlops(const FlopArgs &a) {
  // An ONNX op left unfused (docs/model-format.md): MatMul 2·M·N·K per
  // batch entry, Softmax as softmax, data movement (Reshape, Transpose,
  // Slice, ...) none, anything else one operation per result element.
  const std::string type = attrOr(a.attrs, attr::kOpType, "");
  if (type == "MatMul")
    return mul(2, a.outElems(), a.x().empty() ? 1 : a.x().back());
  if (type == "Softmax" || type == "LogSoftmax")
    return mul(5, a.outElems());
  for (const char *move :
       {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast",
        "Transpose", "Expand", "Slice", "Concat"})
    if (type == move)
      return 0;
  return a.outElems();
}

Wide wideFlops(std::string_view kind, const std::vector<ValueType> &operands,
               const std::vector<ValueType> &results, const Attrs &a) {
  const FlopArgs args{operands, results, a};
  if (const OpKind *k = findOpKind(kind))
    return k->flops(args);
  return kind == "primitive" ? primitiveFlops(args) : 0;
}

} // namespace detail

int64_t forwardFlops(std::string_view kind,
                     const std::vector<ValueType> &operands,
                     const std::vector<ValueType> &results,
                     const Attrs &attrs) {
  detail::Wide f =
      detail::wideFlops(kind, operands, results, withDefaults(kind, attrs));
  return f > detail::kInt64Max ? INT64_MAX : static_cast<int64_t>(f);
}

} // namespace autoddl::ops
