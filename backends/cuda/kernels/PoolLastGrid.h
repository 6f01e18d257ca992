// The channels-last pools' window geometry and the max pool backward's block
// grid (PrimitiveImageLast.cuh pool_last_max_grid_kernel). Plain C++17 (+
// __host__ __device__ under nvcc) so that tests/unit/cuda/PoolGridTest.cpp
// runs the kernel's two phases on the host, block by block, and checks its
// sums bit for bit against the tap-order definition.
//
// A block owns a box of inputs (ResNet's stem pool: 16x28 positions) for G
// channel packs. Phase 1: each window reading the box, its halo included,
// finds its first maximum once (the forward's scan) and puts its taps and dy
// in a shared slot. Phase 2: a thread an (input, pack) gathers its gradient
// from the slots of the windows reading it, windows last first (tap order:
// pool_backward_at's sums), and writes it once. No window is scanned twice
// within a block; the halo is scanned again by the neighbour (ResNet: 135
// windows a box, 112 without the halo). x is read by the scans (L1/L2 hits
// past the first), dy once, dx written once.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define AUTODDL_POOL_HD __host__ __device__
// The functors are __device__ lambdas in the kernels, host ones in the test.
#define AUTODDL_POOL_CALLS _Pragma("nv_exec_check_disable")
#else
#define AUTODDL_POOL_HD
#define AUTODDL_POOL_CALLS
#endif
#ifdef __CUDA_ARCH__
#define AUTODDL_POOL_UNROLL _Pragma("unroll")
#else
#define AUTODDL_POOL_UNROLL
#endif

