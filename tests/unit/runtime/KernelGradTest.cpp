// Forward kernels against direct references, and every backward kernel against
// central finite differences (GradCheck.h).
#include "backends/cpu/kernels/Attention.h"
#include "backends/cpu/kernels/Conv.h"
#include "backends/cpu/kernels/CrossEntropy.h"
#include "backends/cpu/kernels/Elementwise.h"
#include "backends/cpu/kernels/Embedding.h"
#include "backends/cpu/kernels/Linear.h"
#include "backends/cpu/kernels/Norm.h"
#include "backends/cpu/kernels/Shape.h"
#include "backends/cpu/kernels/Softmax.h"
#include "backends/cpu/kernels/Sparse.h"
#include "tests/unit/runtime/GradCheck.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

using namespace autoddl::rt;
using namespace autoddl::test;

namespace {

void expectVecNear(const Vec &got, const std::vector<double> &want,
                   double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
}

} // namespace

TEST(Kernels, Embedding) {
  const int64_t N = 6, V = 5, C = 4;
  std::vector<int32_t> ids = {0, 3, 3, 4, 1, 3};
  Vec table = randn(V * C, 1), dtable;
  expectGradients(
      [&](Vec &o) {
        o.resize(N * C);
        embedding_forward(o.data(), ids.data(), table.data(), N, C, 0, V);
      },
      [&](const Vec &g) {
        embedding_backward(dtable.data(), g.data(), ids.data(), N, C, 0, V);
      },
      {{"table", &table, &dtable}});
  // Vocab split (S(0) table on 2 ranks): the two partial outputs sum to the
  // full lookup.
  Vec full(N * C), lo(N * C), hi(N * C);
  embedding_forward(full.data(), ids.data(), table.data(), N, C, 0, V);
  embedding_forward(lo.data(), ids.data(), table.data(), N, C, 0, 3);
  embedding_forward(hi.data(), ids.data(), table.data() + 3 * C, N, C, 3, 2);
  for (int64_t i = 0; i < N * C; ++i)
    ASSERT_EQ(lo[i] + hi[i], full[i]);
}

TEST(Kernels, PositionalAndRotary) {
  const int64_t B = 2, T = 3, H = 2, D = 4, C = H * D, P = 5;
  Vec x = randn(B * T * C, 2), table = randn(P * C, 3), dx, dtable;
  expectGradients(
      [&](Vec &o) {
        o.resize(x.size());
        positional_forward(o.data(), x.data(), table.data(), B, T, C, 1);
      },
      [&](const Vec &g) {
        positional_backward(dx.data(), dtable.data(), g.data(), B, T, C, 1);
      },
      {{"x", &x, &dx}, {"table", &table, &dtable}});
  // RoPE forward against the rotate_half formula at position t0 + t, for one
  // element pair.
  Vec out(x.size());
  rotary_forward(out.data(), x.data(), B, T, H, D, 10000.0, 2);
  const int64_t b = 1, t = 2, h = 1, i = 1;
  const double a = (2 + t) * std::pow(10000.0, -2.0 * i / D);
  const int64_t base = (b * T + t) * C + h * D;
  EXPECT_NEAR(out[base + i],
              x[base + i] * std::cos(a) - x[base + i + 2] * std::sin(a), 1e-5);
  EXPECT_NEAR(out[base + i + 2],
              x[base + i + 2] * std::cos(a) + x[base + i] * std::sin(a), 1e-5);
  expectGradients(
      [&](Vec &o) {
        o.resize(x.size());
        rotary_forward(o.data(), x.data(), B, T, H, D, 10000.0, 2);
      },
      [&](const Vec &g) {
        rotary_backward(dx.data(), g.data(), B, T, H, D, 10000.0, 2);
      },
      {{"x", &x, &dx}});
}

