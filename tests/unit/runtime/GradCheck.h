// The finite-difference gradient check of the CPU kernels' tests
// (KernelGradTest.cpp, GatKernelGradTest.cpp): expectGradients compares every
// backward kernel against central finite differences of L = sum_i w_i out_i
// (w random, L accumulated in double).
//
// Tolerance: the inputs are O(1) and h = 1e-2, so the truncation error of the
// central difference is O(h^2 f''') ~ 1e-4 and the fp32 rounding of the forward
// adds ~1e-7 |L| / h ~ 1e-4; a gradient element passes when |numeric -
// analytic| <= 5e-3 * max(1, max |analytic|). A wrong term in a backward
// formula is an O(1) error and fails.
#ifndef AUTODDL_TESTS_UNIT_RUNTIME_GRADCHECK_H
#define AUTODDL_TESTS_UNIT_RUNTIME_GRADCHECK_H

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace autoddl::test {

using Vec = std::vector<float>;

inline Vec randn(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(n);
  for (float &x : v)
    x = d(gen);
  return v;
}

struct Param {
  const char *name;
  Vec *value;
  Vec *grad;
};

constexpr float kGradInit = 0.25f; // backward must ADD to what is already there

/// fwd(out) computes the output from the current parameter values; bwd(dout)
/// adds gradients.
inline void expectGradients(const std::function<void(Vec &)> &fwd,
                            const std::function<void(const Vec &)> &bwd,
                            std::vector<Param> params, float h = 1e-2f,
                            double tol = 5e-3) {
  Vec out;
  fwd(out);
  const Vec w = randn(out.size(), 99);
  for (Param &p : params)
    p.grad->assign(p.value->size(), kGradInit);
  bwd(w);
  auto loss = [&] {
    Vec o;
    fwd(o);
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i)
      s += double(w[i]) * o[i];
    return s;
  };
  for (Param &p : params) {
    double maxAna = 1.0;
    for (float g : *p.grad)
      maxAna = std::max(maxAna, std::fabs(double(g) - kGradInit));
    const size_t n = p.value->size(), stride = std::max<size_t>(1, n / 48);
    for (size_t i = 0; i < n; i += stride) {
      const float saved = (*p.value)[i];
      (*p.value)[i] = saved + h;
      const double up = loss();
      (*p.value)[i] = saved - h;
      const double down = loss();
      (*p.value)[i] = saved;
      const double numeric = (up - down) / (2.0 * h);
      const double analytic = double((*p.grad)[i]) - kGradInit;
      ASSERT_NEAR(numeric, analytic, tol * maxAna)
          << "d/d" << p.name << "[" << i << "]";
    }
  }
}

} // namespace autoddl::test

#endif // AUTODDL_TESTS_UNIT_RUNTIME_GRADCHECK_H
