//===- PrimitiveKernelTests.cpp - ONNX primitives' kernels, both directions
//
// The kernels that run an import's unfused primitives
// (backends/common/OnnxPrimitive.h), checked two ways:
// - forward: each node test of Debian's libonnx-testdata whose op runs as a
//   primitive, through makePrimitive and primitive_forward in fp64 on the
//   test's inputs, against its expected output (1e-5 relative). A test with
//   an output neither float nor boolean, or of a form makePrimitive refuses
//   by name (Cast to double, Max of three), is counted as skipped, never as
//   passed; an op with no passing test fails.
// - backward: each op on random fp64 inputs, the vector-Jacobian product of
//   primitive_backward against central finite differences of
//   sum(w * forward(x)) (1e-6 relative).
// - a training Dropout, whose mask ONNX leaves to the runtime: its
//   counter-based mask's rate, offsets and backward (dropoutTests).
// Usage: onnx_primitive_kernels <libonnx-testdata node dir> [DUMP]
// With DUMP, every passing node test is written there as a record that
// tests/unit/cuda/PrimitiveCheck.cpp --node-tests runs on the GPU (format at
// dumpRecord).
//
//===----------------------------------------------------------------------===//
#include "backends/common/OnnxPrimitive.h"
#include "ir/import/OnnxConstants.h"

#include "tests/onnx/ReadBytes.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

using namespace autoddl::onnx_kernels;
using autoddl::import::HostTensor;

namespace {

bool isFloat(int32_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE;
}

PrimitiveAttrs attrsOf(const onnx::NodeProto &n) {
  PrimitiveAttrs a;
  for (const onnx::AttributeProto &at : n.attribute()) {
    if (at.type() == onnx::AttributeProto::INT)
      a.ints[at.name()] = at.i();
    else if (at.type() == onnx::AttributeProto::FLOAT)
      a.floats[at.name()] = at.f();
    else if (at.type() == onnx::AttributeProto::INTS)
      a.lists[at.name()] = Dims(at.ints().begin(), at.ints().end());
  }
  return a;
}

std::ofstream gDump; // the passing node tests, for the GPU (DUMP)

void dumpTensor(char tag, const Dims &shape, const std::vector<double> &v) {
  gDump << tag << ' ' << shape.size();
  for (int64_t d : shape)
    gDump << ' ' << d;
  gDump << ' ' << v.size();
  char buf[32];
  for (double x : v) {
    std::snprintf(buf, sizeof buf, " %.17g", x);
    gDump << buf;
  }
  gDump << '\n';
}

/// One passing test: "T <test> <op>", its attributes ("I name v",
/// "F name v", "L name n v..."), each operand ("X rank dims... n values...",
/// an omitted one rank 0 with no values), the expected result ("Y ...") and
/// "E".
void dumpRecord(const std::string &dir, const onnx::NodeProto &n,
                const PrimitiveAttrs &a, const std::vector<Dims> &shapes,
                const std::vector<std::vector<double>> &values,
                const Dims &outShape, const std::vector<double> &want) {
  gDump << "T " << dir.substr(dir.find_last_of('/') + 1) << ' ' << n.op_type()
        << '\n';
  char buf[64];
  for (const auto &[k, v] : a.ints)
    gDump << "I " << k << ' ' << v << '\n';
  for (const auto &[k, v] : a.floats) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    gDump << "F " << k << ' ' << buf << '\n';
  }
  for (const auto &[k, v] : a.lists) {
    gDump << "L " << k << ' ' << v.size();
    for (int64_t x : v)
      gDump << ' ' << x;
    gDump << '\n';
  }
  for (size_t k = 0; k < shapes.size(); ++k)
    dumpTensor('X', shapes[k], values[k]);
  dumpTensor('Y', outShape, want);
  gDump << "E\n";
}

