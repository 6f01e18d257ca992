// Cross-entropy (CrossEntropy.h): one block per row of logits. Forward reads
// the row once (online max and sum of exponentials per thread, combined
// across the block); backward reads logits and dlogits once and writes
// dlogits once (storing: reads logits only). Rows of an odd vocabulary (50257)
// start unaligned: for_row peels the elements before the first 16-byte
// boundary. Rows are `ld` apart (ld >= the row length L; the padded
// vocabulary's logits). A negative target is outside the loss (CrossEntropy.h):
// loss 0, no gradient.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/CrossEntropy.h"

namespace autoddl::rt {
namespace {
using namespace detail;

constexpr int kThreads = 512;

/// Block-wide combination of per-thread (max, sum) states.
__device__ MaxSum block_max_sum(MaxSum v) {
  __shared__ float ms[32], ss[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max_sum(v);
  __syncthreads();
  if (lane == 0) {
    ms[warp] = v.m;
    ss[warp] = v.s;
  }
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? MaxSum{ms[lane], ss[lane]} : MaxSum{-INFINITY, 0.0f};
  return warp_max_sum(v);
}

__device__ __forceinline__ void online_add(MaxSum &st, float x) {
  if (x > st.m) {
    st.s = st.s * expf(st.m - x) + 1.0f;
    st.m = x;
  } else {
    st.s += expf(x - st.m);
  }
}

/// Max and sum of exp(l - max) over one row (every thread gets them).
template <int V> __device__ MaxSum row_max_sum(const act_t *row, int64_t L) {
  MaxSum st{-INFINITY, 0.0f};
  for_row<V>(
      row, L, threadIdx.x, blockDim.x,
      [&](int64_t j) {
        float v[V];
        load_floats<act_t, V>(v, row + j);
        // One rescale per pack: the pack's max first, then V exponentials.
        float pm = v[0];
#pragma unroll
        for (int i = 1; i < V; ++i)
          pm = fmaxf(pm, v[i]);
        if (pm > st.m) {
          st.s *= expf(st.m - pm);
          st.m = pm;
        }
#pragma unroll
        for (int i = 0; i < V; ++i)
          st.s += expf(v[i] - st.m);
      },
      [&](int64_t j) { online_add(st, to_float(row[j])); });
  // A warp a row (row_launch): its lanes alone.
  return blockDim.x > 32 ? block_max_sum(st) : warp_max_sum(st);
}

template <int V>
__global__ void __launch_bounds__(kThreads)
    crossentropy_forward_kernel(float *losses, float *lse, const act_t *logits,
                                const int32_t *targets, int64_t N,
                                int64_t V_, int64_t ld) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (n >= N) // whole warps leave: a block of several rows has a warp each
    return;
  const act_t *row = logits + n * ld;
  const MaxSum st = row_max_sum<V>(row, V_);
  if (threadIdx.x == 0) {
    const float l = st.m + logf(st.s);
    lse[n] = l;
    losses[n] = targets[n] < 0 ? 0.0f : l - to_float(row[targets[n]]);
  }
}

/// dlogits += scale * (exp(l - shift[n]) * inv[n] - onehot(target - v0)).
/// Whole vocabulary: shift = lse, inv = 1; vocab-split: shift = gmax, inv =
/// 1 / sums[n].
template <int V>
__global__ void __launch_bounds__(kThreads)
    crossentropy_backward_kernel(act_t *dlogits, const act_t *logits,
                                 const float *shift, const float *sums,
                                 const int32_t *targets, int64_t N, int64_t L,
                                 int64_t ld, int64_t v0, float scale,
                                 bool accumulate) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (n >= N)
    return;
  act_t *drow = dlogits + n * ld;
  if (!accumulate) // storing: the row's padding columns are zero too
    for (int64_t j = L + threadIdx.x; j < ld; j += blockDim.x)
      drow[j] = from_float<act_t>(0.0f);
  if (targets[n] < 0) { // outside the loss: no gradient (storing: zeros)
    if (!accumulate)
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x)
        drow[j] = from_float<act_t>(0.0f);
    return;
  }
  const act_t *row = logits + n * ld;
  const float sh = shift[n], inv = sums ? 1.0f / sums[n] : 1.0f;
  const int64_t target = int64_t(targets[n]) - v0;
  for_row<V>(
      row, L, threadIdx.x, blockDim.x,
      [&](int64_t j) {
        float l[V], d[V] = {};
        load_floats<act_t, V>(l, row + j);
        if (accumulate)
          load_floats<act_t, V>(d, drow + j);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float p = expf(l[i] - sh) * inv;
          const float g = scale * (p - (j + i == target ? 1.0f : 0.0f));
          d[i] = accumulate ? d[i] + g : g;
        }
        store_floats<act_t, V>(drow + j, d);
      },
      [&](int64_t j) {
        const float p = expf(to_float(row[j]) - sh) * inv;
        const float g = scale * (p - (j == target ? 1.0f : 0.0f));
        drow[j] = from_float<act_t>(accumulate ? to_float(drow[j]) + g : g);
      });
}

