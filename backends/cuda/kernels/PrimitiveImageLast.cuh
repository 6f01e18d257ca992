// The channels-last image primitives: pools on [N, spatial..., C] and batch
// norm with the channel innermost ([N, H, W, C], or [N, C]). A part of
// PrimitiveImage.cuh (included inside Primitive.cu's anonymous namespace,
// after PoolArgs, NormGrid, NormGrad and batchnorm_finish_kernel).
// Written for bandwidth (docs/cuda-kernels.md "Channels-last image
// kernels"): a thread owns a pack of V channels (one 16-byte access of act_t
// where packs_fit, else V = 1), so a warp's accesses are consecutive packs
// (coalesced); index arithmetic happens once a thread or a window, in 32
// bits; per-channel values are loaded once a thread, not once an element.
// Deterministic as the rest: one writer an element, sums in a fixed order.

/// V values of r from element e: one 16-byte access for V > 1 (act_t and
/// aligned: packs_fit), else ld / put.
template <int V>
__device__ __forceinline__ void ld_pack(const Ref &r, int64_t e,
                                        float (&v)[V]) {
  if constexpr (V == 1)
    v[0] = ld(r, e);
  else
    load_floats<act_t, V>(v, static_cast<const act_t *>(r.p) + e);
}
/// V = kPack<act_t> values as act_t in one 16-byte word, for one 16-byte
/// store (__stwb: a Pack stored as such, store_floats', or a uint4 store
/// became 2- and 4-byte stores in the normalise and dx passes' loops).
template <int V>
__device__ __forceinline__ uint4 pack_bits(const float (&v)[V]) {
  static_assert(V * sizeof(act_t) == sizeof(uint4));
  constexpr int per = int(sizeof(uint32_t) / sizeof(act_t)); // a word's
  uint32_t w[4] = {};
  for (int k = 0; k < V; ++k) {
    const act_t a = from_float<act_t>(v[k]);
    uint32_t b = 0;
    memcpy(&b, &a, sizeof(act_t));
    w[k / per] |= b << (32 / per * (k % per));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}
template <int V>
__device__ __forceinline__ void put_pack(const Ref &r, int64_t e, float (&v)[V],
                                         bool acc) {
  if constexpr (V == 1) {
    put(r, e, v[0], acc);
  } else {
    act_t *q = static_cast<act_t *>(r.p) + e;
    if (acc) {
      float old[V];
      load_floats<act_t, V>(old, q);
      for (int k = 0; k < V; ++k)
        v[k] += old[k];
    }
    __stwb(reinterpret_cast<uint4 *>(q), pack_bits<V>(v));
  }
}

template <int V>
__device__ void NormGrad::pack(int64_t e, float (&g)[V]) const {
  ld_pack<V>(dy, e, g);
  if (!relu.p)
    return;
  float mask[V];
  ld_pack<V>(relu, e, mask);
  for (int v = 0; v < V; ++v)
    g[v] = mask[v] > 0.0f ? g[v] : 0.0f;
}

/// Whether the channel-innermost kernels may read and write V = kPack<act_t>
/// values at a time: every tensor act_t (an fp32 ref is one in the fp32
/// build) and 16-byte aligned, C a multiple of V.
bool packs_fit(int64_t C, std::initializer_list<PrimRef> refs) {
  constexpr int V = kPack<act_t>;
  if (C % V != 0)
    return false;
  for (const PrimRef &r : refs)
    if (r.p &&
        ((r.f32 && !kActIsFloat) || reinterpret_cast<uintptr_t>(r.p) % 16 != 0))
      return false;
  return true;
}

// ---- Pools ------------------------------------------------------------------
// A thread a (sample, position, channel pack): the forward reads its window's
// taps as packs; an average's backward gathers, for an input pack, the
// windows that read it. A max pool's backward runs on blocks of input boxes
// (PoolLastGrid.h: each window scanned once a block into shared slots, each
// input gathered from there in tap order and written once; no atomics); a
// dilated one records each window's first-maximum tap (pool_taps) in global
// memory for that gather.

/// PoolArgs as a PoolLast (its axes the last of three) at V channels a pack.
PoolLast pool_last_args(const PoolArgs &a, int V) {
  PoolLast q{};
  for (int d = 0; d < 3; ++d) {
    const int f = d - (3 - a.r); // the pool's axis, or < 0: a leading one
    q.k[d] = f < 0 ? 1 : a.kernel[f];
    q.s[d] = f < 0 ? 1 : a.stride[f];
    q.d[d] = f < 0 ? 1 : a.dil[f];
    q.p[d] = f < 0 ? 0 : a.pad[f];
    q.pe[d] = f < 0 ? 0 : a.padEnd[f];
    q.in[d] = f < 0 ? 1 : a.in[f];
    q.out[d] = f < 0 ? 1 : a.out[f];
  }
  q.max = a.max;
  q.countPad = a.countPad;
  q.C = int(a.channels);
  q.packs = q.C / V;
  return q;
}

/// Item i of a [N, dims..., packs] space: its position (pos), sample (the
/// return) and first channel c.
template <int V>
__device__ __forceinline__ int last_item(const PoolLast &q, int i,
                                         const int (&dims)[3], int (&pos)[3],
                                         int *c) {
  int rest = i / q.packs;
  *c = (i - rest * q.packs) * V;
  for (int d = 2; d >= 0; --d) {
    const int next = rest / dims[d];
    pos[d] = rest - next * dims[d];
    rest = next;
  }
  return rest;
}

/// pool_last_window (PoolLastGrid.h) over the plane at x[base + pos * C].
template <int V, int K = 0>
__device__ __forceinline__ void
scan_window(const PoolLast &q, const Ref &x, int64_t base, const int (&o)[3],
            float (&acc)[V], int (&first)[V], int *count) {
  pool_last_window<V, K>(
      q,
      [&](int pos, float(&v)[V]) {
        ld_pack<V>(x, base + int64_t(pos) * q.C, v);
      },
      o, acc, first, count);
}

/// Window o's divisor without reading it: the in-bounds (or, counting pads,
/// in-padded) taps are a product over the axes.
__device__ int pool_last_count(const PoolLast &q, const int (&o)[3]) {
  int n = 1;
  for (int d = 0; d < 3; ++d) {
    int m = 0;
    for (int k = 0; k < q.k[d]; ++k) {
      const int i = o[d] * q.s[d] - q.p[d] + k * q.d[d];
      m += q.countPad ? i >= -q.p[d] && i < q.in[d] + q.pe[d]
                      : i >= 0 && i < q.in[d];
    }
    n *= m;
  }
  return n;
}

/// The forward (y, where given) and a max pool's first-maximum taps (taps,
/// where given; one byte an output element), a thread an output pack; K:
/// pool_last_window's.
template <int V, int K>
__global__ void pool_last_forward_kernel(PoolLast q, int total, Ref x, Ref y,
                                         uint8_t *taps) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += gridDim.x * blockDim.x) {
    int o[3], c;
    const int n = last_item<V>(q, i, q.out, o, &c);
    float acc[V];
    int first[V], count;
    scan_window<V, K>(q, x, int64_t(n) * q.in[0] * q.in[1] * q.in[2] * q.C + c,
                      o, acc, first, &count);
    const int64_t e = int64_t(i) * V; // [n, o, c]: V divides C
    if (y.p) {
      if (!q.max)
        for (int v = 0; v < V; ++v)
          acc[v] /= float(count > 0 ? count : 1);
      put_pack<V>(y, e, acc, false);
    }
    if (taps) {
      TapPack<V> t;
      for (int v = 0; v < V; ++v)
        t.t[v] = first[v] < 0 ? kNoTap : uint8_t(first[v]);
      *reinterpret_cast<TapPack<V> *>(taps + e) = t;
    }
  }
}

