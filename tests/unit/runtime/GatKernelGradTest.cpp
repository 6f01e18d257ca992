// GATConv's CPU kernels (backends/cpu/kernels/GatAttention.h) and elu: the
// forward against a direct computation of PyG GATConv's formula, every
// backward against central finite differences (GradCheck.h).
#include "backends/cpu/kernels/Elementwise.h"
#include "backends/cpu/kernels/GatAttention.h"
#include "tests/unit/runtime/GradCheck.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace autoddl::rt;
using namespace autoddl::test;

TEST(Kernels, Elu) {
  Vec x = randn(16, 41), dx, out(16);
  elu_forward(out.data(), x.data(), 16);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_FLOAT_EQ(out[i], x[i] > 0 ? x[i] : std::expm1(x[i])) << i;
  expectGradients(
      [&](Vec &o) {
        o.resize(16);
        elu_forward(o.data(), x.data(), 16);
      },
      [&](const Vec &g) { elu_backward(dx.data(), x.data(), g.data(), 16); },
      {{"x", &x, &dx}});
}

TEST(Kernels, HeadDot) {
  const int64_t N = 3, H = 2, C = 3;
  Vec x = randn(N * H * C, 42), att = randn(H * C, 43), dx, datt, s(N * H);
  head_dot_forward(s.data(), x.data(), att.data(), N, H, C);
  // node 2, head 1: x[2, 3:6] . att[1, :]
  EXPECT_NEAR(s[2 * H + 1], x[15] * att[3] + x[16] * att[4] + x[17] * att[5],
              1e-6);
  expectGradients(
      [&](Vec &o) {
        o.resize(N * H);
        head_dot_forward(o.data(), x.data(), att.data(), N, H, C);
      },
      [&](const Vec &g) {
        head_dot_backward(dx.data(), datt.data(), g.data(), x.data(),
                          att.data(), N, H, C);
      },
      {{"x", &x, &dx}, {"att", &att, &datt}});
}

TEST(Kernels, GatAggregate) {
  Csr a; // 4 destinations x 5 sources: rows of 2, 1, 0 (empty) and 3 entries
  a.rows = 4;
  a.cols = 5;
  a.rowPtr = {0, 2, 3, 3, 6};
  a.colIdx = {0, 3, 1, 0, 2, 4};
  a.values.assign(6, 1.0f); // the pattern's own values are not used
  const int64_t H = 2, C = 3, F = H * C;
  const float slope = 0.2f;
  Vec sDst = randn(4 * H, 44), sSrc = randn(5 * H, 45), x = randn(5 * F, 46);
  Vec out(4 * F, 7.0f);
  gat_aggregate_forward(out.data(), a, sDst.data(), sSrc.data(), x.data(), H, C,
                        slope);
  // Row 3, head 1 by GATConv's formula: softmax over sources 0, 2, 4 of
  // LeakyReLU(s_src[j] + s_dst[3]), then the sum of x[j, head 1].
  double e[3], sum = 0;
  const int src[3] = {0, 2, 4};
  for (int k = 0; k < 3; ++k) {
    const double v = sSrc[src[k] * H + 1] + sDst[3 * H + 1];
    e[k] = std::exp(v > 0 ? v : slope * v);
    sum += e[k];
  }
  for (int64_t c = 0; c < C; ++c) {
    double want = 0;
    for (int k = 0; k < 3; ++k)
      want += e[k] / sum * x[src[k] * F + C + c];
    EXPECT_NEAR(out[3 * F + C + c], want, 1e-5) << c;
  }
  for (int64_t f = 0; f < F; ++f) // one entry: weight 1; empty row: 0
    EXPECT_NEAR(out[1 * F + f], x[1 * F + f], 1e-6) << f;
  for (int64_t f = 0; f < F; ++f)
    EXPECT_EQ(out[2 * F + f], 0.0f) << f;
  Vec dDst, dSrc, dx;
  expectGradients(
      [&](Vec &o) {
        o.resize(4 * F);
        gat_aggregate_forward(o.data(), a, sDst.data(), sSrc.data(), x.data(),
                              H, C, slope);
      },
      [&](const Vec &g) {
        gat_aggregate_backward(dDst.data(), dSrc.data(), dx.data(), a,
                               sDst.data(), sSrc.data(), x.data(), g.data(), H,
                               C, slope);
      },
      {{"s_dst", &sDst, &dDst}, {"s_src", &sSrc, &dSrc}, {"x", &x, &dx}});
}
