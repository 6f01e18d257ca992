// FlashAttention-2 forward and backward kernels for bf16 on sm_80+ tensor
// cores (mma.sync m16n8k16, ldmatrix, cp.async); included by Attention.cu
// only. Tiles: 4 warps a block, each warp owns 16*kMT query rows (forward) or
// 16 key rows (backward); shared-memory rows are padded by 16 bytes, which
// makes every ldmatrix phase (8 rows of 16 bytes) hit 8 distinct bank groups
// for D in {16, 32, 64, 128}.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane/4, c = lane%4):
//   A 16x16 row-major: a0 (g, 2c..2c+1), a1 (g+8, 2c..), a2 (g, 2c+8..),
//     a3 (g+8, 2c+8..);
//   B 16x8 "col": b0 (k 2c..2c+1, n g), b1 (k 2c+8.., n g);
//   C 16x8: c0,c1 (g, 2c..2c+1), c2,c3 (g+8, 2c..2c+1).
// So the C fragments of two adjacent n8 tiles are the A fragment of one k16
// step: the probabilities never leave registers between the two GEMMs.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_ATTENTIONFLASH_CUH
#define AUTODDL_BACKENDS_CUDA_KERNELS_ATTENTIONFLASH_CUH

#include <cuda_bf16.h>

#include <cstdint>

namespace autoddl::rt::flash {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 128; // 4 warps (forward; backward: kWarps)
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared, asynchronous; zero-fills when !valid (src is
/// then not read but must still be a mapped address).
__device__ __forceinline__ void cp_async16(void *dst, const void *src,
                                           bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src,
                                          bool valid) {
  const int bytes = valid ? 4 : 0;
  asm volatile(
      "cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4],
                                                  const void *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smem_addr(p)));
}

/// d += a * b (bf16 inputs, fp32 accumulators).
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// 2^x by the SFU (ex2.approx: relative error ~2^-22, 2^-inf = +0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t *>(&v);
}

/// A fragment of one k16 step from the C fragments of n8 tiles 2k, 2k+1.
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c0)[4],
                                       const float (&c1)[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

// ldmatrix lane addresses: lane l gives a row address of matrix l/8 of the
// four 8x8 matrices. Two orders of the matrices cover every operand:
//   "row-major": (lo, lo), (hi, lo), (lo, hi), (hi, hi) as (row, column)
//     halves: A from a [m][k] array (non-trans) gives a0..a3; B from a [k][n]
//     array (trans) gives b0, b1 of n8 tile 0, then of tile 1;
//   "col-major": (lo, lo), (lo, hi), (hi, lo), (hi, hi): B from a [n][k]
//     array (non-trans) gives b0, b1 of tile 0, then of tile 1; A from a
//     [k][m] array (A transposed, trans) gives a0..a3.
__device__ __forceinline__ int rm_row(int lane) {
  return (lane & 7) + 8 * ((lane >> 3) & 1);
}
__device__ __forceinline__ int rm_col(int lane) { return 8 * (lane >> 4); }
__device__ __forceinline__ int cm_row(int lane) {
  return (lane & 7) + 8 * (lane >> 4);
}
__device__ __forceinline__ int cm_col(int lane) {
  return 8 * ((lane >> 3) & 1);
}

/// Copies rows [r0, r0+rows) of a strided [T][D] bf16 view into a padded
/// shared tile (row stride kS), zero-filling rows at or past T.
template <int D, int kS, int kNThreads = kThreads>
__device__ __forceinline__ void
load_tile(bf16 *s, const bf16 *base, int64_t stride, int r0, int rows, int T) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < rows * kChunks; i += kNThreads) {
    const int r = i / kChunks, ch = i % kChunks;
    const int t = r0 + r;
    const bool valid = t < T;
    cp_async16(s + r * kS + ch * 8,
               base + int64_t(valid ? t : 0) * stride + ch * 8, valid);
  }
}

/// Sum over the 4 lanes of a quad (the lanes holding one C-fragment row).
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return x;
}

template <int D, int kMT, int kBc, bool kQRegs> struct FwdConfig {
  static constexpr int kBr = 4 * 16 * kMT; // query rows a block
  static constexpr int kS = D + 8;         // padded smem row (elements)
  static constexpr int kSmemBytes = (kBr + 4 * kBc) * kS * 2;
};

