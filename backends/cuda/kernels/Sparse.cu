// Sparse graph ops on the GPU through the W8 tensor-core kernels (Sparse.h).
#include "backends/cuda/kernels/Sparse.h"

#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Elementwise.h"
#include "backends/cuda/kernels/Reduce.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace autoddl::rt {
namespace {

namespace sc = autoddl::sparse::cuda;
namespace sp = autoddl::sparse;

constexpr sc::DataType kActType =
    std::is_same_v<act_t, float> ? sc::DataType::F32 : sc::DataType::BF16;

sc::PreprocessOptions format_options(sp::SpmmVariant v) {
  sc::PreprocessOptions o;
  o.fillThreshold = sp::variantFillThreshold(v);
#ifdef AUTODDL_FP32
  // Every window on CUDA cores: fp32 FMAs instead of TF32 tensor cores, so
  // the --fp32 build matches the CPU backend tightly.
  o.fillThreshold = 1e30f;
  o.exactFp32 = true;
#endif
  return o;
}

int64_t block_slots(const sc::WindowFormat &w) {
  return int64_t(w.numBlocks) * 64;
}

template <class Index>
__global__ void scatter_kernel(act_t *__restrict__ dst,
                               const act_t *__restrict__ src,
                               const Index *__restrict__ pos, int64_t nnz) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < nnz;
       e += int64_t(gridDim.x) * blockDim.x)
    dst[pos[e]] = src[e];
}

template <class Index>
__global__ void
gather_kernel(act_t *__restrict__ dst, const act_t *__restrict__ src,
              const Index *__restrict__ pos, int64_t nnz, bool add) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < nnz;
       e += int64_t(gridDim.x) * blockDim.x) {
    const float v = detail::to_float(src[pos[e]]);
    dst[e] = detail::from_float<act_t>(add ? detail::to_float(dst[e]) + v : v);
  }
}

/// launch(pos) with f's position map, of whichever width it is.
template <class Launch>
void with_positions(const SparseFormat &f, Launch launch) {
  if (f.pos64.size())
    launch(f.pos64.data());
  else
    launch(f.pos.data());
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// dst[pos[e]] = src[e] for the nnz entries of f.
void scatter_values(act_t *dst, const act_t *src, const SparseFormat &f,
                    int64_t nnz) {
  with_positions(f, [&](const auto *pos) {
    scatter_kernel<<<detail::grid_for(nnz, 256), 256, 0, compute_stream()>>>(
        dst, src, pos, nnz);
  });
}

/// f(lane, first, end) for each row of the matrix this warp owns: one warp per
/// row, grid-stride over rows; [first, end) are the row's entries.
template <class F>
__device__ void for_rows_by_warp(const int32_t *__restrict__ rowPtr,
                                 int32_t rows, F f) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
       i < rows; i += warps)
    f(lane, rowPtr[i], rowPtr[i + 1]);
}

/// out[e] = 1 / (stored entries of e's row), in CSR order: the values of
/// D^-1 A (sage's mean).
__global__ void row_mean_kernel(act_t *__restrict__ out,
                                const int32_t *__restrict__ rowPtr,
                                int32_t rows) {
  for_rows_by_warp(rowPtr, rows, [&](int lane, int32_t first, int32_t end) {
    const act_t v = detail::from_float<act_t>(1.0f / float(end - first));
    for (int32_t e = first + lane; e < end; e += 32)
      out[e] = v;
  });
}

/// The softmax of scale * scores over each row's entries.
__global__ void edge_softmax_kernel(act_t *__restrict__ out,
                                    const int32_t *__restrict__ rowPtr,
                                    const act_t *__restrict__ scores,
                                    float scale, int32_t rows) {
  for_rows_by_warp(rowPtr, rows, [&](int lane, int32_t b, int32_t end) {
    float m = -FLT_MAX;
    for (int32_t e = b + lane; e < end; e += 32)
      m = fmaxf(m, scale * detail::to_float(scores[e]));
    m = detail::warp_max(m);
    float sum = 0.0f;
    for (int32_t e = b + lane; e < end; e += 32)
      sum += expf(scale * detail::to_float(scores[e]) - m);
    const float inv = 1.0f / detail::warp_sum(sum);
    for (int32_t e = b + lane; e < end; e += 32)
      out[e] = detail::from_float<act_t>(
          expf(scale * detail::to_float(scores[e]) - m) * inv);
  });
}

