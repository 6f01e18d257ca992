// SDDMM on the W8 format: out(i, j) = dot(X[i, :], Y[j, :]) for each stored (i,
// j).
//
// Tensor-core step (two blocks = 16 vectors of one window): the mma computes
// D[16 vectors x 8 rows] += Y[16 gathered rows x k] * X[window rows]^T, the
// window's dense rows as B (n = 8). The k dimension is permuted so each lane
// reads consecutive features with one 16-byte load per row per chunk: for
// 16-bit data lane t's k slots {2t, 2t+1, 2t+8, 2t+9} of m16n8k16 are features
// 8t..8t+3 (first mma) and 8t+4..8t+7 (second) of a 32-feature chunk; for TF32
// m16n8k8 slots {t, t+4} are features 4t, 4t+1 (first) and 4t+2, 4t+3 (second)
// of a 16-feature chunk. Results land in the block's B-fragment value order, so
// the output is a value array spmm consumes as is.
#include "backends/cuda/sparse/DeviceHelpers.cuh"
#include "backends/cuda/sparse/WindowFormat.h"

namespace autoddl::sparse::cuda {
namespace {

using namespace detail;

// Build-time knobs for the benchmark's comparisons (bench/spmm/variants.sh):
// warps per block (4; 8 at k = 64 16-byte pieces, where a block's eight
// consecutive windows share the band of 1 KB Y rows in L1 on graphs with
// locality: H200 banded fp32 K=256 3.48 vs 3.69 ms, mesh 3.54 vs 3.77, Reddit
// and R-MAT 1 % slower; larger blocks lose elsewhere), warps per SM the
// fixed-width CUDA-core kernels are held to (24: 80 registers; 20 measured
// slower), and whether the tensor-core parts load X once when k is one round
// (H200: banded fp32 K=64 0.92 vs 1.04 ms).
#ifndef AUTODDL_SDDMM_WARPS
#define AUTODDL_SDDMM_WARPS 4
#endif
#ifndef AUTODDL_SDDMM_WARPS_P64
#define AUTODDL_SDDMM_WARPS_P64 8
#endif
#ifndef AUTODDL_SDDMM_SM_WARPS
#define AUTODDL_SDDMM_SM_WARPS 24
#endif
#ifndef AUTODDL_SDDMM_X_ONCE
#define AUTODDL_SDDMM_X_ONCE 1
#endif
// 1: the CUDA-core parts' entries go through the tensor cores too
// (cudaCorePartMma), 0: lane groups of CUDA-core FMAs (cudaCorePartFixed).
#ifndef AUTODDL_SDDMM_CUDA_PARTS_MMA
#define AUTODDL_SDDMM_CUDA_PARTS_MMA 1
#endif
// Lanes per entry of the lane-group path at k = 32 and 64 16-byte pieces (8,
// 16 or 32; each lane then reads 32 or 64 / lanes pieces of both rows). 8
// lanes: 4 entries a warp, a 3-step shuffle sum shared by the four (H200,
// fp32 K=128: Reddit 10.4 vs 12.7 ms, banded 1.76 vs 2.77 with 32 lanes).
#ifndef AUTODDL_SDDMM_LANES_P32
#define AUTODDL_SDDMM_LANES_P32 8
#endif
#ifndef AUTODDL_SDDMM_LANES_P64
#define AUTODDL_SDDMM_LANES_P64 8
#endif

__device__ __forceinline__ int fragmentPosOf(bool tf32, int r, int s) {
  return tf32 ? r * 8 + (s % 4) * 2 + s / 4 : r * 8 + s;
}

/// acc[16 rows x 8] += A B over kG chunks: A's rows g and g + 8 from ya and
/// yb, B's columns from xr (the permuted-k layout above: 16-bit data through
/// m16n8k16, fp32 through two TF32 m16n8k8 a chunk).
template <typename T, int kG>
__device__ __forceinline__ void
mmaChunks(float (&acc)[4], const uint32_t (&ya)[kG][4],
          const uint32_t (&yb)[kG][4], const uint32_t (&xr)[kG][4]) {
#pragma unroll
  for (int c = 0; c < kG; ++c) {
    if constexpr (std::is_same_v<T, float>) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        mmaTf32(acc, toTf32(__uint_as_float(ya[c][2 * h])),
                toTf32(__uint_as_float(yb[c][2 * h])),
                toTf32(__uint_as_float(ya[c][2 * h + 1])),
                toTf32(__uint_as_float(yb[c][2 * h + 1])),
                toTf32(__uint_as_float(xr[c][2 * h])),
                toTf32(__uint_as_float(xr[c][2 * h + 1])));
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        mmaK16<T>(acc, ya[c][2 * h], yb[c][2 * h], ya[c][2 * h + 1],
                  yb[c][2 * h + 1], xr[c][2 * h], xr[c][2 * h + 1]);
    }
  }
}

/// kXOnce: k is exactly one round of kG chunks (aligned), so the window's X
/// pieces are loaded once for the part instead of once per block pair.
template <typename T, bool kAligned, int kG, bool kXOnce>
__device__ __forceinline__ void
tensorCorePart(const WindowPart &part, const int32_t *__restrict__ blockCols,
               const uint64_t *__restrict__ blockMask,
               const int32_t *__restrict__ rowOfSlot, const T *__restrict__ x,
               int64_t ldx, const T *__restrict__ y, int64_t ldy, int32_t rows,
               int64_t k, T *__restrict__ out) {
  constexpr bool kTf32 = std::is_same_v<T, float>;
  constexpr int kLaneElems =
      16 / sizeof(T);                    // one 16-byte load per row per chunk
  constexpr int kChunk = 4 * kLaneElems; // features per chunk (4 lanes per row)
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int32_t slot = part.window * 8 + g;
  const T *xRow =
      slot < rows ? x + int64_t(slotRow(rowOfSlot, slot)) * ldx : nullptr;
  uint32_t xOnce[kG][4];
  if constexpr (kXOnce) {
#pragma unroll
    for (int c = 0; c < kG; ++c)
      loadChunk<T, kLaneElems, true>(xRow ? xRow + c * kChunk + t * kLaneElems
                                          : nullptr,
                                     kLaneElems, xOnce[c]);
  }
  for (int32_t b = part.begin; b < part.end; b += 2) {
    const bool second = b + 1 < part.end;
    const int32_t ca = __ldg(blockCols + int64_t(b) * 8 + g);
    const int32_t cb = second ? __ldg(blockCols + int64_t(b + 1) * 8 + g) : -1;
    const T *yA = ca >= 0 ? y + int64_t(ca) * ldy : nullptr;
    const T *yB = cb >= 0 ? y + int64_t(cb) * ldy : nullptr;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    // kG chunks per round: their 3 * kG loads are issued before any mma (the
    // aligned fast variant needs k a multiple of kG chunks).
    for (int64_t k0 = 0; k0 < k; k0 += kG * kChunk) {
      uint32_t ya[kG][4], yb[kG][4], xr[kG][4];
#pragma unroll
      for (int c = 0; c < kG; ++c) {
        const int64_t kb = k0 + c * kChunk + t * kLaneElems;
        const int valid = int(minOf<int64_t>(k - kb, kLaneElems));
        loadChunk<T, kLaneElems, kAligned>(yA ? yA + kb : nullptr, valid,
                                           ya[c]);
        loadChunk<T, kLaneElems, kAligned>(yB ? yB + kb : nullptr, valid,
                                           yb[c]);
        if constexpr (kXOnce) {
#pragma unroll
          for (int i = 0; i < 4; ++i)
            xr[c][i] = xOnce[c][i];
        } else {
          loadChunk<T, kLaneElems, kAligned>(xRow ? xRow + kb : nullptr, valid,
                                             xr[c]);
        }
      }
      mmaChunks<T, kG>(acc, ya, yb, xr);
    }
    // acc[0]: (vector g of block b, row 2t), acc[1]: row 2t+1; acc[2], acc[3]:
    // block b+1.
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int32_t blk = b + q / 2;
      if (q >= 2 && !second)
        break;
      const int r = 2 * t + q % 2;
      const bool present =
          (__ldg(reinterpret_cast<const unsigned long long *>(blockMask) +
                 blk) >>
           (r * 8 + g)) &
          1;
      out[int64_t(blk) * 64 + fragmentPosOf(kTf32, r, g)] =
          Elem<T>::fromFloat(present ? acc[q] : 0.f);
    }
  }
}

