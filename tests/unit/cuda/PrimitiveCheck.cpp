// The ONNX primitives on the GPU (backends/cuda/kernels/Primitive.h) against
// the CPU kernels (backends/common/OnnxPrimitive.h, whose forwards pass
// ONNX's node tests and whose backwards match fp64 finite differences:
// tests/onnx/PrimitiveKernelTests.cpp). Every op type the CPU runs, forward
// and backward, on broadcasting, strided and batched shapes, with operands
// in each role a program gives them (activation: act_t with an act_t
// gradient; parameter: act_t with an fp32 gradient; constant: fp32, no
// gradient). Inputs are act_t-representable, so the CPU computes on the
// values the GPU reads; the bounds are KernelCheckUtil.h's (bf16: 1e-2
// relative in the norm, fp32: 1e-5). Then conv2d (PrimitiveCheckConv.cpp: the
// im2col path and, where built, cuDNN's) and pool2d against direct loops in
// double (the CPU kernels' definitions); with --node-tests FILE, ONNX's node
// tests the CPU passes (nodeTests). The channels-last forms (the CUDA
// program's NHWC activations) of batch norm, pools, global pools,
// elementwise ops, conv2d (both paths) and pool2d run on the same inputs
// transposed, their results compared after transposing back. Exits 77
// without a GPU.
// Usage: PrimitiveCheck [--node-tests FILE] [--seed N]
#include "backends/common/OnnxPrimitive.h"
#include "backends/cuda/kernels/Conv.h"
#include "backends/cuda/kernels/Primitive.h"
#include "tests/unit/cuda/KernelCheckUtil.h"
#include "tests/unit/cuda/PrimitiveCheckShared.h"

#include <fstream>
#include <map>
#include <memory>

namespace pcheck {
std::mt19937 gRng;
int gFailures = 0;

/// v [N, C, S] (NCHW, S = H * W) as [N, S, C] (NHWC), or back (`back`).
std::vector<float> toNhwc(const std::vector<float> &v,
                          const autoddl::onnx_kernels::Dims &nchw, bool back) {
  const int64_t N = nchw[0], C = nchw[1],
                S = autoddl::onnx_kernels::numel(nchw) / (N * C);
  std::vector<float> r(v.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t q = 0; q < S; ++q) {
        const size_t a = size_t((n * C + c) * S + q),
                     b = size_t((n * S + q) * C + c);
        (back ? r[a] : r[b]) = back ? v[b] : v[a];
      }
  return r;
}

} // namespace pcheck