__global__ void edge_softmax_backward_kernel(act_t *__restrict__ dscores,
                                             const int32_t *__restrict__ rowPtr,
                                             const act_t *__restrict__ out,
                                             const act_t *__restrict__ dout,
                                             float scale, int32_t rows) {
  for_rows_by_warp(rowPtr, rows, [&](int lane, int32_t b, int32_t end) {
    float dot = 0.0f;
    for (int32_t e = b + lane; e < end; e += 32)
      dot += detail::to_float(dout[e]) * detail::to_float(out[e]);
    dot = detail::warp_sum(dot);
    for (int32_t e = b + lane; e < end; e += 32)
      dscores[e] = detail::from_float<act_t>(
          detail::to_float(dscores[e]) +
          scale * detail::to_float(out[e]) * (detail::to_float(dout[e]) - dot));
  });
}

/// Where each CSR entry of the matrix lies in the value layout of w (both
/// paths), read from the format's parts, blocks and entries as
/// decodeWindowFormat reads them.
std::vector<int64_t> value_positions(const sc::WindowFormat &w,
                                     const std::vector<int32_t> &rowPtr,
                                     const std::vector<int32_t> &colIdx) {
  std::vector<int32_t> rowOfSlot(size_t(w.numWindows) * 8);
  if (w.dRowOfSlot)
    copy_to_host(rowOfSlot.data(), w.dRowOfSlot,
                 int64_t(rowOfSlot.size() * sizeof(int32_t)));
  else
    for (size_t i = 0; i < rowOfSlot.size(); ++i)
      rowOfSlot[i] = int32_t(i);
  std::vector<sc::WindowPart> parts(size_t(w.numParts));
  std::vector<int32_t> blockCols(size_t(w.numBlocks) * 8),
      entColRow(size_t(w.numCudaEntries));
  std::vector<uint64_t> blockMask(size_t(w.numBlocks));
  copy_to_host(parts.data(), w.dParts,
               int64_t(parts.size() * sizeof(sc::WindowPart)));
  copy_to_host(blockCols.data(), w.dBlockCols,
               int64_t(blockCols.size() * sizeof(int32_t)));
  copy_to_host(blockMask.data(), w.dBlockMask,
               int64_t(blockMask.size() * sizeof(uint64_t)));
  copy_to_host(entColRow.data(), w.dEntColRow,
               int64_t(entColRow.size() * sizeof(int32_t)));

  std::vector<int64_t> pos(colIdx.size(), -1);
  auto put = [&](int32_t row, int32_t col, int64_t p) {
    const auto first = colIdx.begin() + rowPtr[size_t(row)],
               last = colIdx.begin() + rowPtr[size_t(row) + 1];
    const auto it = std::lower_bound(first, last, col);
    if (it == last || *it != col || pos[size_t(it - colIdx.begin())] >= 0)
      throw std::logic_error("sparse: the W8 format does not match its CSR");
    pos[size_t(it - colIdx.begin())] = p;
  };
  const int64_t blocks = block_slots(w);
  for (const sc::WindowPart &p : parts) {
    const int32_t *slotRows = rowOfSlot.data() + size_t(p.window) * 8;
    for (int32_t i = p.begin; i < p.end; ++i) {
      if (p.flags & 1) { // CUDA-core entries
        const int32_t cr = entColRow[size_t(i)];
        put(slotRows[cr & 7], cr >> 3, blocks + i);
        continue;
      }
      const uint64_t mask = blockMask[size_t(i)];
      for (int r = 0; r < 8; ++r)
        for (int s = 0; s < 8; ++s)
          if (mask >> (r * 8 + s) & 1)
            put(slotRows[r], blockCols[size_t(i) * 8 + size_t(s)],
                int64_t(i) * 64 + (w.dtype == sc::DataType::F32
                                       ? r * 8 + (s % 4) * 2 + s / 4
                                       : r * 8 + s));
    }
  }
  for (int64_t p : pos)
    if (p < 0)
      throw std::logic_error("sparse: an entry missing from the W8 format");
  return pos;
}