/// Grid (ceil(T/kBr), H, B). The block for query tile m runs over key tiles
/// 0..(causal: the one holding its last row), K/V double-buffered through
/// cp.async; online softmax in the log2 domain; heavy (late) query tiles start
/// first so the causal tail is short. kQRegs: Q fragments stay in registers
/// (else re-read from shared memory at each k step, which frees registers for
/// a taller warp tile).
template <int D, int kMT, int kBc, bool kQRegs>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(bf16 *__restrict__ out, float *__restrict__ lse,
                             const bf16 *__restrict__ q,
                             const bf16 *__restrict__ k,
                             const bf16 *__restrict__ v, int64_t q_stride,
                             int64_t kv_stride, int T, int H, int group,
                             bool causal, float scale_log2) {
  using C = FwdConfig<D, kMT, kBc, kQRegs>;
  constexpr int kBr = C::kBr, kS = C::kS;
  constexpr int kNT = kBc / 8; // n8 tiles of scores a row block
  constexpr int kDT = D / 8;   // n8 tiles of the output
  extern __shared__ uint4 smem_raw[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem_raw);
  bf16 *sK = sQ + kBr * kS; // [2][kBc][kS]
  bf16 *sV = sK + 2 * kBc * kS;

  const int mBlock = int(gridDim.x) - 1 - int(blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z, g = h / group;
  const int m0 = mBlock * kBr;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wRow0 = m0 + warp * 16 * kMT; // first query row of this warp
  const bf16 *qBase = q + int64_t(b) * T * q_stride + int64_t(h) * D;
  const bf16 *kBase = k + int64_t(b) * T * kv_stride + int64_t(g) * D;
  const bf16 *vBase = v + int64_t(b) * T * kv_stride + int64_t(g) * D;

  const int nEnd = causal ? min(T, m0 + kBr) : T; // keys [0, nEnd)
  const int nBlocks = (nEnd + kBc - 1) / kBc;

  load_tile<D, kS>(sQ, qBase, q_stride, m0, kBr, T);
  load_tile<D, kS>(sK, kBase, kv_stride, 0, kBc, T);
  load_tile<D, kS>(sV, vBase, kv_stride, 0, kBc, T);
  cp_async_commit();

  float o[kMT][kDT][4];
  float rowMax[kMT][2], rowSum[kMT][2];
  uint32_t qf[kMT][kQRegs ? D / 16 : 1][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[mt][dt][e] = 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r)
      rowMax[mt][r] = -INFINITY, rowSum[mt][r] = 0.f;
  }

  for (int j = 0; j < nBlocks; ++j) {
    const int stage = j & 1;
    if (j + 1 < nBlocks) {
      load_tile<D, kS>(sK + (stage ^ 1) * kBc * kS, kBase, kv_stride,
                       (j + 1) * kBc, kBc, T);
      load_tile<D, kS>(sV + (stage ^ 1) * kBc * kS, vBase, kv_stride,
                       (j + 1) * kBc, kBc, T);
    }
    cp_async_commit();
    cp_async_wait<1>(); // tile j (and Q) landed
    __syncthreads();
    if (kQRegs && j == 0) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int kk = 0; kk < (kQRegs ? D / 16 : 1); ++kk)
          ldmatrix_x4(qf[mt][kk],
                      sQ + (warp * 16 * kMT + mt * 16 + rm_row(lane)) * kS +
                          kk * 16 + rm_col(lane));
    }
    const bf16 *tK = sK + stage * kBc * kS;
    const bf16 *tV = sV + stage * kBc * kS;

    // S = Q K^T for this warp's rows and the kBc keys of the tile.
    float s[kMT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[mt][nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (kQRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            qa[mt][e] = qf[mt][kQRegs ? kk : 0][e];
        } else {
          ldmatrix_x4(qa[mt],
                      sQ + (warp * 16 * kMT + mt * 16 + rm_row(lane)) * kS +
                          kk * 16 + rm_col(lane));
        }
      }
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        uint32_t bk[4];
        ldmatrix_x4(bk, tK + (np * 16 + cm_row(lane)) * kS + kk * 16 +
                            cm_col(lane));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma(s[mt][2 * np], qa[mt], bk[0], bk[1]);
          mma(s[mt][2 * np + 1], qa[mt], bk[2], bk[3]);
        }
      }
    }

    // Masks: keys past T; with causal, keys after the query row.
    const int n0 = j * kBc;
    if (n0 + kBc > T || (causal && n0 + kBc - 1 > wRow0)) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = wRow0 + mt * 16 + lane / 4 + (e >= 2 ? 8 : 0);
            const int col = n0 + nt * 8 + 2 * (lane % 4) + (e & 1);
            if (col >= T || (causal && col > row))
              s[mt][nt][e] = -INFINITY;
          }
    }

    // Online softmax: rescale the running sums and outputs by 2^(old - new).
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = rowMax[mt][r];
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
          mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]) *
                             scale_log2);
        mx = quad_max(mx);
        const float base = mx == -INFINITY ? 0.f : mx;
        const float corr = fast_exp2(rowMax[mt][r] - base);
        rowMax[mt][r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            const float p = fast_exp2(s[mt][nt][e] * scale_log2 - base);
            s[mt][nt][e] = p;
            sum += p;
          }
        rowSum[mt][r] = rowSum[mt][r] * corr + sum;
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt) {
          o[mt][dt][2 * r] *= corr;
          o[mt][dt][2 * r + 1] *= corr;
        }
      }

      // O += P V, P straight from the score registers (bf16).
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t pa[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
        c_to_a(pa[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, tV + (kk * 16 + rm_row(lane)) * kS + dp * 16 +
                                  rm_col(lane));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma(o[mt][2 * dp], pa[mt], bv[0], bv[1]);
          mma(o[mt][2 * dp + 1], pa[mt], bv[2], bv[3]);
        }
      }
    }
    __syncthreads(); // the next iteration's prefetch overwrites this stage
  }
  cp_async_wait<0>();

  const int64_t outStride = int64_t(H) * D;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = wRow0 + mt * 16 + lane / 4 + 8 * r;
      const float l = quad_sum(rowSum[mt][r]);
      if (row >= T)
        continue;
      const float inv = l > 0.f ? 1.f / l : 0.f;
      bf16 *dst = out + (int64_t(b) * T + row) * outStride + int64_t(h) * D +
                  2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
        *reinterpret_cast<__nv_bfloat162 *>(dst + dt * 8) =
            __floats2bfloat162_rn(o[mt][dt][2 * r] * inv,
                                  o[mt][dt][2 * r + 1] * inv);
      if (lane % 4 == 0)
        lse[(int64_t(b) * H + h) * T + row] =
            l > 0.f ? (rowMax[mt][r] + __log2f(l)) * 0.6931471805599453f
                    : -INFINITY;
    }
}

