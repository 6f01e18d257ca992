//===- CheckpointCompress.cpp - BitSnap's encodings of checkpoint tensors -===//
#include "backends/common/CheckpointCompress.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

ClusterQuantized cluster_quantize(const float *x, int64_t n) {
  ClusterQuantized q;
  q.n = n;
  q.codes.resize(size_t(n));
  std::vector<float> sorted;
  for (int64_t c0 = 0; c0 < n; c0 += kClusterChunk) {
    const int64_t len = std::min(kClusterChunk, n - c0);
    sorted.assign(x + c0, x + c0 + len);
    std::sort(sorted.begin(), sorted.end());
    // Bin k holds sorted[len*k/L, len*(k+1)/L), at least one value (a chunk
    // shorter than L repeats values over bins, and so centroids).
    const size_t first = q.centroids.size();
    for (int k = 0; k < kClusterLevels; ++k) {
      const int64_t b = len * k / kClusterLevels;
      const int64_t e = std::max(b + 1, len * (k + 1) / kClusterLevels);
      double sum = 0;
      for (int64_t i = b; i < e; ++i)
        sum += sorted[size_t(i)];
      q.centroids.push_back(float(sum / double(e - b)));
    }
    const float *cent = q.centroids.data() + first;
    for (int64_t i = 0; i < len; ++i) {
      const float v = x[c0 + i];
      // The nearest centroid: the first >= v or the one before it.
      const float *hi = std::lower_bound(cent, cent + kClusterLevels, v);
      int k = int(hi - cent);
      if (k == kClusterLevels || (k > 0 && v - cent[k - 1] <= cent[k] - v))
        --k;
      q.codes[size_t(c0 + i)] = uint8_t(k);
      q.max_error = std::max(q.max_error, double(std::fabs(v - cent[k])));
    }
  }
  return q;
}

void cluster_dequantize(const ClusterQuantized &q, float *out) {
  for (int64_t i = 0; i < q.n; ++i)
    out[i] = q.centroids[size_t(i / kClusterChunk) * kClusterLevels +
                         q.codes[size_t(i)]];
}

} // namespace autoddl::rt