// Runs one node test; "" (passed), "skip: ..." or the failure.
std::string runNodeTest(const std::string &dir, const onnx::GraphProto &g) {
  const onnx::NodeProto &n = g.node(0);
  const std::string data = dir + "/test_data_set_0/";
  std::vector<HostTensor> inputs;
  int file = 0;
  for (int i = 0; i < n.input_size(); ++i) {
    if (n.input(i).empty()) {
      inputs.emplace_back(); // an omitted optional input
      continue;
    }
    onnx::TensorProto t;
    if (!t.ParseFromString(
            readBytes(data + "input_" + std::to_string(file++) + ".pb")))
      return "skip: input " + std::to_string(i) + " is not a tensor";
    // Older test data stores bfloat16 tensors as uint16: the file's type
    // must be the one the graph declares.
    if (file - 1 < g.input_size() &&
        g.input(file - 1).type().tensor_type().elem_type() != t.data_type())
      return "skip: input stored as another type than declared";
    try {
      inputs.push_back(autoddl::import::tensorFromProto(t, t.raw_data()));
    } catch (const std::exception &e) {
      return std::string("skip: ") + e.what();
    }
  }
  onnx::TensorProto outProto;
  if (!outProto.ParseFromString(readBytes(data + "output_0.pb")))
    return "skip: no output tensor";
  // A boolean result (IsNaN) is held as 0/1.
  if (!isFloat(outProto.data_type()) &&
      outProto.data_type() != onnx::TensorProto::BOOL)
    return "skip: output not float";
  HostTensor want;
  try {
    want = autoddl::import::tensorFromProto(outProto, outProto.raw_data());
  } catch (const std::exception &e) {
    return std::string("skip: ") + e.what();
  }
  std::vector<Dims> shapes;
  std::vector<std::vector<double>> values;
  for (const HostTensor &t : inputs) {
    shapes.push_back(t.shape);
    values.emplace_back(t.data.begin(), t.data.end());
  }
  // auto_pad, a string, resolved into pads as the importer does.
  PrimitiveAttrs attrs = attrsOf(n);
  for (const onnx::AttributeProto &at : n.attribute())
    if (at.name() == "auto_pad" && !shapes.empty())
      if (std::string e = autoPads(
              shapes[0], attrs.lists["kernel_shape"], attrs.lists["strides"],
              attrs.lists["dilations"], at.s(), attrs.lists["pads"]);
          !e.empty())
        return "skip: " + e;
  Primitive p;
  if (std::string e =
          makePrimitive(p, n.op_type(), attrs, shapes, want.shape, values);
      !e.empty())
    return "skip: " + e;
  // ONNX leaves a training Dropout's mask to the runtime (the tests hold
  // numpy's); the programs' counter-based one is checked by dropoutTests.
  if (p.kind == Primitive::Kind::Dropout)
    return "skip: a training Dropout's mask is the programs' generator's";
  // Data inputs of any type the reader holds run as their values (an
  // integer exponent, compared integers); the result must be float or
  // boolean, as programs hold them.
  std::vector<const double *> x;
  for (size_t k = 0; k < inputs.size(); ++k)
    x.push_back(p.data[k] ? values[k].data() : nullptr);
  std::vector<double> y(size_t(numel(want.shape)));
  primitive_forward<double>(p, x, y.data());
  for (size_t i = 0; i < y.size(); ++i) {
    const double w = double(want.data[i]);
    if (!(std::fabs(y[i] - w) <= 1e-5 * std::fabs(w) + 1e-6)) {
      std::ostringstream m;
      m << "element " << i << ": " << y[i] << ", expected " << w;
      return m.str();
    }
  }
  if (gDump.is_open())
    dumpRecord(dir, n, attrs, shapes, values, want.shape,
               std::vector<double>(want.data.begin(), want.data.end()));
  return "";
}

int nodeTests(const std::string &root) {
  const int failures = runNodeTests(
      root, {},
      [](const onnx::NodeProto &n) {
        return n.domain().empty() && primitiveSupported(n.op_type());
      },
      [](const std::string &dir, const onnx::ModelProto &model) {
        return runNodeTest(dir, model.graph());
      });
  return failures < 0 ? 1 : failures;
}

// ---- Backward against finite differences -----------------------------------

