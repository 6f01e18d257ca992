// The image primitives on the GPU: pools with any padding (Kind::Pool) and
// BatchNormalization (Kind::BatchNorm), the formulas of
// backends/common/OnnxImage.h. A part of Primitive.cu, split off for its
// size: included inside its anonymous namespace, after Ref, ld, put and
// ref. Deterministic: every output element has one writer (the pool's
// backward gathers over the windows reading an input; no atomics), sums in
// fp32 in a fixed order.

constexpr int kPoolAxes = 3; // spatial axes the pool kernels index

/// A pool's window (OnnxImage.h PoolWindow) by value for a kernel.
struct PoolArgs {
  int r = 0, max = 1, countPad = 0;
  int64_t kernel[kPoolAxes] = {}, stride[kPoolAxes] = {}, dil[kPoolAxes] = {},
          pad[kPoolAxes] = {}, padEnd[kPoolAxes] = {}, in[kPoolAxes] = {},
          out[kPoolAxes] = {};
  int64_t inPlane = 1, outPlane = 1, kcount = 1;
};

PoolArgs poolArgs(const ok::PoolWindow &w) {
  PoolArgs a;
  a.r = int(w.in.size());
  a.max = w.max;
  a.countPad = w.countPad;
  for (int d = 0; d < a.r; ++d) {
    a.kernel[d] = w.kernel[d];
    a.stride[d] = w.stride[d];
    a.dil[d] = w.dilation[d];
    a.pad[d] = w.pad[d];
    a.padEnd[d] = w.padEnd[d];
    a.in[d] = w.in[d];
    a.out[d] = w.out[d];
    a.inPlane *= w.in[d];
    a.outPlane *= w.out[d];
    a.kcount *= w.kernel[d];
  }
  return a;
}

/// Output position o's window (within a plane), as OnnxImage.h forWindow:
/// reduces over its in-bounds inputs; `padded` gets count_include_pad's
/// divisor, `first` (max) the offset of the first maximum (-1: none).
__device__ float poolWindow(const PoolArgs &a, const Ref &x, int64_t base,
                            int64_t o, int64_t *padded, int64_t *first) {
  int64_t at[kPoolAxes];
  for (int d = a.r - 1; d >= 0; --d) {
    at[d] = o % a.out[d];
    o /= a.out[d];
  }
  float acc = a.max ? -INFINITY : 0.0f;
  int64_t n = 0, inPad = 0, best = -1;
  for (int64_t k = 0; k < a.kcount; ++k) {
    int64_t rest = k, off = 0;
    bool inside = true, inPadded = true;
    int64_t idx[kPoolAxes];
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
    const float v = ld(x, base + off);
    ++n;
    if (!a.max)
      acc += v;
    else if (best < 0 || v > acc) {
      acc = v;
      best = off;
    }
  }
  *padded = a.countPad ? inPad : n;
  *first = best;
  return acc;
}

__global__ void pool_forward_kernel(PoolArgs a, int64_t total, Ref x, Ref y) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total)
    return;
  const int64_t p = j / a.outPlane, o = j % a.outPlane;
  int64_t count, first;
  const float v = poolWindow(a, x, p * a.inPlane, o, &count, &first);
  put(y, j, a.max ? v : v / float(count > 0 ? count : 1), false);
}

/// dx[i] += the gradient of every window reading input i (one thread an
/// input element): its share of a mean, or all of a max it is the first of.
__global__ void pool_backward_kernel(PoolArgs a, int64_t total, Ref x, Ref dy,
                                     Ref dx) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total)
    return;
  const int64_t p = j / a.inPlane;
  int64_t at[kPoolAxes], rest = j % a.inPlane;
  const int64_t self = rest;
  for (int d = a.r - 1; d >= 0; --d) {
    at[d] = rest % a.in[d];
    rest /= a.in[d];
  }
  float g = 0.0f;
  for (int64_t k = 0; k < a.kcount; ++k) {
    int64_t kr = k, o = 0;
    bool hit = true;
    int64_t od[kPoolAxes];
    // The output whose kernel position k lands on this input, if any.
    for (int d = a.r - 1; d >= 0; --d) {
      const int64_t t = at[d] + a.pad[d] - (kr % a.kernel[d]) * a.dil[d];
      kr /= a.kernel[d];
      od[d] = t / a.stride[d];
      hit = hit && t >= 0 && t % a.stride[d] == 0 && od[d] < a.out[d];
    }
    if (!hit)
      continue;
    for (int d = 0; d < a.r; ++d)
      o = o * a.out[d] + od[d];
    int64_t count, first;
    poolWindow(a, x, p * a.inPlane, o, &count, &first);
    const float up = ld(dy, p * a.outPlane + o);
    if (!a.max)
      g += up / float(count > 0 ? count : 1);
    else if (first == self)
      g += up;
  }
  put(dx, j, g, true);
}

