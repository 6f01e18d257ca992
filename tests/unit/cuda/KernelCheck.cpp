// KernelCheck: every CUDA kernel of backends/cuda/kernels (attention aside:
// AttentionCheck) against the CPU kernel of backends/cpu on fresh random
// inputs (seed printed; --seed N repeats a run), at GPT-2-like shapes and odd
// sizes (rows not a multiple of a block, C = 45, the 50257 vocabulary,
// pointers off 16-byte alignment). Built twice: bf16 and -DAUTODDL_FP32.
//
// Error measure: ||gpu - ref|| / ||ref|| over a tensor, ref from the CPU
// kernel on the same inputs (already rounded to act_t). Bounds in
// KernelCheckUtil.h: act_t results 1e-2 (bf16; storing rounds by 2^-9) or
// 1e-5 (fp32); fp32 results 1e-4 (bf16 build) or 1e-5. Outputs are poisoned
// with NaN before each forward; gradients start from random values of the
// increment's magnitude (backward adds), so overwriting instead of adding
// fails too.
//
// Exit 0 pass, 1 fail, 77 no GPU (ctest SKIP_RETURN_CODE). `--bench` times
// the kernels instead (KernelBench.cpp).
#include <cblas.h> // before the CPU headers: their guard keeps it global

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

// The CPU kernels declare the same names in autoddl::rt (identical
// signatures under AUTODDL_FP32), so the reference lives in namespace cpu.
namespace cpu {
#include "backends/cpu/Optimizer.h"
#include "backends/cpu/kernels/CrossEntropy.h"
#include "backends/cpu/kernels/Elementwise.h"
#include "backends/cpu/kernels/Embedding.h"
#include "backends/cpu/kernels/Linear.h"
#include "backends/cpu/kernels/Norm.h"
#include "backends/cpu/kernels/Shape.h"
#include "backends/cpu/kernels/Softmax.h"
} // namespace cpu

#include "backends/cuda/StepGraph.h"
#include "backends/cuda/kernels/CrossEntropy.h"
#include "backends/cuda/kernels/Elementwise.h"
#include "backends/cuda/kernels/Embedding.h"
#include "backends/cuda/kernels/Init.h"
#include "backends/cuda/kernels/Linear.h"
#include "backends/cuda/kernels/Norm.h"
#include "backends/cuda/kernels/Optimizer.h"
#include "backends/cuda/kernels/Reduce.h"
#include "backends/cuda/kernels/Shape.h"
#include "backends/cuda/kernels/Softmax.h"
#include "tests/unit/cuda/KernelCheckUtil.h"

int run_bench(); // KernelBench.cpp

