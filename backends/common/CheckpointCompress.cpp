//===- CheckpointCompress.cpp - BitSnap's encodings of checkpoint tensors -===//
#include "backends/common/CheckpointCompress.h"

#include "backends/common/Parallel.h" // for_chunks

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace autoddl::rt {

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

} // namespace

BitmaskDelta delta_encode(const float *base, const float *value, int64_t n) {
  BitmaskDelta d;
  d.n = n;
  d.mask.assign(size_t((n + 7) / 8), 0);
  for (int64_t i = 0; i < n; ++i)
    if (bits_of(base[i]) != bits_of(value[i])) { // -0 vs 0, NaN payloads
      d.mask[size_t(i / 8)] |= uint8_t(1u << (i % 8));
      d.changed.push_back(value[i]);
    }
  return d;
}

void delta_decode(const BitmaskDelta &d, const float *base, float *out) {
  size_t next = 0;
  for (int64_t i = 0; i < d.n; ++i)
    out[i] =
        (d.mask[size_t(i / 8)] >> (i % 8)) & 1u ? d.changed[next++] : base[i];
}

namespace {

/// Lloyd's 1-D k-means of `sorted` (ascending) into `levels` centroids,
/// ascending, from the quantile clusters: bin k holds sorted[len*k/L,
/// len*(k+1)/L), at least one value (a chunk shorter than L repeats values
/// over bins, and so centroids). Each iteration cuts the sorted values at the
/// centroids' midpoints and takes each range's mean: it lowers the squared
/// error or leaves it.
std::vector<double> lloyd(const std::vector<double> &sorted, int levels,
                          int iterations) {
  const int64_t len = int64_t(sorted.size());
  std::vector<double> cent(size_t(levels), 0.0);
  if (len == 0)
    return cent;
  std::vector<int64_t> begin(size_t(levels) + 1);
  for (int k = 0; k < levels; ++k)
    begin[size_t(k)] = std::min(len - 1, len * k / levels);
  begin[size_t(levels)] = len;
  std::vector<double> prefix(size_t(len) + 1, 0.0);
  for (int64_t i = 0; i < len; ++i)
    prefix[size_t(i) + 1] = prefix[size_t(i)] + sorted[size_t(i)];
  auto means = [&] {
    for (int k = 0; k < levels; ++k) {
      const int64_t b = begin[size_t(k)],
                    e = std::max(b + 1, begin[size_t(k) + 1]);
      if (e <= len && b < e) // an empty cluster keeps its centroid
        cent[size_t(k)] =
            (prefix[size_t(e)] - prefix[size_t(b)]) / double(e - b);
    }
  };
  means();
  for (int it = 0; it < iterations; ++it) {
    for (int k = 1; k < levels; ++k)
      begin[size_t(k)] =
          std::upper_bound(sorted.begin(), sorted.end(),
                           0.5 * (cent[size_t(k) - 1] + cent[size_t(k)])) -
          sorted.begin();
    means();
  }
  // Ascending (an empty cluster kept its centroid, which its neighbours'
  // may have passed): the codes' search needs the order.
  std::sort(cent.begin(), cent.end());
  return cent;
}

/// The chunk's largest absolute and relative errors, from its codes.
std::pair<double, double> chunk_errors(const float *x, int64_t c0, int64_t len,
                                       const ClusterQuantized &q) {
  const float *table =
      q.centroids.data() + (c0 / kClusterChunk) * kClusterLevels;
  double worst = 0, worst_relative = 0;
  for (int64_t i = c0; i < c0 + len; ++i) {
    const double error =
        std::fabs(double(x[i]) - double(table[q.codes[size_t(i)]]));
    worst = std::max(worst, error);
    if (x[i] != 0)
      worst_relative =
          std::max(worst_relative, error / std::fabs(double(x[i])));
  }
  return {worst, worst_relative};
}

/// Linear: Lloyd's centroids of the chunk's values, each element coded to
/// the nearest.
void quantize_linear(const float *x, int64_t c0, int64_t len,
                     int lloyd_iterations, ClusterQuantized &q) {
  std::vector<double> sorted(x + c0, x + c0 + len);
  std::sort(sorted.begin(), sorted.end());
  const std::vector<double> cent =
      lloyd(sorted, kClusterLevels, lloyd_iterations);
  float *table = q.centroids.data() + (c0 / kClusterChunk) * kClusterLevels;
  for (int k = 0; k < kClusterLevels; ++k)
    table[k] = float(cent[size_t(k)]);
  for (int64_t i = c0; i < c0 + len; ++i) {
    const double v = x[i];
    // The nearest centroid: the first >= v or the one before it.
    int k = int(std::lower_bound(cent.begin(), cent.end(), v) - cent.begin());
    if (k == kClusterLevels ||
        (k > 0 && v - cent[size_t(k) - 1] <= cent[size_t(k)] - v))
      --k;
    q.codes[size_t(i)] = uint8_t(k);
  }
}

/// SignedLog: code 0 is 0 (exact); codes 1..L-1 are even levels of
/// t(x) = sign(x) (1 + ln|x| - ln f) between the chunk's least and greatest
/// t, f its least nonzero |x| (so |t| >= 1 for x != 0). A value's nearest
/// level is within half a step of its t, so its relative error is at most
/// exp(step / 2) - 1, step = (t_max - t_min) / (L - 2): 18 decades of v are
/// 0.16 apart (sqrt(v) within 4.2 %). Even levels rather than k-means: the
/// bound holds in the sparse tails too, and no sort.
void quantize_signed_log(const float *x, int64_t c0, int64_t len,
                         ClusterQuantized &q) {
  double least = 0;
  for (int64_t i = c0; i < c0 + len; ++i) {
    const double a = std::fabs(double(x[i]));
    if (a > 0 && (least == 0 || a < least))
      least = a;
  }
  const double log_floor = least > 0 ? std::log(least) : 0.0;
  auto compand = [&](float v) {
    const double t = 1.0 + std::log(std::fabs(double(v))) - log_floor;
    return v < 0 ? -t : t;
  };
  double lo = 0, hi = 0;
  bool any = false;
  for (int64_t i = c0; i < c0 + len; ++i)
    if (x[i] != 0) {
      const double t = compand(x[i]);
      lo = any ? std::min(lo, t) : t, hi = any ? std::max(hi, t) : t;
      any = true;
    }
  const int steps = kClusterLevels - 2;
  const double step = (hi - lo) / steps;
  float *table = q.centroids.data() + (c0 / kClusterChunk) * kClusterLevels;
  table[0] = 0.0f;
  for (int k = 1; k < kClusterLevels; ++k) {
    const double t = lo + step * (k - 1);
    // |t| < 1 cannot be the level of a nonzero value (the step is < 2:
    // floats span < 200 in ln), but it decodes below f, not across 0.
    const double a = std::exp(std::fabs(t) - 1.0 + log_floor);
    table[k] = float(t < 0 ? -a : a);
  }
  for (int64_t i = c0; i < c0 + len; ++i)
    q.codes[size_t(i)] =
        x[i] == 0 ? 0
        : step > 0
            ? uint8_t(1 +
                      std::clamp<long>(std::lround((compand(x[i]) - lo) / step),
                                       0, steps))
            : 1;
}

} // namespace

