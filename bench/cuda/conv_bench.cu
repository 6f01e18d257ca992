// conv_bench: times the GPU conv2d (backends/cuda/kernels/Conv.h) forward,
// input gradient and weight gradient on torchvision ResNet-50's 23 distinct
// convolution shapes (224x224 images; v1.5: the stride on the 3x3), the
// paths of one binary: cudnn (ConvCudnn.h, where the build has it and cuDNN
// takes the shape; the GEMM path off), gemm (the shapes conv2d_is_gemm takes:
// channels-last 1x1 stride 1, as Linear.h's cuBLASLt GEMMs) and own (the
// im2col path, NCHW only). One JSON object a line on stdout: per shape and
// path the times (dgrad_ms adds into dx, dgrad_store_ms stores it as a
// first writer does, dgrad_again_ms adds after it), then per path the sum
// over ResNet-50's 53 convolutions of a training step (each shape times its
// count, dgrad_ms; the stem's input gradient left out, as a program skips
// it), the program's sum (gemm for the directions AUTODDL_CONV_GEMM selects,
// default all three, cudnn elsewhere) and the best (per shape and direction the
// faster of gemm and cudnn). bench/cuda/conv_torch.py times PyTorch on the
// same shapes.
//
// Tensors bf16, no bias (ResNet's), inputs uniform in [-1, 1]. Timing: CUDA
// events around kTiming.iters back-to-back calls after warm-up (the GEMMs'
// autotune runs in it), median of kTiming.reps such groups. FLOPs
// 2*B*Cout*Ho*Wo*Cin*kh*kw a pass.
//
// build (here, after ./scripts/build.sh; one command over these lines):
//   nvcc -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I.
//     bench/cuda/conv_bench.cu build/backends/cuda/libautoddl_cuda_kernels.a
//     build/backends/cuda/sparse/libautoddl_cuda_sparse.a -lcublasLt -ldl
//     -o .gpu/conv/conv_bench
// usage: conv_bench [B] [nchw|nhwc]   (default 32 images, NCHW; nhwc: the
//   channels-last tensors conv nets' programs run since 2026-12-07, cudnn and
//   gemm; AUTODDL_CONV_AUTOTUNE=1: the cuDNN path's engines timed once a
//   shape, docs/cuda-kernels.md; AUTODDL_CONV_WGRAD as the programs')
#include "backends/cuda/kernels/Conv.h"
#include "bench/cuda/BenchTiming.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

namespace rt = autoddl::rt;
using rt::act_t;

namespace bench = autoddl::bench;
constexpr bench::Timing kTiming{3, 10, 5}; // warm-up, calls a group, groups
using bench::fill;

/// One distinct convolution of ResNet-50 and how many of the 53 it is.
struct Layer {
  int64_t Cin, H, Cout, k, stride, count;
  bool stem;
};
const Layer kResnet50[] = {
    {3, 224, 64, 7, 2, 1, true}, // conv1
    {64, 56, 64, 1, 1, 1, false},    {64, 56, 64, 3, 1, 3, false},
    {64, 56, 256, 1, 1, 4, false},   {256, 56, 64, 1, 1, 2, false},
    {256, 56, 128, 1, 1, 1, false},  {128, 56, 128, 3, 2, 1, false},
    {128, 28, 512, 1, 1, 4, false},  {256, 56, 512, 1, 2, 1, false},
    {512, 28, 128, 1, 1, 3, false},  {128, 28, 128, 3, 1, 3, false},
    {512, 28, 256, 1, 1, 1, false},  {256, 28, 256, 3, 2, 1, false},
    {256, 14, 1024, 1, 1, 6, false}, {512, 28, 1024, 1, 2, 1, false},
    {1024, 14, 256, 1, 1, 5, false}, {256, 14, 256, 3, 1, 5, false},
    {1024, 14, 512, 1, 1, 1, false}, {512, 14, 512, 3, 2, 1, false},
    {512, 7, 2048, 1, 1, 3, false},  {1024, 14, 2048, 1, 2, 1, false},
    {2048, 7, 512, 1, 1, 2, false},  {512, 7, 512, 3, 1, 2, false}};

/// What one path's calls took on one shape (ms; dgrad adds into dx, as
/// before 2026-12-07's stored gradients; dgradStore stores it, a first
/// writer's; dgradAgain adds again once the stored calls have tuned the
/// GEMM's plan: a dx add past 64 MB is not tuned on its own, LtPlan.h).
struct Times {
  double fwd, dgrad, dgradStore, dgradAgain, wgrad;
};

} // namespace

