// LayerNorm and RMSNorm (Norm.h). One warp per row: the row is read once per
// pass (the second and third reads hit L1/L2), statistics in fp32. Backward
// sums the parameter gradients of a block's rows in shared memory and adds
// them to the fp32 gradients with one atomic per column per block (rows beyond
// ~20k columns: straight to global memory).
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Norm.h"

namespace autoddl::rt {
namespace {
using namespace detail;

constexpr int kWarps = 8; // rows per block
constexpr int64_t kMaxSharedBytes = 200 * 1024;
enum { kAccSlices = 0, kAccShared = 1, kAccGlobal = 2 };

template <int V, bool kRms>
__global__ void __launch_bounds__(32 * kWarps)
    norm_forward_kernel(act_t *out, float *mean, float *rstd, const act_t *x,
                        const act_t *gamma, const act_t *beta, int64_t N,
                        int64_t C, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= N)
    return;
  const act_t *xr = x + row * C;
  act_t *o = out + row * C;
  float s = 0.0f;
  for_row<V>(
      xr, C, lane, 32,
      [&](int64_t j) {
        float v[V];
        load_floats<act_t, V>(v, xr + j);
#pragma unroll
        for (int i = 0; i < V; ++i)
          s += kRms ? v[i] * v[i] : v[i];
      },
      [&](int64_t j) {
        const float v = to_float(xr[j]);
        s += kRms ? v * v : v;
      });
  s = warp_sum(s);
  float m = 0.0f, r;
  if (kRms) {
    r = 1.0f / sqrtf(s / float(C) + eps);
  } else {
    m = s / float(C);
    float q = 0.0f; // two-pass variance: no cancellation
    for_row<V>(
        xr, C, lane, 32,
        [&](int64_t j) {
          float v[V];
          load_floats<act_t, V>(v, xr + j);
#pragma unroll
          for (int i = 0; i < V; ++i)
            q += (v[i] - m) * (v[i] - m);
        },
        [&](int64_t j) {
          const float d = to_float(xr[j]) - m;
          q += d * d;
        });
    q = warp_sum(q);
    r = 1.0f / sqrtf(q / float(C) + eps);
  }
  for_row<V>(
      xr, C, lane, 32,
      [&](int64_t j) {
        float v[V], g[V], b[V];
        load_floats<act_t, V>(v, xr + j);
        load_floats<act_t, V>(g, gamma + j);
        if (!kRms && beta)
          load_floats<act_t, V>(b, beta + j);
#pragma unroll
        for (int i = 0; i < V; ++i)
          v[i] = kRms ? v[i] * r * g[i]
                      : (v[i] - m) * r * g[i] + (beta ? b[i] : 0.0f);
        store_floats<act_t, V>(o + j, v);
      },
      [&](int64_t j) {
        const float v = to_float(xr[j]), g = to_float(gamma[j]);
        o[j] = from_float<act_t>(kRms ? v * r * g
                                      : (v - m) * r * g +
                                            (beta ? to_float(beta[j]) : 0.0f));
      });
  if (lane == 0) {
    if (!kRms)
      mean[row] = m;
    rstd[row] = r;
  }
}

/// The forward with the row held in registers (read once, written once):
/// rows of at most 32 * P packs, x/out/gamma/beta 16-byte aligned, C % V == 0.
template <int P, bool kRms>
__global__ void __launch_bounds__(32 * kWarps)
    norm_forward_cached_kernel(act_t *out, float *mean, float *rstd,
                               const act_t *x, const act_t *gamma,
                               const act_t *beta, int64_t N, int64_t C,
                               float eps) {
  constexpr int V = kPack<act_t>;
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= N)
    return;
  const int64_t packs = C / V;
  const act_t *xr = x + row * C;
  float v[P][V];
  float s = 0.0f;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t k = lane + 32 * p;
    if (k < packs) {
      load_floats<act_t, V>(v[p], xr + k * V);
#pragma unroll
      for (int i = 0; i < V; ++i)
        s += kRms ? v[p][i] * v[p][i] : v[p][i];
    }
  }
  s = warp_sum(s);
  float m = 0.0f, r;
  if (kRms) {
    r = 1.0f / sqrtf(s / float(C) + eps);
  } else {
    m = s / float(C);
    float q = 0.0f;
#pragma unroll
    for (int p = 0; p < P; ++p)
      if (lane + 32 * p < packs)
#pragma unroll
        for (int i = 0; i < V; ++i)
          q += (v[p][i] - m) * (v[p][i] - m);
    q = warp_sum(q);
    r = 1.0f / sqrtf(q / float(C) + eps);
  }
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t k = lane + 32 * p;
    if (k >= packs)
      continue;
    float g[V], b[V];
    load_floats<act_t, V>(g, gamma + k * V);
    if (!kRms && beta)
      load_floats<act_t, V>(b, beta + k * V);
