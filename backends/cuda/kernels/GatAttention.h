// GATConv's additive attention on the GPU: head_dot (the per-node terms a·Wh
// of each head) and gat_aggregate (per head the softmax over each row's
// stored entries of LeakyReLU(s_src[j] + s_dst[i]) and the weighted sum of
// the sources' rows). The names and arguments are those of
// backends/cpu/kernels/GatAttention.h with device act_t pointers (parameter
// gradients fp32) and a device Csr.
//
// A first version on CUDA cores (no tensor cores, not the W8 kernels of
// Sparse.h): one warp per destination row, fp32 math; the backward recomputes
// the softmax from s_dst and s_src (no nnz x heads weights are kept) and
// scatters the sources' gradients with fp32 atomics into the Csr's scratch,
// added to dx / ds_src at the end.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_GATATTENTION_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_GATATTENTION_H

#include "backends/cuda/Runtime.h"
#include "backends/cuda/kernels/Sparse.h"

#include <cstdint>

namespace autoddl::rt {

/// s[N,H] = per head h, dot(x[n, h*C:(h+1)*C], att[h,:]).
void head_dot_forward(act_t *s, const act_t *x, const act_t *att, int64_t N,
                      int64_t H, int64_t C);

/// dx[N,H*C] += ds[n,h] att[h,:]; datt[H,C] += sum_n ds[n,h] x[n,h,:].
void head_dot_backward(act_t *dx, float *datt, const act_t *ds, const act_t *x,
                       const act_t *att, int64_t N, int64_t H, int64_t C);

/// out[N,H*C]: row i, head h = sum over row i's entries j of alpha_ijh
/// x[j, head h], alpha the softmax over the row of LeakyReLU(s_src[j,h] +
/// s_dst[i,h]); an empty row is 0.
void gat_aggregate_forward(act_t *out, const Csr &adj, const act_t *s_dst,
                           const act_t *s_src, const act_t *x, int64_t H,
                           int64_t C, float slope);

/// The backward of gat_aggregate_forward: ds_dst [N,H], ds_src [M,H] and dx
/// [M,H*C] += their gradients (any may be null).
void gat_aggregate_backward(act_t *ds_dst, act_t *ds_src, act_t *dx,
                            const Csr &adj, const act_t *s_dst,
                            const act_t *s_src, const act_t *x, const act_t *dy,
                            int64_t H, int64_t C, float slope);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_GATATTENTION_H
