// The ONNX primitives on the GPU (backends/cuda/kernels/Primitive.h) against
// the CPU kernels (backends/common/OnnxPrimitive.h, whose forwards pass
// ONNX's node tests and whose backwards match fp64 finite differences:
// tests/onnx/PrimitiveKernelTests.cpp). Every op type the CPU runs, forward
// and backward, on broadcasting, strided and batched shapes, with operands
// in each role a program gives them (activation: act_t with an act_t
// gradient; parameter: act_t with an fp32 gradient; constant: fp32, no
// gradient). Inputs are act_t-representable, so the CPU computes on the
// values the GPU reads; the bounds are KernelCheckUtil.h's (bf16: 1e-2
// relative in the norm, fp32: 1e-5). Exits 77 without a GPU.
#include "backends/common/OnnxPrimitive.h"
#include "backends/cuda/kernels/Primitive.h"
#include "tests/unit/cuda/KernelCheckUtil.h"

#include <map>
#include <memory>

namespace {

using namespace kcheck;
namespace ok = autoddl::onnx_kernels;
using ok::Dims;

std::mt19937 gRng;

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

int gFailures = 0;

/// Runs op on the CPU and the GPU and compares y and every operand's
/// gradient.
void check(const std::string &label, const std::string &op,
           const ok::PrimitiveAttrs &attrs, const std::vector<Operand> &ops,
           const Dims &out) {
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
    xd[j]->put(xv[j]);
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
  std::vector<float> y(static_cast<size_t>(ny));
  ok::primitive_forward<float>(p, xc, y.data(), key);
  ok::primitive_backward<float>(p, dxcp, xc, y.data(), dy.data());

  DevArray yd(ny, false), dyd(ny, false);
  poison(yd.act->data(), std::max<int64_t>(1, ny) * int64_t(sizeof(act_t)));
  dyd.put(dy);
  rt::primitive_forward(p, xg, yd.ref(), key);
  rt::primitive_backward(p, dxg, xg, yd.ref(), dyd.ref());
  rt::synchronize();
  bool good = report(label + " forward", rel_error(yd.get(), y), kActTol);
  for (size_t j = 0; j < k; ++j)
    if (dxd[j])
      good = report(label + " d" + std::to_string(j) + " (" + ops[j].role + ")",
                    rel_error(dxd[j]->get(), dxc[j]), kActTol) &&
             good;
  gFailures += good ? 0 : 1;
}

ok::PrimitiveAttrs ints(std::map<std::string, int64_t> m) {
  ok::PrimitiveAttrs a;
  a.ints = std::move(m);
  return a;
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
}

} // namespace

int main(int argc, char **argv) {
  unsigned seed = 0;
  int status = 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("PrimitiveCheck: no CUDA device, skipped\n");
    return 77;
  }
  if (!seed_from_args(argc, argv, "PrimitiveCheck", seed, status))
    return status;
  gRng.seed(seed);
  checkAll();
  std::printf("PrimitiveCheck (%s): %s\n", kMode,
              gFailures ? "FAILED" : "all passed");
  return gFailures ? 1 : 0;
}
