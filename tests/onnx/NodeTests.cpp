//===- NodeTests.cpp - ONNX's own node tests through importer and kernels -===//
//
// For each node test of Debian's libonnx-testdata whose op the ONNX reader
// supports: the test's weight inputs become initializers (as an export
// stores them), the model is imported by autoddl's importer, and the ops it
// lowers to are run with the CPU kernels (backends/cpu/kernels; a primitive
// through backends/common/OnnxPrimitive.h) on the test's inputs; the result
// must match the test's expected output. A test whose node uses a form the
// importer refuses (e.g. MaxPool's storage_order) is counted as refused,
// never as passed. Prints per op: passed / refused / failed; exits 1 on any
// failure or when no test of a supported op passed.
// Usage: onnx_node_tests <libonnx-testdata node dir> <work dir>
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/kernels/Conv.h"
#include "backends/cpu/kernels/Elementwise.h"
#include "backends/cpu/kernels/Embedding.h"
#include "backends/cpu/kernels/Linear.h"
#include "backends/cpu/kernels/Norm.h"
#include "backends/cpu/kernels/Shape.h"
#include "backends/cpu/kernels/Softmax.h"
#include "ir/import/ModelImporter.h"
#include "ir/import/ResolvePrimitive.h"
#include "support/UserError.h"

#include "tests/onnx/ReadBytes.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

using namespace autoddl;

namespace {

// A test tensor as floats (int64 ids kept as their values).
std::vector<float> values(const onnx::TensorProto &t) {
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  std::vector<float> out(n);
  const std::string &raw = t.raw_data();
  if (t.data_type() == onnx::TensorProto::FLOAT) {
    if (!raw.empty())
      std::memcpy(out.data(), raw.data(), n * 4);
    else
      for (int64_t i = 0; i < n; ++i)
        out[i] = t.float_data(i);
  } else if (t.data_type() == onnx::TensorProto::INT64) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      if (!raw.empty())
        std::memcpy(&v, raw.data() + 8 * i, 8);
      else
        v = t.int64_data(i);
      out[i] = v;
    }
  } else {
    throw std::runtime_error("unsupported test tensor type");
  }
  return out;
}

using ops::numElements;

// Which inputs of a node an export stores as initializers (weights).
bool isWeight(const std::string &op, int i, int rank) {
  if (op == "Gemm" || op == "Conv")
    return i >= 1;
  if (op == "MatMul")
    return i == 1 && rank == 2;
  if (op == "LayerNormalization" || op == "BatchNormalization")
    return i >= 1;
  if (op == "Gather")
    return i == 0;
  if (op == "Add")
    return i == 1 && rank == 1;
  if (op == "Reshape")
    return i == 1; // the target shape, a constant in an export
  return false;
}