namespace {
using namespace kcheck;
namespace ref = cpu::autoddl::rt;

std::mt19937 gRng;
bool gOk = true;

/// A gradient the backward adds into: n elements, stored as act_t or fp32,
/// or absent (null on both sides).
struct GradSpec {
  std::string name;
  int64_t n;
  bool isFloat = false;
  bool absent = false;
};

/// Runs the CPU backward once from zero (to size the increment) and once from
/// random initial values, the GPU backward once from the same initial values,
/// and checks every gradient. `offset` shifts each device gradient by that
/// many elements (alignment paths).
void check_backward(const std::string &what, const std::vector<GradSpec> &specs,
                    const std::function<void(std::vector<float *> &)> &cpuFn,
                    const std::function<void(std::vector<void *> &)> &gpuFn,
                    double actTol = kActTol, double floatTol = kFloatTol,
                    int64_t offset = 0) {
  const size_t k = specs.size();
  std::vector<std::vector<float>> incr(k), init(k), want(k);
  std::vector<float *> ptrs(k);
  for (size_t i = 0; i < k; ++i) {
    incr[i].assign(size_t(specs[i].n), 0.0f);
    ptrs[i] = specs[i].absent ? nullptr : incr[i].data();
  }
  cpuFn(ptrs);
  for (size_t i = 0; i < k; ++i) {
    double ss = 0;
    for (float v : incr[i])
      ss += double(v) * v;
    const float rms =
        incr[i].empty() ? 1.0f : float(std::sqrt(ss / double(incr[i].size())));
    const float r = rms > 0 ? rms * 1.7320508f : 1.0f; // uniform of that rms
    init[i] = random_values(gRng, specs[i].n, -r, r, !specs[i].isFloat);
    want[i] = init[i];
    ptrs[i] = specs[i].absent ? nullptr : want[i].data();
  }
  cpuFn(ptrs);
  std::vector<rt::DeviceBuffer<act_t>> actBufs(k);
  std::vector<rt::DeviceBuffer<float>> floatBufs(k);
  std::vector<void *> dev(k, nullptr);
  for (size_t i = 0; i < k; ++i) {
    if (specs[i].absent)
      continue;
    if (specs[i].isFloat) {
      floatBufs[i] = rt::DeviceBuffer<float>(specs[i].n + offset);
      rt::copy_to_device(floatBufs[i].data() + offset, init[i].data(),
                         specs[i].n * int64_t(sizeof(float)));
      dev[i] = floatBufs[i].data() + offset;
    } else {
      actBufs[i] = rt::DeviceBuffer<act_t>(specs[i].n + offset);
      upload(actBufs[i].data() + offset, init[i]);
      dev[i] = actBufs[i].data() + offset;
    }
  }
  gpuFn(dev);
  for (size_t i = 0; i < k; ++i) {
    if (specs[i].absent)
      continue;
    std::vector<float> got(static_cast<size_t>(specs[i].n));
    if (specs[i].isFloat)
      rt::copy_to_host(got.data(), dev[i], specs[i].n * int64_t(sizeof(float)));
    else
      got = download(static_cast<act_t *>(dev[i]), specs[i].n);
    gOk &= report(what + " " + specs[i].name, rel_error(got, want[i]),
                  specs[i].isFloat ? floatTol : actTol);
  }
}

/// A device copy of host values (rounded to act_t), `offset` elements into
/// its buffer.
struct DevAct {
  rt::DeviceBuffer<act_t> buf;
  act_t *p = nullptr;
  DevAct(const std::vector<float> &v, int64_t offset = 0)
      : buf(int64_t(v.size()) + offset), p(buf.data() + offset) {
    upload(p, v);
  }
};
struct DevFloat {
  rt::DeviceBuffer<float> buf;
  float *p = nullptr;
  DevFloat(const std::vector<float> &v, int64_t offset = 0)
      : buf(int64_t(v.size()) + offset), p(buf.data() + offset) {
    rt::copy_to_device(p, v.data(), int64_t(v.size() * sizeof(float)));
  }
  explicit DevFloat(int64_t n) : buf(n), p(buf.data()) {
    poison(p, n * int64_t(sizeof(float)));
  }
};
struct DevAlloc { // a poisoned act_t output
  rt::DeviceBuffer<act_t> buf;
  act_t *p = nullptr;
  explicit DevAlloc(int64_t n, int64_t offset = 0)
      : buf(n + offset), p(buf.data() + offset) {
    poison(p, n * int64_t(sizeof(act_t)));
  }
};

std::vector<float> download_float(const float *p, int64_t n) {
  std::vector<float> f(static_cast<size_t>(n));
  rt::copy_to_host(f.data(), p, n * int64_t(sizeof(float)));
  return f;
}

std::string shape(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// ---- GEMMs ----

/// The bound for GEMMs whose longest dot product has `k` terms. fp32: cuBLAS
/// sums in another order than the CPU's sgemm (whose plain-loop fallback sums
/// sequentially): ~sqrt(k) 2^-24 relative in the norm, 1.3e-5 at k = 50257
/// (measured 4.9e-6 on an H200); 1e-5 up to k = 1000, growing with sqrt(k).
/// bf16: the act_t rounding of the result dominates.
double gemm_tol(int64_t k) {
#ifdef AUTODDL_FP32
  return 1e-5 * std::max(1.0, std::sqrt(double(k) / 1000.0));
#else
  (void)k;
  return kActTol;
#endif
}

void check_linear(int64_t N, int64_t K, int64_t O, bool tw, bool bias) {
  const std::string tag = "linear " + shape({N, K, O}) + (tw ? " wT" : " w") +
                          (bias ? " bias" : "");
  const double gemmTol = gemm_tol(std::max({N, K, O}));
  auto x = random_values(gRng, N * K, -1, 1);
  auto w = random_values(gRng, K * O, -0.1f, 0.1f);
  auto b = random_values(gRng, O, -1, 1);
  std::vector<float> want(static_cast<size_t>(N * O));
  ref::linear_forward(want.data(), x.data(), w.data(),
                      bias ? b.data() : nullptr, N, K, O, tw);
  DevAct dx(x), dw(w), db(b);
  DevAlloc out(N * O);
  rt::linear_forward(out.p, dx.p, dw.p, bias ? db.p : nullptr, N, K, O, tw);
  gOk &= report(tag + " forward", rel_error(download(out.p, N * O), want),
                gemmTol);
  const int64_t cached = rt::gemm_plan_cache_size();
  rt::linear_forward(out.p, dx.p, dw.p, bias ? db.p : nullptr, N, K, O, tw);
  // The second call of a shape reuses its plan: the cache does not grow.
  gOk &= report(tag + " plan reused",
                double(rt::gemm_plan_cache_size() - cached), 0.0);

  auto dout = random_values(gRng, N * O, -1, 1);
  DevAct ddout(dout);
  check_backward(
      tag + " backward",
      {{"dx", N * K}, {"dw", K * O, true}, {"dbias", O, true, !bias}},
      [&](std::vector<float *> &g) {
        ref::linear_backward(g[0], g[1], g[2], dout.data(), x.data(), w.data(),
                             N, K, O, tw);
      },
      [&](std::vector<void *> &g) {
        rt::linear_backward(
            static_cast<act_t *>(g[0]), static_cast<float *>(g[1]),
            static_cast<float *>(g[2]), ddout.p, dx.p, dw.p, N, K, O, tw);
      },
      gemmTol, kFloatTol);
  // The stored input gradient (accumulate_dx = false, the GEMM's beta 0): a
  // poisoned dx is overwritten whole with dout W^T.
  std::vector<float> wantDx(static_cast<size_t>(N * K), 0.0f);
  ref::linear_backward(wantDx.data(), nullptr, nullptr, dout.data(), x.data(),
                       w.data(), N, K, O, tw);
  DevAlloc stored(N * K);
  rt::linear_backward(stored.p, nullptr, nullptr, ddout.p, dx.p, dw.p, N, K, O,
                      tw, false);
  gOk &= report(tag + " backward dx stored",
                rel_error(download(stored.p, N * K), wantDx), gemmTol);
}

/// linear_gelu_forward (fc1 + GELU) against the CPU linear then GELU, and
/// linear_backward_dgelu (fc2's input gradient through that GELU, [N,K] from
/// dout [N,O]) against the CPU linear backward then GELU backward, on the
/// CPU's pre-activation. Both fused in cuBLASLt's epilogue where it has one.
void check_linear_gelu(int64_t N, int64_t K, int64_t O, bool tw, bool bias) {
  const std::string tag = "linear+gelu " + shape({N, K, O}) +
                          (tw ? " wT" : " w") + (bias ? " bias" : "");
  const double gemmTol = gemm_tol(std::max({N, K, O}));
  auto x = random_values(gRng, N * K, -1, 1);
  auto w = random_values(gRng, K * O, -0.1f, 0.1f);
  auto b = random_values(gRng, O, -1, 1);
  std::vector<float> pre(static_cast<size_t>(N * O)),
      want(static_cast<size_t>(N * O));
  ref::linear_forward(pre.data(), x.data(), w.data(), bias ? b.data() : nullptr,
                      N, K, O, tw);
  ref::gelu_forward(want.data(), pre.data(), N * O, true);
  DevAct dx(x), dw(w), db(b);
  DevAlloc out(N * O), dpre(N * O);
  rt::linear_gelu_forward(out.p, dpre.p, dx.p, dw.p, bias ? db.p : nullptr, N,
                          K, O, tw);
  gOk &= report(tag + " forward", rel_error(download(out.p, N * O), want),
                gemmTol);
  gOk &= report(tag + " forward pre", rel_error(download(dpre.p, N * O), pre),
                gemmTol);

  // Backward of a second linear [O -> K2] whose input is gelu(pre): dpre =
  // gelu'(pre) * (dout2 W2^T); dout2 [N,K2], W2 [O,K2] (or [K2,O] with tw).
  const int64_t K2 = K;
  auto w2 = random_values(gRng, O * K2, -0.1f, 0.1f);
  auto dout = random_values(gRng, N * K2, -1, 1);
  std::vector<float> dg(static_cast<size_t>(N * O), 0.0f),
      dwant(static_cast<size_t>(N * O), 0.0f);
  ref::linear_backward(dg.data(), nullptr, nullptr, dout.data(), want.data(),
                       w2.data(), N, O, K2, tw);
  ref::gelu_backward(dwant.data(), pre.data(), dg.data(), N * O, true);
  DevAct dw2(w2), ddout(dout), dpreIn(pre);
  DevAlloc dgrad(N * O); // poisoned: the result overwrites it
  rt::linear_backward_dgelu(dgrad.p, ddout.p, dw2.p, dpreIn.p, N, O, K2, tw);
  gOk &= report(tag + " backward dpre",
                rel_error(download(dgrad.p, N * O), dwant), gemmTol);
}

/// linear_residual_forward (a projection and its residual add, the residual
/// read as the GEMM's C) against the CPU linear plus the residual.
void check_linear_residual(int64_t N, int64_t K, int64_t O, bool tw,
                           bool bias) {
  const std::string tag = "linear+residual " + shape({N, K, O}) +
                          (tw ? " wT" : " w") + (bias ? " bias" : "");
  const double gemmTol = gemm_tol(std::max({N, K, O}));
  auto x = random_values(gRng, N * K, -1, 1);
  auto w = random_values(gRng, K * O, -0.1f, 0.1f);
  auto b = random_values(gRng, O, -1, 1);
  auto res = random_values(gRng, N * O, -2, 2);
  std::vector<float> want(static_cast<size_t>(N * O));
  ref::linear_forward(want.data(), x.data(), w.data(),
                      bias ? b.data() : nullptr, N, K, O, tw);
  for (size_t j = 0; j < want.size(); ++j)
    want[j] += res[j];
  DevAct dx(x), dw(w), db(b), dres(res);
  DevAlloc out(N * O);
  rt::linear_residual_forward(out.p, dres.p, dx.p, dw.p, bias ? db.p : nullptr,
                              N, K, O, tw);
  gOk &= report(tag + " forward", rel_error(download(out.p, N * O), want),
                gemmTol);
  // The residual is read, not written.
  gOk &= report(tag + " residual kept", rel_error(download(dres.p, N * O), res),
                kActTol);
}

void check_matmul(int64_t Bt, int64_t M, int64_t K, int64_t N, bool tb) {
  const std::string tag =
      "matmul " + shape({Bt, M, K, N}) + (tb ? " bT" : " b");
  const double gemmTol = gemm_tol(std::max({M, K, N}));
  auto a = random_values(gRng, Bt * M * K, -1, 1);
  auto b = random_values(gRng, Bt * K * N, -1, 1);
  std::vector<float> want(static_cast<size_t>(Bt * M * N));
  ref::matmul_forward(want.data(), a.data(), b.data(), Bt, M, K, N, tb);
  DevAct da(a), db(b);
  DevAlloc out(Bt * M * N);
  rt::matmul_forward(out.p, da.p, db.p, Bt, M, K, N, tb);
  gOk &= report(tag + " forward", rel_error(download(out.p, Bt * M * N), want),
                gemmTol);
  auto dout = random_values(gRng, Bt * M * N, -1, 1);
  DevAct ddout(dout);
  check_backward(
      tag + " backward", {{"da", Bt * M * K}, {"db", Bt * K * N}},
      [&](std::vector<float *> &g) {
        ref::matmul_backward(g[0], g[1], dout.data(), a.data(), b.data(), Bt, M,
                             K, N, tb);
      },
      [&](std::vector<void *> &g) {
        rt::matmul_backward(static_cast<act_t *>(g[0]),
                            static_cast<act_t *>(g[1]), ddout.p, da.p, db.p, Bt,
                            M, K, N, tb);
      },
      gemmTol);
}

void check_bias_add(int64_t N, int64_t O) {
  const std::string tag = "bias_add " + shape({N, O});
  auto x = random_values(gRng, N * O, -1, 1);
  auto b = random_values(gRng, O, -1, 1);
  std::vector<float> want(static_cast<size_t>(N * O));
  ref::bias_add_forward(want.data(), x.data(), b.data(), N, O);
  DevAct dx(x), db(b);
  DevAlloc out(N * O);
  rt::bias_add_forward(out.p, dx.p, db.p, N, O);
  gOk &= report(tag + " forward", rel_error(download(out.p, N * O), want),
                kActTol);
  auto dout = random_values(gRng, N * O, -1, 1);
  DevAct ddout(dout);
  check_backward(
      tag + " backward", {{"dx", N * O}, {"dbias", O, true}},
      [&](std::vector<float *> &g) {
        ref::bias_add_backward(g[0], g[1], dout.data(), N, O);
      },
      [&](std::vector<void *> &g) {
        rt::bias_add_backward(static_cast<act_t *>(g[0]),
                              static_cast<float *>(g[1]), ddout.p, N, O);
      });
}

// ---- norms ----

void check_layernorm(int64_t N, int64_t C, bool withBeta, int64_t offset) {
  const std::string tag = "layernorm " + shape({N, C}) +
                          (withBeta ? "" : " no-beta") +
                          (offset ? " unaligned" : "");
  auto x = random_values(gRng, N * C, -2, 3);
  auto gamma = random_values(gRng, C, 0.5f, 1.5f);
  auto beta = random_values(gRng, C, -0.5f, 0.5f);
  std::vector<float> want(static_cast<size_t>(N * C)),
      mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
  ref::layernorm_forward(want.data(), mean.data(), rstd.data(), x.data(),
                         gamma.data(), withBeta ? beta.data() : nullptr, N, C,
                         1e-5f);
  DevAct dx(x, offset), dg(gamma, offset), db(beta, offset);
  DevAlloc out(N * C, offset);
  DevFloat dmean(N), drstd(N);
  rt::layernorm_forward(out.p, dmean.p, drstd.p, dx.p, dg.p,
                        withBeta ? db.p : nullptr, N, C, 1e-5f);
  gOk &= report(tag + " forward", rel_error(download(out.p, N * C), want),
                kActTol);
  gOk &= report(tag + " mean", rel_error(download_float(dmean.p, N), mean),
                kFloatTol);
  gOk &= report(tag + " rstd", rel_error(download_float(drstd.p, N), rstd),
                kFloatTol);
  // Backward on the CPU's statistics, so that only the backward is compared.
  auto dout = random_values(gRng, N * C, -1, 1);
  DevAct ddout(dout, offset);
  DevFloat cm(mean), cr(rstd);
  check_backward(
      tag + " backward",
      {{"dx", N * C}, {"dgamma", C, true}, {"dbeta", C, true, !withBeta}},
      [&](std::vector<float *> &g) {
        ref::layernorm_backward(g[0], g[1], g[2], dout.data(), x.data(),
                                gamma.data(), mean.data(), rstd.data(), N, C);
      },
      [&](std::vector<void *> &g) {
        rt::layernorm_backward(
            static_cast<act_t *>(g[0]), static_cast<float *>(g[1]),
            static_cast<float *>(g[2]), ddout.p, dx.p, dg.p, cm.p, cr.p, N, C);
      },
      kActTol, kFloatTol, offset);
}

void check_rmsnorm(int64_t N, int64_t C, int64_t offset) {
  const std::string tag =
      "rmsnorm " + shape({N, C}) + (offset ? " unaligned" : "");
  auto x = random_values(gRng, N * C, -2, 3);
  auto gamma = random_values(gRng, C, 0.5f, 1.5f);
  std::vector<float> want(static_cast<size_t>(N * C)),
      rstd(static_cast<size_t>(N));
  ref::rmsnorm_forward(want.data(), rstd.data(), x.data(), gamma.data(), N, C,
                       1e-6f);
  DevAct dx(x, offset), dg(gamma, offset);
  DevAlloc out(N * C, offset);
  DevFloat drstd(N);
  rt::rmsnorm_forward(out.p, drstd.p, dx.p, dg.p, N, C, 1e-6f);
  gOk &= report(tag + " forward", rel_error(download(out.p, N * C), want),
                kActTol);
  gOk &= report(tag + " rstd", rel_error(download_float(drstd.p, N), rstd),
                kFloatTol);
  auto dout = random_values(gRng, N * C, -1, 1);
  DevAct ddout(dout, offset);
  DevFloat cr(rstd);
  check_backward(
      tag + " backward", {{"dx", N * C}, {"dgamma", C, true}},
      [&](std::vector<float *> &g) {
        ref::rmsnorm_backward(g[0], g[1], dout.data(), x.data(), gamma.data(),
                              rstd.data(), N, C);
      },
      [&](std::vector<void *> &g) {
        rt::rmsnorm_backward(static_cast<act_t *>(g[0]),
                             static_cast<float *>(g[1]), ddout.p, dx.p, dg.p,
                             cr.p, N, C);
      },
      kActTol, kFloatTol, offset);
}

// ---- elementwise ----

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

// ---- embedding, positions, rotary ----

void check_embedding(int64_t N, int64_t C, int64_t V, int64_t v0, int64_t Vl) {
  const std::string tag = "embedding " + shape({N, C}) +
                          " V=" + std::to_string(V) +
                          (Vl < V ? " rows [" + std::to_string(v0) + "," +
                                        std::to_string(v0 + Vl) + ")"
                                  : "");
  std::uniform_int_distribution<int32_t> pick(0, int32_t(V - 1));
  std::vector<int32_t> ids(static_cast<size_t>(N));
  for (auto &i : ids)
    i = pick(gRng);
  ids[0] = ids[size_t(N - 1)]; // a repeated row: the scatter must add
  auto table = random_values(gRng, Vl * C, -1, 1);
  std::vector<float> want(static_cast<size_t>(N * C));
  ref::embedding_forward(want.data(), ids.data(), table.data(), N, C, v0, Vl);
  rt::DeviceBuffer<int32_t> dids(N);
  upload(dids.data(), ids);
  DevAct dt(table);
  DevAlloc out(N * C);
  rt::embedding_forward(out.p, dids.data(), dt.p, N, C, v0, Vl);
  gOk &= report(tag + " forward", rel_error(download(out.p, N * C), want),
                kActTol);
  auto dout = random_values(gRng, N * C, -1, 1);
  DevAct dd(dout);
  check_backward(
      tag + " backward", {{"dtable", Vl * C, true}},
      [&](std::vector<float *> &g) {
        ref::embedding_backward(g[0], dout.data(), ids.data(), N, C, v0, Vl);
      },
      [&](std::vector<void *> &g) {
        rt::embedding_backward(static_cast<float *>(g[0]), dd.p, dids.data(), N,
                               C, v0, Vl);
      });
}

void check_positional(int64_t B, int64_t T, int64_t C, int64_t t0) {
  const std::string tag =
      "positional " + shape({B, T, C}) + " t0=" + std::to_string(t0);
  const int64_t P = t0 + T + 3;
  auto x = random_values(gRng, B * T * C, -1, 1);
  auto table = random_values(gRng, P * C, -1, 1);
  std::vector<float> want(static_cast<size_t>(B * T * C));
  ref::positional_forward(want.data(), x.data(), table.data(), B, T, C, t0);
  DevAct dx(x), dt(table);
  DevAlloc out(B * T * C);
  rt::positional_forward(out.p, dx.p, dt.p, B, T, C, t0);
  gOk &= report(tag + " forward", rel_error(download(out.p, B * T * C), want),
                kActTol);
  auto dout = random_values(gRng, B * T * C, -1, 1);
  DevAct dd(dout);
  check_backward(
      tag + " backward", {{"dx", B * T * C}, {"dtable", P * C, true}},
      [&](std::vector<float *> &g) {
        ref::positional_backward(g[0], g[1], dout.data(), B, T, C, t0);
      },
      [&](std::vector<void *> &g) {
        rt::positional_backward(static_cast<act_t *>(g[0]),
                                static_cast<float *>(g[1]), dd.p, B, T, C, t0);
      });
}

void check_rotary(int64_t B, int64_t T, int64_t H, int64_t D, int64_t t0) {
  const std::string tag =
      "rotary " + shape({B, T, H, D}) + " t0=" + std::to_string(t0);
  const int64_t n = B * T * H * D;
  auto x = random_values(gRng, n, -1, 1);
  std::vector<float> want(static_cast<size_t>(n));
  ref::rotary_forward(want.data(), x.data(), B, T, H, D, 10000.0, t0);
  DevAct dx(x);
  DevAlloc out(n);
  rt::rotary_forward(out.p, dx.p, B, T, H, D, 10000.0, t0);
  gOk &= report(tag + " forward", rel_error(download(out.p, n), want), kActTol);
  auto dout = random_values(gRng, n, -1, 1);
  DevAct dd(dout);
  check_backward(
      tag + " backward", {{"dx", n}},
      [&](std::vector<float *> &g) {
        ref::rotary_backward(g[0], dout.data(), B, T, H, D, 10000.0, t0);
      },
      [&](std::vector<void *> &g) {
        rt::rotary_backward(static_cast<act_t *>(g[0]), dd.p, B, T, H, D,
                            10000.0, t0);
      });
}

// ---- softmax, transpose ----

void check_softmax(int64_t outer, int64_t L, int64_t inner) {
  const std::string tag = "softmax " + shape({outer, L, inner});
  const int64_t n = outer * L * inner;
  auto x = random_values(gRng, n, -4, 4);
  std::vector<float> want(static_cast<size_t>(n));
  ref::softmax_forward(want.data(), x.data(), outer, L, inner);
  DevAct dx(x);
  DevAlloc out(n);
  rt::softmax_forward(out.p, dx.p, outer, L, inner);
  gOk &= report(tag + " forward", rel_error(download(out.p, n), want), kActTol);
  // Backward from the CPU's y rounded to act_t, identical on both sides.
  std::vector<float> y = want;
  for (float &v : y)
    v = round_act(v);
  auto dout = random_values(gRng, n, -1, 1);
  DevAct dy(y), dd(dout);
  check_backward(
      tag + " backward", {{"dx", n}},
      [&](std::vector<float *> &g) {
        ref::softmax_backward(g[0], y.data(), dout.data(), outer, L, inner);
      },
      [&](std::vector<void *> &g) {
        rt::softmax_backward(static_cast<act_t *>(g[0]), dy.p, dd.p, outer, L,
                             inner);
      });
}

void check_transpose(const std::vector<int64_t> &shp,
                     const std::vector<int64_t> &perm) {
  std::string tag = "transpose", p;
  int64_t n = 1;
  for (int64_t d : shp) {
    n *= d;
    tag += (tag == "transpose" ? " " : "x") + std::to_string(d);
  }
  for (int64_t d : perm)
    p += std::to_string(d);
  tag += " perm " + p;
  auto x = random_values(gRng, n, -1, 1);
  std::vector<float> want(static_cast<size_t>(n));
  ref::transpose_forward(want.data(), x.data(), shp, perm);
  DevAct dx(x);
  DevAlloc out(n);
  rt::transpose_forward(out.p, dx.p, shp, perm);
  // A permutation moves values unchanged: exact.
  gOk &= report(tag + " forward", rel_error(download(out.p, n), want), 0.0);
  auto dout = random_values(gRng, n, -1, 1);
  DevAct dd(dout);
  check_backward(
      tag + " backward", {{"dx", n}},
      [&](std::vector<float *> &g) {
        ref::transpose_backward(g[0], dout.data(), shp, perm);
      },
      [&](std::vector<void *> &g) {
        rt::transpose_backward(static_cast<act_t *>(g[0]), dd.p, shp, perm);
      });
}

// ---- the losses ----

/// Random labels of N rows of V classes: row 0's is 0, the last row's V - 1
/// (both ends of a row), row 1's -1 (outside the loss: loss 0, no gradient).
std::vector<int32_t> loss_targets(int64_t N, int64_t V) {
  std::uniform_int_distribution<int32_t> pick(0, int32_t(V - 1));
  std::vector<int32_t> targets(static_cast<size_t>(N));
  for (auto &t : targets)
    t = pick(gRng);
  targets[0] = 0;
  targets[size_t(N - 1)] = int32_t(V - 1);
  if (N > 2)
    targets[1] = -1;
  return targets;
}

// Squared error against the one-hot label (--loss squared_error).

void check_squared_error(int64_t N, int64_t C) {
  const std::string tag = "squared_error " + shape({N, C});
  auto scores = random_values(gRng, N * C, -2, 2);
  const std::vector<int32_t> targets = loss_targets(N, C);
  std::vector<float> losses(static_cast<size_t>(N));
  ref::squared_error_forward(losses.data(), scores.data(), targets.data(), N,
                             C);
  DevAct ds(scores);
  rt::DeviceBuffer<int32_t> dt(N);
  upload(dt.data(), targets);
  DevFloat dloss(N);
  rt::squared_error_forward(dloss.p, ds.p, dt.data(), N, C);
  gOk &= report(tag + " losses", rel_error(download_float(dloss.p, N), losses),
                kFloatTol);
  const float scale = 1.0f / float(N);
  check_backward(
      tag + " backward", {{"dscores", N * C}},
      [&](std::vector<float *> &g) {
        ref::squared_error_backward(g[0], scores.data(), targets.data(), N, C,
                                    scale);
      },
      [&](std::vector<void *> &g) {
        rt::squared_error_backward(static_cast<act_t *>(g[0]), ds.p, dt.data(),
                                   N, C, scale);
      });
}

// ---- cross-entropy ----

void check_crossentropy(int64_t N, int64_t V) {
  const std::string tag = "crossentropy " + shape({N, V});
  auto logits = random_values(gRng, N * V, -4, 4);
  const std::vector<int32_t> targets = loss_targets(N, V);
  std::vector<float> losses(static_cast<size_t>(N)),
      lse(static_cast<size_t>(N));
  ref::crossentropy_forward(losses.data(), lse.data(), logits.data(),
                            targets.data(), N, V);
  DevAct dl(logits);
  rt::DeviceBuffer<int32_t> dt(N);
  upload(dt.data(), targets);
  DevFloat dloss(N), dlse(N);
  rt::crossentropy_forward(dloss.p, dlse.p, dl.p, dt.data(), N, V);
  gOk &= report(tag + " losses", rel_error(download_float(dloss.p, N), losses),
                kFloatTol);
  gOk &= report(tag + " lse", rel_error(download_float(dlse.p, N), lse),
                kFloatTol);
  DevFloat clse(lse);
  const float scale = 1.0f / float(N);
  check_backward(
      tag + " backward", {{"dlogits", N * V}},
      [&](std::vector<float *> &g) {
        ref::crossentropy_backward(g[0], logits.data(), lse.data(),
                                   targets.data(), N, V, scale);
      },
      [&](std::vector<void *> &g) {
        rt::crossentropy_backward(static_cast<act_t *>(g[0]), dl.p, clse.p,
                                  dt.data(), N, V, scale);
      });

  // Vocab-parallel pieces on two shards [0, V0) and [V0, V), the all-reduces
  // done on the host: every piece against the CPU piece on the same inputs.
  const int64_t V0 = V / 2;
  std::vector<std::vector<float>> shard(2);
  const int64_t v0s[2] = {0, V0}, vls[2] = {V0, V - V0};
  for (int s = 0; s < 2; ++s)
    for (int64_t n = 0; n < N; ++n)
      shard[s].insert(shard[s].end(), logits.begin() + n * V + v0s[s],
                      logits.begin() + n * V + v0s[s] + vls[s]);
  std::vector<float> gmax(size_t(N), -INFINITY), sums(size_t(2 * N), 0.0f);
  std::vector<std::vector<float>> localSums(2);
  for (int s = 0; s < 2; ++s) {
    const std::string st = tag + " vocab-parallel shard " + std::to_string(s);
    std::vector<float> mx(static_cast<size_t>(N));
    ref::crossentropy_vocab_parallel_max(mx.data(), shard[s].data(), N, vls[s]);
    DevAct ds(shard[s]);
    DevFloat dmx(N);
    rt::crossentropy_vocab_parallel_max(dmx.p, ds.p, N, vls[s]);
    gOk &= report(st + " max", rel_error(download_float(dmx.p, N), mx), 0.0);
    for (int64_t n = 0; n < N; ++n)
      gmax[size_t(n)] = std::max(gmax[size_t(n)], mx[size_t(n)]);
  }
  DevFloat dgmax(gmax);
  for (int s = 0; s < 2; ++s) {
    const std::string st = tag + " vocab-parallel shard " + std::to_string(s);
    localSums[s].assign(size_t(2 * N), 0.0f);
    ref::crossentropy_vocab_parallel_sums(localSums[s].data(), shard[s].data(),
                                          targets.data(), gmax.data(), N,
                                          vls[s], v0s[s]);
    DevAct ds(shard[s]);
    DevFloat dsums(2 * N);
    rt::crossentropy_vocab_parallel_sums(dsums.p, ds.p, dt.data(), dgmax.p, N,
                                         vls[s], v0s[s]);
    gOk &= report(st + " sums",
                  rel_error(download_float(dsums.p, 2 * N), localSums[s]),
                  kFloatTol);
    for (int64_t i = 0; i < 2 * N; ++i)
      sums[size_t(i)] += localSums[s][size_t(i)];
  }
  std::vector<float> vpLoss(static_cast<size_t>(N));
  ref::crossentropy_vocab_parallel_loss(vpLoss.data(), gmax.data(), sums.data(),
                                        targets.data(), N);
  DevFloat dsums(sums), dvl(N);
  rt::crossentropy_vocab_parallel_loss(dvl.p, dgmax.p, dsums.p, dt.data(), N);
  gOk &= report(tag + " vocab-parallel loss",
                rel_error(download_float(dvl.p, N), vpLoss), kFloatTol);
  // And the split loss is the whole-vocabulary loss.
  gOk &= report(tag + " vocab-parallel loss = whole loss",
                rel_error(download_float(dvl.p, N), losses), kFloatTol);
  for (int s = 0; s < 2; ++s) {
    DevAct ds(shard[s]);
    check_backward(
        tag + " vocab-parallel shard " + std::to_string(s) + " backward",
        {{"dlogits", N * vls[s]}},
        [&](std::vector<float *> &g) {
          ref::crossentropy_vocab_parallel_backward(
              g[0], shard[s].data(), targets.data(), gmax.data(), sums.data(),
              N, vls[s], v0s[s], scale);
        },
        [&](std::vector<void *> &g) {
          rt::crossentropy_vocab_parallel_backward(
              static_cast<act_t *>(g[0]), ds.p, dt.data(), dgmax.p, dsums.p, N,
              vls[s], v0s[s], scale);
        });
  }
}

/// Rows `ld` apart (the CUDA program's padded vocabulary: logits [N, ld] with
/// the first V columns real). The padding columns of logits hold 1e4, which
/// would dominate every log-sum-exp if read; those of dlogits hold 0.5 (exact
/// in bf16), which the backward must leave unchanged bit for bit. The real
/// columns must match the CPU kernels on the dense rows within the bounds of
/// check_crossentropy. The vocab-parallel pieces likewise, each shard padded
/// to its own multiple of 64 columns.
void check_crossentropy_strided(int64_t N, int64_t V) {
  // The row stride for w columns: rounded up to 64, or 64 more if aligned
  // (there is always a padding column to check).
  const auto strideOf = [](int64_t w) { return (w + 64) / 64 * 64; };
  const std::string tag = "crossentropy strided " + shape({N, V});
  auto logits = random_values(gRng, N * V, -4, 4);
  const std::vector<int32_t> targets = loss_targets(N, V);
  rt::DeviceBuffer<int32_t> dt(N);
  upload(dt.data(), targets);
  const float scale = 1.0f / float(N);
  constexpr float kPadLogit = 1e4f, kPadGrad = 0.5f;
  // Copies columns [c0, c0 + w) of the dense rows into rows ld apart, the
  // rest filled with `fill`.
  auto padded = [&](const std::vector<float> &dense, int64_t c0, int64_t w,
                    int64_t ld, float fill) {
    std::vector<float> r(size_t(N * ld), fill);
    for (int64_t n = 0; n < N; ++n)
      std::copy(dense.begin() + n * V + c0, dense.begin() + n * V + c0 + w,
                r.begin() + n * ld);
    return r;
  };
  // Checks a strided dlogits against the dense CPU gradient `want` [N, w]:
  // real columns within kActTol, padding columns exactly kPadGrad.
  // stored: the storing backward (accumulate = false) ran over a buffer full
  // of kStale, so its padding columns must be exactly zero instead (and rows
  // outside the loss zero, as in `want`).
  constexpr float kStale = 7.0f;
  auto checkGrad = [&](const std::string &what, const act_t *d,
                       const std::vector<float> &want, int64_t w, int64_t ld,
                       bool stored = false) {
    const float padWant = stored ? 0.0f : kPadGrad;
    std::vector<float> all = download(d, N * ld), real;
    double padErr = 0;
    for (int64_t n = 0; n < N; ++n) {
      real.insert(real.end(), all.begin() + n * ld, all.begin() + n * ld + w);
      for (int64_t j = w; j < ld; ++j)
        padErr = std::max(padErr,
                          double(std::fabs(all[size_t(n * ld + j)] - padWant)));
    }
    gOk &= report(what + (stored ? " stored dlogits" : " dlogits"),
                  rel_error(real, want), kActTol);
    gOk &= report(what + (stored ? " stored padding columns zero"
                                 : " padding columns untouched"),
                  padErr, 0.0);
  };

  const int64_t ld = strideOf(V);
  std::vector<float> losses(static_cast<size_t>(N)),
      lse(static_cast<size_t>(N));
  ref::crossentropy_forward(losses.data(), lse.data(), logits.data(),
                            targets.data(), N, V);
  DevAct dl(padded(logits, 0, V, ld, kPadLogit));
  DevFloat dloss(N), dlse(N);
  rt::crossentropy_forward(dloss.p, dlse.p, dl.p, dt.data(), N, V, ld);
  gOk &= report(tag + " ld " + std::to_string(ld) + " losses",
                rel_error(download_float(dloss.p, N), losses), kFloatTol);
  gOk &= report(tag + " ld " + std::to_string(ld) + " lse",
                rel_error(download_float(dlse.p, N), lse), kFloatTol);
  std::vector<float> want(size_t(N * V), 0.0f);
  ref::crossentropy_backward(want.data(), logits.data(), lse.data(),
                             targets.data(), N, V, scale);
  DevFloat clse(lse);
  DevAct dd(
      padded(std::vector<float>(size_t(N * V), 0.0f), 0, V, ld, kPadGrad));
  rt::crossentropy_backward(dd.p, dl.p, clse.p, dt.data(), N, V, scale, ld);
  checkGrad(tag + " backward", dd.p, want, V, ld);
  DevAct stale(std::vector<float>(size_t(N * ld), kStale));
  rt::crossentropy_backward(stale.p, dl.p, clse.p, dt.data(), N, V, scale, ld,
                            /*accumulate=*/false);
  checkGrad(tag + " backward", stale.p, want, V, ld, /*stored=*/true);

  // Vocab-parallel: shards [0, V0) and [V0, V), each [N, round_up(Vl, 64)];
  // the all-reduces done on the host.
  const int64_t V0 = V / 2, v0s[2] = {0, V0}, vls[2] = {V0, V - V0};
  std::vector<float> gmax(size_t(N), -INFINITY), sums(size_t(2 * N), 0.0f);
  std::vector<std::vector<float>> dense(2);
  for (int s = 0; s < 2; ++s)
    dense[s] = [&] {
      std::vector<float> r;
      for (int64_t n = 0; n < N; ++n)
        r.insert(r.end(), logits.begin() + n * V + v0s[s],
                 logits.begin() + n * V + v0s[s] + vls[s]);
      return r;
    }();
  for (int s = 0; s < 2; ++s) {
    const int64_t lds = strideOf(vls[s]);
    const std::string st = tag + " vocab-parallel shard " + std::to_string(s) +
                           " ld " + std::to_string(lds);
    std::vector<float> mx(static_cast<size_t>(N));
    ref::crossentropy_vocab_parallel_max(mx.data(), dense[s].data(), N, vls[s]);
    DevAct ds(padded(logits, v0s[s], vls[s], lds, kPadLogit));
    DevFloat dmx(N);
    rt::crossentropy_vocab_parallel_max(dmx.p, ds.p, N, vls[s], lds);
    gOk &= report(st + " max", rel_error(download_float(dmx.p, N), mx), 0.0);
    for (int64_t n = 0; n < N; ++n)
      gmax[size_t(n)] = std::max(gmax[size_t(n)], mx[size_t(n)]);
  }
  DevFloat dgmax(gmax);
  for (int s = 0; s < 2; ++s) {
    const int64_t lds = strideOf(vls[s]);
    const std::string st = tag + " vocab-parallel shard " + std::to_string(s);
    std::vector<float> local(size_t(2 * N), 0.0f);
    ref::crossentropy_vocab_parallel_sums(local.data(), dense[s].data(),
                                          targets.data(), gmax.data(), N,
                                          vls[s], v0s[s]);
    DevAct ds(padded(logits, v0s[s], vls[s], lds, kPadLogit));
    DevFloat dsums(2 * N);
    rt::crossentropy_vocab_parallel_sums(dsums.p, ds.p, dt.data(), dgmax.p, N,
                                         vls[s], v0s[s], lds);
    gOk &= report(st + " sums",
                  rel_error(download_float(dsums.p, 2 * N), local), kFloatTol);
    for (int64_t i = 0; i < 2 * N; ++i)
      sums[size_t(i)] += local[size_t(i)];
  }
  DevFloat dsums(sums);
  for (int s = 0; s < 2; ++s) {
    const int64_t lds = strideOf(vls[s]);
    std::vector<float> wantS(size_t(N * vls[s]), 0.0f);
    ref::crossentropy_vocab_parallel_backward(
        wantS.data(), dense[s].data(), targets.data(), gmax.data(), sums.data(),
        N, vls[s], v0s[s], scale);
    DevAct ds(padded(logits, v0s[s], vls[s], lds, kPadLogit));
    std::vector<float> zeros(size_t(N * V), 0.0f);
    DevAct dg(padded(zeros, 0, vls[s], lds, kPadGrad));
    rt::crossentropy_vocab_parallel_backward(
        dg.p, ds.p, dt.data(), dgmax.p, dsums.p, N, vls[s], v0s[s], scale, lds);
    checkGrad(tag + " vocab-parallel shard " + std::to_string(s) + " backward",
              dg.p, wantS, vls[s], lds);
    DevAct staleS(std::vector<float>(size_t(N * lds), kStale));
    rt::crossentropy_vocab_parallel_backward(staleS.p, ds.p, dt.data(), dgmax.p,
                                             dsums.p, N, vls[s], v0s[s], scale,
                                             lds, /*accumulate=*/false);
    checkGrad(tag + " vocab-parallel shard " + std::to_string(s) + " backward",
              staleS.p, wantS, vls[s], lds, /*stored=*/true);
  }
}

// ---- optimizers, reductions, casts ----

/// Working copy check: work must equal the master weights rounded to act_t.
void check_work(const std::string &tag, const act_t *work,
                const std::vector<float> &params) {
  std::vector<float> want = params;
  for (float &v : want)
    v = round_act(v);
  gOk &= report(tag + " work copy",
                rel_error(download(work, int64_t(params.size())), want), 0.0);
}

void check_adamw(int64_t n, int64_t offset) {
  const std::string tag =
      "adamw n=" + std::to_string(n) + (offset ? " unaligned" : "");
  auto p = random_values(gRng, n, -1, 1, false);
  auto m = std::vector<float>(size_t(n), 0.0f), v = m;
  ref::AdamWConfig rc;
  rc.lr = 3e-4;
  rc.weight_decay = 0.1;
  rt::AdamWConfig gc;
  gc.lr = rc.lr;
  gc.weight_decay = rc.weight_decay;
  DevFloat dp(p, offset), dm(m, offset), dv(v, offset);
  rt::DeviceBuffer<act_t> work(n + offset);
  for (int64_t t = 1; t <= 3; ++t) {
    auto g = random_values(gRng, n, -0.01f, 0.01f, false);
    ref::adamw_step(p.data(), g.data(), m.data(), v.data(), n, rc, t);
    DevFloat dg(g, offset);
    rt::adamw_step(dp.p, dg.p, dm.p, dv.p, n, gc, t, work.data() + offset);
  }
  // Same operations in the same order, each correctly rounded (no FMA):
  // identical bits are expected; the bound allows for a different libm
  // rounding of the host-side pow/sqrt only.
  gOk &= report(tag + " params (3 steps)",
                rel_error(download_float(dp.p, n), p), 1e-6);
  gOk &= report(tag + " m", rel_error(download_float(dm.p, n), m), 1e-6);
  gOk &= report(tag + " v", rel_error(download_float(dv.p, n), v), 1e-6);
  check_work(tag, work.data() + offset, download_float(dp.p, n));
}

void check_sgd(int64_t n, float momentum) {
  const std::string tag = "sgd n=" + std::to_string(n) +
                          " momentum=" + std::to_string(momentum).substr(0, 3);
  auto p = random_values(gRng, n, -1, 1, false);
  std::vector<float> buf(size_t(n), 0.0f);
  DevFloat dp(p), db(buf);
  rt::DeviceBuffer<act_t> work(n);
  for (int64_t t = 1; t <= 2; ++t) {
    auto g = random_values(gRng, n, -0.1f, 0.1f, false);
    ref::sgd_step(p.data(), g.data(), momentum != 0 ? buf.data() : nullptr, n,
                  0.05f, momentum, 0.01f, t);
    DevFloat dg(g);
    rt::sgd_step(dp.p, dg.p, momentum != 0 ? db.p : nullptr, n, 0.05f, momentum,
                 0.01f, t, work.data());
  }
  gOk &= report(tag + " params (2 steps)",
                rel_error(download_float(dp.p, n), p), 1e-6);
  check_work(tag, work.data(), download_float(dp.p, n));
}

void check_reductions(int64_t n) {
  const std::string sz = " n=" + std::to_string(n);
  auto g = random_values(gRng, n, -1, 1, false);
  DevFloat dg(g);
  const double want = ref::grad_norm_squared(g.data(), n);
  // Both sum the squares in double, the CPU sequentially: its error bound is
  // n 2^-53 relative, 4.7e-10 at n = 4.2M (measured 1.2e-12).
  gOk &= report("grad_norm_squared" + sz,
                std::fabs(rt::grad_norm_squared(dg.p, n) - want) / want, 1e-9);
  double sum = 0;
  for (float v : g)
    sum += v;
  gOk &= report("sum_to_host" + sz,
                std::fabs(rt::sum_to_host(dg.p, n) - sum) /
                    std::max(1.0, std::fabs(sum)),
                1e-9);
  rt::DeviceBuffer<act_t> a(n + 1);
  rt::DeviceBuffer<float> back(n + 1);
  for (int64_t off : {int64_t(0), int64_t(1)}) {
    rt::cast_to_act(a.data() + off, dg.p, n);
    std::vector<float> rounded = g;
    for (float &v : rounded)
      v = round_act(v);
    const std::string o = off ? " unaligned" : "";
    gOk &= report("cast_to_act" + sz + o,
                  rel_error(download(a.data() + off, n), rounded), 0.0);
    rt::cast_to_float(back.data() + off, a.data() + off, n);
    gOk &=
        report("cast_to_float" + sz + o,
               rel_error(download_float(back.data() + off, n), rounded), 0.0);
  }
}

/// init_normal_on_device against the host's init_normal on blocks of a full
/// tensor (whole, split along each kind of dimension, rank 1 and 3): the same
/// floats, but for the rare element where the device's log or cos rounds a
/// double differently (then 1 ulp); fill_on_device exactly.
void check_init() {
  const rt::Slice cases[] = {
      rt::Slice::whole({1001, 45}),
      rt::Slice::whole({4096, 768}).split(1, 4, 2),
      rt::Slice::whole({768, 3072}).split(0, 3, 1).split(1, 2, 1),
      rt::Slice::whole({(1 << 20) + 3}),
      rt::Slice::whole({6, 33, 70}).split(2, 2, 1),
  };
  for (const rt::Slice &slice : cases) {
    const int64_t n = slice.numel();
    std::vector<float> want(static_cast<size_t>(n));
    rt::init_normal(want.data(), slice, 1234, "h.3.attn.c_attn.weight", 0.25f,
                    0.02f);
    rt::DeviceBuffer<float> got(n + 5);
    rt::init_normal_on_device(got.data(), slice, 1234, "h.3.attn.c_attn.weight",
                              0.25f, 0.02f);
    const std::vector<float> host = download_float(got.data(), n + 5);
    int64_t differ = 0;
    double worst = 0.0;
    for (int64_t k = 0; k < n; ++k)
      if (host[size_t(k)] != want[size_t(k)]) {
        ++differ;
        worst = std::max(worst,
                         double(std::fabs(host[size_t(k)] - want[size_t(k)])) /
                             std::fabs(want[size_t(k)]));
      }
    bool tail = true; // the elements past the slice stay zero
    for (int64_t k = n; k < n + 5; ++k)
      tail &= host[size_t(k)] == 0.0f;
    std::string shape;
    for (int64_t d : slice.local)
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
    gOk &= report("init_normal_on_device " + shape + ": elements differing",
                  double(differ) / double(n) + (tail ? 0.0 : 1.0), 1e-6);
    gOk &= report("init_normal_on_device " + shape + ": their error", worst,
                  1.2e-7);
  }
  rt::DeviceBuffer<float> ones(1003);
  rt::fill_on_device(ones.data(), 1000, 1.0f);
  std::vector<float> want(1003, 1.0f);
  want[1000] = want[1001] = want[1002] = 0.0f;
  gOk &= report("fill_on_device",
                rel_error(download_float(ones.data(), 1003), want), 0.0);
}

/// ZeroSet: ranges at odd addresses and lengths (a byte, under 16, several
/// chunks, a chunk exactly) in one buffer of 0xAB bytes; after zero() the
/// ranges' bytes are 0 and every other byte is still 0xAB, twice (reuse).
void check_zero_set() {
  const int64_t chunk = rt::ZeroSet::kChunkBytes, total = 5 * chunk + 4096;
  rt::DeviceBuffer<unsigned char> buf(total);
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 1},
      {3, 13},
      {17, 2 * chunk + 5},
      {2 * chunk + 64, chunk},
      {4 * chunk + 7, chunk + 100}};
  std::vector<unsigned char> want(size_t(total), 0xAB);
  for (auto [at, n] : ranges)
    std::fill(want.begin() + at, want.begin() + at + n, 0);
  rt::ZeroSet set;
  for (auto [at, n] : ranges)
    set.add(buf.data() + at, n);
  set.add(buf.data(), 0); // empty: ignored
  set.seal();
  bool same = set.ranges() == int64_t(ranges.size());
  for (int round = 0; round < 2; ++round) {
    std::vector<unsigned char> fill(static_cast<size_t>(total), 0xAB),
        got(static_cast<size_t>(total), 0);
    rt::copy_to_device(buf.data(), fill.data(), total);
    set.zero();
    rt::copy_to_host(got.data(), buf.data(), total);
    same &= got == want;
  }
  gOk &= report("ZeroSet zeroes its ranges and nothing else", same ? 0.0 : 1.0,
                0.0);
}

