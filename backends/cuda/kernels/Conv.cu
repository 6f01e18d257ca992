// conv2d and pool2d on the GPU (Conv.h). cuDNN runs a convolution where it
// takes the shape (ConvCudnn.cu), with the bias and its gradient as the
// channel kernels below. Otherwise a convolution is the linear layer
// colT[B*Ho*Wo, K] W^T (K = Cin*kh*kw, W [Cout, K]) of its im2col rows, whose
// [B, Ho*Wo, Cout] result is permuted to NCHW; its backward permutes dout the
// other way and runs the linear's backward (dcolT, dW fp32, dbias fp32), then
// col2im gathers dcolT into dx. Channels-last (Conv2dShape::channelsLast):
// the GEMM's rows are the NHWC output itself, no permutes; im2col and col2im
// index x NHWC, the columns still in the OIHW weight's (c, i, j) order.
// A channels-last 1x1 stride-1 convolution's rows are x itself: it runs as
// the linear directly, ahead of cuDNN (conv2d_is_gemm).
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Conv.h"
#include "backends/cuda/kernels/ConvCudnn.h"
#include "backends/cuda/kernels/Linear.h"
#include "backends/cuda/kernels/Shape.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace autoddl::rt {
namespace {
using namespace detail;

constexpr int kThreads = 256;

/// Element (b, c, h, w) of an image of shape `s`'s input: NCHW or NHWC.
__device__ __forceinline__ int64_t x_at(const Conv2dShape &s, int64_t b,
                                        int64_t c, int64_t h, int64_t w) {
  return s.channelsLast ? ((b * s.H + h) * s.W + w) * s.Cin + c
                        : ((b * s.Cin + c) * s.H + h) * s.W + w;
}

/// colT[(b*Ho + oh)*Wo + ow, (c*kh + i)*kw + j] = x[b, c, ih, iw] (0 outside
/// the padded border), ih = oh*stride - padding + i (iw likewise).
__global__ void im2col_rows_kernel(act_t *colT, const act_t *x, Conv2dShape s,
                                   int64_t Ho, int64_t Wo, int64_t total) {
  const int64_t K = s.Cin * s.kh * s.kw;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = e % K, row = e / K;
    const int64_t j = k % s.kw, i = (k / s.kw) % s.kh, c = k / (s.kw * s.kh);
    const int64_t ow = row % Wo, oh = (row / Wo) % Ho, b = row / (Wo * Ho);
    const int64_t ih = oh * s.stride - s.padding + i;
    const int64_t iw = ow * s.stride - s.padding + j;
    colT[e] = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W
                  ? x[x_at(s, b, c, ih, iw)]
                  : from_float<act_t>(0.0f);
  }
}

/// dx[b, c, h, w] += the sum of dcolT over the (output pixel, kernel tap)
/// pairs that read it: the transpose of im2col, one thread an element (e in
/// dx's storage order).
__global__ void col2im_rows_kernel(act_t *dx, const act_t *dcolT, Conv2dShape s,
                                   int64_t Ho, int64_t Wo, int64_t total,
                                   bool accumulate) {
  const int64_t K = s.Cin * s.kh * s.kw;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t b, c, h, w;
    if (s.channelsLast) {
      c = e % s.Cin, w = (e / s.Cin) % s.W, h = (e / (s.Cin * s.W)) % s.H;
      b = e / (s.Cin * s.W * s.H);
    } else {
      w = e % s.W, h = (e / s.W) % s.H, c = (e / (s.W * s.H)) % s.Cin;
      b = e / (s.W * s.H * s.Cin);
    }
    float acc = 0.0f;
    for (int64_t i = 0; i < s.kh; ++i) {
      const int64_t th = h + s.padding - i; // = oh * stride
      if (th < 0 || th % s.stride || th / s.stride >= Ho)
        continue;
      for (int64_t j = 0; j < s.kw; ++j) {
        const int64_t tw = w + s.padding - j;
        if (tw < 0 || tw % s.stride || tw / s.stride >= Wo)
          continue;
        const int64_t row = (b * Ho + th / s.stride) * Wo + tw / s.stride;
        acc += to_float(dcolT[row * K + (c * s.kh + i) * s.kw + j]);
      }
    }
    dx[e] = from_float<act_t>(accumulate ? to_float(dx[e]) + acc : acc);
  }
}