struct Case {
  std::string op;
  PrimitiveAttrs attrs;
  std::vector<Dims> in;
  Dims out;
  std::vector<std::vector<double>> consts; // index inputs and conditions
  bool positive = false; // inputs in [0.5, 1.5] (Log, Sqrt, Pow's base)
};

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const char *op : {"Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Erf", "Abs",
                         "Softplus", "Sin", "Cos", "Identity", "Reciprocal"})
    c.push_back({op, {}, {{2, 3}}, {2, 3}, {}, false});
  for (const char *op : {"Log", "Sqrt"})
    c.push_back({op, {}, {{2, 3}}, {2, 3}, {}, true});
  c.push_back({"Reshape", {}, {{2, 3}, {2}}, {3, 2}, {{}, {3, 2}}, false});
  for (const char *op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    c.push_back({op, {}, {{2, 1, 3}, {4, 1}}, {2, 4, 3}, {}, false});
  c.push_back({"Pow", {}, {{2, 3}, {}}, {2, 3}, {}, true});
  c.push_back({"Pow", {}, {{2, 3}, {3}}, {2, 3}, {}, true});
  c.push_back({"Where",
               {},
               {{2, 3}, {2, 3}, {1}},
               {2, 3},
               {{1, 0, 1, 1, 0, 0}, {}, {}},
               false});
  c.push_back({"Expand", {}, {{3, 1}, {3}}, {2, 3, 4}, {{}, {2, 3, 4}}, false});
  PrimitiveAttrs perm;
  perm.lists["perm"] = {0, 2, 1, 3};
  c.push_back({"Transpose", perm, {{2, 3, 2, 2}}, {2, 2, 3, 2}, {}, false});
  c.push_back({"Slice",
               {},
               {{4, 5}, {1}, {1}, {1}, {1}},
               {4, 2},
               {{}, {3}, {0}, {1}, {-2}},
               false});
  PrimitiveAttrs ax1;
  ax1.ints["axis"] = 1;
  c.push_back({"Concat", ax1, {{2, 1, 2}, {2, 3, 2}}, {2, 4, 2}, {}, false});
  c.push_back({"Softmax", ax1, {{2, 4, 3}}, {2, 4, 3}, {}, false});
  c.push_back({"LogSoftmax", ax1, {{2, 4, 3}}, {2, 4, 3}, {}, false});
  PrimitiveAttrs last;
  last.lists["axes"] = {-1};
  c.push_back({"ReduceMean", last, {{2, 3, 4}}, {2, 3, 1}, {}, false});
  c.push_back({"ReduceMax", last, {{2, 3, 4}}, {2, 3, 1}, {}, false});
  PrimitiveAttrs noKeep;
  noKeep.ints["keepdims"] = 0;
  c.push_back(
      {"ReduceSum", noKeep, {{2, 3, 4}, {2}}, {3}, {{}, {0, 2}}, false});
  c.push_back(
      {"MatMul", {}, {{2, 1, 3, 4}, {3, 4, 5}}, {2, 3, 3, 5}, {}, false});
  c.push_back({"MatMul", {}, {{4}, {2, 4, 3}}, {2, 3}, {}, false});
  // A ResNet stem's pool (3x3, stride 2, pad 1), an average pool with and
  // without the padding counted, a ceil_mode dilated one, and the global
  // pool.
  PrimitiveAttrs stem;
  stem.lists = {
      {"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}};
  c.push_back({"MaxPool", stem, {{2, 2, 5, 6}}, {2, 2, 3, 3}, {}, false});
  c.push_back({"AveragePool", stem, {{2, 2, 5, 6}}, {2, 2, 3, 3}, {}, false});
  stem.ints["count_include_pad"] = 1;
  c.push_back({"AveragePool", stem, {{2, 2, 5, 6}}, {2, 2, 3, 3}, {}, false});
  PrimitiveAttrs ceil;
  ceil.lists = {{"kernel_shape", {2}}, {"strides", {2}}, {"dilations", {2}}};
  ceil.ints["ceil_mode"] = 1;
  c.push_back({"MaxPool", ceil, {{2, 3, 7}}, {2, 3, 3}, {}, false});
  c.push_back(
      {"GlobalAveragePool", {}, {{2, 3, 2, 2}}, {2, 3, 1, 1}, {}, false});
  // BatchNormalization as an import trains it (batch statistics: X, scale,
  // B), and in inference form (the mean and var given, not differentiated).
  c.push_back({"BatchNormalization",
               {},
               {{3, 2, 2, 3}, {2}, {2}},
               {3, 2, 2, 3},
               {},
               false});
  c.push_back({"BatchNormalization",
               {},
               {{3, 2, 4}, {2}, {2}, {2}, {2}},
               {3, 2, 4},
               {{}, {}, {}, {0.25, -0.5}, {0.75, 1.5}},
               false});
  // BatchNorm1d: [N, C], no spatial axes.
  c.push_back(
      {"BatchNormalization", {}, {{5, 3}, {3}, {3}}, {5, 3}, {}, false});
  return c;
}

// Returns the number of failures over all cases.
int finiteDifferences() {
  std::mt19937_64 rng(25);
  int failures = 0;
  for (const Case &k : cases()) {
    Primitive p;
    if (std::string e = makePrimitive(p, k.op, k.attrs, k.in, k.out, k.consts);
        !e.empty()) {
      std::cout << "  FAILED " << k.op << ": " << e << "\n";
      ++failures;
      continue;
    }
    std::uniform_real_distribution<double> mag(0.5, 1.5);
    std::vector<std::vector<double>> x(k.in.size());
    for (size_t i = 0; i < x.size(); ++i) {
      if (i < k.consts.size() && !k.consts[i].empty()) {
        x[i] = k.consts[i];
        continue;
      }
      x[i].resize(size_t(numel(k.in[i])));
      for (double &v : x[i])
        v = mag(rng) * (k.positive || rng() % 2 ? 1 : -1);
    }
    std::vector<double> w(size_t(numel(k.out)));
    for (double &v : w)
      v = mag(rng) - 1.0;
    auto loss = [&]() {
      std::vector<const double *> xp;
      for (size_t i = 0; i < x.size(); ++i)
        xp.push_back(p.data[i] ? x[i].data() : nullptr);
      std::vector<double> y(w.size());
      primitive_forward<double>(p, xp, y.data());
      double s = 0;
      for (size_t j = 0; j < y.size(); ++j)
        s += w[j] * y[j];
      return s;
    };
    std::vector<const double *> xp;
    std::vector<std::vector<double>> dx(x.size());
    std::vector<double *> dxp;
    for (size_t i = 0; i < x.size(); ++i) {
      xp.push_back(p.data[i] ? x[i].data() : nullptr);
      dx[i].assign(x[i].size(), 0.0);
      dxp.push_back(p.differentiable[i] ? dx[i].data() : nullptr);
    }
    std::vector<double> y(w.size());
    primitive_forward<double>(p, xp, y.data());
    primitive_backward<double>(p, dxp, xp, y.data(), w.data());
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!p.differentiable[i])
        continue;
      for (size_t j = 0; j < x[i].size(); ++j) {
        const double h = 1e-6, keep = x[i][j];
        x[i][j] = keep + h;
        const double up = loss();
        x[i][j] = keep - h;
        const double down = loss();
        x[i][j] = keep;
        const double fd = (up - down) / (2 * h);
        worst =
            std::max(worst, std::fabs(fd - dx[i][j]) / (std::fabs(fd) + 1e-3));
      }
    }
    const bool ok = worst <= 1e-6;
    std::cout << k.op << " backward: worst relative error " << worst
              << (ok ? "" : "  FAILED") << "\n";
    failures += ok ? 0 : 1;
  }
  return failures;
}

