// CSR -> W8 preprocessing on the GPU, and the format's lifetime and read-back.
//
// Steps (all on the device): expand CSR to 64-bit keys (window << 34 | col << 3
// | row-in-window) with fp32 values; radix sort; merge duplicate keys (values
// add up); mark the first entry of each (window, col) vector and scan to vector
// ids; find each window's first entry and vector; choose tensor cores or CUDA
// cores per window; scan block and entry counts; cut windows into parts;
// scatter entries into blocks (B-fragment order) or the CUDA-core entry list.
#include "backends/cuda/sparse/BuildScratch.cuh"
#include "backends/cuda/sparse/DeviceHelpers.cuh"
#include "backends/cuda/sparse/WindowFormat.h"

#include <algorithm>
#include <cstring>
#include <cub/cub.cuh>
#include <cuda/std/functional>
#include <utility>

namespace autoddl::sparse::cuda {

size_t dataTypeBytes(DataType t) { return t == DataType::F32 ? 4 : 2; }

double storedToDouble(DataType t, const void *p) {
  if (t == DataType::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  if (t == DataType::F16)
    return double(__half2float(__ushort_as_half(bits)));
  const uint32_t wide = uint32_t(bits) << 16; // bf16 is the top half of an fp32
  float v;
  std::memcpy(&v, &wide, 4);
  return v;
}

double roundToStored(DataType t, double v) {
  if (t == DataType::F16)
    return __half2float(__float2half_rn(float(v)));
  if (t == DataType::BF16)
    return __bfloat162float(__float2bfloat16_rn(float(v)));
  return float(v);
}

const char *dataTypeName(DataType t) {
  return t == DataType::F32 ? "fp32" : t == DataType::F16 ? "fp16" : "bf16";
}

WindowFormat::WindowFormat(WindowFormat &&other) noexcept {
  *this = std::move(other);
}

WindowFormat &WindowFormat::operator=(WindowFormat &&other) noexcept {
  if (this == &other)
    return *this;
  release();
  std::memcpy(static_cast<void *>(this), &other, sizeof(WindowFormat));
  std::memset(static_cast<void *>(&other), 0, sizeof(WindowFormat));
  other.dtype = DataType::F32;
  return *this;
}

WindowFormat::~WindowFormat() { release(); }

void WindowFormat::release() {
  for (void *p :
       {(void *)dParts, (void *)dSplitWindows, (void *)dSplitParts,
        (void *)dRowOfSlot, (void *)dBlockCols, (void *)dBlockMask, dBlockVals,
        (void *)dEntColRow, dEntVals, (void *)dCudaRowPtr})
    if (p)
      cudaFree(p);
  dParts = nullptr, dSplitWindows = nullptr, dSplitParts = nullptr;
  dRowOfSlot = nullptr, dBlockCols = nullptr;
  dBlockMask = nullptr, dBlockVals = nullptr, dEntColRow = nullptr,
  dEntVals = nullptr, dCudaRowPtr = nullptr;
}

namespace {

using detail::Elem;
using detail::exclusiveScan;
using detail::gridFor;
using detail::readBack;
using detail::Scratch;
using detail::sortPairs;

constexpr int kColShift = 3;
constexpr int kWindowShift = 34; // col < 2^31 fits in bits 3..33

__global__ void expandKernel(int32_t rows, int32_t cols, const int32_t *rowPtr,
                             const int32_t *colIdx, const void *val,
                             DataType dtype, const int32_t *slotOfRow,
                             uint64_t *keys, float *vals, int *badIndex) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows)
    return;
  const int64_t slot = slotOfRow ? slotOfRow[warp] : warp;
  const uint64_t rowKey = (uint64_t(slot >> 3) << kWindowShift) | (slot & 7);
  for (int64_t e = rowPtr[warp] + lane; e < rowPtr[warp + 1]; e += 32) {
    const int32_t c = colIdx[e];
    if (c < 0 || c >= cols)
      atomicExch(badIndex, 1);
    keys[e] = rowKey | (uint64_t(uint32_t(c)) << kColShift);
    vals[e] = val ? detail::loadAsFloat(dtype, val, e) : 1.0f;
  }
}

// --- Clustered row order (RowOrder::Clustered) ---

constexpr uint32_t kNoRank = (1u << 28) - 1; // ranks < cols < 2^28

__global__ void columnCountKernel(int64_t nnz, int32_t cols,
                                  const int32_t *colIdx, uint32_t *count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= nnz)
    return;
  const int32_t c = colIdx[i];
  if (c >= 0 && c < cols)
    atomicAdd(count + c, 1u);
}

/// key[i] = ~count[i] (descending count in an ascending sort), id[i] = i.
__global__ void descendingKeyKernel(int32_t n, const uint32_t *count,
                                    uint32_t *key, int32_t *id) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    key[i] = ~count[i], id[i] = i;
}

