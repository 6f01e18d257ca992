// The image primitives on the GPU: pools with any padding (Kind::Pool) and
// BatchNormalization (Kind::BatchNorm), the formulas of
// backends/common/OnnxImage.h, on NCHW or channels-last storage
// (Primitive::channelsLast; its pools, batch norm and global pool are
// PrimitiveImageLast.cuh's pack kernels). A part of Primitive.cu, split off
// for its size: included inside its anonymous namespace, after Ref, ld, put
// and ref. Deterministic: every output element has one writer (the pool's
// backward gathers over the windows reading an input; no atomics), sums in
// fp32 in a fixed order.

constexpr int kPoolAxes = 3; // spatial axes the pool kernels index

/// A pool's window (OnnxImage.h PoolWindow) by value for a kernel. Offsets
/// within a plane in 32 bits (pool() checks a plane's size): the kernels'
/// index arithmetic is most of their work, 64-bit division the dearest.
struct PoolArgs {
  int r = 0, max = 1, countPad = 0;
  int kernel[kPoolAxes] = {}, stride[kPoolAxes] = {}, dil[kPoolAxes] = {},
      pad[kPoolAxes] = {}, padEnd[kPoolAxes] = {}, in[kPoolAxes] = {},
      out[kPoolAxes] = {};
  int inPlane = 1, outPlane = 1, kcount = 1;
  int64_t channels = 0; // channels-last: C (a plane's values C apart); 0: NCHW
};

PoolArgs poolArgs(const ok::PoolWindow &w, int64_t channelsLast) {
  PoolArgs a;
  a.channels = channelsLast;
  a.r = int(w.in.size());
  a.max = w.max;
  a.countPad = w.countPad;
  for (int d = 0; d < a.r; ++d) {
    a.kernel[d] = int(w.kernel[d]);
    a.stride[d] = int(w.stride[d]);
    a.dil[d] = int(w.dilation[d]);
    a.pad[d] = int(w.pad[d]);
    a.padEnd[d] = int(w.padEnd[d]);
    a.in[d] = int(w.in[d]);
    a.out[d] = int(w.out[d]);
    a.inPlane *= a.in[d];
    a.outPlane *= a.out[d];
    a.kcount *= a.kernel[d];
  }
  return a;
}

/// Output position o's window (within a plane, its values at base + offset *
/// step), as OnnxImage.h forWindow: reduces over its in-bounds inputs;
/// `padded` gets count_include_pad's divisor, `first` (max) the kernel tap
/// (0 .. kcount - 1) of the first maximum (-1: none).
__device__ float poolWindow(const PoolArgs &a, const Ref &x, int64_t base,
                            int64_t step, int o, int *padded, int *first) {
  int at[kPoolAxes];
  for (int d = a.r - 1; d >= 0; --d) {
    at[d] = o % a.out[d];
    o /= a.out[d];
  }
  float acc = a.max ? -INFINITY : 0.0f;
  int n = 0, inPad = 0, best = -1;
  for (int k = 0; k < a.kcount; ++k) {
    int rest = k, off = 0;
    bool inside = true, inPadded = true;
    int idx[kPoolAxes];
    for (int d = a.r - 1; d >= 0; --d) {
      idx[d] = at[d] * a.stride[d] - a.pad[d] + (rest % a.kernel[d]) * a.dil[d];
      rest /= a.kernel[d];
    }
    for (int d = 0; d < a.r; ++d) {
      inside = inside && idx[d] >= 0 && idx[d] < a.in[d];
      inPadded =
          inPadded && idx[d] >= -a.pad[d] && idx[d] < a.in[d] + a.padEnd[d];
      off = off * a.in[d] + idx[d];
    }
    inPad += inPadded;
    if (!inside)
      continue;
    const float v = ld(x, base + int64_t(off) * step);
    ++n;
    if (!a.max)
      acc += v;
    else if (best < 0 || v > acc) {
      acc = v;
      best = k;
    }
  }
  *padded = a.countPad ? inPad : n;
  *first = best;
  return acc;
}