/// The forward kernel at V over `outs` output packs, a max pool's 3x3
/// windows unrolled (pool_unrolled; an average's sum needs the branches).
template <int V>
void pool_last_forward(const PoolLast &q, int outs, Ref x, Ref y,
                       uint8_t *taps) {
  auto kernel = q.max && pool_unrolled(q) == 3 ? pool_last_forward_kernel<V, 3>
                                               : pool_last_forward_kernel<V, 0>;
  kernel<<<grid_for(outs, 256), 256, 0, compute_stream()>>>(q, outs, x, y,
                                                            taps);
}

/// dx += the gradient of every window reading an input pack (= without
/// acc), in tap order (pool_backward_at's sums): a mean's share, or a max's
/// where this input is its first maximum (taps; null: the window recomputed).
template <int V>
__global__ void pool_last_backward_kernel(PoolLast q, int total, Ref x, Ref dy,
                                          const uint8_t *taps, Ref dx,
                                          bool acc) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += gridDim.x * blockDim.x) {
    int at[3], c;
    const int n = last_item<V>(q, i, q.in, at, &c);
    const int64_t inBase = int64_t(n) * q.in[0] * q.in[1] * q.in[2] * q.C + c,
                  outBase =
                      int64_t(n) * q.out[0] * q.out[1] * q.out[2] * q.C + c;
    float g[V] = {};
    int o[3];
    for (int k0 = 0; k0 < q.k[0]; ++k0) {
      const int t0 = at[0] + q.p[0] - k0 * q.d[0];
      o[0] = t0 / q.s[0];
      if (t0 < 0 || t0 - o[0] * q.s[0] != 0 || o[0] >= q.out[0])
        continue;
      for (int k1 = 0; k1 < q.k[1]; ++k1) {
        const int t1 = at[1] + q.p[1] - k1 * q.d[1];
        o[1] = t1 / q.s[1];
        if (t1 < 0 || t1 - o[1] * q.s[1] != 0 || o[1] >= q.out[1])
          continue;
        for (int k2 = 0; k2 < q.k[2]; ++k2) {
          const int t2 = at[2] + q.p[2] - k2 * q.d[2];
          o[2] = t2 / q.s[2];
          if (t2 < 0 || t2 - o[2] * q.s[2] != 0 || o[2] >= q.out[2])
            continue;
          const int tap = (k0 * q.k[1] + k1) * q.k[2] + k2;
          const int64_t oe =
              outBase +
              int64_t((o[0] * q.out[1] + o[1]) * q.out[2] + o[2]) * q.C;
          float up[V];
          if (taps) {
            const TapPack<V> t =
                *reinterpret_cast<const TapPack<V> *>(taps + oe);
            bool any = false;
            for (int v = 0; v < V; ++v)
              any = any || t.t[v] == tap;
            if (!any)
              continue;
            ld_pack<V>(dy, oe, up);
            for (int v = 0; v < V; ++v)
              if (t.t[v] == tap)
                g[v] += up[v];
            continue;
          }
          ld_pack<V>(dy, oe, up);
          if (!q.max) {
            const int count = pool_last_count(q, o);
            for (int v = 0; v < V; ++v)
              g[v] += up[v] / float(count > 0 ? count : 1);
            continue;
          }
          float acc[V];
          int first[V], count;
          scan_window<V>(q, x, inBase, o, acc, first, &count);
          for (int v = 0; v < V; ++v)
            if (first[v] == tap)
              g[v] += up[v];
        }
      }
    }
    put_pack<V>(dx, int64_t(i) * V, g, acc);
  }
}

