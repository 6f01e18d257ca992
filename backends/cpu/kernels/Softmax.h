// Softmax along one axis of a tensor viewed as [outer, L, inner]. Conventions:
// see Embedding.h.
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_SOFTMAX_H
#define AUTODDL_BACKENDS_CPU_KERNELS_SOFTMAX_H

#include <cmath>
#include <cstdint>

namespace autoddl::rt {

/// out[outer,L,inner] = softmax of x over the middle axis (max-subtracted; sums
/// in double). For softmax over axis a of shape S: outer = prod S[0:a], L =
/// S[a], inner = prod S[a+1:].
inline void softmax_forward(float *out, const float *x, int64_t outer,
                            int64_t L, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float *xi = x + o * L * inner + i;
      float *yo = out + o * L * inner + i;
      float mx = -INFINITY;
      for (int64_t l = 0; l < L; ++l)
        mx = std::fmax(mx, xi[l * inner]);
      double sum = 0;
      for (int64_t l = 0; l < L; ++l) {
        const float e = std::exp(xi[l * inner] - mx);
        yo[l * inner] = e;
        sum += e;
      }
      const float inv = float(1.0 / sum);
      for (int64_t l = 0; l < L; ++l)
        yo[l * inner] *= inv;
    }
}

/// dx += y (dout - sum_l dout y), from the forward output y.
inline void softmax_backward(float *dx, const float *y, const float *dout,
                             int64_t outer, int64_t L, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * L * inner + i;
      double dot = 0;
      for (int64_t l = 0; l < L; ++l)
        dot += double(dout[base + l * inner]) * y[base + l * inner];
      for (int64_t l = 0; l < L; ++l)
        dx[base + l * inner] +=
            y[base + l * inner] * (dout[base + l * inner] - float(dot));
    }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_SOFTMAX_H