__global__ void rankKernel(int32_t n, const int32_t *sortedCols,
                           uint32_t *rank) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    rank[sortedCols[i]] = uint32_t(i);
}

/// Two smallest of {a1 <= a2} and {b1 <= b2}.
__device__ __forceinline__ void mergeTwoSmallest(uint32_t &a1, uint32_t &a2,
                                                 uint32_t b1, uint32_t b2) {
  const uint32_t lo = detail::minOf(a1, b1);
  a2 = detail::minOf(detail::maxOf(a1, b1), detail::minOf(a2, b2));
  a1 = lo;
}

/// One warp per row: sort key (rank of its highest-degree column, rank of the
/// second, 255 - min(degree, 255)) and id = row.
__global__ void rowSignatureKernel(int32_t rows, int32_t cols,
                                   const int32_t *rowPtr, const int32_t *colIdx,
                                   const uint32_t *rank, uint64_t *key,
                                   int32_t *id) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows)
    return;
  const int32_t e0 = rowPtr[warp], e1 = rowPtr[warp + 1];
  uint32_t m1 = kNoRank, m2 = kNoRank;
  for (int32_t e = e0 + lane; e < e1; e += 32) {
    const int32_t c = colIdx[e];
    if (c >= 0 && c < cols)
      mergeTwoSmallest(m1, m2, rank[c], kNoRank);
  }
  for (int off = 16; off > 0; off /= 2) {
    const uint32_t o1 = __shfl_xor_sync(0xffffffffu, m1, off);
    const uint32_t o2 = __shfl_xor_sync(0xffffffffu, m2, off);
    mergeTwoSmallest(m1, m2, o1, o2);
  }
  if (lane == 0) {
    const uint32_t deg = uint32_t(detail::minOf(e1 - e0, 255));
    key[warp] = (uint64_t(m1) << 36) | (uint64_t(m2) << 8) | (255u - deg);
    id[warp] = int32_t(warp);
  }
}

/// rowOfSlot for all numSlots slots (rows for padding) and its inverse.
__global__ void slotKernel(int32_t rows, int32_t numSlots,
                           const int32_t *sortedRows, int32_t *rowOfSlot,
                           int32_t *slotOfRow) {
  const int32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= numSlots)
    return;
  const int32_t row = s < rows ? sortedRows[s] : rows;
  rowOfSlot[s] = row;
  if (s < rows)
    slotOfRow[row] = s;
}

__global__ void vectorHeadKernel(int64_t n, const uint64_t *keys,
                                 int32_t *head) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    head[i] = i == 0 || (keys[i] >> kColShift) != (keys[i - 1] >> kColShift);
}

/// entStart[w] = first entry of window w (numWindows + 1 entries, last = n).
__global__ void windowStartKernel(int64_t n, int32_t numWindows,
                                  const uint64_t *keys, int32_t *entStart) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const int32_t w = int32_t(keys[i] >> kWindowShift);
  const int32_t prev = i == 0 ? -1 : int32_t(keys[i - 1] >> kWindowShift);
  for (int32_t ww = prev + 1; ww <= w; ++ww)
    entStart[ww] = int32_t(i);
  if (i == n - 1)
    for (int32_t ww = w + 1; ww <= numWindows; ++ww)
      entStart[ww] = int32_t(n);
}

/// Per window: vector start, tensor-core choice, block and CUDA-entry counts.
__global__ void windowPlanKernel(int32_t numWindows, int64_t n,
                                 const int32_t *entStart,
                                 const int32_t *vecIdIncl, float threshold,
                                 int32_t *vecStart, int32_t *numBlocks,
                                 int32_t *numCuda) {
  const int32_t w = blockIdx.x * blockDim.x + threadIdx.x;
  if (w > numWindows)
    return;
  const int32_t e0 = entStart[w];
  // vecIdIncl is the inclusive scan of heads: vector id of entry e is
  // vecIdIncl[e] - 1.
  vecStart[w] = e0 < n ? vecIdIncl[e0] - 1 : (n ? vecIdIncl[n - 1] : 0);
  if (w == numWindows)
    return;
  const int32_t e1 = entStart[w + 1];
  const int32_t nnz = e1 - e0;
  const int32_t nvec =
      (e1 < n ? vecIdIncl[e1] - 1 : (n ? vecIdIncl[n - 1] : 0)) - vecStart[w];
  const bool tc = nvec > 0 && float(nnz) >= threshold * float(nvec);
  numBlocks[w] = tc ? (nvec + 7) / 8 : 0;
  numCuda[w] = tc ? 0 : nnz;
}

__global__ void partCountKernel(int32_t numWindows, const int32_t *numBlocks,
                                const int32_t *numCuda, int32_t partBlocks,
                                int32_t *numParts, int32_t *isSplit) {
  const int32_t w = blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= numWindows)
    return;
  const int32_t units =
      numBlocks[w] ? numBlocks[w] : (numCuda[w] + 7) / 8; // 8 entries ~ 1 block
  const int32_t parts = detail::maxOf(1, (units + partBlocks - 1) / partBlocks);
  numParts[w] = parts;
  isSplit[w] = parts > 1;
}

