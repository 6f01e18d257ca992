//===- ForwardFlops.cpp - forward FLOPs of each op ------------------------===//
//
// The FLOP count of one application of each op kind, with the conventions of
// docs/ir.md ("FLOP conventions"): a multiply-add is 2 FLOPs; elementwise and
// normalisation ops count the per-element constant written beside their case.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/ShapeRule.h"

namespace autoddl::ops {

namespace detail {

Wide wideFlops(std::string_view kind, const std::vector<ValueType> &operands,
               const std::vector<ValueType> &results, const Attrs &a) {
  auto get = [&](const char *name) { return std::get<int64_t>(a.at(name)); };
  const Shape &x = operands.empty() ? Shape{} : operands[0].shape;
  const Shape &y = results.empty() ? Shape{} : results[0].shape;
  Wide outElems = product(y);
  if (kind == "linear") {
    // 2·M·N·K, + M·N for the bias (docs/ir.md).
    Wide m = product(x, 0, x.size() - 1), n = y.back(), k = x.back();
    return mul(2, m, n, k) + (operands.size() == 3 ? mul(m, n) : 0);
  }
  if (kind == "matmul")
    return mul(2, outElems, x.back()); // 2·M·N·K per batch entry
  if (kind == "attention") {
    // 4·B·H·T²·D for q·kᵀ and the weighted sum of v, + 5·B·H·T² for scale,
    // mask and softmax; the causal mask is not discounted (Megatron-LM, PaLM).
    Wide b = x[0], t = x[1], h = get("num_heads"), d = get("head_dim");
    return mul(4, b, h, t, t, d) + mul(5, b, h, t, t);
  }
  if (kind == "spmm")
    return mul(2, get("nnz"), operands[1].shape[1]); // 2·nnz·F
  if (kind == "sddmm")
    return mul(2, get("nnz"), operands[1].shape[1]); // 2·nnz·K
  if (kind == "edge_softmax")
    return mul(6, get("nnz")); // scale, max, subtract, exp, sum, divide
  if (kind == "head_dot")
    return mul(2, operands[0].shape[0], operands[0].shape[1]); // 2·N·H·C
  if (kind == "gat_aggregate") {
    // Per edge and head: add, LeakyReLU, max, subtract, exp, sum, divide (7);
    // per edge and feature a multiply-add (2·nnz·H·C).
    const Wide heads = operands[1].shape[1], width = operands[3].shape[1];
    return mul(7, get("nnz"), heads) + mul(2, get("nnz"), width);
  }
  if (kind == "conv2d") {
    // 2·B·Cout·H'·W'·Cin·kh·kw, + B·Cout·H'·W' for the bias.
    const Shape &w = operands[1].shape;
    return mul(2, outElems, w[1], w[2], w[3]) +
           (operands.size() == 3 ? outElems : 0);
  }
  if (kind == "pool2d")
    return mul(outElems, get("kernel"),
               get("kernel")); // one op per window element
  if (kind == "positional" || kind == "bias_add" || kind == "add" ||
      kind == "mul" || kind == "relu" || kind == "elu")
    return outElems; // one add, multiply or compare per element
  if (kind == "silu")
    return mul(4, outElems); // exp, add, divide, multiply
  if (kind == "swiglu")
    return mul(5, outElems); // silu(gate) (4) and the product with up (1)
  if (kind == "gelu")
    // tanh form: x³, two multiply-adds, tanh, add, two multiplies ≈ 8; the erf
    // form is counted the same.
    return mul(8, outElems);
  if (kind == "rotary")
    return mul(3, outElems); // x·cos + rotate(x)·sin: two multiplies and an add
  if (kind == "layernorm")
    return mul(8,
               outElems); // mean (1), variance (3), normalise (2), affine (2)
  if (kind == "rmsnorm")
    return mul(4, outElems); // square-sum (2), scale (1), gamma (1)
  if (kind == "softmax")
    return mul(5, outElems); // max, subtract, exp, sum, divide
  if (kind == "cross_entropy")
    // log-softmax over the logits (5 per element); the pick-and-mean is noise.
    return mul(5, product(x));
  if (kind == "squared_error")
    return mul(3, product(x)); // subtract, square, sum
  if (kind == "primitive") {
    // An ONNX op left unfused (docs/model-format.md): MatMul 2·M·N·K per
    // batch entry, Softmax as softmax, data movement (Reshape, Transpose,
    // Slice, ...) none, anything else one operation per result element.
    auto t = a.find("op_type");
    const std::string *op =
        t == a.end() ? nullptr : std::get_if<std::string>(&t->second);
    const std::string type = op ? *op : "";
    if (type == "MatMul")
      return mul(2, outElems, x.empty() ? 1 : x.back());
    if (type == "Softmax" || type == "LogSoftmax")
      return mul(5, outElems);
    for (const char *move :
         {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast",
          "Transpose", "Expand", "Slice", "Concat"})
      if (type == move)
        return 0;
    return outElems;
  }
  // embedding (a lookup), flatten, reshape, transpose, parameter: no
  // arithmetic.
  return 0;
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
