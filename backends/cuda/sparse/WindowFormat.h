// Tensor-core SpMM / SDDMM for Hopper (sm_90) on 8-row windows: the host API.
//
// Format ("W8", docs/sparse-kernels.md): rows are grouped into windows of 8.
// Within a window every distinct column is one 8x1 vector. A window whose
// vectors are full enough (nnz >= fillThreshold * vectors) goes to the
// tensor-core path: its vectors are packed 8 to a block, each block stores 8
// column indices, a 64-bit occupancy mask and 64 values laid out in the order
// the m16n8k8 mma consumes its B operand (swap-and-transpose: the sparse block
// is the mma's B, the gathered dense rows its A). Other windows go to the
// CUDA-core path as a list of (column << 3 | row-in-window, value) entries
// sorted by row. Work is cut into parts of at most partBlocks blocks (8 *
// partBlocks entries) for load balance; windows cut into several parts
// accumulate through fp32 atomics into a workspace.
//
// Plain C++ header (CUDA runtime API types only) so C++ tests and the CPU side
// can include it. Limits: rows, cols < 2^28; nnz < 2^31. All pointers named d*
// are device pointers.
#ifndef AUTODDL_BACKENDS_CUDA_SPARSE_WINDOWFORMAT_H
#define AUTODDL_BACKENDS_CUDA_SPARSE_WINDOWFORMAT_H

#include <cstdint>
#include <cuda_runtime_api.h>
#include <vector>

namespace autoddl::sparse::cuda {

/// Element type of values and dense operands. F32 runs on TF32 tensor cores
/// (inputs rounded to nearest TF32), F16 and BF16 on half-precision tensor
/// cores; all accumulate in fp32.
enum class DataType { F32, F16, BF16 };

size_t dataTypeBytes(DataType t);
const char *dataTypeName(DataType t);

/// The value of one stored element of type t at host address p, as double.
double storedToDouble(DataType t, const void *p);
/// v once stored as type t (through fp32, rounded to nearest), as double:
/// what the GPU holds of it and a reference must use.
double roundToStored(DataType t, double v);

/// Which rows share a window. Natural: rows 8w ... 8w + 7. Clustered: rows
/// sorted on the GPU by (their two neighbours of highest column degree, then
/// their own degree, descending), so that rows sharing hub columns land in one
/// window and more of its 8x1 vectors hold several nonzeros. Auto: Clustered
/// when that cuts the number of 8x1 vectors (the dense rows gathered) by at
/// least 5%, else Natural. Y and X keep the caller's row order either way.
enum class RowOrder { Natural, Clustered, Auto };

struct PreprocessOptions {
  /// A window goes to tensor cores when nnz >= fillThreshold * (distinct
  /// columns). 0 sends every window there; a huge value sends every window to
  /// CUDA cores.
  float fillThreshold = 1.25f;
  /// Blocks per part (entries per CUDA-core part are 8x this); 0 picks it from
  /// the matrix (WindowFormat.cu, step 5).
  int32_t partBlocks = 0;
  RowOrder rowOrder = RowOrder::Auto;
  /// fp32 data on fp32 FMAs only (with a huge fillThreshold: no TF32 at all),
  /// for programs that must match an fp32 CPU run: SDDMM then keeps its
  /// CUDA-core windows off the tensor cores too (SddmmKernels.cu).
  bool exactFp32 = false;
};

/// One unit of work for one warp: blocks [begin, end) of a tensor-core window
/// or entries [begin, end) of a CUDA-core window.
struct WindowPart {
  int32_t begin;
  int32_t end;
  int32_t window;
  int32_t flags; // bit 0: CUDA-core part; bits 1..: split slot + 1 (0: window
                 // not split)
};

/// The W8 format of one sparse matrix on the device. Owns its device memory.
struct WindowFormat {
  DataType dtype = DataType::F32;
  int32_t rows = 0, cols = 0;
  int64_t nnz = 0; // distinct stored entries after merging duplicates
  int32_t numWindows = 0, numParts = 0, numSplitWindows = 0;
  int32_t numBlocks = 0, numTcWindows = 0;
  int64_t numVectors = 0, numTcEntries = 0, numCudaEntries = 0;
  int64_t numTcVectors = 0; // vectors of tensor-core windows (<= 8 numBlocks)
  int32_t partBlocks = 0;
  /// SDDMM splits each part among this many warps (it has no split windows to
  /// pay for, and finer pieces balance better); SpMM takes a part per warp.
  int32_t sddmmSlices = 1;
  float fillThreshold = 0;
  bool exactFp32 = false; // PreprocessOptions::exactFp32
  bool clustered = false; // rows were reordered (dRowOfSlot is set)
  /// Vectors of the natural and the clustered order (0 where not computed).
  int64_t naturalVectors = 0, clusteredVectors = 0;
  /// The most device bytes the build held at once (sorts, scans; all freed
  /// before it returned), less the format's own arrays: its transient peak
  /// on top of them.
  int64_t buildScratchBytes = 0;