/// StepGraph: a body (zero y, then y += x twice) run eagerly, captured, then
/// replayed with new x uploaded before each call (outside the body): y = 2x
/// every time, exactly (small integers); one graph, captured at the second
/// call, with at least the body's three nodes.
void check_step_graph() {
  const int64_t n = 4099;
  rt::DeviceBuffer<act_t> x(n), y(n);
  rt::StepGraph graph;
  auto body = [&] {
    rt::zero(y.data(), n * int64_t(sizeof(act_t)));
    rt::add_into(y.data(), x.data(), n);
    rt::add_into(y.data(), x.data(), n);
  };
  bool same = true;
  for (int call = 0; call < 4; ++call) {
    std::vector<float> xs(static_cast<size_t>(n)), want(xs.size());
    for (int64_t i = 0; i < n; ++i) {
      xs[size_t(i)] = float((i * 7 + call * 3) % 16);
      want[size_t(i)] = 2 * xs[size_t(i)];
    }
    upload(x.data(), xs);
    graph.run(body);
    same &= download(y.data(), n) == want;
    same &= graph.captured() == (call >= 1);
  }
  gOk &= report("StepGraph: eager, captured, replayed with new inputs",
                same && !graph.failed() && graph.nodes() >= 3 ? 0.0 : 1.0, 0.0);
  graph.reset();
}