template <int V>
__global__ void __launch_bounds__(kThreads)
    vocab_max_kernel(float *local_max, const act_t *logits, int64_t L,
                     int64_t ld) {
  const act_t *row = logits + int64_t(blockIdx.x) * ld;
  float m = -INFINITY;
  for_row_values<V>(row, L, threadIdx.x, blockDim.x,
                    [&](float v) { m = fmaxf(m, v); });
  // A max is a (max, sum) combination with the sums ignored.
  m = block_max_sum(MaxSum{m, 0.0f}).m;
  if (threadIdx.x == 0)
    local_max[blockIdx.x] = m;
}

template <int V>
__global__ void __launch_bounds__(kThreads)
    vocab_sums_kernel(float *sums, const act_t *logits, const int32_t *targets,
                      const float *gmax, int64_t N, int64_t L, int64_t ld,
                      int64_t v0) {
  __shared__ float scratch[32];
  const int64_t n = blockIdx.x;
  const act_t *row = logits + n * ld;
  const float m = gmax[n];
  float s = 0.0f;
  for_row_values<V>(row, L, threadIdx.x, blockDim.x,
                    [&](float v) { s += expf(v - m); });
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    sums[n] = s;
    const int64_t local = int64_t(targets[n]) - v0;
    sums[N + n] = (local >= 0 && local < L) ? to_float(row[local]) : 0.0f;
  }
}

__global__ void vocab_loss_kernel(float *losses, const float *gmax,
                                  const float *sums, const int32_t *targets,
                                  int64_t N) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N;
       n += int64_t(gridDim.x) * blockDim.x)
    losses[n] = targets[n] < 0 ? 0.0f : logf(sums[n]) + gmax[n] - sums[N + n];
}

/// Threads of a block that reads one row of L values in packs of V: one pack
/// each, at least a warp, at most kThreads. A classifier's rows (10-47
/// classes) would leave most of kThreads idle, and the resident-threads limit
/// would then run a few blocks per SM at a time: 1 ms for ogbn-arxiv's 169k
/// rows of 40 (measured on an H100), against 0.1 ms with a warp each.
template <int V> unsigned row_threads(int64_t L) {
  const int64_t packs = (L + V - 1) / V;
  const int64_t t = std::min<int64_t>(kThreads, (packs + 31) / 32 * 32);
  return unsigned(std::max<int64_t>(32, t));
}

