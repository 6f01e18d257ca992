// Device helpers shared by the kernels of backends/cuda/kernels (not a public
// header): conversions between the storage types and fp32, 16-byte packs,
// warp and block reductions, launch sizes and alignment checks.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_COMMON_CUH
#define AUTODDL_BACKENDS_CUDA_KERNELS_COMMON_CUH

#include "backends/cuda/Runtime.h"

#include <cfloat>
#include <cstdint>
#include <type_traits>

namespace autoddl::rt::detail {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Elements of T in one 16-byte access.
template <class T> constexpr int kPack = int(16 / sizeof(T));

/// V elements of T loaded or stored as one access (16 bytes when V ==
/// kPack<T>; the caller guarantees the alignment).
template <class T, int V> struct alignas(sizeof(T) * V) Pack { T v[V]; };
template <class T, int V>
__device__ __forceinline__ void load_floats(float (&out)[V], const T *p) {
  const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V> *>(p);
#pragma unroll
  for (int j = 0; j < V; ++j)
    out[j] = to_float(pk.v[j]);
}
template <class T, int V>
__device__ __forceinline__ void store_floats(T *p, const float (&in)[V]) {
  Pack<T, V> pk;
#pragma unroll
  for (int j = 0; j < V; ++j)
    pk.v[j] = from_float<T>(in[j]);
  *reinterpret_cast<Pack<T, V> *>(p) = pk;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Online softmax state: running max m and sum s of exp(x - m).
struct MaxSum {
  float m, s;
};
__device__ __forceinline__ MaxSum max_sum_combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY)
    return {m, 0.0f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}
__device__ __forceinline__ MaxSum warp_max_sum(MaxSum v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum w{__shfl_xor_sync(0xffffffffu, v.m, o),
             __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = max_sum_combine(v, w);
  }
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
/// thread gets the result. `scratch` holds 32 values.
template <class F> __device__ __forceinline__ F block_sum(F v, F *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : F(0);
  return warp_sum(v);
}

/// Calls vec(j) for the 16-byte-aligned packs of [0, L) of a row starting at
/// `row` (j the first element of the pack) and one(j) for the elements before
/// and after them, spreading the work over threads tid of nth. With V == 1
/// every element goes to one().
template <int V, class T, class FV, class FS>
__device__ __forceinline__ void for_row(const T *row, int64_t L, int64_t tid,
                                        int64_t nth, FV vec, FS one) {
  int64_t head = 0;
  if (V > 1) {
    head = int64_t(((16 - (reinterpret_cast<uintptr_t>(row) & 15)) & 15) /
                   sizeof(T));
    if (head > L)
      head = L;
  }
  for (int64_t j = tid; j < head; j += nth)
    one(j);
  const int64_t packs = (L - head) / V;
  for (int64_t k = tid; k < packs; k += nth)
    vec(head + k * V);
  for (int64_t j = head + packs * V + tid; j < L; j += nth)
    one(j);
}

/// for_row reading a row's values: op(v) for each element of [0, L) as a
/// float (the packs loaded 16 bytes at a time), in for_row's order.
template <int V, class T, class F>
__device__ __forceinline__ void for_row_values(const T *row, int64_t L,
                                               int64_t tid, int64_t nth, F op) {
  for_row<V>(
      row, L, tid, nth,
      [&](int64_t j) {
        float v[V];
        load_floats<T, V>(v, row + j);
#pragma unroll
        for (int i = 0; i < V; ++i)
          op(v[i]);
      },
      [&](int64_t j) { op(to_float(row[j])); });
}

/// Kernels that run one warp a row, W warps a block: this warp's row.
template <int W> __device__ __forceinline__ int64_t warp_row() {
  return int64_t(blockIdx.x) * W + (threadIdx.x >> 5);
}

/// A kernel templated on its pack width, launched at width V where `packed`
/// (the data allow it) and element by element otherwise:
/// launch(std::integral_constant<int, V or 1>), the lambda reading the width
/// as decltype(w)::value.
template <int V, class F> void with_pack(bool packed, F launch) {
  if (packed)
    launch(std::integral_constant<int, V>{});
  else
    launch(std::integral_constant<int, 1>{});
}

/// True when every pointer has the same address modulo 16 as `first` (or is
/// null), so that for_row's packs line up in all of them.
inline bool same_alignment(const void *) { return true; }
template <class... Rest>
inline bool same_alignment(const void *first, const void *p, Rest... rest) {
  if (p &&
      ((reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(first)) &
       15))
    return false;
  return same_alignment(first, rest...);
}

/// Streaming multiprocessors of the current device (cached).
int sm_count();
/// The current device's L2 cache bytes (cached).
int64_t l2_cache_bytes();
/// Blocks for a grid-stride loop over `work` items with `threads` per block.
inline unsigned grid_for(int64_t work, int threads) {
  int64_t b = (work + threads - 1) / threads;
  const int64_t cap = int64_t(sm_count()) * 16;
  if (b > cap)
    b = cap;
  return unsigned(b < 1 ? 1 : b);
}

/// True when 4-element packs line up: f 16-byte aligned and a aligned to 4
/// elements of act_t (the pattern of the fp32 <-> act_t kernels).
inline bool pack4_aligned(const float *f, const act_t *a) {
  return (reinterpret_cast<uintptr_t>(f) & 15) == 0 &&
         (reinterpret_cast<uintptr_t>(a) & (4 * sizeof(act_t) - 1)) == 0;
}

/// Sum of x[n] (of x[n]^2 when square) in double, every step in a fixed
/// order (deterministic); synchronous. Reduce.cu.
double sum_floats(const float *x, int64_t n, bool square);

/// A device scratch area of at least `bytes`, grown on demand, used between a
/// kernel and its follow-up on compute_stream() (slot separates users whose
/// lifetimes overlap).
void *scratch(int slot, int64_t bytes);

} // namespace autoddl::rt::detail

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_COMMON_CUH
