// KernelCheck --bench: times each kernel at GPT-2 shapes (B=8, T=1024, C=768
// for 124M and C=1600 for 1.5B, V=50257) with CUDA events after warm-up, and
// prints the median time with the achieved rate against the H200 floor:
// memory-bound kernels in GB/s of the fewest bytes they must move (each input
// read once, each output written once) against 4.8 TB/s (4.3 TB/s measured by
// a device-to-device copy on these machines); GEMMs in TFLOP/s against
// ~790 TFLOP/s (a measured 8192^3 bf16 product). Inputs are random (never
// zeros) and rotated over several copies when one copy would fit in the L2.
#include "backends/cuda/kernels/CrossEntropy.h"
#include "backends/cuda/kernels/Elementwise.h"
#include "backends/cuda/kernels/Embedding.h"
#include "backends/cuda/kernels/Linear.h"
#include "backends/cuda/kernels/Norm.h"
#include "backends/cuda/kernels/Optimizer.h"
#include "backends/cuda/kernels/Reduce.h"
#include "backends/cuda/kernels/Softmax.h"
#include "tests/unit/cuda/KernelCheckUtil.h"

#include <algorithm>
#include <functional>
#include <memory>

namespace {
using namespace kcheck;

constexpr double kHbmGBs = 4800.0;
constexpr double kBf16TFlops = 790.0;
constexpr int64_t kL2Margin = int64_t(256) << 20; // rotate below this

std::mt19937 gBenchRng(12345);

/// Fills n act_t (or fp32) with uniform random values in [-r, r]: a host
/// block of up to 1M values, then device copies doubling the filled prefix.
/// Not zeros, and cheap for billions of elements.
template <class T> void fill_random(T *p, int64_t n, float r) {
  const int64_t tile = std::min<int64_t>(n, int64_t(1) << 20);
  std::uniform_real_distribution<float> u(-r, r);
  std::vector<T> host(static_cast<size_t>(tile));
  for (auto &v : host)
    v = T(u(gBenchRng));
  rt::copy_to_device(p, host.data(), tile * int64_t(sizeof(T)));
  for (int64_t filled = tile; filled < n;) {
    const int64_t chunk = std::min(filled, n - filled);
    AUTODDL_CUDA_CHECK(cudaMemcpyAsync(p + filled, p, size_t(chunk) * sizeof(T),
                                       cudaMemcpyDeviceToDevice,
                                       rt::compute_stream()));
    filled += chunk;
  }
}

template <class T> struct Buf {
  rt::DeviceBuffer<T> b;
  Buf(int64_t n, float r) : b(n) { fill_random(b.data(), n, r); }
  T *p() { return b.data(); }
};

/// Copies of the inputs so that `bytes` per repetition rotate past the L2.
int copies_for(int64_t bytes) {
  return int(std::clamp<int64_t>((kL2Margin + bytes - 1) / bytes, 1, 8));
}

/// Median milliseconds of fn(rep) over `iters` timed runs after 3 warm-ups.
double median_ms(const std::function<void(int)> &fn, int iters = 20) {
  for (int i = 0; i < 3; ++i)
    fn(i);
  std::vector<cudaEvent_t> ev(static_cast<size_t>(2 * iters));
  for (auto &e : ev)
    AUTODDL_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    AUTODDL_CUDA_CHECK(
        cudaEventRecord(ev[size_t(2 * i)], rt::compute_stream()));
    fn(i);
    AUTODDL_CUDA_CHECK(
        cudaEventRecord(ev[size_t(2 * i + 1)], rt::compute_stream()));
  }
  rt::synchronize();
  std::vector<double> ms(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    float t = 0;
    AUTODDL_CUDA_CHECK(
        cudaEventElapsedTime(&t, ev[size_t(2 * i)], ev[size_t(2 * i + 1)]));
    ms[size_t(i)] = t;
  }
  for (auto &e : ev)
    cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[size_t(iters / 2)];
}

void print_bw(const std::string &what, double ms, double bytes) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-52s %9.4f ms %8.0f GB/s  %5.1f%% of %.0f GB/s\n", what.c_str(),
              ms, gbs, 100.0 * gbs / kHbmGBs, kHbmGBs);
}
void print_flops(const std::string &what, double ms, double flops) {
  const double tf = flops / (ms * 1e-3) / 1e12;
  std::printf("%-52s %9.4f ms %8.1f TFLOP/s %5.1f%% of %.0f TFLOP/s\n",
              what.c_str(), ms, tf, 100.0 * tf / kBf16TFlops, kBf16TFlops);
}