__global__ void partFillKernel(int32_t numWindows, const int32_t *numBlocks,
                               const int32_t *numCuda,
                               const int32_t *blockStart,
                               const int32_t *cudaStart,
                               const int32_t *partStart,
                               const int32_t *splitSlot, const int32_t *isSplit,
                               int32_t partBlocks, WindowPart *parts,
                               int32_t *splitWindows, int32_t *splitParts) {
  const int32_t w = blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= numWindows)
    return;
  const bool cudaPath = numBlocks[w] == 0 && numCuda[w] > 0;
  const int32_t begin = cudaPath ? cudaStart[w] : blockStart[w];
  const int32_t count = cudaPath ? numCuda[w] : numBlocks[w];
  const int32_t step = cudaPath ? partBlocks * 8 : partBlocks;
  const int32_t slotFlag = isSplit[w] ? (splitSlot[w] + 1) << 1 : 0;
  int32_t p = partStart[w];
  if (isSplit[w]) {
    splitWindows[splitSlot[w]] = w;
    splitParts[splitSlot[w]] = partStart[w + 1] - p;
  }
  for (int32_t b = 0; b == 0 || b < count; b += step, ++p) {
    WindowPart part;
    part.begin = begin + b;
    part.end = begin + detail::minOf(count, b + step);
    part.window = w;
    part.flags = (cudaPath ? 1 : 0) | slotFlag;
    parts[p] = part;
  }
}

/// Position of (row r, vector slot s) inside a block's 64 values: the order in
/// which lane (g = r, t) of the m16n8k8 B fragment reads them
/// (docs/sparse-kernels.md).
__device__ __forceinline__ int fragmentPos(DataType dtype, int r, int s) {
  // 16-bit: lane 4r + s/2 holds slots (s & ~1, s | 1) -> row-major 8x8.
  // TF32: lane 4r + s%4 holds slots (s%4, s%4 + 4).
  return dtype == DataType::F32 ? r * 8 + (s % 4) * 2 + s / 4 : r * 8 + s;
}

__global__ void scatterKernel(int64_t n, DataType dtype, const uint64_t *keys,
                              const float *vals, const int32_t *head,
                              const int32_t *vecIdIncl, const int32_t *entStart,
                              const int32_t *vecStart, const int32_t *numBlocks,
                              const int32_t *blockStart,
                              const int32_t *cudaStart, int32_t *blockCols,
                              unsigned long long *blockMask, void *blockVals,
                              uint64_t *cudaKeys, float *cudaVals) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const uint64_t key = keys[i];
  const int32_t w = int32_t(key >> kWindowShift);
  const int32_t col = int32_t((key >> kColShift) & 0x7fffffffu);
  const int32_t r = int32_t(key & 7);
  const float v = vals[i];
  if (numBlocks[w] > 0) {
    const int32_t vec = vecIdIncl[i] - 1 - vecStart[w];
    const int64_t blk = blockStart[w] + vec / 8;
    const int s = vec % 8;
    if (head[i])
      blockCols[blk * 8 + s] = col;
    atomicOr(blockMask + blk, 1ull << (r * 8 + s));
    const int64_t pos = blk * 64 + fragmentPos(dtype, r, s);
    if (dtype == DataType::F32)
      static_cast<float *>(blockVals)[pos] = __uint_as_float(detail::toTf32(v));
    else if (dtype == DataType::F16)
      static_cast<__half *>(blockVals)[pos] = __float2half_rn(v);
    else
      static_cast<__nv_bfloat16 *>(blockVals)[pos] = __float2bfloat16_rn(v);
  } else {
    // CUDA-core entries are re-sorted by (window, row, col) afterwards
    // (cudaEntryKernel).
    const int64_t j = cudaStart[w] + (i - entStart[w]);
    cudaKeys[j] =
        (uint64_t(w) << kWindowShift) | (uint64_t(r) << 31) | uint32_t(col);
    cudaVals[j] = v;
  }
}

/// Writes the row-sorted CUDA-core entries and the per-row entry pointers.
__global__ void cudaEntryKernel(int64_t n, int32_t rows, DataType dtype,
                                const uint64_t *keys, const float *vals,
                                int32_t *entColRow, void *entVals,
                                int32_t *rowPtr) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n)
    return;
  auto rowOf = [](uint64_t k) {
    return int32_t(k >> kWindowShift) * 8 + int32_t((k >> 31) & 7);
  };
  const uint64_t key = keys[j];
  const int32_t col = int32_t(key & 0x7fffffffu), r = int32_t((key >> 31) & 7);
  entColRow[j] = (col << 3) | r;
  const float v = vals[j];
  if (dtype == DataType::F32)
    static_cast<float *>(entVals)[j] = v;
  else if (dtype == DataType::F16)
    static_cast<__half *>(entVals)[j] = __float2half_rn(v);
  else
    static_cast<__nv_bfloat16 *>(entVals)[j] = __float2bfloat16_rn(v);
  const int32_t row = rowOf(key);
  const int32_t prev = j == 0 ? -1 : rowOf(keys[j - 1]);
  for (int32_t q = prev + 1; q <= row; ++q)
    rowPtr[q] = int32_t(j);
  if (j == n - 1)
    for (int32_t q = row + 1; q <= rows; ++q)
      rowPtr[q] = int32_t(n);
}

} // namespace

