//===- OnnxWeights.cpp - an ONNX model's parameter values -----------------===//
//
// Reads the initializers named as the graph's parameters. The graph was
// imported from the same file first (readOnnxFile), which checked every
// initializer's byte count and that external data lies in a regular file
// beside the model; this reads them again and still checks what it reads.
// Edge code: errors throw UserError naming the file and the tensor.
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxWeights.h"

#include "support/UserError.h"
#include "support/UserFiles.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <map>

namespace autoddl::import {

namespace {

/// The bytes of `t` (inline raw_data, or its external data beside `path`).
std::string tensorBytes(const std::string &path, const onnx::TensorProto &t,
                        int64_t want) {
  const std::string where = path + ": initializer '" + t.name() + "': ";
  if (t.data_location() != onnx::TensorProto::EXTERNAL) {
    if (t.raw_data().empty() && t.float_data_size() == want) {
      std::string b(size_t(want) * 4, '\0');
      std::memcpy(b.data(), t.float_data().data(), b.size());
      return b;
    }
    return t.raw_data();
  }
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::stoll(kv.value());
    else if (kv.key() == "length")
      length = std::stoll(kv.value());
  }
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  std::ifstream in(dir + location, std::ios::binary);
  if (location.empty() || location[0] == '/' ||
      location.find("..") != std::string::npos || !in)
    throw UserError(where + "cannot read its external data '" + location + "'");
  if (length < 0)
    length = want * 4;
  std::string b(size_t(length), '\0');
  in.seekg(offset);
  if (!in.read(b.data(), length))
    throw UserError(where + "external data '" + location +
                    "' is shorter than its offset and length");
  return b;
}

} // namespace

std::vector<ParameterValues> readOnnxWeights(const std::string &path,
                                             const ModelGraph &g) {
  const std::string data = readUserFile(path, "model");
  onnx::ModelProto model;
  if (data.empty() || data.size() > INT_MAX || !model.ParseFromString(data))
    throw UserError(path + ": not an ONNX model (the protobuf does not parse; "
                           "truncated or another format)");
  std::map<std::string, const onnx::TensorProto *> inits;
  for (const auto &t : model.graph().initializer())
    inits.emplace(t.name(), &t);
  std::vector<ParameterValues> out;
  for (const TensorDef &p : g.tensors) {
    if (p.role != TensorRole::Parameter)
      continue;
    auto it = inits.find(p.name);
    // A uniform weight the exporter merged, untied by the reader: its k-th
    // copy "name#k" starts from the shared values (OnnxPrimitives.cpp).
    if (const size_t hash = p.name.rfind('#');
        it == inits.end() && hash != std::string::npos &&
        p.name.find_first_not_of("0123456789", hash + 1) == std::string::npos)
      it = inits.find(p.name.substr(0, hash));
    if (it == inits.end())
      throw UserError(path + ": parameter '" + p.name +
                      "' is not an initializer of the file (--weights onnx "
                      "needs the exported values)");
    const onnx::TensorProto &t = *it->second;
    const std::string where = path + ": initializer '" + p.name + "': ";
    if (t.data_type() != onnx::TensorProto::FLOAT)
      throw UserError(where + "not float32");
    if (ops::Shape(t.dims().begin(), t.dims().end()) != p.shape)
      throw UserError(where + "its shape differs from the parameter's");
    const int64_t n = ops::numElements(p.shape);
    const std::string bytes = tensorBytes(path, t, n);
    if (int64_t(bytes.size()) != n * 4)
      throw UserError(where + "holds " + std::to_string(bytes.size()) +
                      " bytes, expected " + std::to_string(n * 4) +
                      (bytes.empty() ? " (exported without its values; "
                                       "--weights onnx needs them)"
                                     : ""));
    ParameterValues v{p.name, p.shape, std::vector<float>(size_t(n))};
    std::memcpy(v.values.data(), bytes.data(), bytes.size()); // little-endian
    out.push_back(std::move(v));
  }
  return out;
}

} // namespace autoddl::import
