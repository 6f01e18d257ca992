// Fused multi-head attention on the GPU, causal or not, with grouped-query kv
// heads; q/k/v separate or one fused qkv tensor. Conventions as
// backends/cpu/kernels/Attention.h (forward overwrites, backward accumulates
// +=, a null gradient pointer = not needed), with one difference: the forward
// saves the log-sum-exp of each score row, lse[B,H,T] (fp32, natural log),
// instead of the probabilities [B,H,T,T]; the backward recomputes them.
//
// Where the build has libcudnn, cuDNN's fused attention runs first (below).
// bf16 (act_t = __nv_bfloat16) with D in {16, 32, 64, 128}, 16-byte aligned
// q/k/v and strides that are multiples of 8: FlashAttention-2 kernels on the
// tensor cores (mma.sync m16n8k16, fp32 accumulation and softmax). Any other
// D, alignment, or the AUTODDL_FP32 build: simple CUDA-core kernels in fp32
// (correct, not fast). docs/cuda-kernels.md ("Attention (CUDA)") gives the tiling and the
// error bounds the tests check.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_ATTENTION_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_ATTENTION_H

#include "backends/common/AttentionViews.h"
#include "backends/cuda/Runtime.h"

#include <cstdint>

namespace autoddl::rt {

/// Where q, k, v live, device pointers (backends/common/AttentionViews.h).
using AttentionViews = AttentionViewsOf<act_t>;
using AttentionGradViews = AttentionGradViewsOf<act_t>;

/// out[B,T,H*D] = softmax(q k^T / sqrt(D) (+ causal mask)) v for each head h,
/// using kv head g = h / (H/G) (G divides H); lse[B,H,T] = log sum_s
/// exp(q_t k_s / sqrt(D)) over the unmasked keys s. Asynchronous, on
/// compute_stream().
void attention_forward(act_t *out, float *lse, const AttentionViews &in,
                       int64_t B, int64_t T, int64_t H, int64_t G, int64_t D,
                       bool causal);

/// Accumulates dq, dk, dv (+=) from dout[B,T,H*D], the forward's out and lse:
/// dv += P^T dout; dS = P (dP - rowsum(dout o out)) with dP = dout v^T and P
/// recomputed from lse; dq += dS k / sqrt(D); dk += dS^T q / sqrt(D). kv heads
/// shared by a group of q heads sum their contributions. accumulate = false:
/// stores them instead (=), for gradients this call alone writes, which then
/// need no zeroing. Uses a grow-only fp32 workspace (B*T*H*D + B*H*T floats)
/// kept per device. Asynchronous.
void attention_backward(const AttentionGradViews &grad, const act_t *dout,
                        const act_t *out, const float *lse,
                        const AttentionViews &in, int64_t B, int64_t T,
                        int64_t H, int64_t G, int64_t D, bool causal,
                        bool accumulate = true);

/// Floats of the lse buffer the program allocates for one attention call.
inline int64_t attention_saved_floats(int64_t B, int64_t H, int64_t T) {
  return B * H * T;
}

/// True when attention_forward/backward take the tensor-core path for these
/// arguments (else the simple fp32 CUDA-core kernels); for tests and
/// benchmarks.
bool attention_uses_tensor_cores(const AttentionViews &in, int64_t D);

// cuDNN (AttentionCudnn.h): where the build found libcudnn (bf16 builds),
// attention_forward/backward run cuDNN's fused flash attention for the shapes
// cuDNN takes (asked once a shape; the plan is cached) and the kernels above
// for the rest. Both save the same lse, so either backward follows either
// forward.

/// Whether this build has the cuDNN path.
bool attention_cudnn_built();
/// Turns the cuDNN path on (the default) or off (the own kernels always);
/// AUTODDL_ATTENTION=own in the environment starts a program with it off.
void attention_use_cudnn(bool enable);
bool attention_cudnn_enabled();
/// cudnnGetVersion() of the library in use (0: none).
int64_t attention_cudnn_version();
/// Whether a call with these arguments runs through cuDNN (plans the shape
/// on first ask; enqueues nothing); for tests, benchmarks and run reports.
bool attention_forward_uses_cudnn(const AttentionViews &in, int64_t B,
                                  int64_t T, int64_t H, int64_t G, int64_t D,
                                  bool causal);
bool attention_backward_uses_cudnn(const AttentionGradViews &grad,
                                   const AttentionViews &in, int64_t B,
                                   int64_t T, int64_t H, int64_t G, int64_t D,
                                   bool causal);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_ATTENTION_H