void bench_gemms(int64_t N, int64_t C, int64_t V) {
  struct Shape {
    const char *name;
    int64_t K, O;
    bool bias;
  };
  const Shape shapes[] = {{"qkv", C, 3 * C, true},
                          {"attn proj", C, C, true},
                          {"fc", C, 4 * C, true},
                          {"fc proj", 4 * C, C, true},
                          {"lm_head", C, V, false}};
  for (const Shape &s : shapes) {
    Buf<act_t> x(N * s.K, 1), w(s.O * s.K, 0.05f), b(s.O, 1), out(N * s.O, 1),
        dout(N * s.O, 1), dx(N * s.K, 1);
    Buf<float> dw(s.O * s.K, 0.01f), db(s.O, 0.01f);
    const std::string tag = "linear " + std::string(s.name) + " " +
                            std::to_string(N) + "x" + std::to_string(s.K) +
                            "x" + std::to_string(s.O);
    const double f = 2.0 * double(N) * double(s.K) * double(s.O);
    print_flops(tag + " fwd", median_ms([&](int) {
                  rt::linear_forward(out.p(), x.p(), w.p(),
                                     s.bias ? b.p() : nullptr, N, s.K, s.O,
                                     true);
                }),
                f);
    print_flops(tag + " bwd dx", median_ms([&](int) {
                  rt::linear_backward(dx.p(), nullptr, nullptr, dout.p(), x.p(),
                                      w.p(), N, s.K, s.O, true);
                }),
                f);
    print_flops(tag + " bwd dw", median_ms([&](int) {
                  rt::linear_backward(nullptr, dw.p(), nullptr, dout.p(), x.p(),
                                      w.p(), N, s.K, s.O, true);
                }),
                f);
    if (std::string(s.name) == "fc") { // with the GELU (epilogue vs kernel)
      Buf<act_t> pre(N * s.O, 1);
      print_flops(tag + " fwd + gelu (linear_gelu_forward)",
                  median_ms([&](int) {
                    rt::linear_gelu_forward(out.p(), pre.p(), x.p(), w.p(),
                                            b.p(), N, s.K, s.O, true);
                  }),
                  f);
      print_flops(tag + " fwd, then gelu_forward", median_ms([&](int) {
                    rt::linear_forward(pre.p(), x.p(), w.p(), b.p(), N, s.K,
                                       s.O, true);
                    rt::gelu_forward(out.p(), pre.p(), N * s.O, true);
                  }),
                  f);
    }
    if (std::string(s.name) == "attn proj") { // with the residual add
      Buf<act_t> res(N * s.O, 1), sum(N * s.O, 1);
      print_flops(tag + " fwd + residual (linear_residual_forward)",
                  median_ms([&](int) {
                    rt::linear_residual_forward(sum.p(), res.p(), x.p(), w.p(),
                                                b.p(), N, s.K, s.O, true);
                  }),
                  f);
      print_flops(tag + " fwd, then add_forward", median_ms([&](int) {
                    rt::linear_forward(out.p(), x.p(), w.p(), b.p(), N, s.K,
                                       s.O, true);
                    rt::add_forward(sum.p(), res.p(), out.p(), N * s.O);
                  }),
                  f);
    }
    if (std::string(s.name) == "fc proj") { // dx through the GELU before it
      Buf<act_t> pre(N * s.K, 1), dg(N * s.K, 1);
      print_flops(tag + " bwd dx + dgelu (linear_backward_dgelu)",
                  median_ms([&](int) {
                    rt::linear_backward_dgelu(dx.p(), dout.p(), w.p(), pre.p(),
                                              N, s.K, s.O, true);
                  }),
                  f);
      print_flops(tag + " bwd dx, then gelu_backward", median_ms([&](int) {
                    rt::linear_backward(dg.p(), nullptr, nullptr, dout.p(),
                                        x.p(), w.p(), N, s.K, s.O, true);
                    rt::gelu_backward(dx.p(), pre.p(), dg.p(), N * s.K, true);
                  }),
                  f);
    }
    if (s.bias)
      print_bw(tag + " bwd dbias (column sum)", median_ms([&](int) {
                 rt::bias_add_backward(nullptr, db.p(), dout.p(), N, s.O);
               }),
               double(N * s.O) * sizeof(act_t));
  }
}

/// A memory-bound kernel on `copies` rotating sets of buffers, each set
/// allocated by `make` (returning the kernel for that set).
void bench_bw(const std::string &tag, double bytes,
              const std::function<std::function<void()>()> &make) {
  const int copies = copies_for(int64_t(bytes));
  std::vector<std::function<void()>> runs;
  for (int i = 0; i < copies; ++i)
    runs.push_back(make());
  print_bw(tag, median_ms([&](int i) { runs[size_t(i % copies)](); }), bytes);
}