namespace {

using namespace kcheck;
using namespace pcheck;
namespace ok = autoddl::onnx_kernels;
using ok::Dims;


/// One operand: its shape, its role (a, p, c; i: an index input with the
/// given values) and the range of its random values.
struct Operand {
  Dims shape;
  char role = 'a';
  std::vector<double> index = {};
  float lo = -1.0f, hi = 1.0f;
};

/// A device buffer of n elements of act_t or float, read back as floats.
struct DevArray {
  std::unique_ptr<rt::DeviceBuffer<act_t>> act;
  std::unique_ptr<rt::DeviceBuffer<float>> f32;
  int64_t n = 0;
  DevArray(int64_t count, bool fp32) : n(count) {
    if (fp32)
      f32 = std::make_unique<rt::DeviceBuffer<float>>(std::max<int64_t>(1, n));
    else
      act = std::make_unique<rt::DeviceBuffer<act_t>>(std::max<int64_t>(1, n));
  }
  rt::PrimRef ref() const {
    return f32 ? rt::PrimRef(f32->data()) : rt::PrimRef(act->data());
  }
  void put(const std::vector<float> &v) {
    if (f32)
      rt::copy_to_device(f32->data(), v.data(),
                         int64_t(v.size() * sizeof(float)));
    else
      upload(act->data(), v);
  }
  std::vector<float> get() const {
    if (f32) {
      std::vector<float> v(static_cast<size_t>(n));
      rt::copy_to_host(v.data(), f32->data(), n * int64_t(sizeof(float)));
      return v;
    }
    return download(act->data(), n);
  }
};

/// Runs op on the CPU and the GPU and compares y and every operand's
/// gradient, in the GPU form `form` names (Form bits).
enum Form : unsigned {
  kNchw = 0,
  // The channels-last form: every rank-4 operand and the result stored NHWC.
  kLast = 1,
  // A batch norm with a ReLU after it, on the GPU in its passes
  // (batchnorm_relu_forward/_backward): y the ReLU's.
  kRelu = 2,
  // Operand 0's gradient stored (accumulate_dx false) into a poisoned
  // buffer: a first writer's (codegen's stored gradients).
  kStoreDx = 4,
  // A batch norm with the add after it in its normalise pass
  // (batchnorm_add_forward; with kRelu the ReLU after the add): y = norm(x) +
  // r for a random r. The forward alone (the norm's backward is the plain
  // one).
  kResidual = 8,
};
void check(const std::string &label, const std::string &op,
           const ok::PrimitiveAttrs &attrs, const std::vector<Operand> &ops,
           const Dims &out, unsigned form = kNchw) {
  const bool last = form & kLast, relu = form & kRelu,
             storeDx = form & kStoreDx, residual = form & kResidual;
  std::vector<Dims> in;
  std::vector<std::vector<double>> consts;
  for (const Operand &o : ops) {
    in.push_back(o.shape);
    consts.push_back(o.index);
  }
  ok::Primitive p;
  if (std::string e = ok::makePrimitive(p, op, attrs, in, out, consts);
      !e.empty()) {
    std::printf("%s %s: makePrimitive: %s  FAIL\n", kMode, label.c_str(),
                e.c_str());
    ++gFailures;
    return;
  }
  if (last)
    p = ok::channelsLastPrimitive(p);
  // What the GPU stores NHWC: every rank-4 operand and result (a global
  // pool's [N, C, 1, 1] is the same bytes either way).
  auto stored = [&](const std::vector<float> &v, const Dims &shape,
                    bool back = false) {
    return last && shape.size() == 4 ? toNhwc(v, shape, back) : v;
  };
  const size_t k = ops.size();
  const int64_t ny = ok::numel(out);
  std::vector<std::vector<float>> xv(k);
  std::vector<std::unique_ptr<DevArray>> xd(k), dxd(k);
  std::vector<const float *> xc(k, nullptr);
  std::vector<rt::PrimRef> xg(k), dxg(k);
  std::vector<std::vector<float>> dxc(k);
  std::vector<float *> dxcp(k, nullptr);
  for (size_t j = 0; j < k; ++j) {
    if (!p.data[j])
      continue;
    const int64_t n = ok::numel(ops[j].shape);
    xv[j] = random_values(gRng, n, ops[j].lo, ops[j].hi);
    if (op == "Where" && j == 0)
      for (float &c : xv[j])
        c = c > 0 ? 1.0f : 0.0f;
    xd[j] = std::make_unique<DevArray>(n, ops[j].role == 'c');
    xd[j]->put(stored(xv[j], ops[j].shape));
    xc[j] = xv[j].data();
    xg[j] = xd[j]->ref();
    if (p.differentiable[j] && ops[j].role != 'c') {
      dxc[j].assign(size_t(n), 0.0f);
      dxcp[j] = dxc[j].data();
      dxd[j] = std::make_unique<DevArray>(n, ops[j].role == 'p');
      dxd[j]->put(dxc[j]);
      dxg[j] = dxd[j]->ref();
    }
  }
  const std::vector<float> dy = random_values(gRng, ny, -1.0f, 1.0f);
  const ok::DropoutKey key{7, 3, 11};
  std::vector<float> y(static_cast<size_t>(ny)), dyIn = dy;
  ok::primitive_forward<float>(p, xc, y.data(), key);
  const std::vector<float> r =
      residual ? random_values(gRng, ny, -1.0f, 1.0f) : std::vector<float>();
  for (size_t e = 0; e < r.size(); ++e)
    y[e] += r[e];
  std::vector<float> yOut = y; // the ReLU's output where one follows
  for (size_t e = 0; relu && e < y.size(); ++e) {
    yOut[e] = std::max(y[e], 0.0f);
    dyIn[e] = y[e] > 0.0f ? dy[e] : 0.0f;
  }
  ok::primitive_backward<float>(p, dxcp, xc, y.data(), dyIn.data());

  DevArray yd(ny, false), dyd(ny, false);
  poison(yd.act->data(), std::max<int64_t>(1, ny) * int64_t(sizeof(act_t)));
  dyd.put(stored(dy, out));
  if (storeDx && dxd[0])
    poison(dxd[0]->act->data(), dxd[0]->n * int64_t(sizeof(act_t)));
  DevArray rd(residual ? ny : 1, false);
  if (residual)
    rd.put(stored(r, out));
  if (residual)
    rt::batchnorm_add_forward(p, xg, rd.ref(), yd.ref(), nullptr, relu);
  else if (relu)
    rt::batchnorm_relu_forward(p, xg, yd.ref(), nullptr);
  else
    rt::primitive_forward(p, xg, yd.ref(), key);
  if (!residual) { // (the forward alone)
    if (relu)
      rt::batchnorm_relu_backward(p, dxg, xg, yd.ref(), dyd.ref(), !storeDx);
    else if (storeDx && p.kind == ok::Primitive::Kind::BatchNorm)
      rt::batchnorm_backward(p, dxg, xg, dyd.ref(), false);
    else
      rt::primitive_backward(p, dxg, xg, yd.ref(), dyd.ref(), !storeDx);
  }
  rt::synchronize();
  bool good = report(label + " forward",
                     rel_error(stored(yd.get(), out, true), yOut), kActTol);
  for (size_t j = 0; j < k && !residual; ++j)
    if (dxd[j])
      good =
          report(label + " d" + std::to_string(j) + " (" + ops[j].role + ")",
                 rel_error(stored(dxd[j]->get(), ops[j].shape, true), dxc[j]),
                 kActTol) &&
          good;
  gFailures += good ? 0 : 1;
}

/// pool2d forward and backward against the CPU kernels' definition (max: to
/// the window's first maximum). channels > 0: the N planes are an image of
/// that many channels stored NHWC. dx is added to zeros, or (storeDx) stored
/// over poison.
void checkPool(int64_t N, int64_t H, int64_t W, int64_t k, int64_t st,
               bool isMax, int64_t channels = 0, bool storeDx = false) {
  const int64_t Ho = (H - k) / st + 1, Wo = (W - k) / st + 1;
  const auto x = random_values(gRng, N * H * W, -1, 1),
             dy = random_values(gRng, N * Ho * Wo, -1, 1);
  std::vector<float> y(size_t(N * Ho * Wo)), dx(size_t(N * H * W), 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        int64_t best = -1;
        double acc = 0;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t at = (n * H + oh * st + i) * W + ow * st + j;
            if (best < 0 || x[size_t(at)] > x[size_t(best)])
              best = at;
            acc += x[size_t(at)];
          }
        const size_t yi = size_t((n * Ho + oh) * Wo + ow);
        y[yi] = isMax ? x[size_t(best)] : float(acc / double(k * k));
        for (int64_t i = 0; i < k && !isMax; ++i)
          for (int64_t j = 0; j < k; ++j)
            dx[size_t((n * H + oh * st + i) * W + ow * st + j)] +=
                dy[yi] / float(k * k);
        if (isMax)
          dx[size_t(best)] += dy[yi];
      }
  const int64_t C = channels > 0 ? channels : 1;
  const Dims xShape = {N / C, C, H, W}, yShape = {N / C, C, Ho, Wo};
  auto stored = [&](const std::vector<float> &v, const Dims &shape,
                    bool back = false) {
    return channels > 0 ? toNhwc(v, shape, back) : v;
  };
  rt::DeviceBuffer<act_t> X(N * H * W), Y(N * Ho * Wo), DY(N * Ho * Wo),
      DX(N * H * W);
  upload(X.data(), stored(x, xShape));
  upload(DY.data(), stored(dy, yShape));
  if (storeDx)
    poison(DX.data(), N * H * W * int64_t(sizeof(act_t)));
  rt::pool2d_forward(Y.data(), X.data(), N, H, W, k, st, isMax, channels);
  rt::pool2d_backward(DX.data(), X.data(), DY.data(), N, H, W, k, st, isMax,
                      channels, !storeDx);
  rt::synchronize();
  const std::string label = std::string(isMax ? "maxpool" : "avgpool") +
                            (channels > 0 ? " NHWC" : "") + " k" +
                            std::to_string(k) + " s" + std::to_string(st);
  bool good = report(
      label + " forward",
      rel_error(stored(download(Y.data(), N * Ho * Wo), yShape, true), y),
      kActTol);
  good = report(label + (storeDx ? " dx =" : " dx"),
                rel_error(stored(download(DX.data(), N * H * W), xShape, true),
                          dx),
                kActTol) &&
         good;
  gFailures += good ? 0 : 1;
}

