// The widest linear K-FAC preconditions, in its own header (no exceptions, no
// other includes) so the planner, built with -fno-exceptions, prices by the
// same constant the runtime (KfacRules.h) applies.
#ifndef AUTODDL_BACKENDS_COMMON_KFACWIDTH_H
#define AUTODDL_BACKENDS_COMMON_KFACWIDTH_H

#include <cstdint>

namespace autoddl::rt {

/// A linear whose unsplit input or output dimension exceeds this stays
/// first-order: its d x d fp32 factor and the d^3 inversion fit neither a
/// bubble nor, usually, the memory (ASDL falls back to a diagonal factor past
/// 10,000; pipelines.md §5.1).
inline constexpr int64_t kKfacMaxFactorDim = 8192;

} // namespace autoddl::rt

#endif