/// Element j of a tensor of planes of `plane` values: its plane (NCHW: n * C
/// + c; channels-last [N, plane, C]: n, with c apart) and its offset in it.
struct PlaneAt {
  int64_t plane, c;
  int at;
};
__device__ PlaneAt plane_at(const PoolArgs &a, int64_t j, int64_t plane) {
  if (!a.channels)
    return {j / plane, 0, int(j % plane)};
  const int64_t rest = j / a.channels;
  return {rest / plane, j % a.channels, int(rest % plane)};
}
/// Where plane q's values start in a tensor of `plane`-value planes, and the
/// distance between them.
__device__ int64_t plane_base(const PoolArgs &a, const PlaneAt &q,
                              int64_t plane) {
  return a.channels ? q.plane * plane * a.channels + q.c : q.plane * plane;
}
__device__ int64_t plane_step(const PoolArgs &a) {
  return a.channels ? a.channels : 1;
}

// Grid-stride loops: grid_for caps the grid at 16 blocks an SM.
__global__ void pool_forward_kernel(PoolArgs a, int64_t total, Ref x, Ref y) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const PlaneAt o = plane_at(a, j, a.outPlane);
    int count, first;
    const float v = poolWindow(a, x, plane_base(a, o, a.inPlane), plane_step(a),
                               o.at, &count, &first);
    put(y, j, a.max ? v : v / float(count > 0 ? count : 1), false);
  }
}

/// A max pool's backward, first pass: each output's first maximum as its
/// window's tap (kNoTap, PoolLastGrid.h: none), so the gather below reads
/// one byte a window instead of the window (ResNet's 3x3/2 max pool: each
/// input is in up to four).
__global__ void pool_taps_kernel(PoolArgs a, int64_t total, Ref x,
                                 uint8_t *taps) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x) {
    const PlaneAt o = plane_at(a, j, a.outPlane);
    int count, first;
    poolWindow(a, x, plane_base(a, o, a.inPlane), plane_step(a), o.at, &count,
               &first);
    taps[j] = first < 0 ? kNoTap : uint8_t(first);
  }
}

/// dx[j] += the gradient of every window reading input j (= without acc):
/// its share of a mean, or all of a max it is the first of (`taps`:
/// pool_taps_kernel's, else the window recomputed).
__device__ void pool_backward_at(const PoolArgs &a, int64_t j, const Ref &x,
                                 const Ref &dy, const uint8_t *taps,
                                 const Ref &dx, bool acc) {
  const PlaneAt in = plane_at(a, j, a.inPlane);
  const int64_t inBase = plane_base(a, in, a.inPlane),
                outBase = plane_base(a, in, a.outPlane), step = plane_step(a);
  int at[kPoolAxes], rest = in.at;
  for (int d = a.r - 1; d >= 0; --d) {
    at[d] = rest % a.in[d];
    rest /= a.in[d];
  }
  float g = 0.0f;
  for (int k = 0; k < a.kcount; ++k) {
    int kr = k, o = 0;
    bool hit = true;
    int od[kPoolAxes];
    // The output whose kernel position k lands on this input, if any.
    for (int d = a.r - 1; d >= 0; --d) {
      const int t = at[d] + a.pad[d] - (kr % a.kernel[d]) * a.dil[d];
      kr /= a.kernel[d];
      od[d] = t / a.stride[d];
      hit = hit && t >= 0 && t % a.stride[d] == 0 && od[d] < a.out[d];
    }
    if (!hit)
      continue;
    for (int d = 0; d < a.r; ++d)
      o = o * a.out[d] + od[d];
    const int64_t at_o = outBase + int64_t(o) * step; // dy's, and taps'
    if (taps) {
      if (taps[at_o] == k)
        g += ld(dy, at_o);
      continue;
    }
    int count, first;
    poolWindow(a, x, inBase, step, o, &count, &first);
    const float up = ld(dy, at_o);
    if (!a.max)
      g += up / float(count > 0 ? count : 1);
    else if (first == k) // this input is tap k of window o
      g += up;
  }
  put(dx, j, g, acc);
}

