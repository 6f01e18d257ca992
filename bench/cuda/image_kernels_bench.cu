// image_kernels_bench: times the CUDA program's channels-last image
// primitives (backends/cuda/kernels/PrimitiveImage*.cuh) at torchvision
// ResNet-50's shapes (224x224 images, v1.5): the batch norms (12 distinct
// shapes of the 53, with or without the ReLU fused after them), the stem's
// 3x3/2 max pool, the global average pool and the residual adds with their
// ReLU (kernels/Elementwise.h add_relu_*: 4 shapes of the 16, their forward
// inside the blocks' last norms: batchnorm_add_forward), each forward
// and backward as the generated program calls them (batch statistics with the
// micro-batch's moments; the input gradients stored by their first writers,
// the parameters' added); each batch norm in the default form (auto), then
// forced split and fused (lines named _split, _fused, count 0; their step sums
// in summary lines of their own). One JSON object a line on stdout: per kernel
// and direction the time, the bandwidth floor of the bytes its passes must move
// and the bandwidth reached, then the sums over a training step (each shape
// times its count; lines of count 0, the adding variants and the add's own
// forward, for comparison).
//
// Floors (docs/cuda-kernels.md "Channels-last image kernels"): E elements
// of act_t in x. Batch norm forward 3E (x read by the sums pass and by the
// normalise pass, y written), backward 5E (x, dy read twice, dx written) or
// 7E with the ReLU (its output y read twice as dy's mask); forward with the
// residual add and its ReLU 4E (the shortcut read too). Max pool forward
// E + E/4 (x read, y written); backward (the block grid) x and dy
// read, dx written (E + E/4 + E), the adding variant dx read too. Global
// pool: x read (forward), dy read and dx written (backward). Residual add +
// ReLU: forward 3E (a, b read, out written); backward 4E (out, dout read,
// da, db stored), 6E adding. At kPeakGBs.
//
// build (here, after ./scripts/build.sh; one command over these lines):
//   nvcc -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I.
//     bench/cuda/image_kernels_bench.cu
//     build/backends/cuda/libautoddl_cuda_kernels.a -lcublasLt -ldl
//     -o .gpu/image/image_kernels_bench
// usage: image_kernels_bench [B]   (default 256 images)
#include "backends/common/OnnxPrimitive.h"
#include "backends/cuda/kernels/Elementwise.h"
#include "backends/cuda/kernels/Primitive.h"
#include "bench/cuda/BenchTiming.cuh"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

namespace rt = autoddl::rt;
namespace ok = autoddl::onnx_kernels;
namespace bench = autoddl::bench;
using ok::Dims;
using rt::act_t;

constexpr bench::Timing kTiming{3, 10, 5}; // warm-up, calls a group, groups
constexpr double kPeakGBs = 3000.0; // H100 HBM3 reachable by a copy, GB/s

/// One distinct batch norm of ResNet-50: channels, side, ReLU after it
/// (fused: batchnorm_relu_*), how many of the 53, and how many of those run
/// the residual add and its ReLU in their normalise pass (a block's last
/// norm: batchnorm_add_forward; the downsample's norm runs alone).
struct Norm {
  int64_t C, H;
  bool relu;
  int count, added;
};
const Norm kNorms[] = {
    {64, 112, true, 1, 0}, {64, 56, true, 6, 0},   {256, 56, false, 4, 3},
    {128, 56, true, 1, 0}, {128, 28, true, 7, 0},  {512, 28, false, 5, 4},
    {256, 28, true, 1, 0}, {256, 14, true, 11, 0}, {1024, 14, false, 7, 6},
    {512, 14, true, 1, 0}, {512, 7, true, 5, 0},   {2048, 7, false, 4, 3}};

