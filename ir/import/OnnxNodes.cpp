//===- OnnxNodes.cpp - one lowering per recognised ONNX op type -----------===//
//
// OnnxLowering::lower looks a node's op type up in one table and runs its
// function; a node no function lowers (one that returns false, or an op type
// outside the table) becomes a primitive (OnnxPrimitives.cpp), which the
// fusion passes may still recognise.
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxLowering.h"

#include "backends/common/OnnxImage.h"

#include <algorithm>
#include <map>

namespace autoddl::import {

/// Identity, and Dropout that drops nothing: the input itself. The dynamo
/// exporter writes an eval-mode Dropout with a constant false training_mode.
/// A true one (an export in train mode) drops, unless its ratio is 0: a
/// primitive whose mask the programs draw from their counter-based generator
/// (backends/common/OnnxKernels.h dropout_forward).
bool OnnxLowering::lowerIdentity(const onnx::NodeProto &n) {
  if (n.op_type() == "Dropout") {
    auto flag = [&](int i, const char *what) -> std::optional<double> {
      if (n.input_size() <= i || n.input(i).empty())
        return std::nullopt; // absent: ratio 0.5, training_mode false
      if (!isConst(n.input(i)))
        failNode(n, std::string("its ") + what + " '" + n.input(i) +
                        "' is computed from the inputs; export with a "
                        "constant one (model.eval())");
      const HostTensor &v = constant(n, n.input(i));
      if (v.numel() != 1)
        failNode(n, std::string("its ") + what + " '" + n.input(i) +
                        "' is not a scalar");
      return (double)v.data[0];
    };
    std::optional<double> ratio = flag(1, "ratio");
    std::optional<double> training = flag(2, "training_mode");
    if (n.output_size() > 1 && !n.output(1).empty() &&
        consumers.count(n.output(1)))
      failNode(n, "its mask output '" + n.output(1) +
                      "' is read by the graph; only the data output is "
                      "supported");
    const double r = ratio.value_or(0.5);
    if (training && *training != 0 && r != 0) {
      if (!(r > 0 && r < 1))
        failNode(n, "its ratio " + std::to_string(r) + " is not in [0, 1)");
      primitive(n);
      return true;
    }
  }
  define(n, value(n, 0));
  return true;
}

/// A Cast to the type the value has already: the input itself.
bool OnnxLowering::lowerCast(const onnx::NodeProto &n) {
  if (!castIsIdentity(n))
    return false;
  define(n, value(n, 0));
  return true;
}

/// Gather along axis 0: an embedding, or learned positions 0..T-1
/// (lowered with their Add).
bool OnnxLowering::lowerGather(const onnx::NodeProto &n) {
  if (onnxAttrInt(n, "axis", 0) != 0)
    failNode(n, "only a Gather along axis 0 of a table (an embedding) is "
                "supported");
  if (isConst(n.input(1))) {
    // Learned positions (GPT-2's wpe): the table read at 0..T-1, lowered
    // with the Add that puts it on the token embeddings.
    const HostTensor &at = constant(n, n.input(1));
    bool arange = !at.shape.empty() && at.numel() == at.shape.back();
    for (int64_t i = 0; arange && i < at.numel(); ++i)
      arange = at.data[i] == i;
    if (!arange)
      failNode(n, "a Gather of a table at constant indices other than the "
                  "positions 0..T-1 is not supported");
    positions[n.output(0)] = &n;
    return true;
  }
  int ids = value(n, 1);
  int table = param(n, 0, "normal");
  define(n, add(n, "embedding", {ids, table}));
  return true;
}

/// MatMul by a weight (with a following bias Add): a linear; of two
/// activations: a matmul.
bool OnnxLowering::lowerMatMul(const onnx::NodeProto &n) {
  int a = value(n, 0);
  // MatMul(x, Transpose(W)) with W an initializer [out,in]: torch's Linear
  // as the dynamo exporter writes it; W keeps its name and shape.
  const onnx::NodeProto *wt = transposedWeight(n.input(1));
  if (wt || consts.count(n.input(1)) ||
      (values.count(n.input(1)) &&
       b.graph().tensors[values[n.input(1)]].role == TensorRole::Parameter)) {
    // A head whose tie to the token table the exporter folded away reads
    // the table, transposed.
    const std::string table = wt ? "" : tiedTable(n, n.input(1));
    const bool transposed = wt || !table.empty();
    int w = !table.empty() ? paramNamed(n, table, "normal")
            : wt           ? param(*wt, 0, "normal")
                           : param(n, 1, "normal");
    if (b.shape(w).size() != 2)
      failNode(n, "a weight of rank 2 ([K,N]) is expected");
    int64_t outDim = b.shape(w)[transposed ? 0 : 1];
    std::vector<int> operands = {a, w};
    // MatMul then Add of a [N] initializer is a linear layer with a bias.
    const onnx::NodeProto *next = soleConsumer(n.output(0));
    const onnx::NodeProto *addNode = nullptr;
    if (next && next->op_type() == "Add" && next->input_size() == 2) {
      int other = next->input(0) == n.output(0) ? 1 : 0;
      auto c = consts.find(next->input(other));
      if (c != consts.end() && !values.count(c->first) &&
          c->second->dims_size() == 1 && c->second->dims(0) == outDim) {
        operands.push_back(param(*next, other, "zeros"));
        addNode = next;
      }
    }
    ops::Attrs at; // MatMul's weight is [K,N]; a transposed one [N,K]
    at["transpose_weight"] = transposed;
    int out = add(n, "linear", operands, at);
    define(n, out);
    if (addNode) {
      folded.insert(addNode);
      values[addNode->output(0)] = out;
    }
    return true;
  }
  int bb = value(n, 1);
  define(n, add(n, "matmul", {a, bb}));
  return true;
}

/// Gemm without transA, alpha = beta = 1: a linear.
bool OnnxLowering::lowerGemm(const onnx::NodeProto &n) {
  if (onnxAttrInt(n, "transA", 0) != 0)
    failNode(n, "transA is not supported");
  const onnx::AttributeProto *alpha = onnxAttr(n, "alpha"),
                             *beta = onnxAttr(n, "beta");
  if ((alpha && alpha->f() != 1.0f) || (beta && beta->f() != 1.0f))
    failNode(n, "alpha and beta other than 1 are not supported");
  int a = value(n, 0);
  std::vector<int> operands = {a, param(n, 1, "normal")};
  if (n.input_size() > 2 && !n.input(2).empty())
    operands.push_back(param(n, 2, "zeros"));
  ops::Attrs at;
  at["transpose_weight"] = onnxAttrInt(n, "transB", 0) != 0;
  define(n, add(n, "linear", operands, at));
  return true;
}

/// SplitToSequence: read by its SequenceAt nodes.
bool OnnxLowering::lowerSplitToSequence(const onnx::NodeProto &n) {
  splits[n.output(0)] = &n;
  return true;
}

/// Split: a Slice per output.
bool OnnxLowering::lowerSplit(const onnx::NodeProto &n) {
  splitParts(n);
  return true;
}

/// SequenceAt of a SplitToSequence.
bool OnnxLowering::lowerSequenceAt(const onnx::NodeProto &n) {
  sequenceAt(n);
  return true;
}

/// Add of learned positions (a Gather at 0..T-1) to [B,T,C] activations:
/// positional.
bool OnnxLowering::lowerPositions(const onnx::NodeProto &n) {
  for (int k = 0; k < 2; ++k) {
    auto pos = positions.find(n.input(k));
    auto x = values.find(n.input(1 - k));
    if (pos == positions.end() || x == values.end())
      continue;
    const ops::Shape &xs = b.shape(x->second);
    if (xs.size() != 3 ||
        constant(*pos->second, pos->second->input(1)).numel() != xs[1])
      failNode(n, "learned positions 0..T-1 must be added to [B,T,C] "
                  "activations of the same T");
    define(n,
           add(n, "positional", {x->second, param(*pos->second, 0, "normal")}));
    return true;
  }
  return false;
}

/// Add of a 1-D initializer: bias_add; Add or Mul of two activations of one
/// shape: add or mul; else a primitive.
bool OnnxLowering::lowerAddMul(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  // A bias is a 1-D initializer (a computed constant is not a weight).
  bool c0 = isConst(n.input(0)) && consts.count(n.input(0)) &&
            consts[n.input(0)]->dims_size() == 1;
  bool c1 = isConst(n.input(1)) && consts.count(n.input(1)) &&
            consts[n.input(1)]->dims_size() == 1;
  if (op == "Add" && (c0 || c1) && !(c0 && c1)) {
    int x = value(n, c0 ? 1 : 0);
    int bias = param(n, c0 ? 0 : 1, "zeros");
    define(n, add(n, "bias_add", {x, bias}));
    return true;
  }
  // Two activations of one shape (a residual); otherwise broadcasting or
  // a constant operand: a primitive.
  auto x = values.find(n.input(0)), y = values.find(n.input(1));
  if (x != values.end() && y != values.end() &&
      b.shape(x->second) == b.shape(y->second)) {
    define(n, add(n, op == "Add" ? "add" : "mul", {x->second, y->second}));
    return true;
  }
  primitive(n);
  return true;
}

/// LayerNormalization over the last axis.
bool OnnxLowering::lowerLayerNorm(const onnx::NodeProto &n) {
  int x = value(n, 0);
  int64_t axis = onnxAttrInt(n, "axis", -1);
  if (axis != -1 && axis != rankOf(x) - 1)
    failNode(n, "only normalisation over the last axis is supported");
  // A scale and bias every norm reads are a fresh model's, merged by the
  // exporter: untied (weightParam).
  std::vector<int> operands = {x, weightParam(n, 1, "ones")};
  if (n.input_size() > 2 && !n.input(2).empty())
    operands.push_back(weightParam(n, 2, "zeros"));
  const onnx::AttributeProto *eps = onnxAttr(n, "epsilon");
  ops::Attrs at;
  at["epsilon"] = eps ? (double)eps->f() : 1e-5;
  define(n, add(n, "layernorm", operands, at));
  return true;
}

/// Gelu.
bool OnnxLowering::lowerGelu(const onnx::NodeProto &n) {
  const onnx::AttributeProto *a = onnxAttr(n, "approximate");
  ops::Attrs at;
  at["approximate"] = a ? a->s() : std::string("none");
  define(n, add(n, "gelu", {value(n, 0)}, at));
  return true;
}

/// Relu.
bool OnnxLowering::lowerRelu(const onnx::NodeProto &n) {
  define(n, add(n, "relu", {value(n, 0)}));
  return true;
}

/// Softmax.
bool OnnxLowering::lowerSoftmax(const onnx::NodeProto &n) {
  ops::Attrs at;
  at["axis"] = onnxAttrInt(n, "axis", -1);
  define(n, add(n, "softmax", {value(n, 0)}, at));
  return true;
}

/// 2-D Conv with equal strides and pads (auto_pad's where they are equal),
/// no groups or dilation: conv2d.
bool OnnxLowering::lowerConv(const onnx::NodeProto &n) {
  int x = value(n, 0);
  if (onnxAttrInt(n, "group", 1) != 1)
    failNode(n, "grouped convolution is not supported");
  for (int64_t d : onnxAttrInts(n, "dilations"))
    if (d != 1)
      failNode(n, "dilated convolution is not supported");
  std::vector<int64_t> s = onnxAttrInts(n, "strides"),
                       p = onnxAttrInts(n, "pads");
  const onnx::AttributeProto *ap = onnxAttr(n, "auto_pad");
  if (ap && ap->s() != "NOTSET") {
    // The kernel's extent: kernel_shape, else the weight's trailing dims.
    std::vector<int64_t> k = onnxAttrInts(n, "kernel_shape");
    if (k.empty() && consts.count(n.input(1)))
      for (int d = 2; d < consts[n.input(1)]->dims_size(); ++d)
        k.push_back(consts[n.input(1)]->dims(d));
    if (k.empty())
      failNode(n, "auto_pad needs kernel_shape or a constant weight");
    if (std::string e =
            onnx_kernels::autoPads(b.shape(x), k, s, {}, ap->s(), p);
        !e.empty())
      failNode(n, e);
  }
  if (s.empty())
    s = {1, 1};
  if (p.empty())
    p = {0, 0, 0, 0};
  if (s.size() != 2 || s[0] != s[1] || p.size() != 4 ||
      std::count(p.begin(), p.end(), p[0]) != 4)
    failNode(n, "only 2-D convolution with equal strides and equal pads "
                "is supported");
  std::vector<int> operands = {x, param(n, 1, "normal")};
  if (n.input_size() > 2 && !n.input(2).empty())
    operands.push_back(param(n, 2, "zeros"));
  ops::Attrs at;
  at["stride"] = s[0];
  at["padding"] = p[0];
  define(n, add(n, "conv2d", operands, at));
  return true;
}

/// Square 2-D MaxPool or AveragePool without padding: pool2d; any other
/// (pads, ceil_mode, dilations, 1-D or 3-D: a ResNet stem's padded max
/// pool) a primitive (OnnxImage.h), auto_pad resolved into pads.
bool OnnxLowering::lowerPool(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  if (n.output_size() > 1 && !n.output(1).empty() &&
      consumers.count(n.output(1)))
    failNode(n, "its Indices output '" + n.output(1) +
                    "' is read by the graph; only the data output is "
                    "supported");
  std::vector<int64_t> k = onnxAttrInts(n, "kernel_shape"),
                       s = onnxAttrInts(n, "strides"),
                       p = onnxAttrInts(n, "pads"),
                       dil = onnxAttrInts(n, "dilations");
  if (s.empty())
    s = {1, 1};
  auto allOnes = [](const std::vector<int64_t> &v, int64_t one) {
    return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == one; });
  };
  const onnx::AttributeProto *ap = onnxAttr(n, "auto_pad");
  const std::string autoPad = ap ? ap->s() : "NOTSET";
  if (k.size() == 2 && k[0] == k[1] && s.size() == 2 && s[0] == s[1] &&
      allOnes(p, 0) && allOnes(dil, 1) && onnxAttrInt(n, "ceil_mode", 0) == 0 &&
      (autoPad == "NOTSET" || autoPad == "VALID")) {
    ops::Attrs at;
    at["kind"] = std::string(op == "MaxPool" ? "max" : "avg");
    at["kernel"] = k[0];
    at["stride"] = s[0];
    define(n, add(n, "pool2d", {value(n, 0)}, at));
    return true;
  }
  if (autoPad == "NOTSET") {
    primitive(n);
    return true;
  }
  // auto_pad: the pads it implies on the input's static shape.
  if (std::string e = onnx_kernels::autoPads(
          b.shape(value(n, 0)), k, onnxAttrInts(n, "strides"), dil, autoPad, p);
      !e.empty())
    failNode(n, e);
  onnx::NodeProto &made = madeNodes.emplace_back(n);
  made.set_name(nodeName(n));
  made.clear_attribute();
  for (const auto &a : n.attribute())
    if (a.name() != "auto_pad" && a.name() != "pads")
      *made.add_attribute() = a;
  onnx::AttributeProto *pads = made.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : p)
    pads->add_ints(v);
  primitive(made, nodeIndex(n));
  return true;
}