TEST(Kernels, LinearBothWeightLayoutsWithBias) {
  const int64_t N = 5, K = 4, O = 3;
  for (bool transposeWeight : {true, false}) {
    Vec x = randn(N * K, 4), w = randn(K * O, 5), bias = randn(O, 6), dx, dw,
        db;
    Vec out(N * O);
    linear_forward(out.data(), x.data(), w.data(), bias.data(), N, K, O,
                   transposeWeight);
    std::vector<double> want(N * O);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) {
        double s = bias[o];
        for (int64_t k = 0; k < K; ++k)
          s += double(x[n * K + k]) *
               (transposeWeight ? w[o * K + k] : w[k * O + o]);
        want[n * O + o] = s;
      }
    expectVecNear(out, want, 1e-5);
    expectGradients(
        [&](Vec &o) {
          o.resize(N * O);
          linear_forward(o.data(), x.data(), w.data(), bias.data(), N, K, O,
                         transposeWeight);
        },
        [&](const Vec &g) {
          linear_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(),
                          w.data(), N, K, O, transposeWeight);
        },
        {{"x", &x, &dx}, {"w", &w, &dw}, {"bias", &bias, &db}});
  }
}

TEST(Kernels, BatchedMatmulWithAndWithoutTransposeB) {
  const int64_t Bt = 2, M = 3, K = 4, N = 5;
  for (bool tb : {false, true}) {
    Vec a = randn(Bt * M * K, 7), b = randn(Bt * K * N, 8), da, db,
        out(Bt * M * N);
    matmul_forward(out.data(), a.data(), b.data(), Bt, M, K, N, tb);
    std::vector<double> want(out.size());
    for (int64_t i = 0; i < Bt; ++i)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += double(a[(i * M + m) * K + k]) *
                 (tb ? b[(i * N + n) * K + k] : b[(i * K + k) * N + n]);
          want[(i * M + m) * N + n] = s;
        }
    expectVecNear(out, want, 1e-5);
    expectGradients(
        [&](Vec &o) {
          o.resize(Bt * M * N);
          matmul_forward(o.data(), a.data(), b.data(), Bt, M, K, N, tb);
        },
        [&](const Vec &g) {
          matmul_backward(da.data(), db.data(), g.data(), a.data(), b.data(),
                          Bt, M, K, N, tb);
        },
        {{"a", &a, &da}, {"b", &b, &db}});
  }
}

TEST(Kernels, BiasAddAddMul) {
  const int64_t N = 4, O = 3;
  Vec x = randn(N * O, 9), b = randn(O, 10), y = randn(N * O, 11), dx, db, dy;
  expectGradients(
      [&](Vec &o) {
        o.resize(N * O);
        bias_add_forward(o.data(), x.data(), b.data(), N, O);
      },
      [&](const Vec &g) {
        bias_add_backward(dx.data(), db.data(), g.data(), N, O);
      },
      {{"x", &x, &dx}, {"b", &b, &db}});
  expectGradients(
      [&](Vec &o) {
        o.resize(N * O);
        add_forward(o.data(), x.data(), y.data(), N * O);
      },
      [&](const Vec &g) {
        add_backward(dx.data(), dy.data(), g.data(), N * O);
      },
      {{"a", &x, &dx}, {"b", &y, &dy}});
  expectGradients(
      [&](Vec &o) {
        o.resize(N * O);
        mul_forward(o.data(), x.data(), y.data(), N * O);
      },
      [&](const Vec &g) {
        mul_backward(dx.data(), dy.data(), g.data(), x.data(), y.data(), N * O);
      },
      {{"a", &x, &dx}, {"b", &y, &dy}});
}