/// The W8 format of a host CSR matrix in f.variant, built on the GPU, with
/// its position map (indexed by the entries of A when p.order is given: A^T).
/// The device bytes at its peak: the CSR staging (4 (rows + 1) + (4 + act)
/// nnz; the fp32 values are freed before the build), the builder's scratch
/// and the format's arrays, on top of what the program holds
/// (docs/sparse-kernels.md "Memory"; planner::graphAdjacencyBytes prices it).
void build_format(const SparseFormat &f, const SparseFormat::Pending &p) {
  const int64_t nnz = int64_t(p.colIdx.size());
  {
    DeviceBuffer<int32_t> dRow(p.rows + 1), dCol(nnz);
    DeviceBuffer<act_t> dVal(nnz);
    {
      DeviceBuffer<float> dVal32(nnz);
      copy_to_device(dVal32.data(), p.values.data(), nnz * int64_t(4));
      cast_to_act(dVal.data(), dVal32.data(), nnz);
      synchronize(); // the cast is done with dVal32 before it is freed
    }
    copy_to_device(dRow.data(), p.rowPtr.data(), (p.rows + 1) * int64_t(4));
    copy_to_device(dCol.data(), p.colIdx.data(), nnz * int64_t(4));
    AUTODDL_CUDA_CHECK(sc::buildWindowFormat(
        p.rows, p.cols, nnz, dRow.data(), dCol.data(), dVal.data(), kActType,
        format_options(f.variant), f.w8, compute_stream()));
    // The build returns synchronised: the staging is free to go.
    f.w8_bytes = HeldBytes(sc::deviceBytes(f.w8));
    detail::count_transient_bytes(f.w8.buildScratchBytes);
  }
  std::vector<int64_t> pos = value_positions(f.w8, p.rowPtr, p.colIdx);
  if (!p.order.empty()) { // pos of entry order[e] of this matrix, for entry e
    std::vector<int64_t> q(pos.size());
    for (size_t e = 0; e < q.size(); ++e)
      q[e] = pos[size_t(p.order[e])];
    pos.swap(q);
  }
  const int64_t slots = block_slots(f.w8) + f.w8.numCudaEntries;
  if (slots <= INT32_MAX) {
    const std::vector<int32_t> pos32(pos.begin(), pos.end());
    f.pos = DeviceBuffer<int32_t>(nnz);
    copy_to_device(f.pos.data(), pos32.data(), nnz * int64_t(4));
  } else {
    f.pos64 = DeviceBuffer<int64_t>(nnz);
    copy_to_device(f.pos64.data(), pos.data(), nnz * int64_t(8));
  }
  f.values = DeviceBuffer<act_t>(slots);
}

/// Builds f at its first use (op and width of that use), in the variant the
/// decider picks unless AUTODDL_SPMM_VARIANT forced one. The first step runs
/// eagerly, so no step graph captures the build.
void ensure_built(const SparseFormat &f, bool sddmm, int64_t width) {
  if (!f.pending)
    return;
  char why[256];
#ifdef AUTODDL_FP32
  (void)sddmm, (void)width;
  std::snprintf(why, sizeof why, "every window on CUDA cores (fp32 build)");
#else
  if (!f.forced) {
    sp::SpmmQuery q;
    q.sddmm = sddmm;
    q.width = width;
    q.l2Bytes = detail::l2_cache_bytes();
    f.variant = sp::decideVariant(f.features, q);
  }
  std::snprintf(why, sizeof why,
                "%s %s; first use %s width %lld; degree skew %.3g, window "
                "fill %.3g, mean degree %.3g",
                sp::variantName(f.variant),
                f.forced ? "forced by AUTODDL_SPMM_VARIANT" : "decided",
                sddmm ? "sddmm" : "spmm", (long long)width,
                f.features.degreeSkew, f.features.windowFill,
                f.features.meanDegree);
#endif
  f.decision = why;
  build_format(f, *f.pending);
  f.pending.reset();
}

