// Embedding, learned positions and RoPE (Embedding.h). Lookups are one warp
// per row with 16-byte packs; the table gradient is an fp32 atomicAdd
// scatter (rows repeat within a batch); the position-table gradient is summed
// over the batch by one thread per (t, c), without atomics.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Embedding.h"

#include <cmath>

namespace autoddl::rt {
namespace {
using namespace detail;

constexpr int kWarps = 8;

/// The id a warp looks up: its position n (N past the last id) and the row
/// of this rank's vocabulary block [v0, v0 + Vl) it names (`inside`: the id
/// is this rank's).
struct Lookup {
  int64_t n, row;
  bool inside;
};
__device__ __forceinline__ Lookup lookup(const int32_t *ids, int64_t N,
                                         int64_t v0, int64_t Vl) {
  const int64_t n = warp_row<kWarps>();
  if (n >= N)
    return {N, 0, false};
  const int64_t row = int64_t(ids[n]) - v0;
  return {n, row, row >= 0 && row < Vl};
}

/// Launches launch(w, blocks), a kernel of one warp per id over N ids, with
/// the widest pack where `packed` (w as with_pack's).
template <class F> void launch_lookup(int64_t N, bool packed, F launch) {
  const unsigned blocks = unsigned((N + kWarps - 1) / kWarps);
  with_pack<kPack<act_t>>(packed, [&](auto w) { launch(w, blocks); });
  AUTODDL_CUDA_CHECK_LAUNCH();
}

template <int V>
__global__ void embedding_forward_kernel(act_t *out, const int32_t *ids,
                                         const act_t *table, int64_t N,
                                         int64_t C, int64_t v0, int64_t Vl) {
  const Lookup at = lookup(ids, N, v0, Vl);
  if (at.n >= N)
    return;
  const int lane = threadIdx.x & 31;
  const bool inside = at.inside;
  const act_t *src = table + (inside ? at.row : 0) * C;
  act_t *o = out + at.n * C;
  for_row<V>(
      o, C, lane, 32,
      [&](int64_t j) {
        if (inside)
          *reinterpret_cast<Pack<act_t, V> *>(o + j) =
              *reinterpret_cast<const Pack<act_t, V> *>(src + j);
        else
          *reinterpret_cast<Pack<act_t, V> *>(o + j) = Pack<act_t, V>{};
      },
      [&](int64_t j) { o[j] = inside ? src[j] : from_float<act_t>(0.0f); });
}

template <int V>
__global__ void embedding_backward_kernel(float *dtable, const act_t *dout,
                                          const int32_t *ids, int64_t N,
                                          int64_t C, int64_t v0, int64_t Vl) {
  const Lookup at = lookup(ids, N, v0, Vl);
  if (!at.inside) // past the last id, or another rank's
    return;
  const int lane = threadIdx.x & 31;
  const act_t *g = dout + at.n * C;
  float *d = dtable + at.row * C;
  for_row<V>(
      g, C, lane, 32,
      [&](int64_t j) {
        float v[V];
        load_floats<act_t, V>(v, g + j);
#pragma unroll
        for (int i = 0; i < V; ++i)
          atomicAdd(d + j + i, v[i]);
      },
      [&](int64_t j) { atomicAdd(d + j, to_float(g[j])); });
}

/// Flat over the packs of out: element j is row j / C (position t = row % T),
/// column j % C.
template <int V>
__global__ void positional_forward_kernel(act_t *out, const act_t *x,
                                          const act_t *table, int64_t n,
                                          int64_t T, int64_t C, int64_t t0) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = tid; k < n / V; k += nth) {
    const int64_t j = k * V, row = j / C, c = j - row * C;
    float a[V], b[V];
    load_floats<act_t, V>(a, x + j);
    load_floats<act_t, V>(b, table + (t0 + row % T) * C + c);
#pragma unroll
    for (int i = 0; i < V; ++i)
      a[i] += b[i];
    store_floats<act_t, V>(out + j, a);
  }
}

/// One thread per (t, c): dx[b,t,c] += dout for every b, and dtable[t0 + t, c]
/// += the sum over b (in order: deterministic).
__global__ void positional_backward_kernel(act_t *dx, float *dtable,
                                           const act_t *dout, int64_t B,
                                           int64_t T, int64_t C, int64_t t0) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = tid; k < T * C; k += nth) {
    float s = 0.0f;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t i = b * T * C + k;
      const float g = to_float(dout[i]);
      s += g;
      if (dx)
        dx[i] = from_float<act_t>(to_float(dx[i]) + g);
    }
    if (dtable)
      dtable[t0 * C + k] += s;
  }
}