TEST(Kernels, Activations) {
  const int64_t n = 40;
  Vec x = randn(n, 12, 1.5f), u = randn(n, 13), dx, du;
  for (float &v : x) // keep relu's kink farther than h from every input
    if (std::fabs(v) < 0.05f)
      v = 0.3f;
  Vec out(n);
  gelu_forward(out.data(), x.data(), n, false);
  EXPECT_NEAR(out[0], 0.5 * x[0] * (1 + std::erf(x[0] / std::sqrt(2.0))), 1e-6);
  gelu_forward(out.data(), x.data(), n, true);
  // tanh form differs from exact GELU by < 1e-3 (Hendrycks & Gimpel)
  EXPECT_NEAR(out[0], 0.5 * x[0] * (1 + std::erf(x[0] / std::sqrt(2.0))), 1e-3);
  for (bool tanhForm : {true, false})
    expectGradients(
        [&](Vec &o) {
          o.resize(n);
          gelu_forward(o.data(), x.data(), n, tanhForm);
        },
        [&](const Vec &g) {
          gelu_backward(dx.data(), x.data(), g.data(), n, tanhForm);
        },
        {{"x", &x, &dx}});
  // The activations of one input: their forward and backward.
  using Forward = void (*)(float *, const float *, int64_t);
  using Backward = void (*)(float *, const float *, const float *, int64_t);
  const std::pair<Forward, Backward> unary[] = {{relu_forward, relu_backward},
                                                {silu_forward, silu_backward}};
  for (const auto &fb : unary)
    expectGradients(
        [&](Vec &o) {
          o.resize(n);
          fb.first(o.data(), x.data(), n);
        },
        [&](const Vec &g) { fb.second(dx.data(), x.data(), g.data(), n); },
        {{"x", &x, &dx}});
  expectGradients(
      [&](Vec &o) {
        o.resize(n);
        swiglu_forward(o.data(), x.data(), u.data(), n);
      },
      [&](const Vec &g) {
        swiglu_backward(dx.data(), du.data(), x.data(), u.data(), g.data(), n);
      },
      {{"gate", &x, &dx}, {"up", &u, &du}});
}

TEST(Kernels, LayerNormAndRmsNorm) {
  const int64_t N = 4, C = 8;
  Vec x = randn(N * C, 14), gamma = randn(C, 15), beta = randn(C, 16), dx, dg,
      dbt;
  Vec mean(N), rstd(N), ones(C, 1.0f), out(N * C);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), ones.data(),
                    nullptr, N, C, 1e-5f);
  double
      s = 0,
      ss = 0; // with gamma = 1 and no beta, each row has mean 0 and variance ~1
  for (int64_t c = 0; c < C; ++c) {
    s += out[c];
    ss += double(out[c]) * out[c];
  }
  EXPECT_NEAR(s / C, 0.0, 1e-6);
  EXPECT_NEAR(ss / C, 1.0, 1e-3); // eps = 1e-5 against a variance ~1
  expectGradients(
      [&](Vec &o) {
        o.resize(N * C);
        layernorm_forward(o.data(), mean.data(), rstd.data(), x.data(),
                          gamma.data(), beta.data(), N, C, 1e-5f);
      },
      [&](const Vec &g) {
        layernorm_backward(dx.data(), dg.data(), dbt.data(), g.data(), x.data(),
                           gamma.data(), mean.data(), rstd.data(), N, C);
      },
      {{"x", &x, &dx}, {"gamma", &gamma, &dg}, {"beta", &beta, &dbt}});
  rmsnorm_forward(out.data(), rstd.data(), x.data(), ones.data(), N, C, 1e-6f);
  ss = 0; // each row has mean square ~1
  for (int64_t c = 0; c < C; ++c)
    ss += double(out[C + c]) * out[C + c];
  EXPECT_NEAR(ss / C, 1.0, 1e-4);
  expectGradients(
      [&](Vec &o) {
        o.resize(N * C);
        rmsnorm_forward(o.data(), rstd.data(), x.data(), gamma.data(), N, C,
                        1e-6f);
      },
      [&](const Vec &g) {
        rmsnorm_backward(dx.data(), dg.data(), g.data(), x.data(), gamma.data(),
                         rstd.data(), N, C);
      },
      {{"x", &x, &dx}, {"gamma", &gamma, &dg}});
}

