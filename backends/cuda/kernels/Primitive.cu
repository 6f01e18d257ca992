// The ONNX primitives on the GPU (Primitive.h). Every op but MatMul is one of
// four generic kernels over a strided index space of up to kPrimitiveMaxRank
// axes, each operand addressed by a base offset and per-axis strides
// (0 where it is broadcast):
//   map     out[k] (=|+=) f(a[k], b[k], c[k])     elementwise, broadcasting,
//           data movement (expand, transpose, slice, concat) and the
//           injective backwards (their scatter-adds are plain +=);
//   reduce  out[j] (=|+=) sum or max over the reduced axes of f(...): the
//           reductions, and the backward of every broadcast operand (summed
//           in a fixed order: deterministic, no atomics);
//   max-backward and line (softmax / log-softmax along one axis).
// Pools and BatchNormalization have kernels of their own (PrimitiveImage.cuh).
// f is `apply`, whose formulas are OnnxScalar.h's (the CPU kernels' own).
#include "backends/common/OnnxScalar.h"
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Dropout.h"
#include "backends/cuda/kernels/Linear.h"
#include "backends/cuda/kernels/PoolLastGrid.h"
#include "backends/cuda/kernels/Primitive.h"

#include <algorithm>
#include <cmath>
#include <cooperative_groups.h> // the fused batch norm's grid barriers
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace autoddl::rt {
namespace {
using namespace detail;
namespace ok = onnx_kernels;
using ok::Dims;
constexpr int R = kPrimitiveMaxRank;
constexpr int kWarps = 8; // warps a block in the reduce and line kernels

/// The iteration space: a row-major index over `rank` axes.
struct Space {
  int rank = 0;
  int64_t dim[R] = {};
};
/// An operand in that space: element (i_0..i_r) is at base + sum i_d st[d].
struct Ref {
  void *p = nullptr;
  int f32 = 0;
  int64_t base = 0;
  int64_t st[R] = {};
};

enum class Op : int {
  Copy,     // a
  UnaryF,   // u(a)
  BinaryF,  // a b b
  WhereF,   // a ? b : c
  UnaryB,   // c u'(a) given u(a) = b
  Scale,    // a * scale
  BinaryGA, // the gradient c of a b b to a
  BinaryGB, // ... to b
  WhereGX,  // a ? c : 0
  WhereGZ   // a ? 0 : c
};
struct OpArgs {
  Op op = Op::Copy;
  ok::Unary u = ok::Unary::Identity;
  ok::Binary b = ok::Binary::Add;
  float scale = 1.0f;
};

__device__ __forceinline__ float ld(const Ref &r, int64_t off) {
  if (r.f32)
    return static_cast<const float *>(r.p)[off];
  return to_float(static_cast<const act_t *>(r.p)[off]);
}
__device__ __forceinline__ void put(const Ref &r, int64_t off, float v,
                                    bool acc) {
  if (r.f32) {
    float *q = static_cast<float *>(r.p) + off;
    *q = acc ? *q + v : v;
  } else {
    act_t *q = static_cast<act_t *>(r.p) + off;
    *q = from_float<act_t>(acc ? to_float(*q) + v : v);
  }
}

/// f of the operands' values at one element.
__device__ float apply(const OpArgs &o, float a, float b, float c) {
  float ga, gb;
  switch (o.op) {
  case Op::Copy:
    return a;
  case Op::UnaryF:
    return ok::unaryValue(o.u, a);
  case Op::BinaryF:
    return ok::binaryValue(o.b, a, b);
  case Op::WhereF:
    return a != 0.0f ? b : c;
  case Op::UnaryB:
    return c * ok::unaryDerivative(o.u, a, b);
  case Op::Scale:
    return a * o.scale;
  case Op::BinaryGA:
    ok::binaryGrad(o.b, a, b, c, false, &ga, &gb);
    return ga;
  case Op::BinaryGB:
    ok::binaryGrad(o.b, a, b, c, true, &ga, &gb);
    return gb;
  case Op::WhereGX:
    return a != 0.0f ? c : 0.0f;
  case Op::WhereGZ:
    return a != 0.0f ? 0.0f : c;
  }
  return 0.0f;
}

/// Adds the offsets of index `idx` over the axes of s selected by `mask`
/// bit d == want (row-major over those axes) to off[0..3] of refs r[0..3].
__device__ __forceinline__ void offsets(const Space &s, unsigned mask,
                                        unsigned want, int64_t idx,
                                        const Ref *const *r,
                                        int64_t (&off)[4]) {
  for (int d = s.rank - 1; d >= 0; --d) {
    if (((mask >> d) & 1u) != want)
      continue;
    const int64_t i = idx % s.dim[d];
    idx /= s.dim[d];
#pragma unroll
    for (int q = 0; q < 4; ++q)
      off[q] += i * r[q]->st[d];
  }
}

/// flat: every ref is row-major over the space (elementwise on equal
/// shapes, the common case): element k is at base + k, no index arithmetic.
__global__ void map_kernel(Space s, int64_t n, OpArgs o, Ref out, Ref a, Ref b,
                           Ref c, bool acc, bool flat) {
  const Ref *const r[4] = {&out, &a, &b, &c};
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[4] = {out.base, a.base, b.base, c.base};
    if (flat)
      for (int q = 0; q < 4; ++q)
        off[q] += k;
    else
      offsets(s, 0u, 0u, k, r, off);
    const float va = a.p ? ld(a, off[1]) : 0.0f;
    const float vb = b.p ? ld(b, off[2]) : 0.0f;
    const float vc = c.p ? ld(c, off[3]) : 0.0f;
    put(out, off[0], apply(o, va, vb, vc), acc);
  }
}

/// The group of this warp in the reduce, max-backward and line kernels: an
/// element j of the kept axes (mask bit 0) of s, with the four refs' offsets
/// there; at(e, q) is ref q's offset of the group's element e (row-major
/// over the reduced axes, bit 1).
struct Group {
  const Space &s;
  unsigned red;
  const Ref *const *r;
  int64_t j, base[4];
  __device__ Group(const Space &sp, unsigned m, int64_t groups,
                   const Ref *const (&refs)[4])
      : s(sp), red(m), r(refs),
        j(int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) {
    for (int q = 0; q < 4; ++q)
      base[q] = refs[q]->base;
    if (j < groups)
      offsets(s, red, 0u, j, refs, base);
    else
      j = -1; // past the last group: the warp returns
  }
  __device__ int64_t at(int64_t e, int q) const {
    int64_t off = base[q];
    for (int d = s.rank - 1; d >= 0; --d) {
      if (!((red >> d) & 1u))
        continue;
      off += (e % s.dim[d]) * r[q]->st[d];
      e /= s.dim[d];
    }
    return off;
  }
};

/// One warp a group: over the reduced axes the sum (or max) of f, times
/// post, into out (whose strides on the reduced axes are not read).
__global__ void reduce_kernel(Space s, unsigned red, int64_t kept,
                              int64_t count, OpArgs o, Ref out, Ref a, Ref b,
                              Ref c, bool acc, bool max, float post) {
  const Ref *const r[4] = {&out, &a, &b, &c};
  const Group g(s, red, kept, r);
  const int lane = threadIdx.x & 31;
  if (g.j < 0)
    return;
  float v = max ? -INFINITY : 0.0f;
  for (int64_t e = lane; e < count; e += 32) {
    const float f =
        apply(o, a.p ? ld(a, g.at(e, 1)) : 0.0f, b.p ? ld(b, g.at(e, 2)) : 0.0f,
              c.p ? ld(c, g.at(e, 3)) : 0.0f);
    v = max ? fmaxf(v, f) : v + f;
  }
  v = max ? warp_max(v) : warp_sum(v);
  if (lane == 0)
    put(out, g.base[0], v * post, acc);
}

/// ReduceMax's backward: dy[j] to the first element of x's group j equal to
/// the maximum y[j] (as the CPU kernel). Refs: dx and x over x's space, y
/// and dy with 0 strides on the reduced axes.
__global__ void max_backward_kernel(Space s, unsigned red, int64_t kept,
                                    int64_t count, Ref dx, Ref x, Ref y,
                                    Ref dy) {
  const Ref *const r[4] = {&dx, &x, &y, &dy};
  const Group g(s, red, kept, r);
  const int lane = threadIdx.x & 31;
  if (g.j < 0)
    return;
  const float m = ld(y, g.base[2]);
  long long first = count;
  for (int64_t e = lane; e < count && first == count; e += 32)
    if (ld(x, g.at(e, 1)) == m)
      first = e;
#pragma unroll
  for (int w = 16; w > 0; w >>= 1)
    first = min(first, __shfl_xor_sync(0xffffffffu, first, w));
  if (lane == 0 && first < count)
    put(dx, g.at(first, 0), ld(dy, g.base[3]), true);
}

enum class Line : int { SoftmaxF, LogSoftmaxF, SoftmaxB, LogSoftmaxB };

/// One warp per line along the axis `red` selects (forward: x -> y;
/// backward: dx += from y and dy), all four refs over x's space.
__global__ void line_kernel(Space s, unsigned red, int64_t lines, int64_t L,
                            Line mode, Ref x, Ref y, Ref dy, Ref dx) {
  const Ref *const r[4] = {&x, &y, &dy, &dx};
  const Group g(s, red, lines, r);
  const int lane = threadIdx.x & 31;
  if (g.j < 0)
    return;
  auto at = [&g](int64_t l, int q) { return g.at(l, q); };
  if (mode == Line::SoftmaxF || mode == Line::LogSoftmaxF) {
    MaxSum ms{-INFINITY, 0.0f};
    for (int64_t l = lane; l < L; l += 32)
      ms = max_sum_combine(ms, MaxSum{ld(x, at(l, 0)), 1.0f});
    ms = warp_max_sum(ms);
    // (x - max) - log(sum): the max subtracted first, so a large x (ONNX's
    // test_logsoftmax_large_number, ~1e4) keeps its fractional digits.
    const float logSum = logf(ms.s);
    for (int64_t l = lane; l < L; l += 32) {
      const float v = ld(x, at(l, 0)) - ms.m;
      put(y, at(l, 1), mode == Line::SoftmaxF ? expf(v) / ms.s : v - logSum,
          false);
    }
    return;
  }
  // Softmax: dx += y (dy - sum dy y); LogSoftmax: dx += dy - e^y sum dy.
  float sum = 0.0f;
  for (int64_t l = lane; l < L; l += 32)
    sum += ld(dy, at(l, 2)) * (mode == Line::SoftmaxB ? ld(y, at(l, 1)) : 1.0f);
  sum = warp_sum(sum);
  for (int64_t l = lane; l < L; l += 32) {
    const float yv = ld(y, at(l, 1)), g = ld(dy, at(l, 2));
    put(dx, at(l, 3),
        mode == Line::SoftmaxB ? yv * (g - sum) : g - expf(yv) * sum, true);
  }
}

// ---- Host side: spaces and refs from shapes ---------------------------------

Space space(const Dims &shape) {
  Space s;
  s.rank = int(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    s.dim[d] = shape[d];
  return s;
}
Ref ref(PrimRef p) {
  Ref r;
  r.p = p.p;
  r.f32 = p.f32;
  return r;
}
/// p of shape `in` read broadcast over the space `out` (in right-aligned;
/// stride 0 on its size-1 and missing axes). A dense operand is in == out.
Ref bcast(PrimRef p, const Dims &in, const Dims &out) {
  Ref r = ref(p);
  const Dims st = ok::stridesOf(in);
  const size_t lead = out.size() - in.size();
  for (size_t d = lead; d < out.size(); ++d)
    r.st[d] = in[d - lead] == 1 ? 0 : st[d - lead];
  return r;
}
/// x of shape xs read over its transpose's space (axis i is x's perm[i]).
Ref permuted(PrimRef x, const Dims &xs, const Dims &perm) {
  Ref r = ref(x);
  const Dims st = ok::stridesOf(xs);
  for (size_t i = 0; i < perm.size(); ++i)
    r.st[i] = st[size_t(perm[i])];
  return r;
}
/// x of shape xs read over Slice's window.
Ref windowed(PrimRef x, const Dims &xs, const ok::Window &w) {
  Ref r = ref(x);
  const Dims st = ok::stridesOf(xs);
  for (size_t d = 0; d < xs.size(); ++d) {
    r.base += w.begin[d] * st[d];
    r.st[d] = w.step[d] * st[d];
  }
  return r;
}
/// The part of a Concat's result y (shape ys) from `at` on along `axis`,
/// over the part's space.
Ref concatPart(PrimRef y, const Dims &ys, int64_t axis, int64_t at) {
  Ref r = ref(y);
  const Dims st = ok::stridesOf(ys);
  for (size_t d = 0; d < ys.size(); ++d)
    r.st[d] = st[d];
  r.base = at * st[size_t(axis)];
  return r;
}

/// Bit d set where the axis d of `s` is reduced: r's stride is 0 there and
/// the axis is longer than 1.
unsigned reducedAxes(const Space &s, const Ref &r) {
  unsigned m = 0;
  for (int d = 0; d < s.rank; ++d)
    if (r.st[d] == 0 && s.dim[d] > 1)
      m |= 1u << d;
  return m;
}
int64_t count(const Space &s, unsigned mask, unsigned want) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; ++d)
    if (((mask >> d) & 1u) == want)
      n *= s.dim[d];
  return n;
}

