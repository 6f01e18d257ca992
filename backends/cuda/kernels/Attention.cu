// Fused attention on the GPU (Attention.h): dispatch between cuDNN's fused
// attention (AttentionCudnn.cu, where the build has it), the
// FlashAttention-2 tensor-core kernels (AttentionFlash.cuh) and the simple
// fp32 CUDA-core kernels below, the D_i = rowsum(dO o O) preprocess and the
// dQ workspace.
#include "backends/cuda/kernels/Attention.h"
#include "backends/cuda/kernels/AttentionCudnn.h"

// Backward loop: 1 = prefetch the next query tile after the iteration's first
// barrier (two barriers an iteration), 0 = before it (three).
#ifndef AUTODDL_ATTENTION_BWD_LATE_PREFETCH
#define AUTODDL_ATTENTION_BWD_LATE_PREFETCH 1
#endif

#ifndef AUTODDL_FP32
#include "backends/cuda/kernels/AttentionFlash.cuh"
#endif

// Tile choices, build-time knobs for the benchmark's comparisons
// (bench/cuda/attention_build.sh builds the alternatives; the defaults are
// the measured best,
// bench/results/cuda/2026-12-01-attention/attention_h200.json).

// D = 128 forward: 1 = 128 query rows x 64 keys a block, Q re-read from
// shared memory (H200, B4 T2048 H32 causal: 252 TFLOP/s); 0 = 64 x 64, Q in
// registers (188 TFLOP/s).
#ifndef AUTODDL_ATTENTION_D128_FWD
#define AUTODDL_ATTENTION_D128_FWD 1
#endif
// Backward tiles (AttentionFlash.cuh: warps a block, key m-tiles of 16 a warp,
// query rows an iteration), measured best on the H200
// (bench/results/cuda/2026-12-01-attention/attention_h200.json): D = 32, 64
// causal 4 / 1 / 32 (1-4% over 4 / 1 / 64: the causal tiles skip more), D = 32,
// 64 full 4 / 2 / 32 (9%: half the Q and dO shared-memory reads per mma; 5%
// slower causal), D = 128 8 / 1 / 64 (3%), D = 16 4 / 1 / 64. Setting any of
// the three knobs below replaces the choice for every D >= 32 (the benchmark's
// alternatives); key tiles apply to D <= 64 only (registers), and query rows
// fall back to 64 where 32 would give dQ a column group narrower than 16.
// AUTODDL_ATTENTION_BWD_WARPS, AUTODDL_ATTENTION_BWD_KEY_TILES,
// AUTODDL_ATTENTION_BWD_QROWS.

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace autoddl::rt {
namespace {

constexpr int kSimpleThreads = 128;

template <class T> __device__ __forceinline__ float to_f(T x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return __bfloat162float(x);
}
template <class T> __device__ __forceinline__ T from_f(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return __float2bfloat16_rn(x);
}

/// Block-wide sum or max over kSimpleThreads threads; every thread gets the
/// result. `red` is 32 floats of shared memory; the call ends with a barrier
/// so `red` can be reused at once.
template <bool kMax> __device__ float block_reduce(float x, float *red) {
  for (int o = 16; o > 0; o /= 2) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = kMax ? fmaxf(x, y) : x + y;
  }
  if (threadIdx.x % 32 == 0)
    red[threadIdx.x / 32] = x;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kSimpleThreads / 32; ++w)
    r = kMax ? fmaxf(r, red[w]) : r + red[w];
  __syncthreads();
  return r;
}

/// Keys (or queries) in the chunk starting `left` before the end.
__device__ __forceinline__ int64_t chunk_len(int64_t left) {
  return left < kSimpleThreads ? left : kSimpleThreads;
}

template <class T>
__device__ float dot_row(const float *a, const T *b, int64_t D) {
  float s = 0.f;
  for (int64_t d = 0; d < D; ++d)
    s += a[d] * to_f(b[d]);
  return s;
}

