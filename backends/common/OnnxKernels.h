// ONNX operators outside the model vocabulary, forward and backward
// (vector-Jacobian), on the host: what an import's primitives that no
// sbp-fuse pattern recognised run as (docs/onnx-lowering.md "Primitives that
// run"). Templates on the element type: float in generated programs, double
// in the finite-difference tests (tests/onnx/PrimitiveKernelTests.cpp).
// Header-only, plain C++17, so codegen copies it with backends/common.
//
// Conventions: tensors are dense and row-major; shapes are Dims; a backward
// accumulates (+=) into the gradients it is given and skips a null one. The
// kernels are plain loops: a model whose primitives were not fused runs
// correctly, only slower.
#ifndef AUTODDL_BACKENDS_COMMON_ONNXKERNELS_H
#define AUTODDL_BACKENDS_COMMON_ONNXKERNELS_H

#include "backends/common/Dims.h"
#include "backends/common/OnnxScalar.h"
#include "backends/common/Philox.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace autoddl::onnx_kernels {

using autoddl::Dims;
using autoddl::numel;

/// Where a Dropout's mask comes from (Philox.h dropout_keep): the run's
/// seed, the op's stream at this step, and the global index of the first
/// element this call holds (its micro-batch's first sample times the
/// elements per sample).
struct DropoutKey {
  uint64_t seed = 0, stream = 0;
  int64_t first = 0;
};

/// y = x * keep / (1 - ratio). A dropped element is written as -0 (and a kept
/// zero as +0) so that the backward reads the mask back from y alone; -0 is
/// 0 to every reader.
template <typename T>
void dropout_forward(T *y, const T *x, int64_t n, double ratio,
                     const DropoutKey &k) {
  const T scale = T(1.0 / (1.0 - ratio));
  for (int64_t i = 0; i < n; ++i)
    y[i] = !rt::dropout_keep(k.seed, k.stream, uint64_t(k.first + i), ratio)
               ? -T(0)
           : x[i] == T(0) ? T(0)
                          : x[i] * scale;
}

/// dx += dy * keep / (1 - ratio), keep read from the forward's y.
template <typename T>
void dropout_backward(T *dx, const T *y, const T *dy, int64_t n, double ratio) {
  if (!dx)
    return;
  const T scale = T(1.0 / (1.0 - ratio));
  for (int64_t i = 0; i < n; ++i)
    if (!(y[i] == T(0) && std::signbit(y[i])))
      dx[i] += dy[i] * scale;
}

inline Dims stridesOf(const Dims &shape) {
  Dims s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    s[size_t(i)] = s[size_t(i) + 1] * shape[size_t(i) + 1];
  return s;
}

/// Steps `pos` to the next row-major index of `shape`.
inline void advance(Dims &pos, const Dims &shape) {
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    if (++pos[size_t(d)] < shape[size_t(d)])
      return;
    pos[size_t(d)] = 0;
  }
}

/// For each element of a tensor of shape `shape` (row-major), the offset
/// base + sum_d pos[d] * strides[d] of its position: the gather map of a
/// strided view (broadcasting, transposes and slices).
inline Dims stridedIndex(const Dims &shape, int64_t base, const Dims &strides) {
  Dims idx(size_t(numel(shape))), pos(shape.size(), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    int64_t off = base;
    for (size_t d = 0; d < shape.size(); ++d)
      off += pos[d] * strides[d];
    idx[k] = off;
    advance(pos, shape);
  }
  return idx;
}

/// For each element of `out` (row-major), the offset of the element of `in`
/// it reads under numpy broadcasting (`in` right-aligned, size-1 dimensions
/// repeated). Assumes `in` broadcasts to `out`.
inline Dims broadcastIndex(const Dims &in, const Dims &out) {
  const size_t lead = out.size() - in.size();
  const Dims inStrides = stridesOf(in);
  Dims strides(out.size(), 0);
  for (size_t d = lead; d < out.size(); ++d)
    if (in[d - lead] != 1)
      strides[d] = inStrides[d - lead];
  return stridedIndex(out, 0, strides);
}

// ---- Elementwise unary (formulas in OnnxScalar.h) ----------------------