cudaError_t buildWindowFormat(int32_t rows, int32_t cols, int64_t nnzIn,
                              const int32_t *dRowPtr, const int32_t *dColIdx,
                              const void *dVal, DataType dtype,
                              const PreprocessOptions &options,
                              WindowFormat &out, cudaStream_t stream) {
  if (rows < 0 || cols < 0 || rows >= (1 << 28) || cols >= (1 << 28) ||
      nnzIn < 0 || nnzIn >= (int64_t(1) << 31))
    return cudaErrorInvalidValue;
  out.release();
  WindowFormat f;
  f.dtype = dtype;
  f.rows = rows;
  f.cols = cols;
  f.numWindows = (rows + 7) / 8;
  f.fillThreshold = options.fillThreshold;
  f.exactFp32 = options.exactFp32;
  const int32_t numWindows = f.numWindows;
  Scratch s;

  int endBit = kWindowShift + 1;
  while ((int64_t(1) << (endBit - kWindowShift)) <= numWindows)
    ++endBit;

  // Steps 1-3 for one row order (slotOfRow null: natural).
  struct Entries {
    uint64_t *keys = nullptr;     // distinct (window, col, row) keys, sorted
    float *vals = nullptr;        // their fp32 values (duplicates summed)
    int32_t *head = nullptr;      // 1 where a (window, col) vector starts
    int32_t *vecIdIncl = nullptr; // inclusive scan of head
    int64_t n = 0, vectors = 0;
  };
  auto sortEntries = [&](const int32_t *slotOfRow,
                         Entries &out) -> cudaError_t {
    // 1. Keys and fp32 values, then sort by (window, col, row).
    uint64_t *keys, *sortedKeys;
    float *vals, *sortedVals;
    int *badIndex;
    AUTODDL_TRY(s.alloc(keys, nnzIn));
    AUTODDL_TRY(s.alloc(sortedKeys, nnzIn));
    AUTODDL_TRY(s.alloc(vals, nnzIn));
    AUTODDL_TRY(s.alloc(sortedVals, nnzIn));
    AUTODDL_TRY(s.alloc(badIndex, 1));
    AUTODDL_TRY(cudaMemsetAsync(badIndex, 0, sizeof(int), stream));
    if (rows > 0)
      expandKernel<<<gridFor(int64_t(rows) * 32, 256), 256, 0, stream>>>(
          rows, cols, dRowPtr, dColIdx, dVal, dtype, slotOfRow, keys, vals,
          badIndex);
    AUTODDL_TRY(cudaGetLastError());
    int bad = 0;
    AUTODDL_TRY(readBack(badIndex, bad, stream));
    if (bad)
      return cudaErrorInvalidValue;
    uint8_t *sortTmp = nullptr;
    AUTODDL_TRY(sortPairs(s, keys, sortedKeys, vals, sortedVals, nnzIn, endBit,
                          stream, &sortTmp));
    // 2. Merge duplicates: keys/vals now hold the distinct entries.
    int64_t *numRuns;
    AUTODDL_TRY(s.alloc(numRuns, 1));
    {
      size_t bytes = 0;
      AUTODDL_TRY(cub::DeviceReduce::ReduceByKey(
          nullptr, bytes, sortedKeys, keys, sortedVals, vals, numRuns,
          ::cuda::std::plus<float>{}, nnzIn, stream));
      uint8_t *tmp;
      AUTODDL_TRY(s.alloc(tmp, bytes));
      AUTODDL_TRY(cub::DeviceReduce::ReduceByKey(
          tmp, bytes, sortedKeys, keys, sortedVals, vals, numRuns,
          ::cuda::std::plus<float>{}, nnzIn, stream));
    }
    int64_t n = 0;
    if (nnzIn > 0) { // the merge is done: the sorted copies and the sort go
      AUTODDL_TRY(readBack(numRuns, n, stream));
      for (const void *p : {(const void *)sortedKeys, (const void *)sortedVals,
                            (const void *)sortTmp})
        s.free(p);
    }
    // 3. Vectors: heads and inclusive vector ids.
    int32_t *head, *vecIdIncl;
    AUTODDL_TRY(s.alloc(head, n));
    AUTODDL_TRY(s.alloc(vecIdIncl, n));
    int32_t vectors = 0;
    if (n > 0) {
      vectorHeadKernel<<<gridFor(n, 256), 256, 0, stream>>>(n, keys, head);
      AUTODDL_TRY(cudaGetLastError());
      size_t bytes = 0;
      AUTODDL_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, head, vecIdIncl,
                                                n, stream));
      uint8_t *tmp;
      AUTODDL_TRY(s.alloc(tmp, bytes));
      AUTODDL_TRY(cub::DeviceScan::InclusiveSum(tmp, bytes, head, vecIdIncl, n,
                                                stream));
      AUTODDL_TRY(readBack(vecIdIncl + (n - 1), vectors, stream));
    }
    out.keys = keys, out.vals = vals, out.head = head;
    out.vecIdIncl = vecIdIncl, out.n = n, out.vectors = vectors;
    return cudaSuccess;
  };

  // 0. Row order: the clustered permutation when asked for (or tried by Auto).
  Entries natural, clustered;
  int32_t *rowOfSlot = nullptr;
  const bool tryClustered =
      options.rowOrder != RowOrder::Natural && numWindows > 1 && nnzIn > 0;
  if (options.rowOrder != RowOrder::Clustered || !tryClustered) {
    AUTODDL_TRY(sortEntries(nullptr, natural));
    f.naturalVectors = natural.vectors;
  }
  if (tryClustered) {
    // Column ranks by descending degree, then rows sorted by their signature.
    uint32_t *colCount, *colKey, *colKeySorted, *rank;
    int32_t *colId, *colIdSorted;
    AUTODDL_TRY(s.alloc(colCount, cols));
    AUTODDL_TRY(s.alloc(colKey, cols));
    AUTODDL_TRY(s.alloc(colKeySorted, cols));
    AUTODDL_TRY(s.alloc(rank, cols));
    AUTODDL_TRY(s.alloc(colId, cols));
    AUTODDL_TRY(s.alloc(colIdSorted, cols));
    AUTODDL_TRY(
        cudaMemsetAsync(colCount, 0, sizeof(uint32_t) * size_t(cols), stream));
    columnCountKernel<<<gridFor(nnzIn, 256), 256, 0, stream>>>(
        nnzIn, cols, dColIdx, colCount);
    AUTODDL_TRY(cudaGetLastError());
    descendingKeyKernel<<<gridFor(cols, 256), 256, 0, stream>>>(cols, colCount,
                                                                colKey, colId);
    AUTODDL_TRY(cudaGetLastError());
    AUTODDL_TRY(sortPairs(s, colKey, colKeySorted, colId, colIdSorted, cols, 32,
                          stream));
    rankKernel<<<gridFor(cols, 256), 256, 0, stream>>>(cols, colIdSorted, rank);
    AUTODDL_TRY(cudaGetLastError());
    uint64_t *rowKey, *rowKeySorted;
    int32_t *rowId, *rowIdSorted, *slotOfRow;
    AUTODDL_TRY(s.alloc(rowKey, rows));
    AUTODDL_TRY(s.alloc(rowKeySorted, rows));
    AUTODDL_TRY(s.alloc(rowId, rows));
    AUTODDL_TRY(s.alloc(rowIdSorted, rows));
    AUTODDL_TRY(s.alloc(slotOfRow, rows));
    AUTODDL_TRY(s.alloc(rowOfSlot, int64_t(numWindows) * 8));
    rowSignatureKernel<<<gridFor(int64_t(rows) * 32, 256), 256, 0, stream>>>(
        rows, cols, dRowPtr, dColIdx, rank, rowKey, rowId);
    AUTODDL_TRY(cudaGetLastError());
    AUTODDL_TRY(sortPairs(s, rowKey, rowKeySorted, rowId, rowIdSorted, rows, 64,
                          stream));
    slotKernel<<<gridFor(int64_t(numWindows) * 8, 256), 256, 0, stream>>>(
        rows, numWindows * 8, rowIdSorted, rowOfSlot, slotOfRow);
    AUTODDL_TRY(cudaGetLastError());
    AUTODDL_TRY(sortEntries(slotOfRow, clustered));
    f.clusteredVectors = clustered.vectors;
  }
  // Auto keeps the clustered order only for at least 5% fewer vectors.
  f.clustered = tryClustered &&
                (options.rowOrder == RowOrder::Clustered ||
                 double(clustered.vectors) < 0.95 * double(natural.vectors));
  const Entries &chosen = f.clustered ? clustered : natural;
  for (const Entries *e : {&natural, &clustered}) // the other order's: done
    if (e != &chosen)
      for (const void *p : {(const void *)e->keys, (const void *)e->vals,
                            (const void *)e->head, (const void *)e->vecIdIncl})
        s.free(p);
  uint64_t *keys = chosen.keys;
  float *vals = chosen.vals;
  int32_t *head = chosen.head, *vecIdIncl = chosen.vecIdIncl;
  const int64_t n = chosen.n;
  f.nnz = n;
  if (f.clustered) {
    AUTODDL_TRY(
        cudaMalloc(&f.dRowOfSlot, sizeof(int32_t) * size_t(numWindows) * 8));
    AUTODDL_TRY(cudaMemcpyAsync(f.dRowOfSlot, rowOfSlot,
                                sizeof(int32_t) * size_t(numWindows) * 8,
                                cudaMemcpyDeviceToDevice, stream));
  }

  // 4. Windows: first entry, first vector, path choice, counts and their scans.
  int32_t *entStart, *vecStart, *numBlocks, *numCuda, *blockStart, *cudaStart;
  AUTODDL_TRY(s.alloc(entStart, numWindows + 1));
  AUTODDL_TRY(s.alloc(vecStart, numWindows + 1));
  AUTODDL_TRY(s.alloc(numBlocks, numWindows + 1));
  AUTODDL_TRY(s.alloc(numCuda, numWindows + 1));
  AUTODDL_TRY(s.alloc(blockStart, numWindows + 1));
  AUTODDL_TRY(s.alloc(cudaStart, numWindows + 1));
  if (n > 0) {
    windowStartKernel<<<gridFor(n, 256), 256, 0, stream>>>(n, numWindows, keys,
                                                           entStart);
  } else {
    AUTODDL_TRY(cudaMemsetAsync(entStart, 0, sizeof(int32_t) * (numWindows + 1),
                                stream));
  }
  AUTODDL_TRY(cudaGetLastError());
  AUTODDL_TRY(
      cudaMemsetAsync(numBlocks + numWindows, 0, sizeof(int32_t), stream));
  AUTODDL_TRY(
      cudaMemsetAsync(numCuda + numWindows, 0, sizeof(int32_t), stream));
  windowPlanKernel<<<gridFor(numWindows + 1, 256), 256, 0, stream>>>(
      numWindows, n, entStart, vecIdIncl, options.fillThreshold, vecStart,
      numBlocks, numCuda);
  AUTODDL_TRY(cudaGetLastError());
  AUTODDL_TRY(exclusiveScan(s, numBlocks, blockStart, numWindows + 1, stream));
  AUTODDL_TRY(exclusiveScan(s, numCuda, cudaStart, numWindows + 1, stream));
  int32_t totalBlocks = 0, totalCuda = 0, totalVectors = 0;
  AUTODDL_TRY(readBack(blockStart + numWindows, totalBlocks, stream));
  AUTODDL_TRY(readBack(cudaStart + numWindows, totalCuda, stream));
  AUTODDL_TRY(readBack(vecStart + numWindows, totalVectors, stream));
  f.numBlocks = totalBlocks;
  f.numCudaEntries = totalCuda;
  f.numTcEntries = n - totalCuda;
  f.numVectors = totalVectors;

  // 5. Parts: bounded work per warp.
  int device = 0, sms = 132;
  AUTODDL_TRY(cudaGetDevice(&device));
  AUTODDL_TRY(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t work = int64_t(totalBlocks) + (int64_t(totalCuda) + 7) / 8;
  // SDDMM's piece: about 128 per SM (several waves of warps), at least 4
  // blocks (32 entries) so that small matrices are not cut finer than a
  // warp's batch. SpMM's part: at least 16 blocks. A window cut into several
  // parts costs SpMM atomics and a finishing pass, and a warp's fixed cost
  // (its accumulators' stores) wants more blocks to spread over: on the small
  // real graphs (0.1-0.4 M nnz) parts of 16 blocks ran 1.3-2.2x faster than
  // parts of 4 (H200, N = 128 and 256, all precisions; 8 blocks: in between),
  // while SDDMM, which has no split windows, ran up to 1.3x slower with them.
  // So SDDMM cuts each part among sddmmSlices warps, about its own piece each
  // (which recovers part of it: the small graphs' SDDMM stayed 10-20% below
  // its time with parts of 4, docs/sparse-kernels.md "Results").
  const int32_t piece =
      int32_t(std::max<int64_t>(4, (work + sms * 128 - 1) / (sms * 128)));
  const int32_t partBlocks = options.partBlocks > 0
                                 ? options.partBlocks
                                 : std::max<int32_t>(16, piece);
  f.partBlocks = partBlocks;
  f.sddmmSlices = (partBlocks + piece - 1) / piece;
  int32_t *numParts, *isSplit, *partStart, *splitSlot;
  AUTODDL_TRY(s.alloc(numParts, numWindows + 1));
  AUTODDL_TRY(s.alloc(isSplit, numWindows + 1));
  AUTODDL_TRY(s.alloc(partStart, numWindows + 1));
  AUTODDL_TRY(s.alloc(splitSlot, numWindows + 1));
  AUTODDL_TRY(
      cudaMemsetAsync(numParts + numWindows, 0, sizeof(int32_t), stream));
  AUTODDL_TRY(
      cudaMemsetAsync(isSplit + numWindows, 0, sizeof(int32_t), stream));
  partCountKernel<<<gridFor(numWindows, 256), 256, 0, stream>>>(
      numWindows, numBlocks, numCuda, partBlocks, numParts, isSplit);
  AUTODDL_TRY(cudaGetLastError());
  AUTODDL_TRY(exclusiveScan(s, numParts, partStart, numWindows + 1, stream));
  AUTODDL_TRY(exclusiveScan(s, isSplit, splitSlot, numWindows + 1, stream));
  AUTODDL_TRY(readBack(partStart + numWindows, f.numParts, stream));
  AUTODDL_TRY(readBack(splitSlot + numWindows, f.numSplitWindows, stream));

  // 6. Output arrays.
  const size_t eb = dataTypeBytes(dtype);
  AUTODDL_TRY(
      cudaMalloc(&f.dParts, sizeof(WindowPart) * std::max(1, f.numParts)));
  AUTODDL_TRY(cudaMalloc(&f.dSplitWindows,
                         sizeof(int32_t) * std::max(1, f.numSplitWindows)));
  AUTODDL_TRY(cudaMalloc(&f.dSplitParts,
                         sizeof(int32_t) * std::max(1, f.numSplitWindows)));
  AUTODDL_TRY(cudaMalloc(&f.dBlockCols,
                         sizeof(int32_t) * 8 * std::max(1, totalBlocks)));
  AUTODDL_TRY(
      cudaMalloc(&f.dBlockMask, sizeof(uint64_t) * std::max(1, totalBlocks)));
  AUTODDL_TRY(cudaMalloc(&f.dBlockVals, eb * 64 * std::max(1, totalBlocks)));
  AUTODDL_TRY(
      cudaMalloc(&f.dEntColRow, sizeof(int32_t) * std::max(1, totalCuda)));
  AUTODDL_TRY(cudaMalloc(&f.dEntVals, eb * std::max(1, totalCuda)));
  AUTODDL_TRY(cudaMemsetAsync(f.dBlockCols, 0xff,
                              sizeof(int32_t) * 8 * totalBlocks, stream));
  AUTODDL_TRY(
      cudaMemsetAsync(f.dBlockMask, 0, sizeof(uint64_t) * totalBlocks, stream));
  AUTODDL_TRY(cudaMemsetAsync(f.dBlockVals, 0, eb * 64 * totalBlocks, stream));
  if (numWindows > 0)
    partFillKernel<<<gridFor(numWindows, 256), 256, 0, stream>>>(
        numWindows, numBlocks, numCuda, blockStart, cudaStart, partStart,
        splitSlot, isSplit, partBlocks, f.dParts, f.dSplitWindows,
        f.dSplitParts);
  AUTODDL_TRY(cudaGetLastError());
  AUTODDL_TRY(cudaMalloc(&f.dCudaRowPtr, sizeof(int32_t) * (size_t(rows) + 1)));
  s.hold(deviceBytes(f)); // the format's arrays, for the build's peak
  uint64_t *cudaKeys, *cudaKeysSorted;
  float *cudaVals, *cudaValsSorted;
  AUTODDL_TRY(s.alloc(cudaKeys, totalCuda));
  AUTODDL_TRY(s.alloc(cudaKeysSorted, totalCuda));
  AUTODDL_TRY(s.alloc(cudaVals, totalCuda));
  AUTODDL_TRY(s.alloc(cudaValsSorted, totalCuda));
  if (n > 0)
    scatterKernel<<<gridFor(n, 256), 256, 0, stream>>>(
        n, dtype, keys, vals, head, vecIdIncl, entStart, vecStart, numBlocks,
        blockStart, cudaStart, f.dBlockCols,
        reinterpret_cast<unsigned long long *>(f.dBlockMask), f.dBlockVals,
        cudaKeys, cudaVals);
  AUTODDL_TRY(cudaGetLastError());
  if (totalCuda > 0) {
    AUTODDL_TRY(sortPairs(s, cudaKeys, cudaKeysSorted, cudaVals, cudaValsSorted,
                          totalCuda, endBit, stream));
    cudaEntryKernel<<<gridFor(totalCuda, 256), 256, 0, stream>>>(
        totalCuda, rows, dtype, cudaKeysSorted, cudaValsSorted, f.dEntColRow,
        f.dEntVals, f.dCudaRowPtr);
    AUTODDL_TRY(cudaGetLastError());
  } else {
    AUTODDL_TRY(cudaMemsetAsync(f.dCudaRowPtr, 0,
                                sizeof(int32_t) * (size_t(rows) + 1), stream));
  }
  // Count tensor-core windows and their vectors for reporting.
  {
    std::vector<int32_t> hostBlocks(numWindows), hostVecStart(numWindows + 1);
    AUTODDL_TRY(cudaMemcpyAsync(hostBlocks.data(), numBlocks,
                                sizeof(int32_t) * numWindows,
                                cudaMemcpyDeviceToHost, stream));
    AUTODDL_TRY(cudaMemcpyAsync(hostVecStart.data(), vecStart,
                                sizeof(int32_t) * (numWindows + 1),
                                cudaMemcpyDeviceToHost, stream));
    AUTODDL_TRY(cudaStreamSynchronize(stream));
    for (int32_t w = 0; w < numWindows; ++w)
      if (hostBlocks[w] > 0) {
        ++f.numTcWindows;
        f.numTcVectors += hostVecStart[w + 1] - hostVecStart[w];
      }
  }
  f.buildScratchBytes = s.peak - deviceBytes(f);
  out = std::move(f);
  return cudaSuccess;
}