/// Simple forward: one block per query row (t, h, b), keys streamed in chunks
/// of kSimpleThreads (a thread per key) with an online softmax; shared memory:
/// q row and output accumulator (2*D floats) and the chunk's probabilities.
template <class T>
__global__ void
attention_forward_simple_kernel(T *out, float *lse, const T *q, const T *k,
                                const T *v, int64_t q_stride, int64_t kv_stride,
                                int64_t T_, int64_t H, int64_t D, int64_t group,
                                bool causal, float scale) {
  extern __shared__ float sm[];
  float *sq = sm, *so = sm + D, *sp = sm + 2 * D;
  __shared__ float red[32];
  const int64_t t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / group;
  const T *qRow = q + (b * T_ + t) * q_stride + h * D;
  for (int64_t d = threadIdx.x; d < D; d += kSimpleThreads)
    sq[d] = to_f(qRow[d]), so[d] = 0.f;
  __syncthreads();
  const int64_t nKeys = causal ? t + 1 : T_;
  float m = -INFINITY, l = 0.f;
  for (int64_t c0 = 0; c0 < nKeys; c0 += kSimpleThreads) {
    const int64_t s = c0 + threadIdx.x;
    const float x =
        s < nKeys ? scale * dot_row(sq, k + (b * T_ + s) * kv_stride + g * D, D)
                  : -INFINITY;
    const float mNew = fmaxf(m, block_reduce<true>(x, red));
    const float corr = expf(m - mNew); // m = -inf the first time: 0
    const float p = s < nKeys ? expf(x - mNew) : 0.f;
    sp[threadIdx.x] = p;
    l = l * corr + block_reduce<false>(p, red); // its barrier publishes sp
    m = mNew;
    const int64_t n = chunk_len(nKeys - c0);
    for (int64_t d = threadIdx.x; d < D; d += kSimpleThreads) {
      float acc = so[d] * corr;
      for (int64_t i = 0; i < n; ++i)
        acc += sp[i] * to_f(v[(b * T_ + c0 + i) * kv_stride + g * D + d]);
      so[d] = acc;
    }
    __syncthreads();
  }
  T *oRow = out + (b * T_ + t) * H * D + h * D;
  for (int64_t d = threadIdx.x; d < D; d += kSimpleThreads)
    oRow[d] = from_f<T>(so[d] / l);
  if (threadIdx.x == 0)
    lse[(b * H + h) * T_ + t] = m + logf(l);
}

/// delta[b,h,t] = sum_d dout o out over head h's row (one warp a row), and
/// zeroes the matching dqAcc row when dqAcc is given.
template <class T>
__global__ void
attention_delta_kernel(float *delta, float *dqAcc, const T *dout, const T *out,
                       int64_t rows, int64_t T_, int64_t H, int64_t D) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  // rows = B*T*H, ordered (b, t, h) like dout's [B,T,H*D].
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       row < rows; row += warps) {
    const T *a = dout + row * D, *o = out + row * D;
    float s = 0.f;
    for (int64_t d = lane; d < D; d += 32) {
      s += to_f(a[d]) * to_f(o[d]);
      if (dqAcc)
        dqAcc[row * D + d] = 0.f;
    }
    for (int w = 16; w > 0; w /= 2)
      s += __shfl_xor_sync(0xffffffffu, s, w);
    if (lane == 0) {
      const int64_t h = row % H, bt = row / H;
      delta[((bt / T_) * H + h) * T_ + bt % T_] = s;
    }
  }
}

/// dq[b,t,h*D+d] (+)= scale * dqAcc[b,t,h,d].
template <class T>
__global__ void attention_dq_finish_kernel(T *dq, int64_t dq_stride,
                                           const float *dqAcc, int64_t n,
                                           int64_t HD, float scale,
                                           bool accumulate) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    T *p = dq + (i / HD) * dq_stride + i % HD;
    *p = from_f<T>((accumulate ? to_f(*p) : 0.f) + scale * dqAcc[i]);
  }
}

#ifndef AUTODDL_FP32
/// The same, four elements a thread (HD, dq_stride multiples of 4, dq 8-byte
/// aligned, n < 2^31): 16-byte loads of dqAcc, 8-byte bf16 stores, and 32-bit
/// index arithmetic (the 64-bit division per element above costs more than
/// the memory traffic).
__global__ void attention_dq_finish4_kernel(__nv_bfloat16 *dq, int dq_stride,
                                            const float4 *dqAcc, int quads,
                                            int HD4, float scale,
                                            bool accumulate) {
  for (int i = int(blockIdx.x) * blockDim.x + threadIdx.x; i < quads;
       i += int(gridDim.x) * blockDim.x) {
    const float4 a = dqAcc[i];
    auto *p = reinterpret_cast<__nv_bfloat162 *>(dq + (i / HD4) * dq_stride +
                                                 (i % HD4) * 4);
    float2 lo = make_float2(0.f, 0.f), hi = lo;
    if (accumulate)
      lo = __bfloat1622float2(p[0]), hi = __bfloat1622float2(p[1]);
    p[0] = __floats2bfloat162_rn(lo.x + scale * a.x, lo.y + scale * a.y);
    p[1] = __floats2bfloat162_rn(hi.x + scale * a.z, hi.y + scale * a.w);
  }
}
#endif