  WindowPart *dParts = nullptr;
  int32_t *dSplitWindows = nullptr; // split slot -> window
  int32_t *dSplitParts = nullptr;   // split slot -> number of its parts
  int32_t *dBlockCols = nullptr;    // numBlocks * 8, -1 for padding
  uint64_t *dBlockMask = nullptr;   // numBlocks, bit (row * 8 + slot)
  void *dBlockVals = nullptr;    // numBlocks * 64 values, mma B-fragment order
  int32_t *dEntColRow = nullptr; // numCudaEntries, col << 3 | row-in-window
  void *dEntVals = nullptr;      // numCudaEntries values
  int32_t *dCudaRowPtr =
      nullptr; // rows + 1: CUDA-core entries of window slot s, by column
  /// numWindows * 8: the matrix row held by window slot s (= window * 8 +
  /// row-in-window); rows for the padding slots of the last window. Null when
  /// the order is natural (slot s holds row s).
  int32_t *dRowOfSlot = nullptr;

  WindowFormat() = default;
  WindowFormat(const WindowFormat &) = delete;
  WindowFormat &operator=(const WindowFormat &) = delete;
  WindowFormat(WindowFormat &&other) noexcept;
  WindowFormat &operator=(WindowFormat &&other) noexcept;
  ~WindowFormat();
  void release();
};

/// Device bytes the format's own arrays hold, as buildWindowFormat allocates
/// them (each array at least one element).
inline int64_t deviceBytes(const WindowFormat &f) {
  auto atLeast1 = [](int64_t n) { return n > 0 ? n : int64_t(1); };
  const int64_t eb = f.dtype == DataType::F32 ? 4 : 2;
  const int64_t blocks = atLeast1(f.numBlocks),
                ents = atLeast1(f.numCudaEntries);
  return int64_t(sizeof(WindowPart)) * atLeast1(f.numParts) +
         8 * atLeast1(f.numSplitWindows) + // split windows and parts
         blocks * (4 * 8 + 8 + 64 * eb) +  // columns, mask, values
         ents * (4 + eb) + 4 * (int64_t(f.rows) + 1) + // entries, row ptr
         (f.dRowOfSlot ? 4 * 8 * int64_t(f.numWindows) : 0);
}

/// Builds the W8 format from a CSR matrix on the device (entirely on the GPU:
/// radix sort, merge of duplicates, scans). dVal holds nnz values of `dtype`,
/// or is null for an all-ones pattern. Column indices must lie in [0, cols); a
/// bad index returns cudaErrorInvalidValue.
cudaError_t buildWindowFormat(int32_t rows, int32_t cols, int64_t nnz,
                              const int32_t *dRowPtr, const int32_t *dColIdx,
                              const void *dVal, DataType dtype,
                              const PreprocessOptions &options,
                              WindowFormat &out, cudaStream_t stream = 0);

/// Bytes of workspace spmm needs for feature width n (fp32 sums and counters
/// of the windows cut into several parts; 0 when no window is).
size_t spmmWorkspaceBytes(const WindowFormat &a, int64_t n);

/// Y = A * X on tensor cores (and CUDA cores for sparse windows). X is a.cols x
/// n row-major with leading dimension ldx (elements), Y is a.rows x n with ldy;
/// both of a.dtype. Every element of Y[:, :n] is written. dWorkspace:
/// spmmWorkspaceBytes(a, n) bytes (may be null when that is 0), zero-filled
/// before its first use (cudaMemset); spmm leaves it zero-filled again, so one
/// workspace serves any number of calls (not concurrent ones) of widths up to
/// the n it was sized for.
cudaError_t spmm(const WindowFormat &a, const void *dX, int64_t n, int64_t ldx,
                 void *dY, int64_t ldy, void *dWorkspace,
                 cudaStream_t stream = 0);

/// SDDMM on the pattern of `mask`: for each stored entry (i, j), dot(X[i, :k],
/// Y[j, :k]). X is mask.rows x k (ldx), Y is mask.cols x k (ldy), both of
/// mask.dtype. The results are written in the format's own value layout:
/// dOutBlockVals (numBlocks * 64, zero where the block has no entry) and
/// dOutEntVals (numCudaEntries) — pass mask.dBlockVals and mask.dEntVals to
/// turn the mask into the sampled matrix that spmm consumes directly.
cudaError_t sddmm(const WindowFormat &mask, const void *dX, int64_t ldx,
                  const void *dY, int64_t ldy, int64_t k, void *dOutBlockVals,
                  void *dOutEntVals, cudaStream_t stream = 0);

/// One stored entry read back from the device, for checks.
struct DecodedEntry {
  int32_t row, col;
  double value;
};

/// Reads the entries of `a` back to the host, with values taken from the given
/// arrays (in the format's layout; pass a.dBlockVals / a.dEntVals for the
/// matrix's own values). Sorted by (row, col), rows in the matrix's numbering.
/// onlyRows: when given, only the entries of these rows (sorted ids).
cudaError_t decodeWindowFormat(const WindowFormat &a, const void *dBlockVals,
                               const void *dEntVals,
                               std::vector<DecodedEntry> &out,
                               const std::vector<int32_t> *onlyRows = nullptr);

} // namespace autoddl::sparse::cuda

#endif // AUTODDL_BACKENDS_CUDA_SPARSE_WINDOWFORMAT_H