void bench_memory_bound(int64_t N, int64_t C, int64_t V, int64_t T) {
  const std::string nc = " " + std::to_string(N) + "x" + std::to_string(C);
  const double a = sizeof(act_t);
  // Buffers of each set live as long as its closure (shared_ptr).
  auto act = [](int64_t n, float r) {
    return std::make_shared<Buf<act_t>>(n, r);
  };
  auto flt = [](int64_t n, float r) {
    return std::make_shared<Buf<float>>(n, r);
  };

  bench_bw("layernorm_forward" + nc, double(N * C) * 2 * a, [&] {
    auto x = act(N * C, 2), o = act(N * C, 1), g = act(C, 1), b = act(C, 1);
    auto st = flt(2 * N, 1);
    return std::function<void()>([=] {
      rt::layernorm_forward(o->p(), st->p(), st->p() + N, x->p(), g->p(),
                            b->p(), N, C, 1e-5f);
    });
  });
  bench_bw("layernorm_backward" + nc + " (dx +=)", double(N * C) * 4 * a, [&] {
    auto x = act(N * C, 2), d = act(N * C, 1), dx = act(N * C, 1),
         g = act(C, 1);
    auto st = flt(2 * N, 1), dg = flt(2 * C, 1);
    return std::function<void()>([=] {
      rt::layernorm_backward(dx->p(), dg->p(), dg->p() + C, d->p(), x->p(),
                             g->p(), st->p(), st->p() + N, N, C);
    });
  });
  bench_bw("rmsnorm_forward" + nc, double(N * C) * 2 * a, [&] {
    auto x = act(N * C, 2), o = act(N * C, 1), g = act(C, 1);
    auto st = flt(N, 1);
    return std::function<void()>([=] {
      rt::rmsnorm_forward(o->p(), st->p(), x->p(), g->p(), N, C, 1e-6f);
    });
  });
  const int64_t n4 = N * 4 * C;
  bench_bw("gelu_forward tanh n=" + std::to_string(n4), double(n4) * 2 * a,
           [&] {
             auto x = act(n4, 3), o = act(n4, 1);
             return std::function<void()>(
                 [=] { rt::gelu_forward(o->p(), x->p(), n4, true); });
           });
  bench_bw("gelu_backward tanh n=" + std::to_string(n4) + " (dx +=)",
           double(n4) * 4 * a, [&] {
             auto x = act(n4, 3), d = act(n4, 1), dx = act(n4, 1);
             return std::function<void()>(
                 [=] { rt::gelu_backward(dx->p(), x->p(), d->p(), n4, true); });
           });
  bench_bw("swiglu_forward n=" + std::to_string(n4), double(n4) * 3 * a, [&] {
    auto g = act(n4, 3), u = act(n4, 3), o = act(n4, 1);
    return std::function<void()>(
        [=] { rt::swiglu_forward(o->p(), g->p(), u->p(), n4); });
  });
  bench_bw("add_forward (residual)" + nc, double(N * C) * 3 * a, [&] {
    auto x = act(N * C, 1), y = act(N * C, 1), o = act(N * C, 1);
    return std::function<void()>(
        [=] { rt::add_forward(o->p(), x->p(), y->p(), N * C); });
  });
  bench_bw("add_into" + nc, double(N * C) * 3 * a, [&] {
    auto x = act(N * C, 1), o = act(N * C, 1);
    return std::function<void()>([=] { rt::add_into(o->p(), x->p(), N * C); });
  });
  {
    std::uniform_int_distribution<int32_t> pick(0, int32_t(V - 1));
    std::vector<int32_t> ids(static_cast<size_t>(N));
    for (auto &i : ids)
      i = pick(gBenchRng);
    auto dids = std::make_shared<rt::DeviceBuffer<int32_t>>(N);
    upload(dids->data(), ids);
    auto table = act(V * C, 1);
    auto dtable = flt(V * C, 0.01f);
    bench_bw("embedding_forward" + nc, double(N * C) * 2 * a, [&] {
      auto o = act(N * C, 1);
      return std::function<void()>([=] {
        rt::embedding_forward(o->p(), dids->data(), table->p(), N, C, 0, V);
      });
    });
    // dout read once, each touched table row read and written in fp32.
    bench_bw("embedding_backward" + nc, double(N * C) * (a + 8), [&] {
      auto d = act(N * C, 1);
      return std::function<void()>([=] {
        rt::embedding_backward(dtable->p(), d->p(), dids->data(), N, C, 0, V);
      });
    });
    bench_bw("positional_forward" + nc, double(N * C) * 2 * a, [&] {
      auto x = act(N * C, 1), o = act(N * C, 1), pe = act(T * C, 1);
      return std::function<void()>([=] {
        rt::positional_forward(o->p(), x->p(), pe->p(), N / T, T, C, 0);
      });
    });
    bench_bw(
        "positional_backward" + nc + " (dx +=)", double(N * C) * 3 * a, [&] {
          auto d = act(N * C, 1), dx = act(N * C, 1);
          auto dpe = flt(T * C, 0.01f);
          return std::function<void()>([=] {
            rt::positional_backward(dx->p(), dpe->p(), d->p(), N / T, T, C, 0);
          });
        });
    std::vector<int32_t> targets(static_cast<size_t>(N));
    for (auto &t : targets)
      t = pick(gBenchRng);
    auto dt = std::make_shared<rt::DeviceBuffer<int32_t>>(N);
    upload(dt->data(), targets);
    const std::string nv = " " + std::to_string(N) + "x" + std::to_string(V);
    auto logits = act(N * V, 4), dlogits = act(N * V, 1e-4f);
    auto losses = flt(N, 1), lse = flt(N, 1);
    print_bw("crossentropy_forward" + nv, median_ms([&](int) {
               rt::crossentropy_forward(losses->p(), lse->p(), logits->p(),
                                        dt->data(), N, V);
             }),
             double(N * V) * a);
    print_bw("crossentropy_backward" + nv + " (dlogits +=)",
             median_ms([&](int) {
               rt::crossentropy_backward(dlogits->p(), logits->p(), lse->p(),
                                         dt->data(), N, V, 1.0f / float(N));
             }),
             double(N * V) * 3 * a);
  }
  const int64_t H = C / 64, rows = N * H;
  bench_bw("softmax_forward " + std::to_string(rows) + "x" + std::to_string(T),
           double(rows * T) * 2 * a, [&] {
             auto x = act(rows * T, 4), o = act(rows * T, 1);
             return std::function<void()>(
                 [=] { rt::softmax_forward(o->p(), x->p(), rows, T, 1); });
           });
  bench_bw("rotary_forward" + nc + " D=64", double(N * C) * 2 * a, [&] {
    auto x = act(N * C, 1), o = act(N * C, 1);
    return std::function<void()>([=] {
      rt::rotary_forward(o->p(), x->p(), N / T, T, C / 64, 64, 10000.0, 0);
    });
  });
}

