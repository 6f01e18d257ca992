//===- OnnxPrimitives.cpp - shapes of ONNX nodes kept as primitives ------===//
//
// Shape rules from the ONNX operator specs (opsets 13 to 21) for the nodes an
// export computes on activations outside the vocabulary: elementwise ops with
// multidirectional broadcasting, Where, reductions, Slice, Concat,
// Unsqueeze/Squeeze, Expand: the elementwise sets, then one table of
// (op type -> shape rule) for the rest (kShapeRules), which also says which
// op types a primitive may have. Constant parameters (axes, starts, a target
// shape) are read from the inputs' values.
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxPrimitives.h"
#include "ir/import/OnnxLowering.h"

#include "backends/common/OnnxImage.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <variant>

namespace autoddl::import {

using T = onnx::TensorProto;

namespace {

[[noreturn]] void bad(const std::string &m) { throw std::invalid_argument(m); }

// Dropout: a training one (OnnxLowering::lowerIdentity).
const std::set<std::string> kUnary = {
    "Abs",        "Ceil",     "Cos",    "Erf",        "Exp",  "Floor",
    "Identity",   "Log",      "Neg",    "Reciprocal", "Relu", "Round",
    "Sigmoid",    "Sign",     "Sin",    "Sqrt",       "Tanh", "Softmax",
    "LogSoftmax", "Softplus", "Dropout"};
const std::set<std::string> kArith = {"Add", "Sub", "Mul", "Div",
                                      "Pow", "Max", "Min"};
const std::set<std::string> kCompare = {
    "Equal",          "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "And",  "Or",          "Xor"};

// Input i's values as integers; it must be a constant.
std::vector<int64_t> ints(const std::vector<PrimitiveInput> &in, size_t i,
                          const char *what) {
  if (i >= in.size() || !in[i].value)
    bad(std::string("its ") + what + " must be a constant");
  const HostTensor &t = *in[i].value;
  if (t.type != T::INT64 && t.type != T::INT32)
    bad(std::string("its ") + what + " is not an integer tensor");
  return std::vector<int64_t>(t.data.begin(), t.data.end());
}

std::vector<int64_t> axes(const onnx::NodeProto &n,
                          const std::vector<PrimitiveInput> &in) {
  if (in.size() > 1)
    return ints(in, 1, "axes");
  return onnxAttrInts(n, "axes");
}

std::vector<int64_t> reduceShape(const onnx::NodeProto &n,
                                 const std::vector<PrimitiveInput> &in) {
  const std::vector<int64_t> &x = in[0].shape;
  std::vector<int64_t> ax = axes(n, in);
  if (ax.empty() && onnxAttrInt(n, "noop_with_empty_axes", 0))
    return x;
  int64_t r = x.size();
  std::vector<bool> reduced(r, ax.empty());
  for (int64_t a : ax)
    reduced[onnxAxis(a, r)] = true;
  bool keep = onnxAttrInt(n, "keepdims", 1) != 0;
  std::vector<int64_t> out;
  for (int64_t d = 0; d < r; ++d)
    if (!reduced[d])
      out.push_back(x[d]);
    else if (keep)
      out.push_back(1);
  return out;
}

std::vector<int64_t> concatShape(const onnx::NodeProto &n,
                                 const std::vector<PrimitiveInput> &in) {
  const onnx::AttributeProto *a = onnxAttr(n, "axis");
  if (!a)
    bad("Concat without an axis");
  std::vector<int64_t> out = in[0].shape;
  int64_t r = out.size(), ax = onnxAxis(a->i(), r);
  for (size_t i = 1; i < in.size(); ++i) {
    if ((int64_t)in[i].shape.size() != r)
      bad("Concat inputs differ in rank");
    for (int64_t d = 0; d < r; ++d)
      if (d != ax && in[i].shape[d] != out[d])
        bad("Concat inputs differ off the axis");
    out[ax] += in[i].shape[ax];
  }
  return out;
}

std::vector<int64_t> unsqueezeShape(const onnx::NodeProto &n,
                                    const std::vector<PrimitiveInput> &in) {
  return unsqueezedShape(in[0].shape, axes(n, in));
}

std::vector<int64_t> squeezeShape(const onnx::NodeProto &n,
                                  const std::vector<PrimitiveInput> &in) {
  return squeezedShape(in[0].shape, axes(n, in));
}

std::vector<int64_t> reshapeShape(const onnx::NodeProto &n,
                                  const std::vector<PrimitiveInput> &in) {
  std::vector<int64_t> out = ints(in, 1, "target shape");
  const std::vector<int64_t> &x = in[0].shape;
  int64_t total = 1, known = 1, infer = -1;
  for (int64_t d : x)
    total *= d;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !onnxAttrInt(n, "allowzero", 0))
      out[i] = i < x.size() ? x[i] : 0;
    if (out[i] == -1 && infer < 0)
      infer = i;
    else if (out[i] <= 0)
      bad("target shape has a non-positive dimension");
    else
      known *= out[i];
  }
  if (infer >= 0)
    out[infer] = known && total % known == 0 ? total / known : 0;
  int64_t count = 1;
  for (int64_t d : out)
    count *= d;
  if (count != total || (infer >= 0 && out[infer] == 0))
    bad("reshape changes the element count");
  return out;
}

// Inputs `from`.. broadcast together (multidirectional broadcasting).
std::vector<int64_t> broadcastFrom(const std::vector<PrimitiveInput> &in,
                                   size_t from) {
  std::vector<int64_t> s = in[from].shape;
  for (size_t i = from + 1; i < in.size(); ++i)
    s = broadcastShapes(s, in[i].shape);
  return s;
}

// The shape rules of the ops neither elementwise nor broadcasting: each sets
// what differs from its first input's shape and type.
using ShapeRule = void (*)(const onnx::NodeProto &,
                           const std::vector<PrimitiveInput> &,
                           PrimitiveResult &);

void boolOf(const onnx::NodeProto &, const std::vector<PrimitiveInput> &,
            PrimitiveResult &r) {
  r.type = T::BOOL;
}

void castTo(const onnx::NodeProto &n, const std::vector<PrimitiveInput> &,
            PrimitiveResult &r) {
  const onnx::AttributeProto *to = onnxAttr(n, "to");
  if (!to)
    bad("Cast without 'to'");
  r.type = to->i();
}

void castLike(const onnx::NodeProto &, const std::vector<PrimitiveInput> &in,
              PrimitiveResult &r) {
  if (in.size() < 2)
    bad("expected two inputs");
  r.type = in[1].type;
}

void where(const onnx::NodeProto &, const std::vector<PrimitiveInput> &in,
           PrimitiveResult &r) {
  if (in.size() < 3)
    bad("expected three inputs");
  r.shape = broadcastFrom(in, 0);
  r.type = in[1].type;
}

void reduced(const onnx::NodeProto &n, const std::vector<PrimitiveInput> &in,
             PrimitiveResult &r) {
  r.shape = reduceShape(n, in);
}

void sliced(const onnx::NodeProto &, const std::vector<PrimitiveInput> &in,
            PrimitiveResult &r) {
  auto opt = [&](size_t i) {
    return i < in.size() ? ints(in, i, "axes or steps")
                         : std::vector<int64_t>{};
  };
  r.shape = sliceWindow(in[0].shape, ints(in, 1, "starts"), ints(in, 2, "ends"),
                        opt(3), opt(4))
                .shape;
}

void concatenated(const onnx::NodeProto &n,
                  const std::vector<PrimitiveInput> &in, PrimitiveResult &r) {
  r.shape = concatShape(n, in);
}

void unsqueezed(const onnx::NodeProto &n, const std::vector<PrimitiveInput> &in,
                PrimitiveResult &r) {
  r.shape = unsqueezeShape(n, in);
}

void squeezed(const onnx::NodeProto &n, const std::vector<PrimitiveInput> &in,
              PrimitiveResult &r) {
  r.shape = squeezeShape(n, in);
}

void expanded(const onnx::NodeProto &, const std::vector<PrimitiveInput> &in,
              PrimitiveResult &r) {
  r.shape = broadcastShapes(in[0].shape, ints(in, 1, "shape"));
}

void reshaped(const onnx::NodeProto &n, const std::vector<PrimitiveInput> &in,
              PrimitiveResult &r) {
  r.shape = reshapeShape(n, in);
}

void transposed(const onnx::NodeProto &n, const std::vector<PrimitiveInput> &in,
                PrimitiveResult &r) {
  const onnx::AttributeProto *p = onnxAttr(n, "perm");
  int64_t rank = in[0].shape.size();
  if (p && p->ints_size() != rank)
    bad("Transpose's perm has " + std::to_string(p->ints_size()) +
        " entries for rank " + std::to_string(rank));
  r.shape.clear();
  for (int64_t i = 0; i < rank; ++i)
    r.shape.push_back(
        in[0].shape[onnxAxis(p ? p->ints(i) : rank - 1 - i, rank)]);
}

// The pools and batch norm as OnnxImage.h computes them (the lowering
// resolved auto_pad into pads).
void pooled(const onnx::NodeProto &n, const std::vector<PrimitiveInput> &in,
            PrimitiveResult &r) {
  const onnx::AttributeProto *ap = onnxAttr(n, "auto_pad");
  if (ap && ap->s() != "NOTSET")
    bad("auto_pad '" + ap->s() + "' left unresolved");
  onnx_kernels::PoolWindow w;
  if (std::string e = onnx_kernels::poolWindow(
          in[0].shape, onnxAttrInts(n, "kernel_shape"),
          onnxAttrInts(n, "strides"), onnxAttrInts(n, "pads"),
          onnxAttrInts(n, "dilations"), onnxAttrInt(n, "ceil_mode", 0) != 0, w);
      !e.empty())
    bad(e);
  r.shape = onnx_kernels::poolShape(in[0].shape, w);
}

void globalPooled(const onnx::NodeProto &,
                  const std::vector<PrimitiveInput> &in, PrimitiveResult &r) {
  if (in[0].shape.size() < 3)
    bad("a global pool of a tensor of rank below 3");
  for (size_t d = 2; d < r.shape.size(); ++d)
    r.shape[d] = 1;
}

void normalised(const onnx::NodeProto &, const std::vector<PrimitiveInput> &in,
                PrimitiveResult &) {
  if (in[0].shape.size() < 2)
    bad("BatchNormalization of a tensor of rank below 2");
}

const std::map<std::string, ShapeRule> kShapeRules = {
    {"MaxPool", pooled},
    {"AveragePool", pooled},
    {"GlobalAveragePool", globalPooled},
    {"GlobalMaxPool", globalPooled},
    {"BatchNormalization", normalised},
    {"IsNaN", boolOf},
    {"Not", boolOf},
    {"Cast", castTo},
    {"CastLike", castLike},
    {"Where", where},
    {"ReduceMean", reduced},
    {"ReduceSum", reduced},
    {"ReduceMax", reduced},
    {"Slice", sliced},
    {"Concat", concatenated},
    {"Unsqueeze", unsqueezed},
    {"Squeeze", squeezed},
    {"Expand", expanded},
    {"Reshape", reshaped},
    {"Transpose", transposed}};

} // namespace

