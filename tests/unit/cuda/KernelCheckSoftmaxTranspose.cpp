// KernelCheck's softmax and transpose cases, against the CPU kernels.
#include "tests/unit/cuda/KernelCheck.h" // first: see there

#include "backends/cuda/kernels/Shape.h"
#include "backends/cuda/kernels/Softmax.h"

namespace kcheck {

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

} // namespace kcheck
