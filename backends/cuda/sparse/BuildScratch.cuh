// The W8 builder's device scratch and its CUB calls (WindowFormat.cu): the
// scratch counts what it holds, so that the build reports its transient peak
// (WindowFormat::buildScratchBytes; docs/sparse-kernels.md "Memory").
#ifndef AUTODDL_BACKENDS_CUDA_SPARSE_BUILDSCRATCH_CUH
#define AUTODDL_BACKENDS_CUDA_SPARSE_BUILDSCRATCH_CUH

#include <algorithm>
#include <cstdint>
#include <cub/cub.cuh>
#include <cuda_runtime_api.h>
#include <utility>
#include <vector>

#define AUTODDL_TRY(expr)                                                      \
  do {                                                                         \
    cudaError_t err_ = (expr);                                                 \
    if (err_ != cudaSuccess)                                                   \
      return err_;                                                             \
  } while (0)

namespace autoddl::sparse::cuda::detail {

/// Device buffers freed at scope exit or by free(); `peak` is the most held
/// at once, counting also what hold() notes (the format's own arrays, made
/// while the scratch lives).
struct Scratch {
  std::vector<std::pair<void *, size_t>> ptrs;
  int64_t bytes = 0, peak = 0;
  void hold(int64_t n) { peak = std::max(peak, bytes += n); }
  template <typename T> cudaError_t alloc(T *&p, size_t count) {
    void *raw = nullptr;
    const size_t n = std::max<size_t>(count, 1) * sizeof(T);
    cudaError_t err = cudaMalloc(&raw, n);
    if (err == cudaSuccess)
      ptrs.push_back({raw, n}), hold(int64_t(n));
    p = static_cast<T *>(raw);
    return err;
  }
  /// Frees p now. Assumes the work that used it is done (the stream was
  /// synchronised since).
  void free(const void *p) {
    for (size_t i = 0; i < ptrs.size(); ++i)
      if (ptrs[i].first == p) {
        cudaFree(ptrs[i].first);
        bytes -= int64_t(ptrs[i].second);
        ptrs.erase(ptrs.begin() + std::ptrdiff_t(i));
        return;
      }
  }
  ~Scratch() {
    for (auto [p, n] : ptrs)
      cudaFree(p);
  }
};

inline unsigned gridFor(int64_t n, int threads) {
  return unsigned(std::max<int64_t>(1, (n + threads - 1) / threads));
}

template <typename T>
cudaError_t exclusiveScan(Scratch &scratch, const T *in, T *out, int32_t n,
                          cudaStream_t stream) {
  size_t bytes = 0;
  AUTODDL_TRY(
      cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, n, stream));
  uint8_t *tmp;
  AUTODDL_TRY(scratch.alloc(tmp, bytes));
  return cub::DeviceScan::ExclusiveSum(tmp, bytes, in, out, n, stream);
}

/// CUB's radix sort of (key, value) pairs into keysOut / valsOut; its
/// temporary storage (about the pairs' size again) stays in the scratch, and
/// *tmpOut names it for an early free().
template <typename K, typename V>
cudaError_t sortPairs(Scratch &scratch, const K *keysIn, K *keysOut,
                      const V *valsIn, V *valsOut, int64_t n, int endBit,
                      cudaStream_t stream, uint8_t **tmpOut = nullptr) {
  size_t bytes = 0;
  AUTODDL_TRY(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, keysIn, keysOut, valsIn, valsOut, n, 0, endBit, stream));
  uint8_t *tmp;
  AUTODDL_TRY(scratch.alloc(tmp, bytes));
  if (tmpOut)
    *tmpOut = tmp;
  return cub::DeviceRadixSort::SortPairs(tmp, bytes, keysIn, keysOut, valsIn,
                                         valsOut, n, 0, endBit, stream);
}

template <typename T>
cudaError_t readBack(const T *dPtr, T &value, cudaStream_t stream) {
  AUTODDL_TRY(
      cudaMemcpyAsync(&value, dPtr, sizeof(T), cudaMemcpyDeviceToHost, stream));
  return cudaStreamSynchronize(stream);
}

} // namespace autoddl::sparse::cuda::detail

#endif // AUTODDL_BACKENDS_CUDA_SPARSE_BUILDSCRATCH_CUH