/// The launch of a kernel that reads each of N rows of L values with one
/// block (row_threads), or, where a warp suffices, with one warp of a block of
/// kWarpRows (threadIdx.y the row): 32-thread blocks would fill half an SM's
/// threads (its block limit), these all of them.
struct RowLaunch {
  dim3 grid, block;
};
constexpr int kWarpRows = 8;
template <int V> RowLaunch row_launch(int64_t N, int64_t L) {
  const unsigned t = row_threads<V>(L);
  if (t > 32)
    return {dim3(unsigned(N)), dim3(t)};
  return {dim3(unsigned((N + kWarpRows - 1) / kWarpRows)), dim3(32, kWarpRows)};
}

bool rows_vectorisable(const act_t *a, const act_t *b) {
  return same_alignment(a, b);
}
/// One warp per row (grid-stride): the row's argmax, the lowest index among
/// equal maxima; counts the rows where it is the label.
__global__ void count_correct_kernel(unsigned long long *count,
                                     const act_t *__restrict__ logits,
                                     const int32_t *__restrict__ labels,
                                     int64_t N, int64_t V, int64_t ld) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  // Counted per warp, added once: one address taking an atomic per correct
  // row serialises 10^5 of them.
  unsigned long long mine = 0;
  for (int64_t n = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; n < N;
       n += warps) {
    const act_t *row = logits + n * ld;
    float best = -INFINITY;
    int64_t at = V;
    for (int64_t v = lane; v < V; v += 32) {
      const float x = to_float(row[v]);
      if (x > best) // lanes visit increasing v: keeps the first maximum
        best = x, at = v;
    }
    for (int o = 16; o > 0; o /= 2) {
      const float b = __shfl_xor_sync(0xffffffffu, best, o);
      const int64_t a = __shfl_xor_sync(0xffffffffu, at, o);
      if (b > best || (b == best && a < at))
        best = b, at = a;
    }
    mine += labels[n] >= 0 && at == labels[n];
  }
  if (lane == 0 && mine > 0)
    atomicAdd(count, mine);
}

/// One block a row: the row's sum of (score - onehot)^2, over C.
__global__ void __launch_bounds__(kThreads)
    squared_error_forward_kernel(float *losses, const act_t *scores,
                                 const int32_t *targets, int64_t C) {
  __shared__ float scratch[32];
  const int64_t n = blockIdx.x;
  const act_t *row = scores + n * C;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < C && targets[n] >= 0; j += blockDim.x) {
    const float d = to_float(row[j]) - (j == targets[n] ? 1.0f : 0.0f);
    s += d * d;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0)
    losses[n] = s / float(C);
}

/// Elementwise over N*C: dscores += k * (scores - onehot).
__global__ void squared_error_backward_kernel(act_t *dscores,
                                              const act_t *scores,
                                              const int32_t *targets,
                                              int64_t total, int64_t C,
                                              float k) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total)
    return;
  const int32_t t = targets[i / C];
  if (t < 0)
    return;
  const float g = k * (to_float(scores[i]) - (i % C == t ? 1.0f : 0.0f));
  dscores[i] = from_float<act_t>(to_float(dscores[i]) + g);
}