void bench_optimizer(int64_t params, const std::string &model) {
  Buf<float> p(params, 1), g(params, 0.01f), m(params, 0.01f), v(params, 0.01f);
  for (int64_t i = 0; i < params; i += int64_t(1) << 20) // v >= 0
    rt::zero(v.p() + i, std::min<int64_t>(int64_t(1) << 20, params - i) *
                            int64_t(sizeof(float)));
  rt::DeviceBuffer<act_t> work(params);
  rt::AdamWConfig c;
  int64_t t = 0;
  // Reads p, g, m, v; writes p, m, v and the act_t working copy.
  print_bw("adamw_step " + model + " n=" + std::to_string(params),
           median_ms(
               [&](int) {
                 rt::adamw_step(p.p(), g.p(), m.p(), v.p(), params, c, ++t,
                                work.data());
               },
               10),
           double(params) * (28 + sizeof(act_t)));
  print_bw("grad_norm_squared " + model + " n=" + std::to_string(params),
           median_ms([&](int) { rt::grad_norm_squared(g.p(), params); }, 10),
           double(params) * 4);
  print_bw(
      "cast_to_act " + model + " n=" + std::to_string(params),
      median_ms([&](int) { rt::cast_to_act(work.data(), p.p(), params); }, 10),
      double(params) * (4 + sizeof(act_t)));
}
} // namespace

int run_bench() {
  cudaDeviceProp prop{};
  int dev = 0;
  AUTODDL_CUDA_CHECK(cudaGetDevice(&dev));
  AUTODDL_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("KernelBench (%s) on %s, %d SMs, L2 %d MB, CUDA runtime %d, "
              "driver %d\n",
              kMode, prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20, runtime, driver);
  std::printf("median of 20 (optimizer: 10) after 3 warm-ups; floors %.0f "
              "GB/s, %.0f TFLOP/s\n",
              kHbmGBs, kBf16TFlops);
  const int64_t B = 8, T = 1024, V = 50257;
  for (int64_t C : {int64_t(768), int64_t(1600)}) {
    std::printf("\n== GPT-2 %s shapes: B=%lld T=%lld C=%lld V=%lld ==\n",
                C == 768 ? "124M" : "1.5B", (long long)B, (long long)T,
                (long long)C, (long long)V);
    bench_gemms(B * T, C, V);
    bench_memory_bound(B * T, C, V, T);
  }
  std::printf("\n== optimizer ==\n");
  bench_optimizer(124439808, "GPT-2 124M");
  bench_optimizer(1557611200, "GPT-2 1.5B");
  std::printf("peak device bytes %.2f GB\n",
              double(rt::peak_device_bytes()) / 1e9);
  return 0;
}