/// BatchNormalization: a primitive over (X, scale, B, mean, var) that
/// normalises with the batch's statistics whatever the export's
/// training_mode (an import trains it; docs/model-format.md): scale and B are
/// parameters, the running mean and var buffers (runningStat) that each
/// micro-batch's statistics update (docs/checkpoints.md "Buffers").
bool OnnxLowering::lowerBatchNorm(const onnx::NodeProto &n) {
  if (n.input_size() != 5)
    failNode(n, "expected five inputs (X, scale, B, mean, var)");
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty() && consumers.count(n.output(i)))
      failNode(n, "its running statistics output '" + n.output(i) +
                      "' is read by the graph; only the data output is "
                      "supported");
  onnx::NodeProto &made = madeNodes.emplace_back(n);
  made.set_name(nodeName(n));
  made.clear_output();
  made.add_output(n.output(0));
  made.clear_attribute();
  for (const auto &a : n.attribute())
    if (a.name() == "epsilon" || a.name() == "momentum")
      *made.add_attribute() = a;
  onnx::AttributeProto *training = made.add_attribute();
  training->set_name("training_mode");
  training->set_type(onnx::AttributeProto::INT);
  training->set_i(1);
  primitive(made, nodeIndex(n));
  return true;
}

/// Flatten (from axis 1: flatten; else a reshape) and Reshape to a
/// constant shape.
bool OnnxLowering::lowerReshape(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  int x = value(n, 0);
  const ops::Shape &in = b.shape(x);
  ops::Shape out;
  if (op == "Flatten") {
    int64_t axis = onnxAttrInt(n, "axis", 1);
    if (axis < 0)
      axis += rankOf(x);
    if (axis < 0 || axis > rankOf(x))
      failNode(n, "axis out of range");
    if (axis == 1 && rankOf(x) > 1) {
      ops::Attrs at;
      at["start_dim"] = int64_t(1);
      define(n, add(n, "flatten", {x}, at));
      return true;
    }
    int64_t lead = 1, rest = 1;
    for (int64_t i = 0; i < rankOf(x); ++i)
      (i < axis ? lead : rest) *= in[i];
    out = {lead, rest};
  } else {
    if (n.input_size() < 2 || !isConst(n.input(1)))
      failNode(n, "the target shape must be a constant (computed from "
                  "constants and static shapes)");
    out = constantInts(n, n.input(1));
    bool allowZero = onnxAttrInt(n, "allowzero", 0) != 0;
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i] == 0 && !allowZero) {
        if (i >= in.size())
          failNode(n, "shape copies a dimension the input lacks");
        out[i] = in[i];
      }
  }
  ops::Attrs at;
  at["shape"] = out;
  define(n, add(n, "reshape", {x}, at));
  return true;
}

