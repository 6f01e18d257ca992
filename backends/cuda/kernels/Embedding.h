// Embedding lookups and position encodings on the GPU: embedding, positional
// (learned), rotary (RoPE). Tables are act_t working copies; their gradients
// are fp32 (atomicAdd scatter). Conventions as
// backends/cpu/kernels/Embedding.h.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_EMBEDDING_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_EMBEDDING_H

#include "backends/cuda/Runtime.h"

namespace autoddl::rt {

/// out[N,C] = table[ids[n] - v0] for ids in [v0, v0 + Vl), else 0; table is
/// [Vl,C] (whole, or the vocab-split rows [v0, v0 + Vl)).
void embedding_forward(act_t *out, const int32_t *ids, const act_t *table,
                       int64_t N, int64_t C, int64_t v0, int64_t Vl);
/// dtable[Vl,C] (fp32) += scatter of dout[N,C] by ids (rows outside skipped).
void embedding_backward(float *dtable, const act_t *dout, const int32_t *ids,
                        int64_t N, int64_t C, int64_t v0, int64_t Vl);

/// out[B,T,C] = x[B,T,C] + table[t0 + t, :].
void positional_forward(act_t *out, const act_t *x, const act_t *table,
                        int64_t B, int64_t T, int64_t C, int64_t t0);
/// dx[B,T,C] += dout; dtable[t0 + t, :] (fp32) += sum over b of dout[b,t,:].
void positional_backward(act_t *dx, float *dtable, const act_t *dout, int64_t B,
                         int64_t T, int64_t C, int64_t t0);

/// out[B,T,H*D] = RoPE(x) per head on the pairs (i, i + D/2) (Hugging Face
/// rotate_half), at absolute position t0 + t; angles pos * theta^(-2i/D) are
/// formed in double as on the CPU.
void rotary_forward(act_t *out, const act_t *x, int64_t B, int64_t T, int64_t H,
                    int64_t D, double theta, int64_t t0);
/// dx[B,T,H*D] += R^T dout.
void rotary_backward(act_t *dx, const act_t *dout, int64_t B, int64_t T,
                     int64_t H, int64_t D, double theta, int64_t t0);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_EMBEDDING_H
