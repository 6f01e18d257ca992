// One ONNX node outside the model vocabulary, as a program runs it: its op
// type, attributes, shapes and constant index inputs resolved once into a
// Primitive, then forward and backward through backends/common/OnnxKernels.h.
// The one table of which ONNX ops run (primitiveSupport): the importer asks
// it before letting a primitive through, codegen builds the same Primitive
// at generation time and again in the generated program, and the node tests
// (tests/onnx/PrimitiveKernelTests.cpp) run it on libonnx-testdata.
// Header-only, plain C++17, so codegen copies it with backends/common.
#ifndef AUTODDL_BACKENDS_COMMON_ONNXPRIMITIVE_H
#define AUTODDL_BACKENDS_COMMON_ONNXPRIMITIVE_H

#include "backends/common/OnnxImage.h"
#include "backends/common/OnnxKernels.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace autoddl::onnx_kernels {

/// A node's ONNX attributes by kind: int, float and int-list attributes.
struct PrimitiveAttrs {
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> floats;
  std::map<std::string, Dims> lists;
};

struct Primitive {
  enum class Kind {
    Unary,
    Binary,
    Where,
    Expand,
    Transpose,
    Slice,
    Concat,
    Reduce,
    Softmax,
    LogSoftmax,
    Matmul,
    Dropout,
    Pool,     // MaxPool, AveragePool (OnnxImage.h)
    BatchNorm // BatchNormalization (OnnxImage.h)
  };
  std::string op; // the ONNX op type
  Kind kind = Kind::Unary;
  std::vector<Dims> in; // operand shapes, ONNX order
  Dims out;
  // Per operand: read as data at run time (false: an index input such as
  // Slice's starts or Reshape's shape, resolved here), and has a gradient.
  std::vector<bool> data, differentiable;
  Unary unary = Unary::Identity;
  Binary binary = Binary::Add;
  int64_t axis = 0; // Softmax, LogSoftmax, Concat
  Dims perm, axes;  // Transpose; Reduce (non-negative)
  Reduce reduce = Reduce::Sum;
  Window window;          // Slice
  double ratio = 0;       // Dropout (training_mode true)
  PoolWindow pool;        // Pool
  double epsilon = 1e-5;  // BatchNorm
  bool batchStats = true; // BatchNorm: statistics of the batch, not operands
  // BatchNorm with batch statistics: ONNX's momentum (PyTorch's is 1 minus
  // it); running = momentum running + (1 - momentum) batch.
  double momentum = 0.9;
  // The CUDA program's channels-last storage (channelsLastPrimitive): operand
  // 0 and the result, shaped [N, C, spatial...] as ONNX says, are stored
  // [N, spatial..., C]. Never set in the CPU program.
  bool channelsLast = false;
};

namespace detail {
inline int64_t axisIn(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }
/// Whether a (after axisIn) names an axis of a rank-`rank` tensor.
inline bool axisOk(int64_t a, int64_t rank) { return a >= 0 && a < rank; }
inline const std::map<std::string, Unary> &unaries() {
  static const std::map<std::string, Unary> m = {
      {"Identity", Unary::Identity},
      {"Reshape", Unary::Identity},
      {"Flatten", Unary::Identity},
      {"Squeeze", Unary::Identity},
      {"Unsqueeze", Unary::Identity},
      {"Cast", Unary::Identity},
      {"Relu", Unary::Relu},
      {"Sigmoid", Unary::Sigmoid},
      {"Tanh", Unary::Tanh},
      {"Exp", Unary::Exp},
      {"Log", Unary::Log},
      {"Neg", Unary::Neg},
      {"Sqrt", Unary::Sqrt},
      {"Reciprocal", Unary::Reciprocal},
      {"Erf", Unary::Erf},
      {"Abs", Unary::Abs},
      {"Softplus", Unary::Softplus},
      {"Sin", Unary::Sin},
      {"Cos", Unary::Cos},
      {"IsNaN", Unary::IsNaN},
      {"Ceil", Unary::Ceil},
      {"Floor", Unary::Floor},
      {"Round", Unary::Round},
      {"Sign", Unary::Sign},
      {"Not", Unary::Not},
      {"CastLike", Unary::Identity}};
  return m;
}
inline const std::map<std::string, Binary> &binaries() {
  static const std::map<std::string, Binary> m = {
      {"Add", Binary::Add},         {"Sub", Binary::Sub},
      {"Mul", Binary::Mul},         {"Div", Binary::Div},
      {"Pow", Binary::Pow},         {"Max", Binary::Max},
      {"Min", Binary::Min},         {"Equal", Binary::Equal},
      {"Greater", Binary::Greater}, {"GreaterOrEqual", Binary::GreaterOrEqual},
      {"Less", Binary::Less},       {"LessOrEqual", Binary::LessOrEqual},
      {"And", Binary::And},         {"Or", Binary::Or},
      {"Xor", Binary::Xor}};
  return m;
}
inline Dims ints(const std::vector<double> &v) {
  Dims r;
  for (double d : v)
    r.push_back(d >= 9.2e18    ? INT64_MAX
                : d <= -9.2e18 ? INT64_MIN
                               : int64_t(d));
  return r;
}
} // namespace detail