/// Transpose.
bool OnnxLowering::lowerTranspose(const onnx::NodeProto &n) {
  int x = value(n, 0);
  std::vector<int64_t> perm = onnxAttrInts(n, "perm");
  if (perm.empty())
    for (int64_t i = rankOf(x) - 1; i >= 0; --i)
      perm.push_back(i);
  ops::Attrs at;
  at["perm"] = perm;
  define(n, add(n, "transpose", {x}, at));
  return true;
}

/// SoftmaxCrossEntropyLoss with reduction 'mean': cross_entropy over the
/// classes moved last.
bool OnnxLowering::lowerCrossEntropy(const onnx::NodeProto &n) {
  const onnx::AttributeProto *red = onnxAttr(n, "reduction");
  if (red && red->s() != "mean")
    failNode(n, "only reduction 'mean' is supported");
  if (onnxAttr(n, "ignore_index") ||
      (n.input_size() > 2 && !n.input(2).empty()))
    failNode(n, "ignore_index and class weights are not supported");
  if (n.output_size() > 1 && !n.output(1).empty())
    failNode(n, "the log_prob output is not supported");
  int scores = value(n, 0), labels = value(n, 1);
  // ONNX puts the classes on axis 1; cross_entropy wants them last.
  if (rankOf(scores) > 2) {
    std::vector<int64_t> perm = {0};
    for (int64_t i = 2; i < rankOf(scores); ++i)
      perm.push_back(i);
    perm.push_back(1);
    ops::Attrs at;
    at["perm"] = perm;
    b.setPlace(path + ": node '" + nodeName(n) + "': ");
    scores = b.op("transpose", nodeName(n) + ".classes_last", {scores}, at);
  }
  loss = add(n, "cross_entropy", {scores, labels});
  define(n, loss);
  return true;
}

