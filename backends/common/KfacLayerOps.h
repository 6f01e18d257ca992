// The operations on one K-FAC layer that both backends define with one
// signature on their memory (backends/cpu/kfac on host floats,
// backends/cuda/kfac on device pointers) over their KfacLayer: the
// inversions and the unsplit preconditioning; and kfac_refresh, written once
// over them.
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

/// The preconditioned gradient of the whole layer: dW_out = G^-1 dW A^-1
/// (dW [out,in], transpose_weight) or A^-1 dW G^-1 (dW [in,out]); db_out =
/// G^-1 db (both bias pointers null: no bias; db_out may not alias db).
/// Without inverses (a layer not yet refreshed successfully) the gradient is
/// copied unchanged. dW_out may alias dW on the GPU where the layer has
/// inverses (each sandwich's first GEMM reads dW, its second writes dW_out),
/// never on the CPU. Each backend's kfac_precondition_split does the same for
/// a layer split over tensor parallelism.
void kfac_precondition(float *dW_out, const float *dW, float *db_out,
                       const float *db, const KfacLayer &layer,
                       bool transpose_weight);

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
  kfac_zero_factors(l);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_KFACLAYEROPS_H
