// Elementwise ops: add, mul, gelu (tanh and exact), relu, silu, swiglu, and
// scale. Conventions: see Embedding.h. All sizes are element counts n; backward
// recomputes from inputs.
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_ELEMENTWISE_H
#define AUTODDL_BACKENDS_CPU_KERNELS_ELEMENTWISE_H

#include <cmath>
#include <cstdint>

namespace autoddl::rt {

/// out[n] = a + b.
inline void add_forward(float *out, const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}
/// da[n] += dout; db[n] += dout.
inline void add_backward(float *da, float *db, const float *dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (da)
      da[i] += dout[i];
    if (db)
      db[i] += dout[i];
  }
}

/// out[n] = a * b.
inline void mul_forward(float *out, const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] * b[i];
}
/// da[n] += dout * b; db[n] += dout * a.
inline void mul_backward(float *da, float *db, const float *dout,
                         const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (da)
      da[i] += dout[i] * b[i];
    if (db)
      db[i] += dout[i] * a[i];
  }
}

/// x[n] *= s (loss scaling, gradient averaging).
inline void scale_inplace(float *x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    x[i] *= s;
}

// GELU. tanh form (GPT-2, torch approximate="tanh"): 0.5 x (1 +
// tanh(sqrt(2/pi)(x + 0.044715 x^3))); exact form (torch approximate="none"):
// 0.5 x (1 + erf(x / sqrt(2))).
inline constexpr float kGeluTanhScale = 0.7978845608028654f; // sqrt(2/pi)

/// out[n] = gelu(x); `tanh_approximation` selects the form.
inline void gelu_forward(float *out, const float *x, int64_t n,
                         bool tanh_approximation) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (tanh_approximation)
      out[i] = 0.5f * v *
               (1.0f + std::tanh(kGeluTanhScale * (v + 0.044715f * v * v * v)));
    else
      out[i] = 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
  }
}

/// dx[n] += dout * gelu'(x).
inline void gelu_backward(float *dx, const float *x, const float *dout,
                          int64_t n, bool tanh_approximation) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    float grad;
    if (tanh_approximation) {
      const float u = kGeluTanhScale * (v + 0.044715f * v * v * v);
      const float th = std::tanh(u);
      const float sech2 = 1.0f - th * th;
      grad = 0.5f * (1.0f + th) + 0.5f * v * sech2 * kGeluTanhScale *
                                      (1.0f + 3.0f * 0.044715f * v * v);
    } else {
      const float cdf = 0.5f * (1.0f + std::erf(v * 0.7071067811865476f));
      const float pdf = 0.3989422804014327f * std::exp(-0.5f * v * v);
      grad = cdf + v * pdf;
    }
    dx[i] += dout[i] * grad;
  }
}

/// out[n] = max(x, 0).
inline void relu_forward(float *out, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
/// dx[n] += dout where x > 0.
inline void relu_backward(float *dx, const float *x, const float *dout,
                          int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > 0.0f)
      dx[i] += dout[i];
}

/// out[n] = x if x > 0 else exp(x) - 1 (ELU, alpha 1: PyG's GAT example).
inline void elu_forward(float *out, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] > 0.0f ? x[i] : std::expm1(x[i]);
}
/// dx[n] += dout * (1 if x > 0 else exp(x)).
inline void elu_backward(float *dx, const float *x, const float *dout,
                         int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] += x[i] > 0.0f ? dout[i] : dout[i] * std::exp(x[i]);
}

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

/// out[n] = x * sigmoid(x).
inline void silu_forward(float *out, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] * sigmoid(x[i]);
}
/// dx[n] += dout * (s + x s (1 - s)), s = sigmoid(x).
inline void silu_backward(float *dx, const float *x, const float *dout,
                          int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(x[i]);
    dx[i] += dout[i] * (s + x[i] * s * (1.0f - s));
  }
}

/// out[n] = silu(gate) * up (Llama's MLP).
inline void swiglu_forward(float *out, const float *gate, const float *up,
                           int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = gate[i] * sigmoid(gate[i]) * up[i];
}
/// dgate[n] += dout * up * silu'(gate); dup[n] += dout * silu(gate).
inline void swiglu_backward(float *dgate, float *dup, const float *gate,
                            const float *up, const float *dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(gate[i]);
    if (dgate)
      dgate[i] += dout[i] * up[i] * (s + gate[i] * s * (1.0f - s));
    if (dup)
      dup[i] += dout[i] * gate[i] * s;
  }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_ELEMENTWISE_H
