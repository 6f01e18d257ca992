// PrimitiveCheck's conv2d checks (kernels/Conv.h): forward and backward
// against direct sums in double through each path the build has (im2col,
// cuDNN, the 1x1 GEMMs), NCHW and channels-last.
#include "backends/cuda/kernels/Conv.h"
#include "tests/unit/cuda/KernelCheckUtil.h"
#include "tests/unit/cuda/PrimitiveCheckShared.h"

#include <string>

namespace pcheck {
namespace {

using namespace kcheck;
using autoddl::onnx_kernels::Dims;

/// conv2d forward and backward against direct sums, through the path
/// conv_use_cudnn selects (`path` names it): the gradients dx, dw and dbias
/// are added to random values already there (conv2d_backward's +=), dx
/// stored over them under storeDx (a first writer's: cuDNN's beta 0); without
/// `bias` neither the bias nor its gradient (ResNet's convolutions). Under
/// s.channelsLast x, y and their gradients are stored NHWC.
void checkConv(const rt::Conv2dShape &s, bool bias, const std::string &path,
               bool storeDx = false) {
  const int64_t Ho = s.Ho(), Wo = s.Wo(), nx = s.B * s.Cin * s.H * s.W,
                nw = s.Cout * s.Cin * s.kh * s.kw, ny = s.B * s.Cout * Ho * Wo;
  const auto x = random_values(gRng, nx, -1, 1),
             w = random_values(gRng, nw, -1, 1),
             b = random_values(gRng, s.Cout, -1, 1),
             dy = random_values(gRng, ny, -1, 1),
             dx0 = random_values(gRng, nx, -1, 1),
             dw0 = random_values(gRng, nw, -1, 1),
             db0 = random_values(gRng, s.Cout, -1, 1);
  std::vector<double> y(static_cast<size_t>(ny)), dx(dx0.begin(), dx0.end()),
      dw(dw0.begin(), dw0.end()), db(db0.begin(), db0.end());
  if (storeDx)
    std::fill(dx.begin(), dx.end(), 0.0);
  auto xi = [&](int64_t n, int64_t c, int64_t h, int64_t v) {
    return ((n * s.Cin + c) * s.H + h) * s.W + v;
  };
  for (int64_t n = 0; n < s.B; ++n)
    for (int64_t o = 0; o < s.Cout; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const size_t yi = size_t(((n * s.Cout + o) * Ho + oh) * Wo + ow);
          double acc = bias ? b[size_t(o)] : 0.0;
          db[size_t(o)] += dy[yi];
          for (int64_t c = 0; c < s.Cin; ++c)
            for (int64_t i = 0; i < s.kh; ++i)
              for (int64_t j = 0; j < s.kw; ++j) {
                const int64_t h = oh * s.stride - s.padding + i,
                              v = ow * s.stride - s.padding + j;
                if (h < 0 || h >= s.H || v < 0 || v >= s.W)
                  continue;
                const size_t wi =
                    size_t(((o * s.Cin + c) * s.kh + i) * s.kw + j);
                acc += double(w[wi]) * x[size_t(xi(n, c, h, v))];
                dx[size_t(xi(n, c, h, v))] += double(w[wi]) * dy[yi];
                dw[wi] += double(x[size_t(xi(n, c, h, v))]) * dy[yi];
              }
          y[yi] = acc;
        }
  const Dims xShape = {s.B, s.Cin, s.H, s.W}, yShape = {s.B, s.Cout, Ho, Wo};
  auto stored = [&](const std::vector<float> &v, const Dims &shape,
                    bool back = false) {
    return s.channelsLast ? toNhwc(v, shape, back) : v;
  };
  rt::DeviceBuffer<act_t> X(nx), Wt(nw), B(s.Cout), Y(ny), DY(ny), DX(nx);
  rt::DeviceBuffer<float> DW(nw), DB(s.Cout);
  upload(X.data(), stored(x, xShape));
  upload(Wt.data(), w);
  upload(B.data(), b);
  upload(DY.data(), stored(dy, yShape));
  upload(DX.data(), stored(dx0, xShape));
  upload(DW.data(), dw0);
  upload(DB.data(), db0);
  poison(Y.data(), ny * int64_t(sizeof(act_t)));
  rt::conv2d_forward(Y.data(), X.data(), Wt.data(), bias ? B.data() : nullptr,
                     s);
  rt::conv2d_backward(DX.data(), nullptr, nullptr, DY.data(), X.data(),
                      Wt.data(), s, !storeDx);
  rt::conv2d_backward(nullptr, DW.data(), bias ? DB.data() : nullptr, DY.data(),
                      X.data(), Wt.data(), s);
  rt::synchronize();
  auto f = [](const std::vector<double> &v) {
    return std::vector<float>(v.begin(), v.end());
  };
  const std::string label =
      "conv2d " + path + (s.channelsLast ? " NHWC " : " ") +
      std::to_string(s.Cin) + "->" + std::to_string(s.Cout) + " k" +
      std::to_string(s.kh) + " s" + std::to_string(s.stride) + " p" +
      std::to_string(s.padding);
  bool good = report(
      label + " forward",
      rel_error(stored(download(Y.data(), ny), yShape, true), f(y)), kActTol);
  good = report(label + (storeDx ? " dx =" : " dx +="),
                rel_error(stored(download(DX.data(), nx), xShape, true), f(dx)),
                kActTol) &&
         good;
  good = report(label + " dw += (fp32)",
                rel_error(download(DW.data(), nw), f(dw)), kActTol) &&
         good;
  if (bias)
    good = report(label + " dbias += (fp32)",
                  rel_error(download(DB.data(), s.Cout), f(db)), kActTol) &&
           good;
  gFailures += good ? 0 : 1;
}

/// The GEMM path (conv2d_is_gemm: channels-last 1x1 stride 1) on its own
/// shapes: ResNet's Cin > Cout and Cin < Cout, with a bias, odd channel
/// counts (rows not 16-byte aligned); all three directions, then the data
/// gradient alone (the forward and weight gradient on the other paths).
void checkConvGemm() {
  const rt::Conv2dShape shapes[] = {{2, 64, 14, 14, 32, 1, 1, 1, 0, true},
                                    {2, 32, 7, 9, 96, 1, 1, 1, 0, true},
                                    {2, 24, 5, 7, 40, 1, 1, 1, 0, true},
                                    {3, 5, 6, 7, 3, 1, 1, 1, 0, true}};
  const rt::ConvGemmDirs was = rt::conv_gemm_dirs();
  for (const rt::ConvGemmDirs dirs :
       {rt::ConvGemmDirs{true, true, true},
        rt::ConvGemmDirs{false, true, false}}) {
    rt::conv_use_gemm(dirs);
    const std::string path = dirs.forward ? "gemm" : "gemm dgrad";
    for (const rt::Conv2dShape &s : shapes) {
      if (!rt::conv2d_is_gemm(s) && ++gFailures)
        std::printf("%s conv2d %s: 1x1 s1 not taken  FAIL\n", kMode,
                    path.c_str());
      for (bool storeDx : {false, true})
        checkConv(s, s.Cin < 30, path, storeDx);
    }
  }
  rt::conv_use_gemm(was);
}

} // namespace

/// The conv2d checks through both paths where this build has cuDNN (the
/// im2col path alone otherwise; the GEMM path off: checkConvGemm): the shapes
/// of CNN exports and VGG (with a bias), then ResNet's (no bias): the 7x7
/// stride-2 stem, 1x1 projections (stride 1 and the stride-2 downsample), 3x3
/// pad-1 at stride 1 and 2 (an odd input). Where cuDNN is built and takes any
/// shape it must take every ResNet one (AUTODDL_CONV_VERBOSE=1 says why not).
void checkConvPaths() {
  const rt::Conv2dShape withBias[] = {{2, 3, 9, 11, 5, 3, 3, 1, 1},
                                      {3, 4, 12, 10, 6, 3, 2, 2, 0}};
  const rt::Conv2dShape resnet[] = {{2, 3, 32, 30, 16, 7, 7, 2, 3},
                                    {2, 64, 14, 14, 32, 1, 1, 1, 0},
                                    {2, 32, 14, 13, 64, 1, 1, 2, 0},
                                    {4, 32, 8, 8, 32, 3, 3, 1, 1},
                                    {2, 16, 15, 15, 32, 3, 3, 2, 1}};
  const bool was = rt::conv_cudnn_enabled();
  const rt::ConvGemmDirs gemmWas = rt::conv_gemm_dirs();
  rt::conv_use_gemm({false, false, false});
  for (bool cudnn : {false, true}) {
    if (cudnn && !rt::conv_cudnn_built()) {
      std::printf("%s conv2d cudnn: not in this build\n", kMode);
      continue;
    }
    rt::conv_use_cudnn(cudnn);
    const std::string path = cudnn ? "cudnn" : "own";
    // Per layout (NCHW, channels-last): ResNet shapes cuDNN took, missed.
    int taken[2] = {}, missed[2] = {};
    for (bool last : {false, true}) {
      for (rt::Conv2dShape s : withBias) {
        s.channelsLast = last;
        checkConv(s, true, path);
      }
      for (rt::Conv2dShape s : resnet) {
        s.channelsLast = last;
        (cudnn && rt::conv2d_uses_cudnn(s) ? taken : missed)[last] += 1;
        checkConv(s, false, path);
        checkConv(s, false, path, true);
      }
    }
    if (cudnn && taken[0] == 0)
      std::printf("%s conv2d cudnn: cuDNN took no shape (libcudnn.so.9 not "
                  "loaded?): the own path ran\n",
                  kMode);
    else if (cudnn && missed[0] > 0) {
      std::printf("%s conv2d cudnn: %d of ResNet's shapes not taken by "
                  "cuDNN  FAIL\n",
                  kMode, missed[0]);
      ++gFailures;
    }
    // Channels-last misses run the checked im2col path: a note for the
    // speed (AUTODDL_CONV_VERBOSE=1 says why), not a failure.
    if (cudnn && taken[0] > 0 && missed[1] > 0)
      std::printf("%s conv2d cudnn: NOTE %d of ResNet's shapes not taken by "
                  "cuDNN channels-last (the im2col path runs them)\n",
                  kMode, missed[1]);
  }
  rt::conv_use_cudnn(was);
  rt::conv_use_gemm(gemmWas);
  checkConvGemm();
}

} // namespace pcheck
