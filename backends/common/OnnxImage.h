// The image primitives of an ONNX import on the host, forward and backward:
// MaxPool / AveragePool with any pads, strides, dilations and ceil_mode
// (the pools conv2d's pool2d does not cover, a ResNet stem's padded max
// pool), and BatchNormalization, trained on batch statistics. Conventions as
// OnnxKernels.h (row-major, backward accumulates, a null gradient skipped);
// the geometry (poolWindow) is shared with the importer's shape rule and the
// CUDA kernels (backends/cuda/kernels/PrimitiveImage.cuh). Header-only,
// plain C++17, so codegen copies it with backends/common.
#ifndef AUTODDL_BACKENDS_COMMON_ONNXIMAGE_H
#define AUTODDL_BACKENDS_COMMON_ONNXIMAGE_H

#include "backends/common/Dims.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::onnx_kernels {

/// A pool over the spatial axes of x [N, C, S...]: per spatial axis the
/// kernel extent, stride, dilation and padding before it; output position o
/// reads input o * stride - pad + k * dilation for k < kernel.
struct PoolWindow {
  Dims kernel, stride, dilation, pad, in, out; // per spatial axis
  bool max = true;
  bool countPad = false; // AveragePool's count_include_pad
  Dims padEnd;           // padding after each axis (count_include_pad's bound)
};

/// The window of a pool of x shaped xs (rank >= 3) from ONNX's attributes
/// (explicit pads; the importer resolves auto_pad into them): empty lists
/// take the defaults. Returns "" or why not. Output extent per axis:
/// floor (ceil with ceil_mode) of (in + pads - ((k-1)d+1)) / s, plus one; a
/// ceil_mode window that starts in the end padding (past the input) is
/// dropped, as PyTorch does.
inline std::string poolWindow(const Dims &xs, Dims kernel, Dims strides,
                              Dims pads, Dims dilations, bool ceil,
                              PoolWindow &w) {
  if (xs.size() < 3)
    return "a pool of a tensor of rank below 3";
  const size_t r = xs.size() - 2;
  if (strides.empty())
    strides.assign(r, 1);
  if (dilations.empty())
    dilations.assign(r, 1);
  if (pads.empty())
    pads.assign(2 * r, 0);
  if (kernel.size() != r || strides.size() != r || dilations.size() != r ||
      pads.size() != 2 * r)
    return "a pool's kernel_shape, strides, dilations or pads do not match "
           "the spatial rank";
  w.kernel = kernel;
  w.stride = strides;
  w.dilation = dilations;
  w.pad.assign(pads.begin(), pads.begin() + long(r));
  w.padEnd.assign(pads.begin() + long(r), pads.end());
  w.in.assign(xs.begin() + 2, xs.end());
  w.out.clear();
  for (size_t d = 0; d < r; ++d) {
    if (kernel[d] < 1 || strides[d] < 1 || dilations[d] < 1 || pads[d] < 0 ||
        pads[d + r] < 0)
      return "a pool's kernel, strides or dilations below 1 or negative pads";
    const int64_t span = (kernel[d] - 1) * dilations[d] + 1;
    // A pad as wide as the window would make windows of padding only (max
    // -inf, average 0); PyTorch refuses them as well.
    if (pads[d] >= span || pads[d + r] >= span)
      return "a pool's pads are as wide as its window";
    const int64_t room = w.in[d] + pads[d] + pads[d + r] - span;
    if (room < 0)
      return "a pool's window is larger than its padded input";
    int64_t o =
        (ceil ? (room + strides[d] - 1) / strides[d] : room / strides[d]) + 1;
    if (ceil && (o - 1) * strides[d] >= w.in[d] + pads[d])
      --o;
    w.out.push_back(o);
  }
  return "";
}