bool isPrimitiveOp(const std::string &op) {
  return kUnary.count(op) || kArith.count(op) || kCompare.count(op) ||
         kShapeRules.count(op);
}

PrimitiveResult inferPrimitive(const onnx::NodeProto &n,
                               const std::vector<PrimitiveInput> &in) {
  const std::string &op = n.op_type();
  if (in.empty())
    bad("expected at least one input");
  PrimitiveResult r{in[0].shape, in[0].type};
  if (kUnary.count(op))
    return r;
  if (kArith.count(op) || kCompare.count(op)) {
    if (in.size() < 2 && op != "Max" && op != "Min")
      bad("expected two inputs");
    r.shape = broadcastFrom(in, 0);
    if (kCompare.count(op))
      r.type = T::BOOL;
    return r;
  }
  auto rule = kShapeRules.find(op);
  if (rule == kShapeRules.end())
    bad("op '" + op + "' has no shape rule");
  rule->second(n, in, r);
  return r;
}

ops::Attrs primitiveAttrs(const onnx::NodeProto &n) {
  ops::Attrs at;
  at["op_type"] = n.op_type();
  for (const auto &a : n.attribute()) {
    switch (a.type()) {
    case onnx::AttributeProto::INT:
      at[a.name()] = (int64_t)a.i();
      break;
    case onnx::AttributeProto::FLOAT:
      at[a.name()] = (double)a.f();
      break;
    case onnx::AttributeProto::INTS:
      at[a.name()] = std::vector<int64_t>(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::STRING:
      at[a.name()] = a.s();
      break;
    default:
      bad("attribute '" + a.name() + "' is of a type the IR does not hold");
    }
  }
  return at;
}

ops::DType irType(int32_t onnxType) {
  switch (onnxType) {
  case T::FLOAT:
    return ops::DType::F32;
  case T::FLOAT16:
    return ops::DType::F16;
  case T::BFLOAT16:
    return ops::DType::BF16;
  case T::INT64:
    return ops::DType::I64;
  case T::BOOL:
    return ops::DType::Bool;
  case T::DOUBLE:
    bad("float64 activations are not supported");
  default:
    return ops::DType::I32;
  }
}

int32_t onnxType(ops::DType t) {
  switch (t) {
  case ops::DType::F32:
    return T::FLOAT;
  case ops::DType::F16:
    return T::FLOAT16;
  case ops::DType::BF16:
    return T::BFLOAT16;
  case ops::DType::I64:
    return T::INT64;
  case ops::DType::Bool:
    return T::BOOL;
  default:
    return T::INT32;
  }
}

int64_t assignLayers(ModelGraph &g,
                     const std::vector<std::pair<size_t, int64_t>> &scoped) {
  static const std::regex kLayer(R"((^|\.)(layers|h)\.([0-9]+)\.)");
  std::vector<int> layer(g.ops.size(), -1);
  std::vector<bool> fixed(g.ops.size(), false);
  // An op the exporter's name scopes placed (OnnxLowering::scopeLayer) keeps
  // its layer, -1 included.
  std::vector<bool> placed(g.ops.size(), false);
  for (auto [i, l] : scoped)
    if (i < g.ops.size()) {
      layer[i] = static_cast<int>(l);
      fixed[i] = placed[i] = true;
    }
  std::vector<std::vector<int>> readers(g.tensors.size());
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (int t : g.ops[i].operands) {
      readers[t].push_back(i);
      if (g.tensors[t].role != TensorRole::Parameter || placed[i])
        continue;
      std::smatch m;
      fixed[i] = true;
      if (std::regex_search(g.tensors[t].name, m, kLayer))
        layer[i] = std::stoi(m[3].str());
    }
  // An op without parameters right after one with (a head reshape after
  // its projection, the residual add after a block's last linear) is in
  // that op's layer; any other in its readers' first (a norm before the
  // projections it feeds). Ops are in topological order.
  std::vector<int> producer(g.tensors.size(), -1);
  // "Right after" looks through reshapes and transposes (GPT-2's Conv1D
  // output is reshaped before the residual add).
  std::vector<bool> source = fixed;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    producer[g.ops[i].results[0]] = i;
    if (fixed[i])
      continue;
    for (int t : g.ops[i].operands) {
      int p = producer[t];
      if (p >= 0 && source[p] && layer[p] > layer[i])
        layer[i] = layer[p];
    }
    fixed[i] = layer[i] >= 0;
    const std::string &k = g.ops[i].kind;
    source[i] = fixed[i] && (k == "reshape" || k == "transpose");
  }
  for (size_t i = g.ops.size(); i-- > 0;) {
    if (fixed[i])
      continue;
    for (int r : readers[g.ops[i].results[0]])
      if (layer[r] >= 0 && (layer[i] < 0 || layer[r] < layer[i]))
        layer[i] = layer[r];
  }
  int64_t count = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    g.ops[i].layer = layer[i];
    count = std::max<int64_t>(count, layer[i] + 1);
  }
  return count;
}

