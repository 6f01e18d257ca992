// One K-FAC refresh of a layer, written once over either backend's KfacLayer
// and its factor functions. Included at the end of backends/cpu/kfac/Kfac.h
// and backends/cuda/kfac/Kfac.h, after the declarations it calls (their
// arguments are plain pointers: argument-dependent lookup would not find
// them at the point of use).
#ifndef AUTODDL_BACKENDS_COMMON_KFACREFRESH_H
#define AUTODDL_BACKENDS_COMMON_KFACREFRESH_H

#include "backends/common/KfacRules.h"

namespace autoddl::rt {

/// A refresh of one layer whose factors are complete (accumulated over the
/// step's micro-batches and reduced), either backend's KfacLayer: pi-corrected
/// damping from their traces, both inverses by the fallback policy (counted
/// in stats), then the factors zeroed for the next refresh (PipeFisher: no
/// running average). The backend's kfac_set_damping, kfac_invert_factor and
/// kfac_zero_factors do the work: each backend's kfac/Kfac.h declares them,
/// then includes this header.
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

#endif // AUTODDL_BACKENDS_COMMON_KFACREFRESH_H
