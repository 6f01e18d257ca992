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
    {"Split", {13, 18}},
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

void OnnxLowering::readInputs() {
  const onnx::GraphProto &g = model.graph();
  for (const auto &t : g.initializer()) {
    if (!consts.emplace(t.name(), &t).second)
      fail("initializer '" + t.name() + "' is given twice");
    checkData(t);
  }
  // A static batch (an export without a dynamic batch axis) is the one the
  // model runs at: a dynamic batch of another input is built at it too.
  for (const auto &in : g.input()) {
    const auto &shape = in.type().tensor_type().shape();
    if (consts.count(in.name()) || !in.type().has_tensor_type() ||
        shape.dim_size() == 0 || !shape.dim(0).has_dim_value() ||
        shape.dim(0).dim_value() < 1)
      continue;
    if (staticBatch == 0) {
      staticBatch = shape.dim(0).dim_value();
      staticBatchInput = in.name();
    } else if (shape.dim(0).dim_value() != staticBatch) {
      fail("input '" + in.name() + "' has a static batch of " +
           std::to_string(shape.dim(0).dim_value()) + " and input '" +
           staticBatchInput + "' one of " + std::to_string(staticBatch) +
           "; export every input with the same batch");
    }
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
               "; its micro-batch is that batch (export with a dynamic "
               "batch axis to run others)");
        shape.push_back(d.dim_value());
        continue;
      }
      std::string what = d.has_dim_param() ? " ('" + d.dim_param() + "')" : "";
      // A dynamic batch is built at the batch asked for (else another
      // input's static batch, else 1, as for a config.json: the planner
      // rebuilds it per micro-batch); any other dynamic dimension must be
      // pinned.
      if (i == 0)
        shape.push_back(o.batch > 0       ? o.batch
                        : staticBatch > 0 ? staticBatch
                                          : 1);
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
  return paramNamed(n, n.input(i), init, std);
}

int OnnxLowering::paramNamed(const onnx::NodeProto &n, const std::string &name,
                             const std::string &init, double std) {
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
  out.staticBatch = staticBatch;
  out.staticBatchInput = staticBatchInput;
  out.numLayers = assignLayers(out, scopes);
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