template <typename T, bool kAligned>
__device__ __forceinline__ void
cudaCorePart(const WindowPart &part, const int32_t *__restrict__ entColRow,
             const int32_t *__restrict__ rowOfSlot, const T *__restrict__ x,
             int64_t ldx, const T *__restrict__ y, int64_t ldy, int64_t k,
             T *__restrict__ out) {
  // Groups of 8 lanes per entry, 4 entries per warp and 4 batches in flight (16
  // entries per step); each lane reads 16 bytes per row per pass, stride 8 * 16
  // bytes.
  constexpr int kLaneElems = 16 / sizeof(T);
  constexpr int kBatches = 4;
  const int lane = threadIdx.x % 32, grp = lane / 8, j = lane % 8;
  for (int32_t e0 = part.begin; e0 < part.end; e0 += 4 * kBatches) {
    const T *xr[kBatches], *yc[kBatches];
    float dot[kBatches];
#pragma unroll
    for (int u = 0; u < kBatches; ++u) {
      const int32_t e = e0 + 4 * u + grp;
      dot[u] = 0.f;
      xr[u] = yc[u] = nullptr;
      if (e < part.end) {
        const int32_t cr = __ldg(entColRow + e);
        xr[u] =
            x + int64_t(slotRow(rowOfSlot, part.window * 8 + (cr & 7))) * ldx;
        yc[u] = y + int64_t(cr >> 3) * ldy;
      }
    }
    for (int64_t kb = int64_t(j) * kLaneElems; kb < k; kb += 8 * kLaneElems) {
      const int valid = int(minOf<int64_t>(k - kb, kLaneElems));
      uint32_t xa[kBatches][4], ya[kBatches][4];
#pragma unroll
      for (int u = 0; u < kBatches; ++u) {
        loadChunk<T, kLaneElems, kAligned>(xr[u] ? xr[u] + kb : nullptr, valid,
                                           xa[u]);
        loadChunk<T, kLaneElems, kAligned>(yc[u] ? yc[u] + kb : nullptr, valid,
                                           ya[u]);
      }
#pragma unroll
      for (int u = 0; u < kBatches; ++u)
#pragma unroll
        for (int q = 0; q < kLaneElems; ++q)
          dot[u] += chunkElem<T, 4>(xa[u], q) * chunkElem<T, 4>(ya[u], q);
    }
#pragma unroll
    for (int u = 0; u < kBatches; ++u) {
      float d = dot[u];
      d += __shfl_xor_sync(0xffffffffu, d, 1);
      d += __shfl_xor_sync(0xffffffffu, d, 2);
      d += __shfl_xor_sync(0xffffffffu, d, 4);
      const int32_t e = e0 + 4 * u + grp;
      if (j == 0 && e < part.end)
        out[e] = Elem<T>::fromFloat(d);
    }
  }
}

