//===- OnnxParameters.cpp - which initializers are PyTorch's parameters ---===//
//
// An export carries PyTorch's parameters, buffers and folded constants alike
// as initializers, and the dynamo exporter's optimizer (on by default) folds,
// merges and renames them. What is read here from the graph and the values
// makes the parameters the ones PyTorch's module.parameters() holds: buffers
// told apart by their values (isBuffer), merged uniform weights untied per
// reader (weightParam), a head's folded transpose tied back to its table
// (tiedTable). docs/model-format.md "Parameters".
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxLowering.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace autoddl::import {

using T = onnx::TensorProto;

// PyTorch's buffers and folded constants reach an export as initializers as
// its parameters do (the dynamo exporter's optimizer folds a static export's
// causal mask and rotary tables into them). Two value patterns tell them
// apart, as a weight never has them: an additive mask (every element 0 or
// below -1e9, some below) and a rotary table (varying values whose squares
// and those of another initializer of its shape add up to one constant:
// cos^2 + sin^2). Only tensors with two dimensions past 1 are looked at (a
// norm's scale or a bias is a weight however its values look).
bool OnnxLowering::isBuffer(const onnx::NodeProto &user,
                            const std::string &name) {
  auto known = buffers.find(name);
  if (known != buffers.end())
    return known->second;
  auto candidate = [&](const std::string &c) {
    auto it = consts.find(c);
    if (it == consts.end() || values.count(c) ||
        it->second->data_type() != T::FLOAT)
      return false;
    int64_t wide = 0, count = 1;
    for (int64_t d : it->second->dims()) {
      wide += d > 1;
      count *= d;
    }
    return wide >= 2 && count <= (int64_t(1) << 22);
  };
  bool &answer = buffers[name];
  if (!candidate(name))
    return answer = false;
  const HostTensor &v = constant(user, name);
  bool negative = false, mask = true;
  for (long double x : v.data) {
    negative |= x <= -1e9L;
    mask &= x == 0 || x <= -1e9L;
  }
  if (mask && negative)
    return answer = true;
  bool varies = false;
  for (long double x : v.data)
    varies |= x != v.data[0];
  if (!varies)
    return answer = false;
  for (const auto &[other, proto] : consts) {
    if (other == name || !candidate(other) ||
        dims(*proto) != dims(*consts[name]))
      continue;
    const HostTensor &w = constant(user, other);
    const long double sum = v.data[0] * v.data[0] + w.data[0] * w.data[0];
    bool pair = sum > 1e-6L;
    for (size_t i = 0; pair && i < v.data.size(); ++i)
      pair = std::fabs(v.data[i] * v.data[i] + w.data[i] * w.data[i] - sum) <=
             1e-4L * sum;
    if (pair) {
      buffers[other] = true;
      return answer = true;
    }
  }
  return answer = false;
}

// A BatchNormalization's running mean (input 3) and var (4): a buffer of the
// node's own, starting from the export's values, or from PyTorch's fresh
// ones (0, 1) where the initializer has none or is not one. Named after the
// initializer when only this node reads it, else (the dynamo exporter
// merges equal initializers) after the scale: "bn1.weight" gives
// "bn1.running_mean", as PyTorch's state_dict names it.
int OnnxLowering::runningStat(const onnx::NodeProto &n, int i) {
  const char *suffix = i == 3 ? "running_mean" : "running_var";
  const std::string &input = n.input(i);
  const int64_t channels = b.shape(value(n, 0)).at(1);
  std::string name = input;
  auto readers = consumers.find(input);
  const bool own = readers == consumers.end() || readers->second.size() < 2;
  if (!own || b.find(name) >= 0 || values.count(name)) {
    const std::string &scale = n.input(1);
    const size_t dot = scale.rfind(".weight");
    name = (dot != std::string::npos && dot + 7 == scale.size()
                ? scale.substr(0, dot)
                : nodeName(n)) +
           "." + suffix;
  }
  std::vector<double> start(size_t(channels), i == 3 ? 0.0 : 1.0);
  auto c = consts.find(input);
  if (c != consts.end() && !values.count(input)) {
    const onnx::TensorProto &t = *c->second;
    const bool held = t.data_location() == T::EXTERNAL ||
                      !t.raw_data().empty() || t.float_data_size() > 0;
    if (held) {
      const HostTensor &v = constant(n, input);
      if (v.data.size() != start.size())
        failNode(n, "its " + std::string(suffix) + " '" + input + "' is not [" +
                        std::to_string(channels) + "]");
      start.assign(v.data.begin(), v.data.end());
    }
  }
  b.setPlace(path + ": node '" + nodeName(n) + "' (" + n.op_type() + "): ");
  return b.buffer(name, {channels}, std::move(start));
}

// The dynamo exporter's optimizer merges initializers of equal value, so a
// fresh model's norm scales (all ones) and biases (all zeros) reach the file
// as one tensor that every norm reads, where PyTorch has one parameter per
// norm. A uniform weight read by several nodes is therefore untied: the k-th
// node reading it (k > 1, in file order) gets its own parameter "name#k",
// trained apart as PyTorch trains it (--weights onnx starts each copy from
// the shared values: OnnxWeights.cpp).
std::string OnnxLowering::untiedName(const onnx::NodeProto &n,
                                     const std::string &name) const {
  auto users = consumers.find(name);
  if (users == consumers.end() || users->second.size() < 2)
    return name;
  auto at = std::find(users->second.begin(), users->second.end(), &n);
  return at == users->second.begin() || at == users->second.end()
             ? name
             : name + "#" + std::to_string(at - users->second.begin() + 1);
}

int OnnxLowering::weightParam(const onnx::NodeProto &n, int i,
                              const std::string &init) {
  const std::string &name = n.input(i);
  const std::string key = untiedName(n, name);
  if (key == name ||
      (values.count(name) &&
       b.graph().tensors[values[name]].role != TensorRole::Parameter))
    return param(n, i, init);
  if (auto it = untied.find(key); it != untied.end())
    return it->second;
  const HostTensor &v = constant(n, name);
  const bool uniform =
      std::all_of(v.data.begin(), v.data.end(),
                  [&](long double x) { return x == v.data[0]; });
  if (!uniform)
    return param(n, i, init);
  b.setPlace(path + ": node '" + nodeName(n) + "' (" + n.op_type() + "): ");
  return untied[key] = b.param(key, v.shape, init, 0.02);
}

// The dynamo exporter's optimizer folds the transpose of a head tied to the
// token table into an initializer of its own (the table [V,C] transposed to
// [C,V]), so the tie is lost by name. The weight `w` a MatMul reads is that
// table again when an initializer of the transposed shape that a Gather reads
// (an embedding table) holds exactly its values transposed: PyTorch trains
// one tensor. Returns the table's name, or "" when there is none.
std::string OnnxLowering::tiedTable(const onnx::NodeProto &n,
                                    const std::string &w) {
  auto c = consts.find(w);
  if (c == consts.end() || c->second->dims_size() != 2 ||
      c->second->data_type() != onnx::TensorProto::FLOAT)
    return "";
  const int64_t rows = c->second->dims(0), cols = c->second->dims(1);
  auto floats = [&](const onnx::TensorProto &t) {
    if (t.float_data_size() > 0)
      return std::vector<float>(t.float_data().begin(), t.float_data().end());
    const std::string raw = t.data_location() == onnx::TensorProto::EXTERNAL
                                ? externalBytes(t, &n)
                                : t.raw_data();
    std::vector<float> v(raw.size() / sizeof(float));
    if (!v.empty()) // an empty vector's data() may be null: no memcpy
      std::memcpy(v.data(), raw.data(), v.size() * sizeof(float));
    return v;
  };
  for (const auto &entry : consts) {
    // Named, not a structured binding: the lambda below captures it.
    const auto &name = entry.first;
    const auto &t = entry.second;
    auto users = consumers.find(name);
    if (name == w || t->dims_size() != 2 || t->dims(0) != cols ||
        t->dims(1) != rows || t->data_type() != onnx::TensorProto::FLOAT ||
        users == consumers.end() ||
        std::none_of(users->second.begin(), users->second.end(),
                     [&](const onnx::NodeProto *u) {
                       return u->op_type() == "Gather" && u->input(0) == name;
                     }))
      continue;
    const std::vector<float> a = floats(*c->second), table = floats(*t);
    if ((int64_t)a.size() != rows * cols || a.size() != table.size())
      continue;
    bool same = true;
    for (int64_t i = 0; same && i < rows; ++i)
      for (int64_t j = 0; same && j < cols; ++j)
        same = a[i * cols + j] == table[j * rows + i];
    if (same)
      return name;
  }
  return "";
}

} // namespace autoddl::import