/// Whether a max pool's backward may run on PoolLastGrid.h's block grid: no
/// dilation, taps that fit a byte.
bool pool_last_gridded(const PoolLast &q) {
  return q.max && q.d[0] == 1 && q.d[1] == 1 && q.d[2] == 1 &&
         q.k[0] * q.k[1] * q.k[2] < kNoTap;
}

/// A window's dy in its shared slot: a pack as stored (packs_fit: act_t,
/// aligned), one value as a float.
template <int V> using DySlot = std::conditional_t<(V > 1), uint4, float>;

/// A max pool's backward in one pass (PoolLastGrid.h): each window reading a
/// block's box scanned once into shared slots, then each input gathered from
/// them and written once, stored or added (acc). Shared memory: g.slots * G
/// DySlots, then as many TapPacks.
constexpr int kPoolThreads = 256;
template <int V, int K>
__global__ void __launch_bounds__(kPoolThreads, 4)
    pool_last_max_grid_kernel(PoolLast q, PoolGrid g, Ref x, Ref dy, Ref dx,
                              bool acc) {
  extern __shared__ uint4 poolSlots[];
  auto *dys = reinterpret_cast<DySlot<V> *>(poolSlots);
  auto *taps = reinterpret_cast<TapPack<V> *>(dys + g.slots * g.G);
  const PoolBlock b = pool_block(q, g, blockIdx.x);
  const int windows = b.w[0] * b.w[1] * b.w[2] * g.G,
            inputs = (b.a1[0] - b.a0[0]) * (b.a1[1] - b.a0[1]) *
                     (b.a1[2] - b.a0[2]) * g.G;
  for (int i = threadIdx.x; i < windows; i += blockDim.x)
    pool_grid_window<V, K>(
        q, g, b, i, [&](int64_t e, float(&v)[V]) { ld_pack<V>(x, e, v); },
        [&](int slot, int64_t e) {
          if constexpr (V > 1)
            dys[slot] = *reinterpret_cast<const uint4 *>(
                static_cast<const act_t *>(dy.p) + e);
          else
            dys[slot] = ld(dy, e);
        },
        taps);
  __syncthreads();
  for (int i = threadIdx.x; i < inputs; i += blockDim.x)
    pool_grid_gather<V>(
        q, g, b, i, taps,
        [&](int slot, float(&v)[V]) {
          if constexpr (V > 1)
            load_floats<act_t, V>(v,
                                  reinterpret_cast<const act_t *>(dys + slot));
          else
            v[0] = dys[slot];
        },
        [&](int64_t e, float(&v)[V]) { put_pack<V>(dx, e, v, acc); });
}