/// CUDA-core part for k = kL * kP * (16 / sizeof(T)) exactly, rows 16-byte
/// aligned: kL lanes per entry, each reading kP 16-byte pieces of both rows;
/// 8 / kP entries per lane group in flight, all their loads issued before any
/// arithmetic (no loop over k, so no round trip per k chunk).
template <typename T, int kL, int kP>
__device__ __forceinline__ void
cudaCorePartFixed(const WindowPart &part, const int32_t *__restrict__ entColRow,
                  const int32_t *__restrict__ rowOfSlot,
                  const T *__restrict__ x, int64_t ldx, const T *__restrict__ y,
                  int64_t ldy, T *__restrict__ out) {
  constexpr int kLaneElems = 16 / sizeof(T);
  constexpr int kGroups = 32 / kL;
  constexpr int kU = 8 / kP;
  constexpr int kStep = kGroups * kU; // entries per warp and step
  const int lane = threadIdx.x % 32, grp = lane / kL, j = lane % kL;
  // Lane i < 8 holds the matrix row of window slot i; entries get theirs by
  // shuffle instead of a dependent load.
  const int32_t row0 = part.window * 8;
  const int32_t slotRowOfLane = slotRow(rowOfSlot, row0 + (lane & 7));
  // Entry words of the next step are loaded one step ahead (-1: past the end),
  // so a step's gathers do not wait for its index loads.
  int32_t next[kU];
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const int32_t e = part.begin + u * kGroups + grp;
    next[u] = e < part.end ? __ldg(entColRow + e) : -1;
  }
  for (int32_t e0 = part.begin; e0 < part.end; e0 += kStep) {
    int32_t cr[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      cr[u] = next[u];
      const int32_t e = e0 + kStep + u * kGroups + grp;
      next[u] = e < part.end ? __ldg(entColRow + e) : -1;
    }
    uint32_t xa[kU][kP][4], ya[kU][kP][4];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int32_t row = __shfl_sync(0xffffffffu, slotRowOfLane, cr[u] & 7);
      const T *xr = nullptr, *yc = nullptr;
      if (cr[u] >= 0) {
        xr = x + int64_t(row) * ldx + j * kLaneElems;
        yc = y + int64_t(cr[u] >> 3) * ldy + j * kLaneElems;
      }
#pragma unroll
      for (int q = 0; q < kP; ++q) {
        loadChunk<T, kLaneElems, true>(xr ? xr + q * kL * kLaneElems : nullptr,
                                       kLaneElems, xa[u][q]);
        loadChunk<T, kLaneElems, true>(yc ? yc + q * kL * kLaneElems : nullptr,
                                       kLaneElems, ya[u][q]);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      float d = 0.f;
#pragma unroll
      for (int q = 0; q < kP; ++q)
#pragma unroll
        for (int i = 0; i < kLaneElems; ++i)
          d += chunkElem<T, 4>(xa[u][q], i) * chunkElem<T, 4>(ya[u][q], i);
#pragma unroll
      for (int off = 1; off < kL; off *= 2)
        d += __shfl_xor_sync(0xffffffffu, d, off);
      const int32_t e = e0 + u * kGroups + grp;
      if (j == 0 && e < part.end)
        out[e] = Elem<T>::fromFloat(d);
    }
  }
}

