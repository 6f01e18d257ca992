// The channel-innermost batch norm in one cooperative launch each way: the
// sums pass, the per-channel finish and the normalise (or dx) pass of
// batchnorm_last, separated by two grid barriers instead of kernel
// boundaries. A part of PrimitiveImageLast.cuh (included after NormLastCall;
// Primitive.cu includes <cooperative_groups.h>).
//
// Why: at ResNet-50's 14×14 and 7×7 shapes a pass moves 6-50 MB, a few
// microseconds at HBM speed, so the split form's three launches (the
// finish a block a channel, two dependent gaps) cost as much as the passes:
// 1.4-2.1× the bandwidth floor on an H100
// (bench/results/onnx/2026-12-07-h100-resnet50-gemm-pool/). Here the grid is
// one wave of co-resident blocks (cooperative launch: the driver refuses a
// grid that cannot be), smaller row ranges fill it where rows are few, the
// finish is a warp a channel spread over the whole grid, and the second
// pass re-reads x (and dy) right after the first, in reverse: the rows read
// last come first, from L2 (all of them where they fit).
// Deterministic: the partials are those of the split form, each channel's
// added in a fixed order (lane strides, then a fixed shuffle tree).

namespace cg = cooperative_groups;

/// At most this many row splits: a finish warp's lanes read up to 16
/// partials of each sum.
constexpr int64_t kFusedMaxSplits = 512;
/// Auto (AUTODDL_BATCHNORM unset) runs the fused form where x has at most
/// this many elements (64 MiB of bf16: ResNet-50's 14×14 and 7×7 norms and
/// 128 channels at 28×28), where the split form's launches cost the most.
constexpr int64_t kFusedAutoElems = int64_t(1) << 25;
/// ... and a forward only above this many: at C512 7×7 (6.4M elements) the
/// fused forward took 0.0340 ms against the split form's 0.0265 on one H100
/// (its backward 0.0459 against 0.0620; bench/results/onnx/
/// 2026-12-07-h100-resnet50-batchnorm-fused/image_ab.txt).
constexpr int64_t kFusedAutoForwardMin = int64_t(1) << 23;

/// finish_channel for channels w, w + warps, ... where w is this warp's
/// index in the grid: lanes stride over the splits, then a warp sum.
__device__ __forceinline__ void finish_by_warps(const NormGrid &g,
                                                const NormLastCall &n,
                                                const float *part,
                                                float *stats) {
  const int lane = threadIdx.x & 31, perBlock = kNormThreads / 32;
  const int64_t warps = int64_t(gridDim.x) * gridDim.y * perBlock;
  const int64_t w = (int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * perBlock +
                    (threadIdx.x >> 5);
  for (int64_t c = w; c < g.C; c += warps) {
    float s[kNormSums] = {};
#pragma unroll 8
    for (int64_t j = lane; j < g.splits; j += 32)
      for (int q = 0; q < kNormSums; ++q)
        s[q] += part[(c * kNormSums + q) * g.splits + j];
    for (int q = 0; q < kNormSums; ++q)
      s[q] = warp_sum(s[q]);
    if (lane == 0)
      finish_channel(g, n.eps, n.x, n.mean, n.var, s, !n.forward, n.dscale,
                     n.dbias, stats, n.forward ? n.moments : nullptr, c);
  }
}

/// Sums (Grad: with dy's), barrier, finish, barrier, then the normalise pass
/// (forward) or the dx pass (backward), all on grid g, each thread's rows
/// last first (those its sums read last, the likeliest still in L2).
template <int V, bool Grad>
__global__ void __launch_bounds__(kNormThreads)
    batchnorm_fused_last_kernel(NormGrid g, int lanes, NormLastCall n,
                                float *part, float *stats) {
  const LastTile t = last_tile<V>(g, lanes);
  last_sums<V, Grad>(g, t, lanes, n.x, n.dy, part);
  cg::grid_group grid = cg::this_grid();
  grid.sync(); // every block's partials written
  finish_by_warps(g, n, part, stats);
  grid.sync(); // every channel's stats written
  if constexpr (Grad) {
    if (n.dx.p)
      last_dx<V, true>(g, t, n.x, n.scale, bool(n.mean.p), stats, n.dy, n.dx,
                       n.accDx);
  } else {
    last_apply<V, true>(g, t, n.x, n.scale, n.bias, stats, n.relu, n.residual,
                        n.y);
  }
}

/// The form channel-innermost batch norms take: AUTODDL_BATCHNORM (auto,
/// split or fused; its values are harness::check_environment's kEnvRules)
/// until batchnorm_use_path sets it.
BatchNormPath &norm_path_switch() {
  static BatchNormPath path = [] {
    const char *e = std::getenv("AUTODDL_BATCHNORM");
    if (e && std::strcmp(e, "split") == 0)
      return BatchNormPath::Split;
    if (e && std::strcmp(e, "fused") == 0)
      return BatchNormPath::Fused;
    return BatchNormPath::Auto;
  }();
  return path;
}

/// Whether the device runs cooperative launches (cached).
bool cooperative_device() {
  static const bool yes = [] {
    int dev = 0, v = 0;
    AUTODDL_CUDA_CHECK(cudaGetDevice(&dev));
    AUTODDL_CUDA_CHECK(
        cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, dev));
    return v != 0;
  }();
  return yes;
}