/// Simple dq: one block per query row; keys in chunks, dS in shared memory.
template <class T>
__global__ void
attention_dq_simple_kernel(T *dq, int64_t dq_stride, const T *q, const T *k,
                           const T *v, int64_t q_stride, int64_t kv_stride,
                           const T *dout, const float *lse, const float *delta,
                           int64_t T_, int64_t H, int64_t D, int64_t group,
                           bool causal, float scale, bool accumulate) {
  extern __shared__ float sm[];
  float *sq = sm, *sdo = sm + D, *acc = sm + 2 * D, *sds = sm + 3 * D;
  const int64_t t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / group;
  const int64_t row = (b * H + h) * T_ + t;
  for (int64_t d = threadIdx.x; d < D; d += kSimpleThreads) {
    sq[d] = to_f(q[(b * T_ + t) * q_stride + h * D + d]);
    sdo[d] = to_f(dout[(b * T_ + t) * H * D + h * D + d]);
    acc[d] = 0.f;
  }
  __syncthreads();
  const int64_t nKeys = causal ? t + 1 : T_;
  for (int64_t c0 = 0; c0 < nKeys; c0 += kSimpleThreads) {
    const int64_t s = c0 + threadIdx.x;
    float ds = 0.f;
    if (s < nKeys) {
      const int64_t kv = (b * T_ + s) * kv_stride + g * D;
      const float p = expf(scale * dot_row(sq, k + kv, D) - lse[row]);
      ds = p * (dot_row(sdo, v + kv, D) - delta[row]);
    }
    sds[threadIdx.x] = ds;
    __syncthreads();
    const int64_t n = chunk_len(nKeys - c0);
    for (int64_t d = threadIdx.x; d < D; d += kSimpleThreads)
      for (int64_t i = 0; i < n; ++i)
        acc[d] += sds[i] * to_f(k[(b * T_ + c0 + i) * kv_stride + g * D + d]);
    __syncthreads();
  }
  for (int64_t d = threadIdx.x; d < D; d += kSimpleThreads) {
    T *p = dq + (b * T_ + t) * dq_stride + h * D + d;
    *p = from_f<T>((accumulate ? to_f(*p) : 0.f) + scale * acc[d]);
  }
}

/// Simple dk, dv: one block per key row s of kv head g, over the queries of
/// every q head of its group.
template <class T>
__global__ void attention_dkv_simple_kernel(
    T *dk, T *dv, int64_t dkv_stride, const T *q, const T *k, const T *v,
    int64_t q_stride, int64_t kv_stride, const T *dout, const float *lse,
    const float *delta, int64_t T_, int64_t H, int64_t D, int64_t group,
    bool causal, float scale, bool accumulate) {
  extern __shared__ float sm[];
  float *sk = sm, *sv = sm + D, *accK = sm + 2 * D, *accV = sm + 3 * D;
  float *sp = sm + 4 * D, *sds = sp + kSimpleThreads;
  const int64_t s = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  for (int64_t d = threadIdx.x; d < D; d += kSimpleThreads) {
    sk[d] = to_f(k[(b * T_ + s) * kv_stride + g * D + d]);
    sv[d] = to_f(v[(b * T_ + s) * kv_stride + g * D + d]);
    accK[d] = accV[d] = 0.f;
  }
  __syncthreads();
  const int64_t tStart = causal ? s : 0;
  for (int64_t h = g * group; h < (g + 1) * group; ++h)
    for (int64_t c0 = tStart; c0 < T_; c0 += kSimpleThreads) {
      const int64_t t = c0 + threadIdx.x;
      float p = 0.f, ds = 0.f;
      if (t < T_) {
        const int64_t row = (b * H + h) * T_ + t;
        p = expf(scale * dot_row(sk, q + (b * T_ + t) * q_stride + h * D, D) -
                 lse[row]);
        ds = p *
             (dot_row(sv, dout + (b * T_ + t) * H * D + h * D, D) - delta[row]);
      }
      sp[threadIdx.x] = p;
      sds[threadIdx.x] = ds;
      __syncthreads();
      const int64_t n = chunk_len(T_ - c0);
      for (int64_t d = threadIdx.x; d < D; d += kSimpleThreads)
        for (int64_t i = 0; i < n; ++i) {
          const int64_t tt = b * T_ + c0 + i;
          accV[d] += sp[i] * to_f(dout[tt * H * D + h * D + d]);
          accK[d] += sds[i] * to_f(q[tt * q_stride + h * D + d]);
        }
      __syncthreads();
    }
  for (int64_t d = threadIdx.x; d < D; d += kSimpleThreads) {
    const int64_t off = (b * T_ + s) * dkv_stride + g * D + d;
    if (dk)
      dk[off] = from_f<T>((accumulate ? to_f(dk[off]) : 0.f) + scale * accK[d]);
    if (dv)
      dv[off] = from_f<T>((accumulate ? to_f(dv[off]) : 0.f) + accV[d]);
  }
}