/// The entries of a CUDA-core part through the tensor cores, 16 at a time:
/// D[16 entries x 8 window rows] = Y[their 16 columns] X[window rows]^T, as
/// tensorCorePart with one entry per vector, and each entry keeps the one
/// output of its own row (1/8 of D). The profile of the lane-group path on a
/// power-law graph (chunglu-reddit, fp16, K = 64) was issue-bound: per entry
/// 8 lanes each convert 8 values, 8 FMAs and a 3-step shuffle sum; here a
/// warp spends about 2 loads, 1/4 of an mma and one store per entry. For k of
/// kG chunks exactly (one round, aligned; the window's X pieces stay in
/// registers); kSets sets of 16 entries a step keep as many bytes in flight
/// for small k, and the entry words of the next step are loaded one ahead.
template <typename T, int kG>
__device__ __forceinline__ void
cudaCorePartMma(const WindowPart &part, const int32_t *__restrict__ entColRow,
                const int32_t *__restrict__ rowOfSlot, const T *__restrict__ x,
                int64_t ldx, const T *__restrict__ y, int64_t ldy, int32_t rows,
                T *__restrict__ out) {
  constexpr int kLaneElems = 16 / sizeof(T);
  constexpr int kChunk = 4 * kLaneElems;
  constexpr int kSets = kG >= 4 ? 1 : 4 / kG;
  constexpr int kStep = 16 * kSets;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int32_t slot = part.window * 8 + g;
  const T *xRow =
      slot < rows ? x + int64_t(slotRow(rowOfSlot, slot)) * ldx : nullptr;
  uint32_t xr[kG][4];
#pragma unroll
  for (int c = 0; c < kG; ++c)
    loadChunk<T, kLaneElems, true>(
        xRow ? xRow + c * kChunk + t * kLaneElems : nullptr, kLaneElems, xr[c]);
  auto entry = [&](int32_t e) {
    return e < part.end ? __ldg(entColRow + e) : -1;
  };
  // next[s][h]: entry e0 + 16 s + 8 h + g of the next step, (column << 3) |
  // row-in-window, -1 past the end.
  int32_t next[kSets][2];
#pragma unroll
  for (int st = 0; st < kSets; ++st)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      next[st][h] = entry(part.begin + 16 * st + 8 * h + g);
  for (int32_t e0 = part.begin; e0 < part.end; e0 += kStep) {
    int32_t cr[kSets][2];
    uint32_t yv[kSets][2][kG][4];
#pragma unroll
    for (int st = 0; st < kSets; ++st)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        cr[st][h] = next[st][h];
        next[st][h] = entry(e0 + kStep + 16 * st + 8 * h + g);
        const T *yRow =
            cr[st][h] >= 0 ? y + int64_t(cr[st][h] >> 3) * ldy : nullptr;
#pragma unroll
        for (int c = 0; c < kG; ++c)
          loadChunk<T, kLaneElems, true>(
              yRow ? yRow + c * kChunk + t * kLaneElems : nullptr, kLaneElems,
              yv[st][h][c]);
      }
#pragma unroll
    for (int st = 0; st < kSets; ++st) {
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      const uint32_t(&ya)[kG][4] = yv[st][0];
      const uint32_t(&yb)[kG][4] = yv[st][1];
      mmaChunks<T, kG>(acc, ya, yb, xr);
      // acc[0], acc[1]: entry e0 + 16 st + g at window rows 2t, 2t + 1;
      // acc[2], acc[3]: entry e0 + 16 st + 8 + g. The lane holding an entry's
      // own row writes it.
      const int32_t eA = e0 + 16 * st + g, crA = cr[st][0], crB = cr[st][1];
      if (crA >= 0 && ((crA & 7) >> 1) == t)
        out[eA] = Elem<T>::fromFloat(crA & 1 ? acc[1] : acc[0]);
      if (crB >= 0 && ((crB & 7) >> 1) == t)
        out[eA + 8] = Elem<T>::fromFloat(crB & 1 ? acc[3] : acc[2]);
    }
  }
}

