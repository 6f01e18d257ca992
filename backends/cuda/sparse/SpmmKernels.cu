// SpMM Y = A * X on the W8 format: tensor-core windows (swap-and-transpose
// m16n8k8) and CUDA-core windows in one launch, one warp per part.
//
// Tensor-core step (one block of 8 vectors, F features per warp): the mma
// computes Y^T[16 x 8] += X^T[16 x 8 vectors] * A^T[8 vectors x 8 rows], the
// sparse block as B (n = 8 window rows). Its 16 M rows are permuted so that
// each lane gathers F/8 *consecutive* features of each of its two dense rows
// with 8- or 16-byte loads: mma j's row g is feature base + 2j and row g + 8 is
// base + 2j + 1, base = f0 + g * F/8. The accumulators then hold, for window
// rows 2t and 2t+1, the F/8 consecutive features from base: stored as vectors.
#include "backends/cuda/sparse/DeviceHelpers.cuh"
#include "backends/cuda/sparse/WindowFormat.h"

#include <algorithm>

namespace autoddl::sparse::cuda {
namespace {

using namespace detail;

constexpr int kWarpsPerBlock = 4;

template <typename T>
__device__ __forceinline__ uint32_t packPair(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
  }
}

/// Writes kElems fp32 results for features [base, base + kElems) of window row
/// r: into Y (converted to T) or, for a split window, added into its fp32
/// workspace rows.
template <typename T, int kElems, bool kAligned>
__device__ __forceinline__ void
storeRow(const float (&v)[kElems], int32_t row, int32_t rows, int64_t base,
         int64_t n, T *__restrict__ y, int64_t ldy, float *__restrict__ wsRow) {
  if (wsRow) {
    if constexpr (kAligned && kElems % 4 == 0) {
      // sm_90 vector reduction: one red.global.add.v4.f32 per 4 features.
#pragma unroll
      for (int e = 0; e < kElems; e += 4)
        atomicAdd(reinterpret_cast<float4 *>(wsRow + base + e),
                  make_float4(v[e], v[e + 1], v[e + 2], v[e + 3]));
    } else {
#pragma unroll
      for (int e = 0; e < kElems; ++e)
        if (kAligned || base + e < n)
          atomicAdd(wsRow + base + e, v[e]);
    }
    return;
  }
  if (row >= rows)
    return;
  T *p = y + int64_t(row) * ldy + base;
  if constexpr (kAligned) {
    if constexpr (std::is_same_v<T, float>) {
      if constexpr (kElems % 4 == 0) {
#pragma unroll
        for (int i = 0; i < kElems / 4; ++i)
          reinterpret_cast<float4 *>(p)[i] =
              make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
      } else {
#pragma unroll
        for (int e = 0; e < kElems; ++e)
          p[e] = v[e];
      }
    } else {
      constexpr int kWords = kElems / 2;
      uint32_t w[kWords];
#pragma unroll
      for (int i = 0; i < kWords; ++i)
        w[i] = packPair<T>(v[2 * i], v[2 * i + 1]);
      if constexpr (kWords % 4 == 0) {
#pragma unroll
        for (int i = 0; i < kWords / 4; ++i)
          reinterpret_cast<uint4 *>(p)[i] =
              make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
      } else if constexpr (kWords == 2) {
        *reinterpret_cast<uint2 *>(p) = make_uint2(w[0], w[1]);
      } else {
#pragma unroll
        for (int i = 0; i < kWords; ++i)
          reinterpret_cast<uint32_t *>(p)[i] = w[i];
      }
    }
  } else {
#pragma unroll
    for (int e = 0; e < kElems; ++e)
      if (base + e < n)
        p[e] = Elem<T>::fromFloat(v[e]);
  }
}

/// One tensor-core step: the mmas of one block, given its gathered dense chunks
/// and values.
template <typename T, int kMmas, int kWords>
__device__ __forceinline__ void
blockMma(float (&acc)[kMmas][4], const uint32_t (&xa)[kWords],
         const uint32_t (&xb)[kWords], uint2 v) {
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int j = 0; j < kMmas; ++j)
      mmaTf32(acc[j], toTf32(__uint_as_float(xa[2 * j])),
              toTf32(__uint_as_float(xa[2 * j + 1])),
              toTf32(__uint_as_float(xb[2 * j])),
              toTf32(__uint_as_float(xb[2 * j + 1])), v.x, v.y);
  } else {
#pragma unroll
    for (int j = 0; j < kMmas; ++j)
      mmaK8<T>(acc[j], __byte_perm(xa[j], xb[j], 0x5410),
               __byte_perm(xa[j], xb[j], 0x7632), v.x);
  }
}

