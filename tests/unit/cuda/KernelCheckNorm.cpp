// KernelCheck's norm cases: layernorm and rmsnorm against the CPU kernels.
#include "tests/unit/cuda/KernelCheck.h" // first: see there

#include "backends/cuda/kernels/Norm.h"

namespace kcheck {

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

} // namespace kcheck
