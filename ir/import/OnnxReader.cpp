//===- OnnxReader.cpp - an ONNX model (protobuf) -> ModelGraph -----------===//
//
// Reads the ModelProto with Debian's onnx_proto classes and lowers it node by
// node to the op vocabulary of docs/ir.md through GraphBuilder, so an ONNX
// model becomes the same ModelGraph as a template or a config.json. The
// library's checker is not used: Debian's onnx (1.12) predates the opsets
// current exporters write, so each op's version is resolved here from the
// model's opset and a table of the versions this reader knows.
// Edge code: errors throw UserError naming the file, the node and the cause.
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxLowering.h"
#include "ir/import/Readers.h"

#include "support/UserError.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <sys/stat.h>

namespace autoddl::import {

namespace {

constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 21;

// The opset versions at which each supported op changed, up to kMaxOpset
// (from the ONNX operator changelog). An op's version in a model is the
// largest of these not above the model's opset.
const std::map<std::string, std::vector<int64_t>> kOpVersions = {
    {"Add", {7, 13, 14}},
    {"AveragePool", {7, 10, 11, 19}},
    {"Cast", {13, 19, 21}},
    {"CastLike", {15, 19, 21}},
    {"Constant", {13, 19, 21}},
    {"Conv", {1, 11}},
    {"Div", {13, 14}},
    {"Dropout", {13}},
    {"Erf", {13}},
    {"Flatten", {13, 21}},
    {"Gather", {13}},
    {"Gelu", {20}},
    {"Gemm", {13}},
    {"Identity", {13, 14, 16, 19, 21}},
    {"LayerNormalization", {17}},
    {"MatMul", {13}},
    {"MaxPool", {8, 10, 11, 12}},
    {"Mul", {13, 14}},
    {"Pow", {13, 15}},
    {"Relu", {13, 14}},
    {"Reshape", {13, 14, 19, 21}},
    {"SequenceAt", {11}},
    {"Softmax", {13}},
    {"SplitToSequence", {11}},
    {"Tanh", {13}},
    {"SoftmaxCrossEntropyLoss", {13}},
    {"Transpose", {13, 21}},
};

} // namespace

void OnnxLowering::readOpset() {
  for (const auto &os : model.opset_import())
    if (os.domain().empty() || os.domain() == "ai.onnx")
      opset = os.version();
  if (opset == 0)
    fail("no opset of the default ONNX domain is imported");
  if (opset < kMinOpset || opset > kMaxOpset)
    fail("opset " + std::to_string(opset) +
         " is not supported (this reader "
         "knows opsets " +
         std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
         "); re-export with opset_version in "
         "that range");
}

ops::Shape OnnxLowering::dims(const onnx::TensorProto &t) const {
  return ops::Shape(t.dims().begin(), t.dims().end());
}

// The bytes of an external initializer (n: the node reading it, for errors;
// null to only check that the file holds them).
std::string OnnxLowering::externalBytes(const onnx::TensorProto &t,
                                        const onnx::NodeProto *n) {
  auto bad = [&](const std::string &m) {
    if (n)
      failNode(*n, m);
    fail(m);
  };
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    const std::string &v = kv.value();
    bool digits = !v.empty() && v.size() < 19 &&
                  std::all_of(v.begin(), v.end(), ::isdigit);
    if (kv.key() == "location")
      location = v;
    else if ((kv.key() == "offset" || kv.key() == "length") && !digits)
      bad("tensor '" + t.name() + "': external data " + kv.key() + " '" + v +
          "' is not a byte count");
    else if (kv.key() == "offset")
      offset = std::stoll(v);
    else if (kv.key() == "length")
      length = std::stoll(v);
  }
  // Data files live beside the model; a path out of that folder is refused.
  if (location.empty() || location[0] == '/' ||
      location.find("..") != std::string::npos)
    bad("tensor '" + t.name() + "': external data location '" + location +
        "' is not a file beside the model");
  struct stat st {};
  std::string file = dir + location;
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    bad("tensor '" + t.name() + "': external data '" + file +
        "' is not a regular file");
  int64_t size = st.st_size;
  if (length < 0)
    length = size - offset;
  if (offset > size || length < 0 || offset + length > size)
    bad("tensor '" + t.name() + "': external data '" + location +
        "' is shorter than its offset and length");
  if (!n)
    return {};
  std::ifstream in(file, std::ios::binary);
  std::string bytes(length, '\0');
  in.seekg(offset);
  if (!in.read(bytes.data(), length))
    bad("tensor '" + t.name() + "': cannot read external data '" + file + "'");
  return bytes;
}