/// The grid kernel at V channels a pack.
template <int V>
void pool_last_max_grid(const PoolLast &q, int64_t N, PrimRef x, PrimRef dy,
                        PrimRef dx, bool acc) {
  constexpr int slotBytes = kPoolSlotBytes<V>;
  static_assert(sizeof(DySlot<V>) + sizeof(TapPack<V>) == slotBytes);
  static_assert(kNoTap * kPoolGroup * slotBytes <= kPoolSmemBytes,
                "pool_grid's boxes fit");
  const PoolGrid g = pool_grid(q, N, slotBytes);
  auto kernel = pool_unrolled(q) == 3 ? pool_last_max_grid_kernel<V, 3>
                                      : pool_last_max_grid_kernel<V, 0>;
  kernel<<<unsigned(g.count), kPoolThreads, size_t(g.slots) * g.G * slotBytes,
           compute_stream()>>>(q, g, ref(x), ref(dy), ref(dx), acc);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// The channels-last pool of `a` on N samples (pool()'s caller checks that
/// the input has fewer than 2^30 elements): V = kPack<act_t> where packs_fit.
void pool_last(const PoolArgs &a, int64_t N, PrimRef x, PrimRef y, PrimRef dy,
               PrimRef dx, bool forward, bool acc) {
  constexpr int P = kPack<act_t>;
  const bool packed = forward ? packs_fit(a.channels, {x, y})
                              : packs_fit(a.channels, {x, dy, dx});
  const int V = packed ? P : 1;
  const PoolLast q = pool_last_args(a, V);
  const int outs = int(N * a.outPlane * q.packs),
            ins = int(N * a.inPlane * q.packs);
  if (forward) {
    if (outs == 0)
      return;
    if (packed)
      pool_last_forward<P>(q, outs, ref(x), ref(y), nullptr);
    else
      pool_last_forward<1>(q, outs, ref(x), ref(y), nullptr);
    AUTODDL_CUDA_CHECK_LAUNCH();
    return;
  }
  if (!dx.p || ins == 0)
    return;
  if (pool_last_gridded(q)) {
    if (packed)
      pool_last_max_grid<P>(q, N, x, dy, dx, acc);
    else
      pool_last_max_grid<1>(q, N, x, dy, dx, acc);
    return;
  }
  // A max pool's taps: scratch slot 0 (within this call only, as Reduce's).
  uint8_t *taps = nullptr;
  if (a.max && a.kcount < kNoTap && outs > 0) {
    taps = static_cast<uint8_t *>(scratch(0, int64_t(outs) * V));
    if (packed)
      pool_last_forward<P>(q, outs, ref(x), Ref(), taps);
    else
      pool_last_forward<1>(q, outs, ref(x), Ref(), taps);
  }
  if (packed)
    pool_last_backward_kernel<P>
        <<<grid_for(ins, 256), 256, 0, compute_stream()>>>(
            q, ins, ref(x), ref(dy), taps, ref(dx), acc);
  else
    pool_last_backward_kernel<1>
        <<<grid_for(ins, 256), 256, 0, compute_stream()>>>(
            q, ins, ref(x), ref(dy), taps, ref(dx), acc);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

// ---- Batch norm, channel innermost
// ------------------------------------------- R rows of C channels (a
// channels-last image: R = N * H * W), element (r, c) at r * C + c. All three
// passes share one grid: block (j, t) owns rows [j*rows, (j+1)*rows) of channel
// tile t, `lanes` packs of V channels side by side by kNormThreads / lanes row
// lanes, so a warp reads whole consecutive packs of a row (coalesced) and a
// thread keeps one channel pack: its per-channel values (shift, partial sums,
// coefficients) live in registers. The splits fill one wave of resident blocks.
// The partials go where batchnorm_sums_kernel's do; batchnorm_finish_kernel
// reads them as a grid of N = R, S = 1.

/// The lanes of a block: packs of V channels side by side, as many as fit C
/// (up to 32: a warp's width).
int last_lanes(int64_t C, int V) {
  int lanes = 32;
  while (lanes > 1 && int64_t(lanes) * V > C)
    lanes /= 2;
  return lanes;
}

/// This thread's place in the grid: channel pack c0 (live: inside C), rows
/// r0, r0 + rowLanes, ... below r1.
struct LastTile {
  int lane, rl, rowLanes;
  int64_t c0, r0, r1;
  bool live;
};
template <int V>
__device__ __forceinline__ LastTile last_tile(const NormGrid &g, int lanes) {
  LastTile t;
  t.rowLanes = kNormThreads / lanes;
  t.lane = threadIdx.x % lanes;
  t.rl = threadIdx.x / lanes;
  t.c0 = int64_t(blockIdx.y) * lanes * V + t.lane * V;
  const int64_t first = int64_t(blockIdx.x) * g.rows;
  t.r0 = first + t.rl;
  t.r1 = min(first + g.rows, g.N);
  t.live = t.c0 < g.C; // a whole pack: V > 1 only where V divides C
  return t;
}

/// Block (j, t)'s shifted sums (batchnorm_sums_kernel's; Grad: with dy's)
/// into part[(c * kNormSums + q) * splits + j]. Every thread of the block
/// calls it (a block reduction; the fused kernel's grid barrier follows).
template <int V, bool Grad>
__device__ __forceinline__ void last_sums(const NormGrid &g, const LastTile &t,
                                          int lanes, const Ref &x,
                                          const NormGrad &dy, float *part) {
  constexpr int Q = Grad ? kNormSums : 2;
  __shared__ float sums[Q * kNormThreads * V]; // [sum][row lane][channel]
  const int64_t tile = int64_t(lanes) * V;
  float s[Q][V] = {};
  if (t.live) {
    float k[V];
    ld_pack<V>(x, t.c0, k); // row 0: the shift
#pragma unroll 4
    for (int64_t r = t.r0; r < t.r1; r += t.rowLanes) {
      const int64_t e = r * g.C + t.c0;
      float xv[V], gv[V];
      ld_pack<V>(x, e, xv);
      if constexpr (Grad)
        dy.pack<V>(e, gv);
      for (int v = 0; v < V; ++v) {
        const float d = xv[v] - k[v];
        s[0][v] += d;
        s[1][v] += d * d;
        if constexpr (Grad) {
          s[2][v] += gv[v];
          s[3][v] += gv[v] * d;
        }
      }
    }
  }
  for (int q = 0; q < Q; ++q)
    for (int v = 0; v < V; ++v)
      sums[(q * t.rowLanes + t.rl) * tile + t.lane * V + v] = s[q][v];
  __syncthreads();
  for (int64_t i = threadIdx.x; i < kNormSums * tile; i += blockDim.x) {
    const int q = int(i / tile);
    const int64_t ch = i % tile, c = blockIdx.y * tile + ch;
    if (c >= g.C)
      continue;
    float v = 0.0f;
    if (q < Q)
      for (int l = 0; l < t.rowLanes; ++l) // a fixed order: deterministic
        v += sums[(q * t.rowLanes + l) * tile + ch];
    part[(c * kNormSums + q) * g.splits + blockIdx.x] = v;
  }
}
template <int V, bool Grad>
__global__ void __launch_bounds__(kNormThreads)
    batchnorm_sums_last_kernel(NormGrid g, int lanes, Ref x, NormGrad dy,
                               float *part) {
  last_sums<V, Grad>(g, last_tile<V>(g, lanes), lanes, x, dy, part);
}

/// Calls f(r) for this thread's rows r0, r0 + rowLanes, ... below r1; Back:
/// last first (the fused form's second pass, whose first pass just read the
/// last rows: those are the ones still in L2).
template <bool Back, class F>
__device__ __forceinline__ void for_tile_rows(const LastTile &t, F f) {
  if constexpr (Back) {
    if (t.r0 >= t.r1)
      return;
    const int64_t last = t.r0 + (t.r1 - 1 - t.r0) / t.rowLanes * t.rowLanes;
#pragma unroll 4
    for (int64_t r = last; r >= t.r0; r -= t.rowLanes)
      f(r);
  } else {
#pragma unroll 4
    for (int64_t r = t.r0; r < t.r1; r += t.rowLanes)
      f(r);
  }
}

/// The forward's normalise pass: y = (x - m) inv scale + bias (+ res where
/// given; then max(y, 0) under `relu`), batchnorm_apply_kernel's formula.
template <int V, bool Back = false>
__device__ __forceinline__ void
last_apply(const NormGrid &g, const LastTile &t, const Ref &x, const Ref &scale,
           const Ref &bias, const float *stats, bool relu, const Ref &res,
           const Ref &y) {
  if (!t.live)
    return;
  float m[V], a[V], b[V];
  for (int v = 0; v < V; ++v) {
    const int64_t c = t.c0 + v;
    m[v] = stats[c * 4];
    a[v] = ld(scale, c) * stats[c * 4 + 1];
    b[v] = ld(bias, c);
  }
  const float lo = relu ? 0.0f : -INFINITY;
  for_tile_rows<Back>(t, [&](int64_t r) {
    const int64_t e = r * g.C + t.c0;
    float xv[V], rv[V] = {};
    ld_pack<V>(x, e, xv);
    if (res.p)
      ld_pack<V>(res, e, rv);
    for (int v = 0; v < V; ++v)
      xv[v] = fmaxf((xv[v] - m[v]) * a[v] + b[v] + rv[v], lo);
    put_pack<V>(y, e, xv, false);
  });
}
template <int V>
__global__ void __launch_bounds__(kNormThreads)
    batchnorm_apply_last_kernel(NormGrid g, int lanes, Ref x, Ref scale,
                                Ref bias, const float *stats, bool relu,
                                Ref res, Ref y) {
  last_apply<V>(g, last_tile<V>(g, lanes), x, scale, bias, stats, relu, res, y);
}

/// The backward's dx pass, batchnorm_dx_kernel's formulas.
template <int V, bool Back = false>
__device__ __forceinline__ void
last_dx(const NormGrid &g, const LastTile &t, const Ref &x, const Ref &scale,
        bool given, const float *stats, const NormGrad &dy, const Ref &dx,
        bool acc) {
  if (!t.live)
    return;
  const float M = float(g.N > 0 ? g.N : 1);
  float m[V], inv[V], a[V], sg[V], sgx[V];
  for (int v = 0; v < V; ++v) {
    const int64_t c = t.c0 + v;
    m[v] = stats[c * 4];
    inv[v] = stats[c * 4 + 1];
    sg[v] = stats[c * 4 + 2];
    sgx[v] = stats[c * 4 + 3];
    a[v] = ld(scale, c) * inv[v];
  }
  for_tile_rows<Back>(t, [&](int64_t r) {
    const int64_t e = r * g.C + t.c0;
    float xv[V], gv[V];
    ld_pack<V>(x, e, xv);
    dy.pack<V>(e, gv);
    for (int v = 0; v < V; ++v) {
      const float xhat = (xv[v] - m[v]) * inv[v];
      xv[v] =
          given ? a[v] * gv[v] : a[v] / M * (M * gv[v] - sg[v] - xhat * sgx[v]);
    }
    put_pack<V>(dx, e, xv, acc);
  });
}
template <int V>
__global__ void __launch_bounds__(kNormThreads)
    batchnorm_dx_last_kernel(NormGrid g, int lanes, Ref x, Ref scale,
                             bool given, const float *stats, NormGrad dy,
                             Ref dx, bool acc) {
  last_dx<V>(g, last_tile<V>(g, lanes), x, scale, given, stats, dy, dx, acc);
}

/// Blocks of a kernel resident on one SM at kNormThreads threads (cached per
/// kernel: the occupancy query is a host call).
template <class K> int resident_blocks(K kernel) {
  int blocks = 0;
  AUTODDL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, kernel, kNormThreads, 0));
  return std::max(1, blocks);
}

