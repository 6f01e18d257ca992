// GATConv's kernels on CUDA cores (GatAttention.h).
#include "backends/cuda/kernels/GatAttention.h"

#include "backends/cuda/kernels/Common.cuh"

#include <cfloat>
#include <stdexcept>

namespace autoddl::rt {

namespace {

constexpr int kThreads = 256; // 8 warps a block, one row each at a time

__global__ void head_dot_kernel(act_t *__restrict__ s,
                                const act_t *__restrict__ x,
                                const act_t *__restrict__ att, int64_t N,
                                int64_t H, int64_t C) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < N * H;
       t += stride) {
    const int64_t h = t % H;
    float acc = 0.0f;
    for (int64_t c = 0; c < C; ++c)
      acc += detail::to_float(x[t * C + c]) * detail::to_float(att[h * C + c]);
    s[t] = detail::from_float<act_t>(acc);
  }
}

__global__ void head_dot_dx_kernel(act_t *__restrict__ dx,
                                   const act_t *__restrict__ ds,
                                   const act_t *__restrict__ att, int64_t N,
                                   int64_t H, int64_t C) {
  const int64_t F = H * C, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < N * F;
       t += stride) {
    const int64_t f = t % F;
    dx[t] = detail::from_float<act_t>(detail::to_float(dx[t]) +
                                      detail::to_float(ds[t / F * H + f / C]) *
                                          detail::to_float(att[f]));
  }
}

/// One block per element f of att: the sum over the nodes.
__global__ void head_dot_datt_kernel(float *__restrict__ datt,
                                     const act_t *__restrict__ ds,
                                     const act_t *__restrict__ x, int64_t N,
                                     int64_t H, int64_t C) {
  __shared__ float scratch[32];
  const int64_t F = H * C, f = blockIdx.x;
  float acc = 0.0f;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x)
    acc += detail::to_float(ds[n * H + f / C]) * detail::to_float(x[n * F + f]);
  acc = detail::block_sum(acc, scratch);
  if (threadIdx.x == 0)
    datt[f] += acc;
}

__device__ __forceinline__ float leaky(float v, float slope) {
  return v > 0.0f ? v : slope * v;
}

/// Row i's softmax statistics per head into m[h] (the largest LeakyReLU
/// score) and inv[h] (1 / the sum of exp(score - m)); the warp's lanes split
/// the row's entries.
__device__ void row_stats(float *m, float *inv, int lane, int32_t b,
                          int32_t end, int64_t i, const int32_t *col,
                          const act_t *sDst, const act_t *sSrc, int64_t H,
                          float slope) {
  for (int64_t h = 0; h < H; ++h) {
    const float sd = detail::to_float(sDst[i * H + h]);
    float mx = -FLT_MAX;
    for (int32_t e = b + lane; e < end; e += 32)
      mx = fmaxf(mx, leaky(detail::to_float(sSrc[col[e] * H + h]) + sd, slope));
    mx = detail::warp_max(mx);
    float sum = 0.0f;
    for (int32_t e = b + lane; e < end; e += 32)
      sum +=
          expf(leaky(detail::to_float(sSrc[col[e] * H + h]) + sd, slope) - mx);
    sum = detail::warp_sum(sum);
    if (lane == 0) {
      m[h] = mx;
      inv[h] = sum > 0.0f ? 1.0f / sum : 0.0f;
    }
  }
  __syncwarp();
}

/// The attention weight of a LeakyReLU input `raw` in a row of statistics m
/// and inv.
__device__ __forceinline__ float weight(float raw, float slope, float m,
                                        float inv) {
  return expf(leaky(raw, slope) - m) * inv;
}

/// Calls f(i, lane, b, end, m, inv) for each row i of the grid's warps, row
/// i's statistics (row_stats) in m and inv: the first 2 H of `per` floats of
/// shared memory each warp holds (the rest are f's).
template <class Fn>
__device__ void for_rows_with_stats(int64_t per, const int32_t *rowPtr,
                                    const int32_t *col, const act_t *sDst,
                                    const act_t *sSrc, int32_t rows, int64_t H,
                                    float slope, Fn f) {
  extern __shared__ float smem[];
  float *m = smem + (threadIdx.x / 32) * per, *inv = m + H;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
       i < rows; i += warps) {
    const int32_t b = rowPtr[i], end = rowPtr[i + 1];
    row_stats(m, inv, lane, b, end, i, col, sDst, sSrc, H, slope);
    f(i, lane, b, end, m, inv);
    __syncwarp(); // the shared statistics are rewritten by the next row
  }
}