// Initializers whose bytes are given must hold as many as their dims say, so
// a reader of the values (--weights onnx, shapes) never runs past them.
void OnnxLowering::checkData(const onnx::TensorProto &t) {
  __int128 count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      fail("initializer '" + t.name() + "': negative dimension");
    count *= d;
    if (count > INT64_MAX)
      fail("initializer '" + t.name() + "': element count overflows int64");
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    externalBytes(t, nullptr);
    return;
  }
  int64_t width = t.data_type() == onnx::TensorProto::INT64   ? 8
                  : t.data_type() == onnx::TensorProto::FLOAT ? 4
                                                              : 0;
  if (width && !t.raw_data().empty() &&
      (__int128)t.raw_data().size() != count * width)
    fail("initializer '" + t.name() + "': holds " +
         std::to_string(t.raw_data().size()) + " bytes, expected " +
         std::to_string((int64_t)(count * width)));
}

const onnx::AttributeProto *OnnxLowering::attr(const onnx::NodeProto &n,
                                               const std::string &name) const {
  return onnxAttr(n, name);
}

int64_t OnnxLowering::attrInt(const onnx::NodeProto &n, const std::string &name,
                              int64_t dflt) const {
  const onnx::AttributeProto *a = attr(n, name);
  return a ? a->i() : dflt;
}

std::vector<int64_t> OnnxLowering::attrInts(const onnx::NodeProto &n,
                                            const std::string &name) const {
  const onnx::AttributeProto *a = attr(n, name);
  if (!a)
    return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

void OnnxLowering::readInputs() {
  const onnx::GraphProto &g = model.graph();
  for (const auto &t : g.initializer()) {
    if (!consts.emplace(t.name(), &t).second)
      fail("initializer '" + t.name() + "' is given twice");
    checkData(t);
  }
  for (const auto &in : g.input()) {
    if (consts.count(in.name()))
      continue; // an initializer listed as an input (IR < 4)
    if (!in.type().has_tensor_type())
      fail("input '" + in.name() + "' is not a tensor");
    const auto &tt = in.type().tensor_type();
    ops::DType dtype;
    switch (tt.elem_type()) {
    case onnx::TensorProto::FLOAT:
      dtype = ops::DType::F32;
      break;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
      dtype = ops::DType::I32; // token ids and labels
      break;
    default:
      fail("input '" + in.name() + "': element type " +
           std::to_string(tt.elem_type()) +
           " is not supported (float32, int32 or int64)");
    }
    ops::Shape shape;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto &d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() > 0) {
        if (i == 0 && o.batch > 0 && d.dim_value() != o.batch)
          fail("input '" + in.name() + "' has a static batch of " +
               std::to_string(d.dim_value()) + ", not " +
               std::to_string(o.batch) +
               "; export with a dynamic batch axis to plan other batches");
        shape.push_back(d.dim_value());
        continue;
      }
      std::string what = d.has_dim_param() ? " ('" + d.dim_param() + "')" : "";
      // A dynamic batch is built at the batch asked for (1 when none is,
      // as for a config.json: the planner rebuilds it per micro-batch); any
      // other dynamic dimension must be pinned.
      if (i == 0)
        shape.push_back(o.batch > 0 ? o.batch : 1);
      else if (i == 1 && o.seq > 0)
        shape.push_back(o.seq);
      else
        fail("input '" + in.name() + "': dimension " + std::to_string(i) +
             what + " is dynamic; pin it with " +
             (i == 0   ? "--batch"
              : i == 1 ? "--seq"
                       : "a static export"));
    }
    values[in.name()] = b.input(in.name(), shape, dtype);
  }
}