void nameLayerOps(ModelGraph &g) {
  static const std::regex kLayer(R"((^|\.)(layers|h)\.([0-9]+)\.)");
  // Per op of a layer, its name inside the layer: the module path of the
  // layer parameter it reads ("attn.c_attn" of "...h.3.attn.c_attn.weight"),
  // else its kind ("attention", a primitive's ONNX op type "mul"); per layer,
  // the word that groups the layers ("h", "layers"; "layers" where no
  // parameter names it).
  std::vector<std::string> local(g.ops.size());
  std::map<int, std::string> group;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpDef &op = g.ops[i];
    if (op.layer < 0)
      continue;
    for (int t : op.operands) {
      const TensorDef &td = g.tensors[size_t(t)];
      std::smatch m;
      if (td.role != TensorRole::Parameter ||
          !std::regex_search(td.name, m, kLayer) ||
          m[3].str() != std::to_string(op.layer))
        continue;
      group.emplace(op.layer, m[2].str());
      const std::string path = m.suffix().str(); // "attn.c_attn.weight"
      const size_t dot = path.rfind('.');        // none: "h.3.weight"
      local[i] = dot == std::string::npos ? "" : path.substr(0, dot);
      if (!local[i].empty())
        break;
    }
    auto type = op.attrs.find("op_type");
    const std::string *opType = type == op.attrs.end()
                                    ? nullptr
                                    : std::get_if<std::string>(&type->second);
    if (local[i].empty() && op.kind == "primitive" && opType)
      for (char c : *opType)
        local[i] += char(std::tolower(static_cast<unsigned char>(c)));
    if (local[i].empty())
      local[i] = op.kind;
  }
  // The names outside the layers stay; a layer's op and its result become
  // "<group>.<layer>.<local>", the k-th repeat of a local in a layer
  // "<local>_<k>", so every layer of one structure has the same names.
  std::set<std::string> taken;
  for (size_t t = 0; t < g.tensors.size(); ++t)
    taken.insert(g.tensors[t].name);
  for (const OpDef &op : g.ops)
    if (op.layer < 0)
      taken.insert(op.name);
  std::map<std::pair<int, std::string>, int> repeats;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    OpDef &op = g.ops[i];
    if (op.layer < 0)
      continue;
    auto gi = group.find(op.layer);
    const std::string prefix =
        (gi == group.end() ? std::string("layers") : gi->second) + "." +
        std::to_string(op.layer) + ".";
    int &k = repeats[{op.layer, local[i]}];
    std::string name;
    do // a name the graph holds already (an ONNX tensor's) is skipped
      name = prefix + local[i] + (k ? "_" + std::to_string(k) : "");
    while (++k, taken.count(name));
    taken.insert(name);
    op.name = name;
    for (size_t r = 0; r < op.results.size(); ++r) {
      std::string &result = g.tensors[size_t(op.results[r])].name;
      result = r ? name + "_" + std::to_string(r) : name;
      taken.insert(result);
    }
  }
}

