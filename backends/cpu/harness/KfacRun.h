//===- KfacRun.h - K-FAC in a generated CPU program ----------------------===//
//
// A program generated from a K-FAC plan (docs/kfac.md "Generated programs")
// lists its K-FAC layers (the linear layers the plan preconditions) and calls
// kfac_curvature_A / _G per micro-batch where the plan placed the items.
// On a refresh step (step % K == 0) that call accumulates the layer's
// factors; at the step's end KfacRun reduces them over every rank holding the
// layer (dp replicas, Chimera's mirrored pipelines), inverts them, and then
// every step preconditions the K-FAC layers' gradients and applies the rule
// (momentum SGD or LAMB) to every parameter. The collectives run in the
// layer table's order on every rank, so no schedule can interleave them.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_CPU_HARNESS_KFACRUN_H
#define AUTODDL_BACKENDS_CPU_HARNESS_KFACRUN_H

#include "backends/common/harness/KfacProgram.h" // KfacLayerSpecOf, KfacProgramOf
#include "backends/cpu/Checkpoint.h"             // CheckpointEntry
#include "backends/cpu/harness/Harness.h"
#include "backends/cpu/kfac/Kfac.h"

#include <map>
#include <string>
#include <vector>

namespace autoddl::rt::harness {

using KfacLayerSpec = KfacLayerSpecOf<Param>;
using KfacProgram = KfacProgramOf<Param>;

class KfacRun : public KfacRunBase<Param, KfacLayer> {
public:
  /// One micro-batch of layer `layer` on a refresh step: its input x
  /// [rows, in] into A (after the forward), its output gradient dy [rows, out]
  /// into G (after the backward); the calls sit where the plan placed the
  /// items (codegen/emit/KfacEmitter.cpp).
  void curvature_A(int layer, const float *x, int64_t rows);
  void curvature_G(int layer, const float *dy, int64_t rows);
  /// The step's end, after the gradients are summed over every rank holding
  /// them: the refresh (on a refresh step), preconditioning and the rule.
  /// `t` = 1, 2, ...
  void step(const std::vector<ParamSpec> &params, int64_t t);
  void info(std::map<std::string, std::string> &m) const;
  /// The damped inverses as optimizer-state checkpoint entries
  /// ("<layer>.kfac_A_inv" [in,in], "<layer>.kfac_G_inv" [out,out]; zeros
  /// where the layer has none), over the inverses themselves; restored()
  /// after a load marks the loaded ones valid.
  void checkpoint_entries(std::vector<CheckpointEntry> &e);
  void restored();
};

extern KfacRun kfac;

/// The calls generated code makes.
inline bool kfac_due() { return kfac.due(); }
inline void kfac_curvature_A(int layer, const float *x, int64_t rows) {
  kfac.curvature_A(layer, x, rows);
}
inline void kfac_curvature_G(int layer, const float *dy, int64_t rows) {
  kfac.curvature_G(layer, dy, rows);
}

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_CPU_HARNESS_KFACRUN_H
