// Which linears of an fp8 plan run their GEMMs in FP8 (docs/codegen.md
// "FP8"): the one rule the CUDA runtime (backends/cuda/kernels/Fp8Linear.cu)
// runs and the planner prices (cost_model's GEMM pricing through
// planner/Pricing.cpp). Header-only, plain C++17, so codegen copies it with
// backends/common.
#ifndef AUTODDL_BACKENDS_COMMON_FP8RULE_H
#define AUTODDL_BACKENDS_COMMON_FP8RULE_H

#include <cstdint>

namespace autoddl::rt {

/// FP8 pays where the time its three GEMMs save (forward, input and weight
/// gradient: 3 N K O multiply-adds at twice the bf16 rate) exceeds the time
/// of its casts, which are memory-bound. The casts of one linear and
/// micro-batch move about 6 NK + 6 KO + 4 NO bytes: x read as bf16 (2) and
/// written as fp8 (1) in the forward and again, transposed, in the backward;
/// the same for W; dY read (2) and written twice (dY and dY^T). On an H100
/// SXM (989 bf16 TFLOP/s dense, 3.35 TB/s) that is
///   3 N K O / 989e12 > (6 NK + 6 KO + 4 NO) / 3.35e12
/// i.e. N K O / (6 NK + 6 KO + 4 NO) > ~98 elements; the H200's faster memory
/// only lowers the bar, so one constant serves Hopper. GPT-2 124M at 16k
/// tokens: the qkv (768 -> 2304, 122), fc (768 -> 3072, 133) and proj
/// (3072 -> 768, 105) GEMMs run in FP8, the attention projection
/// (768 -> 768, 75) in bf16; every block linear of gpt2-large and larger
/// runs in FP8.
constexpr double kFp8MinIntensity = 100;

/// cuBLASLt's FP8 GEMMs want every dimension (rows, leading dimensions) a
/// multiple of 16 elements.
constexpr int64_t kFp8Align = 16;

/// Whether an FP8 linear of N rows, K input and O output features runs in
/// FP8 (the rest of its plan's precision: bf16).
inline bool fp8RunsLinear(int64_t N, int64_t K, int64_t O) {
  if (N <= 0 || K <= 0 || O <= 0 || N % kFp8Align || K % kFp8Align ||
      O % kFp8Align)
    return false;
  const double n = double(N), k = double(K), o = double(O);
  return n * k * o >= kFp8MinIntensity * (6 * n * k + 6 * k * o + 4 * n * o);
}

/// Bytes of the CUDA runtime's FP8 scratch for one FP8 linear: each of its
/// GEMMs casts two operands into one grow-only buffer (x and W; dY and W^T;
/// dY^T and x^T), the 1/scales in 256 bytes before them and the second
/// operand 256-byte aligned (backends/cuda/kernels/Fp8Linear.cu).
inline double fp8Scratch(int64_t N, int64_t K, int64_t O) {
  const double nk = double(N) * double(K), ko = double(K) * double(O),
               no = double(N) * double(O);
  const double pairs[] = {nk + ko, no + ko, no + nk};
  double m = 0;
  for (double p : pairs)
    m = p > m ? p : m;
  return m + 512;
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_FP8RULE_H