/// The two column indices lane (g, t) gathers for block b: slots (t, t + 4) for
/// TF32, (2t, 2t
/// + 1) for 16-bit; -1 past the part's end.
template <typename T>
__device__ __forceinline__ int2 blockColumns(
    const int32_t *__restrict__ blockCols, int32_t b, int32_t end, int t) {
  if (b >= end)
    return make_int2(-1, -1);
  if constexpr (std::is_same_v<T, float>)
    return make_int2(__ldg(blockCols + int64_t(b) * 8 + t),
                     __ldg(blockCols + int64_t(b) * 8 + t + 4));
  else
    return __ldg(reinterpret_cast<const int2 *>(blockCols + int64_t(b) * 8) +
                 t);
}

/// Lane's B-fragment values of block b (zeros past the part's end).
template <typename T>
__device__ __forceinline__ uint2 blockValues(const void *__restrict__ blockVals,
                                             int32_t b, int32_t end, int lane) {
  if (b >= end)
    return make_uint2(0, 0);
  if constexpr (std::is_same_v<T, float>)
    return __ldg(reinterpret_cast<const uint2 *>(blockVals) + int64_t(b) * 32 +
                 lane);
  else
    return make_uint2(__ldg(reinterpret_cast<const unsigned int *>(blockVals) +
                            int64_t(b) * 32 + lane),
                      0u);
}

