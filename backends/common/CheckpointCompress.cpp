//===- CheckpointCompress.cpp - BitSnap's encodings of checkpoint tensors -===//
#include "backends/common/CheckpointCompress.h"

#include "backends/common/Parallel.h" // for_chunks

#include <algorithm>
#include <cmath>
#include <cstring>
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
/// Chunk c0..c0+len of x into q's codes and centroids (ascending) at the
/// chunk's place; returns the chunk's largest error. `sorted`: scratch.
double quantize_chunk(const float *x, int64_t c0, int64_t len,
                      int lloyd_iterations, std::vector<float> &sorted,
                      ClusterQuantized &q) {
  sorted.assign(x + c0, x + c0 + len);
  std::sort(sorted.begin(), sorted.end());
  // Start: bin k holds sorted[len*k/L, len*(k+1)/L), at least one value
  // (a chunk shorter than L repeats values over bins, and so centroids).
  std::vector<int64_t> begin(kClusterLevels + 1);
  for (int k = 0; k < kClusterLevels; ++k)
    begin[size_t(k)] = std::min(len - 1, len * k / kClusterLevels);
  begin[kClusterLevels] = len;
  std::vector<double> prefix(size_t(len) + 1, 0.0);
  for (int64_t i = 0; i < len; ++i)
    prefix[size_t(i) + 1] = prefix[size_t(i)] + double(sorted[size_t(i)]);
  float *cent = q.centroids.data() + (c0 / kClusterChunk) * kClusterLevels;
  auto means = [&] {
    for (int k = 0; k < kClusterLevels; ++k) {
      const int64_t b = begin[size_t(k)],
                    e = std::max(b + 1, begin[size_t(k) + 1]);
      if (e <= len && b < e) // an empty cluster keeps its centroid
        cent[k] =
            float((prefix[size_t(e)] - prefix[size_t(b)]) / double(e - b));
    }
  };
  means();
  // Lloyd's iterations in one dimension: each cluster is the values
  // nearer its centroid than its neighbours' (a range of the sorted
  // chunk, cut at the midpoints), its centroid their mean. Each lowers
  // the squared error or leaves it.
  for (int it = 0; it < lloyd_iterations; ++it) {
    for (int k = 1; k < kClusterLevels; ++k) {
      const float mid = 0.5f * (cent[k - 1] + cent[k]);
      begin[size_t(k)] =
          std::upper_bound(sorted.begin(), sorted.end(), mid) - sorted.begin();
    }
    means();
  }
  // Ascending (an empty cluster kept its centroid, which its neighbours'
  // may have passed): the codes' search needs the order.
  std::sort(cent, cent + kClusterLevels);
  double worst = 0;
  for (int64_t i = 0; i < len; ++i) {
    const float v = x[c0 + i];
    // The nearest centroid: the first >= v or the one before it.
    int k = int(std::lower_bound(cent, cent + kClusterLevels, v) - cent);
    if (k == kClusterLevels || (k > 0 && v - cent[k - 1] <= cent[k] - v))
      --k;
    q.codes[size_t(c0 + i)] = uint8_t(k);
    worst = std::max(worst, double(std::fabs(v - cent[k])));
  }
  return worst;
}
} // namespace

ClusterQuantized cluster_quantize(const float *x, int64_t n,
                                  int lloyd_iterations, int threads) {
  ClusterQuantized q;
  q.n = n;
  q.codes.resize(size_t(n));
  const int64_t chunks = (n + kClusterChunk - 1) / kClusterChunk;
  q.centroids.resize(size_t(chunks * kClusterLevels));
  // Sorting each chunk is most of the time (~45 s on one thread for GPT-2
  // 124M's moments): chunks are independent, split over threads.
  std::vector<double> worst(size_t(std::max<int64_t>(1, chunks)), 0.0);
  for_chunks(
      chunks,
      [&](int64_t begin, int64_t end) {
        std::vector<float> sorted;
        for (int64_t c = begin; c < end; ++c) {
          const int64_t c0 = c * kClusterChunk;
          worst[size_t(c)] =
              quantize_chunk(x, c0, std::min(kClusterChunk, n - c0),
                             lloyd_iterations, sorted, q);
        }
      },
      1, std::max(1, threads));
  q.max_error = *std::max_element(worst.begin(), worst.end());
  return q;
}

void cluster_dequantize(const ClusterQuantized &q, float *out) {
  for (int64_t i = 0; i < q.n; ++i)
    out[i] = q.centroids[size_t(i / kClusterChunk) * kClusterLevels +
                         q.codes[size_t(i)]];
}

} // namespace autoddl::rt