/// The grid of R rows in channel tiles of `tile`: one wave of the sums
/// kernel's resident blocks (`perSm` an SM), each at least 128 rows.
NormGrid norm_grid_last(int64_t R, int64_t C, int64_t tile, int perSm) {
  const int64_t tiles = (C + tile - 1) / tile;
  const int64_t want =
      std::max<int64_t>(1, int64_t(sm_count()) * perSm / tiles);
  const int64_t splits = std::max<int64_t>(1, std::min(want, R / 128));
  const int64_t rows = (R + splits - 1) / splits;
  return {R, C, 1, (R + rows - 1) / rows, rows};
}

/// The channel-innermost batch norm of R rows of C channels at V channels a
/// thread: sums, the finish (batchnorm_finish_kernel), then the normalise or
/// dx pass; in one launch where batchnorm_fused takes it (BatchNormFused.cuh),
/// else three. Two passes over the tensor each way.
struct NormLastCall {
  int64_t R, C;
  float eps;
  Ref x, scale, bias, mean, var, y, dscale, dbias, dx;
  NormGrad dy;
  float *moments;
  bool forward, relu, accDx;
  Ref residual; // forward: added before the ReLU (batchnorm_add_forward)
};

#include "backends/cuda/kernels/BatchNormFused.cuh" // one cooperative launch