template <typename T, int F, bool kAligned>
__device__ __forceinline__ void
tensorCorePart(const WindowPart &part, const int32_t *__restrict__ blockCols,
               const void *__restrict__ blockVals,
               const int32_t *__restrict__ rowOfSlot, const T *__restrict__ x,
               int64_t ldx, T *__restrict__ y, int64_t ldy, int32_t rows,
               int64_t n, int64_t f0, float *ws) {
  constexpr int kE = F / 8; // features per lane per dense row
  constexpr int kWords = kE * sizeof(T) / 4;
  constexpr int kMmas = F / 16;
  // Blocks per step: two when the gathered chunks are small, so that more loads
  // are in flight.
  constexpr int kUnroll = kWords <= 8 ? 2 : 1;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t base = f0 + g * kE;
  const int valid = int(minOf<int64_t>(n - base, kE));
  const T *xBase = (kAligned || valid > 0) ? x + base : nullptr;
  float acc[kMmas][4];
#pragma unroll
  for (int j = 0; j < kMmas; ++j)
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  // Column indices run one step ahead of the gathers they address.
  int2 next[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    next[u] = blockColumns<T>(blockCols, part.begin + u, part.end, t);
  for (int32_t b = part.begin; b < part.end; b += kUnroll) {
    int2 cols[kUnroll];
    uint2 v[kUnroll];
    uint32_t xa[kUnroll][kWords], xb[kUnroll][kWords];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      cols[u] = next[u];
      next[u] = blockColumns<T>(blockCols, b + kUnroll + u, part.end, t);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      loadChunk<T, kE, kAligned>(
          xBase && cols[u].x >= 0 ? xBase + int64_t(cols[u].x) * ldx : nullptr,
          valid, xa[u]);
      loadChunk<T, kE, kAligned>(
          xBase && cols[u].y >= 0 ? xBase + int64_t(cols[u].y) * ldx : nullptr,
          valid, xb[u]);
      v[u] = blockValues<T>(blockVals, b + u, part.end, lane);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      blockMma<T, kMmas, kWords>(acc, xa[u], xb[u], v[u]);
  }

  float r0[kE], r1[kE];
#pragma unroll
  for (int j = 0; j < kMmas; ++j) {
    r0[2 * j] = acc[j][0], r0[2 * j + 1] = acc[j][2];
    r1[2 * j] = acc[j][1], r1[2 * j + 1] = acc[j][3];
  }
  const int32_t slot0 = part.window * 8 + 2 * t;
  storeRow<T, kE, kAligned>(r0, ws ? 0 : slotRow(rowOfSlot, slot0), rows, base,
                            n, y, ldy, ws ? ws + (2 * t) * n : nullptr);
  storeRow<T, kE, kAligned>(r1, ws ? 0 : slotRow(rowOfSlot, slot0 + 1), rows,
                            base, n, y, ldy,
                            ws ? ws + (2 * t + 1) * n : nullptr);
}

/// CUDA-core part: groups of lanes, one window row per group at a time; each
/// lane owns 16 bytes of the F features and keeps 4 dense rows in flight.
/// Entries are sorted by row.
template <typename T, int F, bool kAligned>
__device__ __forceinline__ void
cudaCorePart(const WindowPart &part, const int32_t *__restrict__ entColRow,
             const T *__restrict__ entVals, const int32_t *__restrict__ rowPtr,
             const int32_t *__restrict__ rowOfSlot, const T *__restrict__ x,
             int64_t ldx, T *__restrict__ y, int64_t ldy, int32_t rows,
             int64_t n, int64_t f0, float *ws) {
  constexpr int kVec = 16 / sizeof(T); // elements per lane per dense row
  constexpr int kLanes = minOf(32, F / kVec);
  constexpr int kGroups = 32 / kLanes;
  constexpr int kWords = 4;
  const int lane = threadIdx.x % 32, group = lane / kLanes, gl = lane % kLanes;
  const int64_t base = f0 + gl * kVec;
  const int valid = int(minOf<int64_t>(n - base, kVec));
  const T *xBase = (kAligned || valid > 0) ? x + base : nullptr;
  const int32_t row0 = part.window * 8;
  for (int k = group; k < 8; k += kGroups) {
    const int32_t slot = row0 + k; // rowPtr is by window slot
    if (slot >= rows)
      break;
    const int32_t e0 = maxOf(__ldg(rowPtr + slot), part.begin);
    const int32_t e1 = minOf(__ldg(rowPtr + slot + 1), part.end);
    float acc[kVec];
#pragma unroll
    for (int q = 0; q < kVec; ++q)
      acc[q] = 0.f;
    int32_t e = e0;
    for (; e + 4 <= e1; e += 4) {
      uint32_t xv[4][kWords];
      float v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int32_t c = __ldg(entColRow + e + u) >> 3;
        v[u] = Elem<T>::toFloat(entVals[e + u]);
        loadChunk<T, kVec, kAligned>(xBase ? xBase + int64_t(c) * ldx : nullptr,
                                     valid, xv[u]);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int q = 0; q < kVec; ++q)
          acc[q] += v[u] * chunkElem<T, kWords>(xv[u], q);
    }
    for (; e < e1; ++e) {
      uint32_t xv[kWords];
      const int32_t c = __ldg(entColRow + e) >> 3;
      const float v = Elem<T>::toFloat(entVals[e]);
      loadChunk<T, kVec, kAligned>(xBase ? xBase + int64_t(c) * ldx : nullptr,
                                   valid, xv);
#pragma unroll
      for (int q = 0; q < kVec; ++q)
        acc[q] += v * chunkElem<T, kWords>(xv, q);
    }
    // A split window's workspace starts at zero: only rows with entries in this
    // part add.
    if (!ws || e0 < e1)
      storeRow<T, kVec, kAligned>(acc, ws ? 0 : slotRow(rowOfSlot, slot), rows,
                                  base, n, y, ldy, ws ? ws + k * n : nullptr);
  }
}