std::vector<const onnx::NodeProto *> OnnxLowering::topoOrder() {
  const onnx::GraphProto &g = model.graph();
  std::map<std::string, int> producer;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto &out : g.node(i).output())
      if (!out.empty() && !producer.emplace(out, i).second)
        fail("node '" + nodeName(g.node(i)) + "': value '" + out +
             "' is produced twice");
  std::vector<int> pending(g.node_size(), 0);
  std::vector<std::vector<int>> users(g.node_size());
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto &in : g.node(i).input()) {
      if (in.empty())
        continue; // an omitted optional input
      consumers[in].push_back(&g.node(i));
      auto p = producer.find(in);
      if (p != producer.end()) {
        ++pending[i];
        users[p->second].push_back(i);
      } else if (!values.count(in) && !consts.count(in)) {
        fail("node '" + nodeName(g.node(i)) + "' (" + g.node(i).op_type() +
             "): input '" + in + "' is not defined by the graph");
      }
    }
  std::vector<const onnx::NodeProto *> order;
  std::vector<int> ready;
  for (int i = g.node_size() - 1; i >= 0; --i)
    if (!pending[i])
      ready.push_back(i);
  while (!ready.empty()) {
    int i = ready.back();
    ready.pop_back();
    order.push_back(&g.node(i));
    for (int u : users[i])
      if (--pending[u] == 0)
        ready.push_back(u);
  }
  if ((int)order.size() != g.node_size())
    for (int i = 0; i < g.node_size(); ++i)
      if (pending[i])
        fail("node '" + nodeName(g.node(i)) + "' (" + g.node(i).op_type() +
             "): the graph has a cycle through it");
  return order;
}

int OnnxLowering::value(const onnx::NodeProto &n, int i) {
  if (i >= n.input_size() || n.input(i).empty())
    failNode(n, "expected input " + std::to_string(i));
  auto it = values.find(n.input(i));
  if (it == values.end()) {
    if (isConst(n.input(i)))
      failNode(n, "input '" + n.input(i) +
                      "' is a constant where this reader expects an "
                      "activation");
    failNode(n, "input '" + n.input(i) + "' is not defined before use");
  }
  return it->second;
}

// An initializer used as a weight becomes a parameter under its ONNX name,
// once however many nodes use it (tied weights).
int OnnxLowering::param(const onnx::NodeProto &n, int i,
                        const std::string &init, double std) {
  const std::string &name = n.input(i);
  auto it = values.find(name);
  if (it != values.end()) {
    if (b.graph().tensors[it->second].role != TensorRole::Parameter)
      failNode(n, "input '" + name + "' is expected to be a weight");
    return it->second;
  }
  auto c = consts.find(name);
  if (c == consts.end())
    failNode(n, "input '" + name +
                    "' is expected to be an initializer "
                    "(a weight)");
  if (c->second->data_type() != onnx::TensorProto::FLOAT)
    failNode(n, "weight '" + name + "' is not float32");
  b.setPlace(path + ": node '" + nodeName(n) + "' (" + n.op_type() + "): ");
  int id = b.param(name, dims(*c->second), init, std);
  values[name] = id;
  return id;
}

const onnx::NodeProto *
OnnxLowering::soleConsumer(const std::string &value) const {
  auto it = consumers.find(value);
  if (it == consumers.end() || it->second.size() != 1)
    return nullptr;
  for (const auto &out : model.graph().output())
    if (out.name() == value)
      return nullptr;
  return it->second[0];
}