// Runs the imported graph's ops (all but the loss) with the CPU kernels.
std::vector<float> execute(const ModelGraph &g,
                           std::map<std::string, std::vector<float>> data) {
  std::vector<std::vector<float>> v(g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].role != TensorRole::Activation)
      v[t] = data[g.tensors[t].name];
  int last = -1;
  for (const OpDef &o : g.ops) {
    if (o.kind == "cross_entropy")
      continue;
    auto in = [&](int i) { return v[o.operands[i]].data(); };
    auto shape = [&](int i) { return g.tensors[o.operands[i]].shape; };
    int r = o.results[0];
    const ops::Shape &os = g.tensors[r].shape;
    std::vector<float> out(numElements(os));
    const ops::Shape x = shape(0);
    auto i64 = [&](const char *k) { return std::get<int64_t>(o.attrs.at(k)); };
    if (o.kind == "linear") {
      bool t = std::get<bool>(o.attrs.at("transpose_weight"));
      ops::Shape w = shape(1);
      int64_t K = x.back(), O = t ? w[0] : w[1];
      rt::linear_forward(out.data(), in(0), in(1),
                         o.operands.size() > 2 ? in(2) : nullptr,
                         numElements(x) / K, K, O, t);
    } else if (o.kind == "matmul") {
      ops::Shape b = shape(1);
      size_t n = x.size();
      bool t = std::get<bool>(o.attrs.at("transpose_b"));
      rt::matmul_forward(out.data(), in(0), in(1),
                         numElements(x) / (x[n - 2] * x[n - 1]), x[n - 2],
                         x[n - 1], t ? b[n - 2] : b[n - 1], t);
    } else if (o.kind == "add") {
      rt::add_forward(out.data(), in(0), in(1), numElements(x));
    } else if (o.kind == "mul") {
      rt::mul_forward(out.data(), in(0), in(1), numElements(x));
    } else if (o.kind == "bias_add") {
      rt::bias_add_forward(out.data(), in(0), in(1), numElements(x) / x.back(),
                           x.back());
    } else if (o.kind == "relu") {
      rt::relu_forward(out.data(), in(0), numElements(x));
    } else if (o.kind == "gelu") {
      rt::gelu_forward(out.data(), in(0), numElements(x),
                       std::get<std::string>(o.attrs.at("approximate")) ==
                           "tanh");
    } else if (o.kind == "softmax") {
      int64_t a = i64("axis"), rank = x.size();
      if (a < 0)
        a += rank;
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < a; ++i)
        outer *= x[i];
      for (int64_t i = a + 1; i < rank; ++i)
        inner *= x[i];
      rt::softmax_forward(out.data(), in(0), outer, x[a], inner);
    } else if (o.kind == "layernorm") {
      int64_t C = x.back(), N = numElements(x) / C;
      std::vector<float> mean(N), rstd(N);
      rt::layernorm_forward(out.data(), mean.data(), rstd.data(), in(0), in(1),
                            o.operands.size() > 2 ? in(2) : nullptr, N, C,
                            (float)std::get<double>(o.attrs.at("epsilon")));
    } else if (o.kind == "conv2d") {
      ops::Shape w = shape(1);
      rt::Conv2dShape s{x[0], x[1], x[2],          x[3],          w[0],
                        w[2], w[3], i64("stride"), i64("padding")};
      rt::conv2d_forward(out.data(), in(0), in(1),
                         o.operands.size() > 2 ? in(2) : nullptr, s);
    } else if (o.kind == "pool2d") {
      rt::pool2d_forward(out.data(), in(0), x[0] * x[1], x[2], x[3],
                         i64("kernel"), i64("stride"),
                         std::get<std::string>(o.attrs.at("kind")) == "max");
    } else if (o.kind == "flatten" || o.kind == "reshape") {
      out = v[o.operands[0]];
    } else if (o.kind == "transpose") {
      rt::transpose_forward(out.data(), in(0), x,
                            std::get<std::vector<int64_t>>(o.attrs.at("perm")));
    } else if (o.kind == "embedding") {
      std::vector<int32_t> ids(v[o.operands[0]].begin(),
                               v[o.operands[0]].end());
      ops::Shape t = shape(1);
      rt::embedding_forward(out.data(), ids.data(), in(1), ids.size(), t[1], 0,
                            t[0]);
    } else if (o.kind == "primitive") {
      std::vector<ops::Shape> shapes;
      std::vector<const float *> xs;
      for (size_t k = 0; k < o.operands.size(); ++k) {
        shapes.push_back(shape(int(k)));
        xs.push_back(in(int(k)));
      }
      onnx_kernels::Primitive p;
      if (std::string e = resolvePrimitive(p, g, o, shapes, os); !e.empty())
        throw std::runtime_error(o.name + ": " + e);
      onnx_kernels::primitive_forward<float>(p, xs, out.data());
    } else {
      throw std::runtime_error("no kernel for " + o.kind);
    }
    v[r] = std::move(out);
    last = r;
  }
  return last < 0 ? std::vector<float>{} : v[last];
}