template <int D, int kWarps, int kKT, int kBr_> struct BwdConfig {
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBc = 16 * kKT * kWarps; // keys a block (16*kKT a warp)
  static constexpr int kBr = kBr_;              // queries an iteration
  static constexpr int kS = D + 8;
  static constexpr int kSds = kBr + 8;
  static constexpr int kSmemBytes =
      (2 * kBc + 4 * kBr) * kS * 2 + kBc * kSds * 2 + 4 * kBr * 4;
  // dQ = dS K: the block's kBr/16 query tiles x kColGroups column groups of
  // kCols, one (tile, group) a warp.
  static constexpr int kQTiles = kBr / 16;
  static constexpr int kColGroups = kWarps / kQTiles;
  static constexpr int kCols = D / kColGroups;
};

/// Grid (ceil(T/kBc), G, B). The block owns key tile n of kv head g: dK, dV of
/// its kBc keys stay in registers (16*kKT rows a warp) while it walks every
/// query tile (kBr rows) of every q head of the group that can see those keys
/// (Q, dO, lse, delta double-buffered through cp.async). dS goes through
/// shared memory once so that dQ = dS K can be added into the fp32 workspace
/// dqAcc[B,T,H,D] with float2 atomics, split over the warps as kQTiles query
/// tiles x kColGroups column groups. dK and dV are added (+=, or stored when
/// !accumulate) into the act_t gradients at the end; the block is their only
/// writer.
///
/// Shared-memory traffic bounds this loop (mma.sync reads both operands
/// through registers): each warp reads the whole Q and dO tile twice an
/// iteration, so kKT = 2 (32 keys a warp) halves those reads per mma, and
/// with kBr = 32 it also halves the dQ atomics per (key, query) pair, at the
/// price of 2x the dK/dV registers (D <= 64 only). With causal, a warp whose
/// keys all lie after the tile's last query skips its matmuls (its dS rows
/// are zeros).
template <int D, int kWarps, int kKT, int kBr_>
__global__ void __launch_bounds__(32 * kWarps) attention_backward_kernel(
    float *__restrict__ dqAcc, bf16 *__restrict__ dk, bf16 *__restrict__ dv,
    int64_t dkv_stride, const bf16 *__restrict__ q, const bf16 *__restrict__ k,
    const bf16 *__restrict__ v, int64_t q_stride, int64_t kv_stride,
    const bf16 *__restrict__ dout, const float *__restrict__ lse,
    const float *__restrict__ delta, int T, int H, int group, bool causal,
    float scale_log2, float scale, bool accumulate) {
  using C = BwdConfig<D, kWarps, kKT, kBr_>;
  constexpr int kBc = C::kBc, kBr = C::kBr, kS = C::kS, kSds = C::kSds;
  constexpr int kNThreads = C::kThreads;
  static_assert(kBr % 16 == 0 && kWarps % C::kQTiles == 0 && C::kCols % 16 == 0,
                "dQ needs whole 16-row query tiles and 16-column groups");
  constexpr int kNT = kBr / 8; // n8 tiles of a score row block (queries)
  constexpr int kDT = D / 8;
  extern __shared__ uint4 smem_raw[];
  bf16 *sK = reinterpret_cast<bf16 *>(smem_raw);
  bf16 *sV = sK + kBc * kS;
  bf16 *sQ = sV + kBc * kS;       // [2][kBr][kS]
  bf16 *sdO = sQ + 2 * kBr * kS;  // [2][kBr][kS]
  bf16 *sDS = sdO + 2 * kBr * kS; // [kBc][kSds]: dS^T, keys x queries
  float *sLse = reinterpret_cast<float *>(sDS + kBc * kSds); // [2][kBr]
  float *sDelta = sLse + 2 * kBr;                            // [2][kBr]

  const int nBlock = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int n0 = nBlock * kBc;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int outStride = H * D;
  const bf16 *kBase = k + int64_t(b) * T * kv_stride + int64_t(g) * D;
  const bf16 *vBase = v + int64_t(b) * T * kv_stride + int64_t(g) * D;

  const int qBlocks = (T + kBr - 1) / kBr;
  const int iStart = causal ? n0 / kBr : 0; // earlier query tiles see no key
  const int perHead = qBlocks - iStart;
  const int iters = perHead * group;

  auto prefetch = [&](int it) {
    const int h = g * group + it / perHead;
    const int m0 = (iStart + it % perHead) * kBr;
    const int st = it & 1;
    load_tile<D, kS, kNThreads>(sQ + st * kBr * kS,
                                q + int64_t(b) * T * q_stride + int64_t(h) * D,
                                q_stride, m0, kBr, T);
    load_tile<D, kS, kNThreads>(
        sdO + st * kBr * kS, dout + int64_t(b) * T * outStride + int64_t(h) * D,
        outStride, m0, kBr, T);
    const int64_t rowBase = (int64_t(b) * H + h) * T;
    for (int i = threadIdx.x; i < 2 * kBr; i += kNThreads) {
      const int r = i % kBr, t = m0 + r;
      const bool valid = t < T;
      const float *src = (i < kBr ? lse : delta) + rowBase + (valid ? t : 0);
      cp_async4((i < kBr ? sLse : sDelta) + st * kBr + r, src, valid);
    }
  };

  load_tile<D, kS, kNThreads>(sK, kBase, kv_stride, n0, kBc, T);
  load_tile<D, kS, kNThreads>(sV, vBase, kv_stride, n0, kBc, T);
  if (iters > 0)
    prefetch(0);
  cp_async_commit();

  float dK[kKT][kDT][4], dV[kKT][kDT][4];
#pragma unroll
  for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dK[kt][dt][e] = 0.f, dV[kt][dt][e] = 0.f;

  const int wKey0 = warp * 16 * kKT; // this warp's keys within the tile
  for (int it = 0; it < iters; ++it) {
    const int st = it & 1;
#if AUTODDL_ATTENTION_BWD_LATE_PREFETCH
    // Tile it landed, then one barrier: every warp is done with iteration
    // it-1, so the prefetch may refill its stage and the next sDS write is
    // safe without a barrier at the end of the iteration.
    cp_async_wait<0>();
    __syncthreads();
    if (it + 1 < iters)
      prefetch(it + 1);
    cp_async_commit();
#else
    if (it + 1 < iters)
      prefetch(it + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
#endif
    const int h = g * group + it / perHead;
    const int m0 = (iStart + it % perHead) * kBr;
    const bf16 *tQ = sQ + st * kBr * kS;
    const bf16 *tdO = sdO + st * kBr * kS;
    const float *tLse = sLse + st * kBr;
    const float *tDelta = sDelta + st * kBr;

    // Every key of this warp after every query of the tile (or past T): its
    // P and dS are zero, only its zero dS rows are written for dQ.
    const bool idle = n0 + wKey0 >= T || (causal && n0 + wKey0 > m0 + kBr - 1);
    float sT[kKT][kNT][4], dpT[kKT][kNT][4];
#pragma unroll
    for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          sT[kt][nt][e] = 0.f, dpT[kt][nt][e] = 0.f;
    if (!idle) {
      // S^T = K Q^T and dP^T = V dO^T (this warp's keys x kBr queries).
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t ak[kKT][4], av[kKT][4];
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt) {
          ldmatrix_x4(ak[kt], sK + (wKey0 + kt * 16 + rm_row(lane)) * kS +
                                  kk * 16 + rm_col(lane));
          ldmatrix_x4(av[kt], sV + (wKey0 + kt * 16 + rm_row(lane)) * kS +
                                  kk * 16 + rm_col(lane));
        }
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          uint32_t bq[4], bo[4];
          ldmatrix_x4(bq, tQ + (np * 16 + cm_row(lane)) * kS + kk * 16 +
                              cm_col(lane));
          ldmatrix_x4(bo, tdO + (np * 16 + cm_row(lane)) * kS + kk * 16 +
                              cm_col(lane));
#pragma unroll
          for (int kt = 0; kt < kKT; ++kt) {
            mma(sT[kt][2 * np], ak[kt], bq[0], bq[1]);
            mma(sT[kt][2 * np + 1], ak[kt], bq[2], bq[3]);
            mma(dpT[kt][2 * np], av[kt], bo[0], bo[1]);
            mma(dpT[kt][2 * np + 1], av[kt], bo[2], bo[3]);
          }
        }
      }

      // P^T = exp(S^T scale - lse) (0 where masked); dS^T = P^T (dP^T -
      // delta).
      const bool mask =
          (causal && m0 < n0 + kBc - 1) || n0 + kBc > T || m0 + kBr > T;
#pragma unroll
      for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int qc = nt * 8 + 2 * (lane % 4) + (e & 1);
            float p = fast_exp2(sT[kt][nt][e] * scale_log2 - tLse[qc] * kLog2e);
            if (mask) {
              const int key =
                  n0 + wKey0 + kt * 16 + lane / 4 + (e >= 2 ? 8 : 0);
              const int query = m0 + qc;
              if (key >= T || query >= T || (causal && key > query))
                p = 0.f;
            }
            sT[kt][nt][e] = p;
            dpT[kt][nt][e] = p * (dpT[kt][nt][e] - tDelta[qc]);
          }

          // dV += P^T dO and dK += dS^T Q, A fragments from registers.