#pragma unroll
    for (int i = 0; i < V; ++i)
      v[p][i] = kRms ? v[p][i] * r * g[i]
                     : (v[p][i] - m) * r * g[i] + (beta ? b[i] : 0.0f);
    store_floats<act_t, V>(out + row * C + k * V, v[p]);
  }
  if (lane == 0) {
    if (!kRms)
      mean[row] = m;
    rstd[row] = r;
  }
}

template <int V, bool kRms>
__global__ void __launch_bounds__(32 * kWarps)
    norm_backward_kernel(act_t *dx, float *dgamma, float *dbeta,
                         const act_t *dout, const act_t *x, const act_t *gamma,
                         const float *mean, const float *rstd, int64_t N,
                         int64_t C, int accMode) {
  extern __shared__ float shared[];
  // kAccSlices: each warp sums its rows into its own slice of shared memory
  // (plain adds: a lane owns its columns); kAccShared: one shared copy,
  // atomics; kAccGlobal: atomics straight into the fp32 gradients.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int slices = accMode == kAccSlices ? kWarps : 1;
  float *base = accMode == kAccSlices ? shared + int64_t(warp) * 2 * C : shared;
  float *accGamma = dgamma, *accBeta = dbeta;
  const bool atomic = accMode != kAccSlices;
  if (accMode != kAccGlobal) {
    accGamma = dgamma ? base : nullptr;
    accBeta = dbeta ? base + C : nullptr;
    for (int64_t j = threadIdx.x; j < 2 * C * slices; j += blockDim.x)
      shared[j] = 0.0f;
    __syncthreads();
  }
  auto acc = [&](float *p, float v) {
    if (atomic)
      atomicAdd(p, v);
    else
      *p += v;
  };
  for (int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); row < N;
       row += int64_t(gridDim.x) * kWarps) {
    const act_t *xr = x + row * C, *gr = dout + row * C;
    const float m = kRms ? 0.0f : mean[row], r = rstd[row];
    // Layernorm: a = sum g*gamma, b = sum g*gamma*xhat; RMSNorm: b = sum
    // g*gamma*x.
    float a = 0.0f, b = 0.0f;
    for_row<V>(
        xr, C, lane, 32,
        [&](int64_t j) {
          float xv[V], gv[V], wv[V];
          load_floats<act_t, V>(xv, xr + j);
          load_floats<act_t, V>(gv, gr + j);
          load_floats<act_t, V>(wv, gamma + j);
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const float gg = gv[i] * wv[i];
            a += gg;
            b += gg * (kRms ? xv[i] : (xv[i] - m) * r);
          }
        },
        [&](int64_t j) {
          const float xv = to_float(xr[j]);
          const float gg = to_float(gr[j]) * to_float(gamma[j]);
          a += gg;
          b += gg * (kRms ? xv : (xv - m) * r);
        });
    a = warp_sum(a) / float(C);
    b = warp_sum(b) / float(C);
    const float k = b * r * r; // RMSNorm's mean(g x) rstd^2
    for_row<V>(
        xr, C, lane, 32,
        [&](int64_t j) {
          float xv[V], gv[V], wv[V], d[V];
          load_floats<act_t, V>(xv, xr + j);
          load_floats<act_t, V>(gv, gr + j);
          load_floats<act_t, V>(wv, gamma + j);
          if (dx)
            load_floats<act_t, V>(d, dx + row * C + j);
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const float gg = gv[i] * wv[i];
            const float xhat = kRms ? xv[i] * r : (xv[i] - m) * r;
            if (dx)
              d[i] += kRms ? r * (gg - xv[i] * k) : r * (gg - a - xhat * b);
            if (accGamma)
              acc(accGamma + j + i, gv[i] * xhat);
            if (!kRms && accBeta)
              acc(accBeta + j + i, gv[i]);
          }
          if (dx)
            store_floats<act_t, V>(dx + row * C + j, d);
        },
        [&](int64_t j) {
          const float xv = to_float(xr[j]), gv = to_float(gr[j]);
          const float gg = gv * to_float(gamma[j]);
          const float xhat = kRms ? xv * r : (xv - m) * r;
          if (dx) {
            act_t *p = dx + row * C + j;
            *p = from_float<act_t>(
                to_float(*p) +
                (kRms ? r * (gg - xv * k) : r * (gg - a - xhat * b)));
          }
          if (accGamma)
            acc(accGamma + j, gv * xhat);
          if (!kRms && accBeta)
            acc(accBeta + j, gv);
        });
  }
  if (accMode != kAccGlobal) {
    __syncthreads();
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      float g = 0.0f, b = 0.0f;
      for (int w = 0; w < slices; ++w) {
        g += shared[int64_t(w) * 2 * C + j];
        b += shared[int64_t(w) * 2 * C + C + j];
      }
      if (dgamma)
        atomicAdd(dgamma + j, g);
      if (!kRms && dbeta)
        atomicAdd(dbeta + j, b);
    }
  }
}

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