void check_runtime() {
  const int64_t before = rt::current_device_bytes();
  {
    rt::DeviceBuffer<float> b(1000003);
    gOk &= report("DeviceBuffer zero-filled",
                  rel_error(download_float(b.data(), b.size()),
                            std::vector<float>(size_t(b.size()), 0.0f)),
                  0.0);
    gOk &= report("peak_device_bytes >= live bytes",
                  rt::peak_device_bytes() >= before + 1000003 * 4 ? 0.0 : 1.0,
                  0.0);
    rt::DeviceBuffer<float> moved = std::move(b);
    gOk &= report("DeviceBuffer move leaves the source empty",
                  b.size() == 0 && b.data() == nullptr ? 0.0 : 1.0, 0.0);
  }
  gOk &= report("DeviceBuffer frees (current bytes back)",
                double(rt::current_device_bytes() - before), 0.0);
  check_zero_set();
  check_step_graph();
  check_init();
}

void fault_hook(const char *m) { std::fprintf(stderr, "hook: %s\n", m); }

/// A failed check prints rank, error, call and place, runs the hook, aborts.
/// Runs in a child process before the parent touches the GPU.
void check_fault_path() {
  int fds[2];
  if (pipe(fds) != 0) {
    gOk &= report("fault path (pipe)", 1.0, 0.0);
    return;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    rt::set_rank_for_messages(3);
    rt::set_fault_hook(fault_hook);
    AUTODDL_CUDA_CHECK(cudaErrorInvalidValue);
    _exit(0); // not reached
  }
  close(fds[1]);
  std::string text;
  char buf[512];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0)
    text.append(buf, size_t(got));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  const bool named =
      text.find("autoddl: rank 3: CUDA error cudaErrorInvalidValue") == 0 &&
      text.find("in cudaErrorInvalidValue at ") != std::string::npos &&
      text.find("KernelCheck.cpp:") != std::string::npos &&
      text.find("hook: autoddl: rank 3") != std::string::npos;
  if (!named)
    std::printf("child stderr: %s\n", text.c_str());
  gOk &= report("fault path: message, hook, abort",
                aborted && named ? 0.0 : 1.0, 0.0);
}

} // namespace

