// K-FAC on the CPU (backends/cpu/kfac, backends/common/KfacRules.h) against
// fp64 references (KfacReference.h) on fresh random inputs (the seed is
// printed; AUTODDL_KFAC_SEED repeats a run). Bounds, from the fp32 arithmetic:
// a sum of S products in fp32 is within ~S * 2^-24 relative (1e-5 here, S <=
// 100); an fp32 Cholesky inverse of a matrix of condition number kappa is
// within ~kappa * d * 2^-24 (the test matrices have kappa < 50 and d <= 45:
// 1e-4); preconditioning compounds two such inverses and two GEMMs (2e-4).
#include "backends/cpu/kfac/Kfac.h"
#include "tests/unit/runtime/KfacReference.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>

using namespace autoddl::rt;
using namespace kfacref;

namespace {

unsigned seed_for(const char *test) {
  static const unsigned base = [] {
    const char *e = std::getenv("AUTODDL_KFAC_SEED");
    const unsigned s =
        e ? unsigned(std::strtoul(e, nullptr, 10)) : std::random_device{}();
    std::printf("KfacTest seed %u (AUTODDL_KFAC_SEED=%u repeats)\n", s, s);
    return s;
  }();
  unsigned h = base;
  for (const char *c = test; *c; ++c)
    h = h * 31u + unsigned(*c);
  return h;
}

/// A factor XX^T/S of S random rows of width d (condition number < 50 after
/// the damping the tests add when S >= d; rank S when S < d).
std::vector<float> random_factor(std::mt19937 &rng, int64_t S, int64_t d) {
  const auto X = random_floats(rng, S * d);
  std::vector<float> F(size_t(d * d), 0.0f);
  kfac_accumulate(F.data(), X.data(), S, d, 1.0f / float(S));
  return F;
}

/// A layer with random factors, refreshed: its inverses are in use.
KfacLayer refreshed_layer(std::mt19937 &rng, int64_t in, int64_t out,
                          const KfacConfig &c, KfacStats &stats) {
  KfacLayer l(in, out);
  const auto X = random_floats(rng, 2 * in * 60, 1.0f);
  const auto dY = random_floats(rng, 2 * out * 60, 0.01f);
  kfac_accumulate(l.A.data(), X.data(), 2 * in, in, 1.0f / float(2 * in));
  kfac_accumulate(l.G.data(), dY.data(), 2 * out, out, 1.0f / float(2 * out));
  kfac_refresh(l, c, stats);
  return l;
}

} // namespace

TEST(Kfac, FactorsAreTheMeanOuterProductOverMicroBatches) {
  std::mt19937 rng(seed_for("factors"));
  const int64_t S = 37, d = 45; // odd sizes; two micro-batches
  const auto X1 = random_floats(rng, S * d), X2 = random_floats(rng, S * d);
  std::vector<float> F(size_t(d * d), 0.0f);
  const KfacScales sc = kfac_factor_scales(2 * S, 1.0);
  kfac_accumulate(F.data(), X1.data(), S, d, sc.a);
  kfac_accumulate(F.data(), X2.data(), S, d, sc.a);
  Mat want = gram(X1, S, d, 1.0 / (2 * S));
  const Mat w2 = gram(X2, S, d, 1.0 / (2 * S));
  for (size_t i = 0; i < want.size(); ++i)
    want[i] += w2[i];
  EXPECT_LT(rel_error(F, want), 1e-5);
  // The upper triangle by SYRK (what the generated programs accumulate), then
  // mirrored: the same factor; before the mirror the lower triangle is
  // untouched (here: still the sentinel).
  std::vector<float> U(size_t(d * d), -7.0f);
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = i; j < d; ++j)
      U[size_t(i * d + j)] = 0.0f;
  kfac_accumulate(U.data(), X1.data(), S, d, sc.a, true);
  kfac_accumulate(U.data(), X2.data(), S, d, sc.a, true);
  EXPECT_EQ(U[size_t(d)], -7.0f); // (1, 0)
  kfac_symmetrize(U.data(), d);
  EXPECT_LT(rel_error(U, want), 1e-5);
  // G's scale: dY of a mean loss over N rows is g / N, so N^2/S dY^T dY is
  // the mean of g g^T.
  const KfacScales g = kfac_factor_scales(10, 4.0);
  EXPECT_FLOAT_EQ(g.a, 0.1f);
  EXPECT_FLOAT_EQ(g.g, 1.6f);
  EXPECT_THROW(kfac_factor_scales(0, 1.0), std::invalid_argument);
}

