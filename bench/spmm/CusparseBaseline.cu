// cuSPARSE baselines (see CusparseBaseline.h).
#include "bench/spmm/BenchCommon.h"
#include "bench/spmm/CusparseBaseline.h"

#include <cusparse.h>
#include <vector>

namespace autoddl::bench {
namespace {

cusparseHandle_t handle() {
  static cusparseHandle_t h = [] {
    cusparseHandle_t created;
    if (cusparseCreate(&created) != CUSPARSE_STATUS_SUCCESS) {
      std::fprintf(stderr, "bench: cusparseCreate failed\n");
      std::exit(1);
    }
    return created;
  }();
  return h;
}

std::string statusText(cusparseStatus_t s) { return cusparseGetErrorString(s); }

} // namespace

std::string cusparseVersionString() {
  int v = 0;
  cusparseGetVersion(handle(), &v);
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 100) + "." +
         std::to_string(v % 100);
}

BaselineResult cusparseSpmm(
    int32_t rows, int32_t cols, int64_t nnz, const int32_t *rowPtr,
    const int32_t *col, const void *vals, cudaDataType type, const void *x,
    int64_t n, void *y,
    const std::function<double(const std::function<void()> &)> &timer) {
  BaselineResult best;
  cusparseSpMatDescr_t a;
  cusparseDnMatDescr_t bx, cy;
  if (cusparseCreateCsr(&a, rows, cols, nnz, const_cast<int32_t *>(rowPtr),
                        const_cast<int32_t *>(col), const_cast<void *>(vals),
                        CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                        CUSPARSE_INDEX_BASE_ZERO,
                        type) != CUSPARSE_STATUS_SUCCESS) {
    best.note = "cusparseCreateCsr failed";
    return best;
  }
  cusparseCreateDnMat(&bx, cols, n, n, const_cast<void *>(x), type,
                      CUSPARSE_ORDER_ROW);
  cusparseCreateDnMat(&cy, rows, n, n, y, type, CUSPARSE_ORDER_ROW);
  const float alpha = 1.f, beta = 0.f;
  const std::pair<cusparseSpMMAlg_t, const char *> algs[] = {
      {CUSPARSE_SPMM_ALG_DEFAULT, "default"},
      {CUSPARSE_SPMM_CSR_ALG2, "CSR_ALG2"},
      {CUSPARSE_SPMM_CSR_ALG3, "CSR_ALG3"}};
  for (const auto &entry : algs) {
    const cusparseSpMMAlg_t alg = entry.first;
    const char *name = entry.second;
    size_t bytes = 0;
    cusparseStatus_t st =
        cusparseSpMM_bufferSize(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, bx,
                                &beta, cy, CUDA_R_32F, alg, &bytes);
    void *buf = nullptr;
    if (st == CUSPARSE_STATUS_SUCCESS && bytes)
      CUDA_CHECK(cudaMalloc(&buf, bytes));
    if (st == CUSPARSE_STATUS_SUCCESS)
      st = cusparseSpMM_preprocess(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                   CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a,
                                   bx, &beta, cy, CUDA_R_32F, alg, buf);
    if (st == CUSPARSE_STATUS_SUCCESS)
      st = cusparseSpMM(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                        CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, bx, &beta,
                        cy, CUDA_R_32F, alg, buf);
    if (st == CUSPARSE_STATUS_SUCCESS &&
        cudaDeviceSynchronize() == cudaSuccess) {
      const double ms = timer([&] {
        cusparseSpMM(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                     CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a, bx, &beta, cy,
                     CUDA_R_32F, alg, buf);
      });
      best.algorithmMs.emplace_back(name, ms);
      if (!best.ok || ms < best.ms) {
        best.ok = true;
        best.ms = ms;
        best.algorithm = name;
      }
    } else {
      best.note += std::string(best.note.empty() ? "" : "; ") + name + ": " +
                   statusText(st);
    }
    cudaGetLastError();
    if (buf)
      CUDA_CHECK(cudaFree(buf));
  }
  cusparseDestroySpMat(a);
  cusparseDestroyDnMat(bx);
  cusparseDestroyDnMat(cy);
  return best;
}