/// Whether ONNX op `op` runs as a primitive (forward and backward).
inline bool primitiveSupported(const std::string &op) {
  static const char *others[] = {"Where",
                                 "Expand",
                                 "Transpose",
                                 "Slice",
                                 "Concat",
                                 "ReduceSum",
                                 "ReduceMean",
                                 "ReduceMax",
                                 "Softmax",
                                 "LogSoftmax",
                                 "MatMul",
                                 "Dropout",
                                 "MaxPool",
                                 "AveragePool",
                                 "GlobalAveragePool",
                                 "GlobalMaxPool",
                                 "BatchNormalization"};
  if (detail::unaries().count(op) || detail::binaries().count(op))
    return true;
  for (const char *o : others)
    if (op == o)
      return true;
  return false;
}

namespace detail {
/// makePrimitive's image ops, p's shapes and operand flags already set:
/// pools (explicit pads: the importer resolves auto_pad, a string the
/// attributes do not carry), global pools (a Reduce over the spatial axes)
/// and BatchNormalization. Training mode, or only three operands (X, scale,
/// B: how the importer keeps every BatchNormalization), normalises with the
/// batch's statistics, the mean and var operands unread.
inline std::string makeImagePrimitive(Primitive &p, const std::string &op,
                                      const PrimitiveAttrs &attrs) {
  auto intAttr = [&](const char *name, int64_t dflt) {
    auto it = attrs.ints.find(name);
    return it == attrs.ints.end() ? dflt : it->second;
  };
  auto list = [&](const char *name) {
    auto it = attrs.lists.find(name);
    return it == attrs.lists.end() ? Dims() : it->second;
  };
  const Dims &xs = p.in[0];
  // BatchNormalization normalises [N, C] too (BatchNorm1d); pools need axes.
  if (xs.size() < (op == "BatchNormalization" ? 2u : 3u))
    return op + " of a tensor of rank below " +
           (op == "BatchNormalization" ? "2" : "3");
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    p.kind = Primitive::Kind::Reduce;
    p.reduce = op == "GlobalMaxPool" ? Reduce::Max : Reduce::Mean;
    for (int64_t a = 2; a < int64_t(xs.size()); ++a)
      p.axes.push_back(a);
    return keptShape(xs, p.axes) == p.out
               ? ""
               : op + "'s result is not [N, C, 1...]";
  }
  if (op == "BatchNormalization") {
    p.kind = Primitive::Kind::BatchNorm;
    const size_t n = p.in.size();
    if (n != 3 && n != 5)
      return "BatchNormalization takes three or five operands";
    const Dims channel = {xs[1]};
    for (size_t k = 1; k < n; ++k)
      if (p.in[k] != channel)
        return "BatchNormalization's scale, bias, mean and var are not [C]";
    auto eps = attrs.floats.find("epsilon");
    p.epsilon = eps == attrs.floats.end() ? 1e-5 : eps->second;
    auto momentum = attrs.floats.find("momentum");
    p.momentum = momentum == attrs.floats.end() ? 0.9 : momentum->second;
    p.batchStats = n == 3 || intAttr("training_mode", 0) != 0;
    for (size_t k = 3; k < n; ++k) { // running statistics: never trained
      p.differentiable[k] = false;
      p.data[k] = !p.batchStats;
    }
    return p.out == xs ? ""
                       : "BatchNormalization's result is not its input's shape";
  }
  // MaxPool, AveragePool
  p.kind = Primitive::Kind::Pool;
  if (p.in.size() != 1)
    return op + " takes one operand";
  if (intAttr("storage_order", 0) != 0)
    return "MaxPool's storage_order 1 is not supported";
  if (std::string e =
          poolWindow(xs, list("kernel_shape"), list("strides"), list("pads"),
                     list("dilations"), intAttr("ceil_mode", 0) != 0, p.pool);
      !e.empty())
    return e;
  p.pool.max = op == "MaxPool";
  p.pool.countPad = intAttr("count_include_pad", 0) != 0;
  return poolShape(xs, p.pool) == p.out ? ""
                                        : op + "'s window is not its result";
}
} // namespace detail