template <int V> void batchnorm_last(const NormLastCall &n) {
  if (batchnorm_fused<V>(n)) {
    AUTODDL_CUDA_CHECK_LAUNCH();
    return;
  }
  // Each pass a wave of its own kernel's blocks (the finish reads the sums'
  // grid g; the second pass's rows need not match it).
  static const int sumsFwd =
                       resident_blocks(batchnorm_sums_last_kernel<V, false>),
                   sumsBwd =
                       resident_blocks(batchnorm_sums_last_kernel<V, true>),
                   apply = resident_blocks(batchnorm_apply_last_kernel<V>),
                   dxPass = resident_blocks(batchnorm_dx_last_kernel<V>);
  const int lanes = last_lanes(n.C, V);
  const int64_t tile = int64_t(lanes) * V;
  const NormGrid g =
      norm_grid_last(n.R, n.C, tile, n.forward ? sumsFwd : sumsBwd);
  const NormGrid g2 =
      norm_grid_last(n.R, n.C, tile, n.forward ? apply : dxPass);
  // Scratch slot 0 (Reduce.cu's partials; both live within one call only).
  auto *part = static_cast<float *>(scratch(
      0, (n.C * g.splits * kNormSums + n.C * 4) * int64_t(sizeof(float))));
  float *stats = part + n.C * g.splits * kNormSums;
  const dim3 grid(unsigned(g.splits), unsigned((n.C + tile - 1) / tile));
  if (n.forward)
    batchnorm_sums_last_kernel<V, false>
        <<<grid, kNormThreads, 0, compute_stream()>>>(g, lanes, n.x, n.dy,
                                                      part);
  else
    batchnorm_sums_last_kernel<V, true>
        <<<grid, kNormThreads, 0, compute_stream()>>>(g, lanes, n.x, n.dy,
                                                      part);
  launch_batchnorm_finish(g, n.eps, n.x, n.mean, n.var, part, !n.forward,
                          n.dscale, n.dbias, stats,
                          n.forward ? n.moments : nullptr);
  const dim3 grid2(unsigned(g2.splits), grid.y);
  if (n.forward)
    batchnorm_apply_last_kernel<V>
        <<<grid2, kNormThreads, 0, compute_stream()>>>(
            g2, lanes, n.x, n.scale, n.bias, stats, n.relu, n.residual, n.y);
  else if (n.dx.p)
    batchnorm_dx_last_kernel<V><<<grid2, kNormThreads, 0, compute_stream()>>>(
        g2, lanes, n.x, n.scale, bool(n.mean.p), stats, n.dy, n.dx, n.accDx);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

// ---- Reductions over middle axes: the channels-last global pool
// -------------- ReduceMean over H, W of [N, H, W, C] (GlobalAveragePool stored
// NHWC) as x [A, B, Cc] -> y [A, Cc]: a thread an (a, c), consecutive threads
// on consecutive c, so every load is coalesced and there are A * Cc threads
// (the generic reduce_kernel gives a warp each of the A * Cc groups, whose 49
// values lie C apart: a sector a value, and its lanes index them with 64-bit
// divisions).

/// y[a, c] = post * the sum (or max) over b of x[a, b, c].
__global__ void reduce_middle_kernel(int64_t A, int64_t B, int64_t Cc, Ref x,
                                     Ref y, bool max, float post) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < A * Cc;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t a = j / Cc, base = a * B * Cc + (j - a * Cc);
    float v = max ? -INFINITY : 0.0f;
#pragma unroll 4
    for (int64_t b = 0; b < B; ++b) {
      const float f = ld(x, base + b * Cc);
      v = max ? fmaxf(v, f) : v + f;
    }
    put(y, j, v * post, false);
  }
}