/// One thread an input element (grid-stride).
__global__ void pool_backward_kernel(PoolArgs a, int64_t total, Ref x, Ref dy,
                                     const uint8_t *taps, Ref dx, bool acc) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
       j += int64_t(gridDim.x) * blockDim.x)
    pool_backward_at(a, j, x, dy, taps, dx, acc);
}

// ---- BatchNormalization: a channel over several blocks ----------------------
// Each launch is a grid of (splits, C) blocks, block (j, c) owning rows
// [j*rows, (j+1)*rows) of the batch for channel c (a row: one sample's S
// values of the channel, contiguous in NCHW), so a 64-channel layer of a
// large batch still fills the GPU. Three passes each way: partial sums per
// block, a per-channel finish, then the elementwise pass. The partials are
// sums shifted by the channel's first value (one pass, no cancellation for
// data near its mean) and are added in a fixed order: deterministic.

constexpr int kNormThreads = 256;
constexpr int kNormSums = 4; // Σ(x-k), Σ(x-k)², Σg, Σg(x-k)

struct NormGrid {
  int64_t N, C, S, splits, rows; // rows: batch rows a block owns
};

NormGrid norm_grid(int64_t N, int64_t C, int64_t S) {
  // About 8 blocks an SM in all, each at least 4,096 values.
  const int64_t want =
      std::max<int64_t>(1, int64_t(sm_count()) * 8 / std::max<int64_t>(1, C));
  const int64_t byWork = std::max<int64_t>(1, N * S / 4096);
  const int64_t splits = std::max<int64_t>(1, std::min({want, byWork, N}));
  const int64_t rows = (N + splits - 1) / splits;
  return {N, C, S, (N + rows - 1) / rows, rows};
}

/// Calls f(k) for each element of channel blockIdx.y in block blockIdx.x's
/// rows, consecutive threads on consecutive values.
template <class F>
__device__ __forceinline__ void for_block_values(const NormGrid &g, F f) {
  const int64_t c = blockIdx.y, n0 = int64_t(blockIdx.x) * g.rows;
  const int64_t rows = min(g.rows, g.N - n0);
  const uint32_t S = uint32_t(g.S), count = uint32_t(rows * g.S);
  for (uint32_t i = threadIdx.x; i < count; i += blockDim.x) {
    const uint32_t r = i / S;
    f(((n0 + r) * g.C + c) * g.S + (i - r * S));
  }
}

/// The gradient of a batch norm's output: dy, or where a ReLU after it runs
/// in its passes (batchnorm_relu_*), the ReLU's output gradient dy where its
/// output `relu` is positive, else 0 (relu_backward's mask: the same values).
struct NormGrad {
  Ref dy, relu;
  __device__ float at(int64_t e) const {
    return relu.p && !(ld(relu, e) > 0.0f) ? 0.0f : ld(dy, e);
  }
  /// V of them from element e (ld_pack's access).
  template <int V> __device__ void pack(int64_t e, float (&g)[V]) const;
};

/// Adds element e to the shifted sums s (kNormSums; no dy: the first two).
__device__ __forceinline__ void
add_shifted(float *s, const Ref &x, const NormGrad &dy, int64_t e, float k) {
  const float d = ld(x, e) - k;
  s[0] += d;
  s[1] += d * d;
  if (dy.dy.p) {
    const float gv = dy.at(e);
    s[2] += gv;
    s[3] += gv * d;
  }
}

/// Block (j, c)'s shifted sums into part[(c * kNormSums + q) * splits + j]
/// (no dy: the last two 0): a channel's partials of one sum contiguous, for
/// the finish's coalesced reads.
__global__ void batchnorm_sums_kernel(NormGrid g, Ref x, NormGrad dy,
                                      float *part) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.y;
  const float k = ld(x, c * g.S);
  float s[kNormSums] = {};
  for_block_values(g, [&](int64_t e) { add_shifted(s, x, dy, e, k); });
  for (int q = 0; q < kNormSums; ++q) {
    const float v = block_sum(s[q], scratch);
    if (threadIdx.x == 0)
      part[(c * kNormSums + q) * g.splits + blockIdx.x] = v;
  }
}