/// The channels-last primitive of an ONNX node (as codegen's).
ok::Primitive image(const std::string &op, const ok::PrimitiveAttrs &attrs,
                    const std::vector<Dims> &in, const Dims &out) {
  ok::Primitive p;
  const std::vector<std::vector<double>> consts(in.size());
  if (std::string e = ok::makePrimitive(p, op, attrs, in, out, consts);
      !e.empty()) {
    std::fprintf(stderr, "image_kernels_bench: %s: %s\n", op.c_str(),
                 e.c_str());
    std::exit(1);
  }
  return ok::channelsLastPrimitive(p);
}

double gSum[2] = {0, 0}; // forward, backward ms of a step

/// Prints one kernel's line and adds count times its time to the step's.
void report(const std::string &name, int count, bool backward, double ms,
            double bytes) {
  const double floorMs = bytes / (kPeakGBs * 1e9) * 1e3;
  gSum[backward] += count * ms;
  std::printf("{\"kernel\": \"%s\", \"dir\": \"%s\", \"count\": %d, \"ms\": "
              "%.4f, \"floor_ms\": %.4f, \"GBs\": %.0f, \"x_floor\": %.1f}\n",
              name.c_str(), backward ? "bwd" : "fwd", count, ms, floorMs,
              bytes / (ms * 1e-3) * 1e-9, ms / floorMs);
  std::fflush(stdout);
}

/// Step sums (ms: forward, backward) of the batch norms in each forced form
/// (Primitive.h BatchNormPath: split, fused), beside gSum's default (auto).
double gPathSum[2][2] = {{0, 0}, {0, 0}};
constexpr rt::BatchNormPath kForced[2] = {rt::BatchNormPath::Split,
                                          rt::BatchNormPath::Fused};
constexpr const char *kForcedName[2] = {"split", "fused"};

/// A norm's times (ms) under `path`: forward, backward and, where some run
/// the residual add in their normalise pass, that forward.
struct NormTimes {
  double f, b, fa;
};

void benchNorm(int64_t B, const Norm &n, double *floorSum) {
  const Dims xs{B, n.C, n.H, n.H};
  const ok::Primitive p =
      image("BatchNormalization", {}, {xs, {n.C}, {n.C}}, xs);
  const int64_t E = B * n.C * n.H * n.H;
  rt::DeviceBuffer<act_t> x(E), y(E), dy(E), dx(E), scale(n.C), bias(n.C),
      shortcut(n.added ? E : 1);
  rt::DeviceBuffer<float> moments(2 * n.C), dscale(n.C), dbias(n.C);
  bench::fill(x.data(), E, 1);
  bench::fill(dy.data(), E, 2);
  bench::fill(scale.data(), n.C, 3);
  bench::fill(bias.data(), n.C, 4);
  bench::fill(shortcut.data(), n.added ? E : 1, 12);
  rt::zero(dscale.data(), n.C * int64_t(sizeof(float)));
  rt::zero(dbias.data(), n.C * int64_t(sizeof(float)));
  const std::vector<rt::PrimRef> in{x.data(), scale.data(), bias.data()};
  const std::vector<rt::PrimRef> grads{dx.data(), dscale.data(), dbias.data()};
  auto times = [&](rt::BatchNormPath path) {
    rt::batchnorm_use_path(path);
    NormTimes t{};
    t.f = bench::median_ms(kTiming, [&] {
      if (n.relu)
        rt::batchnorm_relu_forward(p, in, y.data(), moments.data());
      else
        rt::batchnorm_forward_moments(p, in, y.data(), moments.data());
    });
    t.b = bench::median_ms(kTiming, [&] {
      if (n.relu)
        rt::batchnorm_relu_backward(p, grads, in, y.data(), dy.data(), false);
      else
        rt::batchnorm_backward(p, grads, in, dy.data(), false);
    });
    // With the residual add and its ReLU: the shortcut read beside x twice.
    if (n.added)
      t.fa = bench::median_ms(kTiming, [&] {
        rt::batchnorm_add_forward(p, in, shortcut.data(), y.data(),
                                  moments.data(), true);
      });
    return t;
  };
  const double e2 = double(E) * double(sizeof(act_t)); // one tensor's bytes
  const std::string name = "batchnorm" + std::string(n.relu ? "_relu" : "") +
                           "_C" + std::to_string(n.C) + "_H" +
                           std::to_string(n.H);
  // The default (auto) counted into the step; each forced form beside it.
  const NormTimes a = times(rt::BatchNormPath::Auto);
  report(name, n.count - n.added, false, a.f, 3 * e2);
  report(name, n.count, true, a.b, (n.relu ? 7 : 5) * e2);
  if (n.added)
    report(name + "_add_relu", n.added, false, a.fa, 4 * e2);
  for (int k = 0; k < 2; ++k) {
    const NormTimes t = times(kForced[k]);
    const std::string forced = std::string("_") + kForcedName[k];
    report(name + forced, 0, false, t.f, 3 * e2);
    report(name + forced, 0, true, t.b, (n.relu ? 7 : 5) * e2);
    if (n.added)
      report(name + "_add_relu" + forced, 0, false, t.fa, 4 * e2);
    gPathSum[k][0] += (n.count - n.added) * t.f + n.added * t.fa;
    gPathSum[k][1] += n.count * t.b;
  }
  rt::batchnorm_use_path(rt::BatchNormPath::Auto);
  floorSum[0] += (n.count - n.added) * 3 * e2 + n.added * 4 * e2;
  floorSum[1] += n.count * (n.relu ? 7 : 5) * e2;
}