// A constant a primitive reads becomes a Constant tensor under its ONNX name,
// once however many primitives read it.
int OnnxLowering::constantTensor(const onnx::NodeProto &user,
                                 const std::string &name) {
  auto it = constantTensors.find(name);
  if (it != constantTensors.end())
    return it->second;
  const HostTensor &v = constant(user, name);
  ops::DType dtype;
  try {
    dtype = irType(v.type);
  } catch (const std::logic_error &e) {
    failNode(user, "constant '" + name + "': " + e.what());
  }
  b.setPlace(path + ": node '" + nodeName(user) + "' (" + user.op_type() +
             "): ");
  int id = b.constant(name, v.shape, dtype,
                      std::vector<double>(v.data.begin(), v.data.end()));
  constantTensors[name] = id;
  return id;
}

// A node outside the vocabulary that reads an activation: kept as itself for
// the fusion passes. A float initializer it reads that is more than a scalar
// is a weight (a norm's scale), so a parameter, unless it is a buffer
// (isBuffer); other constants are Constant tensors.
void OnnxLowering::primitive(const onnx::NodeProto &n, int position) {
  const std::string &op = n.op_type();
  if (!isPrimitiveOp(op))
    failNode(n, "op '" + op +
                    "' is not supported (docs/model-format.md lists the ONNX "
                    "ops this reader lowers and keeps)");
  std::vector<int> operands;
  std::vector<PrimitiveInput> in;
  for (int i = 0; i < n.input_size(); ++i) {
    const std::string &name = n.input(i);
    if (name.empty())
      failNode(n, "an omitted optional input is not supported here");
    if (op == "BatchNormalization" && i >= 3) { // running mean and var
      operands.push_back(runningStat(n, i));
      in.push_back({b.shape(operands.back()), T::FLOAT, nullptr});
      continue;
    }
    auto c = consts.find(name);
    int64_t count = 1;
    if (c != consts.end())
      for (int64_t d : c->second->dims())
        count *= d;
    const bool weight =
        c != consts.end() && c->second->dims_size() >= 1 &&
        c->second->data_type() == T::FLOAT && count > 1 &&
        (values.count(name) || untied.count(untiedName(n, name)) ||
         !isBuffer(n, name));
    int own = -1; // the parameter this node reads at input i
    if (weight)
      own = weightParam(n, i,
                        c->second->dims_size() != 1 ? "normal"
                        : op == "Mul" || (op == "BatchNormalization" && i == 1)
                            ? "ones"
                            : "zeros");
    if (own >= 0 || values.count(name)) {
      int t = own >= 0 ? own : values[name];
      operands.push_back(t);
      in.push_back({b.shape(t), onnxType(b.graph().tensors[t].dtype), nullptr});
    } else if (isConst(name)) {
      operands.push_back(constantTensor(n, name));
      in.push_back({constant(n, name).shape, constant(n, name).type,
                    &constant(n, name)});
    } else {
      failNode(n, "input '" + name + "' is not defined before use");
    }
  }
  PrimitiveResult r;
  ops::Attrs at;
  ops::DType dtype;
  try {
    r = inferPrimitive(n, in);
    at = primitiveAttrs(n);
    dtype = irType(r.type);
  } catch (const std::logic_error &e) {
    failNode(n, e.what());
  }
  b.setPlace(path + ": node '" + nodeName(n) + "' (" + op + "): ");
  define(n, b.primitive(op, nodeName(n), std::move(operands), std::move(at),
                        {r.shape, dtype}, n.output(0),
                        position >= 0 ? position : nodeIndex(n)));
  noteScope(position >= 0 ? model.graph().node(position) : n);
}