/// dx[a, b, c] += dy[a, c] * scale (= without acc): a sum's or mean's
/// backward.
__global__ void broadcast_middle_kernel(int64_t A, int64_t B, int64_t Cc,
                                        Ref dy, Ref dx, float scale, bool acc) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < A * Cc;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t a = j / Cc, base = a * B * Cc + (j - a * Cc);
    const float g = ld(dy, j) * scale;
#pragma unroll 4
    for (int64_t b = 0; b < B; ++b)
      put(dx, base + b * Cc, g, acc);
  }
}

/// A Reduce over one run of consecutive axes with at least 32 values after
/// them (a warp's width of coalesced channels) and at least 16 threads a
/// reduced value (a long reduction over few groups is the warp-a-group
/// reduce_kernel's) as [A, B, Cc]; false for others.
bool middle_view(const ok::Primitive &p, int64_t (&abc)[3]) {
  const Dims &xs = p.in[0];
  const unsigned red = axesMask(p.axes);
  if (red == 0)
    return false;
  const int lo = __builtin_ctz(red), hi = 31 - __builtin_clz(red);
  if (red != ((2u << hi) - (1u << lo)))
    return false;
  abc[0] = abc[1] = abc[2] = 1;
  for (int d = 0; d < int(xs.size()); ++d)
    abc[d < lo ? 0 : d <= hi ? 1 : 2] *= xs[size_t(d)];
  return abc[2] >= 32 && abc[0] * abc[2] >= 16 * abc[1];
}

