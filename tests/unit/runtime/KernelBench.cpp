// Throughput of the main CPU kernels at GPT-2-small layer shapes (not a test:
// run by hand, `build/tests/unit/runtime/RuntimeKernelBench`). Prints seconds
// per call and GFLOP/s, counting FLOPs as docs/ir.md does (a multiply-add = 2;
// backward of a GEMM layer = 2x forward).
#include "backends/common/Init.h"
#include "backends/common/Metrics.h"
#include "backends/cpu/kernels/Attention.h"
#include "backends/cpu/kernels/CrossEntropy.h"
#include "backends/cpu/kernels/Linear.h"
#include "backends/cpu/kernels/Norm.h"

#include <cstdio>
#include <functional>
#include <vector>

using namespace autoddl::rt;

static std::vector<float> randomTensor(int64_t n, const char *name) {
  std::vector<float> v(static_cast<size_t>(n));
  init_normal(v.data(), Slice::whole({n}), 1, name, 0.0f, 0.5f);
  return v;
}

/// Best-of-3 seconds of `f` after one warm-up call.
static double timeIt(const std::function<void()> &f) {
  f();
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    Timer t;
    f();
    best = std::min(best, t.seconds());
  }
  return best;
}

static void report(const char *what, double seconds, double flops) {
  std::printf("%-44s %9.3f ms  %7.1f GFLOP/s\n", what, seconds * 1e3,
              flops / seconds / 1e9);
}

int main() {
  const int64_t B = 4, T = 256, C = 768, H = 12, D = 64, N = B * T, V = 8192;
  auto x = randomTensor(N * C, "x"), w = randomTensor(4 * C * C, "w"),
       out = std::vector<float>(size_t(N * 4 * C)),
       dx = std::vector<float>(x.size()), dw = std::vector<float>(w.size()),
       dout = randomTensor(N * 4 * C, "dout");
  const double linFlops = 2.0 * N * C * 4 * C;
  report("linear fwd [1024,768]x[768,3072]", timeIt([&] {
           linear_forward(out.data(), x.data(), w.data(), nullptr, N, C, 4 * C,
                          true);
         }),
         linFlops);
  report("linear bwd (dx, dw)", timeIt([&] {
           linear_backward(dx.data(), dw.data(), nullptr, dout.data(), x.data(),
                           w.data(), N, C, 4 * C, true);
         }),
         2 * linFlops);
  auto qkv = randomTensor(N * 3 * C, "qkv"),
       dqkv = std::vector<float>(qkv.size());
  std::vector<float> att(static_cast<size_t>(B * H * T * T)),
      y(static_cast<size_t>(N * C));
  const auto views = attention_qkv_views(qkv.data(), H, H, D);
  const double attFlops = 4.0 * B * H * T * T * D;
  report("attention fwd causal B4 T256 H12 D64", timeIt([&] {
           attention_forward(y.data(), att.data(), views, B, T, H, H, D, true);
         }),
         attFlops);
  report("attention bwd", timeIt([&] {
           attention_backward(attention_qkv_grad_views(dqkv.data(), H, H, D),
                              x.data(), att.data(), views, B, T, H, H, D);
         }),
         2 * attFlops);
  std::vector<float> mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N)),
      g(static_cast<size_t>(C), 1.0f), bta(size_t(C), 0.0f);
  report("layernorm fwd [1024,768]", timeIt([&] {
           layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(),
                             g.data(), bta.data(), N, C, 1e-5f);
         }),
         8.0 * N * C);
  auto logits = randomTensor(N * V, "logits");
  std::vector<float> losses(static_cast<size_t>(N)),
      lse(static_cast<size_t>(N)), dl(logits.size());
  std::vector<int32_t> tg(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i)
    tg[size_t(i)] = int32_t((i * 31) % V);
  report("cross_entropy fwd+bwd [1024,8192]", timeIt([&] {
           crossentropy_forward(losses.data(), lse.data(), logits.data(),
                                tg.data(), N, V);
           crossentropy_backward(dl.data(), logits.data(), lse.data(),
                                 tg.data(), N, V, 1.0f / N);
         }),
         6.0 * N * V);
  return 0;
}
