//===- TemplateSupport.cpp ------------------------------------------------===//
#include "ir/import/TemplateSupport.h"

#include "ir/import/JsonFields.h"
#include "support/UserError.h"

namespace autoddl::import {

void require(bool ok, const BuildOptions &o, const std::string &message) {
  if (!ok)
    throw UserError(o.place + message);
}

int64_t sequenceLength(const BuildOptions &o, int64_t maxPositions,
                       const std::string &field) {
  if (o.seq == 0)
    return maxPositions;
  require(o.seq <= maxPositions, o,
          "sequence length " + std::to_string(o.seq) + " exceeds the model's " +
              std::to_string(maxPositions) + " positions (" + field + ")");
  return o.seq;
}

void requireNoSeq(const BuildOptions &o, const std::string &family) {
  require(o.seq == 0, o,
          "--seq applies to sequence models; a " + family + " has none");
}

int torchLinear(GraphBuilder &b, const std::string &opName,
                const std::string &prefix, int x, int64_t in, int64_t out,
                bool bias, double std) {
  std::vector<int> operands{
      x, b.param(prefix + ".weight", {out, in}, "normal", std)};
  if (bias)
    operands.push_back(b.param(prefix + ".bias", {out}, "zeros"));
  return b.op("linear", opName, operands, {{"transpose_weight", true}});
}

int activation(GraphBuilder &b, const std::string &opName, int x,
               const std::string &act, const BuildOptions &o) {
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
    return b.op("gelu", opName, {x}, {{"approximate", std::string("tanh")}});
  if (act == "gelu")
    return b.op("gelu", opName, {x}, {{"approximate", std::string("none")}});
  if (act == "relu")
    return b.op("relu", opName, {x});
  if (act == "silu" || act == "swish")
    return b.op("silu", opName, {x});
  throw UserError(o.place + "activation '" + act +
                  "' is not supported (supported: gelu_new, gelu_pytorch_tanh, "
                  "gelu_fast, gelu, relu, silu, swish)");
}

} // namespace autoddl::import
