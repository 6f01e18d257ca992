//===- OnnxConstants.cpp - evaluating ONNX nodes on constants ------------===//
//
// Host implementations of the ops an export uses to build masks, rotary
// tables and reshape targets, following the ONNX operator specs (opsets 13
// to 21). Checked against libonnx-testdata's node tests by
// tests/onnx/ConstTests.cpp.
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxConstants.h"
#include "ir/import/OnnxHostTensor.h"

// The index math (broadcasting, transposes, batched matrix products) is the
// one the programs run unfused primitives with.
#include "backends/common/OnnxKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>

namespace autoddl::import {

using T = onnx::TensorProto;
using Value = long double;

namespace {

using namespace host;

using onnx_kernels::broadcastIndex;
using onnx_kernels::stridesOf;

std::vector<int64_t> toInts(const HostTensor &t) {
  if (isFloat(t.type))
    bad("expected an integer tensor, got " + typeName(t.type));
  return std::vector<int64_t>(t.data.begin(), t.data.end());
}

// The one element of a scalar input (Range's bounds, CumSum's axis, Trilu's k).
Value scalarOf(const HostTensor &t, const char *what) {
  if (t.data.size() != 1)
    bad(std::string(what) + " must hold one element, not " +
        std::to_string(t.data.size()));
  return t.data[0];
}

int64_t axisOf(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    bad("axis " + std::to_string(axis) + " out of range for rank " +
        std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> broadcastShape(const std::vector<int64_t> &a,
                                    const std::vector<int64_t> &b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1)
      bad("shapes do not broadcast (" + std::to_string(x) + " against " +
          std::to_string(y) + ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

HostTensor broadcastTo(const HostTensor &x, const std::vector<int64_t> &shape) {
  HostTensor out = make(x.type, shape);
  std::vector<int64_t> idx = broadcastIndex(x.shape, shape);
  for (size_t k = 0; k < idx.size(); ++k)
    out.data[k] = x.data[idx[k]];
  return out;
}

HostTensor elementwise(const std::vector<const HostTensor *> &in, int32_t type,
                       const std::function<Value(const Value *)> &f) {
  std::vector<int64_t> shape = in[0]->shape;
  for (size_t i = 1; i < in.size(); ++i)
    shape = broadcastShape(shape, in[i]->shape);
  HostTensor out = make(type, shape);
  std::vector<std::vector<int64_t>> idx;
  for (const HostTensor *t : in)
    idx.push_back(broadcastIndex(t->shape, shape));
  std::vector<Value> args(in.size());
  for (int64_t k = 0; k < out.numel(); ++k) {
    for (size_t i = 0; i < in.size(); ++i)
      args[i] = in[i]->data[idx[i][k]];
    out.data[k] = fit(type, f(args.data()));
  }
  return out;
}

HostTensor transpose(const HostTensor &x, std::vector<int64_t> perm) {
  int64_t r = x.shape.size();
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i)
      perm.push_back(i);
  if ((int64_t)perm.size() != r)
    bad("perm has " + std::to_string(perm.size()) + " entries for rank " +
        std::to_string(r));
  std::vector<int64_t> shape(r), seen(r, 0);
  for (int64_t i = 0; i < r; ++i) {
    if (perm[i] < 0 || perm[i] >= r || seen[perm[i]]++)
      bad("perm is not a permutation");
    shape[i] = x.shape[perm[i]];
  }
  HostTensor out = make(x.type, shape);
  const std::vector<int64_t> idx = onnx_kernels::transposeIndex(x.shape, perm);
  for (int64_t k = 0; k < out.numel(); ++k)
    out.data[k] = x.data[idx[k]];
  return out;
}

// Batched matrix product with numpy's rules (1-D operands promoted).
HostTensor matmul(const HostTensor &a, const HostTensor &b) {
  std::vector<int64_t> as = a.shape, bs = b.shape;
  if (as.empty() || bs.empty())
    bad("MatMul of a scalar");
  bool va = as.size() == 1, vb = bs.size() == 1;
  if (va)
    as.insert(as.begin(), 1);
  if (vb)
    bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    bad("MatMul inner dimensions differ (" + std::to_string(K) + " and " +
        std::to_string(bs[bs.size() - 2]) + ")");
  std::vector<int64_t> ab(as.begin(), as.end() - 2),
      bb(bs.begin(), bs.end() - 2);
  std::vector<int64_t> batch = broadcastShape(ab, bb); // checks they do
  const onnx_kernels::MatmulShape m = onnx_kernels::matmulShape(as, bs);
  const std::vector<int64_t> &ia = m.ia, &ib = m.ib;
  std::vector<int64_t> shape = batch;
  if (!va)
    shape.push_back(M);
  if (!vb)
    shape.push_back(N);
  HostTensor out = make(a.type, shape);
  for (size_t p = 0; p < ia.size(); ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        Value s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += a.data[ia[p] * M * K + i * K + k] *
               b.data[ib[p] * K * N + k * N + j];
        out.data[(p * M + i) * N + j] = fit(a.type, s);
      }
  return out;
}

} // namespace

SliceWindow sliceWindow(const std::vector<int64_t> &in,
                        const std::vector<int64_t> &starts,
                        const std::vector<int64_t> &ends,
                        std::vector<int64_t> axes, std::vector<int64_t> steps) {
  SliceWindow w;
  if (std::string e =
          onnx_kernels::sliceWindow(in, starts, ends, axes, steps, w);
      !e.empty())
    bad(e);
  return w;
}

namespace {

HostTensor slice(const HostTensor &x, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &ends, std::vector<int64_t> axes,
                 std::vector<int64_t> steps) {
  SliceWindow w =
      sliceWindow(x.shape, starts, ends, std::move(axes), std::move(steps));
  HostTensor out = make(x.type, w.shape);
  const std::vector<int64_t> idx = onnx_kernels::windowIndex(x.shape, w);
  for (size_t k = 0; k < idx.size(); ++k)
    out.data[k] = x.data[idx[k]];
  return out;
}

// Axes of a Reduce*/Squeeze/Unsqueeze: the input (opset 13+ for ReduceSum,
// Squeeze, Unsqueeze; 18+ for the others) or the attribute.
std::vector<int64_t> axesOf(const onnx::NodeProto &n,
                            const std::vector<const HostTensor *> &in) {
  if (in.size() > 1 && in[1])
    return toInts(*in[1]);
  return onnxAttrInts(n, "axes");
}

HostTensor reduce(const onnx::NodeProto &n,
                  const std::vector<const HostTensor *> &in, bool mean) {
  const HostTensor &x = *in[0];
  int64_t r = x.shape.size();
  std::vector<int64_t> axes = axesOf(n, in);
  if (axes.empty() && onnxAttrInt(n, "noop_with_empty_axes", 0))
    return x;
  std::vector<bool> reduced(r, axes.empty());
  for (int64_t a : axes)
    reduced[axisOf(a, r)] = true;
  bool keep = onnxAttrInt(n, "keepdims", 1) != 0;
  std::vector<int64_t> kept(r), shape;
  for (int64_t d = 0; d < r; ++d) {
    kept[d] = reduced[d] ? 1 : x.shape[d];
    if (!reduced[d] || keep)
      shape.push_back(kept[d]);
  }
  HostTensor out = make(x.type, shape);
  // x's element k adds to the kept element it broadcasts from.
  const std::vector<int64_t> idx = broadcastIndex(kept, x.shape);
  std::vector<Value> sum(out.numel(), 0);
  for (size_t k = 0; k < idx.size(); ++k)
    sum[idx[k]] += x.data[k];
  int64_t count = out.numel() ? x.numel() / out.numel() : 0;
  for (int64_t k = 0; k < out.numel(); ++k)
    out.data[k] = fit(x.type, mean && count ? sum[k] / count : sum[k]);
  return out;
}

HostTensor reshape(const HostTensor &x, std::vector<int64_t> shape,
                   bool allowZero) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowZero) {
      if (i >= x.shape.size())
        bad("shape copies a dimension the input lacks");
      shape[i] = x.shape[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0)
        bad("more than one -1 in a shape");
      infer = i;
    } else if (shape[i] < 0) {
      bad("negative dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known)
      bad("cannot infer the -1 dimension");
    shape[infer] = x.numel() / known;
  }
  if (product(shape) != x.numel())
    bad("reshape changes the element count");
  HostTensor out = x;
  out.shape = shape;
  return out;
}

using Eval = std::function<HostTensor(const onnx::NodeProto &,
                                      const std::vector<const HostTensor *> &)>;

Eval unary(std::function<Value(Value)> f) {
  return
      [f](const onnx::NodeProto &, const std::vector<const HostTensor *> &in) {
        return elementwise({in[0]}, in[0]->type,
                           [&](const Value *v) { return f(v[0]); });
      };
}

Eval binary(std::function<Value(Value, Value, int32_t)> f, bool boolean) {
  return [f, boolean](const onnx::NodeProto &,
                      const std::vector<const HostTensor *> &in) {
    if (in.size() < 2 || !in[1])
      bad("expected two inputs");
    int32_t type = in[0]->type;
    return elementwise({in[0], in[1]}, boolean ? (int32_t)T::BOOL : type,
                       [&](const Value *v) { return f(v[0], v[1], type); });
  };
}

// The elementwise math is the one the programs run unfused primitives with
// (backends/common/OnnxKernels.h), here in long double.
namespace K = onnx_kernels;
Eval unaryOp(K::Unary op) {
  return unary([op](Value a) { return K::unaryValue(op, a); });
}
Eval binaryOp(K::Binary op, bool boolean) {
  return binary(
      [op](Value a, Value b, int32_t) { return K::binaryValue(op, a, b); },
      boolean);
}

Value divide(Value a, Value b, int32_t type) {
  if (isFloat(type))
    return a / b;
  if (b == 0)
    bad("integer division by zero");
  return std::trunc(a / b); // integer Div truncates (C semantics)
}

/// Elementwise ops, casts, Range and CumSum.
void addElementwiseEvaluators(std::map<std::string, Eval> &table) {
  table.insert({
      {"Identity", [](auto &, auto &in) { return *in[0]; }},
      {"Add", binaryOp(K::Binary::Add, false)},
      {"Sub", binaryOp(K::Binary::Sub, false)},
      {"Mul", binaryOp(K::Binary::Mul, false)},
      {"Div", binary(divide, false)},
      {"Pow", binaryOp(K::Binary::Pow, false)},
      {"Equal", binaryOp(K::Binary::Equal, true)},
      {"Less", binaryOp(K::Binary::Less, true)},
      {"LessOrEqual", binaryOp(K::Binary::LessOrEqual, true)},
      {"Greater", binaryOp(K::Binary::Greater, true)},
      {"GreaterOrEqual", binaryOp(K::Binary::GreaterOrEqual, true)},
      {"And", binaryOp(K::Binary::And, true)},
      {"Or", binaryOp(K::Binary::Or, true)},
      {"Xor", binaryOp(K::Binary::Xor, true)},
      {"Not", unaryOp(K::Unary::Not)},
      {"Neg", unaryOp(K::Unary::Neg)},
      {"Abs", unaryOp(K::Unary::Abs)},
      {"Sqrt", unaryOp(K::Unary::Sqrt)},
      {"Reciprocal", unaryOp(K::Unary::Reciprocal)},
      {"Exp", unaryOp(K::Unary::Exp)},
      {"Cos", unaryOp(K::Unary::Cos)},
      {"Sin", unaryOp(K::Unary::Sin)},
      {"IsNaN",
       [](auto &, auto &in) {
         return elementwise({in[0]}, T::BOOL, [](const Value *v) {
           return K::unaryValue(K::Unary::IsNaN, v[0]);
         });
       }},
      {"Max",
       [](auto &, auto &in) {
         return elementwise(in, in[0]->type, [&](const Value *v) {
           return *std::max_element(v, v + in.size());
         });
       }},
      {"Min",
       [](auto &, auto &in) {
         return elementwise(in, in[0]->type, [&](const Value *v) {
           return *std::min_element(v, v + in.size());
         });
       }},
      {"Where",
       [](auto &, auto &in) {
         if (in.size() < 3 || !in[1] || !in[2])
           bad("expected three inputs");
         return elementwise({in[0], in[1], in[2]}, in[1]->type,
                            [](const Value *v) { return v[0] ? v[1] : v[2]; });
       }},
      {"Cast",
       [](auto &n, auto &in) {
         const onnx::AttributeProto *to = onnxAttr(n, "to");
         if (!to || !width((int32_t)to->i()))
           bad("Cast to " + (to ? typeName(to->i()) : std::string("nothing")) +
               " is not evaluated");
         return elementwise({in[0]}, to->i(),
                            [](const Value *v) { return v[0]; });
       }},
      {"CastLike",
       [](auto &, auto &in) {
         if (in.size() < 2 || !in[1] || !width(in[1]->type))
           bad("CastLike needs a target of a numeric type");
         return elementwise({in[0]}, in[1]->type,
                            [](const Value *v) { return v[0]; });
       }},
      {"Range",
       [](auto &, auto &in) {
         if (in.size() < 3 || !in[1] || !in[2])
           bad("expected three inputs");
         Value start = scalarOf(*in[0], "Range's start"),
               limit = scalarOf(*in[1], "Range's limit"),
               delta = scalarOf(*in[2], "Range's delta");
         if (delta == 0)
           bad("Range delta is 0");
         // ONNX: max(ceil((limit - start) / delta), 0) elements.
         int64_t n =
             std::max<int64_t>((int64_t)std::ceil((limit - start) / delta), 0);
         HostTensor out = make(in[0]->type, {n});
         for (int64_t i = 0; i < n; ++i)
           out.data[i] = fit(out.type, start + i * delta);
         return out;
       }},
      {"CumSum",
       [](auto &n, auto &in) {
         if (in.size() < 2 || !in[1])
           bad("expected an axis input");
         const HostTensor &x = *in[0];
         int64_t r = x.shape.size(),
                 a = axisOf((int64_t)scalarOf(*in[1], "CumSum's axis"), r);
         bool excl = onnxAttrInt(n, "exclusive", 0),
              rev = onnxAttrInt(n, "reverse", 0);
         HostTensor out = make(x.type, x.shape);
         int64_t inner = stridesOf(x.shape)[a], len = x.shape[a],
                 outer = len ? x.numel() / (len * inner) : 0;
         for (int64_t o = 0; o < outer; ++o)
           for (int64_t i = 0; i < inner; ++i) {
             Value s = 0;
             for (int64_t j = 0; j < len; ++j) {
               int64_t jj = rev ? len - 1 - j : j,
                       k = (o * len + jj) * inner + i;
               if (!excl)
                 s += x.data[k];
               out.data[k] = fit(x.type, s);
               if (excl)
                 s += x.data[k];
             }
           }
         return out;
       }},
  });
}

/// Shape ops: Unsqueeze, Squeeze, Reshape, Expand, Concat.
void addShapeEvaluators(std::map<std::string, Eval> &table) {
  table.insert({
      {"Unsqueeze",
       [](auto &n, auto &in) {
         return reshape(*in[0], unsqueezedShape(in[0]->shape, axesOf(n, in)),
                        true);
       }},
      {"Squeeze",
       [](auto &n, auto &in) {
         return reshape(*in[0], squeezedShape(in[0]->shape, axesOf(n, in)),
                        true);
       }},
      {"Reshape",
       [](auto &n, auto &in) {
         if (in.size() < 2 || !in[1])
           bad("expected a shape input");
         return reshape(*in[0], toInts(*in[1]),
                        onnxAttrInt(n, "allowzero", 0) != 0);
       }},
      {"Expand",
       [](auto &, auto &in) {
         if (in.size() < 2 || !in[1])
           bad("expected a shape input");
         return broadcastTo(*in[0],
                            broadcastShape(in[0]->shape, toInts(*in[1])));
       }},
      {"Concat",
       [](auto &n, auto &in) {
         const onnx::AttributeProto *a = onnxAttr(n, "axis");
         if (!a)
           bad("Concat without an axis");
         const HostTensor &x = *in[0];
         int64_t r = x.shape.size(), ax = axisOf(a->i(), r);
         std::vector<int64_t> shape = x.shape;
         shape[ax] = 0;
         for (const HostTensor *t : in) {
           if (!t || (int64_t)t->shape.size() != r)
             bad("Concat inputs differ in rank");
           for (int64_t d = 0; d < r; ++d)
             if (d != ax && t->shape[d] != x.shape[d])
               bad("Concat inputs differ off the axis");
           shape[ax] += t->shape[ax];
         }
         HostTensor out = make(x.type, shape);
         int64_t outer = 1;
         for (int64_t d = 0; d < ax; ++d)
           outer *= shape[d];
         int64_t k = 0;
         for (int64_t o = 0; o < outer; ++o)
           for (const HostTensor *t : in) {
             int64_t chunk = outer ? t->numel() / outer : 0;
             for (int64_t i = 0; i < chunk; ++i)
               out.data[k++] = fit(out.type, t->data[o * chunk + i]);
           }
         return out;
       }},
  });
}

/// Gathers, slices, Transpose, MatMul, ConstantOfShape, Trilu and reductions.
void addIndexingEvaluators(std::map<std::string, Eval> &table) {
  table.insert({
      {"Gather",
       [](auto &n, auto &in) {
         if (in.size() < 2 || !in[1])
           bad("expected an indices input");
         const HostTensor &x = *in[0];
         int64_t r = x.shape.size(), ax = axisOf(onnxAttrInt(n, "axis", 0), r);
         std::vector<int64_t> ids = toInts(*in[1]), shape;
         shape.insert(shape.end(), x.shape.begin(), x.shape.begin() + ax);
         shape.insert(shape.end(), in[1]->shape.begin(), in[1]->shape.end());
         shape.insert(shape.end(), x.shape.begin() + ax + 1, x.shape.end());
         HostTensor out = make(x.type, shape);
         int64_t inner = stridesOf(x.shape)[ax], dim = x.shape[ax],
                 outer = dim * inner != 0 ? x.numel() / (dim * inner) : 0,
                 k = 0;
         for (int64_t o = 0; o < outer; ++o)
           for (int64_t id : ids) {
             if (id < -dim || id >= dim)
               bad("Gather index " + std::to_string(id) + " out of range");
             int64_t row = id < 0 ? id + dim : id;
             for (int64_t i = 0; i < inner; ++i)
               out.data[k++] = x.data[(o * dim + row) * inner + i];
           }
         return out;
       }},
      {"GatherND",
       [](auto &n, auto &in) {
         if (onnxAttrInt(n, "batch_dims", 0) != 0)
           bad("GatherND with batch_dims is not evaluated");
         if (in.size() < 2 || !in[1] || in[1]->shape.empty())
           bad("expected an indices input of rank 1 or more");
         const HostTensor &x = *in[0], &idx = *in[1];
         int64_t q = idx.shape.back(), r = x.shape.size();
         if (q > r)
           bad("GatherND index tuples are longer than the data's rank");
         std::vector<int64_t> shape(idx.shape.begin(), idx.shape.end() - 1);
         shape.insert(shape.end(), x.shape.begin() + q, x.shape.end());
         HostTensor out = make(x.type, shape);
         std::vector<int64_t> strides = stridesOf(x.shape);
         int64_t inner = 1;
         for (int64_t d = q; d < r; ++d)
           inner *= x.shape[d];
         int64_t tuples = q ? idx.numel() / q : 0, k = 0;
         for (int64_t t = 0; t < tuples; ++t) {
           int64_t off = 0;
           for (int64_t d = 0; d < q; ++d) {
             int64_t i = (int64_t)idx.data[t * q + d], dim = x.shape[d];
             if (i < -dim || i >= dim)
               bad("GatherND index out of range");
             off += (i < 0 ? i + dim : i) * strides[d];
           }
           for (int64_t i = 0; i < inner; ++i)
             out.data[k++] = x.data[off + i];
         }
         return out;
       }},
      {"Slice",
       [](auto &, auto &in) {
         if (in.size() < 3 || !in[1] || !in[2])
           bad("expected starts and ends inputs");
         auto opt = [&](size_t i) {
           return in.size() > i && in[i] ? toInts(*in[i])
                                         : std::vector<int64_t>{};
         };
         return slice(*in[0], toInts(*in[1]), toInts(*in[2]), opt(3), opt(4));
       }},
      {"Transpose",
       [](auto &n, auto &in) {
         return transpose(*in[0], onnxAttrInts(n, "perm"));
       }},
      {"MatMul",
       [](auto &, auto &in) {
         if (in.size() < 2 || !in[1])
           bad("expected two inputs");
         return matmul(*in[0], *in[1]);
       }},
      {"ConstantOfShape",
       [](auto &n, auto &in) {
         const onnx::AttributeProto *v = onnxAttr(n, "value");
         HostTensor fill = v && v->has_t()
                               ? tensorFromProto(v->t(), v->t().raw_data())
                               : make(T::FLOAT, {1});
         if (fill.numel() != 1)
           bad("ConstantOfShape's value is not one element");
         HostTensor out = make(fill.type, toInts(*in[0]));
         std::fill(out.data.begin(), out.data.end(), fill.data[0]);
         return out;
       }},
      {"Trilu",
       [](auto &n, auto &in) {
         const HostTensor &x = *in[0];
         if (x.shape.size() < 2)
           bad("Trilu of rank below 2");
         int64_t k = in.size() > 1 && in[1]
                         ? (int64_t)scalarOf(*in[1], "Trilu's k")
                         : 0;
         bool upper = onnxAttrInt(n, "upper", 1) != 0;
         int64_t R = x.shape[x.shape.size() - 2], C = x.shape.back();
         HostTensor out = x;
         for (int64_t e = 0; e < x.numel(); ++e) {
           int64_t i = (e / C) % R, j = e % C;
           // upper keeps j - i >= k; lower keeps j - i <= k.
           if (upper ? j - i < k : j - i > k)
             out.data[e] = 0;
         }
         return out;
       }},
      {"ReduceSum", [](auto &n, auto &in) { return reduce(n, in, false); }},
      {"ReduceMean", [](auto &n, auto &in) { return reduce(n, in, true); }},
  });
}

const std::map<std::string, Eval> &evaluators() {
  static const std::map<std::string, Eval> table = [] {
    std::map<std::string, Eval> t;
    addElementwiseEvaluators(t);
    addShapeEvaluators(t);
    addIndexingEvaluators(t);
    return t;
  }();
  return table;
}

} // namespace

std::vector<int64_t> broadcastShapes(const std::vector<int64_t> &a,
                                     const std::vector<int64_t> &b) {
  return broadcastShape(a, b);
}

int64_t onnxAxis(int64_t axis, int64_t rank) { return axisOf(axis, rank); }

std::vector<int64_t> unsqueezedShape(const std::vector<int64_t> &x,
                                     const std::vector<int64_t> &axes) {
  int64_t r = x.size() + axes.size();
  std::vector<bool> added(r, false);
  for (int64_t a : axes) {
    int64_t k = axisOf(a, r);
    if (added[k])
      bad("an Unsqueeze axis is repeated");
    added[k] = true;
  }
  std::vector<int64_t> out;
  size_t from = 0;
  for (int64_t d = 0; d < r; ++d)
    out.push_back(added[d] ? 1 : x.at(from++));
  return out;
}

std::vector<int64_t> squeezedShape(const std::vector<int64_t> &x,
                                   const std::vector<int64_t> &axes) {
  int64_t r = x.size();
  std::vector<bool> drop(r, false);
  for (int64_t d = 0; d < r; ++d)
    drop[d] = axes.empty() && x[d] == 1;
  for (int64_t a : axes) {
    int64_t k = axisOf(a, r);
    if (x[k] != 1)
      bad("Squeeze of an axis of size " + std::to_string(x[k]));
    drop[k] = true;
  }
  std::vector<int64_t> out;
  for (int64_t d = 0; d < r; ++d)
    if (!drop[d])
      out.push_back(x[d]);
  return out;
}

bool canEvaluate(const std::string &op) { return evaluators().count(op) != 0; }

HostTensor evaluate(const onnx::NodeProto &n,
                    const std::vector<const HostTensor *> &in) {
  auto it = evaluators().find(n.op_type());
  if (it == evaluators().end())
    bad("op '" + n.op_type() + "' is not evaluated on constants");
  if (in.empty() || !in[0])
    bad("expected at least one input");
  return it->second(n, in);
}

} // namespace autoddl::import