int64_t OnnxLowering::scopeLayer(const onnx::NodeProto &n) const {
  // NodeProto's metadata_props (field 9 since onnx 1.16) postdates
  // the onnx.proto this reader is built with: read from the unknown fields.
  static const std::regex kScopeLayer(R"((^|[.'])(layers|h)\.([0-9]+)[.'])");
  const auto &unknown = n.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto &f = unknown.field(i);
    onnx::StringStringEntryProto e;
    if (f.number() != 9 ||
        f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED ||
        !e.ParseFromString(f.length_delimited()) ||
        e.key() != "pkg.torch.onnx.name_scopes")
      continue;
    std::smatch m;
    return std::regex_search(e.value(), m, kScopeLayer) ? std::stoll(m[3].str())
                                                        : -1;
  }
  return -2;
}

// Parts of `chunk` elements along a dimension of `dim`, the last smaller
// (none when chunk <= 0).
static std::vector<int64_t> equalParts(int64_t dim, int64_t chunk) {
  std::vector<int64_t> sizes;
  for (int64_t at = 0; chunk > 0 && at < dim; at += chunk)
    sizes.push_back(std::min(chunk, dim - at));
  return sizes;
}

// The axis a Split or SplitToSequence node cuts of its input, an activation,
// and that axis's extent.
std::pair<int64_t, int64_t>
OnnxLowering::splitAxis(const onnx::NodeProto &split) {
  auto x = values.find(split.input(0));
  if (x == values.end())
    failNode(split,
             "the input of a " + split.op_type() + " must be an activation");
  const ops::Shape &xs = b.shape(x->second);
  try {
    const int64_t axis = onnxAxis(onnxAttrInt(split, "axis", 0), xs.size());
    return {axis, xs[axis]};
  } catch (const std::logic_error &e) {
    failNode(split, e.what());
  }
}