/// The backward's fp32 workspace on the current device: grow-only, never
/// freed (a process-lifetime cache, like cuBLASLt's workspace).
float *workspace(int64_t floats) {
  constexpr int kMaxDevices = 64;
  static DeviceBuffer<float> *buffers[kMaxDevices] = {};
  int dev = 0;
  AUTODDL_CUDA_CHECK(cudaGetDevice(&dev));
  DeviceBuffer<float> *&buf = buffers[dev % kMaxDevices];
  if (!buf || buf->size() < floats) {
    delete buf; // cudaFree waits for kernels still reading it
    buf = new DeviceBuffer<float>(floats);
  }
  return buf->data();
}

bool aligned(const void *p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

unsigned grid_1d(int64_t threads, int block) {
  return unsigned(std::min<int64_t>((threads + block - 1) / block, 1 << 20));
}

/// Lets `kernel` take `bytes` of dynamic shared memory (past the 48 KiB
/// default).
template <class Kernel> void allow_smem(Kernel kernel, int bytes) {
  if (bytes > 48 * 1024)
    AUTODDL_CUDA_CHECK(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

#ifndef AUTODDL_FP32

/// f(std::integral_constant<int, D>) for the head dims with tensor-core
/// kernels (the caller checked D).
template <class F> void with_head_dim(int64_t D, F &&f) {
  switch (D) {
  case 16:
    return f(std::integral_constant<int, 16>{});
  case 32:
    return f(std::integral_constant<int, 32>{});
  case 64:
    return f(std::integral_constant<int, 64>{});
  default:
    return f(std::integral_constant<int, 128>{});
  }
}

template <int D, int kMT, int kBc, bool kQRegs>
void flash_forward(act_t *out, float *lse, const AttentionViews &in, int64_t B,
                   int64_t T, int64_t H, int64_t G, bool causal, float scale) {
  using Cfg = flash::FwdConfig<D, kMT, kBc, kQRegs>;
  auto kernel = flash::attention_forward_kernel<D, kMT, kBc, kQRegs>;
  allow_smem(kernel, Cfg::kSmemBytes);
  const dim3 grid(unsigned((T + Cfg::kBr - 1) / Cfg::kBr), unsigned(H),
                  unsigned(B));
  kernel<<<grid, flash::kThreads, Cfg::kSmemBytes, compute_stream()>>>(
      out, lse, in.q, in.k, in.v, in.q_stride, in.kv_stride, int(T), int(H),
      int(H / G), causal, scale * flash::kLog2e);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// The backward's tiles for head dim D and the causal mask (above).
template <int D, bool kCausal> struct BwdTiles {
  static constexpr bool kMid = D == 32 || D == 64;
#ifdef AUTODDL_ATTENTION_BWD_WARPS
  static constexpr int kWarps = D >= 32 ? AUTODDL_ATTENTION_BWD_WARPS : 4;
#else
  static constexpr int kWarps = D == 128 ? 8 : 4;
#endif
#ifdef AUTODDL_ATTENTION_BWD_KEY_TILES
  static constexpr int kKT = kMid ? AUTODDL_ATTENTION_BWD_KEY_TILES : 1;
#else
  static constexpr int kKT = kMid && !kCausal ? 2 : 1;
#endif
#ifdef AUTODDL_ATTENTION_BWD_QROWS
  static constexpr int kWantBr = D >= 32 ? AUTODDL_ATTENTION_BWD_QROWS : 64;
#else
  static constexpr int kWantBr = kMid ? 32 : 64;
#endif
  static constexpr bool kFits =
      kWarps % (kWantBr / 16) == 0 && (D / (kWarps / (kWantBr / 16))) % 16 == 0;
  static constexpr int kBr = kFits ? kWantBr : 64;
};

template <int D>
void flash_backward(float *dqAcc, const AttentionGradViews &grad,
                    const act_t *dout, const float *lse, const float *delta,
                    const AttentionViews &in, int64_t B, int64_t T, int64_t H,
                    int64_t G, bool causal, float scale, bool accumulate) {
  auto launch = [&](auto causalTag) {
    using Tiles = BwdTiles<D, decltype(causalTag)::value>;
    using Cfg = flash::BwdConfig<D, Tiles::kWarps, Tiles::kKT, Tiles::kBr>;
    auto kernel = flash::attention_backward_kernel<D, Tiles::kWarps, Tiles::kKT,
                                                   Tiles::kBr>;
    allow_smem(kernel, Cfg::kSmemBytes);
    const dim3 grid(unsigned((T + Cfg::kBc - 1) / Cfg::kBc), unsigned(G),
                    unsigned(B));
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, compute_stream()>>>(
        dqAcc, grad.dk, grad.dv, grad.kv_stride, in.q, in.k, in.v, in.q_stride,
        in.kv_stride, dout, lse, delta, int(T), int(H), int(H / G), causal,
        scale * flash::kLog2e, scale, accumulate);
  };
  if (causal)
    launch(std::true_type{});
  else
    launch(std::false_type{});
  AUTODDL_CUDA_CHECK_LAUNCH();
}
#endif

bool tensor_core_grads(const AttentionGradViews &g) {
  return aligned(g.dq, 4) && aligned(g.dk, 4) && aligned(g.dv, 4) &&
         g.q_stride % 2 == 0 && g.kv_stride % 2 == 0;
}

} // namespace

bool attention_uses_tensor_cores(const AttentionViews &in, int64_t D) {
#ifdef AUTODDL_FP32
  (void)in, (void)D;
  return false;
#else
  return (D == 16 || D == 32 || D == 64 || D == 128) && aligned(in.q, 16) &&
         aligned(in.k, 16) && aligned(in.v, 16) && in.q_stride % 8 == 0 &&
         in.kv_stride % 8 == 0;
#endif
}

int64_t attention_cudnn_version() { return cudnn_attention::version(); }

bool attention_forward_uses_cudnn(const AttentionViews &in, int64_t B,
                                  int64_t T, int64_t H, int64_t G, int64_t D,
                                  bool causal) {
  return cudnn_attention::takes_forward(in, B, T, H, G, D, causal);
}

bool attention_backward_uses_cudnn(const AttentionGradViews &grad,
                                   const AttentionViews &in, int64_t B,
                                   int64_t T, int64_t H, int64_t G, int64_t D,
                                   bool causal) {
  return cudnn_attention::takes_backward(grad, in, B, T, H, G, D, causal);
}

void attention_forward(act_t *out, float *lse, const AttentionViews &in,
                       int64_t B, int64_t T, int64_t H, int64_t G, int64_t D,
                       bool causal) {
  if (B * T * H * D == 0)
    return;
  if (cudnn_attention::forward(out, lse, in, B, T, H, G, D, causal))
    return;
  const float scale = float(1.0 / std::sqrt(double(D)));
#ifndef AUTODDL_FP32
  if (attention_uses_tensor_cores(in, D) && aligned(out, 4)) {
    return with_head_dim(D, [&](auto d) {
      constexpr int kD = decltype(d)::value;
      // D = 128: 128 rows with Q from shared memory, or 64 with Q in registers.
      constexpr bool kTall = kD != 128 || AUTODDL_ATTENTION_D128_FWD == 1;
      flash_forward<kD, kTall ? 2 : 1, 64, kD != 128 || !kTall>(
          out, lse, in, B, T, H, G, causal, scale);
    });
  }
#endif
  const int smem = int((2 * D + kSimpleThreads) * sizeof(float));
  auto kernel = attention_forward_simple_kernel<act_t>;
  allow_smem(kernel, smem);
  kernel<<<dim3(unsigned(T), unsigned(H), unsigned(B)), kSimpleThreads, smem,
           compute_stream()>>>(out, lse, in.q, in.k, in.v, in.q_stride,
                               in.kv_stride, T, H, D, H / G, causal, scale);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void attention_backward(const AttentionGradViews &grad, const act_t *dout,
                        const act_t *out, const float *lse,
                        const AttentionViews &in, int64_t B, int64_t T,
                        int64_t H, int64_t G, int64_t D, bool causal,
                        bool accumulate) {
  if (B * T * H * D == 0 || (!grad.dq && !grad.dk && !grad.dv))
    return;
  if (cudnn_attention::backward(grad, dout, out, lse, in, B, T, H, G, D, causal,
                                accumulate))
    return;
  const float scale = float(1.0 / std::sqrt(double(D)));
  const bool flash = attention_uses_tensor_cores(in, D) &&
                     tensor_core_grads(grad) && aligned(dout, 16);
  const int64_t rows = B * T * H;
  // [delta: B*H*T, padded to 16 bytes | dqAcc: B*T*H*D] (dqAcc only on the
  // tensor-core path, whose float2 atomics need the alignment: B*T*H may be
  // odd).
  const int64_t deltaFloats = (rows + 3) / 4 * 4;
  float *ws = workspace(deltaFloats + (flash && grad.dq ? rows * D : 0));
  float *delta = ws, *dqAcc = flash && grad.dq ? ws + deltaFloats : nullptr;
  attention_delta_kernel<act_t>
      <<<grid_1d(rows * 32, 256), 256, 0, compute_stream()>>>(
          delta, dqAcc, dout, out, rows, T, H, D);
  AUTODDL_CUDA_CHECK_LAUNCH();
#ifndef AUTODDL_FP32
  if (flash) {
    with_head_dim(D, [&](auto d) {
      flash_backward<decltype(d)::value>(dqAcc, grad, dout, lse, delta, in, B,
                                         T, H, G, causal, scale, accumulate);
    });
    if (grad.dq && (H * D) % 4 == 0 && grad.q_stride % 4 == 0 &&
        aligned(grad.dq, 8) && rows * D < (int64_t(1) << 31)) {
      attention_dq_finish4_kernel<<<grid_1d(rows * D / 4, 256), 256, 0,
                                    compute_stream()>>>(
          grad.dq, int(grad.q_stride), reinterpret_cast<const float4 *>(dqAcc),
          int(rows * D / 4), int(H * D / 4), scale, accumulate);
      AUTODDL_CUDA_CHECK_LAUNCH();
    } else if (grad.dq) {
      attention_dq_finish_kernel<act_t>
          <<<grid_1d(rows * D, 256), 256, 0, compute_stream()>>>(
              grad.dq, grad.q_stride, dqAcc, rows * D, H * D, scale,
              accumulate);
      AUTODDL_CUDA_CHECK_LAUNCH();
    }
    return;
  }
#endif
  const dim3 block(kSimpleThreads);
  if (grad.dq) {
    const int smem = int((3 * D + kSimpleThreads) * sizeof(float));
    auto kernel = attention_dq_simple_kernel<act_t>;
    allow_smem(kernel, smem);
    kernel<<<dim3(unsigned(T), unsigned(H), unsigned(B)), block, smem,
             compute_stream()>>>(grad.dq, grad.q_stride, in.q, in.k, in.v,
                                 in.q_stride, in.kv_stride, dout, lse, delta, T,
                                 H, D, H / G, causal, scale, accumulate);
    AUTODDL_CUDA_CHECK_LAUNCH();
  }
  if (grad.dk || grad.dv) {
    const int smem = int((4 * D + 2 * kSimpleThreads) * sizeof(float));
    auto kernel = attention_dkv_simple_kernel<act_t>;
    allow_smem(kernel, smem);
    kernel<<<dim3(unsigned(T), unsigned(G), unsigned(B)), block, smem,
             compute_stream()>>>(grad.dk, grad.dv, grad.kv_stride, in.q, in.k,
                                 in.v, in.q_stride, in.kv_stride, dout, lse,
                                 delta, T, H, D, H / G, causal, scale,
                                 accumulate);
    AUTODDL_CUDA_CHECK_LAUNCH();
  }
}

} // namespace autoddl::rt