BaselineResult cusparseSddmm(
    int32_t rows, int32_t cols, int64_t nnz, const int32_t *rowPtr,
    const int32_t *col, void *cVals, cudaDataType type, const void *x,
    const void *y, int64_t k,
    const std::function<double(const std::function<void()> &)> &timer) {
  BaselineResult best;
  cusparseSpMatDescr_t c;
  cusparseDnMatDescr_t ax, by;
  if (cusparseCreateCsr(&c, rows, cols, nnz, const_cast<int32_t *>(rowPtr),
                        const_cast<int32_t *>(col), cVals, CUSPARSE_INDEX_32I,
                        CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                        type) != CUSPARSE_STATUS_SUCCESS) {
    best.note = "cusparseCreateCsr failed";
    return best;
  }
  const float alpha = 1.f, beta = 0.f;
  cusparseCreateDnMat(&ax, rows, k, k, const_cast<void *>(x), type,
                      CUSPARSE_ORDER_ROW);
  // Y (cols x k, row-major) is B^T; try B as Y^T through opB, then as a
  // column-major view.
  struct Layout {
    const char *name;
    cusparseOperation_t opB;
    bool colMajorView;
  };
  const Layout layouts[] = {
      {"default, opB=T", CUSPARSE_OPERATION_TRANSPOSE, false},
      {"default, B col-major", CUSPARSE_OPERATION_NON_TRANSPOSE, true}};
  for (const Layout &layout : layouts) {
    if (layout.colMajorView)
      cusparseCreateDnMat(&by, k, cols, k, const_cast<void *>(y), type,
                          CUSPARSE_ORDER_COL);
    else
      cusparseCreateDnMat(&by, cols, k, k, const_cast<void *>(y), type,
                          CUSPARSE_ORDER_ROW);
    size_t bytes = 0;
    cusparseStatus_t st = cusparseSDDMM_bufferSize(
        handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, layout.opB, &alpha, ax, by,
        &beta, c, CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, &bytes);
    void *buf = nullptr;
    if (st == CUSPARSE_STATUS_SUCCESS && bytes)
      CUDA_CHECK(cudaMalloc(&buf, bytes));
    if (st == CUSPARSE_STATUS_SUCCESS)
      st = cusparseSDDMM_preprocess(
          handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, layout.opB, &alpha, ax,
          by, &beta, c, CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, buf);
    if (st == CUSPARSE_STATUS_SUCCESS)
      st = cusparseSDDMM(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, layout.opB,
                         &alpha, ax, by, &beta, c, CUDA_R_32F,
                         CUSPARSE_SDDMM_ALG_DEFAULT, buf);
    if (st == CUSPARSE_STATUS_SUCCESS &&
        cudaDeviceSynchronize() == cudaSuccess) {
      const double ms = timer([&] {
        cusparseSDDMM(handle(), CUSPARSE_OPERATION_NON_TRANSPOSE, layout.opB,
                      &alpha, ax, by, &beta, c, CUDA_R_32F,
                      CUSPARSE_SDDMM_ALG_DEFAULT, buf);
      });
      best.algorithmMs.emplace_back(layout.name, ms);
      if (!best.ok || ms < best.ms) {
        best.ok = true;
        best.ms = ms;
        best.algorithm = layout.name;
      }
    } else {
      best.note += std::string(best.note.empty() ? "" : "; ") + layout.name +
                   ": " + statusText(st);
    }
    cudaGetLastError();
    if (buf)
      CUDA_CHECK(cudaFree(buf));
    cusparseDestroyDnMat(by);
    if (best.ok)
      break;
  }
  cusparseDestroySpMat(c);
  cusparseDestroyDnMat(ax);
  return best;
}

} // namespace autoddl::bench