TEST(Kfac, PiCorrectedDampingFollowsTheFormula) {
  // mean eigenvalue of A 8/2 = 4, of G 3/3 = 1: pi = sqrt(4/1) = 2;
  // lambda = 1e-2: sqrt 0.1, A + 0.2 I, G + 0.05 I.
  const KfacDamping d = kfac_damping(8.0, 2, 3.0, 3, 1e-2);
  EXPECT_DOUBLE_EQ(d.pi, 2.0);
  EXPECT_NEAR(d.a, 0.2, 1e-15);
  EXPECT_NEAR(d.g, 0.05, 1e-15);
  // A zero factor: pi = 1, both get sqrt(lambda).
  const KfacDamping z = kfac_damping(0.0, 4, 3.0, 3, 0.04);
  EXPECT_DOUBLE_EQ(z.pi, 1.0);
  EXPECT_NEAR(z.a, 0.2, 1e-15);
  EXPECT_NEAR(z.g, 0.2, 1e-15);
  // Tiny lambda: both clamp at 1e-7 (ASDL's floor).
  const KfacDamping t = kfac_damping(1.0, 1, 1.0, 1, 1e-20);
  EXPECT_DOUBLE_EQ(t.a, 1e-7);
  EXPECT_DOUBLE_EQ(t.g, 1e-7);
  // kfac_refresh uses the traces of the layer's factors.
  std::mt19937 rng(seed_for("damping"));
  KfacConfig c;
  c.damping = 3e-3;
  KfacStats stats;
  const int64_t in = 12, out = 7;
  KfacLayer l(in, out);
  const auto X = random_floats(rng, 30 * in, 2.0f);
  const auto dY = random_floats(rng, 30 * out, 0.1f);
  kfac_accumulate(l.A.data(), X.data(), 30, in, 1.0f / 30);
  kfac_accumulate(l.G.data(), dY.data(), 30, out, 1.0f / 30);
  const double trA = trace(gram(X, 30, in, 1.0 / 30), in),
               trG = trace(gram(dY, 30, out, 1.0 / 30), out);
  kfac_refresh(l, c, stats);
  const double pi = std::sqrt((trA / in) / (trG / out));
  EXPECT_NEAR(l.damping.pi, pi, 1e-5 * pi);
  EXPECT_NEAR(l.damping.a, std::sqrt(3e-3) * pi, 1e-5 * l.damping.a);
  EXPECT_NEAR(l.damping.g, std::sqrt(3e-3) / pi, 1e-5 * l.damping.g);
  // The factors are zeroed for the next refresh (no running average).
  for (float v : l.A)
    ASSERT_EQ(v, 0.0f);
  for (float v : l.G)
    ASSERT_EQ(v, 0.0f);
}

TEST(Kfac, CholeskyInverseMatchesFp64) {
  std::mt19937 rng(seed_for("inverse"));
  for (int64_t d : {1, 2, 45, 64}) {
    const auto F = random_factor(rng, d + 60, d);
    const Mat want = inverse(to_double(F), d, 0.1);
    std::vector<float> inv(size_t(d * d));
    ASSERT_TRUE(kfac_cholesky_inverse(inv.data(), F.data(), d, 0.1));
    EXPECT_LT(rel_error(inv, want), 1e-4) << "d " << d;
    ASSERT_TRUE(kfac_cholesky_inverse_fp64(inv.data(), F.data(), d, 0.1));
    EXPECT_LT(rel_error(inv, want), 1e-6) << "d " << d; // one fp32 rounding
    // Symmetric: both triangles are written.
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < i; ++j)
        ASSERT_EQ(inv[size_t(i * d + j)], inv[size_t(j * d + i)]);
  }
  // A rank-deficient factor (S < d) is positive definite once damped.
  const auto low = random_factor(rng, 5, 30);
  std::vector<float> inv(30 * 30);
  ASSERT_TRUE(kfac_cholesky_inverse(inv.data(), low.data(), 30, 0.5));
  EXPECT_LT(rel_error(inv, inverse(to_double(low), 30, 0.5)), 1e-4);
}