/// Resolves node `op` with attributes `attrs`, operand shapes `in`, result
/// shape `out` and, per operand, its values where it is a constant of the
/// model (empty otherwise) into `p`. Returns "" or why the node does not run
/// ("Cast to a type other than float", "Slice of a non-constant start").
inline std::string
makePrimitive(Primitive &p, const std::string &op, const PrimitiveAttrs &attrs,
              const std::vector<Dims> &in, const Dims &out,
              const std::vector<std::vector<double>> &consts) {
  using detail::axisIn;
  using detail::axisOk;
  p = Primitive();
  p.op = op;
  p.in = in;
  p.out = out;
  const size_t n = in.size();
  p.data.assign(n, true);
  p.differentiable.assign(n, true);
  auto constant = [&](size_t k) {
    return k < consts.size() && !consts[k].empty();
  };
  auto intAttr = [&](const char *name, int64_t dflt) {
    auto it = attrs.ints.find(name);
    return it == attrs.ints.end() ? dflt : it->second;
  };
  // Operands from `first` on are index inputs: constants resolved here.
  auto indexInputsFrom = [&](size_t first) -> std::string {
    for (size_t k = first; k < n; ++k) {
      p.data[k] = p.differentiable[k] = false;
      if (!constant(k) && numel(in[k]) != 0)
        return op + " of a non-constant input " + std::to_string(k);
    }
    return "";
  };
  if (n == 0)
    return op + " without operands";
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" ||
      op == "GlobalMaxPool" || op == "BatchNormalization")
    return detail::makeImagePrimitive(p, op, attrs);
  if (auto u = detail::unaries().find(op); u != detail::unaries().end()) {
    p.kind = Primitive::Kind::Unary;
    p.unary = u->second;
    // A boolean or piecewise-constant result: no gradient flows through it.
    if (unaryDerivative(p.unary, 0.5, 0.5) == 0.0 &&
        unaryDerivative(p.unary, -1.5, -1.5) == 0.0)
      p.differentiable[0] = false;
    // Cast: only to float (ONNX's FLOAT is 1), the programs' one type;
    // CastLike's second operand gives only its type (float, as the result's).
    if (op == "Cast" && intAttr("to", 1) != 1)
      return "Cast to a type other than float";
    if (p.unary == Unary::Identity && numel(in[0]) != numel(out))
      return op + " changes the element count";
    if (op == "CastLike") {
      if (n != 2)
        return "CastLike takes two operands";
      p.data[1] = p.differentiable[1] = false;
      return "";
    }
    return indexInputsFrom(1);
  }
  if (auto b = detail::binaries().find(op); b != detail::binaries().end()) {
    p.kind = Primitive::Kind::Binary;
    p.binary = b->second;
    if (p.binary >= Binary::Equal) // a boolean: no gradient
      p.differentiable.assign(n, false);
    return n == 2 ? "" : op + " takes two operands";
  }
  if (op == "Where") {
    if (n != 3)
      return "Where takes three operands";
    p.kind = Primitive::Kind::Where;
    p.differentiable[0] = false; // a condition has no gradient
    return "";
  }
  if (op == "Expand") {
    p.kind = Primitive::Kind::Expand;
    return indexInputsFrom(1);
  }
  if (op == "Transpose") {
    p.kind = Primitive::Kind::Transpose;
    const int64_t r = int64_t(in[0].size());
    auto it = attrs.lists.find("perm");
    if (it != attrs.lists.end())
      p.perm = it->second;
    else
      for (int64_t i = r - 1; i >= 0; --i)
        p.perm.push_back(i);
    if (int64_t(p.perm.size()) != r)
      return "Transpose's perm does not match the rank";
    std::vector<bool> seen(size_t(r), false);
    for (int64_t a : p.perm) {
      if (a < 0 || a >= r || seen[size_t(a)])
        return "Transpose's perm is not a permutation of the axes";
      seen[size_t(a)] = true;
    }
    return "";
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    p.kind = op == "Softmax" ? Primitive::Kind::Softmax
                             : Primitive::Kind::LogSoftmax;
    p.axis = axisIn(intAttr("axis", -1), int64_t(in[0].size()));
    return axisOk(p.axis, int64_t(in[0].size()))
               ? ""
               : op + "'s axis is out of range";
  }
  if (op == "Concat") {
    p.kind = Primitive::Kind::Concat;
    p.axis = axisIn(intAttr("axis", 0), int64_t(in[0].size()));
    return axisOk(p.axis, int64_t(in[0].size()))
               ? ""
               : "Concat's axis is out of range";
  }
  if (op == "Dropout") {
    // An absent or false training_mode is the identity (the importer passes
    // it through); a true one drops with a counter-based mask (DropoutKey).
    if (std::string e = indexInputsFrom(1); !e.empty())
      return e;
    p.ratio = n > 1 ? consts[1][0] : 0.5;
    const bool training = n > 2 && consts[2][0] != 0;
    if (!(p.ratio >= 0 && p.ratio < 1))
      return "Dropout's ratio is not in [0, 1)";
    p.kind = training && p.ratio > 0 ? Primitive::Kind::Dropout
                                     : Primitive::Kind::Unary;
    return "";
  }
  if (op == "MatMul") {
    p.kind = Primitive::Kind::Matmul;
    return n == 2 ? "" : "MatMul takes two operands";
  }
  if (op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax") {
    p.kind = Primitive::Kind::Reduce;
    p.reduce = op == "ReduceSum"    ? Reduce::Sum
               : op == "ReduceMean" ? Reduce::Mean
                                    : Reduce::Max;
    const int64_t r = int64_t(in[0].size());
    Dims axes;
    if (auto it = attrs.lists.find("axes"); it != attrs.lists.end())
      axes = it->second;
    else if (n > 1 && constant(1))
      axes = detail::ints(consts[1]);
    if (std::string e = indexInputsFrom(1); !e.empty())
      return e;
    if (axes.empty()) {
      if (intAttr("noop_with_empty_axes", 0)) { // the identity
        p.kind = Primitive::Kind::Unary;
        return "";
      }
      for (int64_t i = 0; i < r; ++i)
        axes.push_back(i);
    }
    for (int64_t a : axes) {
      const int64_t b = axisIn(a, r);
      if (!axisOk(b, r) ||
          std::find(p.axes.begin(), p.axes.end(), b) != p.axes.end())
        return op + "'s axes are out of range or repeated";
      p.axes.push_back(b);
    }
    return "";
  }
  if (op == "Slice") {
    p.kind = Primitive::Kind::Slice;
    if (std::string e = indexInputsFrom(1); !e.empty())
      return e;
    if (n < 3)
      return "Slice without starts and ends";
    const Dims &xs = in[0];
    Dims starts = detail::ints(consts[1]), ends = detail::ints(consts[2]), axes,
         steps;
    if (n > 3 && constant(3))
      axes = detail::ints(consts[3]);
    if (n > 4 && constant(4))
      steps = detail::ints(consts[4]);
    if (std::string e = sliceWindow(xs, starts, ends, axes, steps, p.window);
        !e.empty())
      return e;
    return p.window.shape == out ? "" : "Slice's window is not its result";
  }
  return op + " has no kernel";
}