/// CUDA-core parts: kL == 0, the general path; otherwise cudaCorePartMma when
/// k is one round of kG chunks, else cudaCorePartFixed<kL, kP>.
/// kG: k chunks per round of the tensor-core paths; kW: warps per block. The
/// fixed-width kernels are held to 80 registers (24 warps per SM, no spills),
/// the occupancy they had before the index prefetch (which lets nvcc take up
/// to 128).
template <typename T, bool kAligned, int kL, int kP, int kG, int kW>
__global__ void __launch_bounds__(kW * 32,
                                  kL > 0 ? AUTODDL_SDDMM_SM_WARPS / kW : 0)
    sddmmKernel(const WindowPart *__restrict__ parts, int32_t numParts,
                const int32_t *__restrict__ blockCols,
                const uint64_t *__restrict__ blockMask,
                const int32_t *__restrict__ entColRow,
                const int32_t *__restrict__ rowOfSlot, const T *__restrict__ x,
                int64_t ldx, const T *__restrict__ y, int64_t ldy, int32_t rows,
                int64_t k, T *__restrict__ outBlock, T *__restrict__ outEnt,
                int32_t slices) {
  // Warp w takes slice w % slices of part w / slices, a 1/slices share of its
  // blocks or entries (WindowFormat::sddmmSlices).
  const int64_t w = int64_t(blockIdx.x) * kW + threadIdx.x / 32;
  const int32_t p = int32_t(w / slices), s = int32_t(w % slices);
  if (p >= numParts)
    return;
  WindowPart part = parts[p];
  const int32_t len = (part.end - part.begin + slices - 1) / slices;
  part.begin += s * len;
  part.end = minOf(part.end, part.begin + len);
  if (part.begin >= part.end)
    return;
  // The fixed-width instantiations have k = kL * kP 16-byte pieces.
  constexpr bool kXOnce = AUTODDL_SDDMM_X_ONCE && kL > 0 && kL * kP == 4 * kG;
  if (part.flags & 1) {
    if constexpr (kXOnce && AUTODDL_SDDMM_CUDA_PARTS_MMA)
      cudaCorePartMma<T, kG>(part, entColRow, rowOfSlot, x, ldx, y, ldy, rows,
                             outEnt);
    else if constexpr (kL > 0)
      cudaCorePartFixed<T, kL, kP>(part, entColRow, rowOfSlot, x, ldx, y, ldy,
                                   outEnt);
    else
      cudaCorePart<T, kAligned>(part, entColRow, rowOfSlot, x, ldx, y, ldy, k,
                                outEnt);
  } else {
    tensorCorePart<T, kAligned, kG, kXOnce>(part, blockCols, blockMask,
                                            rowOfSlot, x, ldx, y, ldy, rows, k,
                                            outBlock);
  }
}

