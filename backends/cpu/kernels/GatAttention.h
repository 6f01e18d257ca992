// GATConv's additive attention (PyG's GATConv, Veličković et al. 2018) on a
// CSR adjacency: head_dot (the per-node terms a·Wh of each head) and
// gat_aggregate (per head the softmax over each row's stored entries of
// LeakyReLU(s_src[j] + s_dst[i]), then the weighted sum of the sources' rows).
// Row i of the adjacency is a destination node, its stored columns the
// sources whose messages it receives (self loops are entries of the pattern).
// Conventions: see Embedding.h (*_forward overwrites, *_backward adds, a null
// gradient pointer means "not needed"). The CUDA backend
// (backends/cuda/kernels/GatAttention.h) has the same functions.
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_GATATTENTION_H
#define AUTODDL_BACKENDS_CPU_KERNELS_GATATTENTION_H

#include "backends/cpu/kernels/Sparse.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace autoddl::rt {

/// s[N,H] = per head h, dot(x[n, h*C:(h+1)*C], att[h,:]).
inline void head_dot_forward(float *s, const float *x, const float *att,
                             int64_t N, int64_t H, int64_t C) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      float acc = 0.0f;
      for (int64_t c = 0; c < C; ++c)
        acc += x[(n * H + h) * C + c] * att[h * C + c];
      s[n * H + h] = acc;
    }
}

/// dx[N,H*C] += ds[n,h] att[h,:]; datt[H,C] += sum_n ds[n,h] x[n,h,:].
inline void head_dot_backward(float *dx, float *datt, const float *ds,
                              const float *x, const float *att, int64_t N,
                              int64_t H, int64_t C) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const float g = ds[n * H + h];
      for (int64_t c = 0; c < C; ++c) {
        if (dx)
          dx[(n * H + h) * C + c] += g * att[h * C + c];
        if (datt)
          datt[h * C + c] += g * x[(n * H + h) * C + c];
      }
    }
}

namespace detail {

/// Row i's attention weights, alpha[(e - first) * H + h] for its entries e:
/// the softmax over the row of LeakyReLU(s_src[j,h] + s_dst[i,h]); raw[...]
/// the LeakyReLU's input (its sign picks the slope in the backward).
inline void gat_row_alpha(std::vector<float> &alpha, std::vector<float> &raw,
                          const Csr &adj, int32_t i, const float *sDst,
                          const float *sSrc, int64_t H, float slope) {
  const int32_t b = adj.rowPtr[i], end = adj.rowPtr[i + 1];
  alpha.assign(size_t(end - b) * size_t(H), 0.0f);
  raw.assign(alpha.size(), 0.0f);
  for (int64_t h = 0; h < H; ++h) {
    float m = -INFINITY;
    for (int32_t e = b; e < end; ++e) {
      const size_t at = size_t(e - b) * size_t(H) + size_t(h);
      const float v = sSrc[int64_t(adj.colIdx[e]) * H + h] + sDst[i * H + h];
      raw[at] = v;
      alpha[at] = v > 0.0f ? v : slope * v;
      m = std::max(m, alpha[at]);
    }
    float sum = 0.0f;
    for (int32_t e = b; e < end; ++e) {
      float &a = alpha[size_t(e - b) * size_t(H) + size_t(h)];
      sum += a = std::exp(a - m);
    }
    const float inv = 1.0f / sum;
    for (int32_t e = b; e < end; ++e)
      alpha[size_t(e - b) * size_t(H) + size_t(h)] *= inv;
  }
}

} // namespace detail

/// out[N,H*C]: row i, head h = sum over row i's entries j of alpha_ijh
/// x[j, h*C:(h+1)*C]; s_dst [N,H] (this matrix's rows), s_src [M,H] and x
/// [M,H*C] (its columns). An empty row is 0.
inline void gat_aggregate_forward(float *out, const Csr &adj, const float *sDst,
                                  const float *sSrc, const float *x, int64_t H,
                                  int64_t C, float slope) {
  std::vector<float> alpha, raw;
  const int64_t F = H * C;
  for (int32_t i = 0; i < adj.rows; ++i) {
    float *o = out + int64_t(i) * F;
    std::fill(o, o + F, 0.0f);
    detail::gat_row_alpha(alpha, raw, adj, i, sDst, sSrc, H, slope);
    for (int32_t e = adj.rowPtr[i]; e < adj.rowPtr[i + 1]; ++e) {
      const float *a = alpha.data() + size_t(e - adj.rowPtr[i]) * size_t(H);
      const float *r = x + int64_t(adj.colIdx[e]) * F;
      for (int64_t f = 0; f < F; ++f)
        o[f] += a[f / C] * r[f];
    }
  }
}

/// The backward of gat_aggregate_forward (the softmax recomputed from s_dst
/// and s_src): dx[j,:] += alpha_ij dy[i,:]; with g_e = dot(dy[i,h], x[j,h])
/// and d_e = alpha_e (g_e - sum_{row} alpha g) times the LeakyReLU's slope at
/// e, ds_dst[i,h] += sum_row d_e and ds_src[j,h] += d_e.
inline void gat_aggregate_backward(float *dsDst, float *dsSrc, float *dx,
                                   const Csr &adj, const float *sDst,
                                   const float *sSrc, const float *x,
                                   const float *dy, int64_t H, int64_t C,
                                   float slope) {
  std::vector<float> alpha, raw, grad;
  const int64_t F = H * C;
  for (int32_t i = 0; i < adj.rows; ++i) {
    const int32_t b = adj.rowPtr[i], end = adj.rowPtr[i + 1];
    detail::gat_row_alpha(alpha, raw, adj, i, sDst, sSrc, H, slope);
    const float *g = dy + int64_t(i) * F;
    grad.assign(alpha.size(), 0.0f);
    std::vector<float> dot(size_t(H), 0.0f);
    for (int32_t e = b; e < end; ++e) {
      const int64_t j = adj.colIdx[e];
      const size_t at = size_t(e - b) * size_t(H);
      for (int64_t f = 0; f < F; ++f) {
        if (dx)
          dx[j * F + f] += alpha[at + size_t(f / C)] * g[f];
        grad[at + size_t(f / C)] += g[f] * x[j * F + f];
      }
      for (int64_t h = 0; h < H; ++h)
        dot[size_t(h)] += alpha[at + size_t(h)] * grad[at + size_t(h)];
    }
    for (int32_t e = b; e < end; ++e) {
      const int64_t j = adj.colIdx[e];
      for (int64_t h = 0; h < H; ++h) {
        const size_t at = size_t(e - b) * size_t(H) + size_t(h);
        const float d = alpha[at] * (grad[at] - dot[size_t(h)]) *
                        (raw[at] > 0.0f ? 1.0f : slope);
        if (dsDst)
          dsDst[int64_t(i) * H + h] += d;
        if (dsSrc)
          dsSrc[j * H + h] += d;
      }
    }
  }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_GATATTENTION_H