// Malformed forms an ONNX file can hold are refused by makePrimitive (the
// generated program would index out of bounds); a legal step near INT64_MAX
// takes one element. Returns the number of failures.
int malformedForms() {
  int failures = 0;
  auto expect = [&](const char *what, bool refused, const std::string &e) {
    const bool ok = refused == !e.empty();
    std::cout << what << ": " << (e.empty() ? "resolved" : e)
              << (ok ? "" : "  FAILED") << "\n";
    failures += ok ? 0 : 1;
  };
  Primitive p;
  PrimitiveAttrs perm;
  perm.lists["perm"] = {0, 0};
  expect("Transpose perm {0, 0}", true,
         makePrimitive(p, "Transpose", perm, {{2, 3}}, {2, 2}, {}));
  PrimitiveAttrs axis;
  axis.ints["axis"] = 7;
  expect("Softmax axis 7 of rank 2", true,
         makePrimitive(p, "Softmax", axis, {{2, 3}}, {2, 3}, {}));
  PrimitiveAttrs axes;
  axes.lists["axes"] = {1, -1};
  expect("ReduceSum axes {1, -1} of rank 2", true,
         makePrimitive(p, "ReduceSum", axes, {{2, 3}}, {2, 1}, {}));
  // A pad as wide as the window: windows of padding only (max -inf).
  PrimitiveAttrs wide;
  wide.lists = {{"kernel_shape", {2}}, {"pads", {2, 0}}};
  expect("MaxPool kernel 2 pads {2, 0}", true,
         makePrimitive(p, "MaxPool", wide, {{1, 1, 4}}, {1, 1, 5}, {}));
  expect("BatchNormalization of rank 1", true,
         makePrimitive(p, "BatchNormalization", {}, {{4}, {4}, {4}}, {4}, {}));
  const double big = 9.2e18; // a step near INT64_MAX: one element
  expect("Slice step 9.2e18", false,
         makePrimitive(p, "Slice", {}, {{5}, {1}, {1}, {1}, {1}}, {1},
                       {{}, {1}, {5}, {0}, {big}}));
  return failures;
}