/// The explicit pads ONNX's auto_pad `mode` implies for a pool (or conv)
/// of kernel `kernel` over x shaped xs (strides, dilations empty: 1): SAME
/// keeps ceil(in / stride) positions, the odd padding at the end for
/// SAME_UPPER, the start for SAME_LOWER; VALID and NOTSET none. Returns ""
/// or why not.
inline std::string autoPads(const Dims &xs, const Dims &kernel, Dims strides,
                            Dims dilations, const std::string &mode,
                            Dims &pads) {
  const size_t r = kernel.size();
  if (strides.empty())
    strides.assign(r, 1);
  if (dilations.empty())
    dilations.assign(r, 1);
  if (xs.size() != r + 2 || strides.size() != r || dilations.size() != r)
    return "kernel_shape, strides or dilations do not match the input's rank";
  pads.assign(2 * r, 0);
  if (mode == "VALID" || mode == "NOTSET")
    return "";
  if (mode != "SAME_UPPER" && mode != "SAME_LOWER")
    return "auto_pad '" + mode + "' is not an ONNX value";
  for (size_t d = 0; d < r; ++d) {
    const int64_t in = xs[d + 2], out = (in + strides[d] - 1) / strides[d];
    const int64_t total = std::max<int64_t>(
        0, (out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - in);
    pads[d] = mode == "SAME_UPPER" ? total / 2 : total - total / 2;
    pads[d + r] = total - pads[d];
  }
  return "";
}

/// The pool's result shape: [N, C, out...].
inline Dims poolShape(const Dims &xs, const PoolWindow &w) {
  Dims s = {xs[0], xs[1]};
  s.insert(s.end(), w.out.begin(), w.out.end());
  return s;
}

namespace detail {
/// Calls f(in, k) for the in-bounds input offsets `in` (within a plane) of
/// output position `o` (within a plane), k its kernel position's ordinal,
/// in row-major kernel order; returns the count of positions inside the
/// padded bounds (count_include_pad's divisor).
template <typename F> int64_t forWindow(const PoolWindow &w, int64_t o, F f) {
  const size_t r = w.in.size();
  Dims at(r), kpos(r, 0);
  for (size_t d = r; d-- > 0;) {
    at[d] = o % w.out[d];
    o /= w.out[d];
  }
  int64_t kcount = 1, padded = 0;
  for (size_t d = 0; d < r; ++d)
    kcount *= w.kernel[d];
  for (int64_t k = 0; k < kcount; ++k) {
    int64_t off = 0;
    bool inside = true, inPadded = true;
    for (size_t d = 0; d < r; ++d) {
      const int64_t i =
          at[d] * w.stride[d] - w.pad[d] + kpos[d] * w.dilation[d];
      inside = inside && i >= 0 && i < w.in[d];
      inPadded = inPadded && i >= -w.pad[d] && i < w.in[d] + w.padEnd[d];
      off = off * w.in[d] + i;
    }
    padded += inPadded;
    if (inside)
      f(off, k);
    for (size_t d = r; d-- > 0;) { // the next kernel position
      if (++kpos[d] < w.kernel[d])
        break;
      kpos[d] = 0;
    }
  }
  return padded;
}
} // namespace detail

/// y = max (padding ignored: -inf) or mean over each window; the mean
/// divides by the in-bounds count, or with countPad by the positions
/// inside the padded bounds.
template <typename T>
void pool_forward(T *y, const T *x, const Dims &xs, const PoolWindow &w) {
  const int64_t planes = xs[0] * xs[1], inPlane = numel(w.in),
                outPlane = numel(w.out);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t o = 0; o < outPlane; ++o) {
      const T *xp = x + p * inPlane;
      double acc = w.max ? -INFINITY : 0.0;
      int64_t n = 0;
      const int64_t padded = detail::forWindow(w, o, [&](int64_t i, int64_t) {
        acc = w.max ? std::max(acc, double(xp[i])) : acc + double(xp[i]);
        ++n;
      });
      y[p * outPlane + o] = T(
          w.max ? acc
                : acc / double(std::max<int64_t>(1, w.countPad ? padded : n)));
    }
}

/// dx += dy routed to each window's first maximum (max), or spread evenly
/// over its divisor (mean); x and y the forward's input and output.
template <typename T>
void pool_backward(T *dx, const T *x, const T *y, const T *dy, const Dims &xs,
                   const PoolWindow &w) {
  if (!dx)
    return;
  const int64_t planes = xs[0] * xs[1], inPlane = numel(w.in),
                outPlane = numel(w.out);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t o = 0; o < outPlane; ++o) {
      const T *xp = x + p * inPlane;
      T *dp = dx + p * inPlane;
      const T g = dy[p * outPlane + o];
      if (w.max) {
        int64_t first = -1;
        detail::forWindow(w, o, [&](int64_t i, int64_t) {
          if (first < 0 && xp[i] == y[p * outPlane + o])
            first = i;
        });
        if (first >= 0)
          dp[first] += g;
        continue;
      }
      int64_t n = 0;
      const int64_t padded =
          detail::forWindow(w, o, [&](int64_t, int64_t) { ++n; });
      const T share = g / T(std::max<int64_t>(1, w.countPad ? padded : n));
      detail::forWindow(w, o, [&](int64_t i, int64_t) { dp[i] += share; });
    }
}

// ---- BatchNormalization ------------------------------------------------
// x [N, C, S...] normalised per channel c over (N, S...). Training (batch
// statistics, what every import trains with): mean and biased variance of
// the batch; inference (the node tests' default form): the given mean and
// var. y = (x - mean) / sqrt(var + eps) * scale + bias.

/// Channel c's mean and sum of squared deviations over (N, S...) of x [N,
/// C, S...], in double (two passes).
template <typename T>
void channelMoments(const T *x, int64_t N, int64_t C, int64_t S, int64_t c,
                    double &mean, double &squares) {
  double s = 0, q = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < S; ++i)
      s += double(x[(n * C + c) * S + i]);
  mean = s / double(std::max<int64_t>(1, N * S));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < S; ++i) {
      const double d = double(x[(n * C + c) * S + i]) - mean;
      q += d * d;
    }
  squares = q;
}