/// Channel c's stats[c] = {mean, 1/sqrt(var+eps), Σg, Σg·x̂} from its shifted
/// sums s (kNormSums, added over the splits): the batch's statistics, or the
/// given mean/var (then Σg and Σg·x̂ from the shifted sums all the same); the
/// backward accumulates dscale (Σg·x̂) and dbias (Σg). `moments` (a forward
/// on batch statistics; else null): the micro-batch's mean and unbiased
/// variance for the running statistics, moments[c] and moments[C + c]
/// (OnnxImage.h batchnorm_moments). One thread a channel.
__device__ void finish_channel(const NormGrid &g, float eps, const Ref &x,
                               const Ref &mean, const Ref &var,
                               const float (&s)[kNormSums], bool backward,
                               const Ref &dscale, const Ref &dbias,
                               float *stats, float *moments, int64_t c) {
  const float M = float(g.N * g.S > 0 ? g.N * g.S : 1), k = ld(x, c * g.S);
  float m, inv;
  if (mean.p) {
    m = ld(mean, c);
    inv = rsqrtf(ld(var, c) + eps);
  } else {
    const float d = s[0] / M; // mean - k
    const float biased = fmaxf(s[1] / M - d * d, 0.0f);
    m = k + d;
    inv = rsqrtf(biased + eps);
    if (moments) {
      moments[c] = m;
      moments[g.C + c] = M > 1 ? biased * M / (M - 1) : biased;
    }
  }
  // Σg(x - m) = Σg(x - k) - (m - k) Σg
  const float sgx = backward ? (s[3] - (m - k) * s[2]) * inv : 0.0f;
  stats[c * 4 + 0] = m;
  stats[c * 4 + 1] = inv;
  stats[c * 4 + 2] = s[2];
  stats[c * 4 + 3] = sgx;
  if (backward) {
    if (dscale.p)
      put(dscale, c, sgx, true);
    if (dbias.p)
      put(dbias, c, s[2], true);
  }
}

/// finish_channel for channel blockIdx.x from its partials: the block's
/// threads stride over the splits (up to a thousand where the channel is
/// innermost), then a block sum (a fixed order).
__global__ void batchnorm_finish_kernel(NormGrid g, float eps, Ref x, Ref mean,
                                        Ref var, const float *part,
                                        bool backward, Ref dscale, Ref dbias,
                                        float *stats, float *moments) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x;
  float s[kNormSums] = {};
  for (int64_t j = threadIdx.x; j < g.splits; j += blockDim.x)
    for (int q = 0; q < kNormSums; ++q)
      s[q] += part[(c * kNormSums + q) * g.splits + j];
  for (int q = 0; q < kNormSums; ++q)
    s[q] = block_sum(s[q], scratch);
  if (threadIdx.x == 0)
    finish_channel(g, eps, x, mean, var, s, backward, dscale, dbias, stats,
                   moments, c);
}

/// The finish of g's partials: a block a channel, as many threads as splits
/// (rounded to warps, at most 256).
void launch_batchnorm_finish(const NormGrid &g, float eps, Ref x, Ref mean,
                             Ref var, const float *part, bool backward,
                             Ref dscale, Ref dbias, float *stats,
                             float *moments) {
  const int threads = int(std::min<int64_t>(256, (g.splits + 31) / 32 * 32));
  batchnorm_finish_kernel<<<unsigned(g.C), threads, 0, compute_stream()>>>(
      g, eps, x, mean, var, part, backward, dscale, dbias, stats, moments);
}

/// running = momentum running + (1 - momentum) batch for each of `slots`
/// micro-batches' moments in order (OnnxImage.h batchnorm_running_update);
/// a thread per channel.
__global__ void running_stats_kernel(const float *moments, int64_t slots,
                                     int64_t C, float *mean, float *var,
                                     double momentum) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C)
    return;
  double m = mean[c], v = var[c];
  for (int64_t k = 0; k < slots; ++k) {
    const float *b = moments + k * 2 * C;
    m = double(float(momentum * m + (1 - momentum) * double(b[c])));
    v = double(float(momentum * v + (1 - momentum) * double(b[C + c])));
  }
  mean[c] = float(m);
  var[c] = float(v);
}

