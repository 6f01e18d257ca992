// Convolution and pooling on NCHW tensors: conv2d (im2col + cblas_sgemm) and
// pool2d (max, avg). Conventions: see Embedding.h. Output size H' = (H + 2p -
// kh) / s + 1 (same for W).
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_CONV_H
#define AUTODDL_BACKENDS_CPU_KERNELS_CONV_H

#include "backends/common/ConvShape.h" // Conv2dShape
#include "backends/cpu/kernels/Linear.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace autoddl::rt {

/// col[Cin*kh*kw, Ho*Wo] from one image x[Cin,H,W] (zeros outside the padded
/// border).
inline void im2col(float *col, const float *x, const Conv2dShape &s) {
  const int64_t Ho = s.Ho(), Wo = s.Wo();
  for (int64_t c = 0; c < s.Cin; ++c)
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j) {
        float *row = col + ((c * s.kh + i) * s.kw + j) * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const int64_t ih = oh * s.stride - s.padding + i;
            const int64_t iw = ow * s.stride - s.padding + j;
            row[oh * Wo + ow] = (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W)
                                    ? x[(c * s.H + ih) * s.W + iw]
                                    : 0.0f;
          }
      }
}

/// dx[Cin,H,W] += the transpose of im2col applied to dcol.
inline void col2im_add(float *dx, const float *dcol, const Conv2dShape &s) {
  const int64_t Ho = s.Ho(), Wo = s.Wo();
  for (int64_t c = 0; c < s.Cin; ++c)
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j) {
        const float *row = dcol + ((c * s.kh + i) * s.kw + j) * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const int64_t ih = oh * s.stride - s.padding + i;
            const int64_t iw = ow * s.stride - s.padding + j;
            if (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W)
              dx[(c * s.H + ih) * s.W + iw] += row[oh * Wo + ow];
          }
      }
}

/// out[B,Cout,Ho,Wo] = conv(x[B,Cin,H,W], w[Cout,Cin,kh,kw]) + bias[Cout] (bias
/// may be null).
inline void conv2d_forward(float *out, const float *x, const float *w,
                           const float *bias, const Conv2dShape &s) {
  const int64_t Ho = s.Ho(), Wo = s.Wo(), K = s.Cin * s.kh * s.kw;
  std::vector<float> col(size_t(K * Ho * Wo));
  for (int64_t b = 0; b < s.B; ++b) {
    im2col(col.data(), x + b * s.Cin * s.H * s.W, s);
    float *o = out + b * s.Cout * Ho * Wo;
    gemm(false, false, s.Cout, Ho * Wo, K, 1.0f, w, K, col.data(), Ho * Wo,
         0.0f, o, Ho * Wo); // [Cout,K] x [K,Ho*Wo]
    if (bias)
      for (int64_t co = 0; co < s.Cout; ++co)
        for (int64_t p = 0; p < Ho * Wo; ++p)
          o[co * Ho * Wo + p] += bias[co];
  }
}

/// dx += W^T dout (through col2im); dw[Cout,K] += dout col^T; dbias[Cout] +=
/// sums of dout.
inline void conv2d_backward(float *dx, float *dw, float *dbias,
                            const float *dout, const float *x, const float *w,
                            const Conv2dShape &s) {
  const int64_t Ho = s.Ho(), Wo = s.Wo(), K = s.Cin * s.kh * s.kw;
  std::vector<float> col(size_t(K * Ho * Wo));
  for (int64_t b = 0; b < s.B; ++b) {
    const float *g = dout + b * s.Cout * Ho * Wo;
    if (dw) {
      im2col(col.data(), x + b * s.Cin * s.H * s.W, s);
      gemm(false, true, s.Cout, K, Ho * Wo, 1.0f, g, Ho * Wo, col.data(),
           Ho * Wo, 1.0f, dw, K);
    }
    if (dx) {
      gemm(true, false, K, Ho * Wo, s.Cout, 1.0f, w, K, g, Ho * Wo, 0.0f,
           col.data(), Ho * Wo); // dcol [K,Ho*Wo]
      col2im_add(dx + b * s.Cin * s.H * s.W, col.data(), s);
    }
    if (dbias)
      for (int64_t co = 0; co < s.Cout; ++co)
        for (int64_t p = 0; p < Ho * Wo; ++p)
          dbias[co] += g[co * Ho * Wo + p];
  }
}

/// out[B,C,Ho,Wo] = max or mean over each kernel x kernel window (no padding),
/// Ho = (H - kernel) / stride + 1. N = B*C planes.
inline void pool2d_forward(float *out, const float *x, int64_t N, int64_t H,
                           int64_t W, int64_t kernel, int64_t stride,
                           bool is_max) {
  const int64_t Ho = (H - kernel) / stride + 1, Wo = (W - kernel) / stride + 1;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        float acc = is_max ? -INFINITY : 0.0f;
        for (int64_t i = 0; i < kernel; ++i)
          for (int64_t j = 0; j < kernel; ++j) {
            const float v = x[(n * H + oh * stride + i) * W + ow * stride + j];
            acc = is_max ? std::fmax(acc, v) : acc + v;
          }
        out[(n * Ho + oh) * Wo + ow] =
            is_max ? acc : acc / float(kernel * kernel);
      }
}

/// dx[N,H,W] += dout routed to each window's (first) maximum, or spread evenly
/// for avg.
inline void pool2d_backward(float *dx, const float *x, const float *dout,
                            int64_t N, int64_t H, int64_t W, int64_t kernel,
                            int64_t stride, bool is_max) {
  const int64_t Ho = (H - kernel) / stride + 1, Wo = (W - kernel) / stride + 1;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const float g = dout[(n * Ho + oh) * Wo + ow];
        if (is_max) {
          int64_t best = -1;
          float mx = -INFINITY;
          for (int64_t i = 0; i < kernel; ++i)
            for (int64_t j = 0; j < kernel; ++j) {
              const int64_t at =
                  (n * H + oh * stride + i) * W + ow * stride + j;
              if (best < 0 || x[at] > mx) {
                mx = x[at];
                best = at;
              }
            }
          dx[best] += g;
        } else {
          const float share = g / float(kernel * kernel);
          for (int64_t i = 0; i < kernel; ++i)
            for (int64_t j = 0; j < kernel; ++j)
              dx[(n * H + oh * stride + i) * W + ow * stride + j] += share;
        }
      }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_CONV_H