int main(int argc, char **argv) {
  const int64_t B = argc > 1 ? std::atoll(argv[1]) : 32;
  const std::string layout = argc > 2 ? argv[2] : "nchw";
  if (B <= 0 || (layout != "nchw" && layout != "nhwc")) {
    std::fprintf(stderr, "usage: conv_bench [B] [nchw|nhwc]\n");
    return 2;
  }
  const bool channelsLast = layout == "nhwc";
  const char *kPaths[3] = {"cudnn", "gemm", "own"};
  // The program's choice (AUTODDL_CONV_GEMM, as read at start), then per
  // path, and for the program and the faster of cudnn and gemm per direction.
  const rt::ConvGemmDirs program = rt::conv_gemm_dirs();
  double total[3] = {0, 0, 0}, programTotal = 0, bestTotal = 0;
  bool allCudnn = true;
  for (const Layer &l : kResnet50) {
    const rt::Conv2dShape s{B,   l.Cin, l.H,      l.H,           l.Cout,
                            l.k, l.k,   l.stride, (l.k - 1) / 2, channelsLast};
    const int64_t nx = B * l.Cin * l.H * l.H, nw = l.Cout * l.Cin * l.k * l.k,
                  ny = B * l.Cout * s.Ho() * s.Wo();
    rt::DeviceBuffer<act_t> x(nx), w(nw), dy(ny), y(ny), dx(nx);
    rt::DeviceBuffer<float> dw(nw);
    fill(x.data(), nx, 1);
    fill(w.data(), nw, 2);
    fill(dy.data(), ny, 3);
    rt::zero(dx.data(), nx * int64_t(sizeof(act_t)));
    rt::zero(dw.data(), nw * int64_t(sizeof(float)));
    const double flop = 2.0 * double(ny) * double(l.Cin * l.k * l.k);
    const double dgradCount = l.stem ? 0.0 : 1.0; // a program skips it
    Times t[3] = {};
    for (int path = 0; path < 3; ++path) {
      const bool cudnn = path < 2, gemm = path == 1;
      if ((cudnn && !rt::conv_cudnn_built()) || (!cudnn && channelsLast) ||
          (gemm && !rt::conv2d_is_gemm(s)))
        continue;
      rt::conv_use_cudnn(cudnn);
      rt::conv_use_gemm(gemm ? rt::ConvGemmDirs{true, true, true}
                             : rt::ConvGemmDirs{false, false, false});
      const bool taken = cudnn && !gemm && rt::conv2d_uses_cudnn(s);
      allCudnn = allCudnn && (path != 0 || taken);
      Times &r = t[path];
      r.fwd = bench::median_ms(kTiming, [&] {
        rt::conv2d_forward(y.data(), x.data(), w.data(), nullptr, s);
      });
      r.dgrad = bench::median_ms(kTiming, [&] {
        rt::conv2d_backward(dx.data(), nullptr, nullptr, dy.data(), x.data(),
                            w.data(), s);
      });
      r.dgradStore = bench::median_ms(kTiming, [&] {
        rt::conv2d_backward(dx.data(), nullptr, nullptr, dy.data(), x.data(),
                            w.data(), s, false);
      });
      r.dgradAgain = bench::median_ms(kTiming, [&] {
        rt::conv2d_backward(dx.data(), nullptr, nullptr, dy.data(), x.data(),
                            w.data(), s);
      });
      r.wgrad = bench::median_ms(kTiming, [&] {
        rt::conv2d_backward(nullptr, dw.data(), nullptr, dy.data(), x.data(),
                            w.data(), s);
      });
      total[path] += double(l.count) * (r.fwd + dgradCount * r.dgrad + r.wgrad);
      std::printf(
          "{\"shape\": \"B%lld_C%lld_H%lld_K%lld_k%lld_s%lld\", \"count\": "
          "%lld, \"layout\": \"%s\", \"path\": \"%s\", \"cudnn_took\": %s, "
          "\"fwd_ms\": %.4f, \"dgrad_ms\": %.4f, \"dgrad_store_ms\": %.4f, "
          "\"dgrad_again_ms\": %.4f, \"wgrad_ms\": %.4f, \"fwd_tflops\": %.1f, "
          "\"dgrad_tflops\": %.1f, \"wgrad_tflops\": %.1f}\n",
          (long long)B, (long long)l.Cin, (long long)l.H, (long long)l.Cout,
          (long long)l.k, (long long)l.stride, (long long)l.count,
          layout.c_str(), kPaths[path], taken ? "true" : "false", r.fwd,
          r.dgrad, r.dgradStore, r.dgradAgain, r.wgrad, flop / r.fwd * 1e-9,
          flop / r.dgrad * 1e-9, flop / r.wgrad * 1e-9);
      std::fflush(stdout);
    }
    // The program and the best choice: gemm's times where it ran, per
    // direction; cudnn's elsewhere.
    const bool g = t[1].fwd > 0, c = t[0].fwd > 0;
    const Times &base = c ? t[0] : t[2];
    auto pick = [&](bool on, double gemmMs, double baseMs) {
      return g && on ? gemmMs : baseMs;
    };
    auto best = [&](double gemmMs, double baseMs) {
      return g ? std::min(gemmMs, baseMs) : baseMs;
    };
    programTotal += double(l.count) *
                    (pick(program.forward, t[1].fwd, base.fwd) +
                     dgradCount * pick(program.dgrad, t[1].dgrad, base.dgrad) +
                     pick(program.wgrad, t[1].wgrad, base.wgrad));
    bestTotal += double(l.count) * (best(t[1].fwd, base.fwd) +
                                    dgradCount * best(t[1].dgrad, base.dgrad) +
                                    best(t[1].wgrad, base.wgrad));
  }
  rt::conv_use_gemm(program);
  for (int path = 0; path < 3; ++path)
    if (total[path] > 0)
      std::printf("{\"summary\": \"%s\", \"layout\": \"%s\", \"B\": %lld, "
                  "\"resnet50_conv_step_ms\": %.3f, \"cudnn_took_all\": %s}\n",
                  kPaths[path], layout.c_str(), (long long)B, total[path],
                  path == 0 && allCudnn ? "true" : "false");
  std::printf("{\"summary\": \"program\", \"layout\": \"%s\", \"B\": %lld, "
              "\"resnet50_conv_step_ms\": %.3f, \"gemm\": \"%s%s%s\"}\n",
              layout.c_str(), (long long)B, programTotal,
              program.forward ? "forward " : "", program.dgrad ? "dgrad " : "",
              program.wgrad ? "wgrad" : "");
  std::printf("{\"summary\": \"best\", \"layout\": \"%s\", \"B\": %lld, "
              "\"resnet50_conv_step_ms\": %.3f}\n",
              layout.c_str(), (long long)B, bestTotal);
  return 0;
}