TEST(Kfac, NonPositiveDefiniteFactorFallsBack) {
  // [[1,1],[1,1]] + 1e-9 I: in fp32 1 + 1e-9 rounds to 1, the matrix stays
  // singular and spotrf meets a zero pivot; in fp64 it is positive definite
  // (eigenvalues 2 + 1e-9 and 1e-9), so the retry succeeds.
  const std::vector<float> singular = {1, 1, 1, 1};
  std::vector<float> inv(4, -7.0f);
  EXPECT_FALSE(kfac_cholesky_inverse(inv.data(), singular.data(), 2, 1e-9));
  EXPECT_EQ(kfac_invert_factor(inv.data(), singular.data(), 2, 1e-9, false),
            KfacInverseOutcome::Fp64);
  // (M + eI)^-1 for M = 11^T: (I - 11^T / (2 + e)) / e.
  const double e = 1e-9;
  const Mat want = {(1 - 1 / (2 + e)) / e, -1 / (2 + e) / e, -1 / (2 + e) / e,
                    (1 - 1 / (2 + e)) / e};
  EXPECT_LT(rel_error(inv, want), 1e-6);
  // Indefinite (eigenvalues +-2): no damping this small helps, in either
  // precision. The previous inverse is kept untouched, or there is none.
  const std::vector<float> indefinite = {0, 2, 2, 0};
  std::vector<float> prev = {3, 1, 1, 3};
  EXPECT_EQ(kfac_invert_factor(prev.data(), indefinite.data(), 2, 1e-3, true),
            KfacInverseOutcome::KeptPrevious);
  EXPECT_EQ(prev, (std::vector<float>{3, 1, 1, 3}));
  EXPECT_EQ(kfac_invert_factor(prev.data(), indefinite.data(), 2, 1e-3, false),
            KfacInverseOutcome::NoInverse);
  // Non-finite entries fail in both precisions.
  const std::vector<float> nan = {1, NAN, NAN, 1};
  EXPECT_FALSE(kfac_cholesky_inverse(inv.data(), nan.data(), 2, 1.0));
  EXPECT_FALSE(kfac_cholesky_inverse_fp64(inv.data(), nan.data(), 2, 1.0));
}

TEST(Kfac, RefreshCountsTheFallbacksAndKeepsThePreviousInverse) {
  std::mt19937 rng(seed_for("refresh"));
  KfacConfig c;
  KfacStats stats;
  KfacLayer l = refreshed_layer(rng, 6, 5, c, stats);
  EXPECT_TRUE(l.has_inverse());
  EXPECT_EQ(stats.refreshes, 1);
  EXPECT_EQ(stats.inverses_fp32, 2);
  const auto keptA = l.A_inv;
  // A NaN in A (a diverged micro-batch): A keeps its inverse, G is renewed.
  const auto dY = random_floats(rng, 20 * 5, 0.1f);
  kfac_accumulate(l.G.data(), dY.data(), 20, 5, 0.05f);
  l.A[7] = NAN;
  kfac_refresh(l, c, stats);
  EXPECT_EQ(l.A_inv, keptA);
  EXPECT_TRUE(l.has_inverse());
  EXPECT_EQ(stats.kept_previous, 1);
  EXPECT_EQ(stats.inverses_fp32, 3);
  EXPECT_EQ(stats.refreshes, 2);
  std::map<std::string, std::string> info;
  kfac_stats_info(stats, info);
  EXPECT_EQ(info["kfac.kept_previous"], "1");
  EXPECT_EQ(info["kfac.inverses_fp32"], "3");
  EXPECT_EQ(info["kfac.no_inverse"], "0");
  // A first refresh that fails leaves the layer first-order: the gradient
  // passes unchanged.
  KfacLayer bad(3, 2);
  bad.G = {0, 2, 2, 0}; // indefinite
  bad.A = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  kfac_refresh(bad, c, stats);
  EXPECT_FALSE(bad.has_inverse());
  EXPECT_EQ(stats.no_inverse, 1);
  const std::vector<float> dW = {1, 2, 3, 4, 5, 6}, db = {7, 8};
  std::vector<float> out(6), outb(2);
  kfac_precondition(out.data(), dW.data(), outb.data(), db.data(), bad, true);
  EXPECT_EQ(out, dW);
  EXPECT_EQ(outb, db);
}