/// Split windows: after its atomics, each warp of a split window bumps the
/// counter of its (window, feature tile); the last of the window's parts to
/// arrive converts the tile's fp32 sums into Y and zeroes them and the counter
/// again, so the workspace is left as it was found (all zero) and no memset or
/// second kernel is needed (the "last block" pattern of threadFenceReduction).
template <typename T, int F, bool kAligned>
__device__ __forceinline__ void
finishSplitTile(int32_t window, const int32_t *__restrict__ rowOfSlot,
                int32_t numParts, float *__restrict__ wsWindow,
                unsigned int *__restrict__ counter, T *__restrict__ y,
                int64_t ldy, int32_t rows, int64_t n, int64_t f0) {
  const int lane = threadIdx.x % 32;
  __threadfence(); // this lane's reductions are visible before the count
  __syncwarp();
  unsigned int prev = 0;
  if (lane == 0)
    prev = atomicAdd(counter, 1u);
  prev = __shfl_sync(0xffffffffu, prev, 0);
  if (prev + 1 != unsigned(numParts))
    return;
  __threadfence(); // the other parts' sums are read after their counts
  // Lane (r = lane / 4, q = lane % 4): features f0 + q * F/4 ... of row r.
  constexpr int kE = F / 4;
  const int r = lane / 4;
  const int64_t base = f0 + (lane % 4) * kE;
  float *p = wsWindow + int64_t(r) * n + base;
  if constexpr (kAligned) {
    float v[kE];
#pragma unroll
    for (int i = 0; i < kE / 4; ++i) {
      const float4 q = __ldcg(reinterpret_cast<const float4 *>(p) + i);
      v[4 * i] = q.x, v[4 * i + 1] = q.y, v[4 * i + 2] = q.z,
            v[4 * i + 3] = q.w;
    }
#pragma unroll
    for (int i = 0; i < kE / 4; ++i)
      __stcg(reinterpret_cast<float4 *>(p) + i,
             make_float4(0.f, 0.f, 0.f, 0.f));
    storeRow<T, kE, true>(v, slotRow(rowOfSlot, window * 8 + r), rows, base, n,
                          y, ldy, nullptr);
  } else {
    const int32_t row = slotRow(rowOfSlot, window * 8 + r);
    for (int e = 0; e < kE && base + e < n; ++e) {
      const float v = __ldcg(p + e);
      __stcg(p + e, 0.f);
      if (row < rows)
        y[int64_t(row) * ldy + base + e] = Elem<T>::fromFloat(v);
    }
  }
  if (lane == 0)
    *counter = 0;
}

/// 16-bit data, 32-feature tile, vectorized: each lane gathers only 8 bytes per
/// dense row, so the kernel lives on warps in flight; capping it at 40
/// registers (12 blocks of 4 warps per SM, no spills) keeps the occupancy it
/// had before the split-window finishing code (which pushed it to 48).
template <typename T, int F, bool kAligned>
constexpr int kMinBlocksPerSm = F == 32 && kAligned && sizeof(T) == 2 ? 12 : 0;

template <typename T, int F, bool kAligned>
__global__ void __launch_bounds__(kWarpsPerBlock * 32,
                                  kMinBlocksPerSm<T, F, kAligned>)
    spmmKernel(const WindowPart *__restrict__ parts, int32_t numParts,
               const int32_t *__restrict__ splitParts, int32_t numSplit,
               const int32_t *__restrict__ blockCols,
               const void *__restrict__ blockVals,
               const int32_t *__restrict__ entColRow,
               const T *__restrict__ entVals,
               const int32_t *__restrict__ cudaRowPtr,
               const int32_t *__restrict__ rowOfSlot, const T *__restrict__ x,
               int64_t ldx, T *__restrict__ y, int64_t ldy, int32_t rows,
               int64_t n, float *__restrict__ ws) {
  const int32_t p = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  if (p >= numParts)
    return;
  const WindowPart part = parts[p];
  const int64_t f0 = int64_t(blockIdx.y) * F;
  const int32_t slot = (part.flags >> 1) - 1;
  float *wsWindow = slot >= 0 ? ws + int64_t(slot) * 8 * n : nullptr;
  if (part.flags & 1)
    cudaCorePart<T, F, kAligned>(part, entColRow, entVals, cudaRowPtr,
                                 rowOfSlot, x, ldx, y, ldy, rows, n, f0,
                                 wsWindow);
  else
    tensorCorePart<T, F, kAligned>(part, blockCols, blockVals, rowOfSlot, x,
                                   ldx, y, ldy, rows, n, f0, wsWindow);
  if (slot >= 0) {
    unsigned int *counters =
        reinterpret_cast<unsigned int *>(ws + int64_t(numSplit) * 8 * n);
    finishSplitTile<T, F, kAligned>(
        part.window, rowOfSlot, __ldg(splitParts + slot), wsWindow,
        counters + int64_t(slot) * gridDim.y + blockIdx.y, y, ldy, rows, n, f0);
  }
}