/// Y[rows, n] = A X with the format's own values, or with `values` (the W8
/// value layout: blocks, then CUDA-core entries) in their place.
void run_spmm(const SparseFormat &f, const act_t *values, const act_t *x,
              int64_t n, act_t *y) {
  ensure_built(f, false, n);
  sc::WindowFormat &w = f.w8;
  const size_t bytes = sc::spmmWorkspaceBytes(w, n);
  if (bytes > size_t(f.ws.size()))
    f.ws = DeviceBuffer<uint8_t>(int64_t(bytes)); // zero-filled
  void *blockVals = w.dBlockVals, *entVals = w.dEntVals;
  if (values) { // the kernel reads the pointers at launch
    w.dBlockVals = const_cast<act_t *>(values);
    w.dEntVals = const_cast<act_t *>(values) + block_slots(w);
  }
  const cudaError_t err =
      sc::spmm(w, x, n, n, y, n, f.ws.data(), compute_stream());
  w.dBlockVals = blockVals;
  w.dEntVals = entVals;
  AUTODDL_CUDA_CHECK(err);
}

/// CSR-order values [nnz] -> the format's value scratch (W8 layout), for an
/// spmm of width n.
const act_t *scatter(const SparseFormat &f, const act_t *values, int64_t nnz,
                     int64_t n) {
  ensure_built(f, false, n);
  scatter_values(f.values.data(), values, f, nnz);
  return f.values.data();
}

/// dst[nnz] (+)= the format's value scratch, back in CSR order.
void gather(act_t *dst, const SparseFormat &f, int64_t nnz, bool add) {
  with_positions(f, [&](const auto *pos) {
    gather_kernel<<<detail::grid_for(nnz, 256), 256, 0, compute_stream()>>>(
        dst, f.values.data(), pos, nnz, add);
  });
}

/// out[rows, n] += A X (values as run_spmm), through the scratch buffer.
void spmm_add(act_t *out, const Csr &m, const SparseFormat &f,
              const act_t *values, const act_t *x, int64_t n) {
  ensure_built(f, false, n); // f.w8.rows is 0 until the format is built
  const int64_t count = int64_t(f.w8.rows) * n;
  if (m.scratch.size() < count)
    m.scratch = DeviceBuffer<act_t>(count);
  run_spmm(f, values, x, n, m.scratch.data());
  add_into(out, m.scratch.data(), count);
}

/// out[nnz] (+)= dot(a[i,:], b[j,:]) on the entries (i, j) of m, in CSR
/// order (through the W8 value scratch).
void sddmm_csr(act_t *out, const Csr &m, const act_t *a, const act_t *b,
               int64_t k, bool add) {
  ensure_built(m.a, true, k);
  const sc::WindowFormat &w = m.a.w8;
  act_t *vals = m.a.values.data();
  AUTODDL_CUDA_CHECK(sc::sddmm(w, a, k, b, k, k, vals, vals + block_slots(w),
                               compute_stream()));
  gather(out, m.a, m.entries, add);
}

} // namespace