/// makePrimitive for a generated program, which codegen already checked (so
/// never fails there): aborts naming the op if it does not resolve. No
/// exception, as the compiler core including this header has none.
inline Primitive onnxPrimitive(const std::string &op,
                               const PrimitiveAttrs &attrs,
                               const std::vector<Dims> &in, const Dims &out,
                               const std::vector<std::vector<double>> &consts) {
  Primitive p;
  if (std::string e = makePrimitive(p, op, attrs, in, out, consts);
      !e.empty()) {
    std::fprintf(stderr, "ONNX primitive %s: %s\n", op.c_str(), e.c_str());
    std::abort();
  }
  return p;
}

/// The ranks the CUDA kernels index (backends/cuda/kernels/Primitive.h).
constexpr int kPrimitiveMaxRank = 8;

/// What an operand of a primitive is in the generated program.
enum class OperandRole { Activation, Parameter, Constant };

/// "" or why the CUDA backend does not run p whose operands are `roles`
/// (ONNX order): a rank above kPrimitiveMaxRank; a MatMul whose operand is a
/// model constant (cuBLASLt reads act_t, constants are held fp32), whose
/// first operand is a parameter, or whose parameter is not a [K, N] weight
/// (a parameter's gradient is fp32: the linear layer's GEMM writes it); a
/// training Dropout of anything but an activation (kernels/Dropout.h).
/// Codegen refuses the op with this reason; the CUDA kernels assume it.
inline std::string primitiveCudaRefusal(const Primitive &p,
                                        const std::vector<OperandRole> &roles) {
  bool high = p.out.size() > size_t(kPrimitiveMaxRank);
  for (const Dims &s : p.in)
    high = high || s.size() > size_t(kPrimitiveMaxRank);
  if (high)
    return "a rank above " + std::to_string(kPrimitiveMaxRank) +
           " (the cuda kernels' index)";
  if (p.kind == Primitive::Kind::Pool && p.pool.in.size() > 3)
    return "a pool over more than 3 spatial axes does not run on cuda";
  if (p.kind == Primitive::Kind::Dropout && !roles.empty() &&
      roles[0] != OperandRole::Activation)
    return "a training Dropout of a parameter or constant does not run on "
           "cuda";
  if (p.kind != Primitive::Kind::Matmul || roles.size() < 2)
    return "";
  if (roles[0] == OperandRole::Constant || roles[1] == OperandRole::Constant)
    return "a MatMul of a model constant does not run on cuda (held fp32, "
           "its GEMM reads act_t)";
  if (roles[0] == OperandRole::Parameter)
    return "a MatMul whose first operand is a parameter does not run on cuda";
  if (roles[1] == OperandRole::Parameter && p.in[1].size() != 2)
    return "a MatMul of a parameter that is not a [K, N] weight does not run "
           "on cuda";
  return "";
}