/// Forward: y = (x - m) inv scale + bias (+ res where given; then max(y, 0)
/// under `relu`).
__global__ void batchnorm_apply_kernel(NormGrid g, Ref x, Ref scale, Ref bias,
                                       const float *stats, bool relu, Ref res,
                                       Ref y) {
  const int64_t c = blockIdx.y;
  const float m = stats[c * 4], a = ld(scale, c) * stats[c * 4 + 1],
              b = ld(bias, c), lo = relu ? 0.0f : -INFINITY;
  for_block_values(g, [&](int64_t e) {
    const float r = res.p ? ld(res, e) : 0.0f;
    put(y, e, fmaxf((ld(x, e) - m) * a + b + r, lo), false);
  });
}

/// Backward (OnnxImage.h batchnorm_backward): dx += a/M (M g - Σg - x̂ Σg·x̂)
/// on batch statistics, dx += a g on given ones.
__global__ void batchnorm_dx_kernel(NormGrid g, Ref x, Ref scale, bool given,
                                    const float *stats, NormGrad dy, Ref dx,
                                    bool acc) {
  const int64_t c = blockIdx.y;
  const float m = stats[c * 4], inv = stats[c * 4 + 1], sg = stats[c * 4 + 2],
              sgx = stats[c * 4 + 3], a = ld(scale, c) * inv,
              M = float(g.N * g.S > 0 ? g.N * g.S : 1);
  for_block_values(g, [&](int64_t e) {
    const float gv = dy.at(e);
    const float xhat = (ld(x, e) - m) * inv;
    put(dx, e, given ? a * gv : a / M * (M * gv - sg - xhat * sgx), acc);
  });
}

#include "backends/cuda/kernels/PrimitiveImageLast.cuh" // channels-last