#pragma unroll
      for (int kk = 0; kk < kBr / 16; ++kk) {
        uint32_t pa[kKT][4], sa[kKT][4];
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt) {
          c_to_a(pa[kt], sT[kt][2 * kk], sT[kt][2 * kk + 1]);
          c_to_a(sa[kt], dpT[kt][2 * kk], dpT[kt][2 * kk + 1]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t bo[4], bq[4];
          ldmatrix_x4_trans(bo, tdO + (kk * 16 + rm_row(lane)) * kS + dp * 16 +
                                    rm_col(lane));
          ldmatrix_x4_trans(bq, tQ + (kk * 16 + rm_row(lane)) * kS + dp * 16 +
                                    rm_col(lane));
#pragma unroll
          for (int kt = 0; kt < kKT; ++kt) {
            mma(dV[kt][2 * dp], pa[kt], bo[0], bo[1]);
            mma(dV[kt][2 * dp + 1], pa[kt], bo[2], bo[3]);
            mma(dK[kt][2 * dp], sa[kt], bq[0], bq[1]);
            mma(dK[kt][2 * dp + 1], sa[kt], bq[2], bq[3]);
          }
        }
      }
    }

    if (dqAcc) {
      // dS^T to shared memory (bf16), then dQ = dS K: warp w takes query
      // tile w % kQTiles and column group w / kQTiles.
#pragma unroll
      for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int r = 0; r < 2; ++r)
            *reinterpret_cast<uint32_t *>(
                sDS + (wKey0 + kt * 16 + lane / 4 + 8 * r) * kSds + nt * 8 +
                2 * (lane % 4)) =
                pack_bf16(dpT[kt][nt][2 * r], dpT[kt][nt][2 * r + 1]);
      __syncthreads();
      constexpr int kCols = C::kCols;
      constexpr int kChunk = kCols < 64 ? kCols : 64; // columns a pass
      const int qw = warp % C::kQTiles, colBase = (warp / C::kQTiles) * kCols;
      // Keys that can see a query of this warp's tile (causal: up to its
      // last row), in 16-key steps.
      const int kLimit =
          causal ? min(kBc, max(0, m0 + qw * 16 + 16 - n0)) : kBc;