void OnnxLowering::checkVersion(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    failNode(n, "op of domain '" + n.domain() + "' is not supported");
  auto ver = kOpVersions.find(op);
  if (ver == kOpVersions.end() && !isPrimitiveOp(op))
    failNode(n, "op '" + op +
                    "' is not supported (docs/model-format.md "
                    "lists the ONNX ops this reader lowers and keeps)");
  // An op kept as a primitive is not version-checked: its shape rule
  // (OnnxPrimitives.cpp) holds for opsets 13 to 21.
  int64_t since = ver == kOpVersions.end() ? opset : 0;
  if (ver != kOpVersions.end())
    for (int64_t v : ver->second)
      if (v <= opset)
        since = v;
  if (since == 0)
    failNode(n, "op '" + op + "' does not exist in opset " +
                    std::to_string(opset) + " (it appears in opset " +
                    std::to_string(ver->second.front()) + ")");
  if (n.output_size() < 1 || n.output(0).empty())
    failNode(n, "expected an output");
  // The inputs every lowering reads unconditionally (optional ones are
  // checked where read).
  static const std::set<std::string> binary = {"Add",
                                               "Conv",
                                               "Div",
                                               "Gather",
                                               "Gemm",
                                               "LayerNormalization",
                                               "MatMul",
                                               "Mul",
                                               "Pow",
                                               "Reshape",
                                               "SoftmaxCrossEntropyLoss"};
  int need = op == "Constant" ? 0 : binary.count(op) ? 2 : 1;
  for (int i = 0; i < need; ++i)
    if (i >= n.input_size() || n.input(i).empty())
      failNode(n, "expected at least " + std::to_string(need) + " input" +
                      (need > 1 ? "s" : ""));
}

