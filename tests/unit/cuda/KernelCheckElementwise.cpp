// KernelCheck's elementwise cases: add (and add + relu), mul, activations,
// add_into, scale.
#include "tests/unit/cuda/KernelCheck.h" // first: see there

#include "backends/common/OnnxKernels.h"
#include "backends/cuda/kernels/Dropout.h"
#include "backends/cuda/kernels/Elementwise.h"

#include <algorithm>

namespace kcheck {

void check_elementwise(int64_t n, int64_t offset) {
  const std::string sz =
      " n=" + std::to_string(n) + (offset ? " unaligned" : "");
  auto a = random_values(gRng, n, -3, 3);
  auto b = random_values(gRng, n, -3, 3);
  auto dout = random_values(gRng, n, -1, 1);
  DevAct da(a, offset), db(b, 0), dd(dout, offset);
  auto fwd1 = [&](const std::string &name,
                  const std::function<void(float *)> &cpuFn,
                  const std::function<void(act_t *)> &gpuFn) {
    std::vector<float> want(static_cast<size_t>(n));
    cpuFn(want.data());
    DevAlloc out(n, offset);
    gpuFn(out.p);
    gOk &= report(name + sz, rel_error(download(out.p, n), want), kActTol);
  };
  fwd1(
      "add_forward",
      [&](float *o) { ref::add_forward(o, a.data(), b.data(), n); },
      [&](act_t *o) { rt::add_forward(o, da.p, db.p, n); });
  fwd1(
      "mul_forward",
      [&](float *o) { ref::mul_forward(o, a.data(), b.data(), n); },
      [&](act_t *o) { rt::mul_forward(o, da.p, db.p, n); });
  for (bool th : {true, false}) {
    const std::string form = th ? "gelu_forward tanh" : "gelu_forward erf";
    fwd1(
        form, [&](float *o) { ref::gelu_forward(o, a.data(), n, th); },
        [&](act_t *o) { rt::gelu_forward(o, da.p, n, th); });
    check_backward(
        (th ? "gelu_backward tanh" : "gelu_backward erf") + sz, {{"dx", n}},
        [&](std::vector<float *> &g) {
          ref::gelu_backward(g[0], a.data(), dout.data(), n, th);
        },
        [&](std::vector<void *> &g) {
          rt::gelu_backward(static_cast<act_t *>(g[0]), da.p, dd.p, n, th);
        },
        kActTol, kFloatTol, offset);
  }
  // A training Dropout (an ONNX export in train mode): the GPU drops exactly
  // the elements the CPU program does (one Philox mask), and its backward
  // passes dout where the forward kept.
  {
    namespace ok = autoddl::onnx_kernels;
    const ok::DropoutKey key{7, rt::dropout_stream("drop", 3), 12345};
    std::vector<float> want(static_cast<size_t>(n));
    ok::dropout_forward<float>(want.data(), a.data(), n, 0.25, key);
    DevAlloc out(n, offset);
    rt::dropout_forward(out.p, da.p, n, 0.25, key.seed, key.stream, key.first);
    const std::vector<float> got = download(out.p, n);
    int64_t masks = 0;
    for (size_t i = 0; i < got.size(); ++i)
      masks += (got[i] == 0 && std::signbit(got[i])) !=
               (want[i] == 0 && std::signbit(want[i]));
    gOk &= report("dropout_forward mask" + sz, double(masks), 0.0);
    gOk &= report("dropout_forward" + sz, rel_error(got, want), kActTol);
    check_backward(
        "dropout_backward" + sz, {{"dx", n}},
        [&](std::vector<float *> &g) {
          ok::dropout_backward<float>(g[0], want.data(), dout.data(), n, 0.25);
        },
        [&](std::vector<void *> &g) {
          rt::dropout_backward(static_cast<act_t *>(g[0]), out.p, dd.p, n,
                               0.25);
        },
        kActTol, kFloatTol, offset);
  }
  fwd1(
      "relu_forward", [&](float *o) { ref::relu_forward(o, a.data(), n); },
      [&](act_t *o) { rt::relu_forward(o, da.p, n); });
  fwd1(
      "silu_forward", [&](float *o) { ref::silu_forward(o, a.data(), n); },
      [&](act_t *o) { rt::silu_forward(o, da.p, n); });
  fwd1(
      "swiglu_forward",
      [&](float *o) { ref::swiglu_forward(o, a.data(), b.data(), n); },
      [&](act_t *o) { rt::swiglu_forward(o, da.p, db.p, n); });
  check_backward(
      "add_backward" + sz, {{"da", n}, {"db", n}},
      [&](std::vector<float *> &g) {
        ref::add_backward(g[0], g[1], dout.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::add_backward(static_cast<act_t *>(g[0]), static_cast<act_t *>(g[1]),
                         dd.p, n);
      },
      kActTol, kFloatTol, offset);
  check_backward(
      "mul_backward" + sz, {{"da", n}, {"db", n, false, true}},
      [&](std::vector<float *> &g) {
        ref::mul_backward(g[0], g[1], dout.data(), a.data(), b.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::mul_backward(static_cast<act_t *>(g[0]), static_cast<act_t *>(g[1]),
                         dd.p, da.p, db.p, n);
      },
      kActTol, kFloatTol, offset);
  check_backward(
      "relu_backward" + sz, {{"dx", n}},
      [&](std::vector<float *> &g) {
        ref::relu_backward(g[0], a.data(), dout.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::relu_backward(static_cast<act_t *>(g[0]), da.p, dd.p, n);
      },
      kActTol, kFloatTol, offset);
  // An add and the ReLU after it in one pass each way (codegen's
  // planProducerReluFusion): the two ops' values.
  std::vector<float> sum(static_cast<size_t>(n)), relu(sum.size());
  ref::add_forward(sum.data(), a.data(), b.data(), n);
  ref::relu_forward(relu.data(), sum.data(), n);
  fwd1(
      "add_relu_forward",
      [&](float *o) { std::copy(relu.begin(), relu.end(), o); },
      [&](act_t *o) { rt::add_relu_forward(o, da.p, db.p, n); });
  DevAct dr(relu, offset);
  check_backward(
      "add_relu_backward" + sz, {{"da", n}, {"db", n}},
      [&](std::vector<float *> &g) {
        std::vector<float> masked(sum.size(), 0.0f);
        ref::relu_backward(masked.data(), sum.data(), dout.data(), n);
        ref::add_backward(g[0], g[1], masked.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::add_relu_backward(static_cast<act_t *>(g[0]),
                              static_cast<act_t *>(g[1]), dr.p, dd.p, n);
      },
      kActTol, kFloatTol, offset);
  // A first writer's stores (codegen's storesGrad): the device gradient's
  // initial values must not show through a stored one; the other still adds.
  check_backward(
      "add_relu_backward store da" + sz, {{"da", n}, {"db", n}},
      [&](std::vector<float *> &g) {
        std::vector<float> masked(sum.size(), 0.0f);
        ref::relu_backward(masked.data(), sum.data(), dout.data(), n);
        std::fill(g[0], g[0] + n, 0.0f);
        ref::add_backward(g[0], g[1], masked.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::add_relu_backward(static_cast<act_t *>(g[0]),
                              static_cast<act_t *>(g[1]), dr.p, dd.p, n, false,
                              true);
      },
      kActTol, kFloatTol, offset);
  check_backward(
      "add_backward store both" + sz, {{"da", n}, {"db", n}},
      [&](std::vector<float *> &g) {
        std::fill(g[0], g[0] + n, 0.0f);
        std::fill(g[1], g[1] + n, 0.0f);
        ref::add_backward(g[0], g[1], dout.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::add_backward(static_cast<act_t *>(g[0]), static_cast<act_t *>(g[1]),
                         dd.p, n, false, false);
      },
      kActTol, kFloatTol, offset);
  check_backward(
      "relu_backward store" + sz, {{"dx", n}},
      [&](std::vector<float *> &g) {
        std::fill(g[0], g[0] + n, 0.0f);
        ref::relu_backward(g[0], a.data(), dout.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::relu_backward(static_cast<act_t *>(g[0]), da.p, dd.p, n, false);
      },
      kActTol, kFloatTol, offset);
  check_backward(
      "silu_backward" + sz, {{"dx", n}},
      [&](std::vector<float *> &g) {
        ref::silu_backward(g[0], a.data(), dout.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::silu_backward(static_cast<act_t *>(g[0]), da.p, dd.p, n);
      },
      kActTol, kFloatTol, offset);
  check_backward(
      "swiglu_backward" + sz, {{"dgate", n}, {"dup", n}},
      [&](std::vector<float *> &g) {
        ref::swiglu_backward(g[0], g[1], a.data(), b.data(), dout.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::swiglu_backward(static_cast<act_t *>(g[0]),
                            static_cast<act_t *>(g[1]), da.p, db.p, dd.p, n);
      },
      kActTol, kFloatTol, offset);
  // add_into is add_backward with one gradient; scale_inplace is the CPU's.
  check_backward(
      "add_into" + sz, {{"dst", n}},
      [&](std::vector<float *> &g) {
        ref::add_backward(g[0], nullptr, a.data(), n);
      },
      [&](std::vector<void *> &g) {
        rt::add_into(static_cast<act_t *>(g[0]), da.p, n);
      },
      kActTol, kFloatTol, offset);
  {
    std::vector<float> want = a;
    ref::scale_inplace(want.data(), 0.37f, n);
    DevAct x(a, offset);
    rt::scale_inplace(x.p, 0.37f, n);
    gOk &= report("scale_inplace act" + sz, rel_error(download(x.p, n), want),
                  kActTol);
#ifndef AUTODDL_FP32
    auto f = random_values(gRng, n, -3, 3, false);
    std::vector<float> wantF = f;
    ref::scale_inplace(wantF.data(), 0.37f, n);
    DevFloat xf(f, offset);
    rt::scale_inplace(xf.p, 0.37f, n);
    gOk &= report("scale_inplace fp32" + sz,
                  rel_error(download_float(xf.p, n), wantF), kFloatTol);
#endif
  }
}

} // namespace kcheck