/// A pool's forward (y) or backward (dx added to, or stored without acc).
void pool(const ok::Primitive &p, PrimRef x, PrimRef y, PrimRef dy, PrimRef dx,
          bool forward, bool acc = true) {
  if (p.pool.in.size() > size_t(kPoolAxes))
    fail(p, "a pool over more than 3 spatial axes");
  int64_t padded = 1; // the padded plane bounds every in-plane offset
  for (size_t d = 0; d < p.pool.in.size(); ++d)
    padded *= p.pool.pad[d] + p.pool.in[d] + p.pool.padEnd[d] +
              p.pool.kernel[d] * p.pool.dilation[d];
  if (padded > int64_t(INT32_MAX))
    fail(p, "a pool plane of 2^31 values or more");
  const PoolArgs a = poolArgs(p.pool, p.channelsLast ? p.in[0][1] : 0);
  const int64_t planes = p.in[0][0] * p.in[0][1];
  // Channels-last: the pack kernels, their items indexed in 32 bits.
  if (p.channelsLast &&
      planes * std::max(a.inPlane, a.outPlane) < (int64_t(1) << 30))
    return pool_last(a, p.in[0][0], x, y, dy, dx, forward, acc);
  if (forward) {
    const int64_t n = planes * a.outPlane;
    if (n > 0)
      pool_forward_kernel<<<grid_for(n, 256), 256, 0, compute_stream()>>>(
          a, n, ref(x), ref(y));
  } else {
    const int64_t n = planes * a.inPlane, outs = planes * a.outPlane;
    if (!dx.p || n == 0)
      return;
    // A max pool's taps: scratch slot 0 (within this call only, as Reduce's).
    uint8_t *taps = nullptr;
    if (a.max && a.kcount < kNoTap && outs > 0) {
      taps = static_cast<uint8_t *>(scratch(0, outs));
      pool_taps_kernel<<<grid_for(outs, 256), 256, 0, compute_stream()>>>(
          a, outs, ref(x), taps);
    }
    pool_backward_kernel<<<grid_for(n, 256), 256, 0, compute_stream()>>>(
        a, n, ref(x), ref(dy), taps, ref(dx), acc);
  }
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// What a batch norm call does beside the norm. `moments` (forward only;
/// null: none): the micro-batch's mean and unbiased variance, 2C floats, for
/// the running statistics. `relu`: a ReLU after the norm runs in its passes,
/// y is its output (written forward, its mask read backward) and dy its
/// output gradient. `storeDx`: x's gradient is stored, not added (its first
/// writer: codegen's stored gradients, never zeroed). `residual` (forward):
/// added to the norm before the ReLU, y the sum's (batchnorm_add_forward).
struct NormPasses {
  float *moments = nullptr;
  bool relu = false, storeDx = false;
  PrimRef residual = nullptr;
};

void batchnorm(const ok::Primitive &p, const std::vector<PrimRef> &x, PrimRef y,
               PrimRef dy, const std::vector<PrimRef> &dx, bool forward,
               NormPasses o = {}) {
  float *moments = o.moments;
  const bool relu = o.relu;
  const Dims &xs = p.in[0];
  const int64_t N = xs[0], C = xs[1],
                S = ok::numel(xs) / std::max<int64_t>(1, N * C);
  const Ref mean = p.batchStats ? Ref() : ref(x[3]),
            var = p.batchStats ? Ref() : ref(x[4]);
  const float eps = float(p.epsilon);
  if (N * C * S == 0 || (!forward && !dx[0].p && !dx[1].p && !dx[2].p))
    return;
  if (N * S > int64_t(UINT32_MAX))
    fail(p, "more than 2^32 values in one channel");
  const NormGrad dyRef =
      forward ? NormGrad{} : NormGrad{ref(dy), relu ? ref(y) : Ref()};
  // The channel innermost: channels-last storage, or [N, C] (S = 1); its
  // passes 16 bytes a thread where every tensor allows.
  if (p.channelsLast || S == 1) {
    const NormLastCall n{N * S,
                         C,
                         eps,
                         ref(x[0]),
                         ref(x[1]),
                         ref(x[2]),
                         mean,
                         var,
                         ref(y),
                         forward ? Ref() : ref(dx[1]),
                         forward ? Ref() : ref(dx[2]),
                         forward ? Ref() : ref(dx[0]),
                         dyRef,
                         moments,
                         forward,
                         relu,
                         !o.storeDx,
                         ref(o.residual)};
    if (forward ? packs_fit(C, {x[0], y, o.residual})
                : packs_fit(C, {x[0], dy, dx[0], relu ? y : PrimRef()}))
      return batchnorm_last<kPack<act_t>>(n);
    return batchnorm_last<1>(n);
  }
  const NormGrid g = norm_grid(N, C, S);
  // Scratch slot 0 (Reduce.cu's partials; both live within one call only).
  auto *part = static_cast<float *>(
      scratch(0, (C * g.splits * kNormSums + C * 4) * int64_t(sizeof(float))));
  float *stats = part + C * g.splits * kNormSums;
  const dim3 grid(unsigned(g.splits), unsigned(C));
  batchnorm_sums_kernel<<<grid, kNormThreads, 0, compute_stream()>>>(
      g, ref(x[0]), dyRef, part);
  launch_batchnorm_finish(g, eps, ref(x[0]), mean, var, part, !forward,
                          forward ? Ref() : ref(dx[1]),
                          forward ? Ref() : ref(dx[2]), stats,
                          forward ? moments : nullptr);
  if (forward)
    batchnorm_apply_kernel<<<grid, kNormThreads, 0, compute_stream()>>>(
        g, ref(x[0]), ref(x[1]), ref(x[2]), stats, relu, ref(o.residual),
        ref(y));
  else if (dx[0].p)
    batchnorm_dx_kernel<<<grid, kNormThreads, 0, compute_stream()>>>(
        g, ref(x[0]), ref(x[1]), bool(mean.p), stats, dyRef, ref(dx[0]),
        !o.storeDx);
  AUTODDL_CUDA_CHECK_LAUNCH();
}
