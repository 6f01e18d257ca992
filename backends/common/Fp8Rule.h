// Which linears of an fp8 plan run their GEMMs in FP8 (docs/codegen.md
// "FP8"): the one rule the CUDA runtime (backends/cuda/kernels/Fp8Linear.cu)
// runs and the planner prices (cost_model's GEMM pricing through
// planner/Pricing.cpp). Header-only, plain C++17, so codegen copies it with
// backends/common.
#ifndef AUTODDL_BACKENDS_COMMON_FP8RULE_H
#define AUTODDL_BACKENDS_COMMON_FP8RULE_H

#include <cstdint>

namespace autoddl::rt {

/// The bytes the casts of one FP8 linear move (N rows, K input, O output
/// features), as backends/cuda/kernels/Fp8Linear.cu runs them in a step:
/// each cast reads bf16 (2 bytes) and writes fp8 (1 a layout). Per
/// micro-batch the forward casts x, the input gradient dY, the weight
/// gradient dY and x (both transposed); the weight is cast once a step
/// (weightPerStep), into [O,K] for the forward and [K,O] for the input
/// gradient in one read (dxInFp8 false: the input gradient runs in bf16,
/// through a fused GELU, and reads no FP8 weight).
struct Fp8CastBytes {
  double forward, inputGrad, weightGrad, weightPerStep;
};
inline Fp8CastBytes fp8CastBytes(int64_t N, int64_t K, int64_t O,
                                 bool dxInFp8 = true) {
  const double nk = double(N) * double(K), ko = double(K) * double(O),
               no = double(N) * double(O);
  // The weight gradient's dY^T comes out of the input gradient's read of dY
  // (fp8_linear_backward, or the input-gradient call for the weight-gradient
  // call right after it): one more byte a value, not three.
  return {3 * nk, 3 * no, no + 3 * nk, (dxInFp8 ? 4 : 3) * ko};
}

/// Bytes of an FP8 linear's weight copy for the step (Fp8Linear.cu
/// weight_operand): the 1/scale in 256 bytes, then each layout its FP8 GEMMs
/// read (1 or 2: [O,K], [K,O]) 256-byte aligned.
inline int64_t fp8WeightCopyBytes(int64_t K, int64_t O, int layouts) {
  return 256 + int64_t(layouts) * ((K * O + 255) / 256 * 256);
}

/// FP8 pays where the time its three GEMMs save (6 N K O flops at twice the
/// bf16 rate) exceeds the time of its casts, which are memory-bound (when
/// the bar was set every GEMM cast its weight: 6 (NK + KO + NO) bytes a
/// micro-batch; the weight's casts are once a step now, so the bar is
/// conservative by up to the KO term). On an H100 SXM (989 bf16 TFLOP/s
/// dense, 3.35 TB/s) that is
///   6 N K O (1/989e12 - 1/1979e12) > 6 (NK + KO + NO) / 3.35e12
/// i.e. N K O / (NK + KO + NO) > ~590 elements (with the efficiency
/// measured for bf16 GEMMs, 0.8, one assumed for FP8 ones, 0.65, and casts
/// at 0.8 of the bandwidth: ~650); the H200's faster memory lowers the bar,
/// so one constant serves Hopper. At 16k tokens GPT-2 124M's block linears
/// fall short (qkv 556, fc and proj 592, the attention projection 375) and
/// run in bf16; gpt2-medium runs qkv (734), fc and proj (780) in FP8, its
/// attention projection (496) in bf16; gpt2-xl at 8k tokens runs all four
/// (729-1107); a 7B layer (4096 wide) all, at 1k tokens too (683).
/// Transformer Engine fuses the casts into the LayerNorm and GELU before the
/// GEMMs, which lowers this bar a lot; the runtime does not (yet).
constexpr double kFp8MinIntensity = 600;

/// cuBLASLt's FP8 GEMMs want every dimension (rows, leading dimensions) a
/// multiple of 16 elements.
constexpr int64_t kFp8Align = 16;

/// Whether N, K, O suit cuBLASLt's FP8 kernels at all.
inline bool fp8Aligned(int64_t N, int64_t K, int64_t O) {
  return N > 0 && K > 0 && O > 0 && N % kFp8Align == 0 && K % kFp8Align == 0 &&
         O % kFp8Align == 0;
}

/// Whether an FP8 linear of N rows, K input and O output features runs in
/// FP8 (the rest of its plan's precision: bf16).
/// `minIntensity`: the rule's bar (a program's AUTODDL_FP8_MIN_INTENSITY
/// moves it to measure; the planner prices the default).
inline bool fp8RunsLinear(int64_t N, int64_t K, int64_t O,
                          double minIntensity = kFp8MinIntensity) {
  if (!fp8Aligned(N, K, O))
    return false;
  const double n = double(N), k = double(K), o = double(O);
  return n * k * o >= minIntensity * (n * k + k * o + n * o);
}

/// Bytes of the CUDA runtime's FP8 scratch for one FP8 linear in a step
/// (the weights' copies apart): the activations' FP8 operands, carved from
/// one grow-only buffer, the 1/scales in 256 bytes before them and the
/// second operand 256-byte aligned (backends/cuda/kernels/Fp8Linear.cu). The
/// forward holds x; the backward x^T, then dY in both layouts (the first
/// rounded up to 256 bytes). Outside a step (or AUTODDL_FP8_CAST_ONCE=0) the
/// weight's layout joins them.
inline double fp8Scratch(int64_t N, int64_t K, int64_t O) {
  const double nk = double(N) * double(K), no = double(N) * double(O);
  const double noAligned = double((N * O + 255) / 256 * 256);
  return noAligned + no + nk + 512;
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_FP8RULE_H
