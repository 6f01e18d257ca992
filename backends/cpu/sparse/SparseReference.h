// CPU reference SpMM and SDDMM on CSR matrices, in fp64 or fp32.
//
// These are the ground truth the GPU kernels in backends/cuda/sparse are
// checked against, and the starting point of the CPU backend's sparse ops.
// Plain C++, no exceptions thrown, no MLIR.
#ifndef AUTODDL_BACKENDS_CPU_SPARSE_SPARSEREFERENCE_H
#define AUTODDL_BACKENDS_CPU_SPARSE_SPARSEREFERENCE_H

#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::sparse {

/// A compressed-sparse-row matrix. Rows may hold unsorted and duplicate column
/// indices (duplicates add up, as in every consumer here). Indices are int32:
/// nnz < 2^31.
template <typename T> struct CsrMatrix {
  int32_t rows = 0;
  int32_t cols = 0;
  std::vector<int32_t> rowPtr; // rows + 1 entries, rowPtr[0] == 0
  std::vector<int32_t> colIdx; // nnz entries
  std::vector<T> values;       // nnz entries (or empty: every value is 1)

  int64_t nnz() const { return rowPtr.empty() ? 0 : rowPtr.back(); }
  T value(int64_t e) const { return values.empty() ? T(1) : values[e]; }
};

/// Returns "" when `a` is well formed, else a one-line description of the first
/// defect.
template <typename T> std::string validateCsr(const CsrMatrix<T> &a);

/// Sorts each row by column and merges duplicate entries by adding their
/// values.
template <typename T> CsrMatrix<T> canonicalizeCsr(const CsrMatrix<T> &a);

/// Y = A * X. X is a.cols x n (row-major, leading dimension ldx), Y is a.rows x
/// n (ldy). Accumulates in T, in stored order.
template <typename T>
void spmmReference(const CsrMatrix<T> &a, const T *x, int64_t n, int64_t ldx,
                   T *y, int64_t ldy);

/// Computes only the listed rows: out[k*n + f] = (A * X)[rows[k]][f].
template <typename T>
void spmmReferenceRows(const CsrMatrix<T> &a, const T *x, int64_t n,
                       int64_t ldx, const std::vector<int32_t> &rows, T *out);

/// Per row, sum_j |a_ij| * |x_j f| for f < n: the scale the rounding error of Y
/// bounds against.
template <typename T>
void spmmAbsBoundRows(const CsrMatrix<T> &a, const T *x, int64_t n, int64_t ldx,
                      const std::vector<int32_t> &rows, T *out);

/// SDDMM: for each stored entry e = (i, j) of `mask`, out[e] = dot(X[i, :k],
/// Y[j, :k]). X is mask.rows x k (ldx), Y is mask.cols x k (ldy). Mask values
/// are not applied.
template <typename T>
void sddmmReference(const CsrMatrix<T> &mask, const T *x, int64_t ldx,
                    const T *y, int64_t ldy, int64_t k, T *out);

} // namespace autoddl::sparse

#endif // AUTODDL_BACKENDS_CPU_SPARSE_SPARSEREFERENCE_H