#pragma unroll
      for (int c0 = colBase; c0 < colBase + kCols; c0 += kChunk) {
        float acc[kChunk / 8][4];
#pragma unroll
        for (int dt = 0; dt < kChunk / 8; ++dt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[dt][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < kBc / 16; ++kk) {
          if (kk * 16 >= kLimit)
            break;
          uint32_t a[4];
          ldmatrix_x4_trans(a, sDS + (kk * 16 + cm_row(lane)) * kSds + qw * 16 +
                                   cm_col(lane));
#pragma unroll
          for (int dp = 0; dp < kChunk / 16; ++dp) {
            uint32_t bk[4];
            ldmatrix_x4_trans(bk, sK + (kk * 16 + rm_row(lane)) * kS + c0 +
                                      dp * 16 + rm_col(lane));
            mma(acc[2 * dp], a, bk[0], bk[1]);
            mma(acc[2 * dp + 1], a, bk[2], bk[3]);
          }
        }
        if (kLimit > 0) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int t = m0 + qw * 16 + lane / 4 + 8 * r;
            if (t >= T)
              continue;
            float *dst = dqAcc + ((int64_t(b) * T + t) * H + h) * D + c0 +
                         2 * (lane % 4);
#pragma unroll
            for (int dt = 0; dt < kChunk / 8; ++dt)
              atomicAdd(reinterpret_cast<float2 *>(dst + dt * 8),
                        make_float2(acc[dt][2 * r], acc[dt][2 * r + 1]));
          }
        }
      }
    }
