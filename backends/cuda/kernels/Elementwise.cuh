// A generic elementwise launcher (not a public header): NIN inputs and NOUT
// outputs of one storage type T, read and written as 16-byte packs where all
// pointers share their alignment, fp32 math in a functor
//   __device__ void operator()(const float (&x)[NIN], float (&y)[NOUT]) const
// An output pointer may be null (not computed); an accumulating output adds
// the functor's value to what it holds (the backward convention).
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_ELEMENTWISE_CUH
#define AUTODDL_BACKENDS_CUDA_KERNELS_ELEMENTWISE_CUH

#include "backends/cuda/kernels/Common.cuh"

namespace autoddl::rt::detail {

template <class T, int NIN, int NOUT> struct MapArgs {
  const T *in[NIN > 0 ? NIN : 1];
  T *out[NOUT];
  bool accumulate[NOUT];
};

template <class T, int V, int NIN, int NOUT, class F>
__global__ void map_kernel(MapArgs<T, NIN, NOUT> a, int64_t n, F f) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  const T *anchor = NIN > 0 ? a.in[0] : a.out[0];
  for_row<V>(
      anchor, n, tid, nth,
      [&](int64_t j) {
        float x[NIN > 0 ? NIN : 1][V], y[NOUT][V];
#pragma unroll
        for (int i = 0; i < NIN; ++i)
          load_floats<T, V>(x[i], a.in[i] + j);
#pragma unroll
        for (int v = 0; v < V; ++v) {
          float xi[NIN > 0 ? NIN : 1], yi[NOUT];
#pragma unroll
          for (int i = 0; i < NIN; ++i)
            xi[i] = x[i][v];
          f(xi, yi);
#pragma unroll
          for (int o = 0; o < NOUT; ++o)
            y[o][v] = yi[o];
        }
#pragma unroll
        for (int o = 0; o < NOUT; ++o) {
          if (!a.out[o])
            continue;
          if (a.accumulate[o]) {
            float old[V];
            load_floats<T, V>(old, a.out[o] + j);
#pragma unroll
            for (int v = 0; v < V; ++v)
              y[o][v] += old[v];
          }
          store_floats<T, V>(a.out[o] + j, y[o]);
        }
      },
      [&](int64_t j) {
        float xi[NIN > 0 ? NIN : 1], yi[NOUT];
#pragma unroll
        for (int i = 0; i < NIN; ++i)
          xi[i] = to_float(a.in[i][j]);
        f(xi, yi);
#pragma unroll
        for (int o = 0; o < NOUT; ++o) {
          if (!a.out[o])
            continue;
          const float v =
              a.accumulate[o] ? yi[o] + to_float(a.out[o][j]) : yi[o];
          a.out[o][j] = from_float<T>(v);
        }
      });
}

inline bool aligned_with(const void *anchor, const void *const *ptrs,
                         int count) {
  for (int i = 0; i < count; ++i)
    if (!same_alignment(anchor, ptrs[i]))
      return false;
  return true;
}

/// Launches map_kernel on compute_stream(), vectorised when the pointers line
/// up (otherwise one element per access).
template <class T, int NIN, int NOUT, class F>
void launch_map(const MapArgs<T, NIN, NOUT> &a, int64_t n, F f) {
  if (n <= 0)
    return;
  bool anyOut = false;
  for (int o = 0; o < NOUT; ++o)
    anyOut = anyOut || a.out[o];
  if (!anyOut)
    return;
  const void *anchor = NIN > 0 ? static_cast<const void *>(a.in[0])
                               : static_cast<const void *>(a.out[0]);
  const bool vec =
      aligned_with(anchor, reinterpret_cast<const void *const *>(a.in), NIN) &&
      aligned_with(anchor, reinterpret_cast<const void *const *>(a.out), NOUT);
  constexpr int kThreads = 256;
  if (vec) {
    constexpr int V = kPack<T>;
    map_kernel<T, V, NIN, NOUT><<<grid_for((n + V - 1) / V, kThreads), kThreads,
                                  0, compute_stream()>>>(a, n, f);
  } else {
    map_kernel<T, 1, NIN, NOUT>
        <<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(a, n, f);
  }
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt::detail

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_ELEMENTWISE_CUH