void OnnxLowering::lower(const onnx::NodeProto &n) {
  checkVersion(n);
  auto gelu = gelus.find(&n);
  if (gelu != gelus.end()) {
    auto x = values.find(gelu->second.x);
    if (x == values.end())
      failNode(n, "the input of its GELU is not an activation");
    ops::Attrs at;
    at["approximate"] = gelu->second.approximate;
    define(n, add(n, "gelu", {x->second}, at));
    return;
  }

  using Lowering = bool (OnnxLowering::*)(const onnx::NodeProto &);
  static const std::map<std::string, Lowering> kLowerings = {
      {"Identity", &OnnxLowering::lowerIdentity},
      {"Dropout", &OnnxLowering::lowerIdentity},
      {"Cast", &OnnxLowering::lowerCast},
      {"CastLike", &OnnxLowering::lowerCast},
      {"Gather", &OnnxLowering::lowerGather},
      {"MatMul", &OnnxLowering::lowerMatMul},
      {"Gemm", &OnnxLowering::lowerGemm},
      {"SplitToSequence", &OnnxLowering::lowerSplitToSequence},
      {"SequenceAt", &OnnxLowering::lowerSequenceAt},
      {"Split", &OnnxLowering::lowerSplit},
      {"Add", &OnnxLowering::lowerAddMul},
      {"Mul", &OnnxLowering::lowerAddMul},
      {"LayerNormalization", &OnnxLowering::lowerLayerNorm},
      {"Gelu", &OnnxLowering::lowerGelu},
      {"Relu", &OnnxLowering::lowerRelu},
      {"Softmax", &OnnxLowering::lowerSoftmax},
      {"Conv", &OnnxLowering::lowerConv},
      {"MaxPool", &OnnxLowering::lowerPool},
      {"AveragePool", &OnnxLowering::lowerPool},
      {"BatchNormalization", &OnnxLowering::lowerBatchNorm},
      {"Flatten", &OnnxLowering::lowerReshape},
      {"Reshape", &OnnxLowering::lowerReshape},
      {"Transpose", &OnnxLowering::lowerTranspose},
      {"SoftmaxCrossEntropyLoss", &OnnxLowering::lowerCrossEntropy},
  };
  if (n.op_type() == "Add" && lowerPositions(n))
    return;
  auto it = kLowerings.find(n.op_type());
  if (it == kLowerings.end() || !(this->*it->second)(n))
    primitive(n);
}

} // namespace autoddl::import