Csr csr_to_device(int32_t rows, int32_t cols,
                  const std::vector<int32_t> &rowPtr,
                  const std::vector<int32_t> &colIdx,
                  const std::vector<float> &values) {
  if (rows < 0 || cols < 0 || rowPtr.size() != size_t(rows) + 1 ||
      rowPtr[0] != 0 || size_t(rowPtr.back()) != colIdx.size() ||
      values.size() != colIdx.size())
    throw std::invalid_argument("sparse: malformed CSR matrix");
  for (int32_t i = 0; i < rows; ++i)
    for (int32_t e = rowPtr[size_t(i)]; e < rowPtr[size_t(i) + 1]; ++e) {
      const int32_t c = colIdx[size_t(e)];
      if (c < 0 || c >= cols ||
          (e > rowPtr[size_t(i)] && colIdx[size_t(e) - 1] >= c))
        throw std::invalid_argument(
            "sparse: row " + std::to_string(i) +
            " has an out-of-range, unsorted or duplicate column");
    }
  Csr m;
  m.rows = rows;
  m.cols = cols;
  m.entries = int64_t(colIdx.size());
  m.row_ptr = DeviceBuffer<int32_t>(rows + 1);
  copy_to_device(m.row_ptr.data(), rowPtr.data(), (rows + 1) * int64_t(4));
  // A^T on the host (counting sort by column; rows stay sorted), and which
  // entry of A^T each entry of A is.
  std::vector<int32_t> tPtr(size_t(cols) + 1, 0), tCol(colIdx.size()),
      transposed(colIdx.size());
  std::vector<float> tVal(values.size());
  for (int32_t c : colIdx)
    ++tPtr[size_t(c) + 1];
  for (size_t j = 0; j < size_t(cols); ++j)
    tPtr[j + 1] += tPtr[j];
  std::vector<int32_t> next(tPtr.begin(), tPtr.end() - 1);
  for (int32_t i = 0; i < rows; ++i)
    for (int32_t e = rowPtr[size_t(i)]; e < rowPtr[size_t(i) + 1]; ++e) {
      const int32_t t = next[size_t(colIdx[size_t(e)])]++;
      tCol[size_t(t)] = i;
      tVal[size_t(t)] = values[size_t(e)];
      transposed[size_t(e)] = t;
    }
  bool forced = false;
  sp::SpmmVariant variant = sp::SpmmVariant::Hybrid;
  std::string error;
  if (!sp::variantOverride(std::getenv("AUTODDL_SPMM_VARIANT"), forced, variant,
                           error))
    throw std::invalid_argument(error);
  auto pend = [&](SparseFormat &f, int32_t r, int32_t c,
                  std::vector<int32_t> ptr, std::vector<int32_t> col,
                  std::vector<float> val, std::vector<int32_t> order) {
    f.features = sp::spmmFeatures(r, c, ptr.data(), col.data());
    f.forced = forced;
    f.variant = variant;
    f.pending = std::make_unique<SparseFormat::Pending>(
        SparseFormat::Pending{r, c, std::move(ptr), std::move(col),
                              std::move(val), std::move(order)});
  };
  pend(m.a, rows, cols, rowPtr, colIdx, values, {});
  pend(m.at, cols, rows, std::move(tPtr), std::move(tCol), std::move(tVal),
       std::move(transposed));
  return m;
}

std::string describe(const Csr &m) {
  auto one = [](const char *name, const SparseFormat &f) {
    if (f.pending)
      return std::string(name) + ": not built (not used)";
    const sc::WindowFormat &w = f.w8;
    return std::string(name) + ": " + std::to_string(w.rows) + " x " +
           std::to_string(w.cols) + ", " + std::to_string(w.nnz) +
           " entries; windows " + std::to_string(w.numWindows) +
           " (tensor cores " + std::to_string(w.numTcWindows) + "), blocks " +
           std::to_string(w.numBlocks) + " holding " +
           std::to_string(w.numTcEntries) + " entries, CUDA-core entries " +
           std::to_string(w.numCudaEntries) + ", rows " +
           (w.clustered ? "clustered" : "natural") + "; variant " + f.decision;
  };
  return one("A", m.a) + "; " + one("A^T", m.at);
}

void spmm_forward(act_t *y, const Csr &adj, const act_t *x, int64_t F) {
  run_spmm(adj.a, nullptr, x, F, y);
}

void spmm_backward(act_t *dx, act_t *dvalues, const Csr &adj, const act_t *dy,
                   const act_t *x, int64_t F) {
  if (dx)
    spmm_add(dx, adj, adj.at, nullptr, dy, F);
  if (dvalues)
    sddmm_csr(dvalues, adj, dy, x, F, true);
}