TEST(Kernels, SoftmaxOverAMiddleAxis) {
  const int64_t outer = 2, L = 5, inner = 3;
  Vec x = randn(outer * L * inner, 17), dx, y(x.size());
  softmax_forward(y.data(), x.data(), outer, L, inner);
  double s = 0;
  for (int64_t l = 0; l < L; ++l)
    s += y[l * inner + 1];
  EXPECT_NEAR(s, 1.0, 1e-6);
  expectGradients(
      [&](Vec &o) {
        o.resize(x.size());
        softmax_forward(o.data(), x.data(), outer, L, inner);
      },
      [&](const Vec &g) {
        Vec yy(x.size());
        softmax_forward(yy.data(), x.data(), outer, L, inner);
        softmax_backward(dx.data(), yy.data(), g.data(), outer, L, inner);
      },
      {{"x", &x, &dx}});
}

namespace {

/// Direct attention for one output element: softmax over keys of q.k/sqrt(D),
/// weighted v.
double attentionReference(const Vec &q, const Vec &k, const Vec &v, int64_t T,
                          int64_t H, int64_t G, int64_t D, bool causal,
                          int64_t b, int64_t t, int64_t h, int64_t d) {
  const int64_t g = h / (H / G);
  std::vector<double> s(T);
  double mx = -1e300, sum = 0, outv = 0;
  const int64_t n = causal ? t + 1 : T;
  for (int64_t j = 0; j < n; ++j) {
    double dot = 0;
    for (int64_t e = 0; e < D; ++e)
      dot += double(q[(b * T + t) * H * D + h * D + e]) *
             k[(b * T + j) * G * D + g * D + e];
    s[j] = dot / std::sqrt(double(D));
    mx = std::max(mx, s[j]);
  }
  for (int64_t j = 0; j < n; ++j)
    sum += std::exp(s[j] - mx);
  for (int64_t j = 0; j < n; ++j)
    outv += std::exp(s[j] - mx) / sum * v[(b * T + j) * G * D + g * D + d];
  return outv;
}

} // namespace

TEST(Kernels, AttentionCausalAndNotWithGroupedKvHeads) {
  const int64_t B = 2, T = 4, H = 4, G = 2, D = 3;
  for (bool causal : {true, false}) {
    Vec q = randn(B * T * H * D, 18), k = randn(B * T * G * D, 19),
        v = randn(B * T * G * D, 20), dq, dk, dv, att(B * H * T * T);
    Vec out(B * T * H * D);
    auto views = [&] {
      return AttentionViews{q.data(), k.data(), v.data(), H * D, G * D};
    };
    attention_forward(out.data(), att.data(), views(), B, T, H, G, D, causal);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
          ASSERT_NEAR(
              out[(b * T + t) * H * D + h * D + 1],
              attentionReference(q, k, v, T, H, G, D, causal, b, t, h, 1),
              1e-5);
    expectGradients(
        [&](Vec &o) {
          o.resize(B * T * H * D);
          attention_forward(o.data(), att.data(), views(), B, T, H, G, D,
                            causal);
        },
        [&](const Vec &g) {
          attention_forward(out.data(), att.data(), views(), B, T, H, G, D,
                            causal);
          attention_backward({dq.data(), dk.data(), dv.data(), H * D, G * D},
                             g.data(), att.data(), views(), B, T, H, G, D);
        },
        {{"q", &q, &dq}, {"k", &k, &dk}, {"v", &v, &dv}});
  }
}