template <bool kRms>
void launch_forward(act_t *out, float *mean, float *rstd, const act_t *x,
                    const act_t *gamma, const act_t *beta, int64_t N, int64_t C,
                    float eps) {
  if (N == 0 || C == 0)
    return;
  constexpr int V = kPack<act_t>;
  const unsigned blocks = unsigned((N + kWarps - 1) / kWarps);
  const int64_t packs = C / V;
  const bool aligned = C % V == 0 && aligned16(x) && aligned16(out) &&
                       aligned16(gamma) && (!beta || aligned16(beta));
  if (aligned && packs <= 32 * 4)
    norm_forward_cached_kernel<4, kRms>
        <<<blocks, 32 * kWarps, 0, compute_stream()>>>(out, mean, rstd, x,
                                                       gamma, beta, N, C, eps);
  else if (aligned && packs <= 32 * 8)
    norm_forward_cached_kernel<8, kRms>
        <<<blocks, 32 * kWarps, 0, compute_stream()>>>(out, mean, rstd, x,
                                                       gamma, beta, N, C, eps);
  else if (C % V == 0 && same_alignment(x, out, gamma, beta))
    norm_forward_kernel<V, kRms><<<blocks, 32 * kWarps, 0, compute_stream()>>>(
        out, mean, rstd, x, gamma, beta, N, C, eps);
  else
    norm_forward_kernel<1, kRms><<<blocks, 32 * kWarps, 0, compute_stream()>>>(
        out, mean, rstd, x, gamma, beta, N, C, eps);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

template <int V, bool kRms>
void launch_backward_v(act_t *dx, float *dgamma, float *dbeta,
                       const act_t *dout, const act_t *x, const act_t *gamma,
                       const float *mean, const float *rstd, int64_t N,
                       int64_t C) {
  const int64_t oneCopy = 2 * C * int64_t(sizeof(float));
  int accMode = kAccGlobal;
  int64_t sharedBytes = 0;
  if (dgamma || dbeta) {
    if (oneCopy * kWarps <= kMaxSharedBytes) {
      accMode = kAccSlices;
      sharedBytes = oneCopy * kWarps;
    } else if (oneCopy <= kMaxSharedBytes) {
      accMode = kAccShared;
      sharedBytes = oneCopy;
    }
  }
  auto kernel = norm_backward_kernel<V, kRms>;
  if (sharedBytes > 48 * 1024)
    AUTODDL_CUDA_CHECK(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sharedBytes)));
  int64_t blocks = (N + kWarps - 1) / kWarps;
  const int64_t cap = int64_t(sm_count()) * 2;
  if (blocks > cap)
    blocks = cap;
  kernel<<<unsigned(blocks), 32 * kWarps, size_t(sharedBytes),
           compute_stream()>>>(dx, dgamma, dbeta, dout, x, gamma, mean, rstd, N,
                               C, accMode);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

template <bool kRms>
void launch_backward(act_t *dx, float *dgamma, float *dbeta, const act_t *dout,
                     const act_t *x, const act_t *gamma, const float *mean,
                     const float *rstd, int64_t N, int64_t C) {
  if (N == 0 || C == 0 || (!dx && !dgamma && !dbeta))
    return;
  constexpr int V = kPack<act_t>;
  if (C % V == 0 && same_alignment(x, dout, gamma, dx))
    launch_backward_v<V, kRms>(dx, dgamma, dbeta, dout, x, gamma, mean, rstd, N,
                               C);
  else
    launch_backward_v<1, kRms>(dx, dgamma, dbeta, dout, x, gamma, mean, rstd, N,
                               C);
}
} // namespace

void layernorm_forward(act_t *out, float *mean, float *rstd, const act_t *x,
                       const act_t *gamma, const act_t *beta, int64_t N,
                       int64_t C, float eps) {
  launch_forward<false>(out, mean, rstd, x, gamma, beta, N, C, eps);
}

void layernorm_backward(act_t *dx, float *dgamma, float *dbeta,
                        const act_t *dout, const act_t *x, const act_t *gamma,
                        const float *mean, const float *rstd, int64_t N,
                        int64_t C) {
  launch_backward<false>(dx, dgamma, dbeta, dout, x, gamma, mean, rstd, N, C);
}

void rmsnorm_forward(act_t *out, float *rstd, const act_t *x,
                     const act_t *gamma, int64_t N, int64_t C, float eps) {
  launch_forward<true>(out, nullptr, rstd, x, gamma, nullptr, N, C, eps);
}

void rmsnorm_backward(act_t *dx, float *dgamma, const act_t *dout,
                      const act_t *x, const act_t *gamma, const float *rstd,
                      int64_t N, int64_t C) {
  launch_backward<true>(dx, dgamma, nullptr, dout, x, gamma, nullptr, rstd, N,
                        C);
}

} // namespace autoddl::rt
