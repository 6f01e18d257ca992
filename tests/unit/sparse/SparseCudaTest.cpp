// W8 tensor-core SpMM / SDDMM (backends/cuda/sparse) against the fp64 CPU
// reference, on fresh random values, over edge cases: empty rows, a dense row,
// duplicate and unsorted entries, widths that are not multiples of 8 or 16,
// all-tensor-core / hybrid / all-CUDA-core splits, windows cut into many parts.
// Skips when no GPU is present.
#include "backends/cpu/sparse/SparseReference.h"
#include "backends/cuda/sparse/WindowFormat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <random>

using namespace autoddl::sparse;
using cuda::DataType;

namespace {

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

class SparseCuda : public ::testing::Test {
protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      GTEST_SKIP() << "no CUDA device";
  }
};

/// Host buffer of n values of type t from doubles.
std::vector<uint8_t> pack(DataType t, const std::vector<double> &v) {
  std::vector<uint8_t> out(v.size() * cuda::dataTypeBytes(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::F32) {
      const float f = float(v[i]);
      std::memcpy(&out[i * 4], &f, 4);
    } else if (t == DataType::F16) {
      const __half h = __float2half_rn(float(v[i]));
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      const __nv_bfloat16 h = __float2bfloat16_rn(float(v[i]));
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

struct Shape {
  int32_t rows, cols;
  int avgDegree;
  bool emptyRows, denseRow, duplicates, clustered;
};

/// Random CSR with the requested defects. Values are already rounded to the
/// storage type.
CsrMatrix<double> randomMatrix(const Shape &s, DataType t, std::mt19937 &rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  CsrMatrix<double> a;
  a.rows = s.rows, a.cols = s.cols;
  a.rowPtr.push_back(0);
  for (int32_t r = 0; r < s.rows; ++r) {
    int deg = int(rng() % (2 * s.avgDegree + 1));
    if (s.emptyRows && r % 5 == 2)
      deg = 0;
    if (s.denseRow && r == s.rows / 2) {
      for (int32_t c = s.cols - 1; c >= 0;
           --c) // every column, in reverse order
        a.colIdx.push_back(c),
            a.values.push_back(cuda::roundToStored(t, u(rng)));
      deg = 0;
    }
    for (int k = 0; k < deg; ++k) {
      // Clustered: columns near the window's rows (dense 8x1 vectors); else
      // anywhere.
      int32_t c = s.clustered ? int32_t((r / 8 * 8 + rng() % 24) % s.cols)
                              : int32_t(rng() % s.cols);
      a.colIdx.push_back(c), a.values.push_back(cuda::roundToStored(t, u(rng)));
      if (s.duplicates && k % 3 == 0)
        a.colIdx.push_back(c),
            a.values.push_back(cuda::roundToStored(t, u(rng)));
    }
    a.rowPtr.push_back(int32_t(a.colIdx.size()));
  }
  return a;
}

struct DeviceCsr {
  int32_t *rowPtr = nullptr, *col = nullptr;
  void *val = nullptr;
  ~DeviceCsr() { cudaFree(rowPtr), cudaFree(col), cudaFree(val); }
};

void upload(const CsrMatrix<double> &a, DataType t, DeviceCsr &d) {
  const auto vals = pack(t, a.values);
  ASSERT_CUDA(cudaMalloc(&d.rowPtr, 4 * a.rowPtr.size()));
  ASSERT_CUDA(cudaMalloc(&d.col, 4 * std::max<size_t>(1, a.colIdx.size())));
  ASSERT_CUDA(cudaMalloc(&d.val, std::max<size_t>(1, vals.size())));
  ASSERT_CUDA(cudaMemcpy(d.rowPtr, a.rowPtr.data(), 4 * a.rowPtr.size(),
                         cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d.col, a.colIdx.data(), 4 * a.colIdx.size(),
                         cudaMemcpyHostToDevice));
  ASSERT_CUDA(
      cudaMemcpy(d.val, vals.data(), vals.size(), cudaMemcpyHostToDevice));
}

/// Per-element bound of docs/sparse-kernels.md: 2 (inputRel + (terms + 1)
/// 2^-24) sum|a x| + outputRel |ref| + underflow. inputRel: TF32 rounds both
/// operands (2 * 2^-11); 16-bit inputs are exact, except that merged duplicates
/// are rounded once more to the storage type. underflow: half the spacing of
/// the output type's subnormals (2^-25 for fp16).
double bound(DataType t, bool merged, int64_t terms, double absSum,
             double ref) {
  const double in = t == DataType::F32   ? 2 * std::ldexp(1.0, -11)
                    : !merged            ? 0
                    : t == DataType::F16 ? std::ldexp(1.0, -11)
                                         : std::ldexp(1.0, -8);
  const double out = t == DataType::F32   ? std::ldexp(1.0, -24)
                     : t == DataType::F16 ? std::ldexp(1.0, -11)
                                          : std::ldexp(1.0, -8);
  const double underflow = t == DataType::F32   ? std::ldexp(1.0, -150)
                           : t == DataType::F16 ? std::ldexp(1.0, -25)
                                                : std::ldexp(1.0, -134);
  return 2 * (in + double(terms + 1) * std::ldexp(1.0, -24)) * absSum +
         out * std::abs(ref) + underflow;
}

/// The window format's options of a case.
cuda::PreprocessOptions options(float threshold, int32_t partBlocks,
                                cuda::RowOrder order, bool exactFp32 = false) {
  cuda::PreprocessOptions opt;
  opt.fillThreshold = threshold;
  opt.partBlocks = partBlocks;
  opt.rowOrder = order;
  opt.exactFp32 = exactFp32;
  return opt;
}

void runSpmmCase(const Shape &s, DataType t, float threshold,
                 int32_t partBlocks, int64_t n, uint32_t seed, bool padded,
                 cuda::RowOrder order) {
  SCOPED_TRACE(::testing::Message()
               << cuda::dataTypeName(t) << " rows=" << s.rows << " n=" << n
               << " threshold=" << threshold << " partBlocks=" << partBlocks
               << " padded=" << padded << " order=" << int(order));
  std::mt19937 rng(seed);
  const CsrMatrix<double> a = randomMatrix(s, t, rng);
  DeviceCsr d;
  upload(a, t, d);
  const cuda::PreprocessOptions opt = options(threshold, partBlocks, order);
  cuda::WindowFormat f;
  ASSERT_CUDA(cuda::buildWindowFormat(a.rows, a.cols, a.nnz(), d.rowPtr, d.col,
                                      d.val, t, opt, f));
  const CsrMatrix<double> canon = canonicalizeCsr(a);
  EXPECT_EQ(f.nnz, canon.nnz());
  // A forced clustered order is taken (and undone in Y) whenever there is more
  // than one window to reorder.
  if (order == cuda::RowOrder::Clustered && a.rows > 8 && a.nnz() > 0) {
    EXPECT_TRUE(f.clustered && f.dRowOfSlot != nullptr);
  }
  if (order == cuda::RowOrder::Natural) {
    EXPECT_TRUE(!f.clustered && f.dRowOfSlot == nullptr);
  }
  // Merged duplicates are summed in fp32 and stored rounded to the data type.
  const bool merged = canon.nnz() != a.nnz();

  // Padded (odd) leading dimensions take the element-wise variant; packed
  // ones, with n a multiple of the feature tile, the vectorized one.
  const int64_t ldx = padded ? n + 3 : n, ldy = padded ? n + 5 : n;
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(size_t(a.cols) * ldx);
  for (double &v : x)
    v = cuda::roundToStored(t, u(rng));
  const auto xPacked = pack(t, x);
  const size_t eb = cuda::dataTypeBytes(t);
  void *dx, *dy, *ws = nullptr;
  ASSERT_CUDA(cudaMalloc(&dx, std::max<size_t>(1, xPacked.size())));
  ASSERT_CUDA(cudaMalloc(&dy, size_t(a.rows) * ldy * eb));
  ASSERT_CUDA(
      cudaMemcpy(dx, xPacked.data(), xPacked.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(dy, 0xff, size_t(a.rows) * ldy * eb)); // NaN poison
  const size_t wsBytes = cuda::spmmWorkspaceBytes(f, n);
  if (wsBytes) {
    ASSERT_CUDA(cudaMalloc(&ws, wsBytes));
    ASSERT_CUDA(cudaMemset(ws, 0, wsBytes)); // zero before first use
  }
  // Two calls on one workspace: the first must leave it zeroed (split windows'
  // sums and counters), else the second, which is checked, adds stale sums.
  ASSERT_CUDA(cuda::spmm(f, dx, n, ldx, dy, ldy, ws));
  ASSERT_CUDA(cudaMemset(dy, 0xff, size_t(a.rows) * ldy * eb));
  ASSERT_CUDA(cuda::spmm(f, dx, n, ldx, dy, ldy, ws));
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> y(size_t(a.rows) * ldy * eb);
  ASSERT_CUDA(cudaMemcpy(y.data(), dy, y.size(), cudaMemcpyDeviceToHost));
  std::vector<uint8_t> wsAfter(wsBytes);
  if (wsBytes) {
    ASSERT_CUDA(
        cudaMemcpy(wsAfter.data(), ws, wsBytes, cudaMemcpyDeviceToHost));
  }
  EXPECT_EQ(std::count(wsAfter.begin(), wsAfter.end(), uint8_t(0)),
            std::ptrdiff_t(wsBytes))
      << "workspace not left zero-filled";
  cudaFree(dx), cudaFree(dy), cudaFree(ws);

  std::vector<double> ref(size_t(a.rows) * n), absSum(size_t(a.rows) * n);
  spmmReference(a, x.data(), n, ldx, ref.data(), n);
  std::vector<int32_t> all(a.rows);
  for (int32_t r = 0; r < a.rows; ++r)
    all[r] = r;
  spmmAbsBoundRows(a, x.data(), n, ldx, all, absSum.data());
  int failures = 0;
  for (int32_t r = 0; r < a.rows && failures < 5; ++r)
    for (int64_t c = 0; c < n; ++c) {
      const double got =
          cuda::storedToDouble(t, &y[(size_t(r) * ldy + c) * eb]);
      const size_t k = size_t(r) * n + c;
      const double tol =
          bound(t, merged, a.rowPtr[r + 1] - a.rowPtr[r], absSum[k], ref[k]);
      if (!(std::abs(got - ref[k]) <= tol)) {
        ADD_FAILURE() << "Y[" << r << "][" << c << "] = " << got
                      << ", reference " << ref[k] << ", bound " << tol;
        ++failures;
      }
    }
}

/// exactFp32: the format's PreprocessOptions::exactFp32 (fp32 data), held to
/// fp32 FMA rounding alone (no TF32 input rounding in the bound).
void runSddmmCase(const Shape &s, DataType t, float threshold,
                  int32_t partBlocks, int64_t k, uint32_t seed, bool padded,
                  cuda::RowOrder order, bool exactFp32 = false) {
  SCOPED_TRACE(::testing::Message()
               << cuda::dataTypeName(t) << " rows=" << s.rows << " k=" << k
               << " threshold=" << threshold << " padded=" << padded
               << " order=" << int(order));
  std::mt19937 rng(seed);
  const CsrMatrix<double> a = randomMatrix(s, t, rng);
  DeviceCsr d;
  upload(a, t, d);
  const cuda::PreprocessOptions opt =
      options(threshold, partBlocks, order, exactFp32);
  cuda::WindowFormat f;
  ASSERT_CUDA(cuda::buildWindowFormat(a.rows, a.cols, a.nnz(), d.rowPtr, d.col,
                                      nullptr, t, opt, f));
  // These matrices are small: SDDMM's own piece is 4 blocks.
  EXPECT_EQ(f.sddmmSlices, (partBlocks + 3) / 4);
  const int64_t ld = padded ? k + 1 : k;
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(size_t(a.rows) * ld), y(size_t(a.cols) * ld);
  for (double &v : x)
    v = cuda::roundToStored(t, u(rng));
  for (double &v : y)
    v = cuda::roundToStored(t, u(rng));
  const auto xp = pack(t, x), yp = pack(t, y);
  const size_t eb = cuda::dataTypeBytes(t);
  void *dx, *dy, *ob, *oe;
  ASSERT_CUDA(cudaMalloc(&dx, xp.size()));
  ASSERT_CUDA(cudaMalloc(&dy, yp.size()));
  ASSERT_CUDA(
      cudaMalloc(&ob, std::max<size_t>(1, size_t(f.numBlocks) * 64 * eb)));
  ASSERT_CUDA(
      cudaMalloc(&oe, std::max<size_t>(1, size_t(f.numCudaEntries) * eb)));
  ASSERT_CUDA(cudaMemcpy(dx, xp.data(), xp.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(dy, yp.data(), yp.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(ob, 0xff, size_t(f.numBlocks) * 64 * eb));
  ASSERT_CUDA(cudaMemset(oe, 0xff, size_t(f.numCudaEntries) * eb));
  ASSERT_CUDA(cuda::sddmm(f, dx, ld, dy, ld, k, ob, oe));
  std::vector<cuda::DecodedEntry> dec;
  ASSERT_CUDA(cuda::decodeWindowFormat(f, ob, oe, dec));
  cudaFree(dx), cudaFree(dy), cudaFree(ob), cudaFree(oe);

  // One output per distinct (row, col), in canonical order.
  const CsrMatrix<double> canon = canonicalizeCsr(a);
  ASSERT_EQ(int64_t(dec.size()), canon.nnz());
  std::vector<double> ref(canon.nnz()), absRef(canon.nnz());
  sddmmReference(canon, x.data(), ld, y.data(), ld, k, ref.data());
  std::vector<double> ax(x.size()), ay(y.size());
  for (size_t i = 0; i < x.size(); ++i)
    ax[i] = std::abs(x[i]);
  for (size_t i = 0; i < y.size(); ++i)
    ay[i] = std::abs(y[i]);
  sddmmReference(canon, ax.data(), ld, ay.data(), ld, k, absRef.data());
  int failures = 0;
  for (int32_t r = 0, e = 0; r < canon.rows; ++r)
    for (; e < canon.rowPtr[r + 1] && failures < 5; ++e) {
      ASSERT_EQ(dec[e].row, r);
      ASSERT_EQ(dec[e].col, canon.colIdx[e]);
      const double tol =
          exactFp32 ? 2 * double(k + 1) * std::ldexp(1.0, -24) * absRef[e] +
                          std::ldexp(1.0, -24) * std::abs(ref[e]) +
                          std::ldexp(1.0, -150)
                    : bound(t, false, k, absRef[e], ref[e]);
      if (!(std::abs(dec[e].value - ref[e]) <= tol)) {
        ADD_FAILURE() << "entry (" << r << "," << dec[e].col
                      << ") = " << dec[e].value << ", reference " << ref[e]
                      << ", bound " << tol;
        ++failures;
      }
    }
}

const DataType kTypes[] = {DataType::F32, DataType::F16, DataType::BF16};
const cuda::RowOrder kOrders[] = {cuda::RowOrder::Natural,
                                  cuda::RowOrder::Clustered};

TEST_F(SparseCuda, SpmmMatchesReferenceAcrossWidthsAndPaths) {
  const Shape shapes[] = {
      {203, 190, 6, true, true, true,
       false}, // rows % 8 != 0, empty/dense rows, duplicates
      {256, 256, 12, false, false, false, true}, // dense 8x1 vectors
  };
  uint32_t seed = 1;
  for (const Shape &s : shapes)
    for (DataType t : kTypes)
      for (float threshold : {0.0f, 1.5f, 1e9f})
        for (int64_t n : {1, 7, 13, 16, 32, 40, 64, 100, 128, 256})
          for (bool padded : {true, false})
            for (cuda::RowOrder order : kOrders)
              runSpmmCase(s, t, threshold, 0, n, seed++, padded, order);
}

TEST_F(SparseCuda, SpmmSplitWindowsAccumulateCorrectly) {
  // partBlocks = 1 cuts every window with more than one block (or 8 CUDA-core
  // entries) into several parts that meet in the fp32 workspace.
  const Shape s{120, 300, 20, true, true, true, true};
  uint32_t seed = 100;
  for (DataType t : kTypes)
    for (float threshold : {0.0f, 1.5f, 1e9f})
      for (int64_t n : {8, 33, 128})
        for (bool padded : {true, false})
          for (cuda::RowOrder order : kOrders)
            runSpmmCase(s, t, threshold, 1, n, seed++, padded, order);
}

TEST_F(SparseCuda, SddmmMatchesReference) {
  const Shape shapes[] = {
      {203, 190, 6, true, true, true, false},
      {256, 256, 12, false, false, false, true},
  };
  uint32_t seed = 200;
  for (const Shape &s : shapes)
    for (DataType t : kTypes)
      for (float threshold : {0.0f, 1.5f, 1e9f})
        // Packed k = 16 ... 512 reach every fixed-width CUDA-core variant
        // (4 to 64 16-byte pieces per row) of both element sizes.
        for (int64_t k : {1, 5, 16, 32, 48, 64, 128, 256, 512})
          for (bool padded : {true, false})
            for (cuda::RowOrder order : kOrders)
              // 16 blocks a part: each part is cut among 4 warps
              // (WindowFormat::sddmmSlices).
              for (int32_t partBlocks : {2, 16})
                runSddmmCase(s, t, threshold, partBlocks, k, seed++, padded,
                             order);
}

// The CUDA program's --fp32 build (backends/cuda/kernels/Sparse.cu): every
// window on CUDA cores and SDDMM on fp32 FMAs at every k, including the
// one-round k whose CUDA-core windows otherwise run on TF32 tensor cores.
TEST_F(SparseCuda, SddmmExactFp32StaysOffTf32) {
  const Shape s{203, 190, 6, true, true, true, false};
  uint32_t seed = 900;
  for (int64_t k : {5, 16, 32, 64, 128, 256})
    for (bool padded : {true, false})
      runSddmmCase(s, DataType::F32, 1e30f, 16, k, seed++, padded,
                   cuda::RowOrder::Natural, true);
}

TEST_F(SparseCuda, EmptyMatrixWritesZeros) {
  const int32_t rows = 21, cols = 5;
  std::vector<int32_t> rowPtr(rows + 1, 0);
  int32_t *dRowPtr;
  ASSERT_CUDA(cudaMalloc(&dRowPtr, 4 * rowPtr.size()));
  ASSERT_CUDA(cudaMemcpy(dRowPtr, rowPtr.data(), 4 * rowPtr.size(),
                         cudaMemcpyHostToDevice));
  cuda::WindowFormat f;
  ASSERT_CUDA(cuda::buildWindowFormat(rows, cols, 0, dRowPtr, nullptr, nullptr,
                                      DataType::F32, {}, f));
  EXPECT_EQ(f.nnz, 0);
  EXPECT_EQ(f.numParts,
            (rows + 7) /
                8); // one (empty) part per window, so every row is written
  float *dx, *dy;
  ASSERT_CUDA(cudaMalloc(&dx, 4 * cols * 16));
  ASSERT_CUDA(cudaMalloc(&dy, 4 * rows * 16));
  ASSERT_CUDA(cudaMemset(dy, 0xff, 4 * rows * 16));
  ASSERT_CUDA(cuda::spmm(f, dx, 16, 16, dy, 16, nullptr));
  std::vector<float> y(rows * 16);
  ASSERT_CUDA(cudaMemcpy(y.data(), dy, 4 * y.size(), cudaMemcpyDeviceToHost));
  for (float v : y)
    ASSERT_EQ(v, 0.0f);
  cudaFree(dRowPtr), cudaFree(dx), cudaFree(dy);
}

TEST_F(SparseCuda, BadColumnIndexIsRejected) {
  const std::vector<int32_t> rowPtr = {0, 1, 2}, col = {0, 7};
  int32_t *dRowPtr, *dCol;
  ASSERT_CUDA(cudaMalloc(&dRowPtr, 12));
  ASSERT_CUDA(cudaMalloc(&dCol, 8));
  ASSERT_CUDA(cudaMemcpy(dRowPtr, rowPtr.data(), 12, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(dCol, col.data(), 8, cudaMemcpyHostToDevice));
  cuda::WindowFormat f;
  EXPECT_EQ(cuda::buildWindowFormat(2, 4, 2, dRowPtr, dCol, nullptr,
                                    DataType::F16, {}, f),
            cudaErrorInvalidValue);
  cudaFree(dRowPtr), cudaFree(dCol);
}

/// A random matrix of shape s (seed 7, values of type t) and its W8 format
/// built with the default options.
void buildRandom(const Shape &s, DataType t, CsrMatrix<double> &a,
                 cuda::WindowFormat &f) {
  std::mt19937 rng(7);
  a = randomMatrix(s, t, rng);
  DeviceCsr d;
  upload(a, t, d);
  ASSERT_CUDA(cuda::buildWindowFormat(a.rows, a.cols, a.nnz(), d.rowPtr, d.col,
                                      d.val, t, {}, f));
}

/// Builds the format of an all-ones pattern given as column lists per row.
void buildPattern(const std::vector<std::vector<int32_t>> &rowCols,
                  int32_t cols, cuda::RowOrder order, cuda::WindowFormat &f) {
  CsrMatrix<double> a;
  a.rows = int32_t(rowCols.size()), a.cols = cols;
  a.rowPtr.push_back(0);
  for (const auto &r : rowCols) {
    for (int32_t c : r)
      a.colIdx.push_back(c), a.values.push_back(1.0);
    a.rowPtr.push_back(int32_t(a.colIdx.size()));
  }
  DeviceCsr d;
  upload(a, DataType::F16, d);
  cuda::PreprocessOptions opt;
  opt.rowOrder = order;
  ASSERT_CUDA(cuda::buildWindowFormat(a.rows, a.cols, a.nnz(), d.rowPtr, d.col,
                                      d.val, DataType::F16, opt, f));
}

TEST_F(SparseCuda, AutoRowOrderGroupsRowsSharingColumns) {
  // 64 rows: even rows use columns 0..15, odd rows 100..115. Naturally every
  // window mixes both sets: 8 windows x 32 vectors = 256. Clustered, rows are
  // sorted by their two lowest-ranked columns ((0, 1) for even rows, (16, 17)
  // for odd ones: all 32 used columns have degree 32 and rank in column order),
  // so windows hold one parity: 8 x 16 = 128 vectors, half as many.
  std::vector<std::vector<int32_t>> rowCols(64);
  for (int32_t r = 0; r < 64; ++r)
    for (int32_t j = 0; j < 16; ++j)
      rowCols[r].push_back((r % 2) * 100 + j);
  cuda::WindowFormat f;
  buildPattern(rowCols, 116, cuda::RowOrder::Auto, f);
  EXPECT_EQ(f.naturalVectors, 256);
  EXPECT_EQ(f.clusteredVectors, 128);
  EXPECT_TRUE(f.clustered);
  EXPECT_EQ(f.numVectors, 128);
  // Read back in the matrix's own row numbering.
  std::vector<cuda::DecodedEntry> dec;
  ASSERT_CUDA(cuda::decodeWindowFormat(f, f.dBlockVals, f.dEntVals, dec));
  ASSERT_EQ(dec.size(), size_t(64 * 16));
  for (size_t i = 0; i < dec.size(); ++i) {
    EXPECT_EQ(dec[i].row, int32_t(i / 16));
    EXPECT_EQ(dec[i].col, (dec[i].row % 2) * 100 + int32_t(i % 16));
  }
  // Only some rows: exactly their entries.
  const std::vector<int32_t> some = {3, 8, 63};
  ASSERT_CUDA(
      cuda::decodeWindowFormat(f, f.dBlockVals, f.dEntVals, dec, &some));
  ASSERT_EQ(dec.size(), size_t(3 * 16));
  for (size_t i = 0; i < dec.size(); ++i)
    EXPECT_EQ(dec[i].row, some[i / 16]);
}

TEST_F(SparseCuda, BuildReportsItsTransientPeak) {
  // 4096 x 4096, 16 random columns a row: the Auto order sorts both orders.
  // The build frees each order's sorted copy and its sort storage once
  // merged, and the order it does not keep before the format's arrays: its
  // scratch peaks at about 56 B an entry while the second order sorts, or at
  // 20 B an entry and 36 a CUDA-core entry at the end (docs/sparse-kernels.md
  // "Memory"); keeping everything to the end held 88 + 36.
  CsrMatrix<double> a;
  cuda::WindowFormat f;
  buildRandom({4096, 4096, 16, false, false, false, false}, DataType::F16, a,
              f);
  const int64_t n = a.nnz(), windows = f.numWindows;
  EXPECT_GE(f.buildScratchBytes, 36 * n); // one order's sort at least
  EXPECT_LE(f.buildScratchBytes, std::max(56 * n + 32 * 4096 + 44 * 4096,
                                          20 * n + 36 * f.numCudaEntries) +
                                     40 * windows +
                                     (int64_t(1) << 20)); // cub's own, small
  // The arrays as allocated: every CUDA-core entry 6 B, parts 16 B.
  EXPECT_GE(cuda::deviceBytes(f), 6 * f.numCudaEntries + 16 * f.numParts);
}

TEST_F(SparseCuda, AutoRowOrderKeepsTridiagonalNatural) {
  // Tridiagonal 64 x 64: window w's vectors are columns 8w-1 ... 8w+8, clipped:
  // 8 x 10 - 2 = 78. The clustered order (rows by their lowest-ranked columns)
  // is the natural one up to a swap near row 0 and gives 78 too: not 5% fewer,
  // so Auto keeps the natural order.
  std::vector<std::vector<int32_t>> rowCols(64);
  for (int32_t r = 0; r < 64; ++r)
    for (int32_t c = r - 1; c <= r + 1; ++c)
      if (c >= 0 && c < 64)
        rowCols[r].push_back(c);
  cuda::WindowFormat f;
  buildPattern(rowCols, 64, cuda::RowOrder::Auto, f);
  EXPECT_EQ(f.naturalVectors, 78);
  EXPECT_EQ(f.clusteredVectors, 78);
  EXPECT_FALSE(f.clustered);
  EXPECT_EQ(f.dRowOfSlot, nullptr);
}

TEST_F(SparseCuda, DecodeReturnsMergedEntries) {
  CsrMatrix<double> a;
  cuda::WindowFormat f;
  buildRandom({64, 64, 10, true, false, true, true}, DataType::F32, a, f);
  std::vector<cuda::DecodedEntry> dec;
  ASSERT_CUDA(cuda::decodeWindowFormat(f, f.dBlockVals, f.dEntVals, dec));
  const CsrMatrix<double> canon = canonicalizeCsr(a);
  ASSERT_EQ(int64_t(dec.size()), canon.nnz());
  for (int32_t r = 0, e = 0; r < canon.rows; ++r)
    for (; e < canon.rowPtr[r + 1]; ++e) {
      EXPECT_EQ(dec[e].row, r);
      EXPECT_EQ(dec[e].col, canon.colIdx[e]);
      // Tensor-core values are stored rounded to TF32 (relative 2^-11), merged
      // sums in fp32.
      EXPECT_NEAR(dec[e].value, canon.values[e],
                  std::abs(canon.values[e]) * 1e-3 + 1e-6);
    }
}

} // namespace
