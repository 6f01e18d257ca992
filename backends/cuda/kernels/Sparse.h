// Sparse graph ops on the GPU: spmm (adj x) and sddmm (masked x y^T) through
// the tensor-core W8 kernels of backends/cuda/sparse (docs/sparse-kernels.md).
// The names and argument order are those of backends/cpu/kernels/Sparse.h
// with device act_t pointers and a device Csr, so one generator emits both
// backends. Conventions as the CPU kernels: *_forward overwrites, *_backward
// adds (+=), a null gradient pointer means "not needed".
//
// A Csr is built once at setup from a host CSR matrix (sorted columns, no
// duplicate entries): the W8 format of A for the forward pass and of A^T for
// the backward (dx = A^T dy), both on the GPU. Values of the sparse operand
// that are activations (sddmm's output, an attention's scores) stay in CSR
// order [nnz] in the generated program; the kernels scatter them into the W8
// value layout (and gather sddmm's results back) through a per-entry position
// map computed at setup.
//
// Precision: bf16 data on bf16 tensor cores with fp32 accumulation; under
// AUTODDL_FP32 every window takes the CUDA-core path (fp32 FMAs, no TF32
// rounding), so the --fp32 build matches the CPU backend tightly.
//
// Format variant (bf16): each format is built at its first use, in the
// variant the decider (backends/cuda/sparse/SpmmDecider.h) picks from the
// matrix's features (computed at setup) and that use's op and width; later
// uses of the format keep it. AUTODDL_SPMM_VARIANT=hybrid|tc forces one.
// Nothing is timed (docs/sparse-kernels.md "The decider").
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_SPARSE_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_SPARSE_H

#include "backends/cuda/Runtime.h"
#include "backends/cuda/sparse/SpmmDecider.h"
#include "backends/cuda/sparse/WindowFormat.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoddl::rt {

/// The W8 format of one sparse matrix with the position of each CSR entry in
/// its value layout: pos[e] < numBlocks * 64 is a tensor-core block value,
/// else entry pos[e] - numBlocks * 64 of the CUDA-core list.
struct SparseFormat {
  // mutable: a call with activation values points its value arrays at them
  // for the launch (the kernels read the pointers when launched); the format
  // is built at the first use, through a const Csr.
  mutable autoddl::sparse::cuda::WindowFormat w8;
  mutable HeldBytes w8_bytes; // w8's arrays, in the counted device bytes
  // [nnz], CSR entry -> value slot: 4 bytes an entry while the slots
  // (numBlocks * 64 + CUDA-core entries) fit an int32, else pos64.
  mutable DeviceBuffer<int32_t> pos;
  mutable DeviceBuffer<int64_t> pos64;
  mutable DeviceBuffer<uint8_t> ws;   // spmm workspace (zero between calls)
  mutable DeviceBuffer<act_t> values; // activation values in W8 layout
  /// The host CSR the format is built from, until its first use.
  struct Pending {
    int32_t rows = 0, cols = 0;
    std::vector<int32_t> rowPtr, colIdx;
    std::vector<float> values;
    std::vector<int32_t> order; // A^T: its entry of each entry of A
  };
  mutable std::unique_ptr<Pending> pending;
  autoddl::sparse::SpmmFeatures features; // of this matrix, at setup
  bool forced = false; // AUTODDL_SPMM_VARIANT set the variant
  mutable autoddl::sparse::SpmmVariant variant =
      autoddl::sparse::SpmmVariant::Hybrid;
  mutable std::string decision; // the pick and why, for describe()
};

/// A sparse matrix on the device: the CUDA counterpart of the CPU Csr.
struct Csr {
  int32_t rows = 0, cols = 0;
  int64_t entries = 0;
  DeviceBuffer<int32_t> row_ptr; // [rows + 1], for the row-wise edge softmax
  SparseFormat a;                // A [rows, cols]
  // A^T [cols, rows], for the backward passes; its pos is indexed by A's
  // entries, so CSR-order values of A scatter into A^T's layout directly.
  SparseFormat at;
  mutable DeviceBuffer<act_t> scratch; // a product before it is added
  // The row means' values 1 / deg(i) in A's and A^T's W8 layouts (sage's
  // spmm_mean_*), built on first use.
  mutable DeviceBuffer<act_t> mean_a, mean_at;
  // The CUDA-core GATConv kernels (GatAttention.cu): the columns [nnz] (set
  // by the harness where the program has them: ProgramSpec::graph_columns),
  // and the fp32 sums their backward scatters into.
  DeviceBuffer<int32_t> col_idx;
  mutable DeviceBuffer<float> f32_scratch;