// SequenceAt(SplitToSequence(x, split, axis), k) (GPT-2's qkv split in a
// dynamo export): the IR holds no sequences, so it is the primitive Slice of
// x that gives the same part, its starts/ends/axes constants named after it.
void OnnxLowering::sequenceAt(const onnx::NodeProto &n) {
  auto sp = n.input_size() == 2 ? splits.find(n.input(0)) : splits.end();
  if (sp == splits.end() || !isConst(n.input(1)))
    failNode(n, "only a SequenceAt of a SplitToSequence at a constant "
                "position is supported");
  const onnx::NodeProto &split = *sp->second;
  const auto [axis, dim] = splitAxis(split);
  std::vector<int64_t> sizes;
  try {
    if (split.input_size() > 1 && !split.input(1).empty()) {
      sizes = constantInts(split, split.input(1));
      if (constant(split, split.input(1)).shape.empty()) // equal chunks
        sizes = equalParts(dim, sizes.at(0));
    } else {
      if (!onnxAttrInt(split, "keepdims", 1) || dim > (1 << 20))
        bad("a SplitToSequence into single elements without keepdims or "
            "of more than 2^20 parts");
      sizes.assign(dim, 1);
    }
    int64_t total = 0;
    for (int64_t v : sizes)
      total += v < 0 ? dim + 1 : v;
    if (total != dim)
      bad("the split sizes do not add up to the axis");
  } catch (const std::logic_error &e) {
    failNode(split, e.what());
  }
  std::vector<int64_t> k = constantInts(n, n.input(1));
  int64_t parts = sizes.size();
  if (k.size() != 1 || k[0] < -parts || k[0] >= parts)
    failNode(n, "position out of range of the " + std::to_string(parts) +
                    " parts");
  int64_t part = k[0] < 0 ? k[0] + parts : k[0], start = 0;
  for (int64_t i = 0; i < part; ++i)
    start += sizes[i];
  slicePart(n, split.input(0), start, start + sizes[part], axis, n.output(0));
}

