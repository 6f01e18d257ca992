//===- GraphBuilder.cpp ---------------------------------------------------===//
#include "ir/import/GraphBuilder.h"

#include "support/UserError.h"

namespace autoddl::import {

GraphBuilder::GraphBuilder(std::string name, std::string family,
                           std::string place)
    : place_(std::move(place)) {
  g.name = std::move(name);
  g.family = std::move(family);
}

void GraphBuilder::fail(const std::string &message) const {
  throw UserError(place_ + message);
}

int GraphBuilder::find(const std::string &name) const {
  auto it = byName.find(name);
  return it == byName.end() ? -1 : it->second;
}

int GraphBuilder::addTensor(TensorDef t) {
  if (t.name.empty())
    fail("empty tensor name");
  if (byName.count(t.name))
    fail("duplicate tensor name '" + t.name + "'");
  __int128 elems = 1;
  for (int64_t d : t.shape) {
    if (d <= 0)
      fail("tensor '" + t.name + "': expected positive sizes, got " +
           std::to_string(d));
    elems *= d;
    if (elems > INT64_MAX)
      fail("tensor '" + t.name + "': element count overflows int64");
  }
  int id = g.tensors.size();
  byName[t.name] = id;
  g.tensors.push_back(std::move(t));
  return id;
}

int GraphBuilder::input(const std::string &name, ops::Shape shape,
                        ops::DType dtype) {
  TensorDef t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.role = TensorRole::Input;
  return addTensor(std::move(t));
}

int GraphBuilder::sparseInput(const std::string &name, ops::Shape shape,
                              int64_t nnz) {
  int id = input(name, std::move(shape));
  TensorDef &t = g.tensors[id];
  __int128 cap = (__int128)t.shape.at(0) * t.shape.at(1);
  if (nnz < 0 || nnz > cap)
    fail("sparse input '" + name + "': expected nnz in [0, rows*cols], got " +
         std::to_string(nnz));
  t.sparse = true;
  t.nnz = nnz;
  return id;
}

int GraphBuilder::param(const std::string &name, ops::Shape shape,
                        const std::string &init, double std) {
  if (init != "normal" && init != "zeros" && init != "ones")
    fail("parameter '" + name +
         "': expected init \"normal\", \"zeros\" or "
         "\"ones\", got \"" +
         init + "\"");
  if (init == "normal" && !(std >= 0))
    fail("parameter '" + name + "': expected a non-negative init_std");
  TensorDef t;
  t.name = name;
  t.shape = std::move(shape);
  t.role = TensorRole::Parameter;
  t.init = init;
  t.initStd = init == "normal" ? std : 0.0;
  return addTensor(std::move(t));
}

int GraphBuilder::constant(const std::string &name, ops::Shape shape,
                           ops::DType dtype, std::vector<double> values) {
  if (dtype != ops::DType::F32 && dtype != ops::DType::I32 &&
      dtype != ops::DType::I64 && dtype != ops::DType::Bool)
    fail("constant '" + name +
         "': expected f32, i32, i64 or i1 elements, got " +
         std::string(ops::dtypeName(dtype)));
  TensorDef t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.role = TensorRole::Constant;
  int id = addTensor(std::move(t));
  int64_t elems = 1;
  for (int64_t d : g.tensors[id].shape)
    elems *= d; // addTensor checked it fits
  if (int64_t(values.size()) != elems)
    fail("constant '" + name + "': expected " + std::to_string(elems) +
         " values, got " + std::to_string(values.size()));
  g.tensors[id].values = std::move(values);
  return id;
}

int GraphBuilder::buffer(const std::string &name, ops::Shape shape,
                         std::vector<double> values) {
  const int id =
      constant(name, std::move(shape), ops::DType::F32, std::move(values));
  g.tensors[id].buffer = true;
  return id;
}

int GraphBuilder::primitive(const std::string &opType, const std::string &name,
                            std::vector<int> operands, ops::Attrs attrs,
                            const ops::ValueType &result,
                            const std::string &resultName, int position) {
  if (opType.empty() || !(opType[0] >= 'A' && opType[0] <= 'Z'))
    fail("op '" + name + "': expected an ONNX operator name, got '" + opType +
         "'");
  if (!opNames.insert(name).second)
    fail("duplicate op name '" + name + "'");
  TensorDef out;
  out.name = resultName.empty() ? name : resultName;
  out.shape = result.shape;
  out.dtype = result.dtype;
  int id = addTensor(std::move(out));
  attrs["op_type"] = opType;
  OpDef o;
  o.kind = "primitive";
  o.name = name;
  o.operands = std::move(operands);
  o.results = {id};
  o.attrs = std::move(attrs);
  o.layer = layer_;
  o.position = position;
  g.ops.push_back(std::move(o));
  return id;
}

int GraphBuilder::op(const std::string &kind, const std::string &name,
                     std::vector<int> operands, ops::Attrs attrs,
                     const std::string &result) {
  const ops::OpInfo *info = ops::lookupOp(kind);
  if (!info || kind == "parameter")
    fail("op '" + name + "': unknown op kind '" + kind + "'");
  if (!opNames.insert(name).second)
    fail("duplicate op name '" + name + "'");
  const std::vector<ops::ValueType> types = g.valueTypes(operands);
  attrs = ops::withDefaults(kind, attrs);
  ops::InferResult inferred = ops::inferResultTypes(kind, types, attrs);
  if (!inferred.ok())
    fail("op '" + name + "' (" + kind + "): " + inferred.error);
  return append(kind, name, std::move(operands), std::move(attrs),
                inferred.results[0].shape, inferred.results[0].dtype, result);
}

int GraphBuilder::append(const std::string &kind, const std::string &name,
                         std::vector<int> operands, ops::Attrs attrs,
                         ops::Shape shape, ops::DType dtype,
                         const std::string &result) {
  TensorDef out;
  out.name = result.empty() ? name : result;
  out.shape = std::move(shape);
  out.dtype = dtype;
  int id = addTensor(std::move(out));
  OpDef o;
  o.kind = kind;
  o.name = name;
  o.operands = std::move(operands);
  o.results = {id};
  o.attrs = std::move(attrs);
  o.layer = layer_;
  g.ops.push_back(std::move(o));
  return id;
}

ModelGraph GraphBuilder::finish(int loss, int64_t numLayers, int64_t batch,
                                int64_t seq) {
  if (loss < 0 || g.tensors[loss].role != TensorRole::Activation ||
      !g.tensors[loss].shape.empty())
    fail("the loss must be a scalar produced by an op");
  // Per tensor and per op, sizes were checked; the totals must fit as well.
  __int128 params = 0, flops = 0;
  for (const TensorDef &t : g.tensors)
    if (t.role == TensorRole::Parameter) {
      __int128 n = 1;
      for (int64_t d : t.shape)
        n *= d;
      params += n;
    }
  for (const OpDef &o : g.ops)
    flops += g.opForwardFlops(o);
  if (params > INT64_MAX)
    fail("the model's parameter count overflows int64");
  if (flops > INT64_MAX)
    fail("the model's forward FLOPs overflow int64");
  g.loss = loss;
  g.numLayers = numLayers;
  g.batch = batch;
  g.seq = seq;
  return std::move(g);
}

} // namespace autoddl::import