/// Whether the CUDA backward of p stores its operand 0's gradient in the
/// passes that compute it, without reading it (kernels/Primitive.h
/// primitive_backward's accumulate_dx; others zero it first): pools, sum and
/// mean Reduces (ResNet's global pool), batch norms. Codegen has a first
/// writer store only these.
inline bool primitiveStoresDxInPass(const Primitive &p) {
  using K = Primitive::Kind;
  return p.kind == K::Pool || p.kind == K::BatchNorm ||
         (p.kind == K::Reduce && p.reduce != Reduce::Max);
}

/// Whether p computes the same function on channels-last storage of its
/// [N, C, H, W] operand 0 and result (codegen's layout choice,
/// codegen/emit/ChannelsLast.cpp): elementwise ops whose operands all have
/// the result's shape (codegen also asks that they be activations stored
/// alike), batch norms, 2-D pools and global pools (a reduce
/// over axes 2 and 3 keeping them). The CUDA kernels run these stored so.
inline bool channelsLastRuns(const Primitive &p) {
  using K = Primitive::Kind;
  if (p.out.size() != 4 || p.in.empty() || p.in[0].size() != 4)
    return false;
  switch (p.kind) {
  case K::Unary:
  case K::Binary: // (not Dropout: its mask is keyed by element index)
    for (size_t k = 0; k < p.in.size(); ++k)
      if (p.data[k] && p.in[k] != p.out)
        return false;
    return true;
  case K::BatchNorm:
    return true;
  case K::Pool:
    return p.pool.in.size() == 2;
  case K::Reduce:
    return p.axes == Dims{2, 3} && p.out == Dims{p.in[0][0], p.in[0][1], 1, 1};
  default:
    return false;
  }
}

/// p stored channels-last (channelsLastRuns; the generated CUDA program's
/// form of an op codegen chose so); aborts on any other, as onnxPrimitive.
inline Primitive channelsLastPrimitive(Primitive p) {
  if (!channelsLastRuns(p)) {
    std::fprintf(stderr, "ONNX primitive %s: no channels-last form\n",
                 p.op.c_str());
    std::abort();
  }
  p.channelsLast = true;
  return p;
}

/// The gather index of a data-movement primitive (Expand, Transpose, Slice):
/// y[k] = x[index[k]] (OnnxKernels.h, "Data movement").
inline Dims movementIndex(const Primitive &p) {
  switch (p.kind) {
  case Primitive::Kind::Expand:
    return broadcastIndex(p.in[0], p.out);
  case Primitive::Kind::Transpose:
    return transposeIndex(p.in[0], p.perm);
  default: // Slice
    return windowIndex(p.in[0], p.window);
  }
}