/// Per channel, the mean and 1 / sqrt(var + eps) of x over (N, S...), in
/// double.
template <typename T>
void batchStats(const T *x, const Dims &xs, double eps,
                std::vector<double> &mean, std::vector<double> &invStd) {
  const int64_t N = xs[0], C = xs[1],
                S = numel(xs) / std::max<int64_t>(1, N * C);
  mean.assign(size_t(C), 0.0);
  invStd.assign(size_t(C), 0.0);
  const double count = double(std::max<int64_t>(1, N * S));
  for (int64_t c = 0; c < C; ++c) {
    double q = 0;
    channelMoments(x, N, C, S, c, mean[size_t(c)], q);
    invStd[size_t(c)] = 1.0 / std::sqrt(q / count + eps);
  }
}

/// One micro-batch's statistics for the running ones (docs/checkpoints.md
/// "Buffers"): per channel the mean (moments[c]) and the unbiased variance
/// (moments[C + c]: n / (n - 1) times the biased one, n = N S, as PyTorch's
/// running_var takes; the biased one for n = 1) of x over (N, S...).
template <typename T>
void batchnorm_moments(float *moments, const T *x, const Dims &xs) {
  const int64_t N = xs[0], C = xs[1],
                S = numel(xs) / std::max<int64_t>(1, N * C);
  const double n = double(std::max<int64_t>(1, N * S));
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, q = 0;
    channelMoments(x, N, C, S, c, m, q);
    moments[c] = float(m);
    moments[C + c] = float(q / (n > 1 ? n - 1 : n));
  }
}

/// running = momentum running + (1 - momentum) batch per channel (ONNX's
/// momentum; PyTorch's m is 1 - momentum), from batchnorm_moments' 2C
/// values, in double.
inline void batchnorm_running_update(float *mean, float *var,
                                     const float *moments, int64_t C,
                                     double momentum) {
  for (int64_t c = 0; c < C; ++c) {
    mean[c] =
        float(momentum * double(mean[c]) + (1 - momentum) * double(moments[c]));
    var[c] = float(momentum * double(var[c]) +
                   (1 - momentum) * double(moments[C + c]));
  }
}

/// y from x, scale, bias; `mean` and `var` null: batch statistics.
template <typename T>
void batchnorm_forward(T *y, const T *x, const Dims &xs, const T *scale,
                       const T *bias, const T *mean, const T *var, double eps) {
  const int64_t N = xs[0], C = xs[1],
                S = numel(xs) / std::max<int64_t>(1, N * C);
  std::vector<double> m, inv;
  if (mean && var) {
    for (int64_t c = 0; c < C; ++c) {
      m.push_back(double(mean[c]));
      inv.push_back(1.0 / std::sqrt(double(var[c]) + eps));
    }
  } else {
    batchStats(x, xs, eps, m, inv);
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t k = (n * C + c) * S + i;
        y[k] = T((double(x[k]) - m[size_t(c)]) * inv[size_t(c)] *
                     double(scale[c]) +
                 double(bias[c]));
      }
}

/// dscale += sum dy xhat, dbias += sum dy and dx; with batch statistics
/// (mean, var null) the standard batch-norm backward, the statistics
/// recomputed from x: dx += scale inv / M (M dy - sum dy - xhat sum dy xhat);
/// with given ones dx += dy scale inv.
template <typename T>
void batchnorm_backward(T *dx, T *dscale, T *dbias, const T *x, const Dims &xs,
                        const T *scale, const T *mean, const T *var, double eps,
                        const T *dy) {
  const int64_t N = xs[0], C = xs[1],
                S = numel(xs) / std::max<int64_t>(1, N * C);
  const bool batch = !(mean && var);
  std::vector<double> m, inv;
  if (batch) {
    batchStats(x, xs, eps, m, inv);
  } else {
    for (int64_t c = 0; c < C; ++c) {
      m.push_back(double(mean[c]));
      inv.push_back(1.0 / std::sqrt(double(var[c]) + eps));
    }
  }
  const double M = double(std::max<int64_t>(1, N * S));
  for (int64_t c = 0; c < C; ++c) {
    double sg = 0, sgx = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t k = (n * C + c) * S + i;
        sg += double(dy[k]);
        sgx += double(dy[k]) * (double(x[k]) - m[size_t(c)]) * inv[size_t(c)];
      }
    if (dscale)
      dscale[c] += T(sgx);
    if (dbias)
      dbias[c] += T(sg);
    if (!dx)
      continue;
    const double a = double(scale[c]) * inv[size_t(c)];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t k = (n * C + c) * S + i;
        const double xhat = (double(x[k]) - m[size_t(c)]) * inv[size_t(c)];
        dx[k] += T(batch ? a / M * (M * double(dy[k]) - sg - xhat * sgx)
                         : a * double(dy[k]));
      }
  }
}

} // namespace autoddl::onnx_kernels

#endif // AUTODDL_BACKENDS_COMMON_ONNXIMAGE_H
