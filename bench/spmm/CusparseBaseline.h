// cuSPARSE baselines of the benchmark: cusparseSpMM (CSR; default, ALG2 and
// ALG3 algorithms, the best one reported) and cusparseSDDMM (CSR, default
// algorithm). Buffer sizing and preprocessing happen outside the timed region,
// as cuSPARSE users do.
#ifndef AUTODDL_BENCH_SPMM_CUSPARSEBASELINE_H
#define AUTODDL_BENCH_SPMM_CUSPARSEBASELINE_H

#include <cstdint>
#include <functional>
#include <library_types.h>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::bench {

struct BaselineResult {
  bool ok = false;
  double ms = 0;         // median time of the best algorithm
  std::string algorithm; // its name
  std::string note;      // algorithms that failed, with cuSPARSE's status
  /// Every algorithm that ran, with its median time.
  std::vector<std::pair<std::string, double>> algorithmMs;
};

/// Times Y = A * X with cuSPARSE, A CSR (rows x cols, nnz), X cols x n, Y rows
/// x n, row-major, all of `type`, fp32 compute. `timer` runs a callable and
/// returns its median ms.
BaselineResult
cusparseSpmm(int32_t rows, int32_t cols, int64_t nnz, const int32_t *rowPtr,
             const int32_t *col, const void *vals, cudaDataType type,
             const void *x, int64_t n, void *y,
             const std::function<double(const std::function<void()> &)> &timer);

/// Times SDDMM C = (X * Y^T) o spy(C) with cuSPARSE: X rows x k, Y cols x k
/// row-major, C CSR.
BaselineResult cusparseSddmm(
    int32_t rows, int32_t cols, int64_t nnz, const int32_t *rowPtr,
    const int32_t *col, void *cVals, cudaDataType type, const void *x,
    const void *y, int64_t k,
    const std::function<double(const std::function<void()> &)> &timer);

/// "major.minor.patch" of the cuSPARSE library in use.
std::string cusparseVersionString();

} // namespace autoddl::bench

#endif // AUTODDL_BENCH_SPMM_CUSPARSEBASELINE_H
