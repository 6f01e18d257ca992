// CPU reference SpMM and SDDMM (see SparseReference.h).
#include "backends/cpu/sparse/SparseReference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace autoddl::sparse {

template <typename T> std::string validateCsr(const CsrMatrix<T> &a) {
  if (a.rows < 0 || a.cols < 0)
    return "negative matrix dimension";
  if (a.rowPtr.size() != static_cast<size_t>(a.rows) + 1)
    return "row pointer array has " + std::to_string(a.rowPtr.size()) +
           " entries, expected rows + 1 = " + std::to_string(a.rows + 1);
  if (a.rowPtr[0] != 0)
    return "row pointer array does not start at 0";
  for (int32_t r = 0; r < a.rows; ++r)
    if (a.rowPtr[r + 1] < a.rowPtr[r])
      return "row pointer decreases at row " + std::to_string(r);
  if (a.colIdx.size() != static_cast<size_t>(a.nnz()))
    return "column index array has " + std::to_string(a.colIdx.size()) +
           " entries, expected nnz = " + std::to_string(a.nnz());
  if (!a.values.empty() && a.values.size() != a.colIdx.size())
    return "value array has " + std::to_string(a.values.size()) +
           " entries, expected nnz = " + std::to_string(a.nnz());
  for (size_t e = 0; e < a.colIdx.size(); ++e)
    if (a.colIdx[e] < 0 || a.colIdx[e] >= a.cols)
      return "column index " + std::to_string(a.colIdx[e]) + " at entry " +
             std::to_string(e) + " is outside [0, " + std::to_string(a.cols) +
             ")";
  return "";
}

template <typename T> CsrMatrix<T> canonicalizeCsr(const CsrMatrix<T> &a) {
  CsrMatrix<T> out;
  out.rows = a.rows;
  out.cols = a.cols;
  out.rowPtr.assign(a.rows + 1, 0);
  std::vector<int64_t> order;
  for (int32_t r = 0; r < a.rows; ++r) {
    order.resize(a.rowPtr[r + 1] - a.rowPtr[r]);
    std::iota(order.begin(), order.end(), int64_t(a.rowPtr[r]));
    std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
      return a.colIdx[p] < a.colIdx[q];
    });
    for (size_t k = 0; k < order.size(); ++k) {
      int32_t c = a.colIdx[order[k]];
      if (k > 0 && c == out.colIdx.back()) {
        out.values.back() += a.value(order[k]);
        continue;
      }
      out.colIdx.push_back(c);
      out.values.push_back(a.value(order[k]));
    }
    out.rowPtr[r + 1] = static_cast<int32_t>(out.colIdx.size());
  }
  return out;
}

template <typename T>
void spmmReference(const CsrMatrix<T> &a, const T *x, int64_t n, int64_t ldx,
                   T *y, int64_t ldy) {
  for (int32_t r = 0; r < a.rows; ++r) {
    T *yr = y + r * ldy;
    std::fill(yr, yr + n, T(0));
    for (int64_t e = a.rowPtr[r]; e < a.rowPtr[r + 1]; ++e) {
      const T v = a.value(e);
      const T *xr = x + int64_t(a.colIdx[e]) * ldx;
      for (int64_t f = 0; f < n; ++f)
        yr[f] += v * xr[f];
    }
  }
}

template <typename T>
void spmmReferenceRows(const CsrMatrix<T> &a, const T *x, int64_t n,
                       int64_t ldx, const std::vector<int32_t> &rows, T *out) {
  for (size_t k = 0; k < rows.size(); ++k) {
    T *yr = out + k * n;
    std::fill(yr, yr + n, T(0));
    for (int64_t e = a.rowPtr[rows[k]]; e < a.rowPtr[rows[k] + 1]; ++e) {
      const T v = a.value(e);
      const T *xr = x + int64_t(a.colIdx[e]) * ldx;
      for (int64_t f = 0; f < n; ++f)
        yr[f] += v * xr[f];
    }
  }
}

template <typename T>
void spmmAbsBoundRows(const CsrMatrix<T> &a, const T *x, int64_t n, int64_t ldx,
                      const std::vector<int32_t> &rows, T *out) {
  for (size_t k = 0; k < rows.size(); ++k) {
    T *yr = out + k * n;
    std::fill(yr, yr + n, T(0));
    for (int64_t e = a.rowPtr[rows[k]]; e < a.rowPtr[rows[k] + 1]; ++e) {
      const T v = std::abs(a.value(e));
      const T *xr = x + int64_t(a.colIdx[e]) * ldx;
      for (int64_t f = 0; f < n; ++f)
        yr[f] += v * std::abs(xr[f]);
    }
  }
}

template <typename T>
void sddmmReference(const CsrMatrix<T> &mask, const T *x, int64_t ldx,
                    const T *y, int64_t ldy, int64_t k, T *out) {
  for (int32_t r = 0; r < mask.rows; ++r) {
    const T *xr = x + int64_t(r) * ldx;
    for (int64_t e = mask.rowPtr[r]; e < mask.rowPtr[r + 1]; ++e) {
      const T *yc = y + int64_t(mask.colIdx[e]) * ldy;
      T dot = 0;
      for (int64_t f = 0; f < k; ++f)
        dot += xr[f] * yc[f];
      out[e] = dot;
    }
  }
}

#define AUTODDL_INSTANTIATE(T)                                                 \
  template std::string validateCsr(const CsrMatrix<T> &);                      \
  template CsrMatrix<T> canonicalizeCsr(const CsrMatrix<T> &);                 \
  template void spmmReference(const CsrMatrix<T> &, const T *, int64_t,        \
                              int64_t, T *, int64_t);                          \
  template void spmmReferenceRows(const CsrMatrix<T> &, const T *, int64_t,    \
                                  int64_t, const std::vector<int32_t> &, T *); \
  template void spmmAbsBoundRows(const CsrMatrix<T> &, const T *, int64_t,     \
                                 int64_t, const std::vector<int32_t> &, T *);  \
  template void sddmmReference(const CsrMatrix<T> &, const T *, int64_t,       \
                               const T *, int64_t, int64_t, T *);
AUTODDL_INSTANTIATE(double)
AUTODDL_INSTANTIATE(float)
#undef AUTODDL_INSTANTIATE

} // namespace autoddl::sparse