const char *kOps[] = {"Add",
                      "AveragePool",
                      "BatchNormalization",
                      "Conv",
                      "Flatten",
                      "Gather",
                      "Gemm",
                      "Gelu",
                      "GlobalAveragePool",
                      "GlobalMaxPool",
                      "LayerNormalization",
                      "MatMul",
                      "MaxPool",
                      "Relu",
                      "Reshape",
                      "Softmax",
                      "Transpose"};

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: onnx_node_tests <node dir> <work dir>\n";
    return 2;
  }
  std::string root = argv[1], work = argv[2];
  std::map<std::string, std::array<int, 3>> counts; // passed, refused, failed
  int failures = 0;
  std::vector<std::string> names;
  if (!nodeTestNames(root, names)) {
    std::cerr << root << ": cannot open\n";
    return 2;
  }
  for (const std::string &name : names) {
    if (name.rfind("test_", 0) != 0 ||
        name.find("_expanded") != std::string::npos)
      continue;
    std::string dir = root + "/" + name;
    onnx::ModelProto m;
    if (!m.ParseFromString(readBytes(dir + "/model.onnx")) ||
        m.graph().node_size() != 1)
      continue;
    const onnx::NodeProto node = m.graph().node(0);
    const std::string op = node.op_type();
    if (std::find_if(std::begin(kOps), std::end(kOps),
                     [&](const char *k) { return op == k; }) == std::end(kOps))
      continue;
    // An import trains every BatchNormalization on its batch's statistics
    // (docs/model-format.md): only the training-mode tests are its form.
    if (op == "BatchNormalization" &&
        name.find("_training_mode") == std::string::npos)
      continue;
    // Inputs of the first data set; weights move into the initializers.
    std::map<std::string, std::vector<float>> data;
    onnx::GraphProto *g = m.mutable_graph();
    std::vector<onnx::ValueInfoProto> keep;
    bool intOk = true;
    for (int i = 0; i < g->input_size(); ++i) {
      onnx::TensorProto t;
      t.ParseFromString(readBytes(dir + "/test_data_set_0/input_" +
                                  std::to_string(i) + ".pb"));
      if (t.data_type() != onnx::TensorProto::FLOAT &&
          t.data_type() != onnx::TensorProto::INT64) {
        intOk = false; // the importer reads float32 and integer ids only
        continue;
      }
      data[g->input(i).name()] = values(t);
      if (isWeight(op, i, t.dims_size())) {
        t.set_name(g->input(i).name());
        *g->add_initializer() = t;
      } else {
        keep.push_back(g->input(i));
        intOk &= t.data_type() != onnx::TensorProto::INT64 || op == "Gather";
      }
    }
    // Only output 0 is compared (LayerNormalization's Mean and InvStdDev
    // are not graph outputs of an export).
    while (g->output_size() > 1)
      g->mutable_output()->RemoveLast();
    // Tests generated at opsets 11 and 12 carry Conv-11, MaxPool-12 and
    // AveragePool-11, the same versions as at opset 13, and the global
    // pools' at opset 1 GlobalAveragePool-1 and GlobalMaxPool-1, unchanged
    // since: re-stamped to 13.
    const bool global = op == "GlobalAveragePool" || op == "GlobalMaxPool";
    for (auto &os : *m.mutable_opset_import())
      if ((os.domain().empty() || os.domain() == "ai.onnx") &&
          os.version() < 13 &&
          (global || (os.version() >= 11 && (op == "Conv" || op == "MaxPool" ||
                                             op == "AveragePool"))))
        os.set_version(13);
    g->clear_input();
    for (auto &k : keep)
      *g->add_input() = k;
    onnx::TensorProto expected;
    expected.ParseFromString(readBytes(dir + "/test_data_set_0/output_0.pb"));
    std::string path = work + "/" + name + ".onnx";
    std::ofstream(path, std::ios::binary) << m.SerializeAsString();
    auto &c = counts[op];
    ModelGraph graph;
    try {
      if (!intOk)
        throw UserError("an input type the importer does not read");
      graph = import::importModel(path, {});
    } catch (const UserError &e) {
      ++c[1];
      std::cout << "refused " << name << ": " << e.what() << "\n";
      continue;
    }
    std::vector<float> got = execute(graph, data), want = values(expected);
    bool ok = got.size() == want.size();
    double worst = 0;
    for (size_t i = 0; ok && i < got.size(); ++i) {
      double err = std::fabs(got[i] - want[i]) / (1e-4 + std::fabs(want[i]));
      worst = std::max(worst, err);
      ok = err <= 1e-3 || std::fabs(got[i] - want[i]) <= 1e-5;
    }
    ++c[ok ? 0 : 2];
    if (!ok) {
      ++failures;
      std::cout << "FAILED " << name << " (" << got.size() << " vs "
                << want.size() << " values, worst relative error " << worst
                << ")\n";
    }
  }
  int passed = 0;
  std::cout << "ONNX node tests (libonnx-testdata) per op: passed / refused / "
               "failed\n";
  for (auto &[op, c] : counts) {
    std::cout << "  " << op << ": " << c[0] << " / " << c[1] << " / " << c[2]
              << "\n";
    passed += c[0];
  }
  std::cout << passed << " passed, " << failures << " failed\n";
  return failures || passed == 0 ? 1 : 0;
}