/// out[b, c, p] += bias[c] over NCHW [B, C, P] (cuDNN's convolution has no
/// bias; channels-last, the rows [B*P, C] take Linear.h's bias_add).
__global__ void channel_bias_kernel(act_t *out, const act_t *bias, int64_t C,
                                    int64_t P, int64_t total) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x)
    out[e] = from_float<act_t>(to_float(out[e]) + to_float(bias[(e / P) % C]));
}

/// dbias[c] += the sum of dout[b, c, p] over b and p (fp32): one block a
/// channel, a fixed order (deterministic). NCHW; channels-last dout is rows
/// [B*P, C], whose column sums are Linear.h's bias_add_backward.
__global__ void channel_sums_kernel(float *dbias, const act_t *dout, int64_t B,
                                    int64_t C, int64_t P) {
  __shared__ float partial[32];
  const int64_t c = blockIdx.x;
  float acc = 0.0f;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = threadIdx.x; p < P; p += blockDim.x)
      acc += to_float(dout[(b * C + c) * P + p]);
  acc = block_sum(acc, partial);
  if (threadIdx.x == 0)
    dbias[c] += acc;
}

/// Pixel (h, w) of plane n of [N, H, W] planes: NCHW (C = 0), or stored
/// channels-last (C channels, plane n = b * C + c at ((b*H + h)*W + w)*C + c).
__device__ __forceinline__ int64_t pixel(int64_t n, int64_t h, int64_t w,
                                         int64_t H, int64_t W, int64_t C) {
  return C ? ((n / C * H + h) * W + w) * C + n % C : (n * H + h) * W + w;
}
/// The plane and pixel of element e in pixel()'s storage order.
__device__ __forceinline__ void pixel_of(int64_t e, int64_t H, int64_t W,
                                         int64_t C, int64_t &n, int64_t &h,
                                         int64_t &w) {
  const int64_t c = C ? e % C : 0, q = C ? e / C : e;
  w = q % W, h = (q / W) % H, n = C ? q / (W * H) * C + c : q / (W * H);
}

/// The first maximum of window (oh, ow) of plane n (the CPU's order: rows,
/// then columns, a later element only where strictly larger), as an offset.
__device__ int64_t window_max_at(const act_t *x, int64_t n, int64_t H,
                                 int64_t W, int64_t C, int64_t kernel,
                                 int64_t stride, int64_t oh, int64_t ow) {
  int64_t best = -1;
  float mx = -INFINITY;
  for (int64_t i = 0; i < kernel; ++i)
    for (int64_t j = 0; j < kernel; ++j) {
      const int64_t at = pixel(n, oh * stride + i, ow * stride + j, H, W, C);
      const float v = to_float(x[at]);
      if (best < 0 || v > mx) {
        mx = v;
        best = at;
      }
    }
  return best;
}

__global__ void pool_forward_kernel(act_t *out, const act_t *x, int64_t N,
                                    int64_t H, int64_t W, int64_t C,
                                    int64_t kernel, int64_t stride, bool is_max,
                                    int64_t Ho, int64_t Wo) {
  const int64_t total = N * Ho * Wo;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, oh, ow;
    pixel_of(e, Ho, Wo, C, n, oh, ow);
    float acc = 0.0f;
    if (is_max) {
      acc = to_float(x[window_max_at(x, n, H, W, C, kernel, stride, oh, ow)]);
    } else {
      for (int64_t i = 0; i < kernel; ++i)
        for (int64_t j = 0; j < kernel; ++j)
          acc +=
              to_float(x[pixel(n, oh * stride + i, ow * stride + j, H, W, C)]);
      acc /= float(kernel * kernel);
    }
    out[e] = from_float<act_t>(acc);
  }
}

