// The scalar formulas of the ONNX primitives' elementwise families: each
// unary op's value and derivative, each binary op's value and gradients. The
// one description both backends instantiate: the host kernels of
// OnnxKernels.h (float in programs, double in the finite-difference tests)
// and the CUDA kernels of backends/cuda/kernels/Primitive.cu (fp32 math on
// act_t / fp32 data), so a formula is written once.
// Header-only, plain C++17 (+ __host__ __device__ under nvcc).
#ifndef AUTODDL_BACKENDS_COMMON_ONNXSCALAR_H
#define AUTODDL_BACKENDS_COMMON_ONNXSCALAR_H

#include <cmath>

#ifdef __CUDACC__
#define AUTODDL_ONNX_HD __host__ __device__
#else
#define AUTODDL_ONNX_HD
#endif

namespace autoddl::onnx_kernels {

// ---- Elementwise unary
// -------------------------------------------------------

enum class Unary {
  Identity, // also Reshape, Flatten, Squeeze, Unsqueeze, Cast to float
  Relu,
  Sigmoid,
  Tanh,
  Exp,
  Log,
  Neg,
  Sqrt,
  Reciprocal,
  Erf,
  Abs,
  Softplus,
  Sin,
  Cos,
  IsNaN, // 1 or 0 (a boolean result held as 0/1), no gradient
  // Piecewise constant: no gradient.
  Ceil,
  Floor,
  Round, // half to even, as ONNX
  Sign,
  Not // a boolean held as 0/1
};

template <typename T> AUTODDL_ONNX_HD T unaryValue(Unary op, T x) {
  switch (op) {
  case Unary::Identity:
    return x;
  case Unary::Relu:
    return x > T(0) ? x : T(0);
  case Unary::Sigmoid:
    return T(1) / (T(1) + std::exp(-x));
  case Unary::Tanh:
    return std::tanh(x);
  case Unary::Exp:
    return std::exp(x);
  case Unary::Log:
    return std::log(x);
  case Unary::Neg:
    return -x;
  case Unary::Sqrt:
    return std::sqrt(x);
  case Unary::Reciprocal:
    return T(1) / x;
  case Unary::Erf:
    return std::erf(x);
  case Unary::Abs:
    return std::fabs(x);
  case Unary::Softplus: // log(1 + e^x), without overflow for large x
    return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  case Unary::Sin:
    return std::sin(x);
  case Unary::Cos:
    return std::cos(x);
  case Unary::IsNaN:
    return std::isnan(x) ? T(1) : T(0);
  case Unary::Ceil:
    return std::ceil(x);
  case Unary::Floor:
    return std::floor(x);
  case Unary::Round:
    return std::nearbyint(x); // the default rounding mode: to even
  case Unary::Sign:
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  case Unary::Not:
    return x != T(0) ? T(0) : T(1);
  }
  return x;
}

/// dy/dx at x, given y = f(x).
template <typename T> AUTODDL_ONNX_HD T unaryDerivative(Unary op, T x, T y) {
  switch (op) {
  case Unary::Identity:
    return T(1);
  case Unary::Relu:
    return x > T(0) ? T(1) : T(0);
  case Unary::Sigmoid:
    return y * (T(1) - y);
  case Unary::Tanh:
    return T(1) - y * y;
  case Unary::Exp:
    return y;
  case Unary::Log:
    return T(1) / x;
  case Unary::Neg:
    return T(-1);
  case Unary::Sqrt:
    return T(0.5) / y;
  case Unary::Reciprocal:
    return -y * y;
  case Unary::Erf: // 2/sqrt(pi) e^(-x^2)
    return T(1.1283791670955126) * std::exp(-x * x);
  case Unary::Abs:
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  case Unary::Softplus:
    return T(1) / (T(1) + std::exp(-x));
  case Unary::Sin:
    return std::cos(x);
  case Unary::Cos:
    return -std::sin(x);
  case Unary::IsNaN:
  case Unary::Ceil:
  case Unary::Floor:
  case Unary::Round:
  case Unary::Sign:
  case Unary::Not:
    return T(0);
  }
  return T(1);
}

// ---- Elementwise binary
// ------------------------------------------------------

enum class Binary {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Max, // the gradient to the larger (to a on a tie)
  Min, // the gradient to the smaller (to a on a tie)
  // Booleans held as 0/1: no gradient.
  Equal,
  Greater,
  GreaterOrEqual,
  Less,
  LessOrEqual,
  And,
  Or,
  Xor
};

template <typename T> AUTODDL_ONNX_HD T binaryValue(Binary op, T a, T b) {
  switch (op) {
  case Binary::Add:
    return a + b;
  case Binary::Sub:
    return a - b;
  case Binary::Mul:
    return a * b;
  case Binary::Div:
    return a / b;
  case Binary::Pow:
    return std::pow(a, b);
  case Binary::Max:
    return a >= b ? a : b;
  case Binary::Min:
    return a <= b ? a : b;
  case Binary::Equal:
    return T(a == b);
  case Binary::Greater:
    return T(a > b);
  case Binary::GreaterOrEqual:
    return T(a >= b);
  case Binary::Less:
    return T(a < b);
  case Binary::LessOrEqual:
    return T(a <= b);
  case Binary::And:
    return T(a != T(0) && b != T(0));
  case Binary::Or:
    return T(a != T(0) || b != T(0));
  case Binary::Xor:
    return T((a != T(0)) != (b != T(0)));
  }
  return a;
}

/// The vector-Jacobian product of a op b at (a, b) for the output gradient g:
/// *ga (to a) and *gb (to b). wantB false: *gb is not needed (Pow's d/db
/// takes a logarithm of a, NaN for a negative base, so only where asked).
template <typename T>
AUTODDL_ONNX_HD void binaryGrad(Binary op, T a, T b, T g, bool wantB, T *ga,
                                T *gb) {
  using std::log;
  using std::pow;
  *ga = g;
  *gb = g;
  switch (op) {
  case Binary::Add:
    break;
  case Binary::Sub:
    *gb = -g;
    break;
  case Binary::Mul:
    *ga = g * b;
    *gb = g * a;
    break;
  case Binary::Div:
    *ga = g / b;
    *gb = -g * a / (b * b);
    break;
  case Binary::Pow: // d/da = b a^(b-1); d/db = a^b ln a
    *ga = g * b * pow(a, b - T(1));
    *gb = wantB ? g * pow(a, b) * log(a) : T(0);
    break;
  case Binary::Max:
    *ga = a >= b ? g : T(0);
    *gb = a >= b ? T(0) : g;
    break;
  case Binary::Min:
    *ga = a <= b ? g : T(0);
    *gb = a <= b ? T(0) : g;
    break;
  default: // booleans
    *ga = *gb = T(0);
  }
}

} // namespace autoddl::onnx_kernels

#endif // AUTODDL_BACKENDS_COMMON_ONNXSCALAR_H
