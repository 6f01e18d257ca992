// Elementwise ops on the GPU: add (and add + relu), mul, gelu (tanh and
// exact), relu, silu, swiglu, scale, add_into. 128-bit vector loads (8 bf16 / 4
// fp32) with a scalar tail, fp32 math. Conventions as
// backends/cpu/kernels/Elementwise.h; sizes are element counts.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_ELEMENTWISE_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_ELEMENTWISE_H

#include "backends/cuda/Runtime.h"

namespace autoddl::rt {

/// out[n] = a + b.
void add_forward(act_t *out, const act_t *a, const act_t *b, int64_t n);
/// da[n] += dout; db[n] += dout. A false accumulate flag stores that
/// gradient (=) instead (codegen's, where this call is its first writer: the
/// buffer is then never zeroed nor read); the other backwards here alike.
void add_backward(act_t *da, act_t *db, const act_t *dout, int64_t n,
                  bool accumulate_da = true, bool accumulate_db = true);
/// out[n] = a * b.
void mul_forward(act_t *out, const act_t *a, const act_t *b, int64_t n);
/// da[n] += dout * b; db[n] += dout * a.
void mul_backward(act_t *da, act_t *db, const act_t *dout, const act_t *a,
                  const act_t *b, int64_t n, bool accumulate_da = true,
                  bool accumulate_db = true);
/// out[n] = max(a + b, 0): an add and the ReLU after it (codegen's
/// planProducerReluFusion; the same values as the two apart).
void add_relu_forward(act_t *out, const act_t *a, const act_t *b, int64_t n);
/// da[n] += dout, db[n] += dout where out > 0 (out: the forward's; as
/// relu_backward's mask on the sum).
void add_relu_backward(act_t *da, act_t *db, const act_t *out,
                       const act_t *dout, int64_t n, bool accumulate_da = true,
                       bool accumulate_db = true);
/// dst[n] += src (dst = src without accumulate).
void add_into(act_t *dst, const act_t *src, int64_t n, bool accumulate = true);

/// x[n] *= s.
void scale_inplace(act_t *x, float s, int64_t n);
#ifndef AUTODDL_FP32
/// x[n] *= s on fp32 data (parameter gradients: averaging, clipping).
void scale_inplace(float *x, float s, int64_t n);
#endif

/// out[n] = gelu(x); tanh_approximation selects 0.5x(1+tanh(sqrt(2/pi)(x +
/// 0.044715x^3))) over 0.5x(1+erf(x/sqrt 2)).
void gelu_forward(act_t *out, const act_t *x, int64_t n,
                  bool tanh_approximation);
/// dx[n] += dout * gelu'(x).
void gelu_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t n,
                   bool tanh_approximation, bool accumulate_dx = true);
/// out[n] = max(x, 0).
void relu_forward(act_t *out, const act_t *x, int64_t n);
/// dx[n] += dout where x > 0.
void relu_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t n,
                   bool accumulate_dx = true);
/// out[n] = x if x > 0 else exp(x) - 1 (ELU, alpha 1).
void elu_forward(act_t *out, const act_t *x, int64_t n);
/// dx[n] += dout * (1 if x > 0 else exp(x)).
void elu_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t n,
                  bool accumulate_dx = true);
/// out[n] = x * sigmoid(x).
void silu_forward(act_t *out, const act_t *x, int64_t n);
/// dx[n] += dout * (s + x s (1 - s)), s = sigmoid(x).
void silu_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t n,
                   bool accumulate_dx = true);
/// out[n] = silu(gate) * up.
void swiglu_forward(act_t *out, const act_t *gate, const act_t *up, int64_t n);
/// dgate[n] += dout * up * silu'(gate); dup[n] += dout * silu(gate).
void swiglu_backward(act_t *dgate, act_t *dup, const act_t *gate,
                     const act_t *up, const act_t *dout, int64_t n,
                     bool accumulate_dgate = true, bool accumulate_dup = true);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_ELEMENTWISE_H
