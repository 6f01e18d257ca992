// GEMM-based layers on the GPU: linear, matmul (batched), bias_add. GEMMs go
// through cuBLASLt (bf16 A/B, fp32 accumulation; fp32 A/B/C without TF32 under
// AUTODDL_FP32); descriptors and heuristic results are cached per shape.
// Conventions as backends/cpu/kernels/Linear.h: forward overwrites, backward
// accumulates (+=), a null gradient = not needed. Parameter gradients are fp32.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_LINEAR_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_LINEAR_H

#include "backends/cuda/Runtime.h"

namespace autoddl::rt {

/// out[N,O] = x[N,O] + bias[O] broadcast over rows (out may alias x).
void bias_add_forward(act_t *out, const act_t *x, const act_t *bias, int64_t N,
                      int64_t O);
/// dx[N,O] += dout (dx = dout without accumulate_dx: for an input gradient
/// this call alone writes); dbias[O] += column sums of dout[N,O] (fp32).
void bias_add_backward(act_t *dx, float *dbias, const act_t *dout, int64_t N,
                       int64_t O, bool accumulate_dx = true);
/// out[N,O] = relu(x + bias): bias_add_forward then relu_forward in one pass
/// (the generated program's bias_add before a ReLU: codegen's
/// planBiasReluFusion). out may alias x.
void bias_relu_forward(act_t *out, const act_t *x, const act_t *bias,
                       int64_t N, int64_t O);
/// Their backward from the ReLU's output gradient dout and output `out`
/// (bias_relu_forward's): g = dout where out > 0, else 0; dx += g (= g
/// without accumulate_dx); dbias += column sums of g.
void bias_relu_backward(act_t *dx, float *dbias, const act_t *dout,
                        const act_t *out, int64_t N, int64_t O,
                        bool accumulate_dx = true);

/// out[N,O] = x[N,K] W + bias[O] (bias may be null; fused as the cuBLASLt
/// bias epilogue). transpose_weight: w is [O,K] (out = x w^T); else [K,O].
void linear_forward(act_t *out, const act_t *x, const act_t *w,
                    const act_t *bias, int64_t N, int64_t K, int64_t O,
                    bool transpose_weight);
/// dx[N,K] += dout W^T; dw (fp32) += x^T dout ([K,O]) or dout^T x ([O,K]);
/// dbias[O] (fp32) += sum_n dout. accumulate_dx = false: dx = dout W^T (the
/// GEMM's beta 0), for an input gradient this call alone writes, which then
/// needs no zeroing.
void linear_backward(act_t *dx, float *dw, float *dbias, const act_t *dout,
                     const act_t *x, const act_t *w, int64_t N, int64_t K,
                     int64_t O, bool transpose_weight,
                     bool accumulate_dx = true);

/// out[N,O] = gelu(pre) with pre[N,O] = x[N,K] W + bias (tanh GELU; bias may
/// be null): linear_forward then gelu_forward, as one GEMM with a GELU
/// epilogue where cuBLASLt has one (O % 8 == 0).
void linear_gelu_forward(act_t *out, act_t *pre, const act_t *x, const act_t *w,
                         const act_t *bias, int64_t N, int64_t K, int64_t O,
                         bool transpose_weight);
/// out[N,O] = residual + x[N,K] W + bias (bias may be null; out must not
/// alias residual): linear_forward then add_forward, as one GEMM reading the
/// residual as its C (beta = 1) where cuBLASLt has an algorithm.
void linear_residual_forward(act_t *out, const act_t *residual, const act_t *x,
                             const act_t *w, const act_t *bias, int64_t N,
                             int64_t K, int64_t O, bool transpose_weight);
/// dpre[N,K] = gelu'(pre) * (dout[N,O] W^T): the input gradient of a linear
/// whose input is gelu(pre), carried on through the GELU (overwrites dpre:
/// for a pre whose only consumer is that GELU, and a GELU output whose only
/// consumer is this linear). One GEMM with a GELU-gradient epilogue where
/// cuBLASLt has one (K % 8 == 0), else the GEMM and gelu_backward.
void linear_backward_dgelu(act_t *dpre, const act_t *dout, const act_t *w,
                           const act_t *pre, int64_t N, int64_t K, int64_t O,
                           bool transpose_weight);

/// out[Bt,M,N] = a[Bt,M,K] b[Bt,K,N] (or b[Bt,N,K] with transpose_b), per
/// batch (one strided-batched GEMM).
void matmul_forward(act_t *out, const act_t *a, const act_t *b, int64_t Bt,
                    int64_t M, int64_t K, int64_t N, bool transpose_b);
/// da[Bt,M,K] += dout b^T (or dout b); db += a^T dout ([K,N]) or dout^T a
/// ([N,K]). Both are activation gradients (act_t).
void matmul_backward(act_t *da, act_t *db, const act_t *dout, const act_t *a,
                     const act_t *b, int64_t Bt, int64_t M, int64_t K,
                     int64_t N, bool transpose_b);

/// Number of distinct GEMM shapes whose cuBLASLt plan is cached (tests).
int64_t gemm_plan_cache_size();

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_LINEAR_H
