// SGD and AdamW against steps computed by hand (PyTorch semantics), and ZeRO
// slicing.
#include "backends/cpu/Optimizer.h"

#include <gtest/gtest.h>

#include <vector>

using namespace autoddl::rt;

TEST(Optimizer, AdamWMatchesHandComputedSteps) {
  // p = 1, lr = 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.01; gradients
  // 0.5 then -0.25. Step 1: p = 1 * (1 - 0.1*0.01) = 0.999; m = 0.05; v = 0.001
  // * 0.25 = 2.5e-4;
  //   bias corrections 0.1 and 0.001: p -= (0.1/0.1) * 0.05 /
  //   (sqrt(2.5e-4)/sqrt(1e-3) + 1e-8) = 0.999 - 0.05/0.5 = 0.899.
  // Step 2: p = 0.899 * 0.999 = 0.898101; m = 0.045 - 0.025 = 0.02;
  //   v = 0.999 * 2.5e-4 + 0.001 * 0.0625 = 3.1225e-4; corrections 0.19 and
  //   0.001999: p -= (0.1/0.19) * 0.02 / (sqrt(3.1225e-4)/sqrt(0.001999) +
  //   1e-8) -> 0.87146730.
  // fp32 arithmetic: state within 1e-10 (~1 ulp of 3e-4 is 3e-11 per
  // operation), p within 1e-6.
  float p = 1.0f, m = 0.0f, v = 0.0f;
  AdamWConfig c;
  c.lr = 0.1;
  c.weight_decay = 0.01;
  float g = 0.5f;
  adamw_step(&p, &g, &m, &v, 1, c, 1);
  EXPECT_NEAR(p, 0.899f, 1e-6);
  EXPECT_NEAR(m, 0.05f, 1e-7);
  EXPECT_NEAR(v, 2.5e-4f, 1e-10);
  g = -0.25f;
  adamw_step(&p, &g, &m, &v, 1, c, 2);
  EXPECT_NEAR(p, 0.87146730f, 1e-6);
  EXPECT_NEAR(v, 3.1225e-4f, 1e-10);
}

TEST(Optimizer, SgdWithMomentumAndWeightDecayMatchesTorch) {
  // lr 0.5, momentum 0.9, weight decay 0.1, p = 2; grads 1 then -1.
  // Step 1: g' = 1 + 0.2 = 1.2, buf = 1.2, p = 2 - 0.6 = 1.4.
  // Step 2: g' = -1 + 0.14 = -0.86, buf = 1.08 - 0.86 = 0.22, p = 1.4 - 0.11
  // = 1.29.
  float p = 2.0f, buf = 0.0f, g = 1.0f;
  sgd_step(&p, &g, &buf, 1, 0.5f, 0.9f, 0.1f, 1);
  EXPECT_NEAR(p, 1.4f, 1e-6);
  g = -1.0f;
  sgd_step(&p, &g, &buf, 1, 0.5f, 0.9f, 0.1f, 2);
  EXPECT_NEAR(buf, 0.22f, 1e-6);
  EXPECT_NEAR(p, 1.29f, 1e-6);
}

TEST(Optimizer, ZeroShardStepEqualsSliceOfFullStep) {
  // Element-wise update: stepping two halves separately equals stepping the
  // whole buffer.
  std::vector<float> p(10), g(10), m(10, 0.0f), v(10, 0.0f);
  for (int i = 0; i < 10; ++i) {
    p[i] = 0.1f * i;
    g[i] = 0.3f - 0.07f * i;
  }
  std::vector<float> p2 = p, m2 = m, v2 = v;
  AdamWConfig c;
  adamw_step(p.data(), g.data(), m.data(), v.data(), 10, c, 1);
  adamw_step(p2.data(), g.data(), m2.data(), v2.data(), 4, c, 1);
  adamw_step(p2.data() + 4, g.data() + 4, m2.data() + 4, v2.data() + 4, 6, c,
             1);
  EXPECT_EQ(p, p2);
  // Clipping factor: norm 10 clipped to 1 gives ~0.1; a small norm is left
  // alone.
  EXPECT_NEAR(clip_factor(10.0, 1.0f), 0.1f, 1e-6);
  EXPECT_EQ(clip_factor(0.5, 1.0f), 1.0f);
  const float gg[2] = {3, 4};
  EXPECT_EQ(grad_norm_squared(gg, 2), 25.0);
}