#if !AUTODDL_ATTENTION_BWD_LATE_PREFETCH
    __syncthreads(); // stage and sDS are rewritten next iteration
#endif
  }
  cp_async_wait<0>();

  // dK = scale * dS^T Q, dV = P^T dO, added into the act_t gradients.
#pragma unroll
  for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = n0 + wKey0 + kt * 16 + lane / 4 + 8 * r;
      if (key >= T)
        continue;
      const int64_t off =
          (int64_t(b) * T + key) * dkv_stride + int64_t(g) * D + 2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        if (dk) {
          __nv_bfloat162 *p =
              reinterpret_cast<__nv_bfloat162 *>(dk + off + dt * 8);
          const float2 old =
              accumulate ? __bfloat1622float2(*p) : make_float2(0.f, 0.f);
          *p = __floats2bfloat162_rn(old.x + scale * dK[kt][dt][2 * r],
                                     old.y + scale * dK[kt][dt][2 * r + 1]);
        }
        if (dv) {
          __nv_bfloat162 *p =
              reinterpret_cast<__nv_bfloat162 *>(dv + off + dt * 8);
          const float2 old =
              accumulate ? __bfloat1622float2(*p) : make_float2(0.f, 0.f);
          *p = __floats2bfloat162_rn(old.x + dV[kt][dt][2 * r],
                                     old.y + dV[kt][dt][2 * r + 1]);
        }
      }
    }
}

} // namespace autoddl::rt::flash

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_ATTENTIONFLASH_CUH