namespace autoddl::rt {

/// A window's first-maximum tap when it has no in-bounds input.
constexpr uint8_t kNoTap = 255;
/// Channel packs a block at most: ResNet's 64 bf16 channels (one 128-byte
/// line a position).
constexpr int kPoolGroup = 8;
/// Input positions a block's box aims at, and its innermost side at most.
constexpr int kPoolBox = 512, kPoolBoxInner = 32;
/// The grid kernel's shared memory at most (the default limit, no opt-in).
constexpr int kPoolSmemBytes = 48 * 1024;

/// A pool on three axes, the pool's r the last (leading axes of size 1: the
/// tap numbering, row-major over the kernel, is unchanged).
struct PoolLast {
  int k[3], s[3], d[3], p[3], pe[3], in[3], out[3];
  int max, countPad, C, packs; // packs: C / V
};

/// V first-maximum taps (kNoTap: none): a window's in a shared slot.
template <int V> struct alignas(V) TapPack { uint8_t t[V]; };
/// A slot's shared memory a pack: its dy (a 16-byte pack as stored, one
/// value as a float) and its taps.
template <int V> constexpr int kPoolSlotBytes = (V > 1 ? 16 : 4) + V;

/// Position i on an axis of n clamped into [0, n).
AUTODDL_POOL_HD inline int pool_clamp(int i, int n) {
  return i < 0 ? 0 : i < n ? i : n - 1;
}

/// Window o's reduction for V channels, load(pos, v) reading the V values
/// at in-plane position pos: max or sum (acc), the first maximum's tap
/// (first; -1: none) and the divisor (count: count_include_pad's or the
/// in-bounds taps), as OnnxImage.h forWindow. K > 0 (max pools only): the
/// kernel's last two extents are K, its loops unrolled and every tap read
/// (off the input: at a clamped position, then ignored), so that no branch
/// separates the loads and they issue together.
AUTODDL_POOL_CALLS
template <int V, int K = 0, class Load>
AUTODDL_POOL_HD void pool_last_window(const PoolLast &q, const Load &load,
                                      const int (&o)[3], float (&acc)[V],
                                      int (&first)[V], int *count) {
  const int k1n = K > 0 ? K : q.k[1], k2n = K > 0 ? K : q.k[2];
  for (int v = 0; v < V; ++v) {
    acc[v] = q.max ? -INFINITY : 0.0f;
    first[v] = -1;
  }
  int n = 0, inPad = 0;
  for (int k0 = 0; k0 < q.k[0]; ++k0) {
    const int i0 = o[0] * q.s[0] - q.p[0] + k0 * q.d[0];
    AUTODDL_POOL_UNROLL
    for (int k1 = 0; k1 < k1n; ++k1) {
      const int i1 = o[1] * q.s[1] - q.p[1] + k1 * q.d[1];
      AUTODDL_POOL_UNROLL
      for (int k2 = 0; k2 < k2n; ++k2) {
        const int i2 = o[2] * q.s[2] - q.p[2] + k2 * q.d[2];
        inPad += i0 >= -q.p[0] && i0 < q.in[0] + q.pe[0] && i1 >= -q.p[1] &&
                 i1 < q.in[1] + q.pe[1] && i2 >= -q.p[2] &&
                 i2 < q.in[2] + q.pe[2];
        const bool inside = i0 >= 0 && i0 < q.in[0] && i1 >= 0 &&
                            i1 < q.in[1] && i2 >= 0 && i2 < q.in[2];
        if (K == 0 && !inside)
          continue;
        const int tap = (k0 * k1n + k1) * k2n + k2;
        float xv[V];
        if (K > 0)
          load((pool_clamp(i0, q.in[0]) * q.in[1] + pool_clamp(i1, q.in[1])) *
                       q.in[2] +
                   pool_clamp(i2, q.in[2]),
               xv);
        else
          load((i0 * q.in[1] + i1) * q.in[2] + i2, xv);
        n += inside;
        for (int v = 0; v < V; ++v) {
          if (K > 0) { // selects, no branch
            const bool take = inside && (first[v] < 0 || xv[v] > acc[v]);
            acc[v] = take ? xv[v] : acc[v];
            first[v] = take ? tap : first[v];
          } else if (!q.max) {
            acc[v] += xv[v];
          } else if (first[v] < 0 || xv[v] > acc[v]) {
            acc[v] = xv[v];
            first[v] = tap;
          }
        }
      }
    }
  }
  *count = q.countPad ? inPad : n;
}

/// pool_last_window's K for the max pool grid: 3 for 3x3 windows (ResNet's
/// stem), else 0 (loops at run time).
inline int pool_unrolled(const PoolLast &q) {
  return q.k[0] == 1 && q.k[1] == 3 && q.k[2] == 3 ? 3 : 0;
}

/// The windows reading inputs [first, last] on axis d: [*lo, *hi] (empty
/// where *lo > *hi). Assumes no dilation.
AUTODDL_POOL_HD inline void pool_windows_of(const PoolLast &q, int d, int first,
                                            int last, int *lo, int *hi) {
  const int from = first + q.p[d] - q.k[d] + 1; // o * s - p + k - 1 >= first
  *lo = from <= 0 ? 0 : (from + q.s[d] - 1) / q.s[d];
  const int h = (last + q.p[d]) / q.s[d]; // o * s - p <= last
  *hi = h < q.out[d] - 1 ? h : q.out[d] - 1;
}

/// The grid: blocks of box inputs on each axis by G channel packs, `slots`
/// windows a block at most.
struct PoolGrid {
  int box[3], blocks[3];
  int G, groups, slots;
  int64_t count; // blocks in all: N * blocks * groups
};

/// One block: sample n, channel group `group`, inputs [a0, a1) and the
/// windows reading them, lo + [0, w) on each axis.
struct PoolBlock {
  int n, group, a0[3], a1[3], lo[3], w[3];
};

AUTODDL_POOL_HD inline PoolBlock pool_block(const PoolLast &q,
                                            const PoolGrid &g, int64_t b) {
  PoolBlock r;
  r.group = int(b % g.groups);
  b /= g.groups;
  for (int d = 2; d >= 0; --d) {
    r.a0[d] = int(b % g.blocks[d]) * g.box[d];
    b /= g.blocks[d];
    r.a1[d] = r.a0[d] + g.box[d] < q.in[d] ? r.a0[d] + g.box[d] : q.in[d];
    int hi;
    pool_windows_of(q, d, r.a0[d], r.a1[d] - 1, &r.lo[d], &hi);
    r.w[d] = hi >= r.lo[d] ? hi - r.lo[d] + 1 : 0;
  }
  r.n = int(b);
  return r;
}

/// The grid of a max pool on N samples, `slotBytes` of shared memory a
/// window and pack (kPoolSlotBytes: its dy and taps). A box of one stride a
/// side has at most k windows a side (ceil((s + k - 1) / s) <= k), so at
/// most kcount < kNoTap slots: the halving below ends within
/// kPoolSmemBytes where kNoTap * kPoolGroup * slotBytes fits it.
inline PoolGrid pool_grid(const PoolLast &q, int64_t N, int slotBytes) {
  PoolGrid g{};
  g.G = q.packs < kPoolGroup ? q.packs : kPoolGroup;
  g.groups = (q.packs + g.G - 1) / g.G;
  // Boxes that split each axis evenly, sides multiples of the stride (no
  // window read by three blocks), innermost axis first.
  int want = kPoolBox;
  for (int d = 2; d >= 0; --d) {
    const int cap = d == 2 ? kPoolBoxInner : want > 1 ? want : 1;
    const int parts = (q.in[d] + cap - 1) / cap;
    const int side = (q.in[d] + parts - 1) / parts;
    g.box[d] = (side + q.s[d] - 1) / q.s[d] * q.s[d];
    want /= g.box[d];
  }
  for (;;) {
    // The windows reading `box` consecutive inputs: the multiples of s in
    // box + k - 1 consecutive positions, at most.
    int64_t slots = 1;
    for (int d = 0; d < 3; ++d) {
      const int w = (g.box[d] + q.k[d] - 1 + q.s[d] - 1) / q.s[d];
      slots *= w < q.out[d] ? w : q.out[d];
    }
    g.slots = int(slots);
    int big = -1; // the longest side of two strides or more
    for (int d = 0; d < 3; ++d)
      if (g.box[d] >= 2 * q.s[d] && (big < 0 || g.box[d] > g.box[big]))
        big = d;
    if (slots * g.G * slotBytes <= kPoolSmemBytes || big < 0)
      break;
    g.box[big] = g.box[big] / 2 / q.s[big] * q.s[big];
  }
  g.count = N * g.groups;
  for (int d = 0; d < 3; ++d) {
    g.blocks[d] = (q.in[d] + g.box[d] - 1) / g.box[d];
    g.count *= g.blocks[d];
  }
  return g;
}

/// Phase 1, item i of block b (window i / G of the box's, pack i % G): the
/// window's first-maximum taps into taps[i], and putDy(i, e) keeps the V
/// values of dy at element offset e in slot i. load(e, v) reads the V
/// values of x at element offset e. K: pool_last_window's.
AUTODDL_POOL_CALLS
template <int V, int K, class Load, class PutDy>
AUTODDL_POOL_HD void pool_grid_window(const PoolLast &q, const PoolGrid &g,
                                      const PoolBlock &b, int i,
                                      const Load &load, const PutDy &putDy,
                                      TapPack<V> *taps) {
  const int pack = b.group * g.G + i % g.G;
  if (pack >= q.packs)
    return;
  const int64_t c = int64_t(pack) * V;
  int o[3], w = i / g.G;
  for (int d = 2; d >= 0; --d) {
    o[d] = b.lo[d] + w % b.w[d];
    w /= b.w[d];
  }
  const int64_t inBase = int64_t(b.n) * q.in[0] * q.in[1] * q.in[2] * q.C + c;
  float m[V];
  int first[V], count;
  pool_last_window<V, K>(
      q, [&](int pos, float(&v)[V]) { load(inBase + int64_t(pos) * q.C, v); },
      o, m, first, &count);
  TapPack<V> t;
  for (int v = 0; v < V; ++v)
    t.t[v] = first[v] < 0 ? kNoTap : uint8_t(first[v]);
  taps[i] = t;
  putDy(i, (((int64_t(b.n) * q.out[0] + o[0]) * q.out[1] + o[1]) * q.out[2] +
            o[2]) * q.C +
               c);
}

/// Phase 2, item i of block b (input i / G of the box, pack i % G):
/// store(e, g) writes the gradient g of the V values at element offset e of
/// dx, the sum, windows last first (so in tap order), of dy of the windows
/// whose first maximum it is; dyAt(slot, v) reads a slot's dy.
AUTODDL_POOL_CALLS
template <int V, class DyAt, class Store>
AUTODDL_POOL_HD void pool_grid_gather(const PoolLast &q, const PoolGrid &g,
                                      const PoolBlock &b, int i,
                                      const TapPack<V> *taps, const DyAt &dyAt,
                                      const Store &store) {
  const int pack = b.group * g.G + i % g.G;
  if (pack >= q.packs)
    return;
  int at[3], lo[3], hi[3], l = i / g.G;
  for (int d = 2; d >= 0; --d) {
    const int e = b.a1[d] - b.a0[d];
    at[d] = b.a0[d] + l % e;
    l /= e;
    pool_windows_of(q, d, at[d], at[d], &lo[d], &hi[d]);
  }
  float sum[V] = {};
  int o[3];
  for (o[0] = hi[0]; o[0] >= lo[0]; --o[0])
    for (o[1] = hi[1]; o[1] >= lo[1]; --o[1])
      for (o[2] = hi[2]; o[2] >= lo[2]; --o[2]) {
        // This input's tap in window o (in range: o reads it).
        const int tap = ((at[0] + q.p[0] - o[0] * q.s[0]) * q.k[1] + at[1] +
                         q.p[1] - o[1] * q.s[1]) *
                            q.k[2] +
                        at[2] + q.p[2] - o[2] * q.s[2];
        const int slot =
            (((o[0] - b.lo[0]) * b.w[1] + o[1] - b.lo[1]) * b.w[2] + o[2] -
             b.lo[2]) *
                g.G +
            i % g.G;
        const TapPack<V> first = taps[slot];
        float up[V];
        dyAt(slot, up);
        for (int v = 0; v < V; ++v)
          if (first.t[v] == tap)
            sum[v] += up[v];
      }
  store(
      (((int64_t(b.n) * q.in[0] + at[0]) * q.in[1] + at[1]) * q.in[2] + at[2]) *
              q.C +
          int64_t(pack) * V,
      sum);
}

} // namespace autoddl::rt