/// y[n] = f(x).
template <typename T>
void unary_forward(Unary op, T *y, const T *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = unaryValue(op, x[i]);
}
/// dx[n] += dy f'(x), from the forward's input x and output y.
template <typename T>
void unary_backward(Unary op, T *dx, const T *x, const T *y, const T *dy,
                    int64_t n) {
  if (!dx)
    return;
  for (int64_t i = 0; i < n; ++i)
    dx[i] += dy[i] * unaryDerivative(op, x[i], y[i]);
}

// ---- Elementwise binary, numpy broadcasting (OnnxScalar.h) ---------------

/// y[ys] = a[as] op b[bs], a and b broadcast to ys.
template <typename T>
void binary_forward(Binary op, T *y, const T *a, const Dims &as, const T *b,
                    const Dims &bs, const Dims &ys) {
  const Dims ia = broadcastIndex(as, ys), ib = broadcastIndex(bs, ys);
  for (size_t k = 0; k < ia.size(); ++k)
    y[k] = binaryValue(op, a[ia[k]], b[ib[k]]);
}

/// da[as] += sum over broadcast of dy d(a op b)/da, and db likewise.
template <typename T>
void binary_backward(Binary op, T *da, T *db, const T *a, const Dims &as,
                     const T *b, const Dims &bs, const T *dy, const Dims &ys) {
  const Dims ia = broadcastIndex(as, ys), ib = broadcastIndex(bs, ys);
  for (size_t k = 0; k < ia.size(); ++k) {
    T ga, gb;
    binaryGrad(op, a[ia[k]], b[ib[k]], dy[k], db != nullptr, &ga, &gb);
    if (da)
      da[ia[k]] += ga;
    if (db)
      db[ib[k]] += gb;
  }
}

/// Where(cond, x, z): y = cond ? x : z, all three broadcast to ys; cond holds
/// 0/1 (a constant of the import).
template <typename T>
void where_forward(T *y, const T *cond, const Dims &cs, const T *x,
                   const Dims &xs, const T *z, const Dims &zs, const Dims &ys) {
  const Dims ic = broadcastIndex(cs, ys), ix = broadcastIndex(xs, ys),
             iz = broadcastIndex(zs, ys);
  for (size_t k = 0; k < ic.size(); ++k)
    y[k] = cond[ic[k]] != T(0) ? x[ix[k]] : z[iz[k]];
}
template <typename T>
void where_backward(T *dx, T *dz, const T *cond, const Dims &cs, const Dims &xs,
                    const Dims &zs, const T *dy, const Dims &ys) {
  const Dims ic = broadcastIndex(cs, ys), ix = broadcastIndex(xs, ys),
             iz = broadcastIndex(zs, ys);
  for (size_t k = 0; k < ic.size(); ++k) {
    if (cond[ic[k]] != T(0)) {
      if (dx)
        dx[ix[k]] += dy[k];
    } else if (dz) {
      dz[iz[k]] += dy[k];
    }
  }
}

// ---- Data movement -----------------------------------------------------
// Expand, Transpose and Slice are each a gather y[k] = x[idx[k]] by the op's
// index (broadcastIndex, transposeIndex, windowIndex); the backward is the
// scatter-add dx[idx[k]] += dy[k] by the same index (OnnxPrimitive.h).

template <typename T> void gather(T *y, const T *x, const Dims &idx) {
  for (size_t k = 0; k < idx.size(); ++k)
    y[k] = x[idx[k]];
}
template <typename T> void scatterAdd(T *dx, const T *dy, const Dims &idx) {
  if (dx)
    for (size_t k = 0; k < idx.size(); ++k)
      dx[idx[k]] += dy[k];
}

/// For each element of the transpose of a tensor of shape xs by perm
/// (row-major; y's dimension i is x's perm[i]), the offset of the element of
/// x it is.
inline Dims transposeIndex(const Dims &xs, const Dims &perm) {
  const Dims inStrides = stridesOf(xs);
  Dims ys(xs.size()), strides(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    ys[i] = xs[size_t(perm[i])];
    strides[i] = inStrides[size_t(perm[i])];
  }
  return stridedIndex(ys, 0, strides);
}

/// What Slice reads of a tensor: per dimension the first index, the step and
/// the count (ONNX's clamping already applied).
struct Window {
  Dims begin, step, shape;
};

