// Embedding lookups and position encodings: embedding, positional (learned),
// rotary (RoPE).
//
// Conventions of every CPU kernel (docs/runtime.md): fp32, contiguous
// row-major; *_forward overwrites its output; *_backward ADDS into the
// gradients it is given (+=, as llm.c), so residual branches and tied weights
// accumulate, and a null gradient pointer means "not needed".
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_EMBEDDING_H
#define AUTODDL_BACKENDS_CPU_KERNELS_EMBEDDING_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace autoddl::rt {

/// out[N,C] = table[ids[n] - v0] for ids in [v0, v0 + Vl), else 0.
/// table is [Vl,C]: the whole table (v0 = 0, Vl = V) or the rows [v0, v0 + Vl)
/// of a vocab-split (S(0)) table, whose outputs are then partial sums (P) over
/// the tensor-parallel group.
inline void embedding_forward(float *out, const int32_t *ids,
                              const float *table, int64_t N, int64_t C,
                              int64_t v0, int64_t Vl) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = int64_t(ids[n]) - v0;
    float *o = out + n * C;
    if (row >= 0 && row < Vl)
      std::memcpy(o, table + row * C, size_t(C) * sizeof(float));
    else
      std::memset(o, 0, size_t(C) * sizeof(float));
  }
}

/// dtable[Vl,C] += scatter of dout[N,C] by ids (rows outside [v0, v0 + Vl)
/// skipped).
inline void embedding_backward(float *dtable, const float *dout,
                               const int32_t *ids, int64_t N, int64_t C,
                               int64_t v0, int64_t Vl) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = int64_t(ids[n]) - v0;
    if (row < 0 || row >= Vl)
      continue;
    float *d = dtable + row * C;
    const float *g = dout + n * C;
    for (int64_t c = 0; c < C; ++c)
      d[c] += g[c];
  }
}

/// out[B,T,C] = x[B,T,C] + table[t0 + t, :]; table is [P,C] with P >= t0 + T
/// (t0 > 0 when the sequence is split across ranks). C may be a channel shard,
/// table the matching column shard.
inline void positional_forward(float *out, const float *x, const float *table,
                               int64_t B, int64_t T, int64_t C, int64_t t0) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const float *xi = x + (b * T + t) * C;
      const float *pe = table + (t0 + t) * C;
      float *o = out + (b * T + t) * C;
      for (int64_t c = 0; c < C; ++c)
        o[c] = xi[c] + pe[c];
    }
}

/// dx[B,T,C] += dout; dtable[t0 + t, :] += sum over b of dout[b, t, :].
inline void positional_backward(float *dx, float *dtable, const float *dout,
                                int64_t B, int64_t T, int64_t C, int64_t t0) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const float *g = dout + (b * T + t) * C;
      if (dx) {
        float *d = dx + (b * T + t) * C;
        for (int64_t c = 0; c < C; ++c)
          d[c] += g[c];
      }
      if (dtable) {
        float *d = dtable + (t0 + t) * C;
        for (int64_t c = 0; c < C; ++c)
          d[c] += g[c];
      }
    }
}

/// Rotation angle of pair i (0 <= i < D/2) at absolute position pos: pos *
/// theta^(-2i/D).
inline double rotary_angle(int64_t pos, int64_t i, int64_t D, double theta) {
  return double(pos) * std::pow(theta, -2.0 * double(i) / double(D));
}

/// out (+)= x rotated by `sign` * angle on each pair (i, i + D/2) of each head,
/// at absolute position t0 + t: the forward rotation (sign +1) and its
/// transpose (sign -1) share this loop.
inline void rotary_apply(float *out, const float *x, int64_t B, int64_t T,
                         int64_t H, int64_t D, double theta, int64_t t0,
                         double sign, bool accumulate) {
  const int64_t half = D / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double a = sign * rotary_angle(t0 + t, i, D, theta);
      const float c = float(std::cos(a)), s = float(std::sin(a));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t base = (b * T + t) * H * D + h * D;
          const float x1 = x[base + i], x2 = x[base + i + half];
          const float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
          out[base + i] = accumulate ? out[base + i] + y1 : y1;
          out[base + i + half] = accumulate ? out[base + i + half] + y2 : y2;
        }
    }
}

/// out[B,T,H*D] = RoPE(x[B,T,H*D]) per head, rotating the pairs (i, i + D/2) as
/// Hugging Face Llama's rotate_half: out_i = x_i cos - x_{i+D/2} sin,
/// out_{i+D/2} = x_{i+D/2} cos + x_i sin, at absolute position t0 + t. H may be
/// a head shard (rotation does not depend on the head).
inline void rotary_forward(float *out, const float *x, int64_t B, int64_t T,
                           int64_t H, int64_t D, double theta, int64_t t0) {
  rotary_apply(out, x, B, T, H, D, theta, t0, 1.0, false);
}

/// dx[B,T,H*D] += R^T dout (the rotation by -angle).
inline void rotary_backward(float *dx, const float *dout, int64_t B, int64_t T,
                            int64_t H, int64_t D, double theta, int64_t t0) {
  rotary_apply(dx, dout, B, T, H, D, theta, t0, -1.0, true);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_EMBEDDING_H
