// BitSnap's encodings (backends/common/CheckpointCompress.h): the delta is
// lossless and holds only the changed elements; the cluster quantization's
// error is within its reported bound, which the bins' widths set.
#include "backends/common/CheckpointCompress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

using namespace autoddl::rt;

TEST(CheckpointCompress, DeltaIsBitwiseAndKeepsOnlyChangedElements) {
  const int64_t n = 1003; // not a multiple of 8: the mask's last byte
  const size_t len = static_cast<size_t>(n);
  std::vector<float> base(len), value(len), out(len);
  for (int64_t i = 0; i < n; ++i)
    base[size_t(i)] = value[size_t(i)] = 0.001f * float(i) - 0.3f;
  // Every 10th element changes; -0 against +0 is a change (other bits).
  for (int64_t i = 0; i < n; i += 10)
    value[size_t(i)] = std::nextafter(value[size_t(i)], 1.0f);
  base[7] = 0.0f;
  value[7] = -0.0f;
  const BitmaskDelta d = delta_encode(base.data(), value.data(), n);
  EXPECT_EQ(d.changed.size(), size_t(101 + 1)); // 0, 10, ..., 1000 and 7
  // (n + 7) / 8 mask bytes and 4 bytes per changed element.
  EXPECT_EQ(d.bytes(), (n + 7) / 8 + 4 * 102);
  delta_decode(d, base.data(), out.data());
  EXPECT_EQ(std::memcmp(out.data(), value.data(), size_t(n) * 4), 0);
  // Nothing changed: the mask alone, 1/32 of the tensor.
  EXPECT_TRUE(delta_encode(base.data(), base.data(), n).changed.empty());
}

TEST(CheckpointCompress, ClusterQuantizationErrorWithinItsBound) {
  // Two chunks and a tail, values like Adam's second moment: positive over
  // decades (log-normal).
  const int64_t n = 2 * kClusterChunk + 777;
  std::mt19937 rng(7);
  std::lognormal_distribution<float> dist(-12.0f, 2.0f);
  const size_t len = static_cast<size_t>(n);
  std::vector<float> x(len), out(len);
  for (float &v : x)
    v = dist(rng);
  const ClusterQuantized q = cluster_quantize(x.data(), n);
  EXPECT_EQ(q.codes.size(), size_t(n));
  EXPECT_EQ(q.centroids.size(), size_t(3 * kClusterLevels));
  // One byte per element and 256 floats per chunk: close to 4x.
  EXPECT_GT(double(4 * n) / double(q.bytes()), 3.9);
  cluster_dequantize(q, out.data());
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    worst = std::max(worst, double(std::fabs(out[size_t(i)] - x[size_t(i)])));
  EXPECT_EQ(worst, q.max_error);
  // The bound: no error exceeds the widest bin of its chunk (its sorted
  // values split 256 ways), here the top bin of the log-normal's tail.
  std::vector<float> chunk(x.begin(), x.begin() + kClusterChunk);
  std::sort(chunk.begin(), chunk.end());
  double widest = 0;
  for (int k = 0; k < kClusterLevels; ++k) {
    const int64_t b = kClusterChunk * k / kClusterLevels,
                  e = kClusterChunk * (k + 1) / kClusterLevels;
    widest = std::max(widest, double(chunk[size_t(e - 1)] - chunk[size_t(b)]));
  }
  for (int64_t i = 0; i < kClusterChunk; ++i)
    EXPECT_LE(std::fabs(out[size_t(i)] - x[size_t(i)]), widest);
  // A constant chunk is exact.
  std::vector<float> c(100, 0.25f), back(100);
  const ClusterQuantized cq = cluster_quantize(c.data(), 100);
  cluster_dequantize(cq, back.data());
  EXPECT_EQ(back, c);
  EXPECT_EQ(cq.max_error, 0);
}
