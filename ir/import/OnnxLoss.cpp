//===- OnnxLoss.cpp - the loss of an ONNX model and --loss ---------------===//
//
// An exported SoftmaxCrossEntropyLoss is the loss (OnnxReader.cpp lowers it);
// without one, --loss (BuildOptions::loss; docs/model-format.md "The loss")
// names the loss added on the single output.
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxLowering.h"

#include <onnx/onnx_pb.h>

#include <set>
#include <vector>

namespace autoddl::import {

void OnnxLowering::addLoss() {
  const onnx::GraphProto &g = model.graph();
  auto dimsOf = [&](int t) {
    std::string d;
    for (int64_t x : b.shape(t))
      d += (d.empty() ? "" : ",") + std::to_string(x);
    return "[" + d + "]";
  };
  // Token ids (an i32 input [B,S]) to logits [B,S,V]: a causal LM.
  auto causalLm = [&](int logits) {
    if (b.shape(logits).size() != 3)
      return false;
    for (const TensorDef &t : b.graph().tensors)
      if (t.role == TensorRole::Input && t.dtype == ops::DType::I32 &&
          t.shape.size() == 2 && t.name != "targets")
        return true;
    return false;
  };
  if (loss >= 0 && !o.loss.empty()) {
    // The exported SoftmaxCrossEntropyLoss is cross_entropy (and a causal LM's
    // when its scores are one): another --loss is refused.
    int scores = -1;
    for (const OpDef &op : b.graph().ops)
      if (op.kind == "cross_entropy" && op.results.front() == loss)
        scores = op.operands[0];
    if (o.loss == "squared_error" ||
        (o.loss == "causal_lm" && (scores < 0 || !causalLm(scores))))
      fail("--loss " + o.loss +
           " disagrees with the exported SoftmaxCrossEntropyLoss (" +
           "cross-entropy); drop --loss or export the model without it");
  }
  if (loss < 0) {
    // No exported loss: logits over a vocabulary from token ids train as a
    // causal LM (targets are the ids shifted by one, fed as "targets", as for
    // a config.json); class scores [B,C] train with cross-entropy on labels.
    // A train-mode export's BatchNormalization running statistics may be
    // graph outputs (buffer updates): not the model's result, and not kept
    // (docs/onnx-lowering.md "Primitives that run").
    std::set<std::string> running;
    for (const onnx::NodeProto &n : g.node())
      if (n.op_type() == "BatchNormalization")
        for (int i = 1; i < n.output_size(); ++i)
          running.insert(n.output(i));
    std::vector<const onnx::ValueInfoProto *> results;
    for (const onnx::ValueInfoProto &out : g.output())
      if (!running.count(out.name()))
        results.push_back(&out);
    if (results.size() != 1)
      fail("no SoftmaxCrossEntropyLoss and " + std::to_string(results.size()) +
           " outputs: export the loss or a single logits output");
    const onnx::ValueInfoProto &output = *results[0];
    auto it = values.find(output.name());
    if (it == values.end())
      fail("output '" + output.name() + "' is not computed by the graph");
    int logits = it->second;
    ops::Shape lead = b.shape(logits);
    if (lead.size() < 2)
      fail("output '" + output.name() +
           "' is not logits ([batch, ..., classes])");
    // --loss (docs/model-format.md "The loss"): cross_entropy or causal_lm
    // (the same op; causal_lm insists on token ids to logits [B,S,V]), or
    // squared_error against the one-hot labels of scores [B,C].
    if (o.loss == "causal_lm" && !causalLm(logits))
      fail("--loss causal_lm: output '" + output.name() + "' " +
           dimsOf(logits) +
           " is not logits [batch, seq, vocab] from token ids");
    if (o.loss == "squared_error" && b.shape(logits).size() != 2)
      fail("--loss squared_error: output '" + output.name() + "' " +
           dimsOf(logits) + " is not scores [batch, classes]");
    lead.pop_back();
    int targets = b.input(b.find("targets") < 0 ? "targets" : "targets.loss",
                          lead, ops::DType::I32);
    b.setPlace(path + ": ");
    loss = b.op(o.loss == "squared_error" ? "squared_error" : "cross_entropy",
                "loss", {logits, targets});
  }
}

} // namespace autoddl::import