TEST(Kernels, AttentionFusedQkvMatchesSeparate) {
  const int64_t B = 1, T = 5, H = 2, G = 1, D = 4, W = (H + 2 * G) * D;
  Vec qkv = randn(B * T * W, 21), dqkv, att(B * H * T * T), out(B * T * H * D);
  Vec q(B * T * H * D), k(B * T * G * D), v(B * T * G * D);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t c = 0; c < W; ++c) {
      const float val = qkv[r * W + c];
      if (c < H * D)
        q[r * H * D + c] = val;
      else if (c < (H + G) * D)
        k[r * G * D + c - H * D] = val;
      else
        v[r * G * D + c - (H + G) * D] = val;
    }
  attention_forward(out.data(), att.data(),
                    attention_qkv_views(qkv.data(), H, G, D), B, T, H, G, D,
                    true);
  for (int64_t t = 0; t < T; ++t)
    ASSERT_NEAR(out[t * H * D + D + 2],
                attentionReference(q, k, v, T, H, G, D, true, 0, t, 1, 2),
                1e-5);
  expectGradients(
      [&](Vec &o) {
        o.resize(B * T * H * D);
        attention_forward(o.data(), att.data(),
                          attention_qkv_views(qkv.data(), H, G, D), B, T, H, G,
                          D, true);
      },
      [&](const Vec &g) {
        attention_forward(out.data(), att.data(),
                          attention_qkv_views(qkv.data(), H, G, D), B, T, H, G,
                          D, true);
        attention_backward(attention_qkv_grad_views(dqkv.data(), H, G, D),
                           g.data(), att.data(),
                           attention_qkv_views(qkv.data(), H, G, D), B, T, H, G,
                           D);
      },
      {{"qkv", &qkv, &dqkv}});
}

TEST(Kernels, CrossEntropyAndItsVocabParallelForm) {
  const int64_t N = 4, V = 6;
  Vec logits = randn(N * V, 22, 2.0f), dlogits, losses(N), lse(N);
  // Row 2's target is negative: outside the loss (loss 0, no gradient).
  std::vector<int32_t> targets = {0, 5, -1, 3};
  crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(),
                       N, V);
  double sumExp = 0;
  for (int64_t v = 0; v < V; ++v)
    sumExp += std::exp(double(logits[V + v]));
  EXPECT_NEAR(losses[1], std::log(sumExp) - logits[V + 5], 1e-5);
  EXPECT_EQ(losses[2], 0.0f);
  // The mean loss's gradient: grad_scale = 1/N.
  expectGradients(
      [&](Vec &o) {
        o.assign(1, 0.0f);
        Vec l(N), s(N);
        crossentropy_forward(l.data(), s.data(), logits.data(), targets.data(),
                             N, V);
        for (float x : l)
          o[0] += x / N;
      },
      [&](const Vec &g) {
        crossentropy_forward(losses.data(), lse.data(), logits.data(),
                             targets.data(), N, V);
        crossentropy_backward(dlogits.data(), logits.data(), lse.data(),
                              targets.data(), N, V, g[0] / N);
      },
      {{"logits", &logits, &dlogits}});
  // Vocab split over 2 "ranks" (columns [0,2) and [2,6)); the all-reduces done
  // by hand.
  const int64_t split = 2;
  Vec shard[2];
  for (int r = 0; r < 2; ++r) {
    const int64_t v0 = r ? split : 0, Vl = r ? V - split : split;
    shard[r].resize(N * Vl);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < Vl; ++v)
        shard[r][n * Vl + v] = logits[n * V + v0 + v];
  }
  Vec mx0(N), mx1(N), gmax(N), s0(2 * N), s1(2 * N), sums(2 * N), vpLoss(N);
  crossentropy_vocab_parallel_max(mx0.data(), shard[0].data(), N, split);
  crossentropy_vocab_parallel_max(mx1.data(), shard[1].data(), N, V - split);
  for (int64_t n = 0; n < N; ++n)
    gmax[n] = std::max(mx0[n], mx1[n]);
  crossentropy_vocab_parallel_sums(s0.data(), shard[0].data(), targets.data(),
                                   gmax.data(), N, split, 0);
  crossentropy_vocab_parallel_sums(s1.data(), shard[1].data(), targets.data(),
                                   gmax.data(), N, V - split, split);
  for (int64_t i = 0; i < 2 * N; ++i)
    sums[i] = s0[i] + s1[i];
  crossentropy_vocab_parallel_loss(vpLoss.data(), gmax.data(), sums.data(),
                                   targets.data(), N);
  for (int64_t n = 0; n < N; ++n)
    EXPECT_NEAR(vpLoss[n], losses[n], 1e-5);
  Vec full(N * V, 0.0f), d1(N * (V - split), 0.0f);
  crossentropy_backward(full.data(), logits.data(), lse.data(), targets.data(),
                        N, V, 0.5f);
  crossentropy_vocab_parallel_backward(d1.data(), shard[1].data(),
                                       targets.data(), gmax.data(), sums.data(),
                                       N, V - split, split, 0.5f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = 0; v < V - split; ++v)
      ASSERT_NEAR(d1[n * (V - split) + v], full[n * V + split + v], 1e-6);
  for (int64_t v = 0; v < V; ++v) // the ignored row: untouched
    EXPECT_EQ(full[2 * V + v], 0.0f);
  EXPECT_EQ(vpLoss[2], 0.0f);
  // A padded shard: rank 1's columns stored ld = Vl + 2 apart, the padding
  // holding a huge logit (and a sentinel gradient) the kernels must skip.
  const int64_t Vl = V - split, ld = Vl + 2;
  Vec padded(N * ld, 1e4f), dpad(N * ld, 7.0f), mxp(N), sp(2 * N);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = 0; v < Vl; ++v) {
      padded[n * ld + v] = shard[1][n * Vl + v];
      dpad[n * ld + v] = 0.0f;
    }
  crossentropy_vocab_parallel_max(mxp.data(), padded.data(), N, Vl, ld);
  crossentropy_vocab_parallel_sums(sp.data(), padded.data(), targets.data(),
                                   gmax.data(), N, Vl, split, ld);
  crossentropy_vocab_parallel_backward(dpad.data(), padded.data(),
                                       targets.data(), gmax.data(), sums.data(),
                                       N, Vl, split, 0.5f, ld);
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_EQ(mxp[n], mx1[n]);
    EXPECT_EQ(sp[n], s1[n]);
    EXPECT_EQ(sp[N + n], s1[N + n]);
    for (int64_t v = 0; v < ld; ++v)
      ASSERT_EQ(dpad[n * ld + v], v < Vl ? d1[n * Vl + v] : 7.0f);
  }
}