__global__ void gat_forward_kernel(act_t *__restrict__ out,
                                   const int32_t *__restrict__ rowPtr,
                                   const int32_t *__restrict__ col,
                                   const act_t *__restrict__ sDst,
                                   const act_t *__restrict__ sSrc,
                                   const act_t *__restrict__ x, int32_t rows,
                                   int64_t H, int64_t C, float slope) {
  const int64_t F = H * C;
  for_rows_with_stats(2 * H, rowPtr, col, sDst, sSrc, rows, H, slope,
                      [&](int64_t i, int lane, int32_t b, int32_t end,
                          const float *m, const float *inv) {
                        for (int64_t f = lane; f < F; f += 32) {
                          const int64_t h = f / C;
                          const float sd = detail::to_float(sDst[i * H + h]);
                          float acc = 0.0f;
                          for (int32_t e = b; e < end; ++e) {
                            const int64_t j = col[e];
                            acc +=
                                weight(detail::to_float(sSrc[j * H + h]) + sd,
                                       slope, m[h], inv[h]) *
                                detail::to_float(x[j * F + f]);
                          }
                          out[i * F + f] = detail::from_float<act_t>(acc);
                        }
                      });
}

/// The backward per destination row: dsDst directly (the warp owns the row),
/// the sources' gradients dsSrc32 [M,H] and dx32 [M,H*C] by fp32 atomics.
__global__ void gat_backward_kernel(
    act_t *__restrict__ dsDst, float *__restrict__ dsSrc32,
    float *__restrict__ dx32, const int32_t *__restrict__ rowPtr,
    const int32_t *__restrict__ col, const act_t *__restrict__ sDst,
    const act_t *__restrict__ sSrc, const act_t *__restrict__ x,
    const act_t *__restrict__ dy, int32_t rows, int64_t H, int64_t C,
    float slope) {
  const int64_t F = H * C;
  for_rows_with_stats(
      3 * H, rowPtr, col, sDst, sSrc, rows, H, slope,
      [&](int64_t i, int lane, int32_t b, int32_t end, const float *m,
          const float *inv) {
        float *dot = const_cast<float *>(inv) + H; // the warp's third H
        // alpha_e and g_e = dot(dy[i, head h], x[j, head h]) of entry e.
        auto entry = [&](int32_t e, int64_t h, float &raw, float &g) {
          const int64_t j = col[e];
          raw = detail::to_float(sSrc[j * H + h]) +
                detail::to_float(sDst[i * H + h]);
          g = 0.0f;
          for (int64_t c = 0; c < C; ++c)
            g += detail::to_float(dy[i * F + h * C + c]) *
                 detail::to_float(x[j * F + h * C + c]);
          return weight(raw, slope, m[h], inv[h]);
        };
        for (int64_t h = 0; h < H; ++h) {
          float acc = 0.0f, raw, g;
          for (int32_t e = b + lane; e < end; e += 32) {
            const float a = entry(e, h, raw, g);
            acc += a * g;
          }
          acc = detail::warp_sum(acc);
          if (lane == 0)
            dot[h] = acc;
        }
        __syncwarp();
        for (int64_t h = 0; h < H; ++h) {
          float dd = 0.0f, raw, g;
          for (int32_t e = b + lane; e < end; e += 32) {
            const float a = entry(e, h, raw, g);
            const float d = a * (g - dot[h]) * (raw > 0.0f ? 1.0f : slope);
            dd += d;
            if (dsSrc32)
              atomicAdd(dsSrc32 + int64_t(col[e]) * H + h, d);
          }
          dd = detail::warp_sum(dd);
          if (dsDst && lane == 0)
            dsDst[i * H + h] = detail::from_float<act_t>(
                detail::to_float(dsDst[i * H + h]) + dd);
        }
        if (dx32)
          for (int64_t f = lane; f < F; f += 32) {
            const int64_t h = f / C;
            const float gy = detail::to_float(dy[i * F + f]);
            const float sd = detail::to_float(sDst[i * H + h]);
            for (int32_t e = b; e < end; ++e) {
              const int64_t j = col[e];
              atomicAdd(dx32 + j * F + f,
                        weight(detail::to_float(sSrc[j * H + h]) + sd, slope,
                               m[h], inv[h]) *
                            gy);
            }
          }
      });
}

