// KernelCheck's embedding cases: token embedding, learned positions, rotary.
#include "tests/unit/cuda/KernelCheck.h" // first: see there

#include "backends/cuda/kernels/Embedding.h"

namespace kcheck {

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

} // namespace kcheck