TEST(Kfac, PreconditioningMatchesFp64) {
  std::mt19937 rng(seed_for("precondition"));
  KfacConfig c;
  c.damping = 1e-2;
  for (bool torchLayout : {true, false}) {
    const int64_t in = 24, out = 17;
    KfacLayer l(in, out);
    const auto X = random_floats(rng, 90 * in);
    const auto dY = random_floats(rng, 90 * out, 0.05f);
    kfac_accumulate(l.A.data(), X.data(), 90, in, 1.0f / 90);
    kfac_accumulate(l.G.data(), dY.data(), 90, out, 1.0f / 90);
    const Mat A = gram(X, 90, in, 1.0 / 90), G = gram(dY, 90, out, 1.0 / 90);
    KfacStats stats;
    kfac_refresh(l, c, stats);
    const double pi =
        std::sqrt((trace(A, in) / double(in)) / (trace(G, out) / double(out)));
    const Mat Ai = inverse(A, in, std::sqrt(c.damping) * pi);
    const Mat Gi = inverse(G, out, std::sqrt(c.damping) / pi);
    const auto dW = random_floats(rng, in * out), db = random_floats(rng, out);
    std::vector<float> got(size_t(in * out)), gotb(static_cast<size_t>(out));
    kfac_precondition(got.data(), dW.data(), gotb.data(), db.data(), l,
                      torchLayout);
    const Mat want =
        torchLayout
            ? matmul(matmul(Gi, to_double(dW), out, out, in), Ai, out, in, in)
            : matmul(matmul(Ai, to_double(dW), in, in, out), Gi, in, out, out);
    EXPECT_LT(rel_error(got, want), 2e-4) << "torch layout " << torchLayout;
    EXPECT_LT(rel_error(gotb, matmul(Gi, to_double(db), out, out, 1)), 2e-4);
    // The preconditioner is not the identity: the check would catch a copy.
    EXPECT_GT(rel_error(dW, want), 1e-2);
  }
}

TEST(Kfac, SgdStepWithDecoupledWeightDecay) {
  // lr 0.5, momentum 0.9, wd 0.1, p = 2; d = 1 then -1.
  // Step 1: p = 2 (1 - 0.05) - 0.5 * 1 = 1.4, buf = 1.
  // Step 2: buf = 0.9 - 1 = -0.1; p = 1.4 * 0.95 + 0.05 = 1.38.
  KfacConfig c;
  c.lr = 0.5;
  c.momentum = 0.9;
  c.weight_decay = 0.1;
  float p = 2.0f, buf = 0.0f, d = 1.0f;
  kfac_sgd_step(&p, &d, &buf, 1, c, 1);
  EXPECT_NEAR(p, 1.4f, 1e-6);
  EXPECT_FLOAT_EQ(buf, 1.0f);
  d = -1.0f;
  kfac_sgd_step(&p, &d, &buf, 1, c, 2);
  EXPECT_NEAR(buf, -0.1f, 1e-6);
  EXPECT_NEAR(p, 1.38f, 1e-6);
  // Random vectors against fp64, three steps; momentum 0 needs no buffer.
  std::mt19937 rng(seed_for("sgd"));
  for (double mu : {0.9, 0.0}) {
    c.momentum = mu;
    const int64_t n = 1001;
    auto pf = random_floats(rng, n);
    std::vector<float> bf(static_cast<size_t>(n));
    Mat pd = to_double(pf), bd(static_cast<size_t>(n));
    for (int64_t s = 1; s <= 3; ++s) {
      const auto g = random_floats(rng, n);
      kfac_sgd_step(pf.data(), g.data(), mu != 0 ? bf.data() : nullptr, n, c,
                    s);
      for (int64_t i = 0; i < n; ++i) {
        bd[size_t(i)] =
            s == 1 ? g[size_t(i)] : mu * bd[size_t(i)] + g[size_t(i)];
        pd[size_t(i)] = pd[size_t(i)] * (1 - c.lr * c.weight_decay) -
                        c.lr * (mu != 0 ? bd[size_t(i)] : g[size_t(i)]);
      }
    }
    EXPECT_LT(rel_error(pf, pd), 1e-6);
  }
}

TEST(Kfac, LambStepMatchesFp64) {
  std::mt19937 rng(seed_for("lamb"));
  KfacConfig c;
  c.rule = KfacRule::Lamb;
  c.lr = 0.01;
  c.weight_decay = 0.01;
  const int64_t n = 777;
  auto p = random_floats(rng, n);
  std::vector<float> m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  Mat pd = to_double(p), md(static_cast<size_t>(n)), vd(static_cast<size_t>(n));
  for (int64_t t = 1; t <= 3; ++t) {
    const auto d = random_floats(rng, n, 0.1f);
    kfac_lamb_step(p.data(), d.data(), m.data(), v.data(), n, c, t,
                   MPI_COMM_NULL);
    lamb_step(pd, md, vd, d, {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay},
              t);
  }
  EXPECT_LT(rel_error(p, pd), 1e-6);
  EXPECT_LT(rel_error(m, md), 1e-6);
  EXPECT_LT(rel_error(v, vd), 1e-6);
  EXPECT_DOUBLE_EQ(kfac_trust_ratio(0.0, 1.0), 1.0); // a zero parameter
  EXPECT_DOUBLE_EQ(kfac_trust_ratio(2.0, 0.5), 4.0);
}