/// The channels-last batch norm in both its forms (Primitive.h
/// BatchNormPath), whatever Auto picks at these sizes: the kernels' edges (37
/// channels unpacked, 264 in two tiles, 6 rows, 64 channels in 8 lanes) and
/// ResNet-50's small shapes at a few images (7×7 at 512 and 2048 channels:
/// 2 and 8 tiles; 14×14 at 256), each plain, with the ReLU, dx stored and
/// with the residual add and its ReLU; given statistics too.
void checkNormPaths() {
  const ok::PrimitiveAttrs none;
  const struct {
    const char *name;
    Dims x;
  } shapes[] = {
      {"37 channels", {4, 37, 5, 7}},  {"264 channels", {4, 264, 8, 8}},
      {"6 rows", {1, 16, 2, 3}},       {"C64 9x9", {8, 64, 9, 9}},
      {"C512 7x7", {6, 512, 7, 7}},    {"C2048 7x7", {2, 2048, 7, 7}},
      {"C256 14x14", {4, 256, 14, 14}}};
  const struct {
    const char *name;
    unsigned form;
  } forms[] = {{"", kLast},
               {" + ReLU", kLast | kRelu},
               {" dx stored", kLast | kStoreDx},
               {" + ReLU, dx stored", kLast | kRelu | kStoreDx},
               {" + add + ReLU", kLast | kRelu | kResidual}};
  for (const rt::BatchNormPath path :
       {rt::BatchNormPath::Split, rt::BatchNormPath::Fused}) {
    rt::batchnorm_use_path(path);
    const std::string how =
        std::string("BatchNormalization NHWC ") +
        (path == rt::BatchNormPath::Fused ? "fused " : "split ");
    for (const auto &sh : shapes)
      for (const auto &f : forms)
        check(how + sh.name + f.name, "BatchNormalization", none,
              {{sh.x}, {{sh.x[1]}, 'p'}, {{sh.x[1]}, 'p'}}, sh.x, f.form);
    check(how + "C512 7x7 given statistics", "BatchNormalization", none,
          {{{2, 512, 7, 7}},
           {{512}, 'p'},
           {{512}, 'p'},
           {{512}, 'c'},
           {{512}, 'c', {}, 0.5f, 1.5f}},
          {2, 512, 7, 7}, kLast);
  }
  rt::batchnorm_use_path(rt::BatchNormPath::Auto);
}