/// The window Slice(starts, ends, axes, steps) reads of a tensor of shape
/// `in` (axes and steps may be empty: the defaults), with ONNX's rules:
/// negative indices count from the end, then clamp to [0, dim] for a
/// positive step, [-1, dim-1] for a negative one. Returns "" or why not.
inline std::string sliceWindow(const Dims &in, const Dims &starts,
                               const Dims &ends, Dims axes, Dims steps,
                               Window &w) {
  const int64_t r = int64_t(in.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return "starts, ends, axes and steps differ in length";
  w = Window{Dims(size_t(r), 0), Dims(size_t(r), 1), in};
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < -r || axes[i] >= r)
      return "axis " + std::to_string(axes[i]) + " out of range for rank " +
             std::to_string(r);
    const size_t a = size_t(axes[i] < 0 ? axes[i] + r : axes[i]);
    int64_t dim = in[a], s = starts[i], e = ends[i], st = steps[i];
    if (st == 0)
      return "a Slice step is 0";
    if (st == std::numeric_limits<int64_t>::min())
      return "a Slice step is out of range";
    if (s < 0)
      s = s < -dim ? -1 : s + dim;
    if (e < 0)
      e = e < -dim ? -1 : e + dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      // (e - s - 1) / st + 1: no overflow for a step near INT64_MAX.
      w.shape[a] = e > s ? (e - s - 1) / st + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      w.shape[a] = s > e ? (s - e - 1) / (-st) + 1 : 0;
    }
    w.begin[a] = s;
    w.step[a] = st;
  }
  return "";
}
/// For each element of the slice (row-major), the offset in x of shape xs.
inline Dims windowIndex(const Dims &xs, const Window &w) {
  const Dims inStrides = stridesOf(xs);
  int64_t base = 0;
  Dims strides(xs.size());
  for (size_t d = 0; d < xs.size(); ++d) {
    base += w.begin[d] * inStrides[d];
    strides[d] = w.step[d] * inStrides[d];
  }
  return stridedIndex(w.shape, base, strides);
}

/// A Concat along `axis` of parts of shapes xs, seen as [outer, chunk_i]
/// each and [outer, total] for the result; part i starts at column at[i].
struct ConcatLayout {
  int64_t outer = 1, total = 0;
  Dims chunk, at;
};
inline ConcatLayout concatLayout(const std::vector<Dims> &xs, int64_t axis) {
  ConcatLayout c;
  c.outer = numel(Dims(xs[0].begin(), xs[0].begin() + axis));
  for (const Dims &s : xs) {
    c.at.push_back(c.total);
    c.chunk.push_back(numel(Dims(s.begin() + axis, s.end())));
    c.total += c.chunk.back();
  }
  return c;
}
/// Concat along `axis`: part i of y is x[i] (all of one shape but on axis).
template <typename T>
void concat_forward(T *y, const std::vector<const T *> &x,
                    const std::vector<Dims> &xs, int64_t axis) {
  const ConcatLayout c = concatLayout(xs, axis);
  for (size_t i = 0; i < x.size(); ++i)
    for (int64_t o = 0; o < c.outer; ++o)
      std::copy(x[i] + o * c.chunk[i], x[i] + (o + 1) * c.chunk[i],
                y + o * c.total + c.at[i]);
}
template <typename T>
void concat_backward(const std::vector<T *> &dx, const std::vector<Dims> &xs,
                     const T *dy, int64_t axis) {
  const ConcatLayout c = concatLayout(xs, axis);
  for (size_t i = 0; i < dx.size(); ++i)
    if (dx[i])
      for (int64_t o = 0; o < c.outer; ++o)
        for (int64_t j = 0; j < c.chunk[i]; ++j)
          dx[i][o * c.chunk[i] + j] += dy[o * c.total + c.at[i] + j];
}

// ---- Reductions and softmax
// --------------------------------------------------

/// x's shape with the reduced axes set to 1: the layout of a ReduceSum or
/// ReduceMean's result, with keepdims or without.
inline Dims keptShape(const Dims &xs, const Dims &axes) {
  Dims k = xs;
  for (int64_t a : axes)
    k[size_t(a)] = 1;
  return k;
}

enum class Reduce { Sum, Mean, Max };

