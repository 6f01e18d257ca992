//===- ConstTests.cpp - the constant evaluator against ONNX's node tests -===//
//
// For each node test of Debian's libonnx-testdata whose op the ONNX reader
// evaluates on constants (ir/import/OnnxConstants.h: masks, rotary tables,
// reshape targets of an export), the evaluator runs on the test's inputs and
// must give the test's expected output: the same element type and shape, the
// same values (integers and booleans exactly, floats to 1e-6 relative). A
// test whose tensors are of a type the evaluator does not hold (float16,
// bfloat16, string) or whose form the evaluator refuses by name is counted
// as skipped, never as passed.
// Prints per op: passed / skipped / failed; exits 1 on any failure or when an
// op has no passing test.
// Usage: onnx_const_tests <libonnx-testdata node dir>
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxConstants.h"

#include "tests/onnx/ReadBytes.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>

using namespace autoddl::import;

namespace {

bool readTensor(const std::string &path, onnx::TensorProto &t) {
  std::string bytes = readBytes(path);
  return !bytes.empty() && t.ParseFromString(bytes);
}

// The ops an export computes its constants with, checked here.
const char *kOps[] = {"Abs",        "Add",
                      "And",        "Cast",
                      "CastLike",   "Concat",
                      "Constant",   "ConstantOfShape",
                      "Cos",        "CumSum",
                      "Div",        "Equal",
                      "Exp",        "Expand",
                      "Gather",     "GatherND",
                      "Greater",    "GreaterOrEqual",
                      "Identity",   "IsNaN",
                      "Less",       "LessOrEqual",
                      "MatMul",     "Max",
                      "Min",        "Mul",
                      "Neg",        "Not",
                      "Or",         "Pow",
                      "Range",      "Reciprocal",
                      "ReduceMean", "ReduceSum",
                      "Reshape",    "Shape",
                      "Sin",        "Slice",
                      "Sqrt",       "Squeeze",
                      "Sub",        "Transpose",
                      "Trilu",      "Unsqueeze",
                      "Where",      "Xor"};

bool isFloatType(int32_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE;
}

// Empty when `got` equals `want`, else the first difference.
std::string compare(const HostTensor &got, const HostTensor &want) {
  if (got.type != want.type)
    return "type " + typeName(got.type) + ", expected " + typeName(want.type);
  if (got.shape != want.shape)
    return "shape differs";
  for (size_t i = 0; i < got.data.size(); ++i) {
    long double g = got.data[i], w = want.data[i];
    bool same = isFloatType(want.type)
                    ? (std::isnan(g) && std::isnan(w)) ||
                          std::fabs(g - w) <= 1e-6 * std::fabs(w) + 1e-7 ||
                          g == w
                    : g == w;
    if (!same) {
      std::ostringstream m;
      m << "element " << i << ": " << (double)g << ", expected " << (double)w;
      return m.str();
    }
  }
  return "";
}

// Runs one test folder; returns "" (passed), "skip: ..." or the failure.
std::string runTest(const std::string &dir, const onnx::ModelProto &model) {
  const onnx::NodeProto &n = model.graph().node(0);
  const onnx::GraphProto &g = model.graph();
  // Older test data stores bfloat16 tensors as uint16: the file's type must
  // be the one the graph declares.
  auto declared = [](const onnx::ValueInfoProto &v) {
    return v.type().tensor_type().elem_type();
  };
  std::string data = dir + "/test_data_set_0/";
  std::vector<HostTensor> inputs;
  std::vector<std::vector<int64_t>> shapes;
  // Inputs are listed as the graph's; an omitted optional input is "".
  int fileIndex = 0;
  std::vector<int> slot;
  for (int i = 0; i < n.input_size(); ++i) {
    if (n.input(i).empty()) {
      slot.push_back(-1);
      continue;
    }
    onnx::TensorProto t;
    if (!readTensor(data + "input_" + std::to_string(fileIndex++) + ".pb", t))
      return "skip: input " + std::to_string(i) + " is not a tensor";
    if (fileIndex - 1 < g.input_size() &&
        declared(g.input(fileIndex - 1)) != t.data_type())
      return "skip: input stored as " + typeName(t.data_type()) +
             ", declared " + typeName(declared(g.input(fileIndex - 1)));
    shapes.emplace_back(t.dims().begin(), t.dims().end());
    try {
      inputs.push_back(tensorFromProto(t, t.raw_data()));
    } catch (const std::invalid_argument &e) {
      if (n.op_type() != "Shape")
        return std::string("skip: ") + e.what();
      inputs.emplace_back(); // Shape reads only the shape
    }
    slot.push_back((int)inputs.size() - 1);
  }
  onnx::TensorProto out;
  if (!readTensor(data + "output_0.pb", out))
    return "skip: no output tensor";
  if (g.output_size() && declared(g.output(0)) != out.data_type())
    return "skip: output stored as " + typeName(out.data_type()) +
           ", declared " + typeName(declared(g.output(0)));
  HostTensor want;
  try {
    want = tensorFromProto(out, out.raw_data());
  } catch (const std::invalid_argument &e) {
    return std::string("skip: ") + e.what();
  }
  std::vector<const HostTensor *> in;
  for (int s : slot)
    in.push_back(s < 0 ? nullptr : &inputs[s]);
  try {
    HostTensor got = n.op_type() == "Constant" ? constantValue(n)
                     : n.op_type() == "Shape"  ? shapeValue(n, shapes.at(0))
                                               : evaluate(n, in);
    return compare(got, want);
  } catch (const std::exception &e) {
    // A form the evaluator refuses by name (GatherND's batch_dims, a Cast
    // to float16) is skipped; the reader refuses it the same way.
    std::string m = e.what();
    if (m.find("is not evaluated") != std::string::npos)
      return "skip: " + m;
    return "error: " + m;
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: onnx_const_tests <node dir>\n";
    return 2;
  }
  const std::vector<std::string> ops(std::begin(kOps), std::end(kOps));
  const int failures = runNodeTests(
      argv[1], ops,
      [&](const onnx::NodeProto &n) {
        return std::find(ops.begin(), ops.end(), n.op_type()) != ops.end();
      },
      [](const std::string &dir, const onnx::ModelProto &model) {
        return runTest(dir, model);
      });
  return failures ? 1 : 0;
}