/// The forward of p: operands in ONNX order (index inputs may be null), y the
/// result; `key` keys a training Dropout's mask.
template <typename T>
void primitive_forward(const Primitive &p, const std::vector<const T *> &x,
                       T *y, const DropoutKey &key = {}) {
  switch (p.kind) {
  case Primitive::Kind::Dropout:
    dropout_forward(y, x[0], numel(p.out), p.ratio, key);
    break;
  case Primitive::Kind::Unary:
    unary_forward(p.unary, y, x[0], numel(p.out));
    break;
  case Primitive::Kind::Binary:
    binary_forward(p.binary, y, x[0], p.in[0], x[1], p.in[1], p.out);
    break;
  case Primitive::Kind::Where:
    where_forward(y, x[0], p.in[0], x[1], p.in[1], x[2], p.in[2], p.out);
    break;
  case Primitive::Kind::Expand:
  case Primitive::Kind::Transpose:
  case Primitive::Kind::Slice:
    gather(y, x[0], movementIndex(p));
    break;
  case Primitive::Kind::Concat:
    concat_forward(y, x, p.in, p.axis);
    break;
  case Primitive::Kind::Reduce:
    reduce_forward(y, x[0], p.in[0], p.axes, p.reduce);
    break;
  case Primitive::Kind::Softmax:
  case Primitive::Kind::LogSoftmax:
    softmax_forward(y, x[0], p.in[0], p.axis,
                    p.kind == Primitive::Kind::LogSoftmax);
    break;
  case Primitive::Kind::Matmul:
    matmul_forward(y, x[0], p.in[0], x[1], p.in[1]);
    break;
  case Primitive::Kind::Pool:
    pool_forward(y, x[0], p.in[0], p.pool);
    break;
  case Primitive::Kind::BatchNorm:
    batchnorm_forward(y, x[0], p.in[0], x[1], x[2],
                      p.batchStats ? nullptr : x[3],
                      p.batchStats ? nullptr : x[4], p.epsilon);
    break;
  }
}

/// The backward of p: dx[k] += the vector-Jacobian product for operand k
/// (null: not wanted), from the operands x, the result y and its gradient dy.
template <typename T>
void primitive_backward(const Primitive &p, const std::vector<T *> &dx,
                        const std::vector<const T *> &x, const T *y,
                        const T *dy) {
  switch (p.kind) {
  case Primitive::Kind::Dropout:
    dropout_backward(dx[0], y, dy, numel(p.out), p.ratio);
    break;
  case Primitive::Kind::Unary:
    unary_backward(p.unary, dx[0], x[0], y, dy, numel(p.out));
    break;
  case Primitive::Kind::Binary:
    binary_backward(p.binary, dx[0], dx[1], x[0], p.in[0], x[1], p.in[1], dy,
                    p.out);
    break;
  case Primitive::Kind::Where:
    where_backward(dx[1], dx[2], x[0], p.in[0], p.in[1], p.in[2], dy, p.out);
    break;
  case Primitive::Kind::Expand:
  case Primitive::Kind::Transpose:
  case Primitive::Kind::Slice:
    if (dx[0])
      scatterAdd(dx[0], dy, movementIndex(p));
    break;
  case Primitive::Kind::Concat:
    concat_backward(dx, p.in, dy, p.axis);
    break;
  case Primitive::Kind::Reduce:
    reduce_backward(dx[0], dy, x[0], y, p.in[0], p.axes, p.reduce);
    break;
  case Primitive::Kind::Softmax:
  case Primitive::Kind::LogSoftmax:
    softmax_backward(dx[0], y, dy, p.in[0], p.axis,
                     p.kind == Primitive::Kind::LogSoftmax);
    break;
  case Primitive::Kind::Matmul:
    matmul_backward(dx[0], dx[1], x[0], p.in[0], x[1], p.in[1], dy);
    break;
  case Primitive::Kind::Pool:
    pool_backward(dx[0], x[0], y, dy, p.in[0], p.pool);
    break;
  case Primitive::Kind::BatchNorm:
    batchnorm_backward(dx[0], dx[1], dx[2], x[0], p.in[0], x[1],
                       p.batchStats ? nullptr : x[3],
                       p.batchStats ? nullptr : x[4], p.epsilon, dy);
    break;
  }
}

} // namespace autoddl::onnx_kernels

#endif // AUTODDL_BACKENDS_COMMON_ONNXPRIMITIVE_H