TEST(Kernels, SquaredErrorAgainstOneHot) {
  const int64_t N = 4, C = 5;
  Vec scores = randn(N * C, 23), dscores, losses(N);
  std::vector<int32_t> targets = {0, 4, -1, 2}; // row 2 outside the loss
  squared_error_forward(losses.data(), scores.data(), targets.data(), N, C);
  // F.mse_loss(scores, one_hot(targets)) over the rows inside, in fp64: the
  // mean of the row losses over those rows.
  double mse = 0, mean = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C && targets[n] >= 0; ++c) {
      const double d = double(scores[n * C + c]) - (c == targets[n]);
      mse += d * d / double(3 * C);
    }
  for (float l : losses)
    mean += l / 3.0;
  EXPECT_NEAR(mean, mse, 1e-6);
  EXPECT_EQ(losses[2], 0.0f);
  // Zero scores: every row's loss is exactly 1/C (the e2e's first loss).
  Vec zeros(N * C, 0.0f);
  squared_error_forward(losses.data(), zeros.data(), targets.data(), N, C);
  EXPECT_EQ(losses[0], 1.0f / C);
  expectGradients(
      [&](Vec &o) {
        o.assign(1, 0.0f);
        Vec l(N);
        squared_error_forward(l.data(), scores.data(), targets.data(), N, C);
        for (float x : l)
          o[0] += x / 3;
      },
      [&](const Vec &g) {
        squared_error_backward(dscores.data(), scores.data(), targets.data(), N,
                               C, g[0] / 3);
      },
      {{"scores", &scores, &dscores}});
}