void OnnxLowering::lower(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
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
  auto rankOf = [&](int t) { return (int64_t)b.shape(t).size(); };

  if (op == "Identity" || op == "Dropout") {
    if (op == "Dropout" && n.input_size() > 2 && !n.input(2).empty())
      failNode(n, "a training_mode input is not supported; export in "
                  "eval mode");
    define(n, value(n, 0));
    return;
  }
  if ((op == "Cast" || op == "CastLike") && castIsIdentity(n)) {
    define(n, value(n, 0));
    return;
  }
  if (op == "Gather") {
    if (attrInt(n, "axis", 0) != 0)
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
      return;
    }
    int ids = value(n, 1);
    int table = param(n, 0, "normal");
    define(n, add(n, "embedding", {ids, table}));
    return;
  }
  if (op == "MatMul") {
    int a = value(n, 0);
    // MatMul(x, Transpose(W)) with W an initializer [out,in]: torch's Linear
    // as the dynamo exporter writes it; W keeps its name and shape.
    const onnx::NodeProto *wt = transposedWeight(n.input(1));
    if (wt || consts.count(n.input(1)) ||
        (values.count(n.input(1)) &&
         b.graph().tensors[values[n.input(1)]].role == TensorRole::Parameter)) {
      int w = wt ? param(*wt, 0, "normal") : param(n, 1, "normal");
      if (b.shape(w).size() != 2)
        failNode(n, "a weight of rank 2 ([K,N]) is expected");
      int64_t outDim = b.shape(w)[wt ? 0 : 1];
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
      at["transpose_weight"] = wt != nullptr;
      int out = add(n, "linear", operands, at);
      define(n, out);
      if (addNode) {
        folded.insert(addNode);
        values[addNode->output(0)] = out;
      }
      return;
    }
    int bb = value(n, 1);
    define(n, add(n, "matmul", {a, bb}));
    return;
  }
  if (op == "Gemm") {
    if (attrInt(n, "transA", 0) != 0)
      failNode(n, "transA is not supported");
    const onnx::AttributeProto *alpha = attr(n, "alpha"),
                               *beta = attr(n, "beta");
    if ((alpha && alpha->f() != 1.0f) || (beta && beta->f() != 1.0f))
      failNode(n, "alpha and beta other than 1 are not supported");
    int a = value(n, 0);
    std::vector<int> operands = {a, param(n, 1, "normal")};
    if (n.input_size() > 2 && !n.input(2).empty())
      operands.push_back(param(n, 2, "zeros"));
    ops::Attrs at;
    at["transpose_weight"] = attrInt(n, "transB", 0) != 0;
    define(n, add(n, "linear", operands, at));
    return;
  }
  if (op == "SplitToSequence") { // read by its SequenceAt nodes
    splits[n.output(0)] = &n;
    return;
  }
  if (op == "SequenceAt") {
    sequenceAt(n);
    return;
  }
  if (op == "Add")
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
      define(n, add(n, "positional",
                    {x->second, param(*pos->second, 0, "normal")}));
      return;
    }
  if (op == "Add" || op == "Mul") {
    // A bias is a 1-D initializer (a computed constant is not a weight).
    bool c0 = isConst(n.input(0)) && consts.count(n.input(0)) &&
              consts[n.input(0)]->dims_size() == 1;
    bool c1 = isConst(n.input(1)) && consts.count(n.input(1)) &&
              consts[n.input(1)]->dims_size() == 1;
    if (op == "Add" && (c0 || c1) && !(c0 && c1)) {
      int x = value(n, c0 ? 1 : 0);
      int bias = param(n, c0 ? 0 : 1, "zeros");
      define(n, add(n, "bias_add", {x, bias}));
      return;
    }
    // Two activations of one shape (a residual); otherwise broadcasting or
    // a constant operand: a primitive.
    auto x = values.find(n.input(0)), y = values.find(n.input(1));
    if (x != values.end() && y != values.end() &&
        b.shape(x->second) == b.shape(y->second)) {
      define(n, add(n, op == "Add" ? "add" : "mul", {x->second, y->second}));
      return;
    }
    primitive(n);
    return;
  }
  if (op == "LayerNormalization") {
    int x = value(n, 0);
    int64_t axis = attrInt(n, "axis", -1);
    if (axis != -1 && axis != rankOf(x) - 1)
      failNode(n, "only normalisation over the last axis is supported");
    std::vector<int> operands = {x, param(n, 1, "ones")};
    if (n.input_size() > 2 && !n.input(2).empty())
      operands.push_back(param(n, 2, "zeros"));
    const onnx::AttributeProto *eps = attr(n, "epsilon");
    ops::Attrs at;
    at["epsilon"] = eps ? (double)eps->f() : 1e-5;
    define(n, add(n, "layernorm", operands, at));
    return;
  }
  if (op == "Gelu") {
    const onnx::AttributeProto *a = attr(n, "approximate");
    ops::Attrs at;
    at["approximate"] = a ? a->s() : std::string("none");
    define(n, add(n, "gelu", {value(n, 0)}, at));
    return;
  }
  if (op == "Relu") {
    define(n, add(n, "relu", {value(n, 0)}));
    return;
  }
  if (op == "Softmax") {
    ops::Attrs at;
    at["axis"] = attrInt(n, "axis", -1);
    define(n, add(n, "softmax", {value(n, 0)}, at));
    return;
  }
  if (op == "Conv") {
    int x = value(n, 0);
    if (attrInt(n, "group", 1) != 1)
      failNode(n, "grouped convolution is not supported");
    const onnx::AttributeProto *ap = attr(n, "auto_pad");
    if (ap && ap->s() != "NOTSET" && ap->s() != "VALID")
      failNode(n, "auto_pad '" + ap->s() + "' is not supported");
    for (int64_t d : attrInts(n, "dilations"))
      if (d != 1)
        failNode(n, "dilated convolution is not supported");
    std::vector<int64_t> s = attrInts(n, "strides"), p = attrInts(n, "pads");
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
    return;
  }
  if (op == "MaxPool" || op == "AveragePool") {
    std::vector<int64_t> k = attrInts(n, "kernel_shape"),
                         s = attrInts(n, "strides"), p = attrInts(n, "pads");
    if (s.empty())
      s = {1, 1};
    bool zeroPads =
        std::all_of(p.begin(), p.end(), [](int64_t v) { return v == 0; });
    const onnx::AttributeProto *ap = attr(n, "auto_pad");
    if (k.size() != 2 || k[0] != k[1] || s.size() != 2 || s[0] != s[1] ||
        !zeroPads || attrInt(n, "ceil_mode", 0) != 0 ||
        (ap && ap->s() != "NOTSET" && ap->s() != "VALID") ||
        n.output_size() > 1)
      failNode(n, "only square 2-D pooling with equal strides, no padding "
                  "and ceil_mode 0 is supported");
    for (int64_t d : attrInts(n, "dilations"))
      if (d != 1)
        failNode(n, "dilated pooling is not supported");
    ops::Attrs at;
    at["kind"] = std::string(op == "MaxPool" ? "max" : "avg");
    at["kernel"] = k[0];
    at["stride"] = s[0];
    define(n, add(n, "pool2d", {value(n, 0)}, at));
    return;
  }
  if (op == "Flatten" || op == "Reshape") {
    int x = value(n, 0);
    const ops::Shape &in = b.shape(x);
    ops::Shape out;
    if (op == "Flatten") {
      int64_t axis = attrInt(n, "axis", 1);
      if (axis < 0)
        axis += rankOf(x);
      if (axis < 0 || axis > rankOf(x))
        failNode(n, "axis out of range");
      if (axis == 1 && rankOf(x) > 1) {
        ops::Attrs at;
        at["start_dim"] = int64_t(1);
        define(n, add(n, "flatten", {x}, at));
        return;
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
      bool allowZero = attrInt(n, "allowzero", 0) != 0;
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
    return;
  }
  if (op == "Transpose") {
    int x = value(n, 0);
    std::vector<int64_t> perm = attrInts(n, "perm");
    if (perm.empty())
      for (int64_t i = rankOf(x) - 1; i >= 0; --i)
        perm.push_back(i);
    ops::Attrs at;
    at["perm"] = perm;
    define(n, add(n, "transpose", {x}, at));
    return;
  }
  if (op == "SoftmaxCrossEntropyLoss") {
    const onnx::AttributeProto *red = attr(n, "reduction");
    if (red && red->s() != "mean")
      failNode(n, "only reduction 'mean' is supported");
    if (attr(n, "ignore_index") || (n.input_size() > 2 && !n.input(2).empty()))
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
    return;
  }
  primitive(n);
}

ModelGraph OnnxLowering::run() {
  if (!model.has_graph())
    fail("not an ONNX model: no graph");
  readOpset();
  readInputs();
  std::vector<const onnx::NodeProto *> order = topoOrder();
  for (const onnx::NodeProto *n : order)
    if (n->op_type() == "Constant")
      readConstant(*n);
  for (GeluMatch &m : matchDecomposedGelu(
           model.graph(), [&](const std::string &v) { return scalar(v); })) {
    folded.insert(m.inner.begin(), m.inner.end());
    gelus[m.last] = std::move(m);
  }
  for (const onnx::NodeProto *n : order) {
    if (folded.count(n))
      checkVersion(*n);
    else if (n->op_type() != "Constant" && !fold(*n))
      lower(*n);
  }
  addLoss(); // OnnxLoss.cpp
  int64_t seq = 0;
  for (const TensorDef &t : b.graph().tensors)
    if (t.role == TensorRole::Input && t.dtype == ops::DType::I32 &&
        t.shape.size() == 2 && t.name != "targets") {
      seq = t.shape[1];
      break;
    }
  int64_t batch = o.batch;
  for (const TensorDef &t : b.graph().tensors)
    if (t.role == TensorRole::Input && !t.shape.empty()) {
      batch = t.shape[0];
      break;
    }
  b.setPlace(path + ": ");
  ModelGraph out = b.finish(loss, 0, batch, seq);
  out.numLayers = assignLayers(out);
  // Primitives left go to the fusion passes (ModelImporter.cpp:
  // fuseImportedGraph), which refuse one no pattern recognises.
  return out;
}

ModelGraph readOnnx(const std::string &data, const std::string &path,
                    const BuildOptions &o) {
  onnx::ModelProto model;
  if (data.empty() || data.size() > INT_MAX || !model.ParseFromString(data))
    throw UserError(path + ": not an ONNX model (the protobuf does not parse; "
                           "truncated or another format)");
  if (model.ir_version() <= 0 || !model.has_graph())
    throw UserError(path + ": not an ONNX model (no ir_version or no graph)");
  return OnnxLowering(path, model, o).run();
}

ModelGraph readOnnxFile(const std::string &path, const BuildOptions &o) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw UserError(path + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UserError(path + ": cannot open the file");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return readOnnx(bytes.str(), path, o);
}

} // namespace autoddl::import