cudaError_t decodeWindowFormat(const WindowFormat &a, const void *dBlockVals,
                               const void *dEntVals,
                               std::vector<DecodedEntry> &out,
                               const std::vector<int32_t> *onlyRows) {
  out.clear();
  const size_t eb = dataTypeBytes(a.dtype);
  AUTODDL_TRY(cudaDeviceSynchronize());
  // Matrix row of each window slot, and the windows holding a wanted row.
  std::vector<int32_t> rowOfSlot(size_t(a.numWindows) * 8);
  if (a.dRowOfSlot) {
    AUTODDL_TRY(cudaMemcpy(rowOfSlot.data(), a.dRowOfSlot,
                           rowOfSlot.size() * sizeof(int32_t),
                           cudaMemcpyDeviceToHost));
  } else {
    for (size_t i = 0; i < rowOfSlot.size(); ++i)
      rowOfSlot[i] = int32_t(i);
  }
  auto wanted = [&](int32_t row) {
    return !onlyRows ||
           std::binary_search(onlyRows->begin(), onlyRows->end(), row);
  };
  std::vector<char> windowWanted(size_t(a.numWindows), 0);
  for (size_t i = 0; i < rowOfSlot.size(); ++i)
    if (rowOfSlot[i] < a.rows && wanted(rowOfSlot[i]))
      windowWanted[i / 8] = 1;
  std::vector<WindowPart> parts(a.numParts);
  if (!parts.empty())
    AUTODDL_TRY(cudaMemcpy(parts.data(), a.dParts,
                           parts.size() * sizeof(WindowPart),
                           cudaMemcpyDeviceToHost));
  auto value = [&](const uint8_t *p) { return storedToDouble(a.dtype, p); };

  std::vector<int32_t> cols, colRow;
  std::vector<uint64_t> mask;
  std::vector<uint8_t> vals;
  for (const WindowPart &p : parts) {
    if (!windowWanted[p.window])
      continue;
    const int32_t *slotRows = rowOfSlot.data() + size_t(p.window) * 8;
    const size_t count = size_t(p.end - p.begin);
    if (count == 0)
      continue;
    if (p.flags & 1) {
      colRow.resize(count);
      vals.resize(count * eb);
      AUTODDL_TRY(cudaMemcpy(colRow.data(), a.dEntColRow + p.begin, count * 4,
                             cudaMemcpyDeviceToHost));
      AUTODDL_TRY(cudaMemcpy(
          vals.data(), static_cast<const uint8_t *>(dEntVals) + p.begin * eb,
          count * eb, cudaMemcpyDeviceToHost));
      for (size_t e = 0; e < count; ++e)
        if (wanted(slotRows[colRow[e] & 7]))
          out.push_back(
              {slotRows[colRow[e] & 7], colRow[e] >> 3, value(&vals[e * eb])});
      continue;
    }
    cols.resize(count * 8);
    mask.resize(count);
    vals.resize(count * 64 * eb);
    AUTODDL_TRY(cudaMemcpy(cols.data(), a.dBlockCols + size_t(p.begin) * 8,
                           count * 32, cudaMemcpyDeviceToHost));
    AUTODDL_TRY(cudaMemcpy(mask.data(), a.dBlockMask + p.begin, count * 8,
                           cudaMemcpyDeviceToHost));
    AUTODDL_TRY(cudaMemcpy(vals.data(),
                           static_cast<const uint8_t *>(dBlockVals) +
                               size_t(p.begin) * 64 * eb,
                           count * 64 * eb, cudaMemcpyDeviceToHost));
    for (size_t b = 0; b < count; ++b)
      for (int r = 0; r < 8; ++r)
        for (int s = 0; s < 8; ++s)
          if ((mask[b] >> (r * 8 + s) & 1) && wanted(slotRows[r])) {
            const int pos = a.dtype == DataType::F32
                                ? r * 8 + (s % 4) * 2 + s / 4
                                : r * 8 + s;
            out.push_back({slotRows[r], cols[b * 8 + s],
                           value(&vals[(b * 64 + pos) * eb])});
          }
  }
  std::sort(out.begin(), out.end(),
            [](const DecodedEntry &x, const DecodedEntry &y) {
              return x.row != y.row ? x.row < y.row : x.col < y.col;
            });
  return cudaSuccess;
}

} // namespace autoddl::sparse::cuda
