// fp64 references for the K-FAC tests (KfacTest.cpp, KfacMpiTest.cpp): plain
// loops in double, written apart from the runtime's BLAS/LAPACK path so that
// both cannot share a mistake.
#ifndef AUTODDL_TESTS_UNIT_RUNTIME_KFACREFERENCE_H
#define AUTODDL_TESTS_UNIT_RUNTIME_KFACREFERENCE_H

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

namespace kfacref {

using Mat = std::vector<double>; // row-major

inline std::vector<float> random_floats(std::mt19937 &rng, int64_t n,
                                        float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(size_t(n > 0 ? n : 0));
  for (float &x : v)
    x = nd(rng);
  return v;
}

/// X^T X [d,d] of X [S,d], times scale.
inline Mat gram(const std::vector<float> &X, int64_t S, int64_t d,
                double scale) {
  Mat F(size_t(d * d), 0.0);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j)
        F[size_t(i * d + j)] +=
            scale * double(X[size_t(s * d + i)]) * X[size_t(s * d + j)];
  return F;
}

/// C[M,N] = A[M,K] B[K,N].
inline Mat matmul(const Mat &A, const Mat &B, int64_t M, int64_t K, int64_t N) {
  Mat C(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const double a = A[size_t(i * K + k)];
      for (int64_t j = 0; j < N; ++j)
        C[size_t(i * N + j)] += a * B[size_t(k * N + j)];
    }
  return C;
}

/// (F + diag I)^-1 by Gauss-Jordan elimination with partial pivoting in
/// double (another method than the runtime's Cholesky).
inline Mat inverse(Mat F, int64_t d, double diag) {
  for (int64_t i = 0; i < d; ++i)
    F[size_t(i * d + i)] += diag;
  Mat inv(size_t(d * d), 0.0);
  for (int64_t i = 0; i < d; ++i)
    inv[size_t(i * d + i)] = 1.0;
  for (int64_t c = 0; c < d; ++c) {
    int64_t piv = c;
    for (int64_t r = c + 1; r < d; ++r)
      if (std::fabs(F[size_t(r * d + c)]) > std::fabs(F[size_t(piv * d + c)]))
        piv = r;
    if (F[size_t(piv * d + c)] == 0.0)
      throw std::runtime_error("reference inverse: singular matrix");
    for (int64_t j = 0; j < d; ++j) {
      std::swap(F[size_t(c * d + j)], F[size_t(piv * d + j)]);
      std::swap(inv[size_t(c * d + j)], inv[size_t(piv * d + j)]);
    }
    const double p = F[size_t(c * d + c)];
    for (int64_t j = 0; j < d; ++j) {
      F[size_t(c * d + j)] /= p;
      inv[size_t(c * d + j)] /= p;
    }
    for (int64_t r = 0; r < d; ++r) {
      if (r == c)
        continue;
      const double f = F[size_t(r * d + c)];
      if (f == 0.0)
        continue;
      for (int64_t j = 0; j < d; ++j) {
        F[size_t(r * d + j)] -= f * F[size_t(c * d + j)];
        inv[size_t(r * d + j)] -= f * inv[size_t(c * d + j)];
      }
    }
  }
  return inv;
}

inline Mat to_double(const std::vector<float> &v) {
  return Mat(v.begin(), v.end());
}

inline double trace(const Mat &F, int64_t d) {
  double t = 0;
  for (int64_t i = 0; i < d; ++i)
    t += F[size_t(i * d + i)];
  return t;
}

/// One LAMB step in fp64 on p, m, v (step t = 1, 2, ...; d the
/// preconditioned gradient): m, v as Adam with bias correction, u = m^ /
/// (sqrt(v^) + eps) + wd p, p -= lr (||p|| / ||u||) u.
struct LambHyper {
  double lr, beta1, beta2, eps, weight_decay;
};
inline void lamb_step(Mat &p, Mat &m, Mat &v, const std::vector<float> &d,
                      const LambHyper &h, int64_t t) {
  Mat u(p.size());
  double pp = 0, uu = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * d[i];
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * double(d[i]) * d[i];
    u[i] = (m[i] / (1 - std::pow(h.beta1, double(t)))) /
               (std::sqrt(v[i] / (1 - std::pow(h.beta2, double(t)))) + h.eps) +
           h.weight_decay * p[i];
    pp += p[i] * p[i];
    uu += u[i] * u[i];
  }
  const double r = std::sqrt(pp) / std::sqrt(uu);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] -= h.lr * r * u[i];
}

/// One Adam grafting step in fp64 (step t = 1, 2, ...): m, v of the raw
/// gradient g with bias correction, u = m^ / (sqrt(v^) + eps); with a
/// direction d, p <- p (1 - lr wd) - lr (||u|| / ||d||) d, else (d null)
/// p <- p (1 - lr wd) - lr u.
inline void adam_graft_step(Mat &p, Mat &m, Mat &v, const std::vector<float> &g,
                            const std::vector<float> *d, const LambHyper &h,
                            int64_t t) {
  Mat u(p.size());
  double uu = 0, dd = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * g[i];
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * double(g[i]) * g[i];
    u[i] = (m[i] / (1 - std::pow(h.beta1, double(t)))) /
           (std::sqrt(v[i] / (1 - std::pow(h.beta2, double(t)))) + h.eps);
    uu += u[i] * u[i];
    if (d)
      dd += double((*d)[i]) * (*d)[i];
  }
  const double scale = std::sqrt(uu) / std::sqrt(dd);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = p[i] * (1 - h.lr * h.weight_decay) -
           h.lr * (d ? scale * (*d)[i] : u[i]);
}

/// ||got - want|| / ||want||.
template <class T>
double rel_error(const std::vector<T> &got, const Mat &want) {
  if (got.size() != want.size())
    return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(double(got[i])))
      return INFINITY;
    const double e = double(got[i]) - want[i];
    diff += e * e;
    norm += want[i] * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

} // namespace kfacref

#endif // AUTODDL_TESTS_UNIT_RUNTIME_KFACREFERENCE_H
