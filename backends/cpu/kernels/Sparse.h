// Sparse graph ops on CSR matrices: spmm (adj x), sddmm (masked x y^T) and
// edge_softmax (a softmax over each row's stored entries). Forward passes call
// the sparse CPU references of backends/cpu/sparse; backward adds the
// transposed products. Conventions: see Embedding.h. A row-split (S(0))
// adjacency is simply the CSR of the local rows (global column indices).
//
// A sparse activation (sddmm's scores, edge_softmax's attention) is a value
// array [nnz] in the stored order of the adjacency it was computed on (its
// `pattern`); the pattern's own values are not used by the *_values kernels.
// The CUDA backend (backends/cuda/kernels/Sparse.h) has the same functions with
// the same arguments, device pointers and its own sparse handle for `Csr`.
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_SPARSE_H
#define AUTODDL_BACKENDS_CPU_KERNELS_SPARSE_H

#include "backends/cpu/sparse/SparseReference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace autoddl::rt {

using Csr = autoddl::sparse::CsrMatrix<float>;

/// y[N,F] = adj[N,M] x[M,F].
inline void spmm_forward(float *y, const Csr &adj, const float *x, int64_t F) {
  autoddl::sparse::spmmReference(adj, x, F, F, y, F);
}

/// dx[M,F] += adj^T dy; dvalues[nnz] += dot(dy[i,:], x[j,:]) for each stored
/// (i, j) (the gradient of adj's stored values, e.g. attention scores from
/// sddmm; null when not needed).
inline void spmm_backward(float *dx, float *dvalues, const Csr &adj,
                          const float *dy, const float *x, int64_t F) {
  if (dx)
    for (int32_t i = 0; i < adj.rows; ++i)
      for (int32_t e = adj.rowPtr[i]; e < adj.rowPtr[i + 1]; ++e) {
        const float a = adj.value(e);
        float *d = dx + int64_t(adj.colIdx[e]) * F;
        const float *g = dy + int64_t(i) * F;
        for (int64_t f = 0; f < F; ++f)
          d[f] += a * g[f];
      }
  if (dvalues) {
    std::vector<float> dots(size_t(adj.nnz()));
    autoddl::sparse::sddmmReference(adj, dy, F, x, F, F, dots.data());
    for (size_t e = 0; e < dots.size(); ++e)
      dvalues[e] += dots[e];
  }
}

/// out[nnz] = dot(x[i,:], y[j,:]) at each stored entry (i, j) of mask[N,M]; x
/// [N,K], y [M,K].
inline void sddmm_forward(float *out, const Csr &mask, const float *x,
                          const float *y, int64_t K) {
  autoddl::sparse::sddmmReference(mask, x, K, y, K, K, out);
}

/// dx[N,K] += sum_e dout[e] y[j,:] (row i); dy[M,K] += sum_e dout[e] x[i,:]
/// (row j).
inline void sddmm_backward(float *dx, float *dy, const Csr &mask,
                           const float *dout, const float *x, const float *y,
                           int64_t K) {
  for (int32_t i = 0; i < mask.rows; ++i)
    for (int32_t e = mask.rowPtr[i]; e < mask.rowPtr[i + 1]; ++e) {
      const int64_t j = mask.colIdx[e];
      for (int64_t k = 0; k < K; ++k) {
        if (dx)
          dx[int64_t(i) * K + k] += dout[e] * y[j * K + k];
        if (dy)
          dy[j * K + k] += dout[e] * x[int64_t(i) * K + k];
      }
    }
}

/// y[N,F] = D^-1 A x[M,F]: row i the mean of x over row i's stored entries
/// (sage's mean aggregator; adj's own values are not used; an empty row is
/// 0).
inline void spmm_mean_forward(float *y, const Csr &adj, const float *x,
                              int64_t F) {
  for (int32_t i = 0; i < adj.rows; ++i) {
    float *out = y + int64_t(i) * F;
    std::fill(out, out + F, 0.0f);
    const int32_t e0 = adj.rowPtr[i], e1 = adj.rowPtr[i + 1];
    for (int32_t e = e0; e < e1; ++e) {
      const float *in = x + int64_t(adj.colIdx[e]) * F;
      for (int64_t f = 0; f < F; ++f)
        out[f] += in[f];
    }
    if (e1 > e0) {
      const float inv = 1.0f / float(e1 - e0);
      for (int64_t f = 0; f < F; ++f)
        out[f] *= inv;
    }
  }
}

