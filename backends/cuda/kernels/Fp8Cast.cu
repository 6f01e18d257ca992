// The FP8 cast with its amax and the delayed-scaling update (Fp8.h).
// One kernel reads a bf16 tensor once and writes it in FP8 as it is and/or
// transposed (through a shared-memory tile), at the meta's current scale; a
// recording cast also reduces its |x| maximum into the meta, and its last
// block (the threadFenceReduction pattern) moves that amax into the history
// and sets the scale for the next cast. So a cast is one launch, and a step
// graph replays it unchanged (no host state takes part after the priming).
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Fp8.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <mutex>
#include <type_traits>
#include <unordered_set>

namespace autoddl::rt {
namespace {
using namespace detail;

constexpr int kTile = 32, kRowsPerPass = 8; // a 32 x 8 block walks 32 x 32

__global__ void meta_init_kernel(Fp8Meta *metas, int64_t count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count)
    return;
  Fp8Meta &m = metas[i];
  m.scale = 1.0f;
  m.scaleInv = 1.0f;
  m.amax = 0.0f;
  m.pos = 0;
  m.blocksDone = 0;
  m.recorded = 0;
  for (int h = 0; h < kFp8AmaxHistory; ++h)
    m.history[h] = 0.0f;
}

/// The history takes the amax just recorded; the scale follows the history's
/// maximum (Transformer Engine's "max" algorithm, margin 0). An all-zero or
/// non-finite maximum keeps the scale.
__device__ void update_scale(Fp8Meta *meta, float fmax) {
  const float a = atomicExch(&meta->amax, 0.0f);
  meta->history[meta->pos] = a;
  meta->pos = (meta->pos + 1) % kFp8AmaxHistory;
  if (meta->recorded < kFp8AmaxHistory)
    ++meta->recorded;
  float m = 0.0f;
  for (int h = 0; h < kFp8AmaxHistory; ++h)
    m = fmaxf(m, meta->history[h]);
  if (m > 0.0f && isfinite(m)) {
    const float s = fmax / m;
    if (isfinite(s)) {
      meta->scale = s;
      meta->scaleInv = 1.0f / s;
    }
  }
  meta->blocksDone = 0;
}

constexpr int kFlatThreads = 256;

/// A recording cast's tail, called by every thread of the block (`thread` its
/// index, blockDim.x * blockDim.y of at most 256): the block's |x| maximum
/// into meta->amax, and the grid's last block moves it into the history and
/// sets the next scale (update_scale).
__device__ void record_amax(Fp8Meta *meta, float amax, float fmax, int thread) {
  __shared__ float warpMax[32];
  __shared__ bool lastBlock;
  const int warps = (blockDim.x * blockDim.y + 31) / 32;
  for (int o = 16; o > 0; o /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (thread % 32 == 0)
    warpMax[thread / 32] = amax;
  __syncthreads();
  if (thread == 0) {
    for (int w = 1; w < warps; ++w)
      amax = fmaxf(amax, warpMax[w]);
    // Non-negative floats order as their bit patterns.
    atomicMax(reinterpret_cast<unsigned int *>(&meta->amax),
              __float_as_uint(amax));
    __threadfence();
    lastBlock = atomicAdd(&meta->blocksDone, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (lastBlock && thread == 0) {
    __threadfence();
    update_scale(meta, fmax);
  }
}

template <class F8>
__global__ void __launch_bounds__(kTile *kRowsPerPass)
    cast_kernel(F8 *out, F8 *outT, float *scaleInvOut, const act_t *src,
                int64_t R, int64_t C, Fp8Meta *meta, bool record, float fmax,
                int64_t colTiles, int64_t tiles) {
  __shared__ float tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const float scale = meta->scale;
  if (blockIdx.x == 0 && tx == 0 && ty == 0 && scaleInvOut)
    *scaleInvOut = meta->scaleInv;
  float amax = 0.0f;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / colTiles) * kTile, c0 = (t % colTiles) * kTile;
    for (int i = ty; i < kTile; i += kRowsPerPass) {
      const int64_t r = r0 + i, c = c0 + tx;
      float v = 0.0f;
      if (r < R && c < C) {
        v = to_float(src[r * C + c]);
        amax = fmaxf(amax, fabsf(v));
        if (out)
          out[r * C + c] = F8(v * scale);
      }
      tile[i][tx] = v;
    }
    if (outT) {
      __syncthreads();
      for (int i = ty; i < kTile; i += kRowsPerPass) {
        const int64_t c = c0 + i, r = r0 + tx; // outT[c, r] = src[r, c]
        if (r < R && c < C)
          outT[c * R + r] = F8(tile[tx][i] * scale);
      }
      __syncthreads();
    }
  }
  if (record)
    record_amax(meta, amax, fmax, ty * kTile + tx);
}

/// The plain cast (no transpose) of n values, kPack<act_t> a thread: 16-byte
/// loads where the tile kernel's are 2-byte ones, for the forward's x and W
/// and the input gradient's dY. src 16-byte and out 8-byte aligned, n a
/// multiple of the pack.
template <class F8>
__global__ void __launch_bounds__(kFlatThreads)
    cast_flat_kernel(F8 *out, float *scaleInvOut, const act_t *src, int64_t n,
                     Fp8Meta *meta, bool record, float fmax) {
  constexpr int V = kPack<act_t>;
  const float scale = meta->scale;
  if (blockIdx.x == 0 && threadIdx.x == 0 && scaleInvOut)
    *scaleInvOut = meta->scaleInv;
  float amax = 0.0f;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * V; i < n;
       i += int64_t(gridDim.x) * blockDim.x * V) {
    float v[V];
    load_floats<act_t, V>(v, src + i);
    F8 q[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      amax = fmaxf(amax, fabsf(v[j]));
      q[j] = F8(v[j] * scale);
    }
    if (out) {
      static_assert(sizeof(q) == 8 || sizeof(q) == 4, "one store a pack");
      using Store = std::conditional_t<sizeof(q) == 8, uint2, unsigned>;
      *reinterpret_cast<Store *>(out + i) = *reinterpret_cast<const Store *>(q);
    }
  }
  if (record)
    record_amax(meta, amax, fmax, threadIdx.x);
}

/// The transposing cast with 16-byte accesses: a 64 x 64 tile a pass, read 8
/// values a thread (and written as is, 8 bytes, where `out`), and written
/// transposed 16 bytes a thread (16 rows of one column) through shared
/// memory; the tile kernel above reads 2 bytes and writes 1 a thread. C a
/// multiple of 8, R of 16, src and outT 16-byte and out 8-byte aligned.
constexpr int kWide = 64, kWideThreads = 256;
template <class F8>
__global__ void __launch_bounds__(kWideThreads)
    cast_wide_kernel(F8 *out, F8 *outT, float *scaleInvOut, const act_t *src,
                     int64_t R, int64_t C, Fp8Meta *meta, bool record,
                     float fmax, int64_t colTiles, int64_t tiles) {
  constexpr int V = 8; // bf16 a 16-byte load (the fp32 build: two loads)
  __shared__ float tile[kWide][kWide + 1];
  const int t = threadIdx.x;
  const float scale = meta->scale;
  if (blockIdx.x == 0 && t == 0 && scaleInvOut)
    *scaleInvOut = meta->scaleInv;
  float amax = 0.0f;
  for (int64_t tileAt = blockIdx.x; tileAt < tiles; tileAt += gridDim.x) {
    const int64_t r0 = (tileAt / colTiles) * kWide,
                  c0 = (tileAt % colTiles) * kWide;
    // Read: 8 threads a row of 64 values, 32 rows a pass.
    for (int i = t / 8; i < kWide; i += kWideThreads / 8) {
      const int j = (t % 8) * V;
      const int64_t r = r0 + i, c = c0 + j;
      float v[V] = {};
      if (r < R && c < C) {
        load_floats<act_t, V>(v, src + r * C + c);
        F8 q[V];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          amax = fmaxf(amax, fabsf(v[k]));
          q[k] = F8(v[k] * scale);
        }
        if (out)
          *reinterpret_cast<uint2 *>(out + r * C + c) =
              *reinterpret_cast<const uint2 *>(q);
      }
#pragma unroll
      for (int k = 0; k < V; ++k)
        tile[i][j + k] = v[k];
    }
    __syncthreads();
    // Write: 4 threads a column (16 rows each, 64 bytes together), 64
    // columns a pass.
    const int g = t % 4, cc = t / 4;
    const int64_t c = c0 + cc, r = r0 + 16 * g;
    if (c < C && r < R) {
      F8 q[16];
#pragma unroll
      for (int k = 0; k < 16; ++k)
        q[k] = F8(tile[16 * g + k][cc] * scale);
      *reinterpret_cast<uint4 *>(outT + c * R + r) =
          *reinterpret_cast<const uint4 *>(q);
    }
    __syncthreads();
  }
  if (record)
    record_amax(meta, amax, fmax, t);
}