// At t = 1 the bias-corrected moments are g and g^2, so u_i = g_i / (|g_i| +
// eps) = sign(g_i) to 1e-6 and ||u|| = sqrt(4) = 2 for four non-zero
// entries; d = (3, 0, -4, 0) has ||d|| = 5, so the step is lr 0.4 d after
// the decay 1 - lr wd = 0.95.
TEST(Kfac, AdamGraftStepByHand) {
  KfacConfig c;
  c.rule = KfacRule::AdamGraft;
  c.lr = 0.1;
  c.weight_decay = 0.5;
  const std::vector<float> g = {1.0f, -2.0f, 0.5f, 4.0f}, d = {3, 0, -4, 0};
  std::vector<float> p(4, 1.0f), m(4), v(4);
  kfac_adam_graft_step(p.data(), g.data(), d.data(), m.data(), v.data(), 4, c,
                       1, MPI_COMM_NULL);
  const float grafted[4] = {0.95f - 0.1f * 0.4f * 3, 0.95f,
                            0.95f + 0.1f * 0.4f * 4, 0.95f};
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(p[size_t(i)], grafted[i], 1e-6) << i;
  // The moments are of the raw gradient, not of d.
  EXPECT_NEAR(m[1], (1 - c.beta1) * -2.0, 1e-7);
  EXPECT_NEAR(v[3], (1 - c.beta2) * 16.0, 1e-7);
  // Without a direction: AdamW, p = 0.95 - lr sign(g).
  std::fill(p.begin(), p.end(), 1.0f);
  std::fill(m.begin(), m.end(), 0.0f);
  std::fill(v.begin(), v.end(), 0.0f);
  kfac_adam_graft_step(p.data(), g.data(), nullptr, m.data(), v.data(), 4, c, 1,
                       MPI_COMM_NULL);
  const float adamw[4] = {0.85f, 1.05f, 0.85f, 0.85f};
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(p[size_t(i)], adamw[i], 1e-6) << i;
  EXPECT_DOUBLE_EQ(kfac_graft_scale(2.0, 5.0), 0.4);
  EXPECT_DOUBLE_EQ(kfac_graft_scale(2.0, 0.0), 0.0); // no direction to take
}

// AdamW on step 1 (no inverse yet), then grafted: the moments carry over.
TEST(Kfac, AdamGraftStepMatchesFp64) {
  std::mt19937 rng(seed_for("graft"));
  KfacConfig c;
  c.rule = KfacRule::AdamGraft;
  c.lr = 0.01;
  c.weight_decay = 0.01;
  const int64_t n = 777;
  auto p = random_floats(rng, n);
  std::vector<float> m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  Mat pd = to_double(p), md(static_cast<size_t>(n)), vd(static_cast<size_t>(n));
  for (int64_t t = 1; t <= 3; ++t) {
    const auto g = random_floats(rng, n, 0.1f);
    const auto d = random_floats(rng, n, 3.0f);
    kfac_adam_graft_step(p.data(), g.data(), t > 1 ? d.data() : nullptr,
                         m.data(), v.data(), n, c, t, MPI_COMM_NULL);
    adam_graft_step(pd, md, vd, g, t > 1 ? &d : nullptr,
                    {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay}, t);
  }
  EXPECT_LT(rel_error(p, pd), 1e-6);
  EXPECT_LT(rel_error(m, md), 1e-6);
  EXPECT_LT(rel_error(v, vd), 1e-6);
}