TEST(Kernels, Conv2dAndPool2d) {
  const Conv2dShape s{2, 3, 5, 5, 4,
                      3, 3, 2, 1}; // B Cin H W Cout kh kw stride padding
  ASSERT_EQ(s.Ho(), 3);            // (5 + 2 - 3) / 2 + 1
  Vec x = randn(s.B * s.Cin * s.H * s.W, 23), w = randn(s.Cout * s.Cin * 9, 24),
      bias = randn(s.Cout, 25), dx, dw, db, out(s.B * s.Cout * 9);
  conv2d_forward(out.data(), x.data(), w.data(), bias.data(), s);
  { // output (b=1, co=2, oh=0, ow=2): window rows -1..1, cols 3..5 (padding
    // zeros outside)
    double want = bias[2];
    for (int64_t c = 0; c < s.Cin; ++c)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          const int64_t ih = -1 + i, iw = 3 + j;
          if (ih >= 0 && ih < 5 && iw < 5)
            want += double(x[((1 * s.Cin + c) * 5 + ih) * 5 + iw]) *
                    w[((2 * s.Cin + c) * 3 + i) * 3 + j];
        }
    EXPECT_NEAR(out[(1 * s.Cout + 2) * 9 + 2], want, 1e-5);
  }
  expectGradients(
      [&](Vec &o) {
        o.resize(s.B * s.Cout * 9);
        conv2d_forward(o.data(), x.data(), w.data(), bias.data(), s);
      },
      [&](const Vec &g) {
        conv2d_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(),
                        w.data(), s);
      },
      {{"x", &x, &dx}, {"w", &w, &dw}, {"bias", &bias, &db}});
  // Pooling: distinct values 0.1 apart, so no max changes under a perturbation
  // of h = 1e-2.
  const int64_t N = 2, H = 4, W = 4;
  Vec p(N * H * W), dp;
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = 0.1f * float((i * 7) % p.size());
  for (bool isMax : {true, false})
    expectGradients(
        [&](Vec &o) {
          o.resize(N * 4);
          pool2d_forward(o.data(), p.data(), N, H, W, 2, 2, isMax);
        },
        [&](const Vec &g) {
          pool2d_backward(dp.data(), p.data(), g.data(), N, H, W, 2, 2, isMax);
        },
        {{"x", &p, &dp}});
  Vec o(N * 4);
  pool2d_forward(o.data(), p.data(), N, H, W, 2, 2, false);
  EXPECT_NEAR(o[0], (p[0] + p[1] + p[4] + p[5]) / 4, 1e-6);
}

TEST(Kernels, Transpose) {
  const std::vector<int64_t> shape = {2, 3, 4}, perm = {2, 0, 1};
  Vec x = randn(24, 26), dx, out(24);
  transpose_forward(out.data(), x.data(), shape, perm);
  // out has shape [4,2,3]; out[k][i][j] = x[i][j][k]
  EXPECT_EQ(out[(3 * 2 + 1) * 3 + 2], x[(1 * 3 + 2) * 4 + 3]);
  expectGradients(
      [&](Vec &o) {
        o.resize(24);
        transpose_forward(o.data(), x.data(), shape, perm);
      },
      [&](const Vec &g) {
        transpose_backward(dx.data(), g.data(), shape, perm);
      },
      {{"x", &x, &dx}});
}

