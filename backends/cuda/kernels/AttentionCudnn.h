// The cuDNN path of the GPU attention (Attention.h): cuDNN's fused flash
// attention, forward and backward, reached through its graph API (the C
// backend API of cudnn_graph.h; no cudnn-frontend). Internal to Attention.cu,
// which calls it first and runs its own kernels where it answers false.
//
// Built in where the build found libcudnn (AUTODDL_HAVE_CUDNN, set by
// KernelSources.cmake and StandaloneRuntime.cmake) and only for bf16 act_t:
// elsewhere every function answers false. cuDNN saves the same log-sum-exp as
// the own forward (Stats [B,H,T,1] fp32, natural log, of the scaled and masked
// scores) in the same layout as lse[B,H,T], so either backward runs after
// either forward.
//
// One operation graph a (direction, shape, strides, mask) is built, planned
// (heuristics mode A, then the fallback list; the first engine config whose
// execution plan finalizes) and cached on first use with its answer: a shape
// cuDNN rejects is asked once and then always runs the own kernels.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_ATTENTIONCUDNN_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_ATTENTIONCUDNN_H

#include "backends/cuda/kernels/Attention.h"

namespace autoddl::rt::cudnn_attention {

/// Runs the forward through cuDNN and returns true, or returns false (nothing
/// enqueued) where this build has no cuDNN, attention_use_cudnn(false) is in
/// force, the pointers or strides do not suit it, or cuDNN rejects the shape.
bool forward(act_t *out, float *lse, const AttentionViews &in, int64_t B,
             int64_t T, int64_t H, int64_t G, int64_t D, bool causal);

/// The same for the backward (attention_backward's contract: += unless
/// !accumulate; a null gradient is left untouched).
bool backward(const AttentionGradViews &grad, const act_t *dout,
              const act_t *out, const float *lse, const AttentionViews &in,
              int64_t B, int64_t T, int64_t H, int64_t G, int64_t D,
              bool causal, bool accumulate);

/// Whether forward()/backward() would run these arguments through cuDNN
/// (plans them on first ask; enqueues nothing).
bool takes_forward(const AttentionViews &in, int64_t B, int64_t T, int64_t H,
                   int64_t G, int64_t D, bool causal);
bool takes_backward(const AttentionGradViews &grad, const AttentionViews &in,
                    int64_t B, int64_t T, int64_t H, int64_t G, int64_t D,
                    bool causal);

/// cudnnGetVersion() of the library the program runs with; 0 without cuDNN.
int64_t version();

} // namespace autoddl::rt::cudnn_attention

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_ATTENTIONCUDNN_H