/// dx[M,F] += (D^-1 A)^T dy: each entry (i, j) adds dy[i,:] / deg(i) to
/// dx[j,:].
inline void spmm_mean_backward(float *dx, const Csr &adj, const float *dy,
                               int64_t F) {
  for (int32_t i = 0; i < adj.rows; ++i) {
    const int32_t e0 = adj.rowPtr[i], e1 = adj.rowPtr[i + 1];
    if (e1 == e0)
      continue;
    const float inv = 1.0f / float(e1 - e0);
    const float *g = dy + int64_t(i) * F;
    for (int32_t e = e0; e < e1; ++e) {
      float *d = dx + int64_t(adj.colIdx[e]) * F;
      for (int64_t f = 0; f < F; ++f)
        d[f] += inv * g[f];
    }
  }
}

/// y[N,F] = A x[M,F], where A has `pattern`'s stored entries with `values`
/// [nnz] (an activation, e.g. edge_softmax's result) instead of its own.
inline void spmm_values_forward(float *y, const Csr &pattern,
                                const float *values, const float *x,
                                int64_t F) {
  for (int32_t i = 0; i < pattern.rows; ++i) {
    float *o = y + int64_t(i) * F;
    std::fill(o, o + F, 0.0f);
    for (int32_t e = pattern.rowPtr[i]; e < pattern.rowPtr[i + 1]; ++e) {
      const float a = values[e];
      const float *r = x + int64_t(pattern.colIdx[e]) * F;
      for (int64_t f = 0; f < F; ++f)
        o[f] += a * r[f];
    }
  }
}

/// The backward of spmm_values_forward: dx[M,F] += A^T dy;
/// dvalues[e] += dot(dy[i,:], x[j,:]) for each stored (i, j). Either output may
/// be null.
inline void spmm_values_backward(float *dx, float *dvalues, const Csr &pattern,
                                 const float *values, const float *dy,
                                 const float *x, int64_t F) {
  for (int32_t i = 0; i < pattern.rows; ++i) {
    const float *g = dy + int64_t(i) * F;
    for (int32_t e = pattern.rowPtr[i]; e < pattern.rowPtr[i + 1]; ++e) {
      const int64_t j = pattern.colIdx[e];
      if (dx) {
        float *d = dx + j * F;
        for (int64_t f = 0; f < F; ++f)
          d[f] += values[e] * g[f];
      }
      if (dvalues) {
        float dot = 0.0f;
        for (int64_t f = 0; f < F; ++f)
          dot += g[f] * x[j * F + f];
        dvalues[e] += dot;
      }
    }
  }
}

/// out[e] = exp(scale s[e] - m_i) / sum_{e' in row i} exp(scale s[e'] - m_i):
/// a softmax of scale * scores over each row's stored entries (m_i the row's
/// largest scaled score); an empty row has no entries and writes nothing.
inline void edge_softmax_forward(float *out, const Csr &pattern,
                                 const float *scores, float scale) {
  for (int32_t i = 0; i < pattern.rows; ++i) {
    const int32_t b = pattern.rowPtr[i], end = pattern.rowPtr[i + 1];
    if (b == end)
      continue;
    float m = scale * scores[b];
    for (int32_t e = b + 1; e < end; ++e)
      m = std::max(m, scale * scores[e]);
    float sum = 0.0f;
    for (int32_t e = b; e < end; ++e)
      sum += out[e] = std::exp(scale * scores[e] - m);
    const float inv = 1.0f / sum;
    for (int32_t e = b; e < end; ++e)
      out[e] *= inv;
  }
}

/// dscores[e] += scale * out[e] * (dout[e] - sum_{e' in row i} dout[e']
/// out[e']), from edge_softmax_forward's result `out`.
inline void edge_softmax_backward(float *dscores, const Csr &pattern,
                                  const float *out, const float *dout,
                                  float scale) {
  for (int32_t i = 0; i < pattern.rows; ++i) {
    const int32_t b = pattern.rowPtr[i], end = pattern.rowPtr[i + 1];
    float dot = 0.0f;
    for (int32_t e = b; e < end; ++e)
      dot += dout[e] * out[e];
    for (int32_t e = b; e < end; ++e)
      dscores[e] += scale * out[e] * (dout[e] - dot);
  }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_SPARSE_H