TEST(Kfac, ConfigAndLayerRules) {
  KfacConfig c;
  EXPECT_NO_THROW(kfac_check_config(c));
  c.damping = 0;
  try {
    kfac_check_config(c);
    FAIL() << "damping 0 accepted";
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find("damping"), std::string::npos);
  }
  c.damping = -1e-3;
  EXPECT_THROW(kfac_check_config(c), std::invalid_argument);
  c = KfacConfig{};
  c.refresh_interval = 0;
  EXPECT_THROW(kfac_check_config(c), std::invalid_argument);
  c = KfacConfig{};
  c.rule = KfacRule::Lamb;
  c.beta2 = 1.0;
  EXPECT_THROW(kfac_check_config(c), std::invalid_argument);
  c.rule = KfacRule::AdamGraft; // the same betas and eps
  EXPECT_THROW(kfac_check_config(c), std::invalid_argument);
  c.beta2 = 0.999;
  c.eps = 0;
  EXPECT_THROW(kfac_check_config(c), std::invalid_argument);
  c.rule = KfacRule::Sgd; // no moments
  EXPECT_NO_THROW(kfac_check_config(c));
  // The names of the flag and the plan, one table.
  KfacRule r = KfacRule::Sgd;
  EXPECT_TRUE(kfac_rule_named("adam-graft", r));
  EXPECT_EQ(r, KfacRule::AdamGraft);
  EXPECT_STREQ(kfac_rule_name(KfacRule::Lamb), "lamb");
  EXPECT_FALSE(kfac_rule_named("adam", r));
  EXPECT_EQ(kfac_rule_choices(), "sgd, lamb or adam-graft");
  // Adam grafting's eps is AdamW's, LAMB's PipeFisher's.
  EXPECT_EQ(kfac_rule_eps(KfacRule::AdamGraft), 1e-8);
  EXPECT_EQ(kfac_rule_eps(KfacRule::Lamb), 1e-6);
  // Refresh at steps 0, K, 2K, ...
  EXPECT_TRUE(kfac_refresh_due(0, 3));
  EXPECT_FALSE(kfac_refresh_due(2, 3));
  EXPECT_TRUE(kfac_refresh_due(6, 3));
  EXPECT_TRUE(kfac_refresh_due(5, 1));
  // Factor steps between refreshes only with a decay; F need not divide K.
  c = KfacConfig{};
  c.refresh_interval = 7;
  c.factor_interval = 3;
  EXPECT_THROW(kfac_check_config(c), std::invalid_argument); // no decay
  EXPECT_FALSE(kfac_factor_due(3, 7, c));
  c.factor_decay = 0.95;
  EXPECT_NO_THROW(kfac_check_config(c));
  EXPECT_FALSE(kfac_factor_due(0, 7, c)); // a refresh step
  EXPECT_TRUE(kfac_factor_due(3, 7, c));
  EXPECT_TRUE(kfac_factor_due(6, 7, c));
  EXPECT_FALSE(kfac_factor_due(7, 7, c));
  EXPECT_TRUE(kfac_factor_due(9, 7, c));
  // Resumed at step 13: steps 9 and 12 folded since the refresh at 7; at
  // step 14 (a refresh) the same two; at step 8 none.
  EXPECT_EQ(kfac_factor_steps_since_refresh(13, 7, c), 2);
  EXPECT_EQ(kfac_factor_steps_since_refresh(14, 7, c), 2);
  EXPECT_EQ(kfac_factor_steps_since_refresh(8, 7, c), 0);
  EXPECT_EQ(kfac_factor_steps_since_refresh(5, 7, c), 1);
  c.factor_interval = 8;
  EXPECT_THROW(kfac_check_config(c), std::invalid_argument); // F > K
  c.factor_interval = 3;
  c.factor_decay = 1;
  EXPECT_THROW(kfac_check_config(c), std::invalid_argument);
  // A factor stride: 4 samples of 3 rows, S = 2 reads rows 0-2 and 6-8.
  const KfacRowStride rs = kfac_row_stride(12, 4, 2);
  EXPECT_EQ(rs.block, 3);
  EXPECT_EQ(rs.step, 6);
  EXPECT_EQ(rs.count, 2);
  EXPECT_EQ(rs.rows(), 6);
  EXPECT_EQ(kfac_row_stride(12, 4, 4).rows(), 3);
  EXPECT_THROW(kfac_row_stride(12, 4, 3), std::invalid_argument); // 3 ∤ 4
  EXPECT_THROW(kfac_row_stride(10, 4, 2), std::invalid_argument); // 10 / 4
  c = KfacConfig{};
  c.factor_stride = 0;
  EXPECT_THROW(kfac_check_config(c), std::invalid_argument);
  // Wide layers stay first-order: GPT-2's 50257-row head, not its 3072 FFN.
  c = KfacConfig{};
  EXPECT_TRUE(kfac_layer_is_wide(768, 50257, c));
  EXPECT_FALSE(kfac_layer_is_wide(768, 3072, c));
  c.max_factor_dim = 1024;
  EXPECT_TRUE(kfac_layer_is_wide(768, 3072, c));
  EXPECT_THROW(KfacLayer(0, 3), std::invalid_argument);
}