template <class F8>
void launch_cast(void *out, void *outT, float *scaleInvOut, const act_t *src,
                 int64_t R, int64_t C, Fp8Meta *meta, bool record, float fmax) {
  // Grid-stride kernels: at most 16 blocks an SM.
  const int64_t cap = int64_t(sm_count()) * 16;
  auto grid = [&](int64_t blocks) { return unsigned(std::min(blocks, cap)); };
  auto aligned = [](const void *p, uintptr_t a) {
    return reinterpret_cast<uintptr_t>(p) % a == 0;
  };
  constexpr int V = kPack<act_t>;
  const int64_t n = R * C;
  if (!outT && n % V == 0 && aligned(src, 16) && aligned(out, V * sizeof(F8))) {
    cast_flat_kernel<F8>
        <<<grid((n / V + kFlatThreads - 1) / kFlatThreads), kFlatThreads, 0,
           compute_stream()>>>(static_cast<F8 *>(out), scaleInvOut, src, n,
                               meta, record, fmax);
  } else if (outT && sizeof(act_t) == 2 && C % 8 == 0 && R % 16 == 0 &&
             aligned(src, 16) && aligned(outT, 16) && aligned(out, 8)) {
    const int64_t colTiles = (C + kWide - 1) / kWide;
    const int64_t tiles = colTiles * ((R + kWide - 1) / kWide);
    cast_wide_kernel<F8><<<grid(tiles), kWideThreads, 0, compute_stream()>>>(
        static_cast<F8 *>(out), static_cast<F8 *>(outT), scaleInvOut, src, R,
        C, meta, record, fmax, colTiles, tiles);
  } else {
    const int64_t colTiles = (C + kTile - 1) / kTile;
    const int64_t tiles = colTiles * ((R + kTile - 1) / kTile);
    cast_kernel<F8>
        <<<grid(tiles), dim3(kTile, kRowsPerPass), 0, compute_stream()>>>(
            static_cast<F8 *>(out), static_cast<F8 *>(outT), scaleInvOut, src,
            R, C, meta, record, fmax, colTiles, tiles);
  }
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// Metas whose first recording cast has run (the priming pass is host
/// logic: it runs in the first, eager step, never in a captured one);
/// fp8_meta_init forgets them again.
std::mutex gPrimedMu;
std::unordered_set<const Fp8Meta *> &primed() {
  static auto *set = new std::unordered_set<const Fp8Meta *>();
  return *set;
}
bool first_record(const Fp8Meta *meta) {
  std::lock_guard<std::mutex> lock(gPrimedMu);
  return primed().insert(meta).second;
}
} // namespace