/// Launches the backward of rows [N, L] (ld elements apart; 0: L) against
/// `shift` (and `sums` for the vocab-parallel form) with the pack the rows
/// allow; nothing without rows or a gradient.
void launch_backward(act_t *dlogits, const act_t *logits, const float *shift,
                     const float *sums, const int32_t *targets, int64_t N,
                     int64_t L, int64_t ld, int64_t v0, float scale,
                     bool accumulate) {
  if (N == 0 || !dlogits)
    return;
  ld = ld ? ld : L;
  with_pack<kPack<act_t>>(rows_vectorisable(logits, dlogits), [&](auto w) {
    constexpr int P = decltype(w)::value;
    const RowLaunch rl = row_launch<P>(N, L);
    crossentropy_backward_kernel<P><<<rl.grid, rl.block, 0, compute_stream()>>>(
        dlogits, logits, shift, sums, targets, N, L, ld, v0, scale,
        accumulate);
  });
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace

void crossentropy_forward(float *losses, float *lse, const act_t *logits,
                          const int32_t *targets, int64_t N, int64_t V,
                          int64_t ld) {
  if (N == 0)
    return;
  constexpr int P = kPack<act_t>;
  const RowLaunch rl = row_launch<P>(N, V);
  crossentropy_forward_kernel<P><<<rl.grid, rl.block, 0, compute_stream()>>>(
      losses, lse, logits, targets, N, V, ld ? ld : V);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void crossentropy_backward(act_t *dlogits, const act_t *logits,
                           const float *lse, const int32_t *targets, int64_t N,
                           int64_t V, float grad_scale, int64_t ld,
                           bool accumulate) {
  launch_backward(dlogits, logits, lse, nullptr, targets, N, V, ld, 0,
                  grad_scale, accumulate);
}

void crossentropy_vocab_parallel_max(float *local_max, const act_t *logits,
                                     int64_t N, int64_t Vl, int64_t ld) {
  if (N == 0)
    return;
  constexpr int P = kPack<act_t>;
  vocab_max_kernel<P><<<unsigned(N), row_threads<P>(Vl), 0, compute_stream()>>>(
      local_max, logits, Vl, ld ? ld : Vl);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void crossentropy_vocab_parallel_sums(float *sums, const act_t *logits,
                                      const int32_t *targets, const float *gmax,
                                      int64_t N, int64_t Vl, int64_t v0,
                                      int64_t ld) {
  if (N == 0)
    return;
  constexpr int P = kPack<act_t>;
  vocab_sums_kernel<P><<<unsigned(N), row_threads<P>(Vl), 0, compute_stream()>>>(
      sums, logits, targets, gmax, N, Vl, ld ? ld : Vl, v0);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void crossentropy_vocab_parallel_loss(float *losses, const float *gmax,
                                      const float *sums, const int32_t *targets,
                                      int64_t N) {
  if (N == 0)
    return;
  vocab_loss_kernel<<<grid_for(N, 256), 256, 0, compute_stream()>>>(
      losses, gmax, sums, targets, N);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void crossentropy_vocab_parallel_backward(act_t *dlogits, const act_t *logits,
                                          const int32_t *targets,
                                          const float *gmax, const float *sums,
                                          int64_t N, int64_t Vl, int64_t v0,
                                          float grad_scale, int64_t ld,
                                          bool accumulate) {
  launch_backward(dlogits, logits, gmax, sums, targets, N, Vl, ld, v0,
                  grad_scale, accumulate);
}

void count_correct(unsigned long long *count, const act_t *logits,
                   const int32_t *labels, int64_t N, int64_t V, int64_t ld) {
  AUTODDL_CUDA_CHECK(
      cudaMemsetAsync(count, 0, sizeof(unsigned long long), compute_stream()));
  if (N <= 0 || V <= 0)
    return;
  ld = ld ? ld : V;
  count_correct_kernel<<<grid_for(N * 32, 256), 256, 0, compute_stream()>>>(
      count, logits, labels, N, V, ld);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

int64_t counter_to_host(const unsigned long long *count) {
  unsigned long long host = 0;
  copy_to_host(&host, count, sizeof(host));
  return int64_t(host);
}

void squared_error_forward(float *losses, const act_t *scores,
                           const int32_t *targets, int64_t N, int64_t C) {
  if (N == 0)
    return;
  squared_error_forward_kernel<<<unsigned(N), row_threads<1>(C), 0,
                                 compute_stream()>>>(losses, scores, targets,
                                                     C);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void squared_error_backward(act_t *dscores, const act_t *scores,
                            const int32_t *targets, int64_t N, int64_t C,
                            float grad_scale) {
  if (N == 0 || !dscores)
    return;
  const int64_t total = N * C;
  squared_error_backward_kernel<<<unsigned((total + 255) / 256), 256, 0,
                                  compute_stream()>>>(
      dscores, scores, targets, total, C, grad_scale * 2.0f / float(C));
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace autoddl::rt
