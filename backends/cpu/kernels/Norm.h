// Normalisations over the last dimension: layernorm and rmsnorm. Conventions:
// see Embedding.h. Row statistics are accumulated in double; forward saves
// mean/rstd [N] for backward.
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_NORM_H
#define AUTODDL_BACKENDS_CPU_KERNELS_NORM_H

#include <cmath>
#include <cstdint>

namespace autoddl::rt {

/// sum_c f(x[c]) over a row of C elements, in double (the row statistics).
template <typename F> double row_sum(const float *x, int64_t C, F f) {
  double s = 0;
  for (int64_t c = 0; c < C; ++c)
    s += f(double(x[c]));
  return s;
}

/// out[N,C] = (x - mean) * rstd * gamma[C] + beta[C] (beta may be null); saves
/// mean[N], rstd[N] (rstd = 1 / sqrt(var + eps), var the biased variance, as
/// torch LayerNorm).
inline void layernorm_forward(float *out, float *mean, float *rstd,
                              const float *x, const float *gamma,
                              const float *beta, int64_t N, int64_t C,
                              float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float *xr = x + n * C;
    const double m = row_sum(xr, C, [](double v) { return v; }) / double(C);
    const double v =
        row_sum(xr, C, [m](double u) { return (u - m) * (u - m); });
    const double r = 1.0 / std::sqrt(v / double(C) + eps);
    float *o = out + n * C;
    for (int64_t c = 0; c < C; ++c)
      o[c] = float((xr[c] - m) * r) * gamma[c] + (beta ? beta[c] : 0.0f);
    mean[n] = float(m);
    rstd[n] = float(r);
  }
}

/// dx[N,C] += rstd (g - mean(g) - xhat mean(g xhat)) with g = dout * gamma;
/// dgamma[C] += sum_n dout * xhat; dbeta[C] += sum_n dout.
inline void layernorm_backward(float *dx, float *dgamma, float *dbeta,
                               const float *dout, const float *x,
                               const float *gamma, const float *mean,
                               const float *rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float *xr = x + n * C, *g = dout + n * C;
    const float m = mean[n], r = rstd[n];
    double sumG = 0, sumGX = 0;
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (xr[c] - m) * r;
      sumG += g[c] * gamma[c];
      sumGX += g[c] * gamma[c] * xhat;
    }
    const float meanG = float(sumG / double(C)),
                meanGX = float(sumGX / double(C));
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (xr[c] - m) * r;
      if (dx)
        dx[n * C + c] += r * (g[c] * gamma[c] - meanG - xhat * meanGX);
      if (dgamma)
        dgamma[c] += g[c] * xhat;
      if (dbeta)
        dbeta[c] += g[c];
    }
  }
}

/// out[N,C] = x * rstd * gamma[C], rstd = 1 / sqrt(mean(x^2) + eps) (Llama
/// RMSNorm); saves rstd[N].
inline void rmsnorm_forward(float *out, float *rstd, const float *x,
                            const float *gamma, int64_t N, int64_t C,
                            float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float *xr = x + n * C;
    const double ss = row_sum(xr, C, [](double v) { return v * v; });
    const float r = float(1.0 / std::sqrt(ss / double(C) + eps));
    for (int64_t c = 0; c < C; ++c)
      out[n * C + c] = xr[c] * r * gamma[c];
    rstd[n] = r;
  }
}

/// dx[N,C] += rstd (g - x rstd^2 mean(g x)) with g = dout * gamma; dgamma[C] +=
/// sum_n dout x rstd.
inline void rmsnorm_backward(float *dx, float *dgamma, const float *dout,
                             const float *x, const float *gamma,
                             const float *rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float *xr = x + n * C, *g = dout + n * C;
    const float r = rstd[n];
    double sumGX = 0;
    for (int64_t c = 0; c < C; ++c)
      sumGX += double(g[c]) * gamma[c] * xr[c];
    const float k = float(sumGX / double(C)) * r * r;
    for (int64_t c = 0; c < C; ++c) {
      if (dx)
        dx[n * C + c] += r * (g[c] * gamma[c] - xr[c] * k);
      if (dgamma)
        dgamma[c] += g[c] * xr[c] * r;
    }
  }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_NORM_H