/// dx[n, h, w] += the gradients of the windows holding it (max: of those
/// whose first maximum it is).
__global__ void pool_backward_kernel(act_t *dx, const act_t *x,
                                     const act_t *dout, int64_t N, int64_t H,
                                     int64_t W, int64_t C, int64_t kernel,
                                     int64_t stride, bool is_max, int64_t Ho,
                                     int64_t Wo, bool accumulate) {
  const int64_t total = N * H * W;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, h, w;
    pixel_of(e, H, W, C, n, h, w);
    float acc = 0.0f;
    // Windows oh with oh*stride <= h < oh*stride + kernel (ow likewise).
    const int64_t oh0 = h >= kernel ? (h - kernel) / stride + 1 : 0;
    const int64_t ow0 = w >= kernel ? (w - kernel) / stride + 1 : 0;
    for (int64_t oh = oh0; oh < Ho && oh * stride <= h; ++oh)
      for (int64_t ow = ow0; ow < Wo && ow * stride <= w; ++ow) {
        const float g = to_float(dout[pixel(n, oh, ow, Ho, Wo, C)]);
        if (!is_max)
          acc += g / float(kernel * kernel);
        else if (window_max_at(x, n, H, W, C, kernel, stride, oh, ow) == e)
          acc += g;
      }
    dx[e] = from_float<act_t>(accumulate ? to_float(dx[e]) + acc : acc);
  }
}

/// The scratch of a convolution's GEMMs: the im2col rows, and (backward)
/// the output gradient permuted to rows and the rows' gradient.
struct ConvScratch {
  act_t *colT, *doutT, *dcolT;
};
ConvScratch conv_scratch(const Conv2dShape &s, bool backward) {
  const int64_t rows = s.B * s.Ho() * s.Wo(), K = s.Cin * s.kh * s.kw;
  const int64_t n = rows * K + (backward ? rows * (s.Cout + K) : 0);
  auto *p = static_cast<act_t *>(scratch(3, n * int64_t(sizeof(act_t))));
  return {p, p + rows * K, p + rows * K + rows * s.Cout};
}

void im2col_rows(act_t *colT, const act_t *x, const Conv2dShape &s) {
  const int64_t total = s.B * s.Ho() * s.Wo() * s.Cin * s.kh * s.kw;
  if (total == 0)
    return;
  im2col_rows_kernel<<<grid_for(total, kThreads), kThreads, 0,
                       compute_stream()>>>(colT, x, s, s.Ho(), s.Wo(), total);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// AUTODDL_CONV_GEMM's directions (its accepted values are
/// harness::check_environment's kEnvRules).
ConvGemmDirs &gemm_switch() {
  static ConvGemmDirs dirs = [] {
    ConvGemmDirs d; // off unless asked: no faster than cuDNN on an H100
    const char *e = std::getenv("AUTODDL_CONV_GEMM");
    if (!e || !*e || std::strcmp(e, "0") == 0)
      return d;
    if (std::strcmp(e, "1") == 0)
      return ConvGemmDirs{true, true, true};
    const std::string list = std::string(",") + e + ",";
    d.forward = list.find(",forward,") != std::string::npos;
    d.dgrad = list.find(",dgrad,") != std::string::npos;
    d.wgrad = list.find(",wgrad,") != std::string::npos;
    return d;
  }();
  return dirs;
}

} // namespace

void conv_use_gemm(ConvGemmDirs dirs) { gemm_switch() = dirs; }
ConvGemmDirs conv_gemm_dirs() { return gemm_switch(); }
bool conv2d_is_gemm(const Conv2dShape &s) {
  return s.channelsLast && s.kh == 1 && s.kw == 1 && s.stride == 1 &&
         s.padding == 0;
}

bool conv2d_uses_cudnn(const Conv2dShape &s) { return cudnn_conv::takes(s); }