void sddmm_forward(act_t *out, const Csr &mask, const act_t *x, const act_t *y,
                   int64_t K) {
  sddmm_csr(out, mask, x, y, K, false);
}

void sddmm_backward(act_t *dx, act_t *dy, const Csr &mask, const act_t *dout,
                    const act_t *x, const act_t *y, int64_t K) {
  // dx = D y and dy = D^T x, D the mask's pattern with the values dout.
  if (dx)
    spmm_add(dx, mask, mask.a, scatter(mask.a, dout, mask.entries, K), y, K);
  if (dy)
    spmm_add(dy, mask, mask.at, scatter(mask.at, dout, mask.entries, K), x, K);
}

namespace {

/// adj.mean_a and adj.mean_at: D^-1 A's values in A's and A^T's W8 layouts,
/// on the first call (buffers zero-filled, so the layouts' padding is 0); the
/// formats are built for an spmm of width F if they are not yet.
void build_means(const Csr &adj, int64_t F) {
  if (adj.mean_a.size() || !adj.entries)
    return;
  ensure_built(adj.a, false, F);
  ensure_built(adj.at, false, F);
  DeviceBuffer<act_t> csr(adj.entries);
  row_mean_kernel<<<detail::grid_for(int64_t(adj.rows) * 32, 256), 256, 0,
                    compute_stream()>>>(csr.data(), adj.row_ptr.data(),
                                        adj.rows);
  AUTODDL_CUDA_CHECK_LAUNCH();
  auto layout = [&](const SparseFormat &f) {
    DeviceBuffer<act_t> v(block_slots(f.w8) + f.w8.numCudaEntries);
    scatter_values(v.data(), csr.data(), f, adj.entries);
    return v;
  };
  adj.mean_a = layout(adj.a);
  adj.mean_at = layout(adj.at);
  // csr is freed on return: the kernels above must be done with it.
  AUTODDL_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
}

} // namespace

void spmm_mean_forward(act_t *y, const Csr &adj, const act_t *x, int64_t F) {
  build_means(adj, F);
  if (!adj.entries) { // no entries: every row's mean is 0
    AUTODDL_CUDA_CHECK(cudaMemsetAsync(
        y, 0, size_t(adj.rows) * size_t(F) * sizeof(act_t), compute_stream()));
    return;
  }
  run_spmm(adj.a, adj.mean_a.data(), x, F, y);
}

void spmm_mean_backward(act_t *dx, const Csr &adj, const act_t *dy, int64_t F) {
  build_means(adj, F);
  if (dx && adj.entries)
    spmm_add(dx, adj, adj.at, adj.mean_at.data(), dy, F);
}

void spmm_values_forward(act_t *y, const Csr &adj, const act_t *values,
                         const act_t *x, int64_t F) {
  run_spmm(adj.a, scatter(adj.a, values, adj.entries, F), x, F, y);
}

void spmm_values_backward(act_t *dx, act_t *dvalues, const Csr &adj,
                          const act_t *values, const act_t *dy, const act_t *x,
                          int64_t F) {
  if (dx)
    spmm_add(dx, adj, adj.at, scatter(adj.at, values, adj.entries, F), dy, F);
  if (dvalues)
    sddmm_csr(dvalues, adj, dy, x, F, true);
}

void edge_softmax_forward(act_t *out, const Csr &pattern, const act_t *scores,
                          float scale) {
  edge_softmax_kernel<<<detail::grid_for(int64_t(pattern.rows) * 32, 256), 256,
                        0, compute_stream()>>>(out, pattern.row_ptr.data(),
                                               scores, scale, pattern.rows);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void edge_softmax_backward(act_t *dscores, const Csr &pattern, const act_t *out,
                           const act_t *dout, float scale) {
  edge_softmax_backward_kernel<<<detail::grid_for(int64_t(pattern.rows) * 32,
                                                  256),
                                 256, 0, compute_stream()>>>(
      dscores, pattern.row_ptr.data(), out, dout, scale, pattern.rows);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