// A training Dropout (ratio 0.25): about a quarter of the elements dropped,
// the kept ones scaled by 4/3 (a kept zero stays +0, a dropped element is
// -0); an element's mask depends only on its global index, so two halves run
// at their offsets equal the whole bitwise; another step draws another mask;
// the backward passes dy * 4/3 exactly where the forward kept, zeros of x
// included; a false training_mode or a ratio of 0 is the identity.
int dropoutTests() {
  int failures = 0;
  auto check = [&](const char *what, bool ok) {
    std::cout << "Dropout: " << what << (ok ? "" : "  FAILED") << "\n";
    failures += ok ? 0 : 1;
  };
  const int64_t n = 1 << 16, c = 64;
  auto make = [&](Primitive &p, int64_t rows, double training, double ratio) {
    return makePrimitive(p, "Dropout", {}, {{rows, c}, {}, {}}, {rows, c},
                         {{}, {ratio}, {training}});
  };
  Primitive p, half, off, none;
  check("resolves", make(p, n / c, 1, 0.25).empty() &&
                        make(half, n / c / 2, 1, 0.25).empty() &&
                        p.kind == Primitive::Kind::Dropout);
  check("false training_mode and ratio 0 are the identity",
        make(off, 4, 0, 0.25).empty() && make(none, 4, 1, 0).empty() &&
            off.kind == Primitive::Kind::Unary &&
            none.kind == Primitive::Kind::Unary);
  std::vector<double> x(n), y(n), parts(n), other(n);
  for (int64_t i = 0; i < n; ++i)
    x[size_t(i)] = i % 7 == 0 ? 0.0 : 1.0 + double(i % 5);
  const DropoutKey k{42, autoddl::rt::dropout_stream("drop", 3), 1000};
  primitive_forward<double>(p, {x.data(), nullptr, nullptr}, y.data(), k);
  int64_t dropped = 0;
  bool scaled = true;
  for (int64_t i = 0; i < n; ++i) {
    const double v = y[size_t(i)];
    const bool gone = v == 0 && std::signbit(v);
    dropped += gone;
    scaled &= gone == !autoddl::rt::dropout_keep(42, k.stream, 1000 + i, 0.25);
    scaled &= gone || (x[size_t(i)] == 0 ? v == 0 && !std::signbit(v)
                                         : v == x[size_t(i)] * (1.0 / 0.75));
  }
  std::cout << "Dropout: " << dropped << " of " << n << " dropped\n";
  check("about a quarter dropped",
        dropped > n / 4 - n / 100 && dropped < n / 4 + n / 100);
  check("kept elements scaled by 1 / (1 - ratio), dropped ones -0", scaled);
  for (int h = 0; h < 2; ++h) {
    DropoutKey kh = k;
    kh.first += h * n / 2;
    primitive_forward<double>(half, {x.data() + h * n / 2, nullptr, nullptr},
                              parts.data() + h * n / 2, kh);
  }
  bool same = true;
  for (int64_t i = 0; i < n; ++i)
    same &= parts[size_t(i)] == y[size_t(i)] &&
            std::signbit(parts[size_t(i)]) == std::signbit(y[size_t(i)]);
  check("two halves at their offsets equal the whole", same);
  DropoutKey k4 = k;
  k4.stream = autoddl::rt::dropout_stream("drop", 4);
  primitive_forward<double>(p, {x.data(), nullptr, nullptr}, other.data(), k4);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i)
    differ += std::signbit(other[size_t(i)]) != std::signbit(y[size_t(i)]);
  check("the next step draws another mask", differ > n / 10);
  std::vector<double> dy(size_t(n), 1.0), dx(size_t(n), 0.0);
  primitive_backward<double>(p, {dx.data(), nullptr, nullptr},
                             {x.data(), nullptr, nullptr}, y.data(), dy.data());
  bool grads = true;
  for (int64_t i = 0; i < n; ++i)
    grads &=
        dx[size_t(i)] ==
        (autoddl::rt::dropout_keep(42, k.stream, 1000 + i, 0.25) ? 1.0 / 0.75
                                                                 : 0.0);
  check("the backward passes dy / (1 - ratio) where kept, zeros of x "
        "included",
        grads);
  return failures;
}