/// The forward of such a Reduce (y overwritten); false: not one.
bool reduce_middle(const ok::Primitive &p, PrimRef x, PrimRef y) {
  int64_t v[3];
  if (!middle_view(p, v) || v[0] * v[1] * v[2] == 0)
    return false;
  reduce_middle_kernel<<<grid_for(v[0] * v[2], 256), 256, 0,
                         compute_stream()>>>(v[0], v[1], v[2], ref(x), ref(y),
                                             p.reduce == ok::Reduce::Max,
                                             meanFactor(p));
  AUTODDL_CUDA_CHECK_LAUNCH();
  return true;
}

/// The backward of such a Reduce over a sum or mean (dx accumulated, or
/// stored without acc); false: not one.
bool broadcast_middle(const ok::Primitive &p, PrimRef dy, PrimRef dx,
                      bool acc) {
  int64_t v[3];
  if (p.reduce == ok::Reduce::Max || !middle_view(p, v) ||
      v[0] * v[1] * v[2] == 0)
    return false;
  broadcast_middle_kernel<<<grid_for(v[0] * v[2], 256), 256, 0,
                            compute_stream()>>>(v[0], v[1], v[2], ref(dy),
                                                ref(dx), meanFactor(p), acc);
  AUTODDL_CUDA_CHECK_LAUNCH();
  return true;
}