/// dst[n] += src[n] (fp32 sums into act_t).
__global__ void add_f32_kernel(act_t *__restrict__ dst,
                               const float *__restrict__ src, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += stride)
    dst[t] = detail::from_float<act_t>(detail::to_float(dst[t]) + src[t]);
}

unsigned row_blocks(int32_t rows) {
  return detail::grid_for(int64_t(rows) * 32, kThreads);
}

/// The adjacency's device column indices, which the harness uploads for a
/// program with GATConv's ops (ProgramSpec::graph_columns).
const int32_t *columns(const Csr &adj) {
  if (adj.col_idx.size() != adj.nnz())
    throw std::logic_error("gat_aggregate: the adjacency's column indices are "
                           "not on the device (ProgramSpec::graph_columns)");
  return adj.col_idx.data();
}

} // namespace

void head_dot_forward(act_t *s, const act_t *x, const act_t *att, int64_t N,
                      int64_t H, int64_t C) {
  head_dot_kernel<<<detail::grid_for(N * H, kThreads), kThreads, 0,
                    compute_stream()>>>(s, x, att, N, H, C);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void head_dot_backward(act_t *dx, float *datt, const act_t *ds, const act_t *x,
                       const act_t *att, int64_t N, int64_t H, int64_t C) {
  if (dx) {
    head_dot_dx_kernel<<<detail::grid_for(N * H * C, kThreads), kThreads, 0,
                         compute_stream()>>>(dx, ds, att, N, H, C);
    AUTODDL_CUDA_CHECK_LAUNCH();
  }
  if (datt) {
    head_dot_datt_kernel<<<unsigned(H * C), kThreads, 0, compute_stream()>>>(
        datt, ds, x, N, H, C);
    AUTODDL_CUDA_CHECK_LAUNCH();
  }
}

void gat_aggregate_forward(act_t *out, const Csr &adj, const act_t *s_dst,
                           const act_t *s_src, const act_t *x, int64_t H,
                           int64_t C, float slope) {
  if (adj.rows == 0)
    return;
  const size_t smem = size_t(kThreads / 32) * 2 * size_t(H) * sizeof(float);
  gat_forward_kernel<<<row_blocks(adj.rows), kThreads, smem,
                       compute_stream()>>>(out, adj.row_ptr.data(),
                                           columns(adj), s_dst, s_src, x,
                                           adj.rows, H, C, slope);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void gat_aggregate_backward(act_t *ds_dst, act_t *ds_src, act_t *dx,
                            const Csr &adj, const act_t *s_dst,
                            const act_t *s_src, const act_t *x, const act_t *dy,
                            int64_t H, int64_t C, float slope) {
  if (adj.rows == 0)
    return;
  // The sources' sums: dx [M,H*C], then ds_src [M,H], fp32. Grown on the
  // first step (run eagerly: a step graph captures no allocation).
  const int64_t M = adj.cols, nx = dx ? M * H * C : 0, ns = ds_src ? M * H : 0;
  if (adj.f32_scratch.size() < nx + ns)
    adj.f32_scratch = DeviceBuffer<float>(nx + ns);
  float *dx32 = dx ? adj.f32_scratch.data() : nullptr;
  float *ds32 = ds_src ? adj.f32_scratch.data() + nx : nullptr;
  if (nx + ns > 0)
    zero(adj.f32_scratch.data(), (nx + ns) * int64_t(sizeof(float)));
  const size_t smem = size_t(kThreads / 32) * 3 * size_t(H) * sizeof(float);
  gat_backward_kernel<<<row_blocks(adj.rows), kThreads, smem,
                        compute_stream()>>>(
      ds_dst, ds32, dx32, adj.row_ptr.data(), columns(adj), s_dst, s_src, x, dy,
      adj.rows, H, C, slope);
  AUTODDL_CUDA_CHECK_LAUNCH();
  if (dx) {
    add_f32_kernel<<<detail::grid_for(nx, kThreads), kThreads, 0,
                     compute_stream()>>>(dx, dx32, nx);
    AUTODDL_CUDA_CHECK_LAUNCH();
  }
  if (ds_src) {
    add_f32_kernel<<<detail::grid_for(ns, kThreads), kThreads, 0,
                     compute_stream()>>>(ds_src, ds32, ns);
    AUTODDL_CUDA_CHECK_LAUNCH();
  }
}

} // namespace autoddl::rt