/// ReduceSum, ReduceMean or ReduceMax of x over `axes` (non-negative,
/// distinct).
template <typename T>
void reduce_forward(T *y, const T *x, const Dims &xs, const Dims &axes,
                    Reduce mode) {
  const Dims ks = keptShape(xs, axes);
  const Dims iy = broadcastIndex(ks, xs);
  const int64_t count = numel(xs) / std::max<int64_t>(1, numel(ks));
  std::vector<double> acc(size_t(numel(ks)), 0.0); // sums in double
  std::vector<bool> seen(acc.size());
  for (size_t k = 0; k < iy.size(); ++k) {
    double &a = acc[size_t(iy[k])];
    if (mode != Reduce::Max)
      a += double(x[k]);
    else if (!seen[size_t(iy[k])] || double(x[k]) > a)
      a = double(x[k]);
    seen[size_t(iy[k])] = true;
  }
  for (size_t j = 0; j < acc.size(); ++j)
    y[j] = T(mode == Reduce::Mean ? acc[j] / double(count) : acc[j]);
}
/// dx += dy spread back: to every element (Sum), scaled by 1/count (Mean),
/// or to the first maximum (Max; x and y the forward's input and output).
template <typename T>
void reduce_backward(T *dx, const T *dy, const T *x, const T *y, const Dims &xs,
                     const Dims &axes, Reduce mode) {
  if (!dx)
    return;
  const Dims ks = keptShape(xs, axes);
  const Dims iy = broadcastIndex(ks, xs);
  const T scale = mode == Reduce::Mean
                      ? T(1) / T(numel(xs) / std::max<int64_t>(1, numel(ks)))
                      : T(1);
  std::vector<bool> taken(mode == Reduce::Max ? size_t(numel(ks)) : 0);
  for (size_t k = 0; k < iy.size(); ++k) {
    const size_t j = size_t(iy[k]);
    if (mode != Reduce::Max)
      dx[k] += dy[j] * scale;
    else if (!taken[j] && x[k] == y[j]) {
      dx[k] += dy[j];
      taken[j] = true;
    }
  }
}

/// Calls f(line) for every 1-D line along `axis` of a tensor of shape xs:
/// line(l) is the offset of its element l, for l < xs[axis].
template <typename F> void forEachLine(const Dims &xs, int64_t axis, F f) {
  const int64_t L = xs[size_t(axis)],
                inner = numel(Dims(xs.begin() + axis + 1, xs.end())),
                outer = numel(Dims(xs.begin(), xs.begin() + axis));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * L * inner + i;
      f(L, [base, inner](int64_t l) { return base + l * inner; });
    }
}

/// The maximum of x along a line (for a max-subtracted exponential).
template <typename T, typename Line> T lineMax(const T *x, int64_t L, Line at) {
  T mx = x[at(0)];
  for (int64_t l = 1; l < L; ++l)
    mx = std::max(mx, x[at(l)]);
  return mx;
}

/// Softmax over `axis` of x (opset 13: one axis), max-subtracted; with
/// `logSoftmax`, LogSoftmax: y = (x - max) - log(sum exp(x - max)), the max
/// subtracted first, so a large x keeps its fractional digits in float (as
/// the CUDA kernel).
template <typename T>
void softmax_forward(T *y, const T *x, const Dims &xs, int64_t axis,
                     bool logSoftmax) {
  forEachLine(xs, axis, [&](int64_t L, auto at) {
    const T mx = lineMax(x, L, at);
    double sum = 0;
    for (int64_t l = 0; l < L; ++l) {
      const T e = std::exp(x[at(l)] - mx);
      if (!logSoftmax)
        y[at(l)] = e;
      sum += double(e);
    }
    const T logSum = logSoftmax ? T(std::log(sum)) : T(0);
    for (int64_t l = 0; l < L; ++l)
      y[at(l)] =
          logSoftmax ? (x[at(l)] - mx) - logSum : T(double(y[at(l)]) / sum);
  });
}
/// From the forward output y: dx += y (dy - sum_l dy y); with
/// `logSoftmax` (softmax = e^y), dx += dy - softmax(x) sum_l dy.
template <typename T>
void softmax_backward(T *dx, const T *y, const T *dy, const Dims &xs,
                      int64_t axis, bool logSoftmax) {
  if (!dx)
    return;
  forEachLine(xs, axis, [&](int64_t L, auto at) {
    double sum = 0;
    for (int64_t l = 0; l < L; ++l)
      sum +=
          logSoftmax ? double(dy[at(l)]) : double(dy[at(l)]) * double(y[at(l)]);
    for (int64_t l = 0; l < L; ++l)
      dx[at(l)] += logSoftmax ? dy[at(l)] - std::exp(y[at(l)]) * T(sum)
                              : y[at(l)] * (dy[at(l)] - T(sum));
  });
}

