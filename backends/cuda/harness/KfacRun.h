//===- KfacRun.h - K-FAC in a generated CUDA program ---------------------===//
//
// The CUDA twin of backends/cpu/harness/KfacRun.h over the device K-FAC of
// backends/cuda/kfac (docs/kfac.md "Generated programs"): the program lists
// its K-FAC layers and calls kfac_curvature_A / _G per micro-batch where the
// plan placed the items, on the layers' act_t buffers. On a refresh step
// (step % K == 0) those calls accumulate the factors (cuBLASLt, fp32
// accumulation); at the step's end KfacRun reduces them over every rank
// holding the layer (NCCL: dp replicas, Chimera's mirrored pipelines) and
// queues their inversions (cuSOLVER Cholesky) on a side stream, which runs
// beside the next steps; at the start of step s + K the inverses are
// installed (the fp64 retry, else the previous inverse, decided then and
// counted in metrics). Until the first install the rule gets the raw
// gradient. Every step preconditions the K-FAC layers' gradients and applies
// the rule (momentum SGD or LAMB) to every parameter. The collectives run in
// the layer table's order on every rank.
//
// A refresh step's forward and backward run eagerly, outside the step graph
// (the curvature GEMMs are there only on those steps, and the gathered
// factors' workspaces may grow); the other steps replay it. The K-FAC step
// itself (reductions, the inversions' launch, preconditioning, the rule) runs
// after the graph, as every optimizer step does.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_CUDA_HARNESS_KFACRUN_H
#define AUTODDL_BACKENDS_CUDA_HARNESS_KFACRUN_H

#include "backends/common/harness/KfacProgram.h" // KfacLayerSpecOf, KfacProgramOf
#include "backends/cpu/Checkpoint.h"             // CheckpointEntry
#include "backends/cuda/harness/Harness.h"
#include "backends/cuda/kfac/Kfac.h"

#include <map>
#include <string>
#include <vector>

namespace autoddl::rt::harness {

using KfacLayerSpec = KfacLayerSpecOf<Param>;
using KfacProgram = KfacProgramOf<Param>;

class KfacRun : public KfacRunBase<Param, KfacLayer> {
public:
  /// One micro-batch of layer `layer` on a refresh step: its input x
  /// [rows, in] (device, act_t) into A, its output gradient dy [rows, out]
  /// into G (codegen/emit/KfacEmitter.cpp places the calls).
  void curvature_A(int layer, const act_t *x, int64_t rows) {
    curvature(layer, x, rows, false);
  }
  void curvature_G(int layer, const act_t *dy, int64_t rows) {
    curvature(layer, dy, rows, true);
  }
  /// The base's setup; nothing pending or launched.
  void setup(const KfacProgram &p, const Options &o, const ProgramSpec &s) {
    KfacRunBase::setup(p, o, s);
    pending_.assign(specs_.size(), false);
    launched_.clear();
  }
  /// Before the step's schedule: at step s + K of a layer (K its own), s a
  /// refresh step, the inverses of that refresh are installed (before this
  /// step's preconditioning); then which layers accumulate factors.
  void begin_step(int64_t step);
  /// The step's end, after the gradients are summed over every rank holding
  /// them: the refresh (on a refresh step), preconditioning and the rule.
  void step(const std::vector<ParamSpec> &params, int64_t t);
  void info(std::map<std::string, std::string> &m) const;
  /// The damped inverses as optimizer-state checkpoint entries
  /// ("<layer>.kfac_A_inv" [in,in], "<layer>.kfac_G_inv" [out,out], and
  /// the refresh's not yet installed ones "<layer>.kfac_A_inv_pending",
  /// "<layer>.kfac_G_inv_pending"; zeros where the layer has none), over
  /// host copies that copy_state fills (to_host, after the pending work is
  /// finished) or reads back into the device inverses.
  void checkpoint_entries(std::vector<CheckpointEntry> &e);
  void copy_state(bool to_host);
  /// Device memory back before the CUDA context goes.
  void release();

private:
  // One factor's curvature of a micro-batch: A from the layer's input (its
  // rows counted once), G (g_side) from its output gradient.
  void curvature(int layer, const act_t *v, int64_t rows, bool g_side);
  /// Waits for a launched refresh, decides its fp64 retries, keeps its
  /// outcomes and zeroes its factors (a no-op when none is launched).
  void resolve();
  /// The layers at these table indices (a launch's order).
  std::vector<KfacLayer *> layers_of(const std::vector<size_t> &index);
  /// The inverses of the layers whose install is due at `step`.
  void install(int64_t step);

  // per layer: A_inv, G_inv, the pending A and G inverses
  std::vector<std::vector<float>> host_inv_;
  DeviceBuffer<float> dw_, db_; // a preconditioned gradient
  // Per layer: a refresh launched or loaded and not installed yet, with its
  // outcomes (per layer: A, G) once resolved; the layers of the launch not
  // resolved yet, in its order.
  std::vector<bool> pending_;
  std::vector<size_t> launched_;
  int launch_mark_ = -1; // the trace's anchor of the launched refresh
  // The trace's thread of the side stream (0 compute, 1 communication).
  static constexpr int kSideStreamTid = 2;
  std::vector<KfacInverseOutcome> outcomes_;
};

extern KfacRun kfac;

/// The calls generated code makes.
inline bool kfac_due() { return kfac.due(); }
inline void kfac_curvature_A(int layer, const act_t *x, int64_t rows) {
  kfac.curvature_A(layer, x, rows);
}
inline void kfac_curvature_G(int layer, const act_t *dy, int64_t rows) {
  kfac.curvature_G(layer, dy, rows);
}

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_CUDA_HARNESS_KFACRUN_H