void benchPools(int64_t B, double *floorSum) {
  const double a = double(sizeof(act_t));
  ok::PrimitiveAttrs stem;
  stem.lists = {
      {"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}};
  const Dims xs{B, 64, 112, 112}, ys{B, 64, 56, 56};
  const ok::Primitive pool = image("MaxPool", stem, {xs}, ys);
  const int64_t E = ok::numel(xs), Ey = ok::numel(ys);
  {
    rt::DeviceBuffer<act_t> x(E), y(Ey), dy(Ey), dx(E);
    bench::fill(x.data(), E, 5);
    bench::fill(dy.data(), Ey, 6);
    rt::zero(dx.data(), E * int64_t(sizeof(act_t)));
    const double f = bench::median_ms(
        kTiming, [&] { rt::primitive_forward(pool, {x.data()}, y.data()); });
    const double b = bench::median_ms(kTiming, [&] {
      rt::primitive_backward(pool, {dx.data()}, {x.data()}, y.data(), dy.data(),
                             false);
    });
    const double ba = bench::median_ms(kTiming, [&] {
      rt::primitive_backward(pool, {dx.data()}, {x.data()}, y.data(),
                             dy.data());
    });
    // Backward: x and dy read, dx stored; adding, dx read too.
    const double fb = E * a + Ey * a, bb = E * a + Ey * a + E * a;
    report("maxpool_3x3s2_C64_H112", 1, false, f, fb);
    report("maxpool_3x3s2_C64_H112", 1, true, b, bb);
    report("maxpool_3x3s2_C64_H112_add", 0, true, ba, bb + E * a);
    floorSum[0] += fb;
    floorSum[1] += bb;
  }
  const Dims gs{B, 2048, 7, 7}, go{B, 2048, 1, 1};
  const ok::Primitive gap = image("GlobalAveragePool", {}, {gs}, go);
  const int64_t G = ok::numel(gs), Go = ok::numel(go);
  rt::DeviceBuffer<act_t> x(G), y(Go), dy(Go), dx(G);
  bench::fill(x.data(), G, 7);
  bench::fill(dy.data(), Go, 8);
  rt::zero(dx.data(), G * int64_t(sizeof(act_t)));
  const double f = bench::median_ms(
      kTiming, [&] { rt::primitive_forward(gap, {x.data()}, y.data()); });
  const double b = bench::median_ms(kTiming, [&] {
    rt::primitive_backward(gap, {dx.data()}, {x.data()}, y.data(), dy.data(),
                           false);
  });
  const double fb = (G + Go) * a, bb = (G + Go) * a;
  report("global_avgpool_C2048_H7", 1, false, f, fb);
  report("global_avgpool_C2048_H7", 1, true, b, bb);
  floorSum[0] += fb;
  floorSum[1] += bb;
}

/// ResNet-50's residual adds with their ReLU, one shape a stage (v1.5:
/// 3, 4, 6, 3 blocks), as the program calls them: both gradients stored (the
/// add reads the last norm's output and the shortcut last).
void benchAdds(int64_t B, double *floorSum) {
  const struct {
    int64_t C, H;
    int count;
  } kAdds[] = {{256, 56, 3}, {512, 28, 4}, {1024, 14, 6}, {2048, 7, 3}};
  for (const auto &s : kAdds) {
    const int64_t E = B * s.C * s.H * s.H;
    rt::DeviceBuffer<act_t> a(E), b(E), out(E), dout(E), da(E), db(E);
    bench::fill(a.data(), E, 9);
    bench::fill(b.data(), E, 10);
    bench::fill(dout.data(), E, 11);
    const double f = bench::median_ms(kTiming, [&] {
      rt::add_relu_forward(out.data(), a.data(), b.data(), E);
    });
    const double g = bench::median_ms(kTiming, [&] {
      rt::add_relu_backward(da.data(), db.data(), out.data(), dout.data(), E,
                            false, false);
    });
    const double ga = bench::median_ms(kTiming, [&] {
      rt::add_relu_backward(da.data(), db.data(), out.data(), dout.data(), E);
    });
    const double e = double(E) * double(sizeof(act_t));
    const std::string name =
        "add_relu_C" + std::to_string(s.C) + "_H" + std::to_string(s.H);
    // The forward runs in the norm's pass (batchnorm_..._add_relu): count 0.
    report(name, 0, false, f, 3 * e);
    report(name, s.count, true, g, 4 * e);
    report(name + "_add", 0, true, ga, 6 * e);
    floorSum[1] += s.count * 4 * e;
  }
}

} // namespace

int main(int argc, char **argv) {
  const int64_t B = argc > 1 ? std::atoll(argv[1]) : 256;
  if (B <= 0) {
    std::fprintf(stderr, "usage: image_kernels_bench [B]\n");
    return 2;
  }
  double floorBytes[2] = {0, 0};
  for (const Norm &n : kNorms)
    benchNorm(B, n, floorBytes);
  const double normMs[2] = {gSum[0], gSum[1]},
               normFloor[2] = {floorBytes[0], floorBytes[1]};
  for (int k = 0; k < 2; ++k)
    std::printf("{\"summary\": \"batchnorm x53 %s\", \"B\": %lld, "
                "\"fwd_ms\": %.3f, \"bwd_ms\": %.3f}\n",
                kForcedName[k], (long long)B, gPathSum[k][0], gPathSum[k][1]);
  benchPools(B, floorBytes);
  benchAdds(B, floorBytes);
  auto ms = [](double bytes) { return bytes / (kPeakGBs * 1e9) * 1e3; };
  std::printf("{\"summary\": \"batchnorm x53\", \"B\": %lld, \"fwd_ms\": %.3f, "
              "\"bwd_ms\": %.3f, \"floor_fwd_ms\": %.3f, \"floor_bwd_ms\": "
              "%.3f}\n",
              (long long)B, normMs[0], normMs[1], ms(normFloor[0]),
              ms(normFloor[1]));
  std::printf("{\"summary\": \"all\", \"B\": %lld, \"fwd_ms\": %.3f, "
              "\"bwd_ms\": %.3f, \"step_ms\": %.3f, \"floor_step_ms\": %.3f}\n",
              (long long)B, gSum[0], gSum[1], gSum[0] + gSum[1],
              ms(floorBytes[0] + floorBytes[1]));
  return 0;
}