// ---- MatMul: numpy's batched matrix product
// ----------------------------------

/// The operands of a MatMul as batched matrices: a [batch..., M, K] and
/// b [batch..., K, N] (a 1-D a is [1, K], a 1-D b [K, 1]), the broadcast
/// batch and, per batch entry, the matrix of a and of b it reads.
struct MatmulShape {
  int64_t M = 0, K = 0, N = 0;
  Dims ia, ib; // per broadcast batch entry
};
inline MatmulShape matmulShape(Dims as, Dims bs) {
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  MatmulShape m;
  m.M = as[as.size() - 2];
  m.K = as.back();
  m.N = bs.back();
  const Dims ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t r = std::max(ab.size(), bb.size());
  Dims batch(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - ab.size() ? 1 : ab[i - (r - ab.size())];
    const int64_t y = i < r - bb.size() ? 1 : bb[i - (r - bb.size())];
    batch[i] = x == 1 ? y : x;
  }
  m.ia = broadcastIndex(ab, batch);
  m.ib = broadcastIndex(bb, batch);
  return m;
}

/// A matrix read through strides: element (r, c) is p[r * rs + c * cs] (a
/// transposed view swaps them).
template <typename T> struct MatView {
  const T *p;
  int64_t rs, cs;
  T at(int64_t r, int64_t c) const { return p[r * rs + c * cs]; }
};

/// C[R, N] (row-major) = P[R, K] Q[K, N], or += with `accumulate`; each sum
/// in double, over k in order.
template <typename T>
void matrixProduct(T *C, bool accumulate, MatView<T> P, MatView<T> Q, int64_t R,
                   int64_t K, int64_t N) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < N; ++c) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(P.at(r, k)) * double(Q.at(k, c));
      C[r * N + c] = accumulate ? C[r * N + c] + T(s) : T(s);
    }
}

/// y[batch, M, N] = a[.., M, K] b[.., K, N] (sums in double).
template <typename T>
void matmul_forward(T *y, const T *a, const Dims &as, const T *b,
                    const Dims &bs) {
  const MatmulShape m = matmulShape(as, bs);
  for (size_t p = 0; p < m.ia.size(); ++p)
    matrixProduct(y + int64_t(p) * m.M * m.N, false,
                  MatView<T>{a + m.ia[p] * m.M * m.K, m.K, 1},
                  MatView<T>{b + m.ib[p] * m.K * m.N, m.N, 1}, m.M, m.K, m.N);
}
/// da += dy b^T and db += a^T dy, summed over the batch entries that read
/// each matrix.
template <typename T>
void matmul_backward(T *da, T *db, const T *a, const Dims &as, const T *b,
                     const Dims &bs, const T *dy) {
  const MatmulShape m = matmulShape(as, bs);
  for (size_t p = 0; p < m.ia.size(); ++p) {
    const T *A = a + m.ia[p] * m.M * m.K, *B = b + m.ib[p] * m.K * m.N;
    const MatView<T> G{dy + int64_t(p) * m.M * m.N, m.N, 1};
    if (da) // [M, N] x [N, K]: b transposed
      matrixProduct(da + m.ia[p] * m.M * m.K, true, G, MatView<T>{B, 1, m.N},
                    m.M, m.N, m.K);
    if (db) // [K, M] x [M, N]: a transposed
      matrixProduct(db + m.ib[p] * m.K * m.N, true, MatView<T>{A, 1, m.K}, G,
                    m.K, m.M, m.N);
  }
}

} // namespace autoddl::onnx_kernels

#endif // AUTODDL_BACKENDS_COMMON_ONNXKERNELS_H