// BatchNormalization's running statistics (docs/checkpoints.md "Buffers"):
// one micro-batch's moments and the update, against numbers worked by hand.
int runningStatsTests() {
  int failures = 0;
  auto check = [&](const char *what, bool ok) {
    std::cout << (ok ? "ok: " : "FAIL: ") << "running statistics: " << what
              << "\n";
    failures += !ok;
  };
  // x [N=2, C=2, S=3]: channel 0 holds 1..6, channel 1 holds 7 six times.
  const std::vector<double> x = {1, 2, 3, 7, 7, 7, 4, 5, 6, 7, 7, 7};
  std::vector<float> moments(4);
  batchnorm_moments(moments.data(), x.data(), {2, 2, 3});
  // Channel 0: mean 3.5; squared deviations sum to 17.5 over n = 6, so the
  // unbiased variance is 17.5 / 5 = 3.5 (the biased one, 17.5 / 6, is not).
  check("mean and unbiased variance per channel",
        moments[0] == 3.5f && moments[1] == 7.0f && moments[2] == 3.5f &&
            moments[3] == 0.0f);
  // PyTorch's default momentum 0.1 is ONNX's 0.9: running = 0.9 running +
  // 0.1 batch, from PyTorch's fresh 0 and 1: 0.35 and 0.9 + 0.35 = 1.25.
  std::vector<float> mean = {0, 0}, var = {1, 1};
  batchnorm_running_update(mean.data(), var.data(), moments.data(), 2, 0.9);
  check("running = momentum running + (1 - momentum) batch",
        mean[0] == float(0.1 * 3.5) && var[0] == float(0.9 + 0.1 * 3.5) &&
            mean[1] == float(0.1 * 7.0) && var[1] == float(0.9));
  // Two micro-batches in order: the second update starts from the first's.
  batchnorm_running_update(mean.data(), var.data(), moments.data(), 2, 0.9);
  check("updates compose in order",
        std::fabs(mean[0] - (0.9 * 0.35 + 0.35)) < 1e-6 &&
            std::fabs(var[0] - (0.9 * 1.25 + 0.35)) < 1e-6);
  return failures;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: onnx_primitive_kernels <node dir> [DUMP]\n";
    return 2;
  }
  if (argc == 3) {
    gDump.open(argv[2]);
    if (!gDump) {
      std::cerr << argv[2] << ": cannot write\n";
      return 2;
    }
  }
  const int failures = nodeTests(argv[1]) + finiteDifferences() +
                       malformedForms() + dropoutTests() + runningStatsTests();
  return failures ? 1 : 0;
}