void pool(const ok::Primitive &p, PrimRef x, PrimRef y, PrimRef dy, PrimRef dx,
          bool forward) {
  if (p.pool.in.size() > size_t(kPoolAxes))
    fail(p, "a pool over more than 3 spatial axes");
  const PoolArgs a = poolArgs(p.pool);
  const int64_t planes = p.in[0][0] * p.in[0][1];
  if (forward) {
    const int64_t n = planes * a.outPlane;
    if (n > 0)
      pool_forward_kernel<<<grid_for(n, 256), 256, 0, compute_stream()>>>(
          a, n, ref(x), ref(y));
  } else {
    const int64_t n = planes * a.inPlane;
    if (!dx.p || n == 0)
      return;
    pool_backward_kernel<<<grid_for(n, 256), 256, 0, compute_stream()>>>(
        a, n, ref(x), ref(dy), ref(dx));
  }
  AUTODDL_CUDA_CHECK_LAUNCH();
}

// ---- BatchNormalization: one block a channel --------------------------------

constexpr int kNormThreads = 512;

/// Channel c's mean and 1 / sqrt(var + eps): the batch's over (N, S) in two
/// passes, or the given ones.
__device__ void channelStats(const Ref &x, int64_t N, int64_t C, int64_t S,
                             int64_t c, const Ref &mean, const Ref &var,
                             float eps, float *scratch, float *m, float *inv) {
  if (mean.p) {
    *m = ld(mean, c);
    *inv = rsqrtf(ld(var, c) + eps);
    return;
  }
  const int64_t M = N * S;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x)
    s += ld(x, ((i / S) * C + c) * S + i % S);
  const float mu = block_sum(s, scratch) / float(M > 0 ? M : 1);
  float q = 0.0f;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const float d = ld(x, ((i / S) * C + c) * S + i % S) - mu;
    q += d * d;
  }
  *m = mu;
  *inv = rsqrtf(block_sum(q, scratch) / float(M > 0 ? M : 1) + eps);
}

__global__ void batchnorm_forward_kernel(int64_t N, int64_t C, int64_t S,
                                         float eps, Ref x, Ref scale, Ref bias,
                                         Ref mean, Ref var, Ref y) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x;
  float m, inv;
  channelStats(x, N, C, S, c, mean, var, eps, scratch, &m, &inv);
  const float a = ld(scale, c) * inv, b = ld(bias, c);
  for (int64_t i = threadIdx.x; i < N * S; i += blockDim.x) {
    const int64_t k = ((i / S) * C + c) * S + i % S;
    put(y, k, (ld(x, k) - m) * a + b, false);
  }
}

/// OnnxImage.h batchnorm_backward: dscale, dbias and dx accumulate.
__global__ void batchnorm_backward_kernel(int64_t N, int64_t C, int64_t S,
                                          float eps, Ref x, Ref scale, Ref mean,
                                          Ref var, Ref dy, Ref dx, Ref dscale,
                                          Ref dbias) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x, M = N * S;
  float m, inv;
  channelStats(x, N, C, S, c, mean, var, eps, scratch, &m, &inv);
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const int64_t k = ((i / S) * C + c) * S + i % S;
    const float g = ld(dy, k);
    sg += g;
    sgx += g * (ld(x, k) - m) * inv;
  }
  sg = block_sum(sg, scratch);
  sgx = block_sum(sgx, scratch);
  if (threadIdx.x == 0) {
    if (dscale.p)
      put(dscale, c, sgx, true);
    if (dbias.p)
      put(dbias, c, sg, true);
  }
  if (!dx.p)
    return;
  const float a = ld(scale, c) * inv, Mf = float(M > 0 ? M : 1);
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const int64_t k = ((i / S) * C + c) * S + i % S;
    const float g = ld(dy, k);
    const float xhat = (ld(x, k) - m) * inv;
    put(dx, k, mean.p ? a * g : a / Mf * (Mf * g - sg - xhat * sgx), true);
  }
}

void batchnorm(const ok::Primitive &p, const std::vector<PrimRef> &x, PrimRef y,
               PrimRef dy, const std::vector<PrimRef> &dx, bool forward) {
  const Dims &xs = p.in[0];
  const int64_t N = xs[0], C = xs[1],
                S = ok::numel(xs) / std::max<int64_t>(1, N * C);
  const Ref mean = p.batchStats ? Ref() : ref(x[3]),
            var = p.batchStats ? Ref() : ref(x[4]);
  const float eps = float(p.epsilon);
  if (C == 0)
    return;
  if (forward)
    batchnorm_forward_kernel<<<unsigned(C), kNormThreads, 0,
                               compute_stream()>>>(
        N, C, S, eps, ref(x[0]), ref(x[1]), ref(x[2]), mean, var, ref(y));
  else
    batchnorm_backward_kernel<<<unsigned(C), kNormThreads, 0,
                                compute_stream()>>>(
        N, C, S, eps, ref(x[0]), ref(x[1]), mean, var, ref(dy), ref(dx[0]),
        ref(dx[1]), ref(dx[2]));
  AUTODDL_CUDA_CHECK_LAUNCH();
}