  /// Stored entries: the length of a value array on this pattern.
  int64_t nnz() const { return entries; }
};

/// One line on how the W8 formats split the matrix (windows on tensor cores,
/// blocks, CUDA-core entries, row order) and which variant each runs and why
/// (the decider's features and pick), for A and A^T: metrics.json. A format
/// not used yet is "not built".
std::string describe(const Csr &m);

/// Uploads a host CSR matrix (rowPtr [rows + 1], colIdx and values [nnz];
/// columns sorted within a row, no duplicates) and computes the features of A
/// and A^T; each format is built on the GPU at its first use. Throws
/// std::invalid_argument on a malformed matrix or a bad AUTODDL_SPMM_VARIANT.
Csr csr_to_device(int32_t rows, int32_t cols,
                  const std::vector<int32_t> &rowPtr,
                  const std::vector<int32_t> &colIdx,
                  const std::vector<float> &values);

/// y[N,F] = adj[N,M] x[M,F].
void spmm_forward(act_t *y, const Csr &adj, const act_t *x, int64_t F);

/// dx[M,F] += adj^T dy; dvalues[nnz] += dot(dy[i,:], x[j,:]) for each stored
/// (i, j) (the gradient of adj's stored values; null when not needed).
void spmm_backward(act_t *dx, act_t *dvalues, const Csr &adj, const act_t *dy,
                   const act_t *x, int64_t F);

/// out[nnz] = dot(x[i,:], y[j,:]) at each stored entry (i, j) of mask[N,M]; x
/// [N,K], y [M,K]. out is in CSR order.
void sddmm_forward(act_t *out, const Csr &mask, const act_t *x, const act_t *y,
                   int64_t K);

/// dx[N,K] += sum_e dout[e] y[j,:] (row i); dy[M,K] += sum_e dout[e] x[i,:]
/// (row j). dout is in CSR order.
void sddmm_backward(act_t *dx, act_t *dy, const Csr &mask, const act_t *dout,
                    const act_t *x, const act_t *y, int64_t K);

/// y[N,F] = D^-1 A x[M,F]: row i the mean of x over row i's stored entries
/// (sage's mean aggregator; adj's own values are not used). The values 1 /
/// deg(i) in both W8 layouts are built on the first call (the first step runs
/// eagerly, so a step graph captures none of it) and kept in adj.
void spmm_mean_forward(act_t *y, const Csr &adj, const act_t *x, int64_t F);

/// dx[M,F] += (D^-1 A)^T dy.
void spmm_mean_backward(act_t *dx, const Csr &adj, const act_t *dy, int64_t F);

/// y[N,F] = S x[M,F] where S has adj's pattern and the values [nnz] (CSR
/// order, e.g. attention weights); the values of adj itself are not used.
void spmm_values_forward(act_t *y, const Csr &adj, const act_t *values,
                         const act_t *x, int64_t F);

/// The backward of spmm_values_forward: dx[M,F] += S^T dy; dvalues[nnz] +=
/// dot(dy[i,:], x[j,:]).
void spmm_values_backward(act_t *dx, act_t *dvalues, const Csr &adj,
                          const act_t *values, const act_t *dy, const act_t *x,
                          int64_t F);

/// out[e] = softmax over row i's stored entries of scale * scores (CSR
/// order); an empty row writes nothing. fp32 math.
void edge_softmax_forward(act_t *out, const Csr &pattern, const act_t *scores,
                          float scale);

/// dscores[e] += scale * out[e] * (dout[e] - sum_{e' in row i} dout[e']
/// out[e']), from edge_softmax_forward's result `out`.
void edge_softmax_backward(act_t *dscores, const Csr &pattern, const act_t *out,
                           const act_t *dout, float scale);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_SPARSE_H