/// Set once a cooperative launch was refused as too large (a GPU shared
/// through MPS): the split form runs from then on.
inline bool &cooperative_refused() {
  static bool refused = false;
  return refused;
}

/// Runs n in one cooperative launch where the selection asks for it and one
/// wave of co-resident blocks covers its channel tiles; false (nothing
/// launched): run the split form.
template <int V> bool batchnorm_fused(const NormLastCall &n) {
  const BatchNormPath path = norm_path_switch();
  if (path == BatchNormPath::Split ||
      (path == BatchNormPath::Auto &&
       (n.R * n.C > kFusedAutoElems ||
        (n.forward && n.R * n.C <= kFusedAutoForwardMin))) ||
      !cooperative_device() || cooperative_refused())
    return false;
  static const int perSm[2] = {
      resident_blocks(batchnorm_fused_last_kernel<V, false>),
      resident_blocks(batchnorm_fused_last_kernel<V, true>)};
  const int lanes = last_lanes(n.C, V);
  const int64_t tile = int64_t(lanes) * V, tiles = (n.C + tile - 1) / tile;
  const int64_t capacity = int64_t(sm_count()) * perSm[n.forward ? 0 : 1];
  if (tiles > capacity)
    return false;
  // As many splits as co-reside, each thread at least 4 rows (the split
  // form's 128-row minimum left 1.5 blocks an SM at 7×7).
  const int64_t rowLanes = kNormThreads / lanes;
  const int64_t splits =
      std::min({capacity / tiles, std::max<int64_t>(1, n.R / (4 * rowLanes)),
                kFusedMaxSplits});
  const int64_t rows = (n.R + splits - 1) / splits;
  const NormGrid g{n.R, n.C, 1, (n.R + rows - 1) / rows, rows};
  // Scratch slot 0, as the split form's.
  auto *part = static_cast<float *>(scratch(
      0, (n.C * g.splits * kNormSums + n.C * 4) * int64_t(sizeof(float))));
  float *stats = part + n.C * g.splits * kNormSums;
  cudaLaunchAttribute coop[1] = {};
  coop[0].id = cudaLaunchAttributeCooperative;
  coop[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(g.splits), unsigned(tiles));
  cfg.blockDim = dim3(kNormThreads);
  cfg.stream = compute_stream();
  cfg.attrs = coop;
  cfg.numAttrs = 1;
  const cudaError_t e =
      n.forward
          ? cudaLaunchKernelEx(&cfg, batchnorm_fused_last_kernel<V, false>, g,
                               lanes, n, part, stats)
          : cudaLaunchKernelEx(&cfg, batchnorm_fused_last_kernel<V, true>, g,
                               lanes, n, part, stats);
  if (e == cudaErrorCooperativeLaunchTooLarge) { // fewer SMs (MPS): split
    (void)cudaGetLastError();
    // From then on without trying: a refused launch inside a step graph's
    // capture would spoil the capture (the first, eager step learns it).
    cooperative_refused() = true;
    return false;
  }
  AUTODDL_CUDA_CHECK(e);
  return true;
}