void map(const Dims &shape, const OpArgs &o, const Ref &out, const Ref &a,
         const Ref &b = Ref(), const Ref &c = Ref(), bool acc = false) {
  const int64_t n = ok::numel(shape);
  if (!out.p || n == 0)
    return;
  const Dims rowMajor = ok::stridesOf(shape);
  bool flat = true;
  for (const Ref *r : {&out, &a, &b, &c})
    for (size_t d = 0; d < shape.size() && r->p; ++d)
      flat = flat && (shape[d] == 1 || r->st[d] == rowMajor[d]);
  map_kernel<<<grid_for(n, 256), 256, 0, compute_stream()>>>(
      space(shape), n, o, out, a, b, c, acc, flat);
  AUTODDL_CUDA_CHECK_LAUNCH();
}
unsigned blocksFor(int64_t warps) {
  return unsigned((warps + kWarps - 1) / kWarps);
}
/// out (+)= f summed (or maxed) over the axes of `shape` where out is
/// broadcast; a map where it is not broadcast at all.
void reduce(const Dims &shape, const OpArgs &o, const Ref &out, const Ref &a,
            const Ref &b = Ref(), const Ref &c = Ref(), bool acc = true,
            bool max = false, float post = 1.0f) {
  const Space s = space(shape);
  const unsigned red = reducedAxes(s, out);
  if (!out.p || ok::numel(shape) == 0)
    return;
  if (red == 0 && !max && post == 1.0f)
    return map(shape, o, out, a, b, c, acc);
  const int64_t kept = count(s, red, 0u);
  reduce_kernel<<<blocksFor(kept), 32 * kWarps, 0, compute_stream()>>>(
      s, red, kept, count(s, red, 1u), o, out, a, b, c, acc, max, post);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

OpArgs args(Op op) {
  OpArgs o;
  o.op = op;
  return o;
}

/// y's strides over x's space for a reduction over `axes` (y laid out as
/// the kept shape, with or without keepdims: the same order), 0 on them.
Ref reducedRef(PrimRef p, const Dims &xs, const Dims &axes) {
  Ref r = bcast(p, ok::keptShape(xs, axes), xs);
  for (int64_t a : axes)
    r.st[a] = 0;
  return r;
}

void softmaxLine(const ok::Primitive &p, Line mode, PrimRef x, PrimRef y,
                 PrimRef dy, PrimRef dx) {
  const Dims &xs = p.in[0];
  const Space s = space(xs);
  const unsigned red = 1u << p.axis;
  const int64_t lines = count(s, red, 0u);
  if (ok::numel(xs) == 0 || (mode >= Line::SoftmaxB && !dx.p))
    return;
  line_kernel<<<blocksFor(lines), 32 * kWarps, 0, compute_stream()>>>(
      s, red, lines, xs[size_t(p.axis)], mode, bcast(x, xs, xs),
      bcast(y, xs, xs), bcast(dy, xs, xs), bcast(dx, xs, xs));
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// A Reduce's axes as a mask, and its mean's factor 1 / (elements a group).
unsigned axesMask(const Dims &axes) {
  unsigned red = 0;
  for (int64_t a : axes)
    red |= 1u << a;
  return red;
}
float meanFactor(const ok::Primitive &p) {
  const int64_t kept = ok::numel(ok::keptShape(p.in[0], p.axes));
  return p.reduce == ok::Reduce::Mean
             ? float(1.0 /
                     double(ok::numel(p.in[0]) / std::max<int64_t>(1, kept)))
             : 1.0f;
}

constexpr bool kActIsFloat = std::is_same_v<act_t, float>;

[[noreturn]] void fail(const ok::Primitive &p, const char *why) {
  std::fprintf(stderr, "autoddl: ONNX primitive %s on the GPU: %s\n",
               p.op.c_str(), why);
  std::exit(1);
}

act_t *act(PrimRef r, int64_t offset = 0) {
  return r.p ? static_cast<act_t *>(r.p) + offset : nullptr;
}

/// MatMul through cuBLASLt (Linear.h): a parameter b (fp32 gradient) as a
/// linear layer's weight [K,N]; otherwise act_t matrices, one strided-batched
/// GEMM where the batch is not broadcast, one GEMM per entry where it is.
void matmul(const ok::Primitive &p, PrimRef da, PrimRef db, PrimRef a,
            PrimRef b, PrimRef y, PrimRef dy, bool forward) {
  if (!kActIsFloat && (a.f32 || b.f32 || da.f32))
    fail(p, "a MatMul operand is a constant or its first a parameter");
  const ok::MatmulShape m = ok::matmulShape(p.in[0], p.in[1]);
  const int64_t Bt = int64_t(m.ia.size());
  bool batched = true, folded = p.in[1].size() <= 2;
  for (int64_t q = 0; q < Bt; ++q) {
    batched = batched && m.ia[size_t(q)] == q && m.ib[size_t(q)] == q;
    folded = folded && m.ia[size_t(q)] == q;
  }
  if (!kActIsFloat && db.f32) { // b is a parameter: its gradient is fp32
    if (p.in[1].size() != 2 || !folded)
      fail(p, "a parameter MatMul operand is not a [K, N] weight");
    if (forward)
      linear_forward(act(y), act(a), act(b), nullptr, Bt * m.M, m.K, m.N,
                     false);
    else
      linear_backward(act(da), static_cast<float *>(db.p), nullptr, act(dy),
                      act(a), act(b), Bt * m.M, m.K, m.N, false);
    return;
  }
  auto gemm = [&](int64_t n, int64_t M, int64_t ya, int64_t yb, int64_t yy) {
    if (forward)
      matmul_forward(act(y, yy), act(a, ya), act(b, yb), n, M, m.K, m.N, false);
    else
      matmul_backward(act(da, ya), act(db, yb), act(dy, yy), act(a, ya),
                      act(b, yb), n, M, m.K, m.N, false);
  };
  if (folded) // b one matrix: a's batch as rows of one GEMM
    gemm(1, Bt * m.M, 0, 0, 0);
  else if (batched)
    gemm(Bt, m.M, 0, 0, 0);
  else
    for (int64_t q = 0; q < Bt; ++q)
      gemm(1, m.M, m.ia[size_t(q)] * m.M * m.K, m.ib[size_t(q)] * m.K * m.N,
           q * m.M * m.N);
}

#include "backends/cuda/kernels/PrimitiveImage.cuh" // Pool, BatchNorm, GAP

/// A channels-last primitive the generic kernels run as an NCHW one on the
/// stored shapes: an elementwise op (its operands all of the result's
/// shape: any order), a global pool (a reduce over the stored [N, H, W, C]'s
/// axes 1 and 2). Pools and batch norms index channels-last themselves.
bool storedAsNchw(const ok::Primitive &p) {
  using K = ok::Primitive::Kind;
  return p.channelsLast &&
         (p.kind == K::Unary || p.kind == K::Binary || p.kind == K::Reduce);
}
ok::Primitive storedView(ok::Primitive p) {
  auto last = [](const Dims &d) {
    return d.size() == 4 ? Dims{d[0], d[2], d[3], d[1]} : d;
  };
  for (Dims &d : p.in)
    d = last(d);
  p.out = last(p.out);
  if (p.kind == ok::Primitive::Kind::Reduce)
    p.axes = {1, 2};
  p.channelsLast = false;
  return p;
}

} // namespace

void primitive_forward(const ok::Primitive &p, const std::vector<PrimRef> &x,
                       PrimRef y, const ok::DropoutKey &key) {
  if (storedAsNchw(p))
    return primitive_forward(storedView(p), x, y, key);
  using K = ok::Primitive::Kind;
  const Dims &ys = p.out, &xs = p.in[0];
  const Ref out = bcast(y, ys, ys);
  OpArgs o;
  switch (p.kind) {
  case K::Dropout: // Dropout.h: the CPU program's mask and conventions
    return dropout_forward(act(y), act(x[0]), ok::numel(ys), p.ratio, key.seed,
                           key.stream, key.first);
  case K::Unary:
    if (p.unary == ok::Unary::Identity && x[0].f32 == y.f32) {
      copy_on_device(y.p, x[0].p,
                     ok::numel(ys) *
                         int64_t(y.f32 ? sizeof(float) : sizeof(act_t)));
      return;
    }
    o = args(Op::UnaryF);
    o.u = p.unary;
    return map(ys, o, out, bcast(x[0], ys, ys));
  case K::Binary:
    o = args(Op::BinaryF);
    o.b = p.binary;
    return map(ys, o, out, bcast(x[0], xs, ys), bcast(x[1], p.in[1], ys));
  case K::Where:
    return map(ys, args(Op::WhereF), out, bcast(x[0], xs, ys),
               bcast(x[1], p.in[1], ys), bcast(x[2], p.in[2], ys));
  case K::Expand:
    return map(ys, args(Op::Copy), out, bcast(x[0], xs, ys));
  case K::Transpose:
    return map(ys, args(Op::Copy), out, permuted(x[0], xs, p.perm));
  case K::Slice:
    return map(p.window.shape, args(Op::Copy), bcast(y, ys, p.window.shape),
               windowed(x[0], xs, p.window));
  case K::Concat:
    for (size_t i = 0, at = 0; i < x.size(); at += p.in[i][p.axis], ++i)
      map(p.in[i], args(Op::Copy), concatPart(y, ys, p.axis, int64_t(at)),
          bcast(x[i], p.in[i], p.in[i]));
    return;
  case K::Reduce: {
    Ref dst = reducedRef(y, xs, p.axes);
    if (ok::numel(xs) == 0) { // an empty reduction: 0 (the CPU's)
      zero(y.p, ok::numel(ys) * int64_t(y.f32 ? sizeof(float) : sizeof(act_t)));
      return;
    }
    if (reduce_middle(p, x[0], y)) // a channels-last global pool
      return;
    const Space s = space(xs);
    const unsigned red = axesMask(p.axes);
    const int64_t k = count(s, red, 0u);
    reduce_kernel<<<blocksFor(k), 32 * kWarps, 0, compute_stream()>>>(
        s, red, k, count(s, red, 1u), args(Op::Copy), dst, bcast(x[0], xs, xs),
        Ref(), Ref(), false, p.reduce == ok::Reduce::Max, meanFactor(p));
    AUTODDL_CUDA_CHECK_LAUNCH();
    return;
  }
  case K::Softmax:
    return softmaxLine(p, Line::SoftmaxF, x[0], y, nullptr, nullptr);
  case K::LogSoftmax:
    return softmaxLine(p, Line::LogSoftmaxF, x[0], y, nullptr, nullptr);
  case K::Matmul:
    return matmul(p, nullptr, nullptr, x[0], x[1], y, nullptr, true);
  case K::Pool:
    return pool(p, x[0], y, nullptr, nullptr, true);
  case K::BatchNorm:
    return batchnorm(p, x, y, nullptr, {}, true);
  }
}

void primitive_backward(const ok::Primitive &p, const std::vector<PrimRef> &dx,
                        const std::vector<PrimRef> &x, PrimRef y, PrimRef dy,
                        bool accumulate_dx) {
  if (storedAsNchw(p))
    return primitive_backward(storedView(p), dx, x, y, dy, accumulate_dx);
  using K = ok::Primitive::Kind;
  const Dims &ys = p.out, &xs = p.in[0];
  const bool acc = accumulate_dx;
  // Kinds whose passes do not store dx[0] add into it zeroed.
  if (!acc && !ok::primitiveStoresDxInPass(p) && !dx.empty() && dx[0].p)
    AUTODDL_CUDA_CHECK(cudaMemsetAsync(
        dx[0].p, 0,
        size_t(ok::numel(xs)) * (dx[0].f32 ? sizeof(float) : sizeof(act_t)),
        compute_stream()));
  const Ref g = bcast(dy, ys, ys);
  OpArgs o;
  switch (p.kind) {
  case K::Dropout:
    return dropout_backward(act(dx[0]), act(y), act(dy), ok::numel(ys),
                            p.ratio);
  case K::Unary:
    o = args(Op::UnaryB);
    o.u = p.unary;
    return map(ys, o, bcast(dx[0], ys, ys), bcast(x[0], ys, ys),
               bcast(y, ys, ys), g, true);
  case K::Binary: {
    const Ref a = bcast(x[0], xs, ys), b = bcast(x[1], p.in[1], ys);
    o.b = p.binary;
    o.op = Op::BinaryGA;
    reduce(ys, o, bcast(dx[0], xs, ys), a, b, g);
    o.op = Op::BinaryGB;
    reduce(ys, o, bcast(dx[1], p.in[1], ys), a, b, g);
    return;
  }
  case K::Where: {
    const Ref c = bcast(x[0], xs, ys);
    reduce(ys, args(Op::WhereGX), bcast(dx[1], p.in[1], ys), c, Ref(), g);
    reduce(ys, args(Op::WhereGZ), bcast(dx[2], p.in[2], ys), c, Ref(), g);
    return;
  }
  case K::Expand:
    return reduce(ys, args(Op::Copy), bcast(dx[0], xs, ys), g);
  case K::Transpose: // the scatter-add by the same (injective) index
    return map(ys, args(Op::Copy), permuted(dx[0], xs, p.perm), g, Ref(), Ref(),
               true);
  case K::Slice:
    return map(p.window.shape, args(Op::Copy), windowed(dx[0], xs, p.window),
               bcast(dy, ys, p.window.shape), Ref(), Ref(), true);
  case K::Concat:
    for (size_t i = 0, at = 0; i < dx.size(); at += p.in[i][p.axis], ++i)
      map(p.in[i], args(Op::Copy), bcast(dx[i], p.in[i], p.in[i]),
          concatPart(dy, ys, p.axis, int64_t(at)), Ref(), Ref(), true);
    return;
  case K::Reduce: {
    if (!dx[0].p || ok::numel(xs) == 0)
      return;
    if (broadcast_middle(p, dy, dx[0], acc)) // a channels-last global pool
      return;
    const Ref up = reducedRef(dy, xs, p.axes);
    if (p.reduce != ok::Reduce::Max) {
      o = args(Op::Scale);
      o.scale = meanFactor(p);
      return map(xs, o, bcast(dx[0], xs, xs), up, Ref(), Ref(), acc);
    }
    const Space s = space(xs);
    const unsigned red = axesMask(p.axes);
    const int64_t k = count(s, red, 0u);
    max_backward_kernel<<<blocksFor(k), 32 * kWarps, 0, compute_stream()>>>(
        s, red, k, count(s, red, 1u), bcast(dx[0], xs, xs), bcast(x[0], xs, xs),
        reducedRef(y, xs, p.axes), up);
    AUTODDL_CUDA_CHECK_LAUNCH();
    return;
  }
  case K::Softmax:
    return softmaxLine(p, Line::SoftmaxB, nullptr, y, dy, dx[0]);
  case K::LogSoftmax:
    return softmaxLine(p, Line::LogSoftmaxB, nullptr, y, dy, dx[0]);
  case K::Matmul:
    return matmul(p, dx[0], dx[1], x[0], x[1], nullptr, dy, false);
  case K::Pool:
    return pool(p, x[0], nullptr, dy, dx[0], false, acc);
  case K::BatchNorm:
    return batchnorm(p, x, nullptr, dy, dx, false, {nullptr, false, !acc});
  }
}

void batchnorm_forward_moments(const ok::Primitive &p,
                               const std::vector<PrimRef> &x, PrimRef y,
                               float *moments) {
  if (p.kind != ok::Primitive::Kind::BatchNorm || !p.batchStats)
    fail(p, "moments of a primitive that is not a batch norm on batch "
            "statistics");
  batchnorm(p, x, y, nullptr, {}, true, {moments});
}

void batchnorm_relu_forward(const ok::Primitive &p,
                            const std::vector<PrimRef> &x, PrimRef y,
                            float *moments) {
  if (p.kind != ok::Primitive::Kind::BatchNorm || (moments && !p.batchStats))
    fail(p, "a fused ReLU after a primitive that is not a batch norm (or "
            "moments of one on given statistics)");
  batchnorm(p, x, y, nullptr, {}, true, {moments, true});
}

void batchnorm_add_forward(const ok::Primitive &p,
                           const std::vector<PrimRef> &x, PrimRef residual,
                           PrimRef y, float *moments, bool relu) {
  if (p.kind != ok::Primitive::Kind::BatchNorm || (moments && !p.batchStats))
    fail(p, "a fused add after a primitive that is not a batch norm (or "
            "moments of one on given statistics)");
  batchnorm(p, x, y, nullptr, {}, true, {moments, relu, false, residual});
}

void batchnorm_relu_backward(const ok::Primitive &p,
                             const std::vector<PrimRef> &dx,
                             const std::vector<PrimRef> &x, PrimRef y,
                             PrimRef dy, bool accumulate_dx) {
  if (p.kind != ok::Primitive::Kind::BatchNorm)
    fail(p, "a fused ReLU after a primitive that is not a batch norm");
  batchnorm(p, x, y, dy, dx, false, {nullptr, true, !accumulate_dx});
}

void batchnorm_backward(const ok::Primitive &p, const std::vector<PrimRef> &dx,
                        const std::vector<PrimRef> &x, PrimRef dy,
                        bool accumulate_dx) {
  if (p.kind != ok::Primitive::Kind::BatchNorm)
    fail(p, "batchnorm_backward of a primitive that is not a batch norm");
  batchnorm(p, x, nullptr, dy, dx, false, {nullptr, false, !accumulate_dx});
}

void batchnorm_use_path(BatchNormPath path) { norm_path_switch() = path; }

void running_stats_update(float *moments, int64_t slots, int64_t C, float *mean,
                          float *var, double momentum) {
  if (C <= 0)
    return;
  running_stats_kernel<<<unsigned((C + 255) / 256), 256, 0, compute_stream()>>>(
      moments, slots, C, mean, var, momentum);
  AUTODDL_CUDA_CHECK_LAUNCH();
  AUTODDL_CUDA_CHECK(cudaMemsetAsync(
      moments, 0, size_t(slots * 2 * C) * sizeof(float), compute_stream()));
}

namespace {
/// The device copy of `host` (n floats), made from it at the first call when
/// `make` (never inside a graph capture: a step's first run is eager); null
/// when not made. Kept for the process.
float *device_copy(const float *host, int64_t n, bool make) {
  static std::mutex mu;
  static std::map<const float *, float *> held;
  std::lock_guard<std::mutex> lock(mu);
  auto it = held.find(host);
  if (it != held.end() || !make)
    return it == held.end() ? nullptr : it->second;
  float *&d = held[host];
  AUTODDL_CUDA_CHECK(
      cudaMalloc(&d, size_t(std::max<int64_t>(1, n)) * sizeof(float)));
  AUTODDL_CUDA_CHECK(
      cudaMemcpy(d, host, size_t(n) * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}
} // namespace

const float *primitive_constant(const float *host, int64_t n) {
  return device_copy(host, n, true);
}

float *primitive_buffer(float *host, int64_t n) {
  return device_copy(host, n, true);
}

float *primitive_buffer_made(const float *host) {
  return device_copy(host, 0, false);
}

} // namespace autoddl::rt
