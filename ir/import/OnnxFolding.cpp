//===- OnnxFolding.cpp - the ONNX reader's constants ---------------------===//
//
// With --batch and --seq pinned every shape is static, so a node whose inputs
// are all constants (initializers that are not weights, Constant nodes, Shape
// of a value of known shape, and what is computed from those) is a constant
// too: the causal mask, the rotary tables, reshape targets. Such nodes are
// recorded here and evaluated when something reads them (OnnxConstants.h),
// so an export's weight Transpose before MatMul stays a weight and large
// initializers are never materialised.
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxLowering.h"

#include <cstring>
#include <stdexcept>

namespace autoddl::import {

// Constants are buffers, not parameters: scalars of decomposed ops, shapes,
// masks, rotary tables.
void OnnxLowering::readConstant(const onnx::NodeProto &n) {
  checkVersion(n);
  try {
    evaluated[n.output(0)] = constantValue(n);
  } catch (const std::logic_error &e) {
    failNode(n, e.what());
  }
}

std::optional<double> OnnxLowering::scalar(const std::string &name) const {
  if (values.count(name))
    return std::nullopt;
  auto e = evaluated.find(name);
  if (e != evaluated.end())
    return e->second.numel() == 1 && e->second.type == onnx::TensorProto::FLOAT
               ? std::optional<double>((double)e->second.data[0])
               : std::nullopt;
  auto c = consts.find(name);
  if (c == consts.end())
    return std::nullopt;
  const onnx::TensorProto &t = *c->second;
  for (int64_t d : t.dims())
    if (d != 1)
      return std::nullopt;
  if (t.data_type() != onnx::TensorProto::FLOAT ||
      t.data_location() == onnx::TensorProto::EXTERNAL)
    return std::nullopt;
  if (t.float_data_size() == 1)
    return t.float_data(0);
  float v;
  if (t.raw_data().size() != sizeof v)
    return std::nullopt;
  std::memcpy(&v, t.raw_data().data(), sizeof v);
  return v;
}

// Records n as computed from constants when it is; false when it must be
// lowered (it reads an activation, or it reads a weight as one: a Gather of
// a float table is an embedding even at constant positions).
bool OnnxLowering::fold(const onnx::NodeProto &n) {
  const std::string &op = n.op_type();
  if ((!n.domain().empty() && n.domain() != "ai.onnx") || n.output_size() < 1 ||
      n.output(0).empty())
    return false;
  if (op == "Shape" && n.input_size() == 1) {
    auto v = values.find(n.input(0));
    if (v != values.end() &&
        b.graph().tensors[v->second].role != TensorRole::Parameter) {
      evaluated[n.output(0)] = shapeValue(n, b.shape(v->second));
      return true;
    }
    if (isConst(n.input(0))) {
      derived[n.output(0)] = &n;
      return true;
    }
    return false;
  }
  // CastLike reads only the element type of its second input: a constant
  // cast like an activation is a constant.
  if (op == "CastLike" && n.input_size() == 2 && isConst(n.input(0)) &&
      values.count(n.input(1))) {
    HostTensor like;
    like.type = onnxType(b.graph().tensors[values[n.input(1)]].dtype);
    like.data = {0};
    try {
      evaluated[n.output(0)] = evaluate(n, {&constant(n, n.input(0)), &like});
    } catch (const std::logic_error &e) {
      failNode(n, std::string("evaluating it on constants: ") + e.what());
    }
    return true;
  }
  // A weight's Transpose read only as MatMul's B is torch's Linear
  // (transposedWeight), even when the weight is already a parameter (a head
  // tied to the embedding); read otherwise it is lowered, never frozen.
  if (op == "Transpose" && n.input_size() == 1 && consts.count(n.input(0))) {
    auto users = consumers.find(n.output(0));
    bool linear = users != consumers.end();
    for (const onnx::NodeProto *u :
         linear ? users->second : std::vector<const onnx::NodeProto *>{})
      linear = linear && u->op_type() == "MatMul" && u->input_size() == 2 &&
               u->input(1) == n.output(0) && u->input(0) != n.output(0);
    if (!linear)
      return false;
    derived[n.output(0)] = &n;
    return true;
  }
  if (!canEvaluate(op) || n.input_size() == 0)
    return false;
  for (const std::string &in : n.input())
    if (!in.empty() && !isConst(in))
      return false;
  if (op == "Gather") {
    auto c = consts.find(n.input(0));
    if (c != consts.end() && c->second->data_type() == onnx::TensorProto::FLOAT)
      return false;
  }
  derived[n.output(0)] = &n;
  return true;
}

const HostTensor &OnnxLowering::constant(const onnx::NodeProto &user,
                                         const std::string &name) {
  auto e = evaluated.find(name);
  if (e != evaluated.end())
    return e->second;
  auto c = consts.find(name);
  if (c != consts.end()) {
    const onnx::TensorProto &t = *c->second;
    std::string raw = t.data_location() == onnx::TensorProto::EXTERNAL
                          ? externalBytes(t, &user)
                          : t.raw_data();
    try {
      return evaluated[name] = tensorFromProto(t, raw);
    } catch (const std::logic_error &err) {
      failNode(user, "initializer '" + name + "': " + err.what());
    }
  }
  auto d = derived.find(name);
  if (d == derived.end())
    failNode(user, "input '" + name + "' is not a constant");
  // The values it is computed from first, deepest first, without recursion
  // (a chain of thousands of nodes must not exhaust the stack).
  std::vector<const onnx::NodeProto *> pending = {d->second};
  while (!pending.empty()) {
    const onnx::NodeProto *top = pending.back(), *next = nullptr;
    for (const std::string &i : top->input()) {
      auto di = derived.find(i);
      if (!i.empty() && di != derived.end() && !evaluated.count(i)) {
        next = di->second;
        break;
      }
    }
    if (next) {
      pending.push_back(next);
      continue;
    }
    pending.pop_back();
    if (top != d->second)
      constant(user, top->output(0)); // its inputs are ready: one level deep
  }
  const onnx::NodeProto &n = *d->second;
  std::vector<const HostTensor *> in;
  for (const std::string &i : n.input())
    in.push_back(i.empty() ? nullptr : &constant(n, i));
  try {
    HostTensor out = n.op_type() == "Shape" ? shapeValue(n, in.at(0)->shape)
                                            : evaluate(n, in);
    return evaluated[name] = std::move(out);
  } catch (const std::logic_error &err) {
    failNode(n, std::string("evaluating it on constants: ") + err.what());
  }
}

std::vector<int64_t> OnnxLowering::constantInts(const onnx::NodeProto &user,
                                                const std::string &name) {
  const HostTensor &t = constant(user, name);
  if (t.type != onnx::TensorProto::INT64 && t.type != onnx::TensorProto::INT32)
    failNode(user, "constant '" + name + "' is " + typeName(t.type) +
                       ", expected int64");
  return std::vector<int64_t>(t.data.begin(), t.data.end());
}

// The Transpose node when `name` is a 2-D initializer transposed ([out,in]
// read as [in,out]: how a dynamo export writes torch's Linear), else null.
const onnx::NodeProto *
OnnxLowering::transposedWeight(const std::string &name) const {
  auto d = derived.find(name);
  if (d == derived.end() || d->second->op_type() != "Transpose")
    return nullptr;
  const onnx::NodeProto &t = *d->second;
  auto c = consts.find(t.input(0));
  if (c == consts.end() || c->second->dims_size() != 2 ||
      c->second->data_type() != onnx::TensorProto::FLOAT)
    return nullptr;
  const onnx::AttributeProto *perm = onnxAttr(t, "perm");
  if (perm &&
      !(perm->ints_size() == 2 && perm->ints(0) == 1 && perm->ints(1) == 0))
    return nullptr;
  return &t;
}

// Cast/CastLike of a float32 activation to float32 (an export's dtype
// bookkeeping) passes it through.
bool OnnxLowering::castIsIdentity(const onnx::NodeProto &n) {
  auto v = values.find(n.input(0));
  if (v == values.end() ||
      b.graph().tensors[v->second].dtype != ops::DType::F32)
    return false;
  if (n.op_type() == "Cast") {
    const onnx::AttributeProto *to = onnxAttr(n, "to");
    return to && to->i() == onnx::TensorProto::FLOAT;
  }
  if (n.input_size() < 2)
    return false;
  auto like = values.find(n.input(1));
  if (like != values.end())
    return b.graph().tensors[like->second].dtype == ops::DType::F32;
  return isConst(n.input(1)) &&
         constant(n, n.input(1)).type == onnx::TensorProto::FLOAT;
}

} // namespace autoddl::import