/// A batch norm form twice on the same inputs (x [N, C, H, W] stored NHWC,
/// with the ReLU): y, the moments, dx and the parameters' gradients bit for
/// bit (the partials are added in a fixed order).
void checkNormRepeatable(const Dims &xs, rt::BatchNormPath path) {
  ok::Primitive p;
  const int64_t C = xs[1], E = ok::numel(xs);
  if (std::string e = ok::makePrimitive(p, "BatchNormalization", {},
                                        {xs, {C}, {C}}, xs, {{}, {}, {}});
      !e.empty()) {
    std::printf("%s batch norm repeatable: %s  FAIL\n", kMode, e.c_str());
    ++gFailures;
    return;
  }
  p = ok::channelsLastPrimitive(p);
  DevArray x(E, false), scale(C, false), bias(C, false), dy(E, false);
  x.put(random_values(gRng, E, -1, 1));
  scale.put(random_values(gRng, C, 0.5f, 1.5f));
  bias.put(random_values(gRng, C, -1, 1));
  dy.put(random_values(gRng, E, -1, 1));
  const std::vector<rt::PrimRef> in{x.ref(), scale.ref(), bias.ref()};
  rt::batchnorm_use_path(path);
  std::vector<std::vector<float>> runs[2];
  for (auto &r : runs) {
    DevArray y(E, false), moments(2 * C, true), dx(E, false), ds(C, true),
        db(C, true);
    ds.put(std::vector<float>(size_t(C), 0.0f));
    db.put(std::vector<float>(size_t(C), 0.0f));
    rt::batchnorm_relu_forward(p, in, y.ref(), moments.f32->data());
    rt::batchnorm_relu_backward(p, {dx.ref(), ds.ref(), db.ref()}, in, y.ref(),
                                dy.ref(), false);
    rt::synchronize();
    r = {y.get(), moments.get(), dx.get(), ds.get(), db.get()};
  }
  rt::batchnorm_use_path(rt::BatchNormPath::Auto);
  int64_t differ = 0;
  for (size_t k = 0; k < runs[0].size(); ++k)
    for (size_t i = 0; i < runs[0][k].size(); ++i)
      differ += std::memcmp(&runs[0][k][i], &runs[1][k][i], sizeof(float)) != 0;
  const std::string label =
      std::string("batch norm ") +
      (path == rt::BatchNormPath::Fused ? "fused" : "split") +
      " twice, values differing [" + std::to_string(xs[0]) + "," +
      std::to_string(C) + "," + std::to_string(xs[2]) + "," +
      std::to_string(xs[3]) + "]";
  gFailures += report(label, double(differ), 0.0) ? 0 : 1;
}

ok::PrimitiveAttrs ints(std::map<std::string, int64_t> m) {
  ok::PrimitiveAttrs a;
  a.ints = std::move(m);
  return a;
}

/// The channels-last batch norm with a residual add, both forms on ResNet's
/// small shapes, and each form twice bit for bit.
void checkNorms() {
  check("BatchNormalization + add NHWC packed", "BatchNormalization",
        ok::PrimitiveAttrs{}, {{{3, 16, 5, 7}}, {{16}, 'p'}, {{16}, 'p'}},
        {3, 16, 5, 7}, kLast | kResidual);
  checkNormPaths();
  for (const rt::BatchNormPath path :
       {rt::BatchNormPath::Split, rt::BatchNormPath::Fused}) {
    checkNormRepeatable({16, 512, 7, 7}, path);
    checkNormRepeatable({4, 256, 14, 14}, path);
  }
}

