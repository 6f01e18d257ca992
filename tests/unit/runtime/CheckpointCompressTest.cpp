// BitSnap's encodings (backends/common/CheckpointCompress.h): the delta is
// lossless and holds only the changed elements; the cluster quantization's
// error is what it reports, and Lloyd's iterations lower it; companded
// (SignedLog), each element's relative error is bounded.
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

TEST(CheckpointCompress, ClusterQuantizationErrorIsReportedAndLloydLowersIt) {
  // Two chunks and a tail, values like Adam's second moment: positive over
  // decades (log-normal).
  const int64_t n = 2 * kClusterChunk + 777;
  std::mt19937 rng(7);
  std::lognormal_distribution<float> dist(-12.0f, 2.0f);
  const size_t len = static_cast<size_t>(n);
  std::vector<float> x(len), out(len);
  for (float &v : x)
    v = dist(rng);
  const ClusterQuantized q = cluster_quantize(x.data(), n, Companding::Linear);
  EXPECT_EQ(q.codes.size(), size_t(n));
  EXPECT_EQ(q.centroids.size(), size_t(3 * kClusterLevels));
  // One byte per element and 256 floats per chunk: close to 4x.
  EXPECT_GT(double(4 * n) / double(q.bytes()), 3.9);
  cluster_dequantize(q, out.data());
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    worst = std::max(worst, double(std::fabs(out[size_t(i)] - x[size_t(i)])));
  EXPECT_EQ(worst, q.max_error);
  // Lloyd's iterations lower the squared error of the quantile clusters
  // (each iteration never raises it); the tail's outliers gain most.
  auto squared_error = [&](const ClusterQuantized &c) {
    std::vector<float> back(len);
    cluster_dequantize(c, back.data());
    double e = 0;
    for (size_t i = 0; i < len; ++i)
      e += double(back[i] - x[i]) * double(back[i] - x[i]);
    return e;
  };
  // On threads (the checkpoint writer's), chunk by chunk the same result:
  // 3 chunks on 2 threads, one taking two.
  const ClusterQuantized threaded =
      cluster_quantize(x.data(), n, Companding::Linear, 32, 2);
  EXPECT_EQ(threaded.codes, q.codes);
  EXPECT_EQ(threaded.centroids, q.centroids);
  EXPECT_EQ(threaded.max_error, q.max_error);
  const ClusterQuantized plain =
      cluster_quantize(x.data(), n, Companding::Linear, 0);
  EXPECT_LT(squared_error(q), 0.5 * squared_error(plain));
  EXPECT_LT(q.max_error, plain.max_error);
  for (int64_t c = 0; c < 3; ++c) // each chunk's centroids ascend
    EXPECT_TRUE(std::is_sorted(q.centroids.begin() + c * kClusterLevels,
                               q.centroids.begin() + (c + 1) * kClusterLevels));
  // A constant chunk is exact.
  std::vector<float> c(100, 0.25f), back(100);
  const ClusterQuantized cq =
      cluster_quantize(c.data(), 100, Companding::Linear);
  cluster_dequantize(cq, back.data());
  EXPECT_EQ(back, c);
  EXPECT_EQ(cq.max_error, 0);
}

TEST(CheckpointCompress, SignedLogBoundsEachElementsRelativeError) {
  // A heavy-tailed second moment over 1e-20..1e-2: a power law from 1e-12
  // (P(v > x) ~ x^-0.3, capped at 1e-2), 5 % spread over 1e-20..1e-12, and
  // zeros (never-used embedding rows); a first moment of either sign over
  // 10 decades. Two chunks each.
  const int64_t n = 2 * kClusterChunk;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<float> v(static_cast<size_t>(n)), m(v.size()), back(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double tail = std::min(1e-12 * std::pow(u(rng), -1.0 / 0.3), 1e-2);
    v[i] = i % 97 == 0     ? 0.0f
           : u(rng) < 0.05 ? float(std::pow(10.0, -20.0 + 8.0 * u(rng)))
                           : float(tail);
    m[i] = float((i % 2 ? -1 : 1) * std::pow(10.0, -12.0 + 10.0 * u(rng)));
  }
  int64_t zeros_moved = 0;
  auto sqrt_error = [&](const ClusterQuantized &q) {
    cluster_dequantize(q, back.data());
    double worst = 0;
    zeros_moved = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] == 0)
        zeros_moved += back[i] != 0.0f;
      else
        worst =
            std::max(worst, std::fabs(std::sqrt(double(back[i]) / v[i]) - 1.0));
    return worst;
  };
  // 254 steps over 18 decades (41.4 in ln v): a value within 0.082 of its
  // level in ln v, 0.041 in ln sqrt(v): exp(0.041) - 1 = 4.2 %.
  const ClusterQuantized logq =
      cluster_quantize(v.data(), n, Companding::SignedLog);
  EXPECT_LT(sqrt_error(logq), 0.043);
  EXPECT_EQ(zeros_moved, 0); // zeros exact: no update out of nothing
  // The squared error of the values themselves spends its centroids on the
  // tail and lumps small values into centroids far above them.
  const ClusterQuantized linear =
      cluster_quantize(v.data(), n, Companding::Linear);
  EXPECT_GT(sqrt_error(linear), 5.0);
  // m: signs kept; 254 steps over 2 x 11 ln-units' span of each sign
  // (2 (1 + ln 1e10) = 48.1): within exp(0.095) - 1 = 10 % of each value.
  const ClusterQuantized mq =
      cluster_quantize(m.data(), n, Companding::SignedLog);
  cluster_dequantize(mq, back.data());
  double worst = 0;
  for (size_t i = 0; i < m.size(); ++i)
    worst = std::max(worst, std::fabs(double(back[i]) / double(m[i]) - 1.0));
  EXPECT_LT(worst, 0.1);
  EXPECT_NEAR(worst, mq.max_relative_error, 1e-12);
}
