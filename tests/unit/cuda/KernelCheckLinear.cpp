// KernelCheck's GEMM cases: linear (+ GELU, + residual), matmul, bias_add/ReLU.
#include "tests/unit/cuda/KernelCheck.h" // first: see there

#include "backends/cuda/kernels/Linear.h"

#include <algorithm>

namespace kcheck {

namespace {

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

/// A linear case: its report tag, tolerance, random operands x [N,K], w (K*O
/// elements) and b [O] drawn in that order, and `lin`, the CPU's
/// linear_forward of them (with the bias where `bias`).
struct LinearCase {
  std::string tag;
  double tol;
  std::vector<float> x, w, b, lin;
  LinearCase(const char *what, int64_t N, int64_t K, int64_t O, bool tw,
             bool bias)
      : tag(std::string(what) + " " + shape({N, K, O}) + (tw ? " wT" : " w") +
            (bias ? " bias" : "")),
        tol(gemm_tol(std::max({N, K, O}))),
        x(random_values(gRng, N * K, -1, 1)),
        w(random_values(gRng, K * O, -0.1f, 0.1f)),
        b(random_values(gRng, O, -1, 1)), lin(static_cast<size_t>(N * O)) {
    ref::linear_forward(lin.data(), x.data(), w.data(),
                        bias ? b.data() : nullptr, N, K, O, tw);
  }
};

} // namespace

void check_linear(int64_t N, int64_t K, int64_t O, bool tw, bool bias) {
  const LinearCase c("linear", N, K, O, tw, bias);
  DevAct dx(c.x), dw(c.w), db(c.b);
  DevAlloc out(N * O);
  rt::linear_forward(out.p, dx.p, dw.p, bias ? db.p : nullptr, N, K, O, tw);
  gOk &= report(c.tag + " forward", rel_error(download(out.p, N * O), c.lin),
                c.tol);
  const int64_t cached = rt::gemm_plan_cache_size();
  rt::linear_forward(out.p, dx.p, dw.p, bias ? db.p : nullptr, N, K, O, tw);
  // The second call of a shape reuses its plan: the cache does not grow.
  gOk &= report(c.tag + " plan reused",
                double(rt::gemm_plan_cache_size() - cached), 0.0);

  auto dout = random_values(gRng, N * O, -1, 1);
  DevAct ddout(dout);
  check_backward(
      c.tag + " backward",
      {{"dx", N * K}, {"dw", K * O, true}, {"dbias", O, true, !bias}},
      [&](std::vector<float *> &g) {
        ref::linear_backward(g[0], g[1], g[2], dout.data(), c.x.data(),
                             c.w.data(), N, K, O, tw);
      },
      [&](std::vector<void *> &g) {
        rt::linear_backward(
            static_cast<act_t *>(g[0]), static_cast<float *>(g[1]),
            static_cast<float *>(g[2]), ddout.p, dx.p, dw.p, N, K, O, tw);
      },
      c.tol, kFloatTol);
  // The stored input gradient (accumulate_dx = false, the GEMM's beta 0): a
  // poisoned dx is overwritten whole with dout W^T.
  std::vector<float> wantDx(static_cast<size_t>(N * K), 0.0f);
  ref::linear_backward(wantDx.data(), nullptr, nullptr, dout.data(), c.x.data(),
                       c.w.data(), N, K, O, tw);
  DevAlloc stored(N * K);
  rt::linear_backward(stored.p, nullptr, nullptr, ddout.p, dx.p, dw.p, N, K, O,
                      tw, false);
  gOk &= report(c.tag + " backward dx stored",
                rel_error(download(stored.p, N * K), wantDx), c.tol);
}

/// linear_gelu_forward (fc1 + GELU) against the CPU linear then GELU, and
/// linear_backward_dgelu (fc2's input gradient through that GELU, [N,K] from
/// dout [N,O]) against the CPU linear backward then GELU backward, on the
/// CPU's pre-activation. Both fused in cuBLASLt's epilogue where it has one.
void check_linear_gelu(int64_t N, int64_t K, int64_t O, bool tw, bool bias) {
  const LinearCase c("linear+gelu", N, K, O, tw, bias);
  const std::vector<float> &pre = c.lin;
  std::vector<float> want(static_cast<size_t>(N * O));
  ref::gelu_forward(want.data(), pre.data(), N * O, true);
  DevAct dx(c.x), dw(c.w), db(c.b);
  DevAlloc out(N * O), dpre(N * O);
  rt::linear_gelu_forward(out.p, dpre.p, dx.p, dw.p, bias ? db.p : nullptr, N,
                          K, O, tw);
  gOk &= report(c.tag + " forward", rel_error(download(out.p, N * O), want),
                c.tol);
  gOk &= report(c.tag + " forward pre", rel_error(download(dpre.p, N * O), pre),
                c.tol);

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
  gOk &= report(c.tag + " backward dpre",
                rel_error(download(dgrad.p, N * O), dwant), c.tol);
}

/// linear_residual_forward (a projection and its residual add, the residual
/// read as the GEMM's C) against the CPU linear plus the residual.
void check_linear_residual(int64_t N, int64_t K, int64_t O, bool tw,
                           bool bias) {
  const LinearCase c("linear+residual", N, K, O, tw, bias);
  auto res = random_values(gRng, N * O, -2, 2);
  std::vector<float> want = c.lin;
  for (size_t j = 0; j < want.size(); ++j)
    want[j] += res[j];
  DevAct dx(c.x), dw(c.w), db(c.b), dres(res);
  DevAlloc out(N * O);
  rt::linear_residual_forward(out.p, dres.p, dx.p, dw.p, bias ? db.p : nullptr,
                              N, K, O, tw);
  gOk &= report(c.tag + " forward", rel_error(download(out.p, N * O), want),
                c.tol);
  // The residual is read, not written.
  gOk &= report(c.tag + " residual kept",
                rel_error(download(dres.p, N * O), res), kActTol);
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
  check_backward(
      tag + " backward (dx stored)", {{"dx", N * O}, {"dbias", O, true}},
      [&](std::vector<float *> &g) {
        std::fill(g[0], g[0] + N * O, 0.0f);
        ref::bias_add_backward(g[0], g[1], dout.data(), N, O);
      },
      [&](std::vector<void *> &g) {
        rt::bias_add_backward(static_cast<act_t *>(g[0]),
                              static_cast<float *>(g[1]), ddout.p, N, O,
                              false);
      });
}

void check_bias_relu(int64_t N, int64_t O, bool accumulate) {
  const std::string tag = "bias_relu " + shape({N, O}) +
                          (accumulate ? "" : " (dx stored)");
  const int64_t n = N * O;
  auto x = random_values(gRng, n, -1, 1);
  auto b = random_values(gRng, O, -1, 1);
  // The CPU reference: bias_add then relu, as the CPU program runs them.
  std::vector<float> sum(static_cast<size_t>(n)), want(sum.size());
  ref::bias_add_forward(sum.data(), x.data(), b.data(), N, O);
  ref::relu_forward(want.data(), sum.data(), n);
  DevAct dx(x), db(b);
  DevAlloc out(n);
  rt::bias_relu_forward(out.p, dx.p, db.p, N, O);
  gOk &= report(tag + " forward", rel_error(download(out.p, n), want),
                kActTol);
  auto dout = random_values(gRng, n, -1, 1);
  DevAct ddout(dout), dy(want);
  check_backward(
      tag + " backward", {{"dx", n}, {"dbias", O, true}},
      [&](std::vector<float *> &g) {
        std::vector<float> dsum(sum.size(), 0.0f);
        ref::relu_backward(dsum.data(), sum.data(), dout.data(), n);
        if (!accumulate)
          std::fill(g[0], g[0] + n, 0.0f);
        ref::bias_add_backward(g[0], g[1], dsum.data(), N, O);
      },
      [&](std::vector<void *> &g) {
        rt::bias_relu_backward(static_cast<act_t *>(g[0]),
                               static_cast<float *>(g[1]), ddout.p, dy.p, N, O,
                               accumulate);
      });
}

} // namespace kcheck