int main(int argc, char **argv) {
  unsigned seed = std::random_device{}();
  bool bench = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bench") == 0)
      bench = true;
    else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
      seed = unsigned(std::strtoul(argv[++i], nullptr, 10));
    else {
      std::printf("usage: %s [--seed N] [--bench]\n", argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  check_fault_path(); // before this process initialises CUDA (fork)
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("KernelCheck: no CUDA device, skipped\n");
    return 77;
  }
  if (bench)
    return run_bench();
  std::printf("KernelCheck (%s), seed %u\n", kMode, seed);
  gRng.seed(seed);

  check_runtime();
  check_linear(129, 768, 2304, false, true); // GPT-2 c_attn (Conv1D [K,O])
  check_linear(129, 768, 2304, true, true);  // torch Linear [O,K]
  check_linear(37, 45, 51, true, true);      // odd: unaligned leading dims
  check_linear(37, 45, 51, false, false);
  check_linear(33, 64, 50257, true, false);       // lm_head, odd vocabulary
  check_linear_gelu(129, 768, 3072, false, true); // GPT-2 c_fc (Conv1D)
  check_linear_gelu(129, 768, 3072, true, true);  // torch Linear
  check_linear_gelu(37, 48, 64, true, false);
  check_linear_gelu(37, 45, 51, false, true);        // O % 8 != 0: unfused path
  check_linear_residual(129, 768, 768, false, true); // GPT-2 attn c_proj
  check_linear_residual(129, 3072, 768, true, true); // mlp c_proj
  check_linear_residual(37, 45, 51, false, false);   // odd sizes
  check_matmul(3, 65, 64, 129, false);
  check_matmul(3, 65, 64, 129, true);
  check_matmul(2, 7, 9, 11, true);
  check_bias_add(1001, 768);
  check_bias_add(1001, 51);
  check_layernorm(1001, 768, true, 0); // rows not a multiple of 8 warps
  check_layernorm(37, 1600, false, 0);
  check_layernorm(9, 45, true, 0);
  check_layernorm(65, 768, true, 1);
  check_rmsnorm(1001, 768, 0);
  check_rmsnorm(9, 45, 0);
  check_rmsnorm(65, 1600, 1);
  check_elementwise((1 << 20) + 3, 0);
  check_elementwise(1001, 1);
  check_embedding(1001, 768, 50257, 0, 50257);
  check_embedding(1001, 768, 50257, 25000, 25257);
  check_embedding(77, 45, 1000, 0, 1000);
  check_positional(3, 129, 768, 0);
  check_positional(2, 65, 45, 7);
  check_rotary(2, 65, 3, 64, 0);
  check_rotary(2, 33, 4, 128, 5);
  check_softmax(37, 1001, 1);
  check_softmax(5, 33, 7);
  check_transpose({2, 3, 5, 7}, {0, 2, 1, 3});
  check_transpose({4, 33, 6, 8}, {3, 1, 0, 2});
  check_crossentropy(33, 50257);
  check_crossentropy(17, 1000);
  check_crossentropy_strided(33, 50257); // ld 50304; shards 25152, 25152
  check_crossentropy_strided(9, 1000);   // ld 1024; shards 512, 512
  check_squared_error(64, 10);
  check_squared_error(5, 1000);
  check_adamw((1 << 20) + 5, 0);
  check_adamw(1001, 1);
  check_sgd(100003, 0.9f);
  check_sgd(1001, 0.0f);
  check_reductions((1 << 22) + 7);
  std::printf("KernelCheck (%s): %s\n", kMode, gOk ? "PASS" : "FAIL");
  return gOk ? 0 : 1;
}