template <typename T>
cudaError_t sddmmTyped(const WindowFormat &a, const T *x, int64_t ldx,
                       const T *y, int64_t ldy, int64_t k, T *outBlock,
                       T *outEnt, cudaStream_t stream) {
  constexpr int kLaneElems = 16 / sizeof(T);
  const bool aligned = k % (4 * kLaneElems) == 0 && ldx % kLaneElems == 0 &&
                       ldy % kLaneElems == 0 &&
                       reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const int64_t warps = int64_t(a.numParts) * a.sddmmSlices; // slices >= 1
#define AUTODDL_SDDMM_LAUNCH_W(kA, kL, kP, kG, kW)                             \
  sddmmKernel<T, kA, kL, kP, kG, kW>                                           \
      <<<unsigned((warps + kW - 1) / kW), kW * 32, 0, stream>>>(               \
          a.dParts, a.numParts, a.dBlockCols, a.dBlockMask, a.dEntColRow,      \
          a.dRowOfSlot, x, ldx, y, ldy, a.rows, k, outBlock, outEnt,           \
          a.sddmmSlices)
#define AUTODDL_SDDMM_LAUNCH(kA, kL, kP, kG)                                   \
  AUTODDL_SDDMM_LAUNCH_W(kA, kL, kP, kG, AUTODDL_SDDMM_WARPS)
  // Aligned k of 4, 8, 16, 32 or 64 16-byte pieces gets the fixed-width
  // CUDA-core path and 1, 2, 4 (or more, in rounds of 4) tensor-core chunks per
  // round; other aligned k the general paths.
  // An exact fp32 format (PreprocessOptions::exactFp32) takes the general
  // path: the fixed-width kernels run one-round k on TF32 tensor cores.
  const bool exact = std::is_same_v<T, float> && a.exactFp32;
  const int64_t pieces = aligned && !exact ? k / kLaneElems : 0;
  if (pieces == 4)
    AUTODDL_SDDMM_LAUNCH(true, 4, 1, 1);
  else if (pieces == 8)
    AUTODDL_SDDMM_LAUNCH(true, 8, 1, 2);
  else if (pieces == 16)
    AUTODDL_SDDMM_LAUNCH(true, 16, 1, 4);
  else if (pieces == 32)
    AUTODDL_SDDMM_LAUNCH(true, AUTODDL_SDDMM_LANES_P32,
                         32 / AUTODDL_SDDMM_LANES_P32, 4);
  else if (pieces == 64)
    AUTODDL_SDDMM_LAUNCH_W(true, AUTODDL_SDDMM_LANES_P64,
                           64 / AUTODDL_SDDMM_LANES_P64, 4,
                           AUTODDL_SDDMM_WARPS_P64);
  else if (aligned)
    AUTODDL_SDDMM_LAUNCH(true, 0, 0, 1);
  else
    AUTODDL_SDDMM_LAUNCH(false, 0, 0, 1);
#undef AUTODDL_SDDMM_LAUNCH
#undef AUTODDL_SDDMM_LAUNCH_W
  return cudaGetLastError();
}

} // namespace

cudaError_t sddmm(const WindowFormat &mask, const void *dX, int64_t ldx,
                  const void *dY, int64_t ldy, int64_t k, void *dOutBlockVals,
                  void *dOutEntVals, cudaStream_t stream) {
  if (k <= 0 || ldx < k || ldy < k)
    return cudaErrorInvalidValue;
  if (mask.numParts == 0)
    return cudaSuccess;
  switch (mask.dtype) {
  case DataType::F32:
    return sddmmTyped(mask, static_cast<const float *>(dX), ldx,
                      static_cast<const float *>(dY), ldy, k,
                      static_cast<float *>(dOutBlockVals),
                      static_cast<float *>(dOutEntVals), stream);
  case DataType::F16:
    return sddmmTyped(mask, static_cast<const __half *>(dX), ldx,
                      static_cast<const __half *>(dY), ldy, k,
                      static_cast<__half *>(dOutBlockVals),
                      static_cast<__half *>(dOutEntVals), stream);
  case DataType::BF16:
    return sddmmTyped(mask, static_cast<const __nv_bfloat16 *>(dX), ldx,
                      static_cast<const __nv_bfloat16 *>(dY), ldy, k,
                      static_cast<__nv_bfloat16 *>(dOutBlockVals),
                      static_cast<__nv_bfloat16 *>(dOutEntVals), stream);
  }
  return cudaErrorInvalidValue;
}

} // namespace autoddl::sparse::cuda