ClusterQuantized cluster_quantize(const float *x, int64_t n, Companding c,
                                  int lloyd_iterations, int threads) {
  ClusterQuantized q;
  q.n = n;
  q.codes.resize(size_t(n));
  const int64_t chunks = (n + kClusterChunk - 1) / kClusterChunk;
  q.centroids.resize(size_t(chunks * kClusterLevels));
  // Linear sorts each chunk (~45 s on one thread for GPT-2 124M's moments):
  // chunks are independent, split over threads.
  std::vector<std::pair<double, double>> worst(
      size_t(std::max<int64_t>(1, chunks)), {0.0, 0.0});
  for_chunks(
      chunks,
      [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) {
          const int64_t c0 = k * kClusterChunk;
          const int64_t len = std::min(kClusterChunk, n - c0);
          if (c == Companding::Linear)
            quantize_linear(x, c0, len, lloyd_iterations, q);
          else
            quantize_signed_log(x, c0, len, q);
          worst[size_t(k)] = chunk_errors(x, c0, len, q);
        }
      },
      1, std::max(1, threads));
  for (const auto &[absolute, relative] : worst) {
    q.max_error = std::max(q.max_error, absolute);
    q.max_relative_error = std::max(q.max_relative_error, relative);
  }
  return q;
}

void cluster_dequantize(const ClusterQuantized &q, float *out) {
  for (int64_t i = 0; i < q.n; ++i)
    out[i] = q.centroids[size_t(i / kClusterChunk) * kClusterLevels +
                         q.codes[size_t(i)]];
}

} // namespace autoddl::rt