/// One thread per (t, pair i): the angle in double as the CPU forms it, then
/// every (b, h) at that position.
__global__ void rotary_kernel(act_t *out, const act_t *x, int64_t B, int64_t T,
                              int64_t H, int64_t D, double theta, int64_t t0,
                              double sign, bool accumulate) {
  const int64_t half = D / 2;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = tid; k < T * half; k += nth) {
    const int64_t t = k / half, i = k % half;
    const double a =
        sign * double(t0 + t) * pow(theta, -2.0 * double(i) / double(D));
    const float c = float(cos(a)), s = float(sin(a));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = (b * T + t) * H * D + h * D;
        const float x1 = to_float(x[base + i]),
                    x2 = to_float(x[base + i + half]);
        // Written without contraction, as the CPU's separate products.
        float y1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
        float y2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
        if (accumulate) {
          y1 += to_float(out[base + i]);
          y2 += to_float(out[base + i + half]);
        }
        out[base + i] = from_float<act_t>(y1);
        out[base + i + half] = from_float<act_t>(y2);
      }
  }
}
} // namespace

void embedding_forward(act_t *out, const int32_t *ids, const act_t *table,
                       int64_t N, int64_t C, int64_t v0, int64_t Vl) {
  if (N == 0 || C == 0)
    return;
  const bool packed = C % kPack<act_t> == 0 && same_alignment(out, table);
  launch_lookup(N, packed, [&](auto w, unsigned blocks) {
    embedding_forward_kernel<decltype(w)::value>
        <<<blocks, 32 * kWarps, 0, compute_stream()>>>(out, ids, table, N, C,
                                                       v0, Vl);
  });
}

void embedding_backward(float *dtable, const act_t *dout, const int32_t *ids,
                        int64_t N, int64_t C, int64_t v0, int64_t Vl) {
  if (N == 0 || C == 0 || !dtable)
    return;
  launch_lookup(N, C % kPack<act_t> == 0, [&](auto w, unsigned blocks) {
    embedding_backward_kernel<decltype(w)::value>
        <<<blocks, 32 * kWarps, 0, compute_stream()>>>(dtable, dout, ids, N, C,
                                                       v0, Vl);
  });
}

void positional_forward(act_t *out, const act_t *x, const act_t *table,
                        int64_t B, int64_t T, int64_t C, int64_t t0) {
  const int64_t n = B * T * C;
  if (n == 0)
    return;
  constexpr int V = kPack<act_t>;
  const auto a16 = [](const void *p) {
    return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
  };
  with_pack<V>(C % V == 0 && a16(x) && a16(out) && a16(table), [&](auto w) {
    constexpr int W = decltype(w)::value;
    positional_forward_kernel<W>
        <<<grid_for(n / W, 256), 256, 0, compute_stream()>>>(out, x, table, n,
                                                             T, C, t0);
  });
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void positional_backward(act_t *dx, float *dtable, const act_t *dout, int64_t B,
                         int64_t T, int64_t C, int64_t t0) {
  if (T * C == 0 || (!dx && !dtable))
    return;
  positional_backward_kernel<<<grid_for(T * C, 256), 256, 0,
                               compute_stream()>>>(dx, dtable, dout, B, T, C,
                                                   t0);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void rotary_forward(act_t *out, const act_t *x, int64_t B, int64_t T, int64_t H,
                    int64_t D, double theta, int64_t t0) {
  if (T * (D / 2) == 0)
    return;
  rotary_kernel<<<grid_for(T * (D / 2), 128), 128, 0, compute_stream()>>>(
      out, x, B, T, H, D, theta, t0, 1.0, false);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void rotary_backward(act_t *dx, const act_t *dout, int64_t B, int64_t T,
                     int64_t H, int64_t D, double theta, int64_t t0) {
  if (T * (D / 2) == 0 || !dx)
    return;
  rotary_kernel<<<grid_for(T * (D / 2), 128), 128, 0, compute_stream()>>>(
      dx, dout, B, T, H, D, theta, t0, -1.0, true);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