void conv2d_forward(act_t *out, const act_t *x, const act_t *w,
                    const act_t *bias, const Conv2dShape &s) {
  const int64_t P = s.Ho() * s.Wo(), K = s.Cin * s.kh * s.kw;
  if (s.B * P * s.Cout == 0)
    return;
  if (conv2d_is_gemm(s) && gemm_switch().forward) { // the bias as epilogue
    linear_forward(out, x, w, bias, s.B * P, s.Cin, s.Cout, true);
    return;
  }
  if (cudnn_conv::forward(out, x, w, s)) {
    const int64_t total = s.B * s.Cout * P;
    if (bias && s.channelsLast) {
      bias_add_forward(out, out, bias, s.B * P, s.Cout);
    } else if (bias) {
      channel_bias_kernel<<<grid_for(total, kThreads), kThreads, 0,
                            compute_stream()>>>(out, bias, s.Cout, P, total);
      AUTODDL_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  const ConvScratch c = conv_scratch(s, true); // one size for both passes
  im2col_rows(c.colT, x, s);
  // outT[B*P, Cout] = colT W^T + bias (NHWC), then [B, P, Cout] -> [B, Cout,
  // P] for NCHW.
  linear_forward(s.channelsLast ? out : c.doutT, c.colT, w, bias, s.B * P, K,
                 s.Cout, true);
  if (!s.channelsLast)
    permute_copy(out, c.doutT, {s.B, P, s.Cout}, {0, 2, 1}, false);
}

void conv2d_backward(act_t *dx, float *dw, float *dbias, const act_t *dout,
                     const act_t *x, const act_t *w, const Conv2dShape &s,
                     bool accumulate_dx) {
  const int64_t P = s.Ho() * s.Wo(), K = s.Cin * s.kh * s.kw;
  if (s.B * P * s.Cout == 0 || (!dx && !dw && !dbias))
    return;
  if (conv2d_is_gemm(s)) {
    // The GEMM path's directions (the bias gradient with them), then the
    // rest as below.
    act_t *gdx = gemm_switch().dgrad ? dx : nullptr;
    float *gdw = gemm_switch().wgrad ? dw : nullptr;
    if (gdx || gdw) {
      linear_backward(gdx, gdw, dbias, dout, x, w, s.B * P, s.Cin, s.Cout, true,
                      accumulate_dx);
      dx = gdx ? nullptr : dx;
      dw = gdw ? nullptr : dw;
      dbias = nullptr;
      if (!dx && !dw)
        return;
    }
  }
  // cuDNN's gradients first; the own path computes what is left, the bias
  // gradient with it where it runs (else the channel sums).
  dx = dx && cudnn_conv::backward_data(dx, dout, w, s, accumulate_dx) ? nullptr
                                                                      : dx;
  dw = dw && cudnn_conv::backward_filter(dw, dout, x, s) ? nullptr : dw;
  if (!dx && !dw) {
    if (dbias && s.channelsLast) {
      bias_add_backward(nullptr, dbias, dout, s.B * P, s.Cout);
    } else if (dbias) {
      channel_sums_kernel<<<unsigned(s.Cout), kThreads, 0, compute_stream()>>>(
          dbias, dout, s.B, s.Cout, P);
      AUTODDL_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  const ConvScratch c = conv_scratch(s, true);
  // The output gradient as [B*P, Cout] rows: NHWC is that already.
  const act_t *doutT = dout;
  if (!s.channelsLast) {
    permute_copy(c.doutT, dout, {s.B, s.Cout, P}, {0, 2, 1}, false);
    doutT = c.doutT;
  }
  if (dw)
    im2col_rows(c.colT, x, s);
  // dcolT = doutT W (stored), dW += doutT^T colT, dbias += column sums.
  linear_backward(dx ? c.dcolT : nullptr, dw, dbias, doutT, c.colT, w, s.B * P,
                  K, s.Cout, true, false);
  if (!dx)
    return;
  const int64_t total = s.B * s.Cin * s.H * s.W;
  col2im_rows_kernel<<<grid_for(total, kThreads), kThreads, 0,
                       compute_stream()>>>(dx, c.dcolT, s, s.Ho(), s.Wo(),
                                           total, accumulate_dx);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void pool2d_forward(act_t *out, const act_t *x, int64_t N, int64_t H, int64_t W,
                    int64_t kernel, int64_t stride, bool is_max,
                    int64_t channels_last) {
  const int64_t Ho = (H - kernel) / stride + 1, Wo = (W - kernel) / stride + 1;
  if (N * Ho * Wo <= 0)
    return;
  pool_forward_kernel<<<grid_for(N * Ho * Wo, kThreads), kThreads, 0,
                        compute_stream()>>>(out, x, N, H, W, channels_last,
                                            kernel, stride, is_max, Ho, Wo);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void pool2d_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t N,
                     int64_t H, int64_t W, int64_t kernel, int64_t stride,
                     bool is_max, int64_t channels_last, bool accumulate_dx) {
  const int64_t Ho = (H - kernel) / stride + 1, Wo = (W - kernel) / stride + 1;
  if (!dx || N * H * W <= 0)
    return;
  pool_backward_kernel<<<grid_for(N * H * W, kThreads), kThreads, 0,
                         compute_stream()>>>(dx, x, dout, N, H, W,
                                             channels_last, kernel, stride,
                                             is_max, Ho, Wo, accumulate_dx);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