TEST(Kernels, SpmmAndSddmm) {
  Csr a; // 3 x 4 with a duplicate entry in row 2
  a.rows = 3;
  a.cols = 4;
  a.rowPtr = {0, 2, 3, 6};
  a.colIdx = {0, 3, 1, 2, 0, 2};
  a.values = randn(6, 27);
  const int64_t F = 3;
  Vec x = randn(4 * F, 28), dx, dvals;
  expectGradients(
      [&](Vec &o) {
        o.resize(3 * F);
        spmm_forward(o.data(), a, x.data(), F);
      },
      [&](const Vec &g) {
        spmm_backward(dx.data(), dvals.data(), a, g.data(), x.data(), F);
      },
      {{"x", &x, &dx}, {"values", &a.values, &dvals}});
  Vec xs = randn(3 * F, 29), ys = randn(4 * F, 30), dxs, dys, out(6);
  sddmm_forward(out.data(), a, xs.data(), ys.data(), F);
  EXPECT_NEAR(out[1],
              xs[0] * ys[3 * F] + xs[1] * ys[3 * F + 1] + xs[2] * ys[3 * F + 2],
              1e-6);
  expectGradients(
      [&](Vec &o) {
        o.resize(6);
        sddmm_forward(o.data(), a, xs.data(), ys.data(), F);
      },
      [&](const Vec &g) {
        sddmm_backward(dxs.data(), dys.data(), a, g.data(), xs.data(),
                       ys.data(), F);
      },
      {{"x", &xs, &dxs}, {"y", &ys, &dys}});
}

TEST(Kernels, EdgeSoftmaxAndSpmmWithValues) {
  Csr a; // 4 x 4: rows of 2, 1, 0 (empty) and 3 stored entries
  a.rows = a.cols = 4;
  a.rowPtr = {0, 2, 3, 3, 6};
  a.colIdx = {0, 3, 1, 0, 2, 3};
  const float scale = 0.5f;
  Vec scores = randn(6, 31), dscores;
  // Each non-empty row of the result sums to 1; the one-entry row is 1.
  Vec att(6);
  edge_softmax_forward(att.data(), a, scores.data(), scale);
  EXPECT_NEAR(att[0] + att[1], 1.0, 1e-6);
  EXPECT_NEAR(att[2], 1.0, 1e-6);
  EXPECT_NEAR(att[3] + att[4] + att[5], 1.0, 1e-6);
  EXPECT_NEAR(att[0] / att[1], std::exp(scale * (scores[0] - scores[1])), 1e-5);
  expectGradients(
      [&](Vec &o) {
        o.resize(6);
        edge_softmax_forward(o.data(), a, scores.data(), scale);
      },
      [&](const Vec &g) {
        Vec out(6);
        edge_softmax_forward(out.data(), a, scores.data(), scale);
        edge_softmax_backward(dscores.data(), a, out.data(), g.data(), scale);
      },
      {{"scores", &scores, &dscores}});
  // spmm with activation values equals spmm on a CSR holding those values,
  // and its backward gives both gradients.
  const int64_t F = 3;
  Vec vals = randn(6, 32), x = randn(4 * F, 33), dvals, dx;
  Csr withValues = a;
  withValues.values = vals;
  Vec want(4 * F), got(4 * F, 7.0f);
  spmm_forward(want.data(), withValues, x.data(), F);
  spmm_values_forward(got.data(), a, vals.data(), x.data(), F);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  expectGradients(
      [&](Vec &o) {
        o.resize(4 * F);
        spmm_values_forward(o.data(), a, vals.data(), x.data(), F);
      },
      [&](const Vec &g) {
        spmm_values_backward(dx.data(), dvals.data(), a, vals.data(), g.data(),
                             x.data(), F);
      },
      {{"x", &x, &dx}, {"values", &vals, &dvals}});
  // sage's mean: spmm_values with 1 / (the row's entries) as the values, an
  // empty row 0 (a's own values, here none, are not used), and its gradient.
  const Vec means = {0.5f, 0.5f, 1.0f, 1.0f / 3, 1.0f / 3, 1.0f / 3};
  spmm_values_forward(want.data(), a, means.data(), x.data(), F);
  spmm_mean_forward(got.data(), a, x.data(), F);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  Vec dxm;
  expectGradients(
      [&](Vec &o) {
        o.resize(4 * F);
        spmm_mean_forward(o.data(), a, x.data(), F);
      },
      [&](const Vec &g) { spmm_mean_backward(dxm.data(), a, g.data(), F); },
      {{"x", &x, &dxm}});
}
