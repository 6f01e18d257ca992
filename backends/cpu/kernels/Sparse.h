// Sparse graph ops on CSR matrices: spmm (adj x) and sddmm (masked x y^T).
// Forward passes call the sparse CPU references of backends/cpu/sparse;
// backward adds the transposed products. Conventions: see Embedding.h. A
// row-split (S(0)) adjacency is simply the CSR of the local rows.
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_SPARSE_H
#define AUTODDL_BACKENDS_CPU_KERNELS_SPARSE_H

#include "backends/cpu/sparse/SparseReference.h"

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

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_SPARSE_H