void checkAll() {
  const ok::PrimitiveAttrs none;
  // Elementwise unary: every op of the family (positive inputs where the
  // function needs them).
  for (const char *u : {"Identity", "Relu", "Sigmoid", "Tanh", "Exp", "Neg",
                        "Erf", "Abs", "Softplus", "Sin", "Cos", "IsNaN", "Ceil",
                        "Floor", "Round", "Sign", "Not", "Cast"})
    check(u, u, none, {{{3, 5, 7}}}, {3, 5, 7});
  for (const char *u : {"Log", "Sqrt", "Reciprocal"})
    check(u, u, none, {{{3, 5, 7}, 'a', {}, 0.5f, 2.0f}}, {3, 5, 7});
  check("Reshape", "Reshape", none, {{{2, 6}}, {{2}, 'i', {3, 4}}}, {3, 4});
  // Binary: broadcasting both ways, a scalar, and each role.
  for (const char *b :
       {"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Greater",
        "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor"}) {
    check(std::string(b) + " [4,1,6]x[5,1]", b, none, {{{4, 1, 6}}, {{5, 1}}},
          {4, 5, 6});
    check(std::string(b) + " [2,3,4]x[]", b, none, {{{2, 3, 4}}, {{}}},
          {2, 3, 4});
  }
  check("Pow", "Pow", none,
        {{{4, 1, 6}, 'a', {}, 0.5f, 2.0f}, {{5, 1}, 'a', {}, -1.5f, 1.5f}},
        {4, 5, 6});
  check("Add bias (p)", "Add", none, {{{8, 6}}, {{6}, 'p'}}, {8, 6});
  check("Mul scale (p) [33,40]", "Mul", none, {{{40}, 'p'}, {{33, 40}}},
        {33, 40});
  check("Add constant (c)", "Add", none, {{{8, 6}}, {{8, 6}, 'c'}}, {8, 6});
  check("Where", "Where", none, {{{1, 5, 1}, 'c'}, {{4, 5, 6}}, {{6}}},
        {4, 5, 6});
  // Data movement.
  check("Expand", "Expand", none, {{{3, 1}}, {{3}, 'i', {2, 3, 4}}}, {2, 3, 4});
  ok::PrimitiveAttrs perm;
  perm.lists["perm"] = {0, 2, 3, 1};
  check("Transpose", "Transpose", perm, {{{2, 3, 4, 5}}}, {2, 4, 5, 3});
  check("Slice steps 2,-2", "Slice", none,
        {{{6, 8}},
         {{2}, 'i', {1, 7}},
         {{2}, 'i', {6, 0}},
         {{2}, 'i', {0, 1}},
         {{2}, 'i', {2, -2}}},
        {3, 4});
  check("Concat axis 1", "Concat", ints({{"axis", 1}}),
        {{{2, 3, 4}}, {{2, 1, 4}}, {{2, 2, 4}}}, {2, 6, 4});
  // Reductions (attribute axes and the opset-13 axes input).
  ok::PrimitiveAttrs ax1 = ints({{"keepdims", 1}});
  ax1.lists["axes"] = {1};
  check("ReduceSum axis 1", "ReduceSum", ax1, {{{3, 40, 5}}}, {3, 1, 5});
  check("ReduceMean axes 0,2 (input)", "ReduceMean", ints({{"keepdims", 0}}),
        {{{3, 4, 5}}, {{2}, 'i', {0, -1}}}, {4});
  ok::PrimitiveAttrs ax2;
  ax2.lists["axes"] = {2};
  check("ReduceMax axis 2", "ReduceMax", ax2, {{{3, 4, 37}}}, {3, 4, 1});
  check("ReduceSum all", "ReduceSum", ints({{"keepdims", 0}}), {{{7, 9}}}, {});
  // Softmax and LogSoftmax: a middle axis and a line longer than a warp.
  check("Softmax axis 1", "Softmax", ints({{"axis", 1}}), {{{3, 7, 4}}},
        {3, 7, 4});
  check("LogSoftmax axis -1", "LogSoftmax", none, {{{5, 70}}}, {5, 70});
  check("Softmax [4,50]", "Softmax", none, {{{4, 50}}}, {4, 50});
  // MatMul: a matrix b (rows folded), batched, broadcast batch, 1-D
  // operands, and a parameter weight (its fp32 gradient: the linear GEMM).
  check("MatMul [2,3,4,5]x[5,6]", "MatMul", none, {{{2, 3, 4, 5}}, {{5, 6}}},
        {2, 3, 4, 6});
  check("MatMul [3,4,5]x[3,5,2]", "MatMul", none, {{{3, 4, 5}}, {{3, 5, 2}}},
        {3, 4, 2});
  check("MatMul [2,1,4,5]x[3,5,6]", "MatMul", none,
        {{{2, 1, 4, 5}}, {{3, 5, 6}}}, {2, 3, 4, 6});
  check("MatMul [5]x[5,3]", "MatMul", none, {{{5}}, {{5, 3}}}, {3});
  check("MatMul [4,5]x[5]", "MatMul", none, {{{4, 5}}, {{5}}}, {4});
  check("MatMul [6,4,5]x W[5,3] (p)", "MatMul", none,
        {{{6, 4, 5}}, {{5, 3}, 'p'}}, {6, 4, 3});
  // A training Dropout: the CPU program's mask.
  check("Dropout train 0.3", "Dropout", none,
        {{{4, 64}}, {{}, 'i', {0.3}}, {{}, 'i', {1}}}, {4, 64});
  // ResNet's image primitives (kernels/PrimitiveImage.cuh): the stem's
  // padded max pool, average pools counting the padding or not, a dilated
  // ceil_mode one, 3-D; BatchNormalization on batch statistics (its scale
  // and bias parameters: fp32 gradients) and in inference form.
  ok::PrimitiveAttrs stem;
  stem.lists = {
      {"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}};
  check("MaxPool 3x3 s2 p1", "MaxPool", stem, {{{2, 3, 9, 10}}}, {2, 3, 5, 5});
  check("AveragePool 3x3 s2 p1", "AveragePool", stem, {{{2, 3, 9, 10}}},
        {2, 3, 5, 5});
  stem.ints["count_include_pad"] = 1;
  check("AveragePool 3x3 s2 p1 counting pads", "AveragePool", stem,
        {{{2, 3, 9, 10}}}, {2, 3, 5, 5});
  ok::PrimitiveAttrs dil;
  dil.lists = {{"kernel_shape", {2, 2}}, {"dilations", {2, 1}}};
  dil.ints["ceil_mode"] = 1;
  dil.lists["strides"] = {2, 2};
  check("MaxPool dilated ceil_mode", "MaxPool", dil, {{{2, 2, 7, 6}}},
        {2, 2, 3, 3});
  ok::PrimitiveAttrs cube;
  cube.lists = {{"kernel_shape", {2, 2, 2}}, {"pads", {1, 0, 1, 0, 1, 0}}};
  check("AveragePool 3-D", "AveragePool", cube, {{{1, 2, 3, 4, 3}}},
        {1, 2, 3, 4, 3});
  check("BatchNormalization batch stats", "BatchNormalization", none,
        {{{4, 6, 5, 7}}, {{6}, 'p'}, {{6}, 'p'}}, {4, 6, 5, 7});
  check("BatchNormalization inference", "BatchNormalization", none,
        {{{3, 4, 6}},
         {{4}, 'p'},
         {{4}, 'p'},
         {{4}, 'c'},
         {{4}, 'c', {}, 0.5f, 1.5f}},
        {3, 4, 6});
  // Their channels-last forms (what the CUDA program runs between
  // convolutions): batch norm on batch statistics and given ones, the stem's
  // max pool, an average pool counting pads, a global pool, ReLU and Add.
  check("BatchNormalization batch stats NHWC", "BatchNormalization", none,
        {{{4, 37, 5, 7}}, {{37}, 'p'}, {{37}, 'p'}}, {4, 37, 5, 7}, kLast);
  check("BatchNormalization inference NHWC", "BatchNormalization", none,
        {{{3, 6, 4, 5}},
         {{6}, 'p'},
         {{6}, 'p'},
         {{6}, 'c'},
         {{6}, 'c', {}, 0.5f, 1.5f}},
        {3, 6, 4, 5}, kLast);
  // The ReLU after a batch norm in its passes (codegen's
  // planProducerReluFusion).
  check("BatchNormalization + ReLU", "BatchNormalization", none,
        {{{4, 6, 5, 7}}, {{6}, 'p'}, {{6}, 'p'}}, {4, 6, 5, 7}, kRelu);
  check("BatchNormalization + ReLU NHWC", "BatchNormalization", none,
        {{{4, 37, 5, 7}}, {{37}, 'p'}, {{37}, 'p'}}, {4, 37, 5, 7},
        kLast | kRelu);
  // 16 channels: the passes 16 bytes at a time (bf16 and fp32 packs).
  check("BatchNormalization NHWC packed", "BatchNormalization", none,
        {{{3, 16, 5, 7}}, {{16}, 'p'}, {{16}, 'p'}}, {3, 16, 5, 7}, kLast);
  check("BatchNormalization + ReLU NHWC packed", "BatchNormalization", none,
        {{{3, 16, 5, 7}}, {{16}, 'p'}, {{16}, 'p'}}, {3, 16, 5, 7},
        kLast | kRelu);
  stem.ints.erase("count_include_pad");
  check("MaxPool 3x3 s2 p1 NHWC", "MaxPool", stem, {{{2, 5, 9, 10}}},
        {2, 5, 5, 5}, kLast);
  stem.ints["count_include_pad"] = 1;
  check("AveragePool 3x3 s2 p1 counting pads NHWC", "AveragePool", stem,
        {{{2, 5, 9, 10}}}, {2, 5, 5, 5}, kLast);
  check("GlobalAveragePool NHWC", "GlobalAveragePool", none, {{{3, 6, 4, 5}}},
        {3, 6, 1, 1}, kLast);
  // The pack paths of the channels-last kernels (PrimitiveImageLast.cuh):
  // 16 channels (packs of 8 bf16 or 4 fp32 values) in pools and a global
  // pool of 64
  // channels (reduce_middle, one thread a channel); batch norms over several
  // row splits and two channel tiles (264 channels, the second tile part
  // empty), and over 6 rows (fewer than a block's row lanes).
  stem.ints.erase("count_include_pad");
  check("MaxPool 3x3 s2 p1 NHWC packed", "MaxPool", stem, {{{2, 16, 9, 10}}},
        {2, 16, 5, 5}, kLast);
  stem.ints["count_include_pad"] = 1;
  check("AveragePool 3x3 s2 p1 counting pads NHWC packed", "AveragePool", stem,
        {{{2, 16, 9, 10}}}, {2, 16, 5, 5}, kLast);
  check("GlobalAveragePool NHWC 64 channels", "GlobalAveragePool", none,
        {{{4, 64, 2, 3}}}, {4, 64, 1, 1}, kLast);
  check("BatchNormalization + ReLU NHWC packed, row splits",
        "BatchNormalization", none,
        {{{8, 16, 16, 16}}, {{16}, 'p'}, {{16}, 'p'}}, {8, 16, 16, 16},
        kLast | kRelu);
  check("BatchNormalization NHWC packed, two tiles", "BatchNormalization", none,
        {{{4, 264, 8, 8}}, {{264}, 'p'}, {{264}, 'p'}}, {4, 264, 8, 8}, kLast);
  check("BatchNormalization NHWC 37 channels, row splits", "BatchNormalization",
        none, {{{4, 37, 16, 16}}, {{37}, 'p'}, {{37}, 'p'}}, {4, 37, 16, 16},
        kLast | kStoreDx);
  check("BatchNormalization NHWC packed, 6 rows", "BatchNormalization", none,
        {{{1, 16, 2, 3}}, {{16}, 'p'}, {{16}, 'p'}}, {1, 16, 2, 3}, kLast);
  check("Relu NHWC", "Relu", none, {{{2, 6, 3, 5}}}, {2, 6, 3, 5}, kLast);
  check("Add NHWC", "Add", none, {{{2, 6, 3, 5}}, {{2, 6, 3, 5}}}, {2, 6, 3, 5},
        kLast);
  // A batch norm alone reading its input stores that gradient (codegen's
  // stored gradients): into a poisoned buffer, NCHW, NHWC and packed.
  check("BatchNormalization dx stored", "BatchNormalization", none,
        {{{4, 6, 5, 7}}, {{6}, 'p'}, {{6}, 'p'}}, {4, 6, 5, 7}, kStoreDx);
  check("BatchNormalization NHWC dx stored", "BatchNormalization", none,
        {{{4, 37, 5, 7}}, {{37}, 'p'}, {{37}, 'p'}}, {4, 37, 5, 7},
        kLast | kStoreDx);
  check("BatchNormalization + ReLU NHWC packed, dx stored",
        "BatchNormalization", none, {{{3, 16, 5, 7}}, {{16}, 'p'}, {{16}, 'p'}},
        {3, 16, 5, 7}, kLast | kRelu | kStoreDx);
  // The pools and the global pool store in their pass, other kinds after
  // zeroing (primitiveStoresDxInPass). Channels-last max pools, added and
  // stored: the block grid (PoolLastGrid.h) on ResNet's stem pool, sides
  // not multiples of its box, channels in a partial group (72: 9 bf16
  // packs) or unpacked (12 in bf16), ceil_mode, strides 3 and 1, VGG's 2x2/2
  // on odd sides (inputs in no window: 0); dilated: the taps path.
  stem.ints.erase("count_include_pad");
  check("MaxPool 3x3 s2 p1 dx stored", "MaxPool", stem, {{{2, 3, 9, 10}}},
        {2, 3, 5, 5}, kStoreDx);
  ok::PrimitiveAttrs wide = stem, flat = stem, ceil = stem, vgg;
  wide.lists["strides"] = {3, 3};
  flat.lists["strides"] = {1, 1};
  ceil.lists["pads"] = {0, 0, 0, 0};
  ceil.ints["ceil_mode"] = 1;
  vgg.lists = {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}};
  const struct {
    const char *name;
    const ok::PrimitiveAttrs &attrs;
    Dims x, y;
  } maxPools[] = {
      {"3x3 s2 p1 64 channels", stem, {2, 64, 16, 15}, {2, 64, 8, 8}},
      {"3x3 s2 p1 37x35", stem, {2, 16, 37, 35}, {2, 16, 19, 18}},
      {"3x3 s2 p1 72 channels", stem, {1, 72, 13, 11}, {1, 72, 7, 6}},
      {"3x3 s2 p1 12 channels", stem, {2, 12, 9, 10}, {2, 12, 5, 5}},
      {"3x3 s2 ceil_mode", ceil, {2, 16, 10, 10}, {2, 16, 5, 5}},
      {"3x3 s3 p1", wide, {2, 16, 9, 10}, {2, 16, 3, 4}},
      {"3x3 s1 p1", flat, {1, 32, 20, 40}, {1, 32, 20, 40}},
      {"2x2 s2 9x11", vgg, {2, 16, 9, 11}, {2, 16, 4, 5}},
      {"dilated ceil_mode (taps)", dil, {2, 16, 7, 6}, {2, 16, 3, 3}}};
  for (const auto &m : maxPools)
    for (unsigned store : {0u, unsigned(kStoreDx)})
      check(std::string("MaxPool NHWC ") + m.name + (store ? " dx stored" : ""),
            "MaxPool", m.attrs, {{m.x}}, m.y, kLast | store);
  check("GlobalAveragePool NHWC 64 channels dx stored", "GlobalAveragePool",
        none, {{{4, 64, 2, 3}}}, {4, 64, 1, 1}, kLast | kStoreDx);
  check("Relu dx stored (zeroed first)", "Relu", none, {{{2, 6, 3, 5}}},
        {2, 6, 3, 5}, kStoreDx);
  // A batch norm with the residual add (and its ReLU) in its normalise pass
  // (ResNet's last norm of a block): NCHW, NHWC, packed, row splits.
  check("BatchNormalization + add", "BatchNormalization", none,
        {{{4, 6, 5, 7}}, {{6}, 'p'}, {{6}, 'p'}}, {4, 6, 5, 7}, kResidual);
  check("BatchNormalization + add + ReLU NHWC", "BatchNormalization", none,
        {{{4, 37, 5, 7}}, {{37}, 'p'}, {{37}, 'p'}}, {4, 37, 5, 7},
        kLast | kRelu | kResidual);
  check("BatchNormalization + add + ReLU NHWC packed, row splits",
        "BatchNormalization", none,
        {{{8, 16, 16, 16}}, {{16}, 'p'}, {{16}, 'p'}}, {8, 16, 16, 16},
        kLast | kRelu | kResidual);
  checkNorms();
  // conv2d and pool2d (CNN exports, the VGG template).
  checkConvPaths();
  checkPool(6, 8, 10, 2, 2, true);
  checkPool(5, 9, 7, 3, 2, true);
  checkPool(5, 9, 7, 3, 1, false);
  checkPool(6, 8, 10, 2, 2, true, 3);
  checkPool(10, 9, 7, 3, 1, false, 5);
  checkPool(6, 8, 10, 2, 2, true, 3, true);
}

/// ONNX's node tests on the GPU: the records tests/onnx/PrimitiveKernelTests
/// writes of every node test the CPU kernels pass (its DUMP argument), run
/// through primitive_forward in the fp32 build (the operands as fp32
/// buffers; bf16 would round the tests' inputs), against the expected
/// result: 1e-4 relative + 1e-5 (the CPU's fp64 check: 1e-5 + 1e-6).
int nodeTests(const char *path) {
#ifndef AUTODDL_FP32
  std::printf("node tests: run by the fp32 build only (%s)\n", path);
  return 0;
#else
  std::ifstream in(path);
  if (!in) {
    std::printf("node tests: cannot read %s  FAIL\n", path);
    return 1;
  }
  // Values through strtod: "nan" and "inf" too, which operator>> refuses.
  auto number = [&in] {
    std::string t;
    in >> t;
    return std::strtod(t.c_str(), nullptr);
  };
  auto readTensor = [&in, &number](Dims &shape, std::vector<double> &v) {
    size_t rank = 0, n = 0;
    in >> rank;
    shape.assign(rank, 0);
    for (int64_t &d : shape)
      in >> d;
    in >> n;
    v.assign(n, 0.0);
    for (double &x : v)
      x = number();
  };
  int passed = 0, failed = 0;
  std::string tag, test, op;
  while (in >> tag) {
    if (tag != "T") {
      std::printf("node tests: %s: a record starts with %s  FAIL\n", path,
                  tag.c_str());
      return 1;
    }
    in >> test >> op;
    ok::PrimitiveAttrs attrs;
    std::vector<Dims> shapes;
    std::vector<std::vector<double>> values;
    Dims yShape;
    std::vector<double> want;
    while (in >> tag && tag != "E") {
      std::string name;
      if (tag == "I") {
        in >> name >> attrs.ints[name];
      } else if (tag == "F") {
        in >> name;
        attrs.floats[name] = number();
      } else if (tag == "L") {
        size_t n = 0;
        in >> name >> n;
        Dims &l = attrs.lists[name];
        l.assign(n, 0);
        for (int64_t &x : l)
          in >> x;
      } else if (tag == "X") {
        shapes.emplace_back();
        values.emplace_back();
        readTensor(shapes.back(), values.back());
      } else {
        readTensor(yShape, want);
      }
    }
    ok::Primitive p;
    std::string why = ok::makePrimitive(p, op, attrs, shapes, yShape, values);
    std::vector<std::unique_ptr<DevArray>> xd(shapes.size());
    std::vector<rt::PrimRef> xg(shapes.size());
    for (size_t k = 0; k < shapes.size() && why.empty(); ++k) {
      if (!p.data[k] || values[k].empty())
        continue;
      xd[k] = std::make_unique<DevArray>(int64_t(values[k].size()), true);
      xd[k]->put(std::vector<float>(values[k].begin(), values[k].end()));
      xg[k] = xd[k]->ref();
    }
    std::vector<float> got;
    if (why.empty()) {
      DevArray y(int64_t(want.size()), false);
      rt::primitive_forward(p, xg, y.ref());
      rt::synchronize();
      got = y.get();
      for (size_t i = 0; i < want.size() && why.empty(); ++i) {
        const double w = want[i], g = got[i];
        if (std::isnan(w) ? !std::isnan(g)
                          : !(std::fabs(g - w) <= 1e-4 * std::fabs(w) + 1e-5))
          why = "element " + std::to_string(i) + ": " + std::to_string(g) +
                ", expected " + std::to_string(w);
      }
    }
    if (why.empty()) {
      ++passed;
    } else {
      ++failed;
      std::printf("node test %s (%s): %s  FAIL\n", test.c_str(), op.c_str(),
                  why.c_str());
    }
  }
  std::printf("node tests: %d passed on the GPU, %d failed (of the CPU's)\n",
              passed, failed);
  return failed || passed == 0 ? 1 : 0;
#endif
}
} // namespace

int main(int argc, char **argv) {
  unsigned seed = 0;
  int status = 0;
  if (!cuda_device_present("PrimitiveCheck"))
    return 77;
  // --node-tests FILE (tests/onnx/PrimitiveKernelTests' DUMP) first.
  const char *nodeFile = nullptr;
  if (argc >= 3 && std::strcmp(argv[1], "--node-tests") == 0) {
    nodeFile = argv[2];
    argv[2] = argv[0];
    argc -= 2;
    argv += 2;
  }
  if (!seed_from_args(argc, argv, "PrimitiveCheck", seed, status))
    return status;
  gRng.seed(seed);
  checkAll();
  if (nodeFile)
    gFailures += nodeTests(nodeFile);
  std::printf("PrimitiveCheck (%s): %s\n", kMode,
              gFailures ? "FAILED" : "all passed");
  return gFailures ? 1 : 0;
}