// The primitive Slice of x along `axis` from `start` to `end`, defining
// `out`, named after n and placed at its position.
void OnnxLowering::slicePart(const onnx::NodeProto &n, const std::string &x,
                             int64_t start, int64_t end, int64_t axis,
                             const std::string &out) {
  onnx::NodeProto &slice = madeNodes.emplace_back();
  slice.set_op_type("Slice");
  slice.set_name(n.output_size() > 1 ? nodeName(n) + "." + out : nodeName(n));
  slice.add_input(x);
  const int64_t bounds[3] = {start, end, axis};
  const char *what[3] = {".starts", ".ends", ".axes"};
  for (int i = 0; i < 3; ++i) {
    HostTensor c;
    c.type = T::INT64;
    c.shape = {1};
    c.data = {(long double)bounds[i]};
    evaluated[out + what[i]] = c;
    slice.add_input(out + what[i]);
  }
  slice.add_output(out);
  primitive(slice, nodeIndex(n));
}

// Split (GPT-2's qkv split in a default dynamo export): one primitive Slice
// per output, as for SequenceAt.
void OnnxLowering::splitParts(const onnx::NodeProto &n) {
  const auto [axis, dim] = splitAxis(n);
  const int64_t outputs = n.output_size();
  std::vector<int64_t> sizes;
  try {
    if (n.input_size() > 1 && !n.input(1).empty()) {
      sizes = constantInts(n, n.input(1));
    } else {
      // Equal parts (opset 18's num_outputs, else one per output).
      const int64_t parts = onnxAttrInt(n, "num_outputs", outputs);
      sizes = equalParts(dim, parts > 0 ? (dim + parts - 1) / parts : 0);
    }
    int64_t total = 0;
    for (int64_t v : sizes)
      total += v;
    if ((int64_t)sizes.size() != outputs || total != dim)
      bad("the split sizes do not make up the axis in " +
          std::to_string(outputs) + " parts");
  } catch (const std::logic_error &e) {
    failNode(n, e.what());
  }
  int64_t start = 0;
  for (int64_t k = 0; k < outputs; ++k) {
    if (!n.output(k).empty())
      slicePart(n, n.input(0), start, start + sizes[k], axis, n.output(k));
    start += sizes[k];
  }
}

} // namespace autoddl::import
