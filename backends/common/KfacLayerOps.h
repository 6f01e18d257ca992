// The operations on one K-FAC layer that both backends define with one
// signature on their memory (backends/cpu/kfac on host floats,
// backends/cuda/kfac on device pointers) over their KfacLayer: the
// inversions; and kfac_refresh, the unsplit preconditioning and the
// preconditioning's paths and GEMM orders, written once over them.
#ifndef AUTODDL_BACKENDS_COMMON_KFACLAYEROPS_H
#define AUTODDL_BACKENDS_COMMON_KFACLAYEROPS_H

#include "backends/common/KfacRules.h"

#include <cstdint>

namespace autoddl::rt {

struct KfacLayer; // the backend's: factors, inverses, damping

/// inv[d,d] = (F + diag I)^-1 by Cholesky in fp32 (CPU: LAPACK spotrf +
/// spotri; CUDA: cuSOLVER potrf + potri, the upper triangle mirrored,
/// synchronous: it reads potrf's info); false, inv unspecified, when
/// F + diag I is not positive definite (or not finite).
bool kfac_cholesky_inverse(float *inv, const float *F, int64_t d, double diag);
/// The same computed in fp64 and rounded to fp32.
bool kfac_cholesky_inverse_fp64(float *inv, const float *F, int64_t d,
                                double diag);
/// The fallback policy of KfacRules.h: fp32, else fp64, else inv untouched
/// (the previous inverse, or none).
KfacInverseOutcome kfac_invert_factor(float *inv, const float *F, int64_t d,
                                      double diag, bool has_previous);
/// Sets layer.damping from the factors' traces (docs/kfac.md "Damping"; CUDA:
/// read back, synchronous): kfac_refresh's first step, apart for callers that
/// trace each inverse.
void kfac_set_damping(KfacLayer &layer, double damping);
/// The factors zeroed (CUDA: on the compute stream): kfac_refresh's last
/// step.
void kfac_zero_factors(KfacLayer &layer);
/// The inverses in use (A_inv, G_inv) have changed (a refresh, an install,
/// a checkpoint load): what the backend derives from them follows, so the
/// next preconditioning reads the new ones and until then the old ones
/// (CUDA: their bf16 copies for bf16 preconditioning, cast on the compute
/// stream; CPU: nothing).
void kfac_inverses_installed(KfacLayer &layer);

/// The preconditioned gradient of the whole layer: dW_out = G^-1 dW A^-1
/// (dW [out,in], transpose_weight) or A^-1 dW G^-1 (dW [in,out]); db_out =
/// G^-1 db (both bias pointers null: no bias; db_out may not alias db).
/// Without inverses (a layer not yet refreshed successfully) the gradient is
/// copied unchanged. dW_out may alias dW on the GPU where the layer has
/// inverses (each sandwich's first GEMM reads dW, its second writes dW_out),
/// never on the CPU. Each backend's kfac_precondition_split does the same for
/// a layer split over tensor parallelism; this is it unsplit, over no group
/// (the backend's KfacLayer::no_group()).
template <class Layer>
void kfac_precondition(float *dW_out, const float *dW, float *db_out,
                       const float *db, const Layer &layer,
                       bool transpose_weight) {
  kfac_precondition_split(dW_out, dW, db_out, db, layer, transpose_weight,
                          KfacSplit::None, Layer::no_group());
}

/// kfac_precondition_split written once over the backend's memory and
/// collectives. `ops` supplies:
///   int ranks(), rank(): the tp group's size and this rank's place in it;
///   inverse(layer, g): the layer's A^-1 (g false) or G^-1 [d,d] as the
///     GEMMs read them (CUDA's bf16 preconditioning: their bf16 copies);
///   gemm(M, N, K, A, lda, B, ldb, C, ldc): row-major C[M,N] = A[M,K] B[K,N],
///     one operand an inverse, C the output or the intermediate;
///   scratch(n): room for n elements of a sandwich's intermediate (of the
///     inverses' element type);
///   copy(dst, src, n): n floats;
///   const float *gather(shard, R, C, rows): the whole gradient from this
///     rank's [R,C] shard, the shards stacked along the rows (`rows`) or the
///     columns; const float *gather_bias(shard, n): the whole bias from n.
/// Valid until the call returns. Without inverses the shard is copied as it
/// is; unsplit (or a group of one rank) the shard is the whole gradient;
/// split, the whole gradient is gathered first (a column-parallel layer's
/// bias too) and this rank's block [o0, o0+Ol) x [k0, k0+Kl) computed.
template <class Ops, class Layer>
void kfac_precondition_with(Ops &ops, float *dW_out, const float *dW_shard,
                            float *db_out, const float *db_shard,
                            const Layer &l, bool transpose_weight,
                            KfacSplit split) {
  const int p = ops.ranks();
  const KfacBlock b =
      kfac_split_block(l.in, l.out, split, p, p == 1 ? 0 : ops.rank());
  if (!l.has_inverse()) { // first-order
    ops.copy(dW_out, dW_shard, b.Ol * b.Kl);
    if (db_out)
      ops.copy(db_out, db_shard, b.Ol);
    return;
  }
  const float *dW = dW_shard, *db = db_shard;
  if (p > 1 && split != KfacSplit::None) {
    // Dim 0 of [out,in] for Out; Conv1D's [in,out] the other way round.
    const bool rows = (split == KfacSplit::Out) == transpose_weight;
    dW = ops.gather(dW_shard, transpose_weight ? b.Ol : b.Kl,
                    transpose_weight ? b.Kl : b.Ol, rows);
    if (db_out && split == KfacSplit::Out) // a column-parallel bias is split
      db = ops.gather_bias(db_shard, b.Ol);
  }
  const auto *Ai = ops.inverse(l, false), *Gi = ops.inverse(l, true);
  using Inverse = decltype(Ai);
  // The sandwiches out[Rn,Cn] = L[r0:r0+Rn, :] M[nL,nR] R[:, c0:c0+Cn] for
  // symmetric L, R, each in the cheaper of its two orders.
  const auto sandwich = [&ops](float *out, Inverse L, int64_t nL, int64_t r0,
                               int64_t Rn, const float *M, int64_t nR,
                               Inverse R, int64_t c0, int64_t Cn) {
    const double leftFirst = double(Rn) * nL * nR + double(Rn) * nR * Cn;
    const double rightFirst = double(nL) * nR * Cn + double(Rn) * nL * Cn;
    if (leftFirst <= rightFirst) { // (L[rows,:] M) R[:,cols]
      auto *t = ops.scratch(Rn * nR);
      ops.gemm(Rn, nR, nL, L + r0 * nL, nL, M, nR, t, nR);
      ops.gemm(Rn, Cn, nR, t, nR, R + c0, nR, out, Cn);
    } else { // L[rows,:] (M R[:,cols])
      auto *t = ops.scratch(nL * Cn);
      ops.gemm(nL, Cn, nR, M, nR, R + c0, nR, t, Cn);
      ops.gemm(Rn, Cn, nL, L + r0 * nL, nL, t, Cn, out, Cn);
    }
  };
  if (transpose_weight) // [out,in]: G^-1 dW A^-1
    sandwich(dW_out, Gi, l.out, b.o0, b.Ol, dW, l.in, Ai, b.k0, b.Kl);
  else // [in,out]: A^-1 dW G^-1
    sandwich(dW_out, Ai, l.in, b.k0, b.Kl, dW, l.out, Gi, b.o0, b.Ol);
  if (db_out) // db_out[Ol] = G^-1[o0:o0+Ol, :] db
    ops.gemm(b.Ol, 1, l.out, Gi + b.o0 * l.out, l.out, db, 1, db_out, 1);
}

/// A refresh of one layer whose factors are complete (accumulated over the
/// step's micro-batches and reduced): pi-corrected damping from their traces,
/// both inverses by the fallback policy (counted in stats), then the factors
/// zeroed for the next refresh (PipeFisher: no running average). A template
/// only because KfacLayer is the backend's.
template <class Layer>
void kfac_refresh(Layer &l, const KfacConfig &c, KfacStats &stats) {
  kfac_set_damping(l, c.damping);
  const KfacInverseOutcome oa = kfac_invert_factor(
      l.A_inv.data(), l.A.data(), l.in, l.damping.a, l.a_valid);
  const KfacInverseOutcome og = kfac_invert_factor(
      l.G_inv.data(), l.G.data(), l.out, l.damping.g, l.g_valid);
  kfac_record_refresh(oa, og, l.a_valid, l.g_valid, stats);
  kfac_inverses_installed(l);
  kfac_zero_factors(l);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_KFACLAYEROPS_H