template <typename T, int F>
cudaError_t launchSpmm(const WindowFormat &a, const T *x, int64_t n,
                       int64_t ldx, T *y, int64_t ldy, float *ws,
                       cudaStream_t stream) {
  constexpr int kAlign = 16 / sizeof(T);
  const bool aligned = n % F == 0 && ldx % kAlign == 0 && ldy % kAlign == 0 &&
                       reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const dim3 grid((a.numParts + kWarpsPerBlock - 1) / kWarpsPerBlock,
                  unsigned((n + F - 1) / F));
  if (aligned)
    spmmKernel<T, F, true><<<grid, kWarpsPerBlock * 32, 0, stream>>>(
        a.dParts, a.numParts, a.dSplitParts, a.numSplitWindows, a.dBlockCols,
        a.dBlockVals, a.dEntColRow, static_cast<const T *>(a.dEntVals),
        a.dCudaRowPtr, a.dRowOfSlot, x, ldx, y, ldy, a.rows, n, ws);
  else
    spmmKernel<T, F, false><<<grid, kWarpsPerBlock * 32, 0, stream>>>(
        a.dParts, a.numParts, a.dSplitParts, a.numSplitWindows, a.dBlockCols,
        a.dBlockVals, a.dEntColRow, static_cast<const T *>(a.dEntVals),
        a.dCudaRowPtr, a.dRowOfSlot, x, ldx, y, ldy, a.rows, n, ws);
  return cudaGetLastError();
}

template <typename T>
cudaError_t spmmTyped(const WindowFormat &a, const T *x, int64_t n, int64_t ldx,
                      T *y, int64_t ldy, float *ws, cudaStream_t stream) {
  // Feature tile per warp: up to 128 features for 16-bit data, 64 for fp32 (a
  // 128-wide fp32 tile needs ~94 registers and one block per step; 64 keeps two
  // blocks in flight).
  if (n <= 32)
    return launchSpmm<T, 32>(a, x, n, ldx, y, ldy, ws, stream);
  if (n <= 64 || std::is_same_v<T, float>)
    return launchSpmm<T, 64>(a, x, n, ldx, y, ldy, ws, stream);
  return launchSpmm<T, 128>(a, x, n, ldx, y, ldy, ws, stream);
}

} // namespace

size_t spmmWorkspaceBytes(const WindowFormat &a, int64_t n) {
  // fp32 sums of the split windows' 8 rows, then one counter per split window
  // and feature tile (tiles are at least 32 features wide).
  const size_t w = size_t(std::max<int64_t>(n, 0));
  return size_t(a.numSplitWindows) *
         (8 * w * sizeof(float) + (w + 31) / 32 * sizeof(unsigned int));
}

cudaError_t spmm(const WindowFormat &a, const void *dX, int64_t n, int64_t ldx,
                 void *dY, int64_t ldy, void *dWorkspace, cudaStream_t stream) {
  if (n <= 0 || ldx < n || ldy < n || (a.numSplitWindows > 0 && !dWorkspace))
    return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (a.rows == 0)
    return cudaSuccess;
  float *ws = static_cast<float *>(dWorkspace);
  switch (a.dtype) {
  case DataType::F32:
    return spmmTyped(a, static_cast<const float *>(dX), n, ldx,
                     static_cast<float *>(dY), ldy, ws, stream);
  case DataType::F16:
    return spmmTyped(a, static_cast<const __half *>(dX), n, ldx,
                     static_cast<__half *>(dY), ldy, ws, stream);
  case DataType::BF16:
    return spmmTyped(a, static_cast<const __nv_bfloat16 *>(dX), n, ldx,
                     static_cast<__nv_bfloat16 *>(dY), ldy, ws, stream);
  }
  return cudaErrorInvalidValue;
}

} // namespace autoddl::sparse::cuda