float fp8_max(Fp8Format f) { return f == Fp8Format::E4M3 ? 448.0f : 57344.0f; }

void fp8_meta_init(Fp8Meta *metas, int64_t count) {
  if (count <= 0)
    return;
  {
    std::lock_guard<std::mutex> lock(gPrimedMu);
    for (int64_t i = 0; i < count; ++i)
      primed().erase(metas + i);
  }
  meta_init_kernel<<<unsigned((count + 127) / 128), 128, 0, compute_stream()>>>(
      metas, count);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void fp8_meta_set_primed(const Fp8Meta *meta, bool on) {
  std::lock_guard<std::mutex> lock(gPrimedMu);
  if (on)
    primed().insert(meta);
  else
    primed().erase(meta);
}

void fp8_cast(void *out, void *outT, float *scaleInvOut, const act_t *src,
              int64_t R, int64_t C, Fp8Format f, Fp8Meta *meta, bool record) {
  if (R <= 0 || C <= 0)
    return;
  const float fmax = fp8_max(f);
  auto launch = f == Fp8Format::E4M3 ? launch_cast<__nv_fp8_e4m3>
                                     : launch_cast<__nv_fp8_e5m2>;
  // The first cast of a meta has no history to scale by (scale 1 would
  // flush a weight's ~0.02 or a gradient's ~1e-5 to zero): an amax pass
  // sets the scale from this tensor first.
  if (first_record(meta))
    launch(nullptr, nullptr, nullptr, src, R, C, meta, true, fmax);
  launch(out, outT, scaleInvOut, src, R, C, meta, record, fmax);
}

} // namespace autoddl::rt
